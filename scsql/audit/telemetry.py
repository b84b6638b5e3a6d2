"""Telemetry writes (sessions, tool calls, outcomes), signed by the agent.

The SQL functions ``scsql.start_session``, ``scsql.record_tool_call`` and
``scsql.record_outcome`` write chained rows; the declarations below make the
registry sign each call with the agent's key (see :mod:`.signing`), so the
MCP tools of the same names take only the content arguments. Free text
(titles, previews, summaries, evidence) is signed redacted (``redact=True``):
the database refuses signed text that still holds a secret.
"""

from __future__ import annotations


from .signing import SignedField, SignedTable

SESSION_FIELDS = (
    SignedField("client", "text"),
    SignedField("model", "text"),
    SignedField("title", "text", redact=True),
    # Appended fields (sql/14_capture.sql): what a hook knows of the session.
    SignedField("external_id", "text", appended=True),
    SignedField("cwd", "text", appended=True, redact=True),
    SignedField("git_branch", "text", appended=True),
    SignedField("git_commit", "text", appended=True),
    SignedField("source", "text", appended=True),
    SignedField("occurred_at", "ts", appended=True),
    SignedField("altered", "jsonb", appended=True, redact=True),
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
    SignedField("input_preview", "text", redact=True, digested=True),
    SignedField("output_preview", "text", redact=True, digested=True),
    # Appended fields (sql/14_capture.sql): what a hook knows of the call.
    SignedField("tool_use_id", "text", appended=True),
    SignedField("files", "jsonb", appended=True, redact=True),
    SignedField("scsql_tool", "bool", appended=True),
    SignedField("imported", "bool", appended=True),
    SignedField("input_key", "text", appended=True, redact=True, digested=True),
    SignedField("occurred_at", "ts", appended=True),
    # How capture made its text storable (scsql/hooks/storable.py).
    SignedField("altered", "jsonb", appended=True, redact=True),
)

PROMPT_FIELDS = (
    SignedField("session_id", "int"),
    SignedField("text", "text", redact=True, digested=True),
    SignedField("imported", "bool"),
    SignedField("occurred_at", "ts"),
    SignedField("altered", "jsonb", appended=True, redact=True),
)

OUTCOME_FIELDS = (
    SignedField("tool_call_id", "int"),
    SignedField("session_id", "int"),
    SignedField("task_ref", "text"),
    SignedField("kind", "text"),
    SignedField("signal", "text", "agent"),
    SignedField("confidence", "numeric"),
    SignedField("summary", "text", redact=True, digested=True),
    SignedField("evidence", "text", redact=True, digested=True),
    SignedField("classification", "text", "internal"),
)

MODEL_CALL_FIELDS = (
    SignedField("session_id", "int"),
    SignedField("message_id", "text"),
    SignedField("model", "text"),
    SignedField("input_tokens", "int", 0),
    SignedField("output_tokens", "int", 0),
    SignedField("cache_write_tokens", "int", 0),
    SignedField("cache_read_tokens", "int", 0),
    SignedField("tool_use_ids", "jsonb"),
    SignedField("occurred_at", "ts"),
)

SESSIONS = SignedTable("scsql.sessions", SESSION_FIELDS)
TOOL_CALLS = SignedTable("scsql.tool_calls", TOOL_CALL_FIELDS)
OUTCOMES = SignedTable("scsql.outcomes", OUTCOME_FIELDS)
PROMPTS = SignedTable("scsql.prompts", PROMPT_FIELDS)
MODEL_CALLS = SignedTable("scsql.model_calls", MODEL_CALL_FIELDS)

SIGNED_WRITES = {"start_session": SESSIONS, "record_tool_call": TOOL_CALLS, "record_outcome": OUTCOMES,
                 "open_session": SESSIONS, "capture_tool_call": TOOL_CALLS, "record_prompt": PROMPTS,
                 "record_model_call": MODEL_CALLS}

ADAPTERS = {function: table.adapter() for function, table in SIGNED_WRITES.items()}
