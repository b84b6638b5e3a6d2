"""A purge reaches the copies that hold a piece of what it removes, not only
those holding it whole. A long prompt imported from a transcript is kept in
the session's conversation cut over several chunks (a line longer than a
chunk is cut in the middle), clipped at the conversation's bound, in the
turn's anchor and in the session summary clipped to a short item; a long
failed tool output is kept as a preview clipped with its
"[... N characters cut]" mark, quoted clipped again by the outcome the hooks
record and by the conversation's line of the failure. A password pasted in
that prompt and output, and every line of them, are in no row of schema
scsql after one purge of the prompt and one of the call; both verifiers
stay clean."""

from __future__ import annotations

import json

import psycopg
import pytest

from scsql.hooks import importer

from tests.audit.test_purge import both_verifiers_clean, purge_all

SESSION = "7c0d9e8f-1a2b-4c3d-8e4f-5a6b7c8d9e0f"
CWD = "/home/dev/shop"
PASSWORD = "gannetmarrow5529"  # pasted by mistake: unique in the database
TAG = "plover"                 # every line of the prompt and the output holds TAG<n>x, unique too


def _line(n: int, words: str) -> str:
    return f"{TAG}{n}x {words}"


# Paragraphs of a long request, with the password in its first line (the
# anchor and the summary item keep that line's start), in a line longer than a
# chunk (cut in the middle, the password near a cut), in the middle and past
# the conversation's 8,000-character bound.
_FILLER = ("the nightly import reads the warehouse export, rebuilds the ledger tables and then "
           "compares every balance with the bank statement before it posts the corrections ")
PROMPT = "\n\n".join([
    _line(1, f"the staging login is admin / {PASSWORD} and I need the import fixed before Friday"),
    _line(2, "here is everything I know about the failure, in order:"),
    _line(3, (_FILLER * 9)[:1480] + f" {PASSWORD} " + _FILLER * 4),
    *[_line(n, _FILLER + f"step {n} of the runbook, which {TAG}{n}y names again") for n in range(4, 30)],
    _line(30, f"and once more, the password is {PASSWORD}, do not store it anywhere"),
    *[_line(n, _FILLER) for n in range(31, 40)],
])
OUTPUT = "\n".join([_line(100, f"psql: error: connection failed: FATAL: password {PASSWORD} rejected for user admin"),
                    *[_line(n, "retrying with the same settings, the same password and the same host " * 2)
                      for n in range(101, 160)]])
COMMAND = f"PGPASSWORD={PASSWORD} psql -h staging -U admin -c 'select 1'"


def _transcript(path) -> None:
    msgs = [
        ("u1", "user", PROMPT),
        ("a1", "assistant", [{"type": "text", "text": "I will try the connection first."},
                             {"type": "tool_use", "id": "toolu_91", "name": "Bash", "input": {"command": COMMAND}}]),
        ("u2", "user", [{"type": "tool_result", "tool_use_id": "toolu_91", "content": OUTPUT, "is_error": True}]),
        ("a2", "assistant", [{"type": "text", "text": "The login is refused; the account may be locked."}]),
        ("u3", "user", "then reset the account from the console and rerun the nightly import"),
        ("a3", "assistant", [{"type": "text", "text": "Reset it and reran the import: all ledgers balance."}]),
    ]
    out, parent = [], None
    for i, (uuid, role, content) in enumerate(msgs):
        out.append(json.dumps({"type": role, "uuid": uuid, "parentUuid": parent, "sessionId": SESSION,
                               "timestamp": f"2026-11-20T09:{i:02d}:00.000Z", "cwd": CWD, "gitBranch": "main",
                               "message": {"role": role, "content": content}}) + "\n")
        parent = uuid
    path.write_text("".join(out))


def leftovers(db) -> dict[str, list[str]]:
    """Each word of what was purged (the password, TAG<n>x of every line)
    found in a text, varchar, jsonb or text[] column of any table of schema
    scsql (every column information_schema lists, partitions read through
    their parent), with where: table.column."""
    words = [PASSWORD, *{w for w in (PROMPT + "\n" + OUTPUT).split() if w.startswith(TAG) and w.endswith("x")}]
    found: dict[str, list[str]] = {}
    with psycopg.connect(db.admin) as conn:
        cols = conn.execute(
            "select c.table_name, c.column_name from information_schema.columns c "
            "join pg_class t on t.relname = c.table_name join pg_namespace n on n.oid = t.relnamespace "
            "and n.nspname = c.table_schema "
            "where c.table_schema = 'scsql' and t.relkind in ('r', 'p') and not t.relispartition "
            "and (c.data_type in ('text', 'character varying', 'jsonb', 'json') "
            "or (c.data_type = 'ARRAY' and c.udt_name in ('_text', '_varchar')))").fetchall()
        assert len(cols) > 50
        for table, column in cols:
            texts = conn.execute(f'select "{column}"::text from scsql."{table}" where "{column}"::text ~ %s',
                                 (f"{PASSWORD}|{TAG}[0-9]+x",)).fetchall()
            for (text,) in texts:
                for w in words:
                    if w in text:
                        found.setdefault(w, []).append(f"{table}.{column}")
    return found


@pytest.fixture
def imported(scsql_db, tmp_path):
    db = scsql_db
    project = db.project()
    agent = db.agent("writer", project)
    f = tmp_path / f"{SESSION}.jsonl"
    _transcript(f)
    report = importer.import_files(agent, [f], progress=False)
    assert not report.failed and report.new_prompts == 2 and report.new_tool_calls == 1, report.as_dict()
    with agent.transaction() as conn:
        conn.execute("select scsql.index_learnings(50)")
    return db, agent, project


def _ids(db) -> tuple[int, int]:
    with db.connect() as conn:
        prompt = conn.execute("select prompt_id from scsql.prompts where text like %s", (f"%{PASSWORD}%",)).fetchone()
        call = conn.execute("select tool_call_id from scsql.tool_calls where tool = 'Bash'").fetchone()
    return prompt["prompt_id"], call["tool_call_id"]


def test_the_pieces_of_a_long_prompt_and_a_clipped_output_are_purged_with_them(imported):
    db, a, _ = imported
    prompt, call = _ids(db)
    with db.connect() as conn:
        pieces = conn.execute(
            "select count(*) filter (where c.content like %s) as with_password, count(*) as chunks "
            "from scsql.kb_chunks c join scsql.kb_sources s using (project_id, source_id) "
            "where s.path like 'claude/sessions/%%' and c.content ~ %s",
            (f"%{PASSWORD}%", f"{TAG}([2-9]|[12][0-9])x")).fetchone()
        cut = conn.execute("select output_preview from scsql.tool_calls where tool_call_id = %s", (call,)).fetchone()
    # The prompt is in several chunks, not all of them holding the password; the
    # output's preview is clipped with its mark.
    assert pieces["chunks"] >= 4 and pieces["with_password"] < pieces["chunks"], pieces
    assert "characters cut]" in cut["output_preview"]
    before = leftovers(db)
    assert {"prompts.text", "tool_calls.output_preview", "outcomes.summary", "kb_chunks.content",
            "kb_chunks.anchor", "kb_sources.meta"} <= set(before[PASSWORD]), before[PASSWORD]

    by_call = purge_all(a, "tool_call", call)
    by_prompt = purge_all(a, "prompt", prompt)
    assert by_call[0]["quoted_by"] == [] and by_prompt[0]["quoted_by"] == []
    left = leftovers(db)
    assert left == {}, json.dumps(left)
    both_verifiers_clean(db, a)
    # What was not a copy stays: the last turn's chunk (the session summary's
    # chunk quoted the prompt, and went with the items it held).
    with db.connect() as conn:
        kept = conn.execute("select count(*) as n from scsql.kb_chunks where content like %s and purged_at is null",
                            ("%reset the account from the console%",)).fetchone()["n"]
        recs = conn.execute("select target_kind, count(*) as n from scsql.purges group by 1").fetchall()
    assert kept == 1
    assert {r["target_kind"]: r["n"] for r in recs}.keys() == {"prompt", "tool_call", "outcome", "learning", "chunk",
                                                               "decision", "memory_change"}


def test_another_agents_piece_is_listed_not_purged(imported):
    """A chunk of another agent holding only a piece of the prompt (a line of
    it, cut at a chunk's edge) is named in quoted_by until its author purges it."""
    db, a, project = imported
    b = db.agent("other", project)
    prompt, _call = _ids(db)
    piece = PROMPT.split("\n\n")[5][:700]
    with b.transaction() as conn:
        conn.execute("select * from scsql.index_text(%s, %s, 'note', null, 'standard', null, %s)",
                     (f"claude/sessions/{SESSION}/9.md", f"## Turn 9\n\n{piece}\nAssistant: noted\n",
                      psycopg.types.json.Jsonb({"session": SESSION})))
    with db.connect() as conn:
        theirs = conn.execute("select c.chunk_id from scsql.kb_chunks c join scsql.kb_sources s using (project_id, source_id) "
                              "where s.path = %s", (f"claude/sessions/{SESSION}/9.md",)).fetchone()["chunk_id"]
    first = purge_all(a, "prompt", prompt)[0]
    assert first["quoted_by"] == [f"chunk:{theirs}"]
    purge_all(b, "chunk", theirs)
    both_verifiers_clean(db, a, b)
