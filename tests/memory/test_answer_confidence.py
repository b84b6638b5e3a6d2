"""The confidence of an answer from memory as a whole: search_confidence in
SQL, the search, pack and recall_context MCP tools (the answer after the
rows), the relevance floor as one rule, and UserPromptSubmit recall by it.
scsql bench confidence measures it on answerable and unanswerable questions."""

from __future__ import annotations

import json
import uuid

import pytest

from scsql.api import Api
from scsql.core import errors
from scsql.core.errors import ScsqlError
from scsql.hooks import handlers
from scsql.hooks.handlers import handle

from ..helpers import run_client

DOCS = {
    "docs/zookeeper.md": "The zookeeper quorum size is five: three lost a quorum during the March outage.",
    "docs/release.md": "The release checklist: bump the version, tag it, run make publish-wheels.",
    "docs/ci.md": "CI caches the pip downloads in GitHub Actions; the cache key is the hash of pyproject.toml.",
}
ANSWERABLE = "why is the zookeeper quorum size five?"
UNANSWERABLE = "which kubernetes helm chart deploys the release?"  # memory holds the release, not this


def _index(agent, docs=DOCS):
    with agent.transaction() as conn:
        for path, text in docs.items():
            conn.execute("select * from scsql.index_text(%s, %s)", (path, text))


def _confidence(agent, query, **kw):
    extra = "".join(f", p_{k} => %s" for k in kw)
    with agent.transaction() as conn:
        return conn.execute(f"select * from scsql.search_confidence(%s{extra})", (query, *kw.values())).fetchone()


@pytest.fixture
def dev(scsql_db):
    agent = scsql_db.agent("conf", scsql_db.project())
    _index(agent)
    return agent


def test_search_confidence_separates_answerable_from_unanswerable(dev):
    yes, no = _confidence(dev, ANSWERABLE), _confidence(dev, UNANSWERABLE)
    assert yes["found"] and yes["level"] in ("high", "medium") and yes["hits"] >= 1
    assert 0 <= no["confidence"] < yes["confidence"] <= 1
    assert not no["found"] and no["level"] == "none" and "below the relevance floor" in no["reason"]
    with dev.transaction() as conn:
        floor = conn.execute("select scsql_caller.relevance_floor() as f").fetchone()["f"]
    assert no["confidence"] < floor <= yes["confidence"]
    # The evidence: coverage of the query's terms, margin; no agreement without embeddings.
    assert yes["coverage"] > no["coverage"] and yes["agreement"] is None and 0 <= yes["margin"] <= 1


def test_nothing_at_all_is_not_found_with_its_reason(scsql_db, dev):
    empty = scsql_db.agent("conf_empty", scsql_db.project())
    r = _confidence(empty, ANSWERABLE)
    assert (r["found"], r["confidence"], r["level"], r["hits"]) == (False, 0, "none", 0)
    assert r["reason"] == "nothing in memory holds a word of the query"
    assert _confidence(dev, "the and of")["reason"] == "the query holds only stop words or punctuation"
    api = Api(empty)
    rows = api.call("recall_context")
    assert api.answer("recall_context", rows)["found"] is False
    api = Api(dev)
    with dev.transaction() as conn:
        conn.execute("select scsql.remember('deploy.target', 'production runs on the kestrel cluster')")
    rows = api.call("recall_context")
    assert api.answer("recall_context", rows) | {"reason": None} == {
        "found": True, "confidence": 1.0, "level": "high", "reason": None, "hits": len(rows),
        "coverage": None, "agreement": None, "margin": None}


@pytest.mark.parametrize("query, k, code", [
    (None, 10, "SC205"), ("", 10, "SC205"), ("   ", 10, "SC205"), ("x" * 2001, 10, "SC205"),
    ("zookeeper", 0, "SC209"), ("zookeeper", 201, "SC209"), ("zookeeper", None, "SC209"),
])
def test_bad_input_raises_search_codes(dev, query, k, code):
    with pytest.raises(ScsqlError) as err:
        _confidence(dev, query, k=k)
    assert err.value.code == code


def test_answer_confidence_refuses_hits_that_do_not_line_up(dev):
    for args in ((["a", "b"], [1.0], [1, 2], [None, None]), (None, [], [], []),
                 (["a"] * 201, [1.0] * 201, [1] * 201, [None] * 201)):
        with pytest.raises(ScsqlError) as err, dev.transaction() as conn:
            conn.execute("select * from scsql_caller.answer_confidence('a', %s::text[], %s::float8[], "
                         "%s::integer[], %s::integer[])", args)
        assert err.value.code == errors.CONFIDENCE_HITS_INVALID
    for query in (None, "x" * 2001):  # the query weighed: as long as search takes
        for sql_ in ("select * from scsql_caller.answer_confidence(%s, '{}', '{}', '{}', '{}')",
                     "select scsql_caller.hit_coverage(%s, '{}')"):
            with pytest.raises(ScsqlError) as err, dev.transaction() as conn:
                conn.execute(sql_, (query,))
            assert err.value.code == errors.CONFIDENCE_QUERY_INVALID


def test_another_projects_rows_change_nothing_of_the_confidence(scsql_db, dev):
    """An agent of another project learns nothing from the confidence about
    rows it may not read: its answer is the same with them and without them."""
    other = scsql_db.agent("conf_other", scsql_db.project())
    _index(other, {"docs/notes.md": "The zookeeper ensemble runs on three hosts."})
    probe = "zookeeper quorum size five march outage"
    before = _confidence(other, probe)
    secret = scsql_db.agent("conf_secret", scsql_db.project())
    _index(secret, {f"docs/s{i}.md": "zookeeper quorum size five march outage " * 3 for i in range(5)})
    after = _confidence(other, probe)
    assert after == before and not after["found"]
    assert _confidence(secret, probe)["found"]  # the rows do match, for the project that may read them


def test_the_floor_is_one_rule_the_hook_reads(dev):
    """UserPromptSubmit recall applies the database's relevance floor, not a
    constant of its own."""
    assert not hasattr(handlers, "RECALL_FLOOR")
    with dev.transaction() as conn:
        levels = conn.execute("select scsql_caller.confidence_levels() as l").fetchone()["l"]
    assert dev.rules().relevance_floor == levels["low"] and levels["low"] < levels["medium"] < levels["high"] <= 1


def test_a_past_question_memory_only_touches_is_told_nothing(dev):
    """A prompt about the past whose words memory holds only in part (the
    zookeeper quorum, not the kafka partitions it asks about) passes no
    floor: the model is told memory has nothing, instead of getting a hit
    that would let it bluff."""
    sid = uuid.uuid4().hex
    handle(dev, {"hook_event_name": "SessionStart", "session_id": sid, "transcript_path": "/nonexistent.jsonl",
                 "cwd": "/tmp", "permission_mode": "default", "scsql_event_id": uuid.uuid4().hex,
                 "scsql_received_at": "2026-11-26T20:00:00Z", "source": "startup"})

    def prompt(text):
        return handle(dev, {"hook_event_name": "UserPromptSubmit", "session_id": sid,
                            "transcript_path": "/nonexistent.jsonl", "cwd": "/tmp", "permission_mode": "default",
                            "scsql_event_id": uuid.uuid4().hex, "scsql_received_at": "2026-11-26T20:00:00Z",
                            "prompt": text}).output["hookSpecificOutput"]["additionalContext"]

    assert prompt("what did we decide about the kafka partition count and retention for the zookeeper "
                  "quorum?") == handlers.NOTHING_ON_THIS
    assert "docs/zookeeper.md" in prompt("why did we pick the zookeeper quorum size five?")


def test_the_mcp_tools_add_the_answers_confidence_after_the_rows(scsql_db, dev):
    async def session(client):
        out = {}
        for name, args in (("yes", {"query": ANSWERABLE}), ("no", {"query": UNANSWERABLE}),
                           ("pack", {"intent": ANSWERABLE, "budget": 400}), ("recall", {})):
            tool = {"pack": "pack", "recall": "recall_context"}.get(name, "search")
            r = await client.call_tool(tool, args)
            assert not r.is_error, r.content[0].text
            out[name] = [json.loads(c.text) for c in r.content]
        out["bad"] = await client.call_tool("search", {"query": "zookeeper", "k": 0})
        return out

    with dev.transaction() as conn:
        conn.execute("select scsql.remember('zk.size', 'the zookeeper quorum is five nodes')")
    out = run_client(scsql_db, dev.name, session)
    rows, answer = out["yes"]
    assert "docs/zookeeper.md" in [r["source_path"] for r in rows]
    assert answer["answer"]["found"] and answer["answer"]["level"] in ("high", "medium")
    rows, answer = out["no"]
    assert answer["answer"]["found"] is False and answer["answer"]["level"] == "none"
    assert answer["answer"]["confidence"] == _confidence(dev, UNANSWERABLE)["confidence"]
    assert out["pack"][1]["answer"]["found"] and out["recall"][1]["answer"]["level"] == "high"
    assert out["bad"].is_error and "SC209" in out["bad"].content[0].text and len(out["bad"].content) == 1


def test_the_floor_meets_its_goals_on_the_labelled_set(scsql_db):
    """scsql bench confidence's figures, BM25 only: of the unanswerable
    questions (tests/data/unanswerable.json) at least 0.8 are flagged not
    found, of the answerable ones (tests/data/recall_by_time.json) at most
    0.1 wrongly so. Run the bench to see them."""
    import datetime as dt
    from types import SimpleNamespace

    from scsql.bench import confidence

    doc, (calibration, _held_out) = confidence.load(confidence.default_data())
    answerable, unanswerable = calibration.answerable, calibration.unanswerable
    assert len(unanswerable) >= 40 and not set(unanswerable) & set(answerable)
    s = SimpleNamespace(agent=scsql_db.agent("conf_bench", scsql_db.project()))
    confidence.index_sessions(s, doc)
    now = dt.datetime.fromisoformat(doc["now"].replace("Z", "+00:00"))
    flagged = sum(not confidence.weigh(s, q, now, None)["found"] for q in unanswerable) / len(unanswerable)
    wrong = sum(not confidence.weigh(s, q, now, None)["found"] for q in answerable) / len(answerable)
    assert flagged >= 0.8 and wrong <= 0.1, (flagged, wrong)


def test_the_held_out_set_is_apart_from_the_calibration_set():
    """tests/data/unanswerable_heldout.json: at least 60 unanswerable and 60
    answerable questions, none of them in the calibration set, each
    answerable one answered by a turn of the corpus (its answer's words)."""
    import json

    from scsql.bench import confidence

    doc, (calibration, held_out) = confidence.load(confidence.default_data())
    assert (calibration.name, held_out.name) == ("calibration", "held-out")
    assert len(held_out.unanswerable) >= 60 and len(held_out.answerable) >= 60
    assert len(set(held_out.unanswerable)) == len(held_out.unanswerable)
    every = set(held_out.unanswerable) | set(held_out.answerable)
    assert not every & (set(calibration.unanswerable) | set(calibration.answerable))
    turns = [t["assistant"] for s in doc["sessions"] for t in s["turns"]]
    held = json.loads((confidence.default_data() / "unanswerable_heldout.json").read_text())
    for q in held["answerable"]:
        assert sum(q["answer"] in t for t in turns) >= 1, q


def test_the_bench_reports_the_calibration_and_the_held_out_set_apart(scsql_db, capsys):
    """scsql bench confidence prints each set's shares on its own, the
    calibration set first (the floor was chosen on it)."""
    import argparse
    from types import SimpleNamespace

    from scsql.bench import confidence

    ctx = SimpleNamespace(admin_conninfo=lambda: scsql_db.admin)
    assert confidence.run(ctx, argparse.Namespace(data=None, embed=False, verbose=False)) == 0
    out = capsys.readouterr().out
    assert "the floor was chosen on the calibration set" in out
    calibration, held_out = out.index("calibration: 70 answerable"), out.index("held-out: 70 answerable")
    assert calibration < held_out
    assert out.count("unanswerable flagged not found:") == 2 and out.count("answerable wrongly flagged not found:") == 2
