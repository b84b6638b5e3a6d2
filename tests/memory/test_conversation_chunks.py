"""Conversation is chunked so that a short turn keeps the context it needs
to be found: a reply such as "use the second option" is found by a query
naming what it chose, through the transcript path the hooks take
(keep_transcript: summarize_session and index_text of each part), in a part
written after a compaction too, and in a session summary; the context is
indexed beside the chunk (terms, embedding input), not copied into its text."""

from __future__ import annotations

import json

import pytest

from scsql.hooks import handlers, transcript

SESSION = "5a1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d"
CWD = "/home/dev/shop"

# Turn 2 and turn 4 are short replies naming nothing of what they are about.
TURNS = [
    ("u1", "verify.py has a 252-line verify_part with a nested closure. How should we restructure it?",
     "a1", "Two ways. First: a Verifier class with one method per check and named row types. "
           "Second: module-level helper functions sharing a small state record, no class. "
           "Which one do you want?"),
    ("u2", "use the second option", "a2", "Done."),
    ("u3", "The nightly job also needs a retention window for old partitions of tool_calls.",
     "a3", "I can make pg_partman keep ninety days of partitions, or keep them forever and archive to S3. "
           "Which retention should it be?"),
    ("u4", "yes, the first", "a4", "Set."),
]


def _lines(turns, start_minute: int = 0) -> list[str]:
    out = []
    parent = None
    for i, (uid, request, aid, answer) in enumerate(turns):
        t = f"2026-11-20T09:{start_minute + 2 * i:02d}:00.000Z"
        for uuid, role, content in ((uid, "user", request), (aid, "assistant", [{"type": "text", "text": answer}])):
            out.append(json.dumps({"type": role, "uuid": uuid, "parentUuid": parent, "sessionId": SESSION,
                                   "timestamp": t, "cwd": CWD, "gitBranch": "main",
                                   "message": {"role": role, "content": content}}) + "\n")
            parent = uuid
    return out


def _keep(agent, path) -> None:
    """What PreCompact and SessionEnd do with the transcript."""
    event = {"session_id": SESSION, "transcript_path": str(path), "cwd": CWD, "hook_event_name": "SessionEnd"}
    with agent.transaction() as conn:
        sid = handlers.open_session(agent, conn, event, "hook")
        handlers.keep_transcript(agent, conn, event, sid)


def _bm25(agent, query: str) -> list[dict]:
    with agent.transaction() as conn:
        return conn.execute("select source_path, anchor, content, chunk_hash from scsql.search(%s, 10, p_mode => 'bm25')",
                            (query,)).fetchall()


def _reply(hits: list[dict], words: str) -> list[dict]:
    return [h for h in hits if f"User: {words}" in h["content"]]


@pytest.fixture
def agent(scsql_db):
    return scsql_db.agent("talker", scsql_db.project())


def test_a_short_reply_is_found_by_what_it_answers(scsql_db, agent, tmp_path):
    f = tmp_path / f"{SESSION}.jsonl"
    f.write_text("".join(_lines(TURNS[:2])))
    _keep(agent, f)
    hits = _bm25(agent, "module-level helper functions instead of a class")
    [reply] = _reply(hits, "use the second option")
    # The chunk is the turn itself, with its speaker labels and date; the context is beside it.
    assert reply["content"].startswith("## Turn 2, 2026-11-20 09:02 UTC") and "Assistant: Done." in reply["content"]
    assert "module-level" not in reply["content"]
    with scsql_db.connect() as conn:  # the text a worker embeds for it
        row = conn.execute("select c.context, c.content, c.project_id from scsql.kb_chunks c where c.chunk_hash = %s",
                           (reply["chunk_hash"],)).fetchone()
        row["embedded"] = _embed_input(conn, row["project_id"], reply["chunk_hash"])
    with agent.transaction() as conn:
        sources = conn.execute("select s.path, s.content_hash from scsql.kb_sources s where s.kind = 'note'").fetchall()
        whole = conn.execute("select string_agg(c.content, '' order by c.seq) as t, max(char_length(c.context)) as n "
                             "from scsql.kb_chunks c join scsql.kb_sources s using (project_id, source_id) "
                             "where s.kind = 'note'").fetchone()
    assert row["context"].startswith("Turn 1, 2026-11-20 09:00 UTC: verify.py has a 252-line verify_part")
    assert "Second: module-level helper functions" in row["context"]
    assert row["content"] in row["embedded"] and row["embedded"].endswith(row["context"])
    # The turns' text is stored once: the context is bounded, not a copy of the source.
    assert len(sources) == 1 and whole["n"] <= 801 and "Second: module-level" in whole["t"]
    assert whole["t"].count("Second: module-level") == 1
    # The date of the session finds its turns.
    assert _reply(_bm25(agent, "2026-11-20 second option"), "use the second option")


def test_a_reply_after_a_compaction_keeps_the_turn_before_the_cursor(agent, tmp_path):
    """PreCompact indexes turns 1-3; SessionEnd indexes turn 4 as a new part:
    its context is the end of turn 3, read from before the cursor."""
    f = tmp_path / f"{SESSION}.jsonl"
    f.write_text("".join(_lines(TURNS[:3])))
    _keep(agent, f)
    f.write_text("".join(_lines(TURNS)))
    _keep(agent, f)
    with agent.transaction() as conn:
        paths = [r["path"] for r in conn.execute("select path from scsql.kb_sources where kind = 'note' order by path")]
    assert paths == [f"claude/sessions/{SESSION}/1.md", f"claude/sessions/{SESSION}/2.md"]
    hits = _bm25(agent, "keep ninety days of partitions")
    [reply] = _reply(hits, "yes, the first")
    assert reply["source_path"].endswith("/2.md")
    # And the earlier short reply, in the first part, still by its own question.
    assert _reply(_bm25(agent, "module-level helper functions"), "use the second option")


def test_a_session_summary_part_keeps_the_part_before_it(agent):
    with agent.transaction() as conn:
        conn.execute("select * from scsql.summarize_session(%s::jsonb)", (json.dumps({
            "done": ["Moved the retry logic of fetch_pages into src/net/backoff.py with exponential backoff"],
            "open_tasks": ["finish it"]}),))
    with agent.transaction() as conn:  # on Citus the agent reads what the owner wrote after it committed
        rows = conn.execute("select c.anchor, c.context from scsql.kb_chunks c order by c.seq").fetchall()
    tasks = next(r for r in rows if r["anchor"] == "Open tasks")
    assert "backoff.py" in tasks["context"]
    hits = [h for h in _bm25(agent, "exponential backoff") if h["anchor"] == "Open tasks"]
    assert hits and "finish it" in hits[0]["content"]


def test_spans_give_context_only_when_asked_and_bad_context_is_refused(agent):
    text = "# A\n\nalpha bravo\n\n# B\n\nok"
    with agent.transaction() as conn:
        conn.execute("select * from scsql.index_text('notes/plain.md', %s)", (text,))
        conn.execute("select * from scsql.index_text('notes/talk.md', %s, p_spans => %s::jsonb)",
                     (text, json.dumps([{"start": 1, "end": 3, "anchor": "A", "context": "charlie delta"},
                                        {"start": 5, "end": 7, "anchor": "B", "context": True}])))
    with agent.transaction() as conn:
        rows = conn.execute("select s.path, c.anchor, c.context from scsql.kb_chunks c join scsql.kb_sources s "
                            "using (project_id, source_id) order by s.path, c.seq").fetchall()
    assert [(r["path"], r["anchor"], r["context"]) for r in rows] == [
        ("notes/plain.md", "A", None), ("notes/plain.md", "B", None),
        ("notes/talk.md", "A", "charlie delta"), ("notes/talk.md", "B", "# A\n\nalpha bravo")]
    assert [h["source_path"] for h in _bm25(agent, "charlie")] == ["notes/talk.md"]
    for bad in ([{"start": 1, "end": 1, "context": 3}], [{"start": 1, "end": 1, "context": "x" * 1001}]):
        with pytest.raises(Exception) as err, agent.transaction() as conn:
            conn.execute("select * from scsql.index_text('notes/bad.md', %s, p_spans => %s::jsonb)", (text, json.dumps(bad)))
        assert getattr(err.value, "code", None) == "SC206"


def test_transcript_spans_mark_the_turns_as_conversation(tmp_path):
    f = tmp_path / "t.jsonl"
    f.write_text("".join(_lines(TURNS)))
    [part] = transcript.conversation_text(f).parts
    assert [s["context"] for s in part.spans] == [True] * 4
    first = transcript.read(f)
    later = transcript.read(f, since=first.cursor)
    assert later.conversation.parts == []
    f.write_text("".join(_lines(TURNS)) + "".join(_lines([("u5", "and now?", "a5", "Nothing left.")], 8)))
    [part] = transcript.read(f, since=first.cursor).conversation.parts
    assert part.spans[0]["context"].startswith("User: yes, the first") and part.spans[0]["context"].endswith("Set.")


def _embed_input(conn, project: int, chunk_hash: str) -> str | None:
    """The text a worker embeds for a chunk, in a statement of its own (on
    Citus a function called per row of a sharded table runs on the shard)."""
    return conn.execute("select scsql._embed_input(%s, %s) as t", (project, chunk_hash)).fetchone()["t"]


def _traces(scsql_db, words: str) -> list[str]:
    """Where WORDS are still stored in the knowledge base: chunk text, chunk
    context, or the text a worker would embed for a chunk."""
    with scsql_db.connect() as conn:
        found = conn.execute(
            "select c.seq, c.project_id, c.chunk_hash, c.content like %(w)s as in_content, "
            "c.context like %(w)s as in_context from scsql.kb_chunks c", {"w": f"%{words}%"}).fetchall()
        for r in found:
            r["in_embedding"] = words in (_embed_input(conn, r["project_id"], r["chunk_hash"]) or "")
        # Joined and grouped by project (Citus plans no subquery correlated with another shard's rows).
        stale = conn.execute("select count(*) as n from (select t.df, count(p.chunk_id) as n from scsql.kb_terms t "
                             "left join scsql.kb_postings p on p.project_id = t.project_id and p.term_id = t.term_id "
                             "group by t.project_id, t.term_id, t.df) x where x.df <> x.n").fetchone()["n"]
        lengths = conn.execute("select m.total_len = coalesce(c.len, 0) as exact from scsql.memory_state m "
                               "left join (select project_id, sum(n_terms) as len from scsql.kb_chunks group by 1) c "
                               "on c.project_id = m.project_id").fetchall()
    assert stale == 0 and all(r["exact"] for r in lengths)
    return [f"chunk {r['seq']} {k}" for r in found for k in ("in_content", "in_context", "in_embedding") if r[k]]


def test_forgotten_text_does_not_live_on_in_the_context_of_the_next_turn(scsql_db, agent, tmp_path):
    """Turn 2 is indexed with the end of turn 1 as its context. Forgetting
    turn 1's chunk takes its text out of turn 2's context too: its terms
    (BM25 finds nothing), its statistics and its embedding input."""
    f = tmp_path / f"{SESSION}.jsonl"
    f.write_text("".join(_lines(TURNS[:2])))
    _keep(agent, f)
    assert _traces(scsql_db, "module-level helper") == ["chunk 1 in_content", "chunk 1 in_embedding",
                                                         "chunk 2 in_context", "chunk 2 in_embedding"]
    [first] = [h for h in _bm25(agent, "module-level helper functions") if "Second:" in h["content"]]
    with scsql_db.connect() as conn:  # as if a worker had embedded every chunk
        conn.execute("insert into scsql.kb_embeddings (project_id, model_id, chunk_hash, embedding) "
                     "select distinct c.project_id, m.embed_model_id, c.chunk_hash, array_fill(0.1, array[384])::vector "
                     "from scsql.kb_chunks c join scsql.memory_state m using (project_id)")
        conn.execute("delete from scsql.kb_embed_queue")
    with agent.transaction() as conn:
        assert conn.execute("select scsql.forget_chunk(%s) as n", (first["chunk_hash"],)).fetchone()["n"] == 1
    assert _traces(scsql_db, "module-level helper") == []
    assert _traces(scsql_db, "Second:") == []
    assert _bm25(agent, "module-level helper functions") == []
    [reply] = _reply(_bm25(agent, "use the second option"), "use the second option")
    with scsql_db.connect() as conn:  # the reply's vector is made again, from its new embedding input
        queued = [r["chunk_hash"] for r in conn.execute("select chunk_hash from scsql.kb_embed_queue")]
        kept = [r["chunk_hash"] for r in conn.execute("select chunk_hash from scsql.kb_embeddings")]
    assert queued == [reply["chunk_hash"]] and reply["chunk_hash"] not in kept


def test_a_forgotten_part_does_not_live_on_in_the_next_part(scsql_db, agent, tmp_path):
    """After a compaction the next part's first turn is indexed with the end
    of the part before; forget_source of that part leaves none of it."""
    f = tmp_path / f"{SESSION}.jsonl"
    f.write_text("".join(_lines(TURNS[:3])))
    _keep(agent, f)
    f.write_text("".join(_lines(TURNS)))
    _keep(agent, f)
    assert "chunk 1 in_context" in _traces(scsql_db, "keep ninety days")
    with agent.transaction() as conn:
        assert conn.execute("select scsql.forget_source(%s) as f", (f"claude/sessions/{SESSION}/1.md",)).fetchone()["f"]
    assert _traces(scsql_db, "keep ninety days") == []
    assert _reply(_bm25(agent, "yes, the first"), "yes, the first")
