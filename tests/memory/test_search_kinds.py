"""Everything remembered is findable: search returns working-memory facts and
session summaries beside knowledge-base chunks, each labelled with its kind
and naming its author and time; a session's date finds its summary;
get_source shows a whole source or the chunks around a hit, with citations."""

from __future__ import annotations

import json

import pytest

from scsql.core.errors import ScsqlError

from ..helpers import agent_query as q, agent_search as search


def _kestrel(scsql_db, prefix=""):
    """Two agents of one project: A remembered a fact and wrote a session
    summary with a decision, B indexed a file; all of them about kestrel."""
    project = scsql_db.project()
    a = scsql_db.agent(prefix + "writer", project)
    b = scsql_db.agent(prefix + "reader", project)
    q(a, "select scsql.remember('deploy.target', 'production runs on the kestrel cluster', 4)")
    q(a, "select * from scsql.summarize_session(%s)", json.dumps({"decisions": ["stage on kestrel too"]}))
    q(b, "select * from scsql.index_text('docs/ops.md', '# Clusters\n\nkestrel hosts the database.', 'file')")
    return a, b


def test_pack_citations_name_their_author_and_time(scsql_db):
    """Every citation pack returns names the agent that wrote it and when."""
    a, b = _kestrel(scsql_db, "pack_")
    packed = q(b, "select * from scsql.pack('kestrel cluster', 5000)")
    by_kind = {p["kind"]: p for p in packed}
    assert {"fact", "decision", "chunk"} <= set(by_kind), packed
    assert by_kind["fact"]["author"] == a.name and by_kind["decision"]["author"] == a.name
    assert by_kind["chunk"]["author"] == b.name and by_kind["chunk"]["source_path"] == "docs/ops.md"
    with scsql_db.connect() as conn:
        now = conn.execute("select now() as t").fetchone()["t"]
        fact_at = conn.execute("select updated_at from scsql.memory_facts where key = 'deploy.target'").fetchone()["updated_at"]
    assert by_kind["fact"]["written_at"] == fact_at
    assert all(p["author"] and p["written_at"] is not None and p["written_at"] <= now for p in packed), packed


def test_facts_summaries_and_chunks_are_found_labelled_with_kind_author_and_time(scsql_db):
    a, b = _kestrel(scsql_db)
    hits = search(b, "kestrel")
    by_kind = {h["source_kind"]: h for h in hits}
    # The summary's decision is a decision of its own (sql/27_decisions.sql).
    assert set(by_kind) == {"fact", "session_summary", "file", "decision"}
    decision = by_kind["decision"]
    assert decision["source_path"].startswith("decision:") and "stage on kestrel too" in decision["content"]
    assert decision["retrievers"] == ["bm25"] and decision["author"] == a.name
    fact = by_kind["fact"]
    assert fact["source_path"] == "memory:deploy.target" and "kestrel cluster" in fact["content"]
    assert fact["retrievers"] == ["bm25"] and fact["trust"] == "internal"
    assert by_kind["fact"]["author"] == a.name and by_kind["session_summary"]["author"] == a.name
    assert by_kind["file"]["author"] == b.name
    assert all(h["written_at"] is not None for h in hits)
    # Kinds filter each arm.
    assert {h["source_kind"] for h in search(b, "kestrel", kinds=["fact"])} == {"fact"}
    assert {h["source_kind"] for h in search(b, "kestrel", kinds=["file", "session_summary"])} == {
        "file", "session_summary"}
    assert search(b, "kestrel", kinds=["fact"], trust="external") == []
    assert [h["source_kind"] for h in search(b, "kestrel", kinds=["decision"])] == ["decision"]
    # Facts follow their text: a changed fact is found by its new words only.
    q(a, "select scsql.remember('deploy.target', 'production moved to the osprey cluster', 4)")
    assert "fact" not in {h["source_kind"] for h in search(b, "kestrel")}
    assert [h["source_path"] for h in search(b, "osprey")] == ["memory:deploy.target"]


def test_only_current_decisions_are_found(scsql_db):
    a = scsql_db.agent("decider", scsql_db.project())
    old = q(a, "select * from scsql.decide('queue backend', 'use redis streams for the job queue')")[0]
    hits = search(a, "job queue backend", kinds=["decision"])
    assert [h["source_path"] for h in hits] == [f"decision:{old['decision_id']}"]
    new = q(a, "select * from scsql.decide('queue backend', 'use SKIP LOCKED in postgres for the job queue', %s)",
            old["decision_id"])[0]
    hits = search(a, "job queue backend", kinds=["decision"])
    assert [h["source_path"] for h in hits] == [f"decision:{new['decision_id']}"]
    assert "SKIP LOCKED" in hits[0]["content"]


def test_a_sessions_date_finds_its_summary(scsql_db):
    a = scsql_db.agent("dated", scsql_db.project())
    q(a, "select * from scsql.summarize_session(%s)", json.dumps({"done": ["tidied the parser"]}))
    day = q(a, "select to_char(now() at time zone 'UTC', 'YYYY-MM-DD') as d")[0]["d"]
    hits = search(a, day)
    assert hits and {h["source_kind"] for h in hits} == {"session_summary"}
    assert search(a, f"what did we do on {day}")[0]["source_kind"] == "session_summary"


SECTIONS = "".join(f"# Part {i}\n\nparagraph {i} about topic{i} and its details.\n\n" for i in range(1, 7))


def test_get_source_returns_the_whole_source_or_a_window_with_citations(scsql_db):
    a = scsql_db.agent("src", scsql_db.project())
    q(a, "select * from scsql.index_text('docs/parts.md', %s, 'file')", SECTIONS)
    whole = q(a, "select * from scsql.get_source('docs/parts.md')")
    assert [r["seq"] for r in whole] == list(range(1, 7)) or len(whole) == 6
    assert "".join(r["content"] + "\n\n" for r in whole).strip() == SECTIONS.strip()
    assert all(r["author"] == a.name and r["written_at"] is not None and r["source_path"] == "docs/parts.md"
               for r in whole)
    hit = search(a, "topic4")[0]
    around = q(a, "select * from scsql.get_source(%s, 1)", hit["chunk_hash"])
    assert [r["anchor"] for r in around] == ["Part 3", "Part 4", "Part 5"]
    assert [r["focus"] for r in around] == [False, True, False]
    assert len(q(a, "select * from scsql.get_source(%s)", hit["chunk_hash"])) == 5  # default window 2
    q(a, "select scsql.remember('owner', 'parts belong to the docs team')")
    fact = q(a, "select * from scsql.get_source('memory:owner')")
    assert [(r["source_kind"], r["content"], r["author"]) for r in fact] == [
        ("fact", "owner: parts belong to the docs team", a.name)]


@pytest.mark.parametrize("ref, window, code", [
    (None, None, "SC245"), ("  ", None, "SC245"), ("x" * 1025, None, "SC245"),
    ("docs/parts.md", 51, "SC246"), ("docs/parts.md", -1, "SC246"),
    ("docs/none.md", None, "SC247"), ("0" * 64, None, "SC247"), ("memory:nosuch", None, "SC247"),
])
def test_get_source_refuses_bad_input(scsql_db, ref, window, code):
    a = scsql_db.agent("bad", scsql_db.project())
    q(a, "select * from scsql.index_text('docs/parts.md', %s, 'file')", SECTIONS)
    with pytest.raises(ScsqlError) as err:
        q(a, "select * from scsql.get_source(%s, %s)", ref, window)
    assert err.value.code == code


def test_get_source_shows_nothing_row_level_security_hides(scsql_db):
    mine = scsql_db.agent("mine", scsql_db.project())
    theirs = scsql_db.agent("theirs", scsql_db.project())
    q(theirs, "select * from scsql.index_text('notes/secret.md', 'the vault combination is private', 'note')")
    h = q(theirs, "select chunk_hash from scsql.search('vault')")[0]["chunk_hash"]
    for ref in (h, "notes/secret.md"):
        with pytest.raises(ScsqlError) as err:
            q(mine, "select * from scsql.get_source(%s)", ref)
        assert err.value.code == "SC247"
