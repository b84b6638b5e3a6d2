"""Telemetry writes (sessions, tool calls, outcomes) signed by the agent, and
the background job that maintains their partitions.

The SQL functions ``scsql.start_session``, ``scsql.record_tool_call`` and
``scsql.record_outcome`` write chained rows; the declarations below make the
registry sign each call with the agent's key (see :mod:`scsql.chain`), so the
MCP tools of the same names take only the content arguments.
"""

from __future__ import annotations


from .chain import SignedField, signed_write
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
    SignedField("input_preview", "text"),
    SignedField("output_preview", "text"),
)

OUTCOME_FIELDS = (
    SignedField("tool_call_id", "int"),
    SignedField("session_id", "int"),
    SignedField("task_ref", "text"),
    SignedField("kind", "text"),
    SignedField("signal", "text", "agent"),
    SignedField("confidence", "numeric"),
    SignedField("summary", "text"),
    SignedField("evidence", "text"),
    SignedField("classification", "text", "internal"),
)

SIGNED_WRITES = {
    "start_session": ("scsql.sessions", SESSION_FIELDS),
    "record_tool_call": ("scsql.tool_calls", TOOL_CALL_FIELDS),
    "record_outcome": ("scsql.outcomes", OUTCOME_FIELDS),
}

for _function, (_table, _fields) in SIGNED_WRITES.items():
    signed_write(_function, _table, _fields)


def jobs() -> list[Job]:
    # Partition maintenance takes ACCESS EXCLUSIVE locks that every project's
    # writes queue behind, so no agent may run it: scsql worker runs it over
    # an administrator's connection (cmd_worker.partitions_job).
    return []
