"""The Python boundary: what registry.Api accepts is what the MCP schema
accepts, what it signs is what the database stores, and every refusal
carries a code from scsql.error_codes."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest

from scsql.core.errors import ScsqlError
from scsql.api import Api
from scsql.audit.verify import verify


def _count(scsql_db, table: str) -> int:
    with scsql_db.connect() as conn:
        return conn.execute(f"select count(*) as n from {table}").fetchone()["n"]


def _codes(scsql_db) -> set[str]:
    with scsql_db.connect() as conn:
        return {r["code"] for r in conn.execute("select code from scsql.error_codes").fetchall()}


def test_an_integer_argument_takes_only_an_integer(scsql_db):
    """record_tool_call(input_tokens=1.7) was signed as 1 and stored as 2: the
    row then failed verification. Now anything but an int in range is SC010
    and nothing is stored."""
    project = scsql_db.project()
    a = scsql_db.agent("ints", project)
    api = Api(a)
    for value in (1.7, 2.0, True, "3", -0.5, math.inf, math.nan, 2**31, Decimal("1")):
        with pytest.raises(ScsqlError) as err:
            api.call("record_tool_call", tool="Read", input_tokens=value)
        assert err.value.code == "SC010" and "input_tokens" in err.value.message, value
    assert _count(scsql_db, "scsql.tool_calls") == 0
    ok = api.call("record_tool_call", tool="Read", input_tokens=7)
    assert ok["tool_call_id"]
    report = verify(scsql_db.admin, workers=1, progress=False)
    assert report.ok and report.rows == 1, report.breaks


def test_what_is_signed_is_what_is_stored(scsql_db):
    """Decimals, floats that jsonb keeps exactly, numeric confidence given
    three ways: each chained row verifies, and the stored jsonb is the value
    the registry validated."""
    project = scsql_db.project()
    a = scsql_db.agent("orch", project, team_role="orchestrator")
    api = Api(a)
    payload = {"price": Decimal("1.10"), "big": 1e16, "tiny": 1e-7, "neg0": -0.0, "list": [0.1, 2, Decimal("-3.000")],
               "é": "naïve\n\t\u2028", "nested": {"b": {"a": [None, True, False]}}}
    sent = api.call("broadcast", type="STATUS", to_role="developer", payload=payload)
    assert sent["message_id"]
    for confidence in (Decimal("0.10"), 0.9, 1):
        api.call("record_outcome", kind="shipped", summary="s", task_ref="T-1", confidence=confidence)
    api.call("record_tool_call", tool="Read", input_tokens=2**31 - 1, output_tokens=0, latency_ms=0)
    report = verify(scsql_db.admin, workers=1, progress=False)
    assert report.ok, report.breaks
    assert report.rows == 5 + 4  # and the memory history of two experiment learnings, each added and indexed
    with scsql_db.connect() as conn:
        stored = conn.execute("select payload::text as t from scsql.messages").fetchone()["t"]
        conf = [r["c"] for r in conn.execute("select confidence as c from scsql.outcomes order by seq").fetchall()]
    assert '"price": 1.10' in stored and '"big": 10000000000000000' in stored and '"tiny": 0.0000001' in stored
    assert '"neg0": 0.0' in stored and '"list": [0.1, 2, -3.000]' in stored
    assert conf == [Decimal("0.10"), Decimal("0.9"), Decimal("1")]


def _nested(depth: int):
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


BAD_PAYLOADS = [
    ({"x": float("nan")}, "SC010"),
    ({"x": float("inf")}, "SC010"),
    ({"x": Decimal("NaN")}, "SC010"),
    ({"x": Decimal("-Infinity")}, "SC010"),
    ({"x": Decimal("1E+200000")}, "SC010"),
    ({"x": 10**5000}, "SC010"),
    ({1: "non-string key"}, "SC010"),
    ({"x": {1, 2}}, "SC010"),
    ({"x": b"bytes"}, "SC010"),
    ({"x": "a\x00b"}, "SC222"),
    ({"a\x00": 1}, "SC222"),
    ({"x": ["\ud800"]}, "SC010"),
    (_nested(120), "SC010"),
]


def test_a_jsonb_argument_is_json_or_a_coded_refusal(scsql_db):
    """A Decimal in a jsonb payload was a bare TypeError; NaN reached the
    server as an uncoded 22P02; NUL was XX000."""
    project = scsql_db.project()
    a = scsql_db.agent("orch", project, team_role="orchestrator")
    api = Api(a)
    for payload, code in BAD_PAYLOADS:
        with pytest.raises(ScsqlError) as err:
            api.call("broadcast", type="STATUS", to_role="developer", payload=payload)
        assert err.value.code == code, (payload, err.value)
        assert err.value.code in _codes(scsql_db)
    assert _count(scsql_db, "scsql.messages") == 0


TEXT_CALLS = [
    ("record_tool_call", {"tool": "Read"}, ["tool", "status", "model", "origin", "input_preview", "output_preview"]),
    ("record_outcome", {"kind": "failed", "summary": "s", "task_ref": "T"},
     ["kind", "summary", "task_ref", "signal", "evidence", "classification"]),
    ("start_session", {"client": "c"}, ["client", "model", "title"]),
    ("broadcast", {"type": "STATUS", "to_role": "developer"}, ["type", "to_role", "to_agent"]),
    ("enqueue_task", {"role": "developer", "payload": {}}, ["role", "acceptance_criteria"]),
    ("cancel_task", {"task": 1}, ["reason"]),
    ("cost_report", {}, ["group_by"]),
    ("remember", {"key": "k", "value": "v"}, ["key", "value"]),
]


def test_a_nul_byte_is_one_code_in_every_subsystem(scsql_db):
    """A NUL byte in a text argument of the audit, queue and broadcast tools
    was XX000 (the driver's own error); now it is SC222 everywhere, in text,
    in arrays and inside jsonb, and nothing is stored."""
    project = scsql_db.project()
    a = scsql_db.agent("nul", project, team_role="orchestrator")
    api = Api(a)
    for function, base, texts in TEXT_CALLS:
        for name in texts:
            with pytest.raises(ScsqlError) as err:
                api.call(function, **{**base, name: "before\x00after"})
            assert err.value.code == "SC222", (function, name, err.value)
    with pytest.raises(ScsqlError) as err:
        api.call("enqueue_task", role="developer", payload={"k": ["x\x00"]})
    assert err.value.code == "SC222"
    with pytest.raises(ScsqlError) as err:
        api.call("enqueue_task", role="developer", payload={}, exclusive_files=["a.py", "b\x00.py"])
    assert err.value.code == "SC222"
    for table in ("scsql.tool_calls", "scsql.outcomes", "scsql.sessions", "scsql.messages", "scsql.tasks"):
        assert _count(scsql_db, table) == 0
    assert verify(scsql_db.admin, workers=1, progress=False).ok


def test_the_python_api_refuses_what_the_mcp_schema_refuses(scsql_db):
    """Unknown and hidden arguments, wrong types inside arrays, strings for
    numbers: SC010 naming the argument, through Api as through MCP."""
    project = scsql_db.project()
    a = scsql_db.agent("schema", project)
    api = Api(a)
    fn = api.functions["record_tool_call"]
    schema = fn.arg_model().model_json_schema(by_alias=True)
    assert {"at", "key_id", "signature"}.isdisjoint(schema["properties"])
    assert schema["properties"]["input_tokens"]["anyOf"][0]["maximum"] == 2**31 - 1
    cases = [
        ("record_tool_call", {"tool": "Read", "signature": b"x" * 64}, "signature"),
        ("record_tool_call", {"tool": "Read", "agent_id": "someone"}, "agent_id"),
        ("record_tool_call", {"tool": 5}, "tool"),
        ("search", {"query": "x", "kinds": ["file", 3]}, "kinds"),
        ("search", {"query": "x", "k": "5"}, "k"),
        ("search", {"query": "x", "b": float("nan")}, "b"),
        ("search", {"query": "x", "since": "yesterday"}, "since"),
        ("search", {"query": "x", "since": 1700000000}, "since"),
        ("fail_task", {"task": 1, "token": 1, "error": "e", "retry": 1}, "retry"),
        ("claim_task", {"wait_seconds": "1"}, "wait_seconds"),
        ("record_tool_call", {"tool": "\udcff"}, "tool"),
    ]
    for function, args, name in cases:
        with pytest.raises(ScsqlError) as err:
            api.call(function, **args)
        assert err.value.code == "SC010" and name in err.value.message, (function, args, err.value)
    assert _count(scsql_db, "scsql.tool_calls") == 0


def test_database_and_driver_errors_map_to_catalogued_codes(scsql_db):
    """Whatever PostgreSQL or psycopg raises reaches the caller with a code
    from the catalogue; the original SQLSTATE stays on the error."""
    project = scsql_db.project()
    a = scsql_db.agent("map", project)
    known = _codes(scsql_db)
    assert {"SC222", "SC037", "SC010"} <= known
    cases = [
        ("select %s::text", ["a\x00b"], "SC222", "client"),  # the driver's own refusal
        ("select %s::text", ["\ud800"], "SC010", None),  # not UTF-8
        ("select 1 / 0", [], "SC010", "22012"),
        ("select 'x'::integer", [], "SC010", "22P02"),
        ("select * from scsql_no_such_table", [], "SC037", "42P01"),
        ("select scsql.whoami(1)", [], "SC037", "42883"),
    ]
    for query, params, code, state in cases:
        with pytest.raises(ScsqlError) as err, a.transaction() as conn:
            conn.execute(query, params)
        assert err.value.code == code and err.value.code in known, (query, err.value)
        if state:
            assert err.value.sqlstate == state
            assert state == "client" or state in err.value.message
    with pytest.raises(ScsqlError) as err, a.transaction() as conn:
        conn.execute("select scsql.forget(%s)", ["k"])
        conn.execute("select scsql.register_agent('x', 'p', 'developer', '\\x00'::bytea)")
    assert err.value.code == "42501"
