"""The real Claude Code CLI, offline (tests/claude_api.py scripts its API), in
a repository where ``scsql install claude`` wrote the configuration: a file
its Write tool makes is in the index (chunks, symbols, the card's edits) as
soon as the hook server has read it, without a command of anyone's, and a
search of the scsql MCP server in the same session finds it."""

from __future__ import annotations

import json
import os

import pytest

from scsql.api import Api

from ..claude_api import ClaudeApi, Say, Tool, claude_cli, run_claude
from ..helpers import rows, wait_for
from ..hooks.test_claude_code import project  # noqa: F401 - the fixture

pytestmark = pytest.mark.skipif(claude_cli() is None and not os.environ.get("SCSQL_REQUIRE_CLAUDE"),
                                reason="the Claude Code CLI is not installed")


def test_a_file_written_in_a_real_session_is_indexed_and_found(project):  # noqa: F811
    repo, env, agent, _, _ = project
    target = repo / "src" / "fresh.py"
    api = ClaudeApi([
        Tool("Write", file_path=str(target), content="def kangaroo_hop(n):\n    return n * 2\n"),
        Tool("Bash", command="sleep 3", description="let the index settle"),
        Tool("WaitForMcpServers"),
        Tool("mcp__scsql__search", query="kangaroo_hop", k=3),
        Say("Done."),
    ])
    with api:
        run_claude(repo, "Write the hop function.", api, env, allowed="Write Bash WaitForMcpServers mcp__scsql__search")
    assert target.exists()
    hits = wait_for(lambda: Api(agent).call("search", query="kangaroo_hop", mode="bm25", k=3), 30)
    assert hits[0]["source_path"] == "src/fresh.py" and "kangaroo_hop" in hits[0]["defines"]
    assert "src/fresh.py" in json.dumps(api.requests[-1])  # what the session's own search answered
    card = Api(agent).call("file_card", path="src/fresh.py")
    assert [e["tool"] for e in card["edits"]] == ["Write"]
    assert rows(agent, "select name from scsql.code_definitions where name = 'kangaroo_hop'")
