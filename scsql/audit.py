"""Telemetry writes (sessions, tool calls, outcomes) signed by the agent, and
the background job that maintains their partitions.

The SQL functions ``scsql.start_session``, ``scsql.record_tool_call`` and
``scsql.record_outcome`` write chained rows; the declarations below make the
registry sign each call with the agent's key (see :mod:`scsql.chain`), so the
MCP tools of the same names take only the content arguments.
"""

from __future__ import annotations

import time

from .chain import SignedField, signed_write
from .db import Agent
from .worker import Job

SESSION_FIELDS = (
    SignedField("client", "text"),
    SignedField("model", "text"),
    SignedField("title", "text"),
)

TOOL_CALL_FIELDS = (
    SignedField("session_id", "int"),
    SignedField("tool", "text"),
    SignedField("model", "text"),
    SignedField("origin", "text", "model"),
    SignedField("input_tokens", "int", 0),
    SignedField("output_tokens", "int", 0),
    SignedField("latency_ms", "int"),
    SignedField("status", "text", "ok"),
    SignedField("input_preview", "text", max_chars=4000),
    SignedField("output_preview", "text", max_chars=4000),
)

OUTCOME_FIELDS = (
    SignedField("tool_call_id", "int"),
    SignedField("session_id", "int"),
    SignedField("task_ref", "text"),
    SignedField("kind", "text"),
    SignedField("signal", "text", "agent"),
    SignedField("confidence", "numeric"),
    SignedField("summary", "text"),
    SignedField("evidence", "text", max_chars=8000),
    SignedField("classification", "text", "internal"),
)

SIGNED_WRITES = {
    "start_session": ("scsql.sessions", SESSION_FIELDS),
    "record_tool_call": ("scsql.tool_calls", TOOL_CALL_FIELDS),
    "record_outcome": ("scsql.outcomes", OUTCOME_FIELDS),
}

for _function, (_table, _fields) in SIGNED_WRITES.items():
    signed_write(_function, _table, _fields)


MAINTENANCE_EVERY = 600.0  # seconds between partition maintenance runs of one worker
_last_maintenance: dict[int, float] = {}


def maintain_partitions(agent: Agent) -> list[dict]:
    """Run partition maintenance once (scsql.maintain_partitions); returns its actions."""
    with agent.transaction() as conn:
        return conn.execute("select * from scsql.maintain_partitions()").fetchall()


def _partitions_job(agent: Agent) -> int:
    now = time.monotonic()
    if now - _last_maintenance.get(id(agent), -MAINTENANCE_EVERY) < MAINTENANCE_EVERY:
        return 0
    _last_maintenance[id(agent)] = now
    # Creating partitions is not "more work pending": report 0 so the worker sleeps.
    maintain_partitions(agent)
    return 0


def jobs() -> list[Job]:
    return [Job("partitions", _partitions_job)]
