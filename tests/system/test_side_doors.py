"""No agent changes another agent's memory through a side door: forgetting
one's own note takes forgotten text out of the contexts that were taken
from it, and from no other, so another agent's conversation chunk keeps
its context and its vector and is never queued again for someone to
embed. (Rules: tests/coordination/test_rules.py; hard links: tests/memory/test_index.py.)"""

from __future__ import annotations

import json

import pytest

from scsql.memory.embed import DEFAULT_MODEL

# The victim's conversation: turn B is indexed with the end of turn A.
TALK = "# Plan\n\nship the ledger migration on friday after the freeze\n\n# Reply\n\nyes, do that"
TALK_SPANS = [{"start": 1, "end": 3, "anchor": "Plan", "context": True},
              {"start": 5, "end": 7, "anchor": "Reply", "context": True}]


def q(agent, sql: str, *args) -> list[dict]:
    with agent.transaction() as conn:
        return conn.execute(sql, args).fetchall()


@pytest.fixture
def pair(scsql_db):
    project = scsql_db.project()
    return scsql_db, scsql_db.agent("victim", project), scsql_db.agent("attacker", project)


def _embed_everything(scsql_db) -> None:
    """As if a worker had embedded every chunk of every project."""
    with scsql_db.connect() as conn:
        conn.execute("insert into scsql.kb_embeddings (project_id, model_id, chunk_hash, embedding) "
                     "select distinct c.project_id, m.embed_model_id, c.chunk_hash, array_fill(0.1, array[384])::vector "
                     "from scsql.kb_chunks c join scsql.memory_state m using (project_id) on conflict do nothing")
        conn.execute("delete from scsql.kb_embed_queue")


def _chunk(scsql_db, path: str, anchor: str) -> dict:
    with scsql_db.connect() as conn:
        row = conn.execute(
            "select c.chunk_hash, c.context, "
            "exists (select from scsql.kb_embeddings e where e.project_id = c.project_id and e.chunk_hash = c.chunk_hash) as vector "
            "from scsql.kb_chunks c join scsql.kb_sources s using (project_id, source_id) "
            "where s.path = %s and c.anchor = %s", (path, anchor)).fetchone()
        row["queued"] = conn.execute("select count(*) as n from scsql.kb_embed_queue").fetchone()["n"]
    return row


def _context_sources(scsql_db, path: str, anchor: str) -> tuple[list | None, list | None]:
    with scsql_db.connect() as conn:
        row = conn.execute("select c.context_sources, c.context_hashes from scsql.kb_chunks c "
                           "join scsql.kb_sources s using (project_id, source_id) where s.path = %s and c.anchor = %s",
                           (path, anchor)).fetchone()
    return row["context_sources"], row["context_hashes"]


def _claimable(agent) -> list[dict]:
    return q(agent, "select chunk_hash from scsql.embed_claim(%s, 1000)", DEFAULT_MODEL)


@pytest.mark.parametrize("forget", ["forget_source", "forget_chunk"])
def test_forgetting_an_own_note_that_repeats_another_agents_context_leaves_it_alone(pair, forget):
    """The attacker writes a note holding the victim's context lines and
    forgets it: before, every context line standing in the forgotten text
    was removed from every conversation chunk of the project, the chunk's
    vector deleted and the chunk queued again, for the attacker to claim and
    embed. Now the victim's chunk keeps its context, its context's sources
    and its vector, and nothing is queued."""
    scsql_db, victim, attacker = pair
    q(victim, "select * from scsql.index_text('notes/talk.md', %s, p_spans => %s::jsonb)", TALK, json.dumps(TALK_SPANS))
    _embed_everything(scsql_db)
    before = _chunk(scsql_db, "notes/talk.md", "Reply")
    assert "ship the ledger migration on friday" in before["context"] and before["vector"] and before["queued"] == 0

    copy = "# Plan\n\nship the ledger migration on friday after the freeze, said the attacker"
    q(attacker, "select * from scsql.index_text('notes/copy.md', %s)", copy)
    if forget == "forget_source":
        assert q(attacker, "select scsql.forget_source('notes/copy.md') as f")[0]["f"]
    else:
        [h] = q(attacker, "select c.chunk_hash from scsql.kb_chunks c join scsql.kb_sources s using (project_id, source_id) "
                          "where s.path = 'notes/copy.md'")
        assert q(attacker, "select scsql.forget_chunk(%s) as n", h["chunk_hash"])[0]["n"] == 1

    after = _chunk(scsql_db, "notes/talk.md", "Reply")
    assert after == before
    assert _claimable(attacker) == []
    # Where the context came from: turn A of the victim's note, by identity.
    [plan] = q(victim, "select c.source_id, c.chunk_hash from scsql.kb_chunks c join scsql.kb_sources s "
                       "using (project_id, source_id) where s.path = 'notes/talk.md' and c.anchor = 'Plan'")
    assert _context_sources(scsql_db, "notes/talk.md", "Reply") == ([plan["source_id"]], [plan["chunk_hash"]])


def test_a_given_context_comes_only_from_the_writers_own_sources(pair):
    """A transcript part's first turn is given the end of the part before as
    its context. Where that came from is recorded from the writer's own
    sources when it is attached: the attacker's copy of the same lines,
    written first, is not one, so forgetting it changes nothing; forgetting
    the victim's own part before does take the lines out."""
    scsql_db, victim, attacker = pair
    end = "User: should the ledger migration wait for the freeze\nAssistant: yes, ship it on friday after it"
    q(attacker, "select * from scsql.index_text('notes/bait.md', %s)", "notes\n" + end + "\nmore")
    q(victim, "select * from scsql.index_text('notes/part1.md', %s, p_spans => %s::jsonb)",
      "# Turn 1\n\n" + end, json.dumps([{"start": 1, "end": 4, "anchor": "Turn 1", "context": True}]))
    q(victim, "select * from scsql.index_text('notes/part2.md', %s, p_spans => %s::jsonb)",
      "# Turn 2\n\nUser: done?\nAssistant: done.", json.dumps([{"start": 1, "end": 4, "anchor": "Turn 2", "context": end}]))
    _embed_everything(scsql_db)
    with scsql_db.connect() as conn:
        part1 = conn.execute("select source_id from scsql.kb_sources where path = 'notes/part1.md'").fetchone()["source_id"]
    before = _chunk(scsql_db, "notes/part2.md", "Turn 2")
    assert before["context"] == end

    assert q(attacker, "select scsql.forget_source('notes/bait.md') as f")[0]["f"]
    assert _chunk(scsql_db, "notes/part2.md", "Turn 2") == before
    assert _claimable(attacker) == []
    assert _context_sources(scsql_db, "notes/part2.md", "Turn 2")[0] == [part1]

    assert q(victim, "select scsql.forget_source('notes/part1.md') as f")[0]["f"]
    after = _chunk(scsql_db, "notes/part2.md", "Turn 2")
    assert after["context"] is None and _context_sources(scsql_db, "notes/part2.md", "Turn 2") == (None, None)
    assert not after["vector"] and after["queued"] == 1  # its vector is made again, without the forgotten text
