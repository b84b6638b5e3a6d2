"""The MCP tools' schemas: what a model reads about each argument, where it
comes from (the structured part of COMMENT ON FUNCTION, read by
scsql.core.registry), and what it costs a session."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import anyio
import mcp_types
import pytest

from scsql.api import Api
from scsql.core.registry import read_comment
from scsql.mcp_server import build, schema_size

from ..helpers import mcp_env, run_client

HIDDEN = {"record_tool_call", "start_session"}

# Where each argument with fixed choices or a range is stored: its constraints
# must be those of the column's CHECK constraints, read from pg_constraint.
STORED_IN = {
    ("record_outcome", "kind"): ("outcomes", "kind"),
    ("resolve_conflict", "keep"): ("fact_conflicts", "resolution"),
    ("record_outcome", "classification"): ("outcomes", "classification"),
    ("record_outcome", "confidence"): ("outcomes", "confidence"),
    ("record_tool_call", "status"): ("tool_calls", "status"),
    ("capture_tool_call", "status"): ("tool_calls", "status"),
    ("capture_tool_call", "origin"): ("tool_calls", "origin"),
    ("open_session", "source"): ("sessions", "source"),
    ("record_tool_call", "origin"): ("tool_calls", "origin"),
    ("record_tool_call", "input_tokens"): ("tool_calls", "input_tokens"),
    ("record_tool_call", "output_tokens"): ("tool_calls", "output_tokens"),
    ("record_tool_call", "latency_ms"): ("tool_calls", "latency_ms"),
    ("broadcast", "type"): ("messages", "type"),
    ("remember", "importance"): ("memory_facts", "importance"),
    ("index_text", "trust"): ("kb_sources", "trust"),
    ("index_text", "tier"): ("kb_sources", "tier"),
    ("search", "kinds"): ("kb_sources", "kind"),
    ("search", "trust"): ("kb_sources", "trust"),
    ("search_global", "kinds"): ("kb_sources", "kind"),
    ("search_global", "trust"): ("kb_sources", "trust"),
    ("search_confidence", "kinds"): ("kb_sources", "kind"),
    ("search_confidence", "trust"): ("kb_sources", "trust"),
    ("learnings", "kind"): ("learnings", "kind"),
    ("enqueue_task", "complexity"): ("tasks", "complexity"),
    ("enqueue_task", "max_attempts"): ("tasks", "max_attempts"),
}
# Choices beyond the column's that the function adds: search finds facts too.
ADDED_BY_FUNCTION = {("search", "kinds"): ["fact", "decision"], ("search_global", "kinds"): ["fact", "decision"],
                     ("search_confidence", "kinds"): ["fact", "decision"]}
# Choices a function checks itself (not a column): each published choice is
# called for real below, and one outside them is refused.
CHECKED_BY_FUNCTION = {
    ("search", "mode"): lambda v: {"query": "x", "mode": v},
    ("search_global", "mode"): lambda v: {"query": "x", "mode": v},
    ("search_confidence", "mode"): lambda v: {"query": "x", "mode": v},
    ("search", "fusion"): lambda v: {"query": "x", "fusion": v},
    ("search_global", "fusion"): lambda v: {"query": "x", "fusion": v},
    ("cost_report", "group_by"): lambda v: {"group_by": v},
    ("index_text", "kind"): lambda v: {"path": f"n/{v}", "content": "text", "kind": v},
}

# tools/list of the default tools, as compact JSON. Measured (scsql bench tools):
# 38,880 bytes for 37 tools before argument descriptions, hidden tools and
# tuning arguments (about 9,700 tokens at 4 bytes a token), 18,322 after. The
# bound is half of before a tool, so a new tool may cost what an old one does.
MAX_BYTES_PER_TOOL = 38_880 / 37 / 2


@pytest.fixture
def agent(scsql_db):
    return scsql_db.agent("schemas", scsql_db.project())


def _props(tool) -> dict[str, dict]:
    return tool.input_schema.get("properties", {})


def _column_constraints(conn, table: str, column: str) -> dict:
    """Choices and bounds the CHECK constraints of scsql.TABLE(COLUMN) allow, from pg_constraint."""
    defs = [r["def"] for r in conn.execute("""
        select pg_get_constraintdef(c.oid) as def
        from pg_constraint c join pg_attribute a on a.attrelid = c.conrelid and a.attnum = any(c.conkey)
        where c.contype = 'c' and c.conrelid = ('scsql.' || %s)::regclass and a.attname = %s
          and cardinality(c.conkey) = 1
    """, (table, column)).fetchall()]
    out: dict = {}
    for d in defs:
        m = re.search(rf"\b{column} = ANY \(ARRAY\[(.*?)\]\)", d)
        if m:
            out["enum"] = re.findall(r"'((?:[^']|'')*)'::text", m.group(1))
        for op, key in ((">=", "minimum"), ("<=", "maximum")):
            m = re.search(rf"\b{column} {op} \(?(-?[\d.]+)\)?", d)
            if m:
                out[key] = float(m.group(1))
    assert out, f"no choices or range in the CHECK constraints of {table}.{column}: {defs}"
    return out


def test_every_argument_of_every_tool_has_a_description_and_a_json_type(agent):
    tools = build(Api(agent), all_tools=True).tools.listed
    assert len(tools) >= 30
    missing = []
    for tool in tools:
        assert tool.description and "\n" not in tool.description, tool.name
        for name, prop in _props(tool).items():
            if not prop.get("description") or prop.get("type") not in (
                    "string", "integer", "number", "boolean", "object", "array"):
                missing.append(f"{tool.name}.{name}: {prop}")
            if "items" in prop:  # an SQL array: its items typed too (a jsonb array says its shape in words)
                assert prop["items"].get("type"), f"{tool.name}.{name}"
    assert missing == []
    by_name = {t.name: t for t in tools}
    assert _props(by_name["summarize_session"])["summary"]["type"] == "object"
    assert _props(by_name["broadcast"])["payload"]["type"] == "object"
    assert _props(by_name["index_text"])["spans"]["type"] == "array"
    # Defaults come from the function's signature.
    assert _props(by_name["search"])["k"]["default"] == 10
    assert _props(by_name["search"])["mode"]["default"] == "hybrid"
    assert _props(by_name["record_outcome"])["classification"]["default"] == "internal"
    assert _props(by_name["claim_task"])["lease_seconds"]["default"] == 300


def test_every_argument_line_of_a_comment_names_an_argument_of_its_function(agent):
    """A misspelt p_name line would describe nothing: each names a real argument."""
    with agent.transaction() as conn:
        rows = conn.execute("select name, description, arg_names from scsql_caller.api()").fetchall()
    wrong = [(r["name"], a) for r in rows for a in read_comment(r["description"]).args
             if f"p_{a}" not in r["arg_names"]]
    assert wrong == []


def test_choices_and_ranges_are_the_check_constraints_of_the_column_each_argument_is_stored_in(agent, scsql_db):
    tools = {t.name: t for t in build(Api(agent), all_tools=True).tools.listed}
    with scsql_db.connect() as conn:
        for (tool, arg), (table, column) in STORED_IN.items():
            prop = _props(tools[tool])[arg]
            target = prop["items"] if prop["type"] == "array" else prop
            allowed = _column_constraints(conn, table, column)
            if "enum" in allowed:
                assert target.get("enum") == allowed["enum"] + ADDED_BY_FUNCTION.get((tool, arg), []), (tool, arg)
            for key in ("minimum", "maximum"):
                if key in allowed:
                    assert float(target.get(key, "nan")) == allowed[key], (tool, arg, key)
    # Every published choice is accounted for here: a new one needs a line above.
    with_choices = {(t.name, n) for t in tools.values() for n, p in _props(t).items()
                    if "enum" in p or "enum" in p.get("items", {})}
    assert with_choices <= set(STORED_IN) | set(CHECKED_BY_FUNCTION)
    assert {("record_outcome", "kind"), ("record_tool_call", "status"), ("broadcast", "type"),
            ("search", "mode"), ("record_outcome", "classification")} <= with_choices


def test_choices_a_function_checks_itself_are_the_ones_it_accepts(agent):
    from scsql.api import Api
    from scsql.core.errors import ScsqlError

    api = Api(agent)
    tools = {t.name: t for t in build(Api(agent), all_tools=True).tools.listed}
    for (tool, arg), args in CHECKED_BY_FUNCTION.items():
        choices = _props(tools[tool])[arg]["enum"]
        for value in choices:
            api.call(tool, **args(value))  # accepted
        with pytest.raises(ScsqlError):
            api.call(tool, **args("no-such-choice"))


def test_tools_describe_no_argument_they_do_not_take(agent):
    """index takes a directory (not the SQL function's manifest); broadcast
    and the signed writes are signed by scsql (no at, key_id, signature)."""
    server = build(Api(agent), all_tools=True)
    for tool in server.tools.listed:
        fn = server.tools.functions[tool.name]
        text = json.dumps([tool.description, tool.input_schema])
        for name in fn.adapter.supplies:
            if name != "at":  # an English word too
                assert not re.search(rf"\b{name}\b", text, re.IGNORECASE), (tool.name, name)
    tools = {t.name: t for t in server.tools.listed}
    assert set(_props(tools["index"])) == {"path"}
    assert set(_props(tools["broadcast"])) == {"type", "to_role", "to_agent", "payload", "task"}
    assert "signature" not in tools["broadcast"].description


def test_hooked_tools_are_hidden_by_default_and_listed_when_configured(agent, monkeypatch):
    monkeypatch.delenv("SCSQL_MCP_TOOLS", raising=False)
    default = build(Api(agent)).tools
    assert not HIDDEN & {t.name for t in default.listed}
    assert {"record_outcome", "search", "remember", "summarize_session"} <= {t.name for t in default.listed}
    assert HIDDEN <= {t.name for t in build(Api(agent), all_tools=True).tools.listed}
    monkeypatch.setenv("SCSQL_MCP_TOOLS", "all")
    assert HIDDEN <= {t.name for t in build(Api(agent)).tools.listed}
    # Hidden from the list, not taken away: a client that names it may still call it.
    result = anyio.run(default.call_tool, None,
                       mcp_types.CallToolRequestParams(name="record_tool_call", arguments={"tool": "Read"}))
    assert not result.is_error, result.content[0].text
    # Which tools are hidden is said by their functions' comments, in the database.
    for name in HIDDEN:
        assert read_comment(_comment(agent, name)).hidden


def _comment(agent, name: str) -> str:
    with agent.transaction() as conn:
        return conn.execute("select description from scsql_caller.api() where name = %s", (name,)).fetchone()[
            "description"]


def test_scsql_mcp_all_tools_flag_lists_the_hidden_tools(scsql_db):
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    a = scsql_db.agent("schemas_cli", scsql_db.project())
    default = run_client(scsql_db, a.name, lambda client: client.list_tools())
    assert not HIDDEN & {t.name for t in default.tools}

    async def main():
        params = StdioServerParameters(command=sys.executable,
                                       args=["-m", "scsql", "mcp", "--agent", a.name, "--all-tools"],
                                       env=mcp_env(scsql_db))
        async with Client(params, read_timeout_seconds=60) as client:
            return await client.list_tools()

    assert HIDDEN <= {t.name for t in anyio.run(main).tools}


def test_the_default_tool_list_costs_at_most_half_of_what_it_did(agent, monkeypatch):
    monkeypatch.delenv("SCSQL_MCP_TOOLS", raising=False)
    listed = build(Api(agent)).tools.listed
    size = len(schema_size(listed).encode())
    assert size <= len(listed) * MAX_BYTES_PER_TOOL, \
        f"tools/list is {size} bytes for {len(listed)} tools; scsql bench tools measures it"


def test_scsql_bench_tools_prints_the_size(scsql_db):
    a = scsql_db.agent("schemas_bench", scsql_db.project())
    env = mcp_env(scsql_db)
    proc = subprocess.run([sys.executable, "-m", "scsql", "bench", "tools", "--agent", a.name, "--json"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["default"]["bytes"] <= len(out["default"]["names"]) * MAX_BYTES_PER_TOOL
    assert out["default"]["bytes"] < out["all_tools"]["bytes"]
    assert out["default"]["bytes_div_4"] == out["default"]["bytes"] // 4
    assert out["default"]["minilm_tokens"] > 0
    assert HIDDEN <= set(out["all_tools"]["names"]) - set(out["default"]["names"])


def test_tuning_arguments_are_left_out_of_the_default_schema_and_still_accepted(agent, monkeypatch):
    monkeypatch.delenv("SCSQL_MCP_TOOLS", raising=False)
    default = {t.name: t for t in build(Api(agent)).tools.listed}
    every = {t.name: t for t in build(Api(agent), all_tools=True).tools.listed}
    tuning = {"rrf_k", "bm25_weight", "vector_weight", "k1", "b", "depth", "fusion", "min_similarity"}
    assert tuning <= set(_props(every["search"])) and not tuning & set(_props(default["search"]))
    assert "query" in _props(default["search"]) and "kinds" in _props(default["search"])
    for tool in ("recall_context", "pack"):
        assert "half_life_days" in _props(every[tool]) and "half_life_days" not in _props(default[tool])
    # Left out of the schema, not refused: a caller that knows the knob may turn it.
    hits = Api(agent).functions["search"].call(agent, {"query": "nothing indexed", "k1": 2.0, "fusion": "rrf"})
    assert hits == []
