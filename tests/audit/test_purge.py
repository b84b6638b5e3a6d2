"""Forget the content, keep the proof: the author of a prompt, a tool call or
a conversation chunk (or an administrator) purges its text with scsql.purge.
The row stays with its hashes, a chained purge record says who removed what
and why, both verifiers stay clean and still find a purged row altered, and
the words are gone from every table."""

from __future__ import annotations

import dataclasses
import threading

import psycopg
import pytest

from scsql.audit.verify import verify
from scsql.core.errors import (PURGE_ALREADY, PURGE_KIND_INVALID, PURGE_NOT_ALLOWED, PURGE_REASON_INVALID,
                               PURGE_TARGET_UNKNOWN, PURGE_UNSUPPORTED, ScsqlError)
from scsql.api import Api
from scsql.audit.signing import SignedTable
from scsql.audit.telemetry import PROMPT_FIELDS
from scsql.hooks import handlers

from tests.helpers import mcp_env, one_error_line, scsql, sql_verify, statement_lock_waiters, tamper, wait_for
from tests.memory.test_conversation_chunks import SESSION, _lines

TOKEN = "quokkazanzibar7781"  # a personal detail pasted by mistake: unique in the database


def holding(db, token: str = TOKEN) -> list[str]:
    """Every table.column of schema scsql (partitioned tables read through their
    parent) whose text, varchar, jsonb or text[] value holds TOKEN."""
    found = []
    with psycopg.connect(db.admin) as conn:
        cols = conn.execute(
            "select c.relname, a.attname from pg_attribute a join pg_class c on c.oid = a.attrelid "
            "join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'scsql' and c.relkind in ('r', 'p') "
            "and not c.relispartition and a.attnum > 0 and not a.attisdropped "
            "and a.atttypid in ('text'::regtype, 'varchar'::regtype, 'jsonb'::regtype, 'text[]'::regtype)").fetchall()
        for table, column in cols:
            hit = conn.execute(f'select count(*) from scsql."{table}" where lower("{column}"::text) like %s',
                               (f"%{token}%",)).fetchone()[0]
            if hit:
                found.append(f"{table}.{column}")
    return found


def purge(agent, kind: str, ident: int, reason: str = "pasted by mistake") -> dict:
    with agent.transaction() as conn:
        return conn.execute("select * from scsql.purge(%s, %s, %s)", (kind, ident, reason)).fetchone()


def purge_all(agent, kind: str, ident: int, reason: str = "pasted by mistake") -> list[dict]:
    """Every row scsql.purge returns: the row asked for, then each copy it purged."""
    with agent.transaction() as conn:
        return conn.execute("select * from scsql.purge(%s, %s, %s)", (kind, ident, reason)).fetchall()


def admin_purge(db, kind: str, ident: int, reason: str = "asked by the user") -> dict:
    with psycopg.connect(db.admin, row_factory=psycopg.rows.dict_row) as conn:
        conn.execute("set role scsql_admin")
        return conn.execute("select * from scsql.purge(%s, %s, %s)", (kind, ident, reason)).fetchone()


def refused(call) -> str:
    with pytest.raises(ScsqlError) as exc:
        call()
    return exc.value.code


def chain_of(db, agent) -> int:
    with db.connect() as conn:
        return conn.execute("select c.chain_id from scsql.chains c join scsql.agents a using (agent_id) where a.name = %s",
                            (agent.name,)).fetchone()["chain_id"]


def both_verifiers_clean(db, *agents) -> None:
    report = verify(db.admin, workers=1, progress=False, full=True)
    assert report.ok, [(b.chain_id, b.seq, b.kind, b.detail, getattr(b, "table", None)) for b in report.breaks]
    for a in agents:
        r = sql_verify(db, chain_of(db, a))
        assert r["ok"], r


def keep_conversation(agent, tmp_path, turns) -> None:
    """What SessionEnd does with a transcript: the session's conversation indexed in chunks."""
    f = tmp_path / f"{SESSION}.jsonl"
    f.write_text("".join(_lines(turns)))
    event = {"session_id": SESSION, "transcript_path": str(f), "cwd": "/home/dev/shop", "hook_event_name": "SessionEnd"}
    with agent.transaction() as conn:
        sid = handlers.open_session(agent, conn, event, "hook")
        handlers.keep_transcript(agent, conn, event, sid)


@pytest.fixture
def pair(scsql_db):
    project = scsql_db.project()
    return scsql_db, scsql_db.agent("writer", project), scsql_db.agent("other", project)


def _prompt(agent, text: str = f"my home address is 12 {TOKEN} road") -> int:
    return _first(Api(agent).call("record_prompt", text=text))["prompt_id"]


def _first(result):
    return result[0] if isinstance(result, list) else result


def _tool_call(agent) -> int:
    return _first(Api(agent).call("record_tool_call", tool="Bash", input_preview=f'{{"command": "echo {TOKEN}"}}',
                           output_preview=f"{TOKEN}\n"))["tool_call_id"]


def test_the_author_purges_a_prompt_a_tool_call_and_a_conversation_chunk_and_the_words_are_gone(pair, tmp_path):
    db, a, _ = pair
    prompt, call = _prompt(a), _tool_call(a)
    keep_conversation(a, tmp_path, [("u1", f"I live at 12 {TOKEN} road, remember that", "a1", "Noted."),
                                    ("u2", "now fix the failing test", "a2", "Done.")])
    Api(a).call("record_tool_call", tool="Read")  # a row after them in the chain
    assert set(holding(db)) >= {"prompts.text", "tool_calls.input_preview", "tool_calls.output_preview",
                                "kb_chunks.content", "kb_chunks.context"}
    with db.connect() as conn:
        chunks = [r["chunk_id"] for r in conn.execute(
            "select chunk_id from scsql.kb_chunks where content like %s", (f"%{TOKEN}%",)).fetchall()]
        imported = [r["prompt_id"] for r in conn.execute(
            "select prompt_id from scsql.prompts where text like %s and prompt_id <> %s", (f"%{TOKEN}%", prompt)).fetchall()]
    assert chunks
    # The tool call through the API the MCP tools are made of (purge is one).
    done = [purge(a, "prompt", prompt), _first(Api(a).call("purge", kind="tool_call", id=call, reason="pasted by mistake"))]
    with db.connect() as conn:  # the tool call's output, the word alone, stands whole in a chunk: purged with it
        chunks = [r["chunk_id"] for r in conn.execute(
            "select chunk_id from scsql.kb_chunks where chunk_id = any (%s) and purged_at is null", (chunks,)).fetchall()]
    done += [purge(a, "chunk", c) for c in chunks] + [purge(a, "prompt", p) for p in imported]
    assert done[0]["fields"] == ["text"] and done[1]["fields"] == ["input_preview", "output_preview"]
    assert holding(db) == []
    both_verifiers_clean(db, a)
    with db.connect() as conn:
        recs = conn.execute("select target_kind, target_id, purged_by, reason, digests, author_id from scsql.purges "
                            "order by purge_id").fetchall()
        row = conn.execute("select text, text_sha256 from scsql.prompts where prompt_id = %s", (prompt,)).fetchone()
    assert [(r["target_kind"], r["purged_by"]) for r in recs[:2]] == [("prompt", a.name), ("tool_call", a.name)]
    assert row["text"] is None and recs[0]["digests"] == {"text": bytes(row["text_sha256"]).hex()}
    # Search and recall no longer find it; the viewer's timeline shows "[purged]".
    with db.connect() as conn:
        project = conn.execute("select project_id from scsql.agents where name = %s", (a.name,)).fetchone()["project_id"]
    with a.transaction() as conn:
        assert conn.execute("select count(*) as n from scsql.search(%s, 10)", (TOKEN,)).fetchone()["n"] == 0
        body = conn.execute("select body from scsql_caller.viewer_capture_events(%s, null, '-infinity', '-infinity', 0, 0, 100) "
                            "where ref = %s", (project, f"prompt:{prompt}")).fetchall()
    assert body in ([], [{"body": "[purged]"}])


def test_a_tool_calls_purge_purges_its_authors_outcome_and_learning_that_quote_it(pair):
    """An outcome (signed by its author) that quotes a failed call's preview, and
    the learning derived from it, are purged with the call, in its transaction,
    each with its own purge record; the rows follow the call's in the result."""
    db, a, _ = pair
    call = _tool_call(a)
    outcome = _first(Api(a).call("record_outcome", tool_call_id=call, kind="failed", summary="Bash failed: exit 1",
                                 evidence=f'{{"command": "echo {TOKEN}"}}'))["outcome_id"]
    with db.connect() as conn:
        learning = conn.execute("select learning_id from scsql.learnings where outcome_id = %s", (outcome,)).fetchone()
    rows = purge_all(a, "tool_call", call)
    assert rows[0]["kind"] == "tool_call" and rows[0]["quoted_by"] == []
    done = {(r["kind"], r["id"]): r["fields"] for r in rows[1:]}
    assert done[("outcome", outcome)] == ["evidence", "summary"]
    assert ("learning", learning["learning_id"]) in done
    assert holding(db) == []
    both_verifiers_clean(db, a)
    # A short text quotes nothing: the outcome stays as it is.
    other = _first(Api(a).call("record_tool_call", tool="Read", output_preview="ok"))["tool_call_id"]
    Api(a).call("record_outcome", tool_call_id=other, kind="failed", summary="Read failed: ok")
    assert [(r["kind"], r["quoted_by"]) for r in purge_all(a, "tool_call", other)] == [("tool_call", [])]


def test_an_administrator_purges_an_agents_row_into_that_agents_chain(pair):
    db, a, _ = pair
    call = _tool_call(a)
    r = admin_purge(db, "tool_call", call)
    assert r["fields"] == ["input_preview", "output_preview"]
    with db.connect() as conn:
        rec = conn.execute("select purged_by, author_id, chain_id from scsql.purges").fetchone()
    assert rec["purged_by"] == "scsql_admin" and rec["chain_id"] == chain_of(db, a)
    assert holding(db) == []
    both_verifiers_clean(db, a)


@pytest.mark.parametrize("attack, kind", [
    ("update scsql.prompts set text_sha256 = sha256('something else') where prompt_id = {id}", "hash-mismatch"),
    ("update scsql.prompts set text = 'something else' where prompt_id = {id}", "content-mismatch"),
    ("delete from scsql.purges", "purge-unrecorded"),
])
def test_tampering_with_a_purged_row_is_found(pair, verifier, attack, kind):
    db, a, _ = pair
    prompt = _prompt(a)
    purge(a, "prompt", prompt)
    assert verifier.breaks(db) == []
    tamper(db, attack.format(id=prompt))
    with db.connect() as conn:
        seq = conn.execute("select seq from scsql.prompts where prompt_id = %s", (prompt,)).fetchone()["seq"]
    assert (chain_of(db, a), seq, kind) in verifier.breaks(db)


def test_a_text_blanked_without_purge_is_found(pair, verifier):
    db, a, _ = pair
    call = _tool_call(a)
    tamper(db, f"update scsql.tool_calls set output_preview = null where tool_call_id = {call}")
    with db.connect() as conn:
        seq = conn.execute("select seq from scsql.tool_calls where tool_call_id = %s", (call,)).fetchone()["seq"]
    assert verifier.breaks(db) == [(chain_of(db, a), seq, "purge-unrecorded")]


def test_another_agent_cannot_purge_and_bad_calls_get_stable_codes(pair, scsql_db):
    db, a, b = pair
    prompt, call = _prompt(a), _tool_call(a)
    stranger = db.agent("stranger", db.project())
    assert refused(lambda: purge(b, "prompt", prompt)) == PURGE_NOT_ALLOWED
    assert refused(lambda: purge(b, "tool_call", call)) == PURGE_NOT_ALLOWED
    assert refused(lambda: purge(stranger, "prompt", prompt)) == PURGE_TARGET_UNKNOWN  # another project: not even seen
    assert refused(lambda: purge(a, "session", prompt)) == PURGE_KIND_INVALID
    assert refused(lambda: purge(a, "prompt", 0)) == PURGE_TARGET_UNKNOWN
    assert refused(lambda: purge(a, "prompt", prompt + 10**9)) == PURGE_TARGET_UNKNOWN
    assert refused(lambda: purge(a, "prompt", prompt, " ")) == PURGE_REASON_INVALID
    assert refused(lambda: purge(a, "prompt", prompt, "x" * 1001)) == PURGE_REASON_INVALID
    with db.connect() as conn:
        assert conn.execute("select count(*) as n from scsql.purges").fetchone()["n"] == 0
    assert {"prompts.text", "tool_calls.input_preview"} <= set(holding(db))
    # No side door: agents cannot update a chained row, the owner cannot without a purge record.
    with pytest.raises(ScsqlError, match="permission denied"), b.transaction() as conn:
        conn.execute("update scsql.prompts set text = null where prompt_id = %s", (prompt,))
    with pytest.raises(psycopg.Error, match="prompts is append-only"), db.connect() as conn:
        conn.execute("set role scsql_owner")
        conn.execute("update scsql.prompts set text = null where prompt_id = %s", (prompt,))
    purge(a, "prompt", prompt)
    assert refused(lambda: purge(a, "prompt", prompt)) == PURGE_ALREADY
    # A purge record for one field opens neither the row's others (a superuser, triggers on) nor its text again.
    for change in ("imported = true", "text = 'put back'"):
        with pytest.raises(psycopg.Error, match="prompts is append-only"), db.connect() as conn:
            conn.execute(f"update scsql.prompts set {change} where prompt_id = %s", (prompt,))
    both_verifiers_clean(db, a)


def _as_owner(db, *statements: str) -> None:
    with db.connect() as conn:
        conn.execute("set role scsql_owner")
        for st in statements:
            conn.execute(st)


def test_rows_written_before_digests_still_verify_and_cannot_be_purged(pair, verifier):
    """A prompt written the way the release before wrote it (signed and hashed
    over its text, no digest) verifies beside rows written since, and is
    refused by purge, whose removal would break its chain."""
    db, a, _ = pair
    _as_owner(db, "update scsql.chained_tables set digested_fields = '{}' where table_name = 'scsql.prompts'",
              "select scsql._make_digested('scsql.prompts', '{}')")
    try:
        before = SignedTable("scsql.prompts", [dataclasses.replace(f, digested=False) for f in PROMPT_FIELDS])
        args = before.sign(a, {"text": f"written before digests: {TOKEN}"})
        with a.transaction() as conn:
            old = conn.execute("select prompt_id from scsql.record_prompt(p_text => %s, p_at => %s, p_key_id => %s, "
                               "p_signature => %s)", (args["text"], args["at"], args["key_id"], args["signature"])
                               ).fetchone()["prompt_id"]
    finally:
        _as_owner(db, "select scsql._make_digested('scsql.prompts', array['text'])")
    new = _prompt(a)
    with db.connect() as conn:
        digests = conn.execute("select prompt_id, text_sha256 is not null as digested from scsql.prompts "
                               "order by prompt_id").fetchall()
    assert [(r["prompt_id"], r["digested"]) for r in digests] == [(old, False), (new, True)]
    assert verifier.breaks(db) == []
    assert refused(lambda: purge(a, "prompt", old)) == PURGE_UNSUPPORTED
    purge(a, "prompt", new)
    assert verifier.breaks(db) == []
    assert holding(db) == ["prompts.text"]  # the old row's text stays


def test_a_row_an_older_process_signs_over_its_text_after_the_upgrade_verifies(pair):
    """A process started before the upgrade signs a prompt over its text; the
    database hashes it over the digest it fills: scsql verify checks the
    signature over the text, which the digest matches, and finds no break."""
    db, a, _ = pair
    before = SignedTable("scsql.prompts", [dataclasses.replace(f, digested=False) for f in PROMPT_FIELDS])
    args = before.sign(a, {"text": "signed the way the release before signs"})
    with a.transaction() as conn:
        conn.execute("select * from scsql.record_prompt(p_text => %s, p_at => %s, p_key_id => %s, p_signature => %s)",
                     (args["text"], args["at"], args["key_id"], args["signature"]))
    report = verify(db.admin, workers=1, progress=False, full=True)
    assert report.ok and report.signatures >= 1, report.breaks
    # Its text changed is still found: the digest no longer matches.
    tamper(db, "update scsql.prompts set text = 'signed otherwise'")
    assert [b.kind for b in verify(db.admin, workers=1, progress=False, full=True).breaks] == ["content-mismatch"]


def test_a_failing_purge_leaves_nothing_behind(pair, tmp_path):
    db, a, _ = pair
    keep_conversation(a, tmp_path, [("u1", f"call me at {TOKEN}", "a1", "Noted."), ("u2", "next", "a2", "ok")])

    def state():
        with db.connect() as conn:
            return (conn.execute("select * from scsql.kb_chunks order by chunk_id").fetchall(),
                    conn.execute("select * from scsql.kb_postings order by term_id, chunk_id").fetchall(),
                    conn.execute("select * from scsql.chains order by chain_id").fetchall(),
                    conn.execute("select count(*) from scsql.purges").fetchone())
    with db.connect() as conn:
        chunk = conn.execute("select chunk_id from scsql.kb_chunks where content like %s", (f"%{TOKEN}%",)).fetchone()["chunk_id"]
    before = state()
    # It fails after the purge record is written and the postings are gone: at the chunk's own update.
    with db.connect() as conn:
        conn.execute("create function public.purge_fails() returns trigger language plpgsql as "
                     "$$ begin raise exception 'disk full'; end $$")
        conn.execute("create trigger purge_fails before update of content on scsql.kb_chunks "
                     "for each row execute function public.purge_fails()")
    try:
        with pytest.raises(ScsqlError):
            purge(a, "chunk", chunk)
    finally:
        with db.connect() as conn:
            conn.execute("drop trigger purge_fails on scsql.kb_chunks")
            conn.execute("drop function public.purge_fails()")
    assert state() == before
    purge(a, "chunk", chunk)
    assert state() != before


def test_author_and_administrator_purge_one_row_at_once_and_exactly_one_wins(pair):
    db, a, _ = pair
    prompt = _prompt(a)
    results: dict[str, object] = {}
    # The administrator's purge holds the row; the author's waits behind it.
    holder = psycopg.connect(db.admin, row_factory=psycopg.rows.dict_row)
    try:
        holder.execute("set role scsql_admin")
        results["admin"] = holder.execute("select * from scsql.purge('prompt', %s, 'asked by the user')",
                                          (prompt,)).fetchone()

        def author():
            try:
                results["author"] = purge(a, "prompt", prompt)
            except ScsqlError as exc:
                results["author"] = exc.code
        t = threading.Thread(target=author)
        t.start()
        wait_for(lambda: statement_lock_waiters(db, "%scsql.purge%") >= 1)
        seen = statement_lock_waiters(db, "%scsql.purge%")
        holder.commit()
        t.join(60)
    finally:
        holder.close()
    assert seen == 1  # the race happened: the author's purge waited for the administrator's
    assert results["admin"]["fields"] == ["text"] and results["author"] == PURGE_ALREADY
    with db.connect() as conn:
        assert conn.execute("select count(*) as n from scsql.purges").fetchone()["n"] == 1
    both_verifiers_clean(db, a)


def test_the_cli_purges_as_the_author_or_as_an_administrator(pair):
    db, a, b = pair
    first, second = _prompt(a), _tool_call(a)
    env = mcp_env(db)
    refused = scsql("purge", "prompt", str(first), "--agent", b.name, "--reason", "not mine", env=env)
    one_error_line(refused, PURGE_NOT_ALLOWED)
    done = scsql("purge", "prompt", str(first), "--agent", a.name, "--reason", "pasted by mistake", env=env)
    assert done.returncode == 0 and f"prompt {first}: removed text" in done.stdout, done.stderr
    done = scsql("purge", "tool-call", str(second), "--reason", "asked by the user", env=env)
    assert done.returncode == 0 and f"tool_call {second}: removed input_preview, output_preview" in done.stdout, done.stderr
    assert holding(db) == []
    both_verifiers_clean(db, a)
