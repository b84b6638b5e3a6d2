"""Supersession, duplicates and conflicts between facts: the detector measured
on a labelled set (tests/data/fact_pairs.jsonl), and remember, recall_context
and resolve_conflict keeping every fact while they refresh, flag and settle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scsql.core.errors import ScsqlError

PAIRS = [json.loads(line) for line in (Path(__file__).parent.parent / "data" / "fact_pairs.jsonl").read_text().splitlines()]
LABELS = ("duplicate", "conflict", "unrelated")


def q(agent, sql, *args):
    with agent.transaction() as conn:
        return conn.execute(sql, args).fetchall()


def remember(agent, key, value, importance=3):
    return q(agent, "select * from scsql.remember(%s, %s, %s)", key, value, importance)[0]


@pytest.fixture
def agent(scsql_db):
    return scsql_db.agent("facts", scsql_db.project())


def _scores(rows: list[tuple[str, str]]) -> dict[str, tuple[float, float]]:
    """Precision and recall of each class that is not 'unrelated'."""
    out = {}
    for label in LABELS[:2]:
        tp = sum(1 for want, got in rows if want == got == label)
        predicted = sum(1 for _, got in rows if got == label)
        actual = sum(1 for want, _ in rows if want == label)
        out[label] = (tp / predicted if predicted else 0.0, tp / actual if actual else 0.0)
    return out


def test_the_labelled_set_is_large_varied_and_balanced():
    assert len(PAIRS) >= 60
    counts = {label: sum(p["label"] == label for p in PAIRS) for label in LABELS}
    assert min(counts.values()) >= 20, counts
    assert {p["split"] for p in PAIRS} == {"tune", "holdout"}
    assert len({(p["a"]["key"], p["b"]["key"], p["b"]["value"]) for p in PAIRS}) == len(PAIRS)


def test_detector_precision_and_recall_on_the_labelled_pairs(scsql_db, capsys):
    """The thresholds of scsql._fact_relation were chosen on the 'tune' pairs;
    the 'holdout' pairs were written before the detector ran on them. Floors:
    a false conflict costs a question in recall_context, a false duplicate
    folds a distinct fact into another (it stays in the history, but is no
    longer in working memory under its own key), so duplicates need the higher
    precision. The floors sit below the measured figures (printed) so that a
    regression fails and a one-pair change does not."""
    got = {}
    with scsql_db.connect() as conn:
        for p in PAIRS:
            got[id(p)] = conn.execute("select scsql._fact_relation(%s, %s, %s, %s) as r",
                                      (p["b"]["key"], p["b"]["value"], p["a"]["key"], p["a"]["value"])).fetchone()["r"]
    report = {}
    for split in ("tune", "holdout", "all"):
        rows = [(p["label"], got[id(p)]) for p in PAIRS if split in ("all", p["split"])]
        report[split] = _scores(rows)
        with capsys.disabled():
            print(f"\nfact detector, {split} ({len(rows)} pairs): " + ", ".join(
                f"{label} precision {pr:.2f} recall {rc:.2f}" for label, (pr, rc) in report[split].items()))
    with capsys.disabled():
        for p in PAIRS:
            if got[id(p)] != p["label"]:
                print(f"  {p['split']}: {p['label']} taken for {got[id(p)]}: {p['a']} / {p['b']}")
    dup, con = report["all"]["duplicate"], report["all"]["conflict"]
    assert dup[0] >= 0.9 and dup[1] >= 0.75, dup
    assert con[0] >= 0.8 and con[1] >= 0.8, con
    hdup, hcon = report["holdout"]["duplicate"], report["holdout"]["conflict"]
    assert hdup[0] >= 0.8 and hcon[0] >= 0.7 and hcon[1] >= 0.7, report["holdout"]


def test_remembering_a_key_again_supersedes_and_keeps_the_old_value_in_history(agent):
    remember(agent, "db.port", "The test database listens on port 5432", 4)
    out = remember(agent, "db.port", "The test database listens on port 5433", 4)
    assert (out["stored"], out["facts"], out["conflicts_with"]) == ("memory", 1, [])
    assert q(agent, "select value from scsql.memory_facts")[0]["value"] == "The test database listens on port 5433"
    hist = q(agent, "select * from scsql.memory_history('db.port')")
    assert [h["op"] for h in hist] == ["supersede", "remember"]
    assert hist[0]["value"] == "The test database listens on port 5433"
    assert hist[1]["value"] == "The test database listens on port 5432"  # the superseded value, kept
    assert hist[0]["old_hash"] == hist[1]["new_hash"] and hist[0]["agent"] == agent.name


def test_a_duplicate_refreshes_the_fact_instead_of_taking_a_slot(agent):
    remember(agent, "ci.provider", "CI runs on GitHub Actions", 2)
    before = q(agent, "select updated_at from scsql.memory_facts")[0]["updated_at"]
    out = remember(agent, "ci", "CI is run on GitHub Actions.", 4)
    assert (out["key"], out["stored"], out["facts"]) == ("ci.provider", "refreshed", 1)
    row = q(agent, "select key, importance, updated_at from scsql.memory_facts")
    assert len(row) == 1 and row[0]["importance"] == 4 and row[0]["updated_at"] > before
    again = remember(agent, "ci.provider", "CI runs on GitHub Actions", 4)
    assert (again["stored"], again["facts"]) == ("refreshed", 1)
    ops = [h["op"] for h in q(agent, "select * from scsql.memory_history('ci.provider')")]
    assert ops == ["refresh", "refresh", "remember"]


def test_a_conflict_is_returned_shown_stale_and_settled_without_losing_either_fact(scsql_db, agent):
    remember(agent, "lint.tool", "Use ruff for linting", 3)
    out = remember(agent, "lint.tool.new", "Use flake8 for linting", 3)
    assert (out["stored"], out["facts"], out["conflicts_with"]) == ("memory", 2, ["lint.tool"])
    stale = [r for r in q(agent, "select * from scsql.recall_context(1500)") if r["section"] == "stale"]
    assert len(stale) == 1 and "lint.tool.new" in stale[0]["content"] and "ruff" in stale[0]["content"]
    settled = q(agent, "select * from scsql.resolve_conflict('lint.tool.new', 'this', 'we moved to flake8')")
    assert [(s["kept"], s["superseded"]) for s in settled] == [(["lint.tool.new"], ["lint.tool"])]
    assert [r["key"] for r in q(agent, "select key from scsql.memory_facts")] == ["lint.tool.new"]
    assert not [r for r in q(agent, "select * from scsql.recall_context(1500)") if r["section"] == "stale"]
    hist = q(agent, "select * from scsql.memory_history('lint.tool')")
    assert hist[0]["op"] == "resolve" and "we moved to flake8" in hist[0]["reason"]
    gone = [h for h in hist if h["op"] == "supersede" and h["target"] == "lint.tool"]
    assert gone
    with scsql_db.connect() as conn:  # kept, with who retired it and why
        kept = conn.execute("select value, reason from scsql.fact_versions where key = 'lint.tool'").fetchall()
    assert [k["value"] for k in kept] == ["Use ruff for linting"] and "settled for lint.tool.new" in kept[0]["reason"]
    with pytest.raises(ScsqlError) as e:
        q(agent, "select * from scsql.resolve_conflict('lint.tool.new', 'this')")
    assert e.value.code == "SC228"  # settled once


def test_a_conflict_is_recorded_once_and_returned_until_settled(scsql_db, agent):
    remember(agent, "line.length", "Maximum line length is 100")
    assert remember(agent, "line_length", "Maximum line length is 120")["conflicts_with"] == ["line.length"]
    assert remember(agent, "line_length", "Maximum line length is 121")["conflicts_with"] == ["line.length"]
    with scsql_db.connect() as conn:
        assert conn.execute("select count(*) as n from scsql.fact_conflicts").fetchone()["n"] == 1
    q(agent, "select * from scsql.resolve_conflict('line_length', 'this')")
    assert remember(agent, "line_length", "Maximum line length is 122")["conflicts_with"] == []


def test_keep_both_and_keep_others(agent):
    remember(agent, "owner.payments", "Alice owns the payments service")
    assert remember(agent, "payments.owner", "Bob owns the payments service")["conflicts_with"] == ["owner.payments"]
    q(agent, "select * from scsql.resolve_conflict('owner.payments', 'both')")
    assert len(q(agent, "select key from scsql.memory_facts")) == 2
    remember(agent, "cache.ttl", "Redis cache entries expire after 300 seconds")
    assert remember(agent, "cache.ttl.seconds", "Redis cache entries expire after 60 seconds")["conflicts_with"] == ["cache.ttl"]
    q(agent, "select * from scsql.resolve_conflict('cache.ttl.seconds', 'others')")
    assert {r["key"] for r in q(agent, "select key from scsql.memory_facts")} == {"owner.payments", "payments.owner", "cache.ttl"}


BAD_INPUT = [
    ("select * from scsql.resolve_conflict(%s, %s)", ("x", "mine"), "SC229"),
    ("select * from scsql.resolve_conflict(%s, %s)", ("x", None), "SC229"),
    ("select * from scsql.resolve_conflict(%s, %s)", ("no.such", "this"), "SC228"),
    ("select * from scsql.resolve_conflict(%s, %s)", ("", "this"), "SC201"),
    ("select * from scsql.resolve_conflict(%s, %s, %s)", ("x", "both", "n" * 1001), "SC230"),
    ("select * from scsql.resolve_conflict(%s, %s, %s)", ("x", "both", "a\x01b"), "SC230"),
    ("select * from scsql.memory_history(%s)", ("",), "SC201"),
    ("select * from scsql.memory_history(%s)", ("x" * 1025,), "SC200"),
    ("select * from scsql.memory_history(%s, %s)", ("x", 0), "SC227"),
    ("select * from scsql.memory_history(%s, %s)", ("x", 1001), "SC227"),
    ("select * from scsql.memory_history(%s, %s)", ("x", None), "SC227"),
]


def test_bad_input_gets_its_code_and_changes_nothing(agent):
    remember(agent, "x", "the fact x")
    for sql, args, code in BAD_INPUT:
        with pytest.raises(ScsqlError) as e:
            q(agent, sql, *args)
        assert e.value.code == code, (sql, args)
    assert [h["op"] for h in q(agent, "select * from scsql.memory_history('x')")] == ["remember"]


def test_remember_compares_only_candidates_and_misses_no_duplicate_or_conflict(scsql_db, agent):
    """remember compares a new fact only with the facts the term index finds
    for its rarest terms (scsql._fact_candidates). Every fact the detector
    calls a duplicate or a conflict of it is among them: checked for every
    fact of the labelled set against working memory holding the others, and
    for keys of one and two terms sharing a common word."""
    for p in PAIRS:
        remember(agent, p["a"]["key"], p["a"]["value"])
    for i in range(12):
        remember(agent, f"svc.{i}", f"service {i} runs on host h{i} behind the shared proxy")
        remember(agent, f"svc{i}", f"service {i} is deployed by the team t{i}")
    news = [p["b"] for p in PAIRS] + [p["a"] for p in PAIRS] + [
        {"key": "svc", "value": "service 3 runs on host h9 behind the shared proxy"},
        {"key": "svc.3.host", "value": "service 3 runs on host h4"},
        {"key": "proxy", "value": "the shared proxy"}, {"key": "svc.7", "value": "the"}]
    with scsql_db.connect() as conn:
        project = conn.execute("select project_id from scsql.memory_facts limit 1").fetchone()["project_id"]
        stored = conn.execute("select count(*) as n from scsql.memory_facts").fetchone()["n"]
        found = {"duplicate": 0, "conflict": 0}
        compared = candidates = 0
        for new in news:
            # The candidates first, on their own: on Citus a query over
            # memory_facts runs on the shards, where _fact_candidates's
            # own query could not.
            cands = {rel: conn.execute("select scsql._fact_candidates(%s, scsql._fact_terms(%s), scsql._fact_terms(%s), %s) c",
                                       (project, new["key"], new["value"], rel)).fetchone()["c"]
                     for rel in ("duplicate", "conflict")}
            rows = conn.execute(
                "with n as (select scsql._fact_terms(%s) kt, scsql._fact_terms(%s) vt) "
                "select r.rel, array_agg(f.key order by f.key) filter (where scsql._fact_relation_terms("
                "  n.kt, n.vt, f.key_terms, f.value_terms) = r.rel) as related, count(*) as compared "
                "from n cross join (values ('duplicate'), ('conflict')) r(rel) "
                "cross join scsql.memory_facts f where f.key <> %s group by r.rel, n.kt, n.vt",
                (new["key"], new["value"], new["key"])).fetchall()
            for r in rows:
                r["candidates"] = cands[r["rel"]]
                missed = set(r["related"] or []) - set(r["candidates"])
                assert not missed, (new, r["rel"], missed)
                found[r["rel"]] += len(r["related"] or [])
                compared += r["compared"]
                candidates += len(r["candidates"])
    assert stored > 50 and found["duplicate"] > 20 and found["conflict"] > 20, (stored, found)
    assert candidates < compared / 5, (candidates, compared)  # not every fact


def test_a_bad_ttl_is_refused_before_anything_is_written(scsql_db, agent):
    """The TTL is checked with the other arguments, before remember writes:
    a refused call leaves nothing behind, not even a used number (identity
    values are not given back by a rollback)."""
    remember(agent, "lint.tool", "Use ruff for linting")
    assert remember(agent, "lint.tool.new", "Use flake8 for linting")["conflicts_with"] == ["lint.tool"]
    for key, value in (("lint.tool", "Use black for linting"), ("lint.tool.v3", "Use pylint for linting")):
        with pytest.raises(ScsqlError) as e:
            q(agent, "select * from scsql.remember(%s, %s, 3, interval '-1 day')", key, value)
        assert e.value.code == "SC241"
    remember(agent, "lint.tool", "Use black for linting")
    assert remember(agent, "lint.tool.v3", "Use pylint for linting")["conflicts_with"]
    with scsql_db.connect() as conn:
        ids = [r["conflict_id"] for r in conn.execute("select conflict_id from scsql.fact_conflicts order by 1")]
        versions = [r["version_id"] for r in conn.execute("select version_id from scsql.fact_versions order by 1")]
    assert ids == list(range(ids[0], ids[0] + len(ids))) and len(ids) > 1, ids
    assert len(versions) == 1
    assert [h["op"] for h in q(agent, "select * from scsql.memory_history('lint.tool.v3')")][-1] == "remember"
