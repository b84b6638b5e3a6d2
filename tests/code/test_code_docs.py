"""docs/code.md's MCP examples, called as written through a real MCP server
(``scsql mcp``, over stdio) on the repository its shell example indexes (the
README tour's: src/encoding.py), each answer holding what the page shows of
it. The page's shell and SQL blocks are run by tests/system/test_readme.py."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from scsql.core import roles
from scsql.memory import indexer

from ..helpers import run_client

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "code.md"


def mcp_examples() -> list[tuple[dict, object]]:
    """(call, answer shown) for each call block of the page's MCP section."""
    section = PAGE.read_text().split("## From an MCP client", 1)[1].split("\n## ", 1)[0]
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", section, re.S)]
    return [(call, answer) for call, answer in zip(blocks[::2], blocks[1::2], strict=True)]


def holds(shown, actual) -> bool:
    """ACTUAL holds SHOWN: its keys, a list's items among actual's, a multi-line text's lines among actual's."""
    if isinstance(shown, dict):
        return isinstance(actual, dict) and all(k in actual and holds(v, actual[k]) for k, v in shown.items())
    if isinstance(shown, list):
        return isinstance(actual, list) and all(any(holds(s, a) for a in actual) for s in shown)
    if isinstance(shown, str) and "\n" in shown:
        return isinstance(actual, str) and {x.strip() for x in shown.splitlines()} <= {
            x.strip() for x in actual.splitlines()}
    return shown == actual


def test_the_pages_mcp_examples_answer_as_shown(scsql_db, tmp_path):
    examples = mcp_examples()
    assert {call["name"] for call, _ in examples} >= {"repo_map", "file_card", "graph_neighbors", "graph_path"}
    root = (tmp_path / "work").resolve()
    (root / "src").mkdir(parents=True)
    shutil.copy(REPO / "scsql" / "audit" / "encoding.py", root / "src" / "encoding.py")
    project = f"docs{abs(hash(str(root))) % 10**6}"
    roles.create_project(scsql_db.admin, project, str(root))
    agent = scsql_db.agent("docs", project)
    indexer.index_tree(agent, root, progress=False)

    async def script(client):
        out = []
        for call, _ in examples:
            result = await client.call_tool(call["name"], call["arguments"])
            assert not result.is_error, (call, result.content[0].text)
            out.append(json.loads(result.content[0].text))
        return out

    answers = run_client(scsql_db, agent.name, script)
    for (call, shown), actual in zip(examples, answers, strict=True):
        assert holds(shown, actual), (call, json.dumps(actual)[:2000])
