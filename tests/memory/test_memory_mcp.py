"""Memory over MCP, driven by the SDK's client: an agent remembers a fact,
indexes a directory on its machine, finds a chunk by an identifier and by a
paraphrase, and opens the file at the cited lines."""

from __future__ import annotations

import json
import textwrap

from scsql.core import roles

from ..helpers import run_client

MEMORY_TOOLS = {"remember", "forget", "recall_context", "pack", "search", "search_global", "index",
                "summarize_session"}


def _json(result):
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


def _write_ledger_repo(root):
    """Creates a git working tree at ROOT with src/ledger.py (a hash-chained ledger) and a README."""
    (root / ".git").mkdir(parents=True)
    (root / "src").mkdir()
    (root / "src" / "ledger.py").write_text(textwrap.dedent('''\
        """The audit ledger."""
        import hashlib


        def append_row(rows, payload):
            """Add a row that carries the hash of the row before it."""
            prev = rows[-1]["hash"] if rows else "0" * 64
            rows.append({"payload": payload, "hash": hashlib.sha256((prev + payload).encode()).hexdigest()})


        def verify_chain(rows):
            """Recompute each row's hash from the previous one; False at the first broken link."""
            prev = "0" * 64
            for row in rows:
                if row["hash"] != hashlib.sha256((prev + row["payload"]).encode()).hexdigest():
                    return False
                prev = row["hash"]
            return True
        '''))
    (root / "README.md").write_text("# Ledger\n\nA tiny example project.\n\n## Usage\n\nCall append_row.\n")


async def _memory_session(client, root):
    """Lists the tools and makes every memory call of the session over MCP; returns each result by name."""
    tools = {t.name: t for t in (await client.list_tools()).tools}
    out = {"tools": tools}
    out["warm"] = _json(await client.call_tool("search", {"query": "warm up the model"}))
    out["remember"] = _json(await client.call_tool(
        "remember", {"key": "ledger.rule", "value": "Never rewrite a ledger row; append a correction.",
                     "importance": 5}))
    out["index"] = _json(await client.call_tool("index", {"path": str(root)}))
    out["again"] = _json(await client.call_tool("index", {"path": str(root)}))
    out["by_name"] = _json(await client.call_tool("search", {"query": "verifyChain", "k": 3}))
    out["by_meaning"] = _json(await client.call_tool(
        "search", {"query": "check that no record in the log was altered", "k": 3, "mode": "vector"}))
    out["summary"] = _json(await client.call_tool(
        "summarize_session", {"summary": {"done": ["indexed the ledger"], "decisions": ["hash chain per row"],
                                          "files": ["src/ledger.py"], "open_tasks": ["signatures"]}}))
    out["recall"] = _json(await client.call_tool("recall_context", {"budget": 500}))
    out["pack"] = _json(await client.call_tool("pack", {"intent": "fix the ledger verification", "budget": 400}))
    out["global"] = _json(await client.call_tool("search_global", {"query": "append_row"}))
    out["forget"] = [_json(await client.call_tool("forget", {"key": "ledger.rule"})) for _ in range(2)]
    out["bad"] = await client.call_tool("search", {"query": "   "})
    out["manifest"] = await client.call_tool("index", {"path": str(root), "manifest": []})
    return out


def _check_tools_remember_and_index(out):
    """The memory tools are listed without internal parameters; remember stores and index is incremental."""
    tools = out["tools"]
    assert MEMORY_TOOLS <= set(tools)
    assert "manifest" not in json.dumps(tools["index"].input_schema)
    assert "query_embedding" not in json.dumps(tools["search"].input_schema)
    assert "untrusted" in tools["search"].description
    assert out["warm"] == []
    assert out["remember"][0]["stored"] == "memory"
    assert (out["index"]["indexed"], out["index"]["removed"], out["index"]["failed"]) == (2, [], [])
    assert (out["again"]["indexed"], out["again"]["unchanged"]) == (0, 2)


def _check_search_hits(out, root):
    """Search finds verify_chain by identifier, citing the exact lines and span, and by meaning alone."""
    hit = out["by_name"][0]
    # A small definition shares its chunk with its neighbours: the anchor names them all.
    assert hit["source_path"] == "src/ledger.py" and "verify_chain" in hit["anchor"].split(", ")
    lines = (root / hit["source_path"]).read_text().split("\n")
    assert "\n".join(lines[hit["line_start"] - 1:hit["line_end"]]) == hit["content"]
    start, end = hit["text_span"]
    assert (root / hit["source_path"]).read_text()[start:end] == hit["content"]
    assert hit["trust"] == "internal" and hit["chunk_hash"]

    meaning = {(h["source_path"], h["anchor"]): h["retrievers"] for h in out["by_meaning"]}
    assert meaning[("src/ledger.py", hit["anchor"])] == ["vector"], out["by_meaning"]


def _check_context_forget_and_errors(out, agent, project):
    """Summary, recall and pack respect their budgets; search_global, forget and bad input behave."""
    assert out["summary"][0]["path"].startswith(f"session:{agent.name}/")
    sections = [r["section"] for r in out["recall"]]
    assert sections[0] == "fact" and "session" in sections
    assert out["recall"][0]["content"].startswith("ledger.rule: Never rewrite")
    assert sum(r["tokens"] for r in out["recall"]) <= 500
    kinds = {p["kind"] for p in out["pack"]}
    assert "fact" in kinds and "chunk" in kinds and sum(p["tokens"] for p in out["pack"]) <= 400
    assert {h["project"] for h in out["global"]} == {project}
    assert out["forget"] == [True, False]
    assert out["bad"].is_error and "SC205" in out["bad"].content[0].text
    assert out["manifest"].is_error and "manifest" in out["manifest"].content[0].text


def test_agent_remembers_indexes_and_finds_code_with_citations(scsql_db, tmp_path):
    root = tmp_path / "repo"
    project = scsql_db.project()
    roles.set_project_root(scsql_db.admin, project, str(root))  # index reads only below the root
    agent = scsql_db.agent("mcp_mem", project)
    _write_ledger_repo(root)

    out = run_client(scsql_db, agent.name, lambda client: _memory_session(client, root))
    _check_tools_remember_and_index(out)
    _check_search_hits(out, root)
    _check_context_forget_and_errors(out, agent, project)
