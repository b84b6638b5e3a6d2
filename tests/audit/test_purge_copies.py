"""A purge reaches the copies of what it removes: a personal detail that a
captured session holds in a prompt and in a failed tool call is also in the
outcome the hooks record of the failure, the learning derived from it, that
learning's knowledge-base chunk, the session's conversation chunk and its
summary. One
purge of the tool call and one of the prompt remove it from every table,
each copy with its own purge record, and both verifiers stay clean. A copy
written by another agent is not the purger's to remove: it stays, named in
quoted_by, until its own author (or an administrator) purges it."""

from __future__ import annotations

import uuid

import psycopg
from psycopg.types.json import Jsonb
import pytest

from scsql.core.errors import PURGE_ALREADY, PURGE_NOT_ALLOWED
from scsql.api import Api
from scsql.hooks import handlers

from tests.audit.test_purge import (admin_purge, both_verifiers_clean, holding, keep_conversation, purge_all,
                                    refused)
from tests.memory.test_conversation_chunks import SESSION

TOKEN = "wombatlisbon4417"  # a personal detail pasted by mistake: unique in the database
PROMPT = f"my passport number is {TOKEN}, keep it out of the logs"
COMMAND = f"grep {TOKEN} /srv/customers.csv"
ERROR = f"grep: pattern {TOKEN} matched nothing in the file"


def _ev(name: str, **fields) -> dict:
    return {"hook_event_name": name, "session_id": SESSION, "transcript_path": "/nonexistent.jsonl",
            "cwd": "/home/dev/shop", "scsql_event_id": uuid.uuid4().hex, **fields}


def captured_session(agent, tmp_path) -> tuple[int, int]:
    """What the hooks write of a session in which the detail was pasted: the
    prompt, the failed call (with the outcome and the learning the failure
    makes), the learning indexed, and the conversation kept at SessionEnd.
    Returns the prompt_id and the tool_call_id."""
    handlers.capture(agent, [_ev("SessionStart", source="startup"), _ev("UserPromptSubmit", prompt=PROMPT),
                             _ev("PostToolUseFailure", tool_name="Bash", tool_use_id="toolu_77",
                                 tool_input={"command": COMMAND}, error=ERROR)])
    keep_conversation(agent, tmp_path, [("u1", PROMPT, "a1", "I will not repeat it."),
                                        ("u2", "now run the customer report", "a2", "Done.")])
    with agent.transaction() as conn:
        conn.execute("select scsql.index_learnings(50)")
        prompt = conn.execute("select prompt_id from scsql.prompts where text = %s", (PROMPT,)).fetchone()["prompt_id"]
        call = conn.execute("select tool_call_id from scsql.tool_calls where tool = 'Bash'").fetchone()["tool_call_id"]
    return prompt, call


@pytest.fixture
def pair(scsql_db):
    project = scsql_db.project()
    return scsql_db, scsql_db.agent("writer", project), scsql_db.agent("other", project)


def kinds(rows: list[dict]) -> list[str]:
    return sorted(r["kind"] for r in rows[1:])


def test_one_purge_of_the_call_and_one_of_the_prompt_leave_the_detail_nowhere(pair, tmp_path):
    db, a, _ = pair
    prompt, call = captured_session(a, tmp_path)
    assert {"prompts.text", "tool_calls.input_preview", "tool_calls.output_preview", "tool_calls.input_key",
            "outcomes.summary", "outcomes.evidence", "learnings.summary", "learnings.evidence", "learnings.input_key",
            "kb_chunks.content"} <= set(holding(db, TOKEN))
    with db.connect() as conn:
        outcome = conn.execute("select outcome_id, signal from scsql.outcomes where tool_call_id = %s", (call,)).fetchone()
        learning = conn.execute("select learning_id from scsql.learnings where tool_call_id = %s", (call,)).fetchone()
        indexed = conn.execute("select count(*) as n from scsql.kb_sources where path = %s",
                               (f"learning:{learning['learning_id']}",)).fetchone()["n"]
    assert outcome["signal"] == "hook" and indexed == 1  # the hooks' outcome; the learning is in the knowledge base

    by_call = purge_all(a, "tool_call", call)
    assert by_call[0]["quoted_by"] == [] and kinds(by_call) == ["chunk", "learning", "outcome"]
    assert {(r["kind"], r["id"]) for r in by_call} >= {("outcome", outcome["outcome_id"]),
                                                      ("learning", learning["learning_id"])}
    by_prompt = purge_all(a, "prompt", prompt)
    assert by_prompt[0]["quoted_by"] == [] and kinds(by_prompt) == ["chunk", "chunk"]  # the turn, the session summary
    assert holding(db, TOKEN) == []
    both_verifiers_clean(db, a)
    with db.connect() as conn:
        recs = conn.execute("select target_kind, purged_by, author_id, digests from scsql.purges order by purge_id").fetchall()
        row = conn.execute("select summary, summary_sha256, evidence_sha256 from scsql.outcomes where outcome_id = %s",
                           (outcome["outcome_id"],)).fetchone()
    assert sorted(r["target_kind"] for r in recs) == ["chunk"] * 3 + ["learning", "outcome", "prompt", "tool_call"]
    assert {r["purged_by"] for r in recs} == {a.name}
    [rec] = [r for r in recs if r["target_kind"] == "outcome"]
    assert row["summary"] is None and rec["digests"]["summary"] == bytes(row["summary_sha256"]).hex()
    # A rule made of the purged learning still denies the same command, by its sha256.
    with a.transaction() as conn:
        conn.execute("select scsql.mark_learning_rule(%s, true)", (learning["learning_id"],))
        same = conn.execute("select decision from scsql.check_tool_use('Bash', %s)", (Jsonb({"command": COMMAND}),)).fetchone()
        other = conn.execute("select decision from scsql.check_tool_use('Bash', %s)", (Jsonb({"command": "ls"}),)).fetchone()
    assert (same["decision"], other["decision"]) == ("deny", "allow")
    both_verifiers_clean(db, a)


def test_another_agents_copies_are_listed_not_purged_until_their_author_purges_them(pair, tmp_path):
    db, a, b = pair
    prompt, call = captured_session(a, tmp_path)
    # Agent other quotes the call in an outcome of its own (with its learning)
    # and keeps a part of the session's conversation.
    theirs = Api(b).call("record_outcome", tool_call_id=call, kind="failed", summary=f"Bash failed: {ERROR}",
                         evidence=f'{{"command": "{COMMAND}"}}')
    theirs = (theirs[0] if isinstance(theirs, list) else theirs)["outcome_id"]
    with b.transaction() as conn:
        conn.execute("select * from scsql.index_text(%s, %s, 'note', null, 'standard', null, %s)",
                     (f"claude/sessions/{SESSION}/9.md", f"## Turn 9\n\nUser: {PROMPT}\n", Jsonb({"session": SESSION})))
    with db.connect() as conn:
        their_learning = conn.execute("select learning_id from scsql.learnings where outcome_id = %s",
                                      (theirs,)).fetchone()["learning_id"]
        their_chunk = conn.execute("select c.chunk_id from scsql.kb_chunks c join scsql.kb_sources s using (project_id, source_id) "
                                   "where s.path = %s", (f"claude/sessions/{SESSION}/9.md",)).fetchone()["chunk_id"]

    by_call = purge_all(a, "tool_call", call)
    assert by_call[0]["quoted_by"] == [f"learning:{their_learning}", f"outcome:{theirs}"]
    assert theirs not in [r["id"] for r in by_call if r["kind"] == "outcome"]
    by_prompt = purge_all(a, "prompt", prompt)
    assert by_prompt[0]["quoted_by"] == [f"chunk:{their_chunk}"]
    assert their_chunk not in [r["id"] for r in by_prompt]
    assert {"outcomes.summary", "outcomes.evidence", "learnings.summary", "kb_chunks.content"} <= set(holding(db, TOKEN))
    both_verifiers_clean(db, a, b)
    # Nor may the purger remove them one by one; their author may.
    assert refused(lambda: purge_all(a, "outcome", theirs)) == PURGE_NOT_ALLOWED
    assert refused(lambda: purge_all(a, "learning", their_learning)) == PURGE_NOT_ALLOWED
    assert refused(lambda: purge_all(a, "chunk", their_chunk)) == PURGE_NOT_ALLOWED
    mine = purge_all(b, "outcome", theirs)
    assert mine[0]["fields"] == ["evidence", "summary"] and ("learning", their_learning) in [(r["kind"], r["id"]) for r in mine]
    assert refused(lambda: purge_all(b, "learning", their_learning)) == PURGE_ALREADY
    purge_all(b, "chunk", their_chunk)
    assert holding(db, TOKEN) == []
    both_verifiers_clean(db, a, b)


def test_an_administrators_purge_reaches_every_agents_copies(pair, tmp_path):
    db, a, b = pair
    prompt, call = captured_session(a, tmp_path)
    Api(b).call("record_outcome", tool_call_id=call, kind="failed", summary=f"Bash failed: {ERROR}")
    with b.transaction() as conn:
        conn.execute("select * from scsql.index_text(%s, %s, 'note', null, 'standard', null, %s)",
                     (f"claude/sessions/{SESSION}/9.md", f"## Turn 9\n\nUser: {PROMPT}\n", Jsonb({"session": SESSION})))
    first = admin_purge(db, "tool_call", call)
    assert first["quoted_by"] == []
    assert admin_purge(db, "prompt", prompt)["quoted_by"] == []
    assert holding(db, TOKEN) == []
    with db.connect() as conn:
        by = conn.execute("select distinct a.name from scsql.purges p join scsql.agents a on a.agent_id = p.author_id "
                          "where p.target_kind in ('outcome', 'learning')").fetchall()
    assert {r["name"] for r in by} == {a.name, b.name}  # each purge recorded in the copy's author's chain
    both_verifiers_clean(db, a, b)


def test_a_purge_that_fails_on_a_copy_leaves_nothing_behind(pair, tmp_path):
    db, a, _ = pair
    prompt, call = captured_session(a, tmp_path)

    def state():
        with db.connect() as conn:
            return [conn.execute(f"select * from scsql.{t} order by 1, 2").fetchall()
                    for t in ("tool_calls", "outcomes", "learnings", "kb_chunks", "purges", "chains")]
    before = state()
    with db.connect() as conn:  # the last copy's update fails
        conn.execute("create function public.purge_fails() returns trigger language plpgsql as "
                     "$$ begin raise exception 'disk full'; end $$")
        conn.execute("create trigger purge_fails before update of summary on scsql.learnings "
                     "for each row execute function public.purge_fails()")
    try:
        with pytest.raises(Exception, match="disk full"):
            purge_all(a, "tool_call", call)
    finally:
        with db.connect() as conn:
            conn.execute("drop trigger purge_fails on scsql.learnings")
            conn.execute("drop function public.purge_fails()")
    assert state() == before
    assert len(purge_all(a, "tool_call", call)) == 4
    with pytest.raises(psycopg.Error, match="outcomes is append-only"), db.connect() as conn:
        conn.execute("update scsql.outcomes set summary = 'put back'")  # no side door
    both_verifiers_clean(db, a)
