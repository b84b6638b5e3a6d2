"""Claude Code transcripts: reading, the summary made without a model, the
conversation text, incremental reads, the hook events a transcript implies,
and ``scsql import claude``.

The transcripts in tests/data/transcripts/ are synthetic (make.py writes
them): one long session with a compaction, malformed lines and unknown line
types, a short one, and one from an older writer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from scsql.hooks import importer, transcript

DATA = Path(__file__).parent.parent / "data" / "transcripts" / "-home-dev-shop"
LONG = DATA / "4b8e0c1a-7d2f-4e8a-9b1c-3f5e6a7d8c90.jsonl"
SHORT = DATA / "9d2f7e33-1a4b-4c5d-8e6f-7a8b9c0d1e2f.jsonl"
OLD = DATA / "c0ffee00-2b3c-4d5e-9f60-718293a4b5c6.jsonl"
CWD = "/home/dev/shop"


# -- reading --------------------------------------------------------------------


def test_messages_blocks_and_line_types_are_read():
    stats = transcript.ReadStats()
    msgs = list(transcript.iter_messages(LONG, stats))
    assert stats.messages == len(msgs) == 48
    assert stats.malformed == 5 and stats.malformed_lines == [24, 25, 26, 27, 45]
    assert stats.unknown_types == {"hologram": 1}          # known non-message lines are not "unknown"
    assert stats.types["file-history-snapshot"] == stats.types["progress"] == stats.types["queue-operation"] == 1
    assert stats.titles == ["HTTP client retries and fetch_pages rename"] and stats.compactions == 1
    first = msgs[0]
    assert (first.role, first.session_id, first.cwd, first.git_branch) == \
        ("user", "4b8e0c1a-7d2f-4e8a-9b1c-3f5e6a7d8c90", CWD, "feature/retry")
    assert first.timestamp.isoformat() == "2026-11-20T09:00:07.037000+00:00"
    uses = [u for m in msgs for u in m.tool_uses]
    results = {r.tool_use_id: r for m in msgs for r in m.tool_results}
    assert [u.name for u in uses][:4] == ["TodoWrite", "Read", "Edit", "Write"]
    edit = uses[2]
    assert edit.input["file_path"] == f"{CWD}/src/net/client.py" and edit.id.startswith("toolu_01")
    assert results[edit.id].structured["newString"] == "retries = 3"      # the line's toolUseResult
    bash = next(u for u in uses if u.name == "Bash")
    assert results[bash.id].is_error and results[bash.id].content.startswith("Exit code 1")
    grep = next(u for u in uses if u.name == "Grep")
    assert results[grep.id].content == "src/net/pages.py\nnotebooks/explore.ipynb"   # content as a list of blocks
    # Thinking blocks and system reminders are not text; the request is what the user typed.
    assert all("think about it" not in m.text for m in msgs)
    assert msgs[2].text == "Add retry with exponential backoff to the HTTP client in src/net/client.py"


def test_requests_leave_out_what_claude_code_inserted():
    requests = [m.request for m in transcript.iter_messages(LONG) if m.request is not None]
    assert requests == ["/init",
                        "Add retry with exponential backoff to the HTTP client in src/net/client.py",
                        "Now rename fetch_all to fetch_pages everywhere and update the notebook",
                        "Update the changelog and run the whole suite"]


def test_malformed_lines_are_skipped_and_counted_never_fatal(tmp_path):
    f = tmp_path / "bad.jsonl"
    good = {"type": "user", "uuid": "u1", "sessionId": "s", "timestamp": "2026-01-01T00:00:00Z",
            "message": {"role": "user", "content": "hello there"}}
    f.write_bytes(b"\n".join([
        b"{not json", b"\xff\xfe binary \x00 junk", b'"a string"', b"null", b"{}",
        json.dumps({"type": "assistant", "message": None}).encode(),
        json.dumps({"type": "assistant", "message": {"content": {"type": "text"}}}).encode(),
        json.dumps(good).encode(),
        json.dumps({"type": "user", "message": {"content": [None, 3, {"type": "tool_use"}, {"type": "tool_result"}]},
                    "timestamp": "yesterday", "uuid": 12}).encode(),
        b"[" * 100000,                                   # deeper than the parser goes
        b'{"type": "user", "message": {"role": "user", "content": "cut off mid-wri',
    ]))
    stats = transcript.ReadStats()
    msgs = list(transcript.iter_messages(f, stats))
    assert [m.text for m in msgs] == ["hello there", ""]
    assert msgs[1].uuid is None and msgs[1].timestamp is None and not msgs[1].tool_uses
    assert stats.malformed == 8 and stats.malformed_lines == [1, 2, 3, 4, 6, 7, 10, 11]
    assert stats.types["(none)"] == 1                    # {} is an object of no known type
    s = transcript.summarize(f)
    assert s.requests == ["hello there"] and s.stats.malformed == 8


def test_a_missing_file_is_an_error_of_the_caller():
    with pytest.raises(FileNotFoundError):
        transcript.summarize(DATA / "does-not-exist.jsonl")


def test_empty_file_gives_an_empty_summary(tmp_path):
    f = tmp_path / "empty.jsonl"
    f.write_text("")
    s = transcript.summarize(f)
    assert s.empty and s.payload == {} and s.cursor is None
    assert transcript.conversation_text(f).parts == []
    assert transcript.to_events(f) == []


# -- the summary ----------------------------------------------------------------


def test_summary_of_a_session():
    s = transcript.summarize(LONG)
    assert s.session_id == "4b8e0c1a-7d2f-4e8a-9b1c-3f5e6a7d8c90" and s.git_branch == "feature/retry"
    assert s.requests[1:] == ["Add retry with exponential backoff to the HTTP client in src/net/client.py",
                              "Now rename fetch_all to fetch_pages everywhere and update the notebook",
                              "Update the changelog and run the whole suite"]
    # Files changed, relative to the session's directory, in order, once each; the
    # Write that never ran (no result) changed nothing.
    assert s.files == ["src/net/client.py", "src/net/backoff.py", "src/net/pages.py", "notebooks/explore.ipynb",
                       "CHANGELOG.md"]
    cmds = {c.command: c for c in s.commands}
    assert cmds["pytest -q tests/test_client.py"].count == 2
    assert cmds["pytest -q tests/test_client.py"].failed is False          # its last run passed
    assert cmds["pytest -q"].failed is True
    assert cmds["pytest -q"].error == "Exit code 2: ERROR tests/test_db.py - ConnectionRefusedError: [Errno 111]"
    assert cmds["git status --short"].failed is False
    assert "python -X importtime -c 'import shop'" in cmds                # a subagent's command ran too
    assert [(t.content, t.status) for t in s.todos] == [
        ("Add retry to the HTTP client", "completed"), ("Write tests for the retry", "completed"),
        ("Rename fetch_all to fetch_pages", "completed"), ("Fix the database tests on CI", "pending")]
    # The assistant's decisions are its choices between named alternatives, and what it calls one.
    assert s.decisions == [
        "Let's go with a plain search and replace rather than a codemod, since there are two call sites.",
        "The decision: the database tests stay skipped on machines without PostgreSQL."]
    assert s.started.isoformat().startswith("2026-11-20T09:00:07") and s.ended > s.started


def test_summary_payload_is_what_summarize_session_takes():
    p = transcript.summarize(LONG).payload
    assert set(p) == {"done", "decisions", "files", "open_tasks"}
    assert all(isinstance(v, list) and v and all(isinstance(i, str) and i.strip() for i in v) for v in p.values())
    assert "request: Update the changelog and run the whole suite" in p["done"]
    assert "ran `pytest -q tests/test_client.py` (2 times): ok" in p["done"]
    assert "ran `pytest -q`: failed: Exit code 2: ERROR tests/test_db.py - ConnectionRefusedError: [Errno 111]" in p["done"]
    assert "completed: Rename fetch_all to fetch_pages" in p["done"]
    assert p["open_tasks"] == ["Fix the database tests on CI"]
    assert p["files"][0] == "src/net/client.py"
    text = transcript.summarize(LONG).text
    assert text.startswith("## Done\n- request: /init\n") and "\n\n## Open tasks\n- Fix the database tests on CI" in text
    short = transcript.summarize(SHORT)
    assert short.files == [] and short.payload == {
        "done": ["request: Why does the Edit of README fail?"]}  # "We chose to leave the README as it is." is no decision


def test_summary_is_bounded(tmp_path):
    f = tmp_path / "big.jsonl"
    lines = []
    for i in range(400):
        lines.append({"type": "user", "uuid": f"u{i}", "message": {"role": "user", "content": f"request {i} " + "x" * 900}})
        lines.append({"type": "assistant", "uuid": f"a{i}", "message": {"role": "assistant", "content": [
            {"type": "text", "text": f"We decided to use thing {i} instead of thing {i + 1} " + "y" * 900 + "."},
            {"type": "tool_use", "id": f"t{i}", "name": "Write", "input": {"file_path": f"/p/{'d' * 200}/f{i}.py"}}]}})
        lines.append({"type": "user", "uuid": f"r{i}", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{i}", "content": "ok"}]}})
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    p = transcript.summarize(f).payload
    assert len(json.dumps(p, ensure_ascii=False).encode()) <= 20000
    assert all(len(i) <= transcript.ITEM_CHARS for v in p.values() for i in v)
    assert p["done"][-1].startswith("request: request 399 ")              # the latest are kept
    assert p["decisions"][0].endswith("earlier items left out)")


@pytest.mark.parametrize("text, user, assistant", [
    ("I'll use SKIP LOCKED because workers must not wait on each other.", True, False),  # no named alternative
    ("We will switch to pgvector instead of a separate index.", True, True),
    ("We decided to keep the retries at three.", True, False),
    ("I've decided against a cache here.", True, False),
    ("We chose BM25 for code search.", True, False),
    ("We chose BM25 over ts_rank for code search.", True, True),
    ("Decision: keep one chain per agent.", True, True),                                  # said as one
    ("Let's go with psycopg 3 rather than asyncpg.", True, True),
    ("Going with the embedded server since tests need no Docker.", True, False),
    ("I opted for a plain dict.", True, False),
    ("Should we use Redis because it is faster?", False, False),                        # a question
    ("We could use Redis instead of Postgres.", False, False),                          # a hypothetical
    ("I'll use the Read tool to look at the file.", True, False),
    ("Let me run the tests.", False, False),
    ("The user decided nothing yet", False, False),
    ("```\nwe decided to put this in code\n```", False, False),                         # code is not a statement
])
def test_decision_patterns(text, user, assistant):
    assert (bool(transcript.decisions_in(text, "user")), bool(transcript.decisions_in(text, "assistant"))) \
        == (user, assistant)


def test_a_private_key_never_reaches_the_summary_or_the_text(scsql_db, tmp_path):
    # The reader leaves redaction to the database; what is stored holds no key.
    from scsql.hooks import handlers

    key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----"
    f = tmp_path / "pem-session.jsonl"  # a transcript is read for its own session only: named after it
    f.write_text(json.dumps({"type": "user", "uuid": "u", "message": {"role": "user", "content": f"use this key {key}"}})
                 + "\n" + json.dumps({"type": "assistant", "uuid": "a", "message": {"role": "assistant", "content":
                                      f"Noted. A truncated one: {key[:90]}"}}) + "\n")
    agent = scsql_db.agent("pem", scsql_db.project())
    handlers.capture(agent, [{"hook_event_name": "SessionEnd", "session_id": "pem-session", "transcript_path": str(f),
                              "reason": "other"}])
    with scsql_db.connect() as conn:
        stored = conn.execute("select s.kind, c.content from scsql.kb_sources s join scsql.kb_chunks c "
                              "using (project_id, source_id)").fetchall()
    kinds = {r["kind"] for r in stored}
    text = "\n".join(r["content"] for r in stored)
    assert kinds == {"session_summary", "note"}
    assert "BEGIN OPENSSH" not in text and "b3BlbnNzaC1" not in text
    assert text.count("[REDACTED:private_key]") >= 3          # in the summary, and twice in the conversation


# -- the conversation text -----------------------------------------------------


def test_conversation_text_has_a_span_per_turn():
    conv = transcript.conversation_text(LONG)
    assert conv.turns == 4 and len(conv.parts) == 1
    part = conv.parts[0]
    lines = part.text.split("\n")
    assert lines[0] == "# Claude Code session 4b8e0c1a-7d2f-4e8a-9b1c-3f5e6a7d8c90 on feature/retry in /home/dev/shop"
    assert [s["anchor"] for s in part.spans] == [
        "Turn 1, 2026-11-20 09:00 UTC: /init",
        "Turn 2, 2026-11-20 09:00 UTC: Add retry with exponential backoff to the HTTP client in src/net/client.py",
        "Turn 3, 2026-11-20 09:02 UTC: Now rename fetch_all to fetch_pages everywhere and update the notebook",
        "Turn 4, 2026-11-20 09:04 UTC: Update the changelog and run the whole suite"]
    prev = 0
    for s in part.spans:  # what scsql._chunk_text takes: 1-based, increasing, inside the text
        assert prev < s["start"] <= s["end"] <= len(lines)
        prev = s["end"]
    turn4 = "\n".join(lines[part.spans[3]["start"] - 1:part.spans[3]["end"]])
    assert turn4.startswith("## Turn 4, 2026-11-20 09:04 UTC\n\nUser: Update the changelog and run the whole suite")
    assert "Tool Bash `pytest -q`\n\n  failed: Exit code 2: ERROR tests/test_db.py" in turn4
    assert "Tool Edit CHANGELOG.md" in turn4
    assert "Assistant: Done: retries, the rename and the changelog." in turn4
    turn3 = "\n".join(lines[part.spans[2]["start"] - 1:part.spans[2]["end"]])
    assert "Subagent tool Bash `python -X importtime -c 'import shop'`" in turn3
    assert "(the context was compacted here)" in turn3
    assert "This session is being continued" not in part.text and "Caveat:" not in part.text
    assert "think about it" not in part.text


def test_conversation_is_cut_into_parts_at_turns(tmp_path, monkeypatch):
    monkeypatch.setattr(transcript, "PART_CHARS", 600)
    f = tmp_path / "many.jsonl"
    rows = []
    for i in range(12):
        rows.append({"type": "user", "uuid": f"u{i}", "message": {"role": "user", "content": f"question {i}"}})
        rows.append({"type": "assistant", "uuid": f"a{i}", "message": {"role": "assistant", "content": [
            {"type": "text", "text": f"answer {i} " + "z" * (40 if i != 5 else 1500)}]}})
    f.write_text("".join(json.dumps(x) + "\n" for x in rows))
    conv = transcript.conversation_text(f)
    assert len(conv.parts) > 2 and all(len(p.text) <= 600 for p in conv.parts)
    text = "\n".join(p.text for p in conv.parts)
    for i in range(12):
        assert f"User: question {i}" in text
    for p in conv.parts:
        lines = p.text.split("\n")
        assert lines[0].startswith("# Claude Code session")
        for s in p.spans:
            assert lines[s["start"] - 1].startswith("## Turn") and 1 < s["start"] <= s["end"] <= len(lines)
    # Short turns are never split across parts.
    whole = [p for p in conv.parts if any("question 7" in ln for ln in p.text.split("\n"))]
    assert len(whole) == 1 and "answer 7" in whole[0].text


# -- incremental reads ------------------------------------------------------------


def test_incremental_summary_and_text_add_only_what_is_new(tmp_path):
    lines = LONG.read_text().splitlines(keepends=True)
    cut = next(i for i, ln in enumerate(lines) if '"compact_boundary"' in ln)
    f = tmp_path / LONG.name
    f.write_text("".join(lines[:cut]))                 # the transcript when PreCompact ran
    first = transcript.read(f)
    assert first.summary.requests[-1].startswith("Now rename fetch_all")
    assert [(t.content, t.status) for t in first.summary.todos][-1] == ("Rename fetch_all to fetch_pages", "in_progress")
    assert "CHANGELOG.md" not in first.summary.files
    f.write_text("".join(lines))                        # ... and when SessionEnd ran
    second = transcript.read(f, since=first.cursor)
    assert second.summary.since_found
    assert second.summary.requests == ["Update the changelog and run the whole suite"]
    assert second.summary.files == ["CHANGELOG.md"]
    assert [c.command for c in second.summary.commands] == ["pytest -q", "git status --short"]
    assert second.summary.decisions == [
        "The decision: the database tests stay skipped on machines without PostgreSQL."]
    assert second.summary.payload["open_tasks"] == ["Fix the database tests on CI"]
    assert "request: Add retry with exponential backoff to the HTTP client in src/net/client.py" \
        not in second.summary.payload["done"]
    # The text: only the new messages, the turn that continues named as such, numbers going on.
    anchors = [s["anchor"] for p in second.conversation.parts for s in p.spans]
    assert anchors[0].startswith("Turn 3 (continued), ") and anchors[1].startswith("Turn 4, ")
    assert "Now rename fetch_all" not in second.conversation.text
    assert second.cursor == transcript.read(LONG).cursor
    # Nothing new: an empty summary, no text.
    third = transcript.read(f, since=second.cursor)
    assert third.summary.empty and third.conversation.parts == [] and third.cursor is None
    # A count of messages works as the cursor too.
    by_count = transcript.read(f, since=first.summary.messages)
    assert by_count.summary.payload == second.summary.payload


def test_a_cursor_not_in_the_file_reads_it_all():
    u = transcript.read(SHORT, since="not-a-uuid-in-this-file")
    assert not u.summary.since_found and u.summary.requests == ["Why does the Edit of README fail?"]
    assert u.summary.payload == transcript.summarize(SHORT).payload


# -- hook events ----------------------------------------------------------------


def test_events_of_a_transcript():
    stats, counts = transcript.ReadStats(), transcript.EventStats()
    events = transcript.to_events(LONG, stats, counts)
    names = [e["hook_event_name"] for e in events]
    assert names[0] == "SessionStart" and names[-1] == "SessionEnd"
    assert names.count("UserPromptSubmit") == counts.prompts == 4
    assert names.count("PostToolUse") + names.count("PostToolUseFailure") == counts.tool_calls == 16
    assert names.count("PostToolUseFailure") == counts.failures == 2
    assert counts.unanswered == 1 and counts.sessions == 1 and stats.malformed == 5
    sid = "4b8e0c1a-7d2f-4e8a-9b1c-3f5e6a7d8c90"
    for e in events:  # what every hook event carries, and what marks it imported
        assert e["session_id"] == sid and e["cwd"] == CWD and e["permission_mode"] == "default"
        assert e["transcript_path"] == str(LONG.resolve())
        assert e["scsql_imported"] is True and e["scsql_git_branch"] == "feature/retry"
        assert len(e["scsql_event_id"]) == 32 and e["scsql_received_at"].startswith("2026-11-20T09:")
    assert len({e["scsql_event_id"] for e in events}) == len(events)
    times = [e["scsql_received_at"] for e in events]
    assert times == sorted(times)                       # in order, at their original times
    start = events[0]
    assert start["source"] == "startup" and start["model"] == "claude-sonnet-4-5-20250929"
    assert start["scsql_received_at"] == "2026-11-20T09:00:07.037000Z"
    prompt = events[2]
    assert prompt["prompt"] == "Add retry with exponential backoff to the HTTP client in src/net/client.py"
    edit = next(e for e in events if e.get("tool_name") == "Edit")
    assert edit["hook_event_name"] == "PostToolUse" and edit["tool_input"]["new_string"] == "retries = 3"
    assert edit["tool_response"]["filePath"] == f"{CWD}/src/net/client.py"    # the structured result
    assert edit["duration_ms"] == 7037 and edit["tool_use_id"].startswith("toolu_01")
    fail = next(e for e in events if e["hook_event_name"] == "PostToolUseFailure")
    assert fail["tool_name"] == "Bash" and fail["tool_input"]["command"] == "pytest -q tests/test_client.py"
    assert fail["error"].startswith("Exit code 1\nFAILED tests/test_client.py::test_retry")
    assert "tool_response" not in fail
    assert not any(e.get("tool_input", {}).get("file_path") == "/etc/hosts" for e in events)   # never ran
    end = events[-1]
    assert end["reason"] == "other" and end["scsql_received_at"] == "2026-11-20T09:05:50.813000Z"


def test_event_ids_are_stable_and_follow_the_transcript(tmp_path):
    again = transcript.to_events(LONG)
    assert [e["scsql_event_id"] for e in again] == [e["scsql_event_id"] for e in transcript.to_events(LONG)]
    # A copy of the file elsewhere names the same messages and tool calls: the same ids.
    copy = tmp_path / LONG.name
    shutil.copy(LONG, copy)
    assert [e["scsql_event_id"] for e in transcript.to_events(copy)] == [e["scsql_event_id"] for e in again]
    # A transcript that grew keeps the ids of what it had, and ends the session anew.
    with copy.open("a") as f:
        f.write(json.dumps({"type": "user", "uuid": "later-1", "sessionId": again[0]["session_id"],
                            "timestamp": "2026-11-20T10:00:00Z", "message": {"role": "user", "content": "one more"}}) + "\n")
    grown = transcript.to_events(copy)
    assert [e["scsql_event_id"] for e in grown[:-2]] == [e["scsql_event_id"] for e in again[:-1]]
    assert grown[-2]["prompt"] == "one more" and grown[-1]["scsql_event_id"] != again[-1]["scsql_event_id"]


def test_events_of_an_older_transcript():
    events = transcript.to_events(OLD)
    assert [e["hook_event_name"] for e in events] == ["SessionStart", "UserPromptSubmit", "PostToolUse", "SessionEnd"]
    assert events[2]["tool_response"] == "0001_init.sql\n[image]" and events[2]["duration_ms"] == 1000
    assert events[1]["scsql_received_at"] == "2026-11-22T08:00:05Z"   # no time of its own: the last known one
    assert "scsql_git_branch" not in events[0] and "model" not in events[0]


def test_the_session_is_named_by_the_file(tmp_path):
    f = tmp_path / "renamed.jsonl"
    shutil.copy(SHORT, f)
    assert {e["session_id"] for e in transcript.to_events(f)} == {"9d2f7e33-1a4b-4c5d-8e6f-7a8b9c0d1e2f"}
    assert {e["session_id"] for e in transcript.to_events(SHORT)} == {SHORT.stem}


# -- finding a project's transcripts ------------------------------------------------


def test_project_transcripts_are_found_under_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    proj = home / ".claude" / "projects"
    proj.mkdir(parents=True)
    shutil.copytree(DATA, proj / "-home-dev-shop")
    (proj / "-home-dev-shop" / "sub").mkdir()
    (proj / "-home-dev-shop" / "sub" / "agent-1.jsonl").write_text("")
    (proj / "-home-dev-shop" / "agent-2.jsonl").write_text("")       # older releases put subagents here
    (proj / "-home-dev-other").mkdir()
    monkeypatch.setenv("HOME", str(home))
    assert transcript.projects_dir() == proj
    dirs = importer.default_paths("/home/dev/shop")
    assert dirs == [proj / "-home-dev-shop"]
    files = transcript.transcript_files(dirs)
    assert sorted(f.name for f in files) == sorted(f.name for f in DATA.glob("*.jsonl"))
    # Recent releases write every character but letters and digits as "-".
    (proj / "-home-dev-my-app-v2").mkdir()
    assert importer.default_paths("/home/dev/my_app.v2") == [proj / "-home-dev-my-app-v2"]
    assert importer.default_paths("/home/dev/nothing") == []


def _run(argv, tmp_path):
    from scsql.core.app import Context
    from scsql.core.command import Commands, Parser
    from scsql.core.config import Settings

    parser = Parser(prog="scsql")
    importer.register(Commands(parser))
    args = parser.parse_args(argv)
    return args.func(Context(Settings.load(str(tmp_path / "data"))), args)


def test_import_dry_run_counts(tmp_path, capsys, monkeypatch):
    assert _run(["import", "claude", "--dry-run", str(DATA)], tmp_path) == 0
    out = capsys.readouterr()
    assert out.out == ("scsql: would import 3 session(s), 6 prompt(s), 19 tool call(s) (3 failed) from 3 transcript(s); "
                       "5 malformed line(s) skipped, 1 tool use(s) without a result\n")
    assert out.err == ""                                  # no progress bar in a pipe
    assert _run(["import", "claude", "--dry-run", "--json", str(SHORT)], tmp_path) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["sessions"], report["prompts"], report["tool_calls"], report["failures"]) == (1, 1, 2, 1)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert _run(["import", "claude", "--agent", "nobody"], tmp_path) == 0    # nothing to import, no database asked
    assert capsys.readouterr().out == (f"scsql: no Claude Code transcripts of sessions in {tmp_path} under "
                                       f"{tmp_path}/.claude/projects; nothing imported (name transcripts or their "
                                       "directories as PATH)\n")
    assert _run(["import", "claude", "--dry-run", str(tmp_path / "nope.jsonl")], tmp_path) == 1
    assert "no such file or directory" in capsys.readouterr().err


def test_import_progress_bar_on_a_terminal(tmp_path, capsys):
    report = importer.import_files(None, transcript.transcript_files([DATA]), progress=True, dry_run=True)
    err = capsys.readouterr().err
    total = sum(f.stat().st_size for f in DATA.glob("*.jsonl"))
    assert "import:" in err and f"/{total / 1024:.1f}k" in err and "B/s" in err   # bytes read of the total
    assert report.sessions == 3


def test_event_strings_are_bounded(tmp_path):
    f = tmp_path / "s.jsonl"
    rows = [
        {"type": "assistant", "uuid": "a", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Write", "input": {"file_path": "/p/x.py", "content": "x" * 100000}},
            {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "make"}}]}},
        {"type": "user", "uuid": "r1", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
         "toolUseResult": {"type": "create", "content": "y" * 100000, "deep": {"deeper": ["z" * 100000]}}},
        {"type": "user", "uuid": "r2", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t2", "content": "e" * 100000, "is_error": True}]}},
    ]
    f.write_text("".join(json.dumps(x) + "\n" for x in rows))
    write, bash = transcript.to_events(f)[1:3]
    n = transcript.EVENT_STRING_CHARS
    assert write["tool_input"]["file_path"] == "/p/x.py" and write["tool_input"]["content"] == "x" * n + " …[cut]"
    assert write["tool_response"]["content"] == "y" * n + " …[cut]"
    assert write["tool_response"]["deep"]["deeper"] == ["z" * n + " …[cut]"]
    assert bash["error"] == "e" * n + " …[cut]" and bash["tool_input"] == {"command": "make"}


# -- against the database: what the summary and the text become ----------------------


def _q(agent, sql, *args):
    with agent.transaction() as conn:
        return conn.execute(sql, args).fetchall()


def test_summary_and_conversation_are_what_the_sql_api_takes(scsql_db, tmp_path):
    agent = scsql_db.agent("tr", scsql_db.project())
    lines = LONG.read_text().splitlines(keepends=True)
    cut = next(i for i, ln in enumerate(lines) if '"compact_boundary"' in ln)
    f = tmp_path / LONG.name
    f.write_text("".join(lines[:cut]))
    first = transcript.read(f)
    f.write_text("".join(lines))
    second = transcript.read(f, since=first.cursor)
    for n, update in enumerate((first, second), 1):
        _q(agent, "select * from scsql.summarize_session(%s::jsonb)", json.dumps(update.summary.payload))
        for i, part in enumerate(update.conversation.parts, 1):
            row = _q(agent, "select * from scsql.index_text(%s, %s, 'note', null, 'session', %s::jsonb)",
                     f"claude/{update.summary.session_id}/{n}.{i}", part.text, json.dumps(part.spans))[0]
            assert row["chunks"] == len(part.spans)                      # a chunk per (short) turn
    restored = _q(agent, "select content from scsql.recall_context(5000) where section = 'session'")
    assert len(restored) == 2
    assert "Fix the database tests on CI" in restored[0]["content"] and "CHANGELOG.md" in restored[0]["content"]
    assert "src/net/backoff.py" in restored[1]["content"] and "CHANGELOG.md" not in restored[1]["content"]
    hits = _q(agent, "select source_path, anchor, content from scsql.search('ConnectionRefusedError', 5, null, null, null, 'bm25')")
    convo = [h for h in hits if h["source_path"].startswith("claude/")]
    assert convo and convo[0]["anchor"] == "Turn 4, 2026-11-20 09:04 UTC: Update the changelog and run the whole suite"
    assert convo[0]["content"].startswith("## Turn 4") and "User: Update the changelog" in convo[0]["content"]
    hits = _q(agent, "select source_path, anchor from scsql.search('exponential backoff jitter', 5, null, null, null, 'bm25')")
    assert any(h["anchor"] and h["anchor"].startswith("Turn 2,") for h in hits)


def test_decisions_the_user_states_count_too(tmp_path):
    f = tmp_path / "u.jsonl"
    rows = [{"type": "user", "uuid": "u1", "message": {"role": "user", "content":
             "We decided to drop Python 3.10 support. Can you update the CI matrix? " + "log line " * 200}},
            {"type": "assistant", "uuid": "a1", "message": {"role": "assistant", "content": [
                {"type": "text", "text": "Sure. " + "We decided to " + "x" * 1200}]}}]
    f.write_text("".join(json.dumps(x) + "\n" for x in rows))
    assert transcript.summarize(f).decisions == ["We decided to drop Python 3.10 support."]


# -- scsql import claude, against the database --------------------------------------


def _capture_landed() -> bool:
    try:
        from scsql.hooks import handlers
    except ImportError:
        return False
    return hasattr(handlers, "capture")


needs_capture = pytest.mark.skipif(not _capture_landed(), reason="scsql.hooks.handlers.capture is not on this branch")


def _counts(scsql_db) -> dict[str, int]:
    with scsql_db.connect() as conn:
        return conn.execute("""
            select (select count(*) from scsql.sessions) as sessions,
                   (select count(*) from scsql.prompts) as prompts,
                   (select count(*) from scsql.tool_calls) as tool_calls,
                   (select count(*) from scsql.kb_sources where kind = 'session_summary') as summaries,
                   (select count(*) from scsql.kb_chunks) as chunks""").fetchone()


def _recent_copy(tmp_path) -> Path:
    """The test transcripts with their times moved to now (order kept): the
    chain takes only writes near the server clock, signed by a key valid then."""
    import datetime as dt
    import re

    out = tmp_path / "recent"
    out.mkdir()
    stamp = re.compile(r'("timestamp": ")([^"]+)(")')
    base = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)
    now = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=2)

    def move(m):
        t = transcript.parse_time(m.group(2))
        if t is None:
            return m.group(0)
        moved = now + (t - base) / 20000
        return m.group(1) + moved.isoformat().replace("+00:00", "Z") + m.group(3)

    for f in DATA.glob("*.jsonl"):
        (out / f.name).write_text(stamp.sub(move, f.read_text()))
    return out


def _imported(scsql_db, tmp_path):
    """An agent, the sample transcripts (recent copies) and the report of
    importing them once, which failed on none."""
    agent = scsql_db.agent("imp", scsql_db.project())
    files = transcript.transcript_files([_recent_copy(tmp_path)])
    report = importer.import_files(agent, files, progress=False)
    assert not report.failed, report.failed
    return agent, files, report


@needs_capture
def test_import_writes_the_hooks_rows_once(scsql_db, tmp_path):
    agent, files, report = _imported(scsql_db, tmp_path)
    assert (report.sessions, report.prompts, report.tool_calls, report.malformed) == (3, 6, 19, 5)
    after = _counts(scsql_db)
    assert after["sessions"] == 3 and after["prompts"] == 6 and after["tool_calls"] == 19
    assert after["summaries"] == 3 and after["chunks"] > 3
    hits = _q(agent, "select source_path from scsql.search('ConnectionRefusedError', 5, null, null, null, 'bm25')")
    assert any(h["source_path"].startswith("claude/sessions/") for h in hits)   # what was said is searchable
    again = importer.import_files(agent, files, progress=False)
    assert not again.failed
    twice = _counts(scsql_db)                                         # importing twice adds no row the hooks write
    assert (twice["sessions"], twice["prompts"], twice["tool_calls"]) == (3, 6, 19)


@needs_capture
def test_import_again_reports_nothing_new_and_what_was_already_imported(scsql_db, tmp_path):
    agent, files, first = _imported(scsql_db, tmp_path)
    assert first.line() == ("scsql: imported 3 new session(s), 6 new prompt(s), 19 new tool call(s) from 3 transcript(s), "
                            "0 session(s) already imported; 5 malformed line(s) skipped, 1 tool use(s) without a result")
    again = importer.import_files(agent, files, progress=False)
    assert not again.failed, again.failed
    assert (again.new_sessions, again.new_prompts, again.new_tool_calls, again.already_imported) == (0, 0, 0, 3)
    assert again.line() == ("scsql: imported 0 new session(s), 0 new prompt(s), 0 new tool call(s) from 3 transcript(s), "
                            "3 session(s) already imported; 5 malformed line(s) skipped, 1 tool use(s) without a result")
    assert (again.sessions, again.prompts, again.tool_calls) == (3, 6, 19)           # what was read, as before


@needs_capture
def test_import_twice_adds_no_summary(scsql_db, tmp_path):
    agent, files, _ = _imported(scsql_db, tmp_path)
    after = _counts(scsql_db)
    importer.import_files(agent, files, progress=False)
    assert _counts(scsql_db) == after


@needs_capture
def test_import_keeps_original_times(scsql_db):
    agent = scsql_db.agent("imp", scsql_db.project())
    report = importer.import_files(agent, transcript.transcript_files([DATA]), progress=False)
    assert not report.failed, report.failed
    with scsql_db.connect() as conn:
        # Signed at write time (the chain keeps at within its clock skew); the original time is occurred_at.
        times = conn.execute("select min(occurred_at), max(occurred_at) from scsql.tool_calls where imported").fetchone()
    assert times["min"].isoformat().startswith("2026-11-20T09:00") and times["max"].isoformat().startswith("2026-11-22")


# -- the transcript cursor: PreCompact, then SessionEnd, then an import --------------


def _kept(scsql_db) -> dict:
    with scsql_db.connect() as conn:
        return conn.execute("""
            select (select array_agg(meta -> 'summary' order by source_id) from scsql.kb_sources
                    where kind = 'session_summary') as summaries,
                   (select array_agg(path order by path) from scsql.kb_sources where path like 'claude/sessions/%') as parts,
                   (select count(*) from scsql.kb_chunks) as chunks""").fetchone()


@needs_capture
def test_precompact_then_session_end_then_import_adds_only_what_is_new(scsql_db, tmp_path):
    from scsql.hooks import handlers

    agent = scsql_db.agent("cur", scsql_db.project())
    lines = LONG.read_text().splitlines(keepends=True)
    cut = next(i for i, ln in enumerate(lines) if '"compact_boundary"' in ln)
    f = tmp_path / LONG.name
    sid = LONG.stem

    def hook(name: str) -> None:
        handlers.capture(agent, [{"hook_event_name": name, "session_id": sid, "transcript_path": str(f)}])

    f.write_text("".join(lines[:cut]))                  # the transcript when PreCompact ran
    hook("PreCompact")
    first = _kept(scsql_db)
    assert len(first["summaries"]) == 1 and first["parts"] == [f"claude/sessions/{sid}/1.md"]
    f.write_text("".join(lines))                        # ... and when SessionEnd ran
    hook("SessionEnd")
    second = _kept(scsql_db)
    assert len(second["summaries"]) == 2 and second["summaries"][0] == first["summaries"][0]
    new = second["summaries"][1]
    assert new["done"][0] == "request: Update the changelog and run the whole suite"     # only what is new
    assert not any("exponential backoff" in x for x in new["done"])
    assert second["parts"] == [f"claude/sessions/{sid}/1.md", f"claude/sessions/{sid}/2.md"]  # part 1 kept as it was
    # Nothing new: SessionEnd again, and importing the transcript, add no summary and no text.
    hook("SessionEnd")
    report = importer.import_files(agent, [f], progress=False)
    assert not report.failed, report.failed
    assert _kept(scsql_db) == second
    with scsql_db.connect() as conn:
        at = conn.execute("select * from scsql.transcript_cursors").fetchall()
    assert len(at) == 1 and at[0]["cursor"] == transcript.read(LONG).cursor and at[0]["parts"] == 2


@needs_capture
def test_transcript_cursor_is_your_own_sessions(scsql_db):
    from scsql.core.errors import ScsqlError
    from scsql.hooks import handlers

    project = scsql_db.project()
    a, b = scsql_db.agent("ca", project), scsql_db.agent("cb", project)
    handlers.capture(a, [{"hook_event_name": "SessionStart", "session_id": "s-a", "source": "startup"}])
    with a.transaction() as conn:
        mine = conn.execute("select scsql.session_for('s-a') as s").fetchone()["s"]
    for sql, code in (("select * from scsql.transcript_cursor(%s)", "SC146"),
                      ("select scsql.advance_transcript_cursor(%s, 'u1', 1, 1)", "SC146")):
        with pytest.raises(ScsqlError) as e, b.transaction() as conn:
            conn.execute(sql, (mine,))
        assert e.value.code == code
    with a.transaction() as conn:
        conn.execute("select scsql.advance_transcript_cursor(%s, 'u2', 2, 5)", (mine,))
    for args in (("", 3, 6), ("u3", 1, 6), ("u3", 3, 4)):
        with pytest.raises(ScsqlError) as e, a.transaction() as conn:
            conn.execute("select scsql.advance_transcript_cursor(%s, %s, %s, %s)", (mine, *args))
        assert e.value.code == "SC147"


def test_decisions_are_the_users_or_a_choice_between_named_alternatives(capsys):
    """tests/data/decision_sentences.jsonl: 190 sentences of the kind
    transcripts hold, labelled by hand (split holdout: written after the rules,
    some after a first tuning). A decision is found when the user states one,
    or when the assistant chooses between named alternatives; narration ("we
    chose to leave the README as it is") is not one."""
    rows = [json.loads(line) for line in (Path(__file__).parent.parent / "data" / "decision_sentences.jsonl").read_text().splitlines()]
    assert len(rows) >= 100
    for split in ("all", "holdout"):
        part = [r for r in rows if split == "all" or r["split"] == split]
        got = [(transcript.is_decision(r["text"], r["role"]), r["decision"]) for r in part]
        tp = sum(g and w for g, w in got)
        precision = tp / max(1, sum(g for g, _ in got))
        recall = tp / max(1, sum(w for _, w in got))
        with capsys.disabled():
            print(f"\ndecisions ({split}, {len(part)} sentences): precision {precision:.3f}, recall {recall:.3f}")
        assert precision >= 0.9 and recall >= 0.7, (split, precision, recall)
    assert transcript.decisions_in("We chose to leave the README as it is.", "assistant") == []
    assert transcript.decisions_in("We chose to leave the README as it is.", "user")
