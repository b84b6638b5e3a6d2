"""What each Claude Code hook event does in the database, and the answer.

The hook server (:mod:`.daemon`) holds one agent (its key loaded) and calls
:func:`handle` for an event that needs an answer, :func:`capture` for events
whose answer is always empty (tool calls, spool replay, transcript import),
several in one transaction. Every write is a chained row signed by the agent
(:mod:`scsql.audit.telemetry`); every write is idempotent by the event's key
(``scsql_event_id``, or a tool call's ``tool_use_id``), so replaying an event
adds nothing. The SQL side is sql/14_capture.sql.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import stat
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from ..audit.telemetry import MODEL_CALLS, OUTCOMES, PROMPTS, SESSIONS, TOOL_CALLS
from ..core.db import Agent
from ..core.errors import ScsqlError, is_unreachable
from ..core.jsonb import jsonb_text
from ..core.paths import real_root, resolve_in_root
from ..core import when
from . import storable
from .clip import clip as _clip
from .hookclient import as_text as _as_text, scrub, scrub_value
from ..core import errors

CONTEXT_TOKENS = 1500     # SessionStart: what recall injects at most (tokens ~ characters / 4)
MAP_TOKENS = 300          # ... of which the map of the project's code (repo_map) takes at most
RECALL_HITS = 3           # UserPromptSubmit: memory hits injected at most
FILE_TOOLS = ("Edit", "Write", "MultiEdit", "NotebookEdit", "Read")


@dataclass
class Reply:
    """What the hook client prints on stdout (JSON) and its exit status. A
    decision (deny, block) is always JSON with exit 0: exit 2 is never used,
    so no failure of the hook process itself can read as one. ``spool``:
    events the handler could not capture (refused), for the server to spool."""

    output: dict | None = None
    exit: int = 0
    stderr: str | None = None
    spool: list[dict] | None = None


def _block(reason: str) -> Reply:
    """Keep the agent working (Stop, SubagentStop, TeammateIdle), telling the model REASON."""
    return Reply({"decision": "block", "reason": reason})


# The embedding of a prompt for recall: the hook server sets it once its model
# is loaded (text -> vector); without it recall is BM25 only.
query_embedding: Callable[[str], Any] | None = None


def recall_enabled() -> bool:
    """UserPromptSubmit recall is on unless SCSQL_HOOK_RECALL is 0/false/off."""
    return os.environ.get("SCSQL_HOOK_RECALL", "1").strip().lower() not in ("0", "false", "off", "no")


# -- small helpers --------------------------------------------------------------

def _ctx(event: str, text: str) -> dict:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def input_key(tool: str, tool_input: Any) -> str | None:
    """What lessons and rules match on: the Bash command or the file path (the
    same as ``scsql._tool_input_key`` in sql/14_capture.sql). It is stored as
    every captured text is (redacted, then bounded: storable.Batch), so a long
    one matches its lessons only by pattern."""
    if not isinstance(tool_input, dict):
        return None
    name = "command" if tool == "Bash" else "notebook_path" if tool == "NotebookEdit" else "file_path"
    v = tool_input.get(name)
    return v if isinstance(v, str) else None


def files_touched(tool: str, tool_input: Any) -> list[str] | None:
    """The paths a file tool read or changed."""
    if tool not in FILE_TOOLS or not isinstance(tool_input, dict):
        return None
    path = tool_input.get("notebook_path" if tool == "NotebookEdit" else "file_path")
    return [path] if isinstance(path, str) and path else None


def _at(event: dict, always: bool = False) -> dt.datetime | None:
    """The event's original time, for events read back from a transcript
    (signed as occurred_at; a row's own signed time is the time of writing);
    with ALWAYS, for live events too (when the hook client received them)."""
    if not event.get("scsql_imported") and not always:
        return None
    raw = event.get("scsql_received_at")
    try:
        t = dt.datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)


def _git(cwd: str | None) -> tuple[str | None, str | None]:
    """The branch and commit checked out in CWD (None, None outside a work tree)."""
    if not cwd or not os.path.isdir(cwd):
        return None, None
    try:
        out = subprocess.run(["git", "-C", cwd, "rev-parse", "--abbrev-ref", "HEAD", "HEAD"],
                             capture_output=True, text=True, timeout=2).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None, None
    return (out[0], out[1]) if len(out) == 2 else (None, None)  # bounded with the other stored fields (STORED)


def _model(event: dict) -> str | None:
    m = event.get("model")
    if isinstance(m, dict):
        m = m.get("id") or m.get("display_name")
    return m if isinstance(m, str) and m else None  # bounded with the other stored fields (STORED)


def _execute(conn, fn: str, args: dict):
    """select * from scsql.FN(p_name => %(name)s, ...): named arguments, bound; returns the cursor."""
    names = ", ".join(f"p_{k} => %({k})s" for k in args)
    params = {k: Jsonb(v, dumps=jsonb_text) if isinstance(v, list | dict) else v for k, v in args.items()}
    return conn.execute(f"select * from scsql.{fn}({names})", params)


def _call(conn, fn: str, args: dict) -> dict | None:
    return _execute(conn, fn, args).fetchone()


# -- sessions -------------------------------------------------------------------

# (database, agent, Claude session_id) -> session_id, for sessions found
# committed (one opened in a transaction that may still roll back is not kept).
_SESSIONS: dict[tuple[str, str, str], int] = {}


# The event field each stored field comes from (for the marks of what was replaced).
SESSION_SOURCES = {"external_id": "session_id", "cwd": "cwd", "model": "model"}
TOOL_SOURCES = {"tool": "tool_name", "input_preview": "tool_input", "input_key": "tool_input", "files": "tool_input",
                "tool_use_id": "tool_use_id"}
STORED = {"scsql.tool_calls": ("tool", "model", "input_preview", "output_preview", "tool_use_id", "input_key"),
          "scsql.prompts": ("text",),
          "scsql.sessions": ("external_id", "cwd", "git_branch", "git_commit", "client", "model", "title")}
TRANSIENT = frozenset({"40P01", "40001", "55P03"})  # deadlock, serialization failure, lock not available


def _given_git(event: dict) -> tuple[str | None, str | None]:
    """The branch and commit an event carries: an import's, read from the
    transcript, or a remote hook client's, read on its own machine (the team
    server runs no git in a directory another machine named)."""
    branch, commit = event.get("scsql_git_branch"), event.get("scsql_git_commit")
    return (branch[:256] if isinstance(branch, str) and branch else None,
            commit[:64] if isinstance(commit, str) and commit else None)


def _session_row(event: dict, source: str | None) -> dict:
    cwd = event.get("cwd") if isinstance(event.get("cwd"), str) else None
    remote = event.get("scsql_imported") or event.get("scsql_remote")
    branch, commit = _given_git(event) if remote else _git(cwd)
    external, hashed = storable.storable_id(event["session_id"], 200)
    return {"external_id": external, "source": source, "cwd": cwd or None,
            "git_branch": branch, "git_commit": commit, "client": "claude-code", "model": _model(event),
            "occurred_at": None if event.get("scsql_stub") else _at(event),
            "altered": {"external_id": {"hashed": True}} if hashed else None}


def open_session(agent: Agent, conn, event: dict, source: str | None = None) -> int | None:
    """The agent's session for the event's Claude session, opened when it has
    none (a resume or compaction reuses it)."""
    return _open_session(agent, conn, storable.clean_event(event), source)[0]


def _open_session(agent: Agent, conn, event: dict, source: str | None = None) -> tuple[int | None, bool]:
    """open_session, and whether this call opened it (scsql.open_session's created)."""
    sid = event.get("session_id")
    if not isinstance(sid, str) or not sid:
        return None, False
    key = (agent.db.conninfo, agent.name, sid)
    if key in _SESSIONS:
        return _SESSIONS[key], False
    external, _ = storable.storable_id(sid, 200)
    found = conn.execute("select scsql.session_for(%s) as s", (external,)).fetchone()["s"]
    if found is not None:
        _SESSIONS[key] = found
        return found, False
    if source is None:
        source = "import" if event.get("scsql_imported") else "hook"
    batch = storable.Batch(conn)
    row = batch.add("scsql.sessions", _session_row(event, source), SESSION_SOURCES, event)
    batch.run()
    signed = SESSIONS.sign_many(agent, [row], conn=conn, redacted=STORED["scsql.sessions"])[0]
    row = _call(conn, "open_session", signed)
    return row["session_id"], bool(row["created"])


# -- capture: tool calls, prompts, sessions, transcripts ------------------------

def _tool_row(event: dict, session_id: int | None) -> dict:
    tool = str(event.get("tool_name") or "unknown")
    tool_input = event.get("tool_input")
    failed = event.get("hook_event_name") == "PostToolUseFailure"
    if failed:
        status = "cancelled" if event.get("is_interrupt") else "error"
        output = event.get("error")
    else:
        output = event.get("tool_response")
        status = "error" if isinstance(output, dict) and output.get("is_error") is True else "ok"
    duration = event.get("duration_ms")
    use_id, hashed = storable.storable_id(event.get("tool_use_id"))
    stub = event.get("scsql_stub")
    return {
        "session_id": session_id, "tool": tool, "status": status,
        "latency_ms": int(duration) if isinstance(duration, int | float) and 0 <= duration < 2**31 else None,
        "input_preview": None if stub else _as_text(tool_input),   # made storable by storable.Batch
        "output_preview": None if stub else _as_text(output),
        "tool_use_id": use_id,
        "files": None if stub else files_touched(tool, tool_input),
        "scsql_tool": True if tool.startswith("mcp__scsql") else None,
        "imported": True if event.get("scsql_imported") else None,
        "input_key": None if stub else input_key(tool, tool_input),
        "occurred_at": None if stub else _at(event),
        "altered": storable.merge(storable.stub_marks(stub["code"], stub["message"]) if stub else None,
                                  [("tool_use_id", {"hashed": True})] if hashed else []),
    }


def _prompt_row(event: dict, session_id: int | None) -> dict:
    stub = event.get("scsql_stub")
    return {"session_id": session_id, "text": "" if stub else str(event.get("prompt") or "").strip(),
            "imported": True if event.get("scsql_imported") else None,
            "occurred_at": None if stub else _at(event, always=True),
            "altered": storable.stub_marks(stub["code"], stub["message"]) if stub else None}


def _event_key(event: dict) -> str | None:
    k = event.get("scsql_event_id")
    return str(k)[:200] if k else None


@dataclass
class Captured:
    """What one capture stored, as the database's functions report it: the
    sessions it opened and those it found, and the prompts and tool calls it
    wrote (one captured before, by a hook or an import, writes nothing)."""
    new_sessions: int = 0
    found_sessions: int = 0
    prompts: int = 0
    tool_calls: int = 0
    stubs: int = 0


def capture(agent: Agent, events: list[dict]) -> Captured:
    """Write capture events (tool calls, prompts, session starts and ends), in
    order, in ONE transaction; an event whose key was captured before adds
    nothing. Each tool call is one chained, signed row; a failed call also
    records a failed outcome, so the learning loop turns it into a learning.
    Every text is made storable first (storable.py). A deadlock or
    serialization failure is tried again; any other refusal is raised (the
    hook server spools the events, and their replay stores what it cannot
    cure as stubs: capture_stubs). Returns what it stored."""
    events = [storable.clean_event(e) for e in events]
    for attempt in range(5):
        try:
            captured = _capture_once(agent, events)
            break
        except ScsqlError as exc:
            if exc.sqlstate not in TRANSIENT or attempt == 4:
                raise
            time.sleep(0.02 * 2 ** attempt)
    if _OWNED_STATE:
        try:
            check_bash_edits(agent, events)
        except ScsqlError:
            pass  # the calls are recorded; a violation not recorded now is not recorded twice either
    return captured


def capture_stubs(agent: Agent, events: list[dict], refusal: ScsqlError | Exception) -> Captured:
    """Capture EVENTS as stubs: the tool, time, session and ids of each, and
    the refusal's code and message in the row's altered object, with no
    other content. For events the database refused whatever capture did."""
    code = getattr(refusal, "code", None) or errors.DATABASE_ERROR
    message = getattr(refusal, "message", None) or str(refusal) or type(refusal).__name__
    keep = ("hook_event_name", "session_id", "tool_name", "tool_use_id", "cwd", "scsql_event_id", "scsql_imported",
            "transcript_path", "scsql_received_at")
    stubs = [{**{k: e[k] for k in keep if k in e}, "scsql_stub": {"code": code, "message": message}}
             for e in events if isinstance(e, dict)]
    out = capture(agent, stubs)
    out.stubs = out.tool_calls + out.prompts
    return out


def _capture_once(agent: Agent, events: list[dict]) -> Captured:
    captured = Captured()
    if not events:
        return captured
    with agent.transaction() as conn:
        sessions = {}
        opened: dict[int, bool] = {}

        def session(ev: dict, source: str | None = None) -> int | None:
            session_id, created = _open_session(agent, conn, ev, source)
            if session_id is not None:
                opened[session_id] = opened.get(session_id, False) or created
            return session_id

        for ev in events:
            if ev.get("hook_event_name") == "SessionStart":
                sessions[ev.get("session_id")] = session(ev, _source(ev))
        for ev in events:
            sid = ev.get("session_id")
            if sid not in sessions:
                sessions[sid] = session(ev)
        captured.new_sessions = sum(opened.values())
        captured.found_sessions = len(opened) - captured.new_sessions
        batch = storable.Batch(conn)
        tools = [(ev, batch.add("scsql.tool_calls", _tool_row(ev, sessions.get(ev.get("session_id"))),
                                {**TOOL_SOURCES, "output_preview": "error" if ev.get("hook_event_name") ==
                                 "PostToolUseFailure" else "tool_response"}, ev,
                                measured=("input_preview", "output_preview")))
                 for ev in events if ev.get("hook_event_name") in ("PostToolUse", "PostToolUseFailure")]
        prompts = [batch.add("scsql.prompts", _prompt_row(ev, sessions.get(ev.get("session_id"))), {"text": "prompt"},
                             ev, measured=("text",))
                   for ev in events if ev.get("hook_event_name") == "UserPromptSubmit"]
        batch.run()
        signed = iter(TOOL_CALLS.sign_many(agent, [row for _, row in tools], conn=conn,
                                           redacted=STORED["scsql.tool_calls"]))
        signed_prompts = iter(PROMPTS.sign_many(agent, prompts, redacted=STORED["scsql.prompts"], conn=conn))
        # One round trip for all the rows (pipeline mode); the results are
        # read after it, the failures' tool_call_ids among them.
        pending = []
        prompted = []
        with conn.pipeline():
            for ev in events:
                name = ev.get("hook_event_name")
                if name in ("PostToolUse", "PostToolUseFailure"):
                    row = next(signed)
                    pending.append((ev, row, _execute(conn, "capture_tool_call", {**row, "event_key": _event_key(ev)})))
                elif name == "UserPromptSubmit":
                    prompted.append(_execute(conn, "record_prompt", {**next(signed_prompts), "event_key": _event_key(ev)}))
        captured.prompts = sum(cur.fetchone()["prompt_id"] is not None for cur in prompted)
        failures = []
        for ev, row, cur in pending:
            out = cur.fetchone()
            captured.tool_calls += out["tool_call_id"] is not None
            if ev.get("hook_event_name") == "PostToolUseFailure" and out["tool_call_id"] is not None:
                failures.append((ev, row, out["tool_call_id"]))
        for ev in events:
            if ev.get("hook_event_name") in ("PreCompact", "SessionEnd") and not ev.get("scsql_stub"):
                keep_transcript(agent, conn, ev, sessions.get(ev.get("session_id")))
                if not ev.get("scsql_imported"):
                    queue_distill(conn, sessions.get(ev.get("session_id")))
        if failures:
            _record_failures(agent, conn, failures)
    return captured


def _record_failures(agent: Agent, conn, failures: list) -> None:
    """The failed outcome of each failed call (which the learning loop turns
    into a learning)."""
    rows = []
    for _, row, tc in failures:
        said = row["output_preview"] or ("not stored: " + row["altered"]["stub"]["code"]
                                         if (row.get("altered") or {}).get("stub") else "no error text")
        rows.append({"tool_call_id": tc, "session_id": row["session_id"], "kind": "failed", "signal": "hook",
                     "summary": f"{row['tool']} failed: {said}", "evidence": row["input_preview"]})
    _record_outcomes(agent, conn, rows)


def _record_outcomes(agent: Agent, conn, rows: list[dict]) -> None:
    """Signed outcomes, their summary and evidence made storable like every captured text."""
    batch = storable.Batch(conn)
    for r in rows:
        batch.add("scsql.outcomes", r, {}, {})
    batch.run()
    for o in OUTCOMES.sign_many(agent, [{k: v for k, v in r.items() if k != "altered"} for r in rows],
                                conn=conn, redacted=("summary", "evidence")):
        _call(conn, "record_outcome", o)


def _source(event: dict) -> str | None:
    if event.get("scsql_imported"):
        return "import"
    s = event.get("source")
    return s if s in ("startup", "resume", "clear", "compact") else "hook"


def keep_transcript(agent: Agent, conn, event: dict, session_id: int | None) -> None:
    """PreCompact / SessionEnd (and an import's SessionEnd): the model-free
    summary (summarize_session) and the conversation text (its parts indexed
    in one batch, scsql.index_staged, as index_text would index each) of what
    the transcript holds after the session's transcript cursor, which then
    moves to its end. Writing the same session
    again (PreCompact, then SessionEnd, then an import) adds only what is
    new; a concurrent writer of the session waits for the cursor. The
    database redacts both before they are stored."""
    path = event.get("transcript_path")
    if session_id is None or not isinstance(path, str) or not path or not _transcript_of(path, event.get("session_id")):
        return
    record_usage(agent, conn, path, session_id, final=event.get("hook_event_name") == "SessionEnd")
    from . import transcript

    at = conn.execute("select * from scsql.transcript_cursor(%s)", (session_id,)).fetchone()
    since = at["cursor"]
    if isinstance(since, str) and since.startswith("messages:"):   # a transcript without message uuids
        since = int(since.removeprefix("messages:"))
    def redact(text: str) -> str:
        return conn.execute("select scsql.redact(%s) as t", (text,)).fetchone()["t"]

    update = transcript.read(path, since, redact=redact, private_key=agent.rules(conn).private_key)
    if update.summary.messages == 0:
        return   # nothing new since the cursor
    if not update.summary.empty:  # dated when the session happened (an import of last week's is last week's)
        conn.execute("select * from scsql.summarize_session(scsql.redact_jsonb(%s), %s)",
                     (Jsonb(scrub_value(update.summary.payload), dumps=jsonb_text),
                      _sane_time(update.summary.ended)))
    sid = str(event.get("session_id") or "session")[:100]
    # The parts in one batch (the bulk path: what index_text would store for each, in order).
    from ..core.bulk import Text, index_texts

    index_texts(conn, [Text(f"claude/sessions/{sid}/{n}.md", scrub(part.text), "note", spans=scrub_value(part.spans),
                            meta={"session": sid, "agent": agent.name}, occurred_at=_sane_time(part.at))
                       for n, part in enumerate(update.conversation.parts, at["parts"] + 1)])
    messages = at["messages"] + update.summary.messages
    cursor = update.cursor or f"messages:{(since if isinstance(since, int) else 0) + update.summary.messages}"
    conn.execute("select scsql.advance_transcript_cursor(%s, %s, %s, %s)",
                 (session_id, cursor[:200], at["parts"] + len(update.conversation.parts), messages))


def queue_distill(conn, session_id: int | None) -> None:
    """PreCompact / SessionEnd: queue the distillation of what the session
    added since its last job, when the project distils (sql/65_distill.sql;
    nothing otherwise). In a savepoint: a refusal loses no captured row."""
    if session_id is None:
        return
    try:
        with conn.transaction():
            conn.execute("select * from scsql.queue_distill(%s)", (session_id,))
    except psycopg.Error:
        pass  # the capture stands; the next PreCompact or SessionEnd queues the segment with what follows


def _sane_time(at: dt.datetime | None) -> dt.datetime | None:
    """A transcript's time as the database takes it (1970 to 9000; else none: the time of writing stands)."""
    if at is None or not dt.datetime(1970, 1, 1, tzinfo=dt.UTC) <= at <= dt.datetime(9000, 1, 1, tzinfo=dt.UTC):
        return None
    return at


def _transcript_of(path: str, session: Any) -> bool:
    """Whether PATH is the transcript of Claude session SESSION: a regular
    file of this user whose messages that name a session all name SESSION
    (one that names none is taken only when it is named after SESSION). An
    event cannot make the hook server read another session's or another
    project's transcript into this agent's memory."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or not isinstance(session, str):
        return False
    named = set()
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f):
                if n >= 2000 or len(named) > 1:
                    break
                found = re.search(r'"sessionId"\s*:\s*"([^"]*)"', line)
                if found:
                    named.add(found.group(1))
    except OSError:
        return False
    return named == {session} or (not named and Path(path).stem == session)


def record_usage(agent: Agent, conn, path: str, session_id: int, final: bool = False) -> int:
    """The model's messages written to the session's transcript since its
    usage cursor, each recorded once with its tokens and the tool calls it
    issued (scsql.record_model_call prices it); FINAL (SessionEnd): the last
    message too. Returns the messages recorded."""
    from . import transcript

    offset = conn.execute("select scsql.usage_cursor(%s) as o", (session_id,)).fetchone()["o"]
    calls, upto = transcript.model_calls(path, offset, final)
    if not calls and upto == offset:
        return 0
    batch = storable.Batch(conn)
    rows = [batch.add("scsql.model_calls", {
        "session_id": session_id, "message_id": storable.storable_id(c.message_id)[0], "model": c.model,
        "input_tokens": c.input_tokens, "output_tokens": c.output_tokens, "cache_write_tokens": c.cache_write_tokens,
        "cache_read_tokens": c.cache_read_tokens, "occurred_at": c.at,
        "tool_use_ids": [storable.storable_id(u)[0] for u in c.tool_use_ids[:1000]]}, {}, {}) for c in calls]
    batch.run()
    recorded = 0
    for row in MODEL_CALLS.sign_many(agent, [{k: v for k, v in r.items() if k != "altered"} for r in rows], conn=conn):
        recorded += _call(conn, "record_model_call", row)["model_call_id"] is not None
    conn.execute("select scsql.advance_usage_cursor(%s, %s)", (session_id, upto))
    return recorded


def _usage_at_stop(agent: Agent, event: dict) -> None:
    """At the end of a turn: what the model's messages of the session cost so far."""
    path = event.get("transcript_path")
    if not isinstance(path, str) or not path or not _transcript_of(path, event.get("session_id")):
        return
    try:
        with agent.transaction() as conn:
            session_id = _open_session(agent, conn, event)[0]
            if session_id is not None:
                record_usage(agent, conn, path, session_id)
    except ScsqlError as exc:
        if is_unreachable(exc):
            raise
        # A refusal here loses nothing: the next Stop, PreCompact or SessionEnd reads from the same cursor.


# -- decision events ------------------------------------------------------------

def _captured(agent: Agent, fn: Callable[[], Any], event: dict) -> list[dict] | None:
    """Run FN (a capture of EVENT); when the database refuses it (not when it
    is unreachable), the event to spool instead."""
    try:
        fn()
    except ScsqlError as exc:
        if is_unreachable(exc):
            raise
        return [event]
    return None


def _session_start(agent: Agent, event: dict) -> Reply:
    def opened():
        with agent.transaction() as conn:
            _open_session(agent, conn, event, _source(event))
    spool = _captured(agent, opened, event)
    text = session_context(agent)
    return Reply(_ctx("SessionStart", text) if text else None, spool=spool)


def session_context(agent: Agent, budget: int = CONTEXT_TOKENS) -> str:
    """What a new session starts with, within BUDGET tokens (characters / 4):
    open tasks and unacknowledged messages for this agent first, then
    recall_context (facts, the last sessions' summaries, broadcasts), each line
    with its citation, then a short map of the project's code (repo_map,
    MAP_TOKENS at most, centred on the files the agent edited lately)."""
    lines: list[str] = []
    with agent.transaction() as conn:
        held = conn.execute("select task_id, lease_token, payload, exclusive_files from scsql.my_tasks()").fetchall()
        claimable = conn.execute("select scsql.claimable_for_me() as n").fetchone()["n"]
        inbox = conn.execute("select message_id, type, sender, provenance, payload from scsql.replay_messages(5)").fetchall()
        for t in held:
            lines.append(f"- task {t['task_id']} (you hold it, lease token {t['lease_token']}): "
                         f"{_clip(_as_text(t['payload']), 300)} [task:{t['task_id']}]")
        if claimable:
            lines.append(f"- {claimable} task(s) of your team role are waiting in the scsql queue (claim_task)")
        for m in inbox:
            lines.append(f"- message {m['message_id']} {m['type']} from {m['sender']} ({m['provenance']}): "
                         f"{_clip(_as_text(m['payload']), 300)} [message:{m['message_id']}]")
        used = sum(len(x) for x in lines) // 4
        code_map = conn.execute("select path, definitions from scsql.repo_map(%s)",
                                (max(50, min(MAP_TOKENS, budget // 4)),)).fetchall()
        used += sum(len(r["path"]) + len(r["definitions"]) + 2 for r in code_map) // 4 + (20 if code_map else 0)
        rest = max(50, budget - used - 60)
        # Facts a model distilled (docs/distill.md) are labelled so: written last by the project's distiller.
        # Read before recall_context, which records what it recalled: on Citus a read as the agent may not
        # follow, in one transaction, a write the owner made to the same shard.
        distilled = {r["key"] for r in conn.execute(
            "select f.key from scsql.memory_facts f join scsql.distill_settings d using (project_id) "
            "where f.updated_by = d.distiller_id").fetchall()}
        recalled = conn.execute(
            "select section, key, content, source_path, at from scsql.recall_context(%s)", (rest,)).fetchall()
    out = []
    if lines:
        out += ["Open work for you in scsql:", *lines]
    if recalled:
        out.append("What scsql remembers for this project:")
        for r in recalled:
            cite = r["source_path"] or f"{r['section']}:{r['key']}"
            label = "fact, distilled" if r["section"] == "fact" and r["key"] in distilled else r["section"]
            out.append(f"- [{label}] {r['content']} [{cite}]")
    if code_map:
        out.append("Map of this project's code (repo_map gives more, file_card one file):")
        out += [f"{r['path']}\n{r['definitions']}" for r in code_map]
    text = "\n".join(out)
    return _clip(text, budget * 4) if text else ""


def _prompt(agent: Agent, event: dict) -> Reply:
    spool = _captured(agent, lambda: capture(agent, [event]), event)
    prompt = event.get("prompt")
    if not recall_enabled() or not isinstance(prompt, str) or not prompt.strip():
        return Reply(spool=spool)
    hits = recall(agent, prompt)
    if not hits:
        if asks_about_the_past(prompt):  # the model is told, so it does not bluff
            return Reply(_ctx("UserPromptSubmit", NOTHING_ON_THIS), spool=spool)
        return Reply(spool=spool)
    lines = ["Possibly relevant from scsql memory (cite the source when you use it):"]
    for h in hits:
        where = h["source_path"] + (f"#{h['anchor']}" if h["anchor"] else "")
        lines.append(f"- {_clip(' '.join(h['content'].split()), 600)} [{where}, chunk {h['chunk_hash'][:12]}]")
    return Reply(_ctx("UserPromptSubmit", "\n".join(lines)), spool=spool)


NOTHING_ON_THIS = ("scsql memory has nothing on this: no stored session, fact, decision or document of this "
                   "project passes the relevance floor for this question. If it asks what happened before, say "
                   "that memory holds no record of it rather than guess.")

# A prompt that asks about what happened before: a question about the
# project's past (what we did, decided, chose, why), or one that names a time
# gone by. Such a prompt with no relevant memory gets NOTHING_ON_THIS.
_PAST = re.compile(
    r"\b(?:(?:did|have|had|were)\s+(?:we|i|you)\b|we\s+(?:decided|agreed|chose|picked|settled|said|discussed|"
    r"talked|used|tried|switched|changed|fixed|wrote|planned)|(?:why|when|how|where|who)\s+(?:did|was|were)\b|"
    r"what\s+(?:was|were|did)\b|last\s+(?:time|session|week|month|year|sprint|friday|monday|tuesday|wednesday|"
    r"thursday|saturday|sunday)|yesterday|earlier|previously|before\s+we|ago\b|remind\s+me|do\s+you\s+remember|"
    r"(?:in|on|since)\s+(?:january|february|march|april|may|june|july|august|september|october|november|december)\b)",
    re.IGNORECASE)


def asks_about_the_past(prompt: str) -> bool:
    """Whether PROMPT asks about the project's past (what was done, decided or
    said, or what happened at a time gone by)."""
    return _PAST.search(prompt) is not None


def recall(agent: Agent, prompt: str, k: int = RECALL_HITS, floor: float | None = None,
           now: dt.datetime | None = None) -> list[dict]:
    """The few knowledge-base hits relevant to PROMPT: BM25 hits that hold at
    least FLOOR of the prompt's terms weighted by rarity (scsql_caller.hit_coverage;
    by default the database's relevance floor, the one search_confidence
    applies: agent.rules().relevance_floor), none when nothing is relevant,
    ordered by fusion with vector hits when
    the server has the embedding model loaded. A prompt that names a time
    ("yesterday", "last week", "on 8 May", relative to NOW) recalls what
    happened then (core/when.py), searched without its time words; what
    happened at any time when nothing then is relevant."""
    text = prompt[:agent.rules().query_max_chars]  # the longest query search takes
    span = when.read(text, now)
    if span is not None:
        found = _recall(agent, when.query_of(span, text), k, floor, span)
        if found:
            return found
    return _recall(agent, text, k, floor, None)


def _recall(agent: Agent, text: str, k: int, floor: float | None, span: when.Span | None) -> list[dict]:
    floor = agent.rules().relevance_floor if floor is None else floor
    vector = None
    if query_embedding is not None:
        try:
            vector = query_embedding(text)
        except Exception:  # noqa: BLE001 - recall falls back to BM25
            vector = None
    with agent.transaction() as conn:
        def run(extra: str, *args) -> list[dict]:
            since = span.since if span is not None else None
            hits = conn.execute(
                "select source_path, anchor, chunk_hash, content, score, written_at from scsql.search(%s, p_k => %s, "
                f"p_since => %s{extra})", (text, k * 3 if span is None else when.WIDE, since, *args)).fetchall()
            return hits if span is None else when.in_range(span, hits, lambda h: when.happened(conn, h))

        bm25 = run(", p_mode => 'bm25'")
        cover = conn.execute("select scsql_caller.hit_coverage(%s, %s::text[]) as c",
                             (text, [h["content"] for h in bm25])).fetchone()["c"] if bm25 else []
        relevant = {h["chunk_hash"] for h, c in zip(bm25, cover, strict=True) if c is not None and c >= floor}
        if not relevant:
            return []
        if vector is None:
            return [h for h in bm25 if h["chunk_hash"] in relevant][:k]
        fused = run(", p_query_embedding => %s", vector)
    return [h for h in fused if h["chunk_hash"] in relevant][:k]


EDIT_TOOLS = ("Edit", "Write", "MultiEdit", "NotebookEdit")


def _pre_tool(agent: Agent, event: dict) -> Reply:
    tool = event.get("tool_name")
    tool_input = event.get("tool_input")
    if not isinstance(tool, str) or not tool or not isinstance(tool_input, dict):
        return Reply(stderr="scsql: PreToolUse event without tool_name or tool_input object", exit=1)
    first = None
    with agent.transaction() as conn:
        for given in _inputs_to_check(conn, tool, tool_input, event):
            r = conn.execute("select * from scsql.check_tool_use(%s, %s)",
                             (tool, Jsonb(given, dumps=jsonb_text))).fetchone()
            first = first or r
            if r["decision"] == "deny":
                return Reply({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                                     "permissionDecisionReason": r["reason"]}})
    if tool == "Bash":
        _remember_owned_state(agent, event)
    lessons = first["lessons"] or []
    if not lessons:
        return Reply()
    lines = [f"scsql lessons: earlier {tool} calls with this input failed:"]
    for x in lessons:
        lines.append(f"- {x['summary']} [learning {x['learning_id']}, outcome {x['outcome_id']}, "
                     f"tool call {x['tool_call_id']}]")
    return Reply(_ctx("PreToolUse", "\n".join(lines)))


def _project_root(conn) -> str | None:
    row = conn.execute("select root_path from scsql.projects where project_id = scsql_caller.project_id()").fetchone()
    return row["root_path"] if row else None


def _inputs_to_check(conn, tool: str, tool_input: dict, event: dict) -> list[dict]:
    """The input as given, then, for an edit, the file it would really change
    spelled as enqueue_task spells an owned file (core.paths.resolve_in_root:
    symbolic links and the root's own linked spelling resolved), and the path
    up to a NUL it held (as the file system reads it) when that differs."""
    out = [tool_input]
    key = "notebook_path" if tool == "NotebookEdit" else "file_path"
    path = tool_input.get(key)
    if tool not in EDIT_TOOLS or not isinstance(path, str) or not path:
        return out
    candidates = [path]
    if ((event.get("scsql_replaced") or {}).get("tool_input") or {}).get("nul"):
        candidates.append(path.split("\ufffd")[0])
    root = _project_root(conn)
    for given in candidates:
        try:
            real = resolve_in_root(root, given)
        except ScsqlError:
            continue  # it leaves the project: no task of the project owns it
        for form in {given, real}:
            if form != path:
                out.append({key: form})
    return out


# -- edits made through Bash: found after the fact ----------------------------------

# tool_use_id -> (when, the owned paths, their state) for Bash calls the hook server saw begin.
_OWNED_STATE: dict[str, tuple[float, list[dict], dict]] = {}
OWNED_STATE_FILES = 5000  # files stat'ed at most per call


def _remember_owned_state(agent: Agent, event: dict) -> None:
    """Before a Bash call: the state of every file another agent's task owns
    (modification time, size, inode), so PostToolUse can tell what it changed."""
    use = event.get("tool_use_id")
    if not isinstance(use, str) or not use:
        return
    with agent.transaction() as conn:
        owned = conn.execute("select * from scsql.others_exclusive_files()").fetchall()
        root = _project_root(conn) if owned else None
    now = time.monotonic()
    for k in [k for k, (t, _, _) in _OWNED_STATE.items() if now - t > 3600 or len(_OWNED_STATE) > 256]:
        _OWNED_STATE.pop(k, None)
    if owned and real_root(root):
        _OWNED_STATE[use] = (now, owned, _owned_state(real_root(root), owned))


def _owned_state(top: str, owned: list[dict]) -> dict[str, tuple | None]:
    state: dict[str, tuple | None] = {}
    for row in owned:
        base = os.path.normpath(os.path.join(top, row["path"]))
        for path in _walk(base):
            if len(state) >= OWNED_STATE_FILES:
                return state
            try:
                st = os.lstat(path)
                state[path] = (st.st_mtime_ns, st.st_size, st.st_ino)
            except OSError:
                state[path] = None
    return state


def _walk(base: str):
    if not os.path.isdir(base) or os.path.islink(base):
        yield base
        return
    for d, dirs, files in os.walk(base):
        dirs[:] = [x for x in dirs if x != ".git"]
        for f in files:
            yield os.path.join(d, f)


def check_bash_edits(agent: Agent, events: list[dict]) -> int:
    """After Bash calls: each file another agent's task owns that a call
    changed is recorded as a violation outcome of the call, and the owner is
    told (a STATUS message). Returns the calls found to have changed one."""
    found = 0
    for ev in events:
        use = ev.get("tool_use_id")
        if ev.get("tool_name") != "Bash" or use not in _OWNED_STATE:
            continue
        _, owned, before = _OWNED_STATE.pop(use)
        with agent.transaction() as conn:
            top = real_root(_project_root(conn))
        if top is None:
            continue
        after = _owned_state(top, owned)
        changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
        if changed:
            found += 1
            _record_violation(agent, ev, owned, [os.path.relpath(p, top) for p in changed])
    return found


def _record_violation(agent: Agent, event: dict, owned: list[dict], changed: list[str]) -> None:
    from ..coordination.client import BROADCASTS

    def owner_of(path: str) -> dict:
        return next((o for o in owned if o["path"] == "." or path == o["path"] or path.startswith(o["path"] + "/")),
                    owned[0])
    tasks: dict[int, dict] = {}
    for path in changed:
        o = owner_of(path)
        tasks.setdefault(o["task_id"], {**o, "paths": []})["paths"].append(path)
    command = (event.get("tool_input") or {}).get("command") if isinstance(event.get("tool_input"), dict) else None
    use_id, _ = storable.storable_id(event.get("tool_use_id"))
    with agent.transaction() as conn:
        call = conn.execute("select tool_call_id, session_id from scsql.tool_calls where tool_use_id = %s "
                            "and author_id = scsql_caller.agent_id() order by tool_call_id desc limit 1",
                            (use_id,)).fetchone()
        rows = [{"tool_call_id": call and call["tool_call_id"], "session_id": call and call["session_id"],
                 "task_ref": f"task:{t}", "kind": "violation", "signal": "file-ownership",
                 "summary": (f"a Bash command changed {len(o['paths'])} file(s) that task {t} owns "
                             f"({'agent ' + o['owner'] if o['owner'] else 'queued for ' + o['owner_role']}): "
                             + ", ".join(o["paths"][:20])),
                 "evidence": _as_text(command)} for t, o in tasks.items()]
        _record_outcomes(agent, conn, rows)
        for t, o in tasks.items():
            message = BROADCASTS.sign(agent, {
                "type": "STATUS", "to_agent": o["owner"], "to_role": None if o["owner"] else o["owner_role"],
                "task": t, "payload": {"violation": "file-ownership", "task": t, "paths": o["paths"][:100],
                                       "tool_call_id": call and call["tool_call_id"]}})
            try:
                with conn.transaction():  # a refused message (a rate limit) keeps the outcome: it is the record
                    _call(conn, "broadcast", message)
            except psycopg.Error:
                pass


def _stop(agent: Agent, event: dict) -> Reply:
    _usage_at_stop(agent, event)
    if event.get("stop_hook_active") is True:
        return Reply()  # a Stop hook already kept the agent going: do not loop
    from ..coordination.client import stop_reason

    reason = stop_reason(agent)
    return _block(reason) if reason else Reply()


def _teammate_idle(agent: Agent, event: dict) -> Reply:
    with agent.transaction() as conn:
        task = conn.execute(
            "select task_id, lease_token, payload, acceptance_criteria, exclusive_files from scsql.claim_task(1)"
        ).fetchone()
    if task is None:
        return Reply()  # nothing claimable: the teammate may stop
    return _block((
        f"scsql: claimed task {task['task_id']} (lease token {task['lease_token']}) for you: "
        f"{_clip(_as_text(task['payload']), 2000)}"
        + (f"; acceptance: {_clip(task['acceptance_criteria'], 1000)}" if task["acceptance_criteria"] else "")
        + (f"; exclusive files: {', '.join(task['exclusive_files'])}" if task["exclusive_files"] else "")
        + f". Work on it; it completes when this task is marked completed (task {task['task_id']})."))


def _task_completed(agent: Agent, event: dict) -> Reply:
    text = " ".join(str(event.get(k) or "") for k in ("task_subject", "task_description", "task_id"))
    subject = event.get("task_subject")
    if isinstance(subject, str) and subject.strip():  # the open loop of that task is done too
        with agent.transaction() as conn:
            conn.execute("select * from scsql.close_loops_done(%s::text[], %s)",
                         ([subject], "done: the task of that subject was marked completed"))
    with agent.transaction() as conn:
        held = conn.execute("select task_id, lease_token from scsql.my_tasks()").fetchall()
        named = [t for t in held if f"task {t['task_id']}" in text or f"#{t['task_id']}" in text]
        pick = named[0] if named else (held[0] if len(held) == 1 else None)
        if pick is None:
            return Reply()
        conn.execute("select * from scsql.complete_task(%s, %s, %s)", (
            pick["task_id"], pick["lease_token"],
            Jsonb({"claude_task": _clip(_as_text(event.get("task_subject")), 500), "by": "TaskCompleted hook"})))
    return Reply()


def _config_change(agent: Agent, event: dict) -> Reply:
    path = event.get("file_path")
    if not isinstance(path, str) or not path.endswith(".json") or not os.path.isfile(path):
        return Reply()
    try:
        hooks = json.loads(Path(path).read_text()).get("hooks") or {}
    except (OSError, ValueError, AttributeError):
        return Reply()
    home = event.get("scsql_home") or os.environ.get("SCSQL_HOME")
    missing = []
    try:
        from .events import settings_hooks
    except ImportError:
        settings_hooks = None
    if settings_hooks is not None and home:
        for name, groups in settings_hooks(agent.name, home).items():
            want = {h["command"] for g in groups for h in g.get("hooks", [])}
            have = {h.get("command") for g in hooks.get(name, []) if isinstance(g, dict)
                    for h in g.get("hooks", []) if isinstance(h, dict)}
            if not want <= have:
                missing.append(name)
    elif "scsql" not in json.dumps(hooks) and "client.py" not in json.dumps(hooks):
        missing.append("all")
    if not missing:
        return Reply()
    return Reply({"systemMessage": (
        f"scsql: the hooks of agent {agent.name} were removed or changed in {path} ({', '.join(missing)}); "
        "capture and file ownership are off until `scsql install claude` is run again")})


def _capture_only(agent: Agent, event: dict) -> Reply:
    capture(agent, [event])
    return Reply()


HANDLERS: dict[str, Callable[[Agent, dict], Reply]] = {
    "SessionStart": _session_start,
    "UserPromptSubmit": _prompt,
    "PreToolUse": _pre_tool,
    "PostToolUse": _capture_only,
    "PostToolUseFailure": _capture_only,
    "PreCompact": _capture_only,
    "SessionEnd": _capture_only,
    "Stop": _stop,
    "SubagentStop": _stop,
    "TeammateIdle": _teammate_idle,
    "TaskCompleted": _task_completed,
    "ConfigChange": _config_change,
}


def handle(agent: Agent, event: dict) -> Reply:
    """Answer one hook event of any kind (see HANDLERS), in its own
    transaction(s). An unknown or malformed event is a clear message on
    stderr and exit 1 (non-blocking)."""
    if not isinstance(event, dict):
        return Reply(exit=1, stderr="scsql: a hook event must be a JSON object")
    event = storable.clean_event(event)
    name = event.get("hook_event_name")
    fn = HANDLERS.get(name) if isinstance(name, str) else None
    if fn is None:
        return Reply(exit=1, stderr=f"scsql: unknown hook event {name!r}")
    if not isinstance(event.get("session_id"), str) and name not in ("ConfigChange",):
        return Reply(exit=1, stderr=f"scsql: {name} event without a session_id")
    return fn(agent, event)
