"""The MCP server, driven by the SDK's own client over stdio."""

from __future__ import annotations

import json
import subprocess
import sys

from ..helpers import mcp_env, run_client


def test_client_lists_tools_and_whoami_is_the_named_agent(scsql_db):
    project = scsql_db.project()
    a = scsql_db.agent("mcp_a", project)
    scsql_db.agent("mcp_b", project)

    async def script(client):
        tools = await client.list_tools()
        who = await client.call_tool("whoami", {})
        forged = await client.call_tool("whoami", {"agent": scsql_db.agents["mcp_b"].name})
        status = await client.call_tool("status", {})
        unknown = await client.call_tool("register_agent", {"name": "x"})
        typed = await client.call_tool("record_tool_call", {"tool": "Read", "input_tokens": 1.7})
        return tools, who, forged, status, unknown, typed

    tools, who, forged, status, unknown, typed = run_client(scsql_db, a.name, script)
    # Refusals carry a code: a tool the agent lacks, an argument of the wrong type.
    assert unknown.is_error and unknown.content[0].text.startswith("42501")
    assert typed.is_error and ": SC010" in typed.content[0].text and "input_tokens" in typed.content[0].text
    names = {t.name for t in tools.tools}
    assert {"whoami", "status"} <= names
    assert not names & {"register_agent", "revoke_agent", "create_project"}  # admin functions are not tools
    assert not any(n.startswith("_") for n in names)
    whoami_tool = next(t for t in tools.tools if t.name == "whoami")
    assert "never from an argument" in whoami_tool.description
    assert not who.is_error
    assert json.loads(who.content[0].text)["agent"] == a.name
    assert forged.is_error and "agent" in forged.content[0].text  # unknown arguments are refused
    assert ": SC010" in forged.content[0].text
    assert json.loads(status.content[0].text)["schema_version"] >= 1


def test_mcp_refuses_to_start_without_an_agent(scsql_db):
    proc = subprocess.run([sys.executable, "-m", "scsql", "mcp"], env=mcp_env(scsql_db),
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "SC035" in lines[0] and "--agent" in lines[0]


def test_mcp_refuses_a_revoked_agent(scsql_db):
    from scsql.core import roles

    project = scsql_db.project()
    a = scsql_db.agent("mcp_rev", project)
    roles.revoke_agent(scsql_db.admin, a.name)
    proc = subprocess.run([sys.executable, "-m", "scsql", "mcp", "--agent", a.name], env=mcp_env(scsql_db),
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert "SC002" in proc.stderr
