"""What a hooked session cost: Claude Code's transcript carries the model and
token usage of every assistant message (written once per content block, so
one message's usage appears on several lines); the hooks record each
message once, with the tool calls it issued, priced with the cache rates,
and cost_report counts them by when they happened."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal
from pathlib import Path

import psycopg

from ..helpers import rows, wait_for
from ..hooks.test_capture_integrity import _event, _tool, installed  # noqa: F401 - the fixture


def _assistant(sid: str, msg_id: str, at: str, blocks: list[dict], usage: dict, model: str = "claude-sonnet-4-5-20250929"):
    """The lines Claude Code writes for one assistant message: one per content block, each with the usage."""
    return [{"type": "assistant", "uuid": f"{msg_id}-{i}", "sessionId": sid, "timestamp": at,
             "message": {"id": msg_id, "role": "assistant", "model": model, "content": [b], "usage": usage}}
            for i, b in enumerate(blocks)]


def _write(path: Path, lines: list[dict]) -> None:
    with path.open("a") as f:
        for x in lines:
            f.write(json.dumps(x) + "\n")


USAGE_A = {"input_tokens": 1200, "output_tokens": 300, "cache_creation_input_tokens": 2000, "cache_read_input_tokens": 0}
USAGE_B = {"input_tokens": 50, "output_tokens": 80, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 9000}


def _cost(u: dict) -> Decimal:  # claude-sonnet-4's list price: 3 in, 15 out, 3.75 cache write, 0.30 cache read
    return (Decimal(u["input_tokens"]) * 3 + Decimal(u["output_tokens"]) * 15
            + Decimal(u["cache_creation_input_tokens"]) * Decimal("3.75")
            + Decimal(u["cache_read_input_tokens"]) * Decimal("0.3")) / 1_000_000


def test_a_hooked_sessions_messages_are_priced_once_each(installed, tmp_path):  # noqa: F811
    sid = uuid.uuid4().hex
    repo = installed.repo
    transcript = tmp_path / f"{sid}.jsonl"
    _write(transcript, [{"type": "user", "uuid": "u1", "sessionId": sid, "timestamp": "2026-11-27T09:00:00Z",
                         "message": {"role": "user", "content": "run the tests"}}])
    _write(transcript, _assistant(sid, "msg_A", "2026-11-27T09:00:02Z", [
        {"type": "text", "text": "Running both."},
        {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "pytest -q a"}},
        {"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {"command": "pytest -q b"}}], USAGE_A))
    installed.fire(_event("SessionStart", sid, repo, source="startup", transcript_path=str(transcript)))
    for use in ("toolu_1", "toolu_2"):
        installed.fire(_tool(sid, repo, "Bash", {"command": "pytest"}, {"stdout": "ok"}, tool_use_id=use,
                             transcript_path=str(transcript)))
    _write(transcript, _assistant(sid, "msg_B", "2026-11-27T09:00:09Z", [{"type": "text", "text": "All green."}], USAGE_B))
    # Stop: msg_A is complete (msg_B came after it); msg_B waits for its session's end.
    installed.fire(_event("Stop", sid, repo, stop_hook_active=False, transcript_path=str(transcript)))
    [a] = wait_for(lambda: rows(installed.agent, "select * from scsql.model_calls"), 30)
    assert a["message_id"] == "msg_A" and a["tool_use_ids"] == ["toolu_1", "toolu_2"]
    assert (a["input_tokens"], a["output_tokens"], a["cache_write_tokens"]) == (1200, 300, 2000)
    assert a["cost_usd"] == _cost(USAGE_A) and a["occurred_at"] == dt.datetime(2026, 11, 27, 9, 0, 2, tzinfo=dt.UTC)
    installed.fire(_event("SessionEnd", sid, repo, reason="other", transcript_path=str(transcript)))
    installed.fire(_event("SessionEnd", sid, repo, reason="other", transcript_path=str(transcript)))  # again: nothing new
    calls = wait_for(lambda: (r := rows(installed.agent, "select * from scsql.model_calls order by message_id")) and
                     len(r) == 2 and r, 30)
    assert [c["message_id"] for c in calls] == ["msg_A", "msg_B"] and calls[1]["cost_usd"] == _cost(USAGE_B)
    [session] = rows(installed.agent, "select * from scsql.cost_report(%s::timestamptz, 'session')",
                     dt.datetime(2026, 11, 26, tzinfo=dt.UTC))
    assert session["model_messages"] == 2 and session["cost_usd"] == _cost(USAGE_A) + _cost(USAGE_B)
    assert session["input_tokens"] == 1250 and session["cache_read_tokens"] == 9000
    # When it happened, not when it was written: a day later, the session is out of a "since" of today.
    later = rows(installed.agent, "select * from scsql.cost_report(%s::timestamptz, 'session')",
                 dt.datetime(2026, 11, 28, tzinfo=dt.UTC))
    assert not [r for r in later if r["model_messages"]]


def test_an_administrators_price_from_a_later_time_wins(installed, scsql_db, tmp_path):  # noqa: F811
    with psycopg.connect(scsql_db.admin) as conn:
        conn.execute("select scsql.set_model_price('claude-sonnet-4-5', 2, 10, '2026-11-01', 2.5, 0.2)")
    sid = uuid.uuid4().hex
    transcript = tmp_path / f"{sid}.jsonl"
    _write(transcript, _assistant(sid, "msg_C", "2026-11-27T10:00:00Z", [{"type": "text", "text": "hi"}], USAGE_B))
    installed.fire(_event("SessionEnd", sid, installed.repo, reason="other", transcript_path=str(transcript)))
    [c] = wait_for(lambda: rows(installed.agent, "select * from scsql.model_calls"), 30)
    assert c["cost_usd"] == (Decimal(50) * 2 + Decimal(80) * 10 + Decimal(9000) * Decimal("0.2")) / 1_000_000
    with psycopg.connect(scsql_db.admin) as conn:
        prices = conn.execute("select * from scsql.model_prices() where model = 'claude-haiku-4-5'").fetchall()
    assert prices  # the shipped, dated list


def test_an_imported_sessions_summary_and_conversation_are_dated_when_it_happened(installed, tmp_path):  # noqa: F811
    sid = uuid.uuid4().hex
    transcript = tmp_path / f"{sid}.jsonl"
    _write(transcript, [{"type": "user", "uuid": "u1", "sessionId": sid, "timestamp": "2026-11-02T08:00:00Z",
                         "message": {"role": "user", "content": "We decided to use ruff instead of flake8."}}])
    _write(transcript, _assistant(sid, "msg_D", "2026-11-02T08:00:05Z",
                                  [{"type": "text", "text": "Noted: ruff it is."}], USAGE_B))
    installed.fire(_event("SessionEnd", sid, installed.repo, reason="other", transcript_path=str(transcript)))
    sources = wait_for(lambda: (r := rows(installed.agent, "select path, kind, occurred_at from scsql.kb_sources "
                                                           "order by path")) and len(r) == 2 and r, 30)
    day = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)
    assert all(day <= s["occurred_at"] < day + dt.timedelta(days=1) for s in sources), sources
    assert any(s["kind"] == "session_summary" and s["path"].split("/")[-1].startswith("2026-11-02") for s in sources)
