"""The team server, end to end: a real ``scsql serve`` process, driven by
the MCP SDK's own HTTP client and by plain HTTP, acting as the agent each
bearer token names and refusing everything else with an SC code."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx2
import psycopg
import pytest

from scsql.serve import tokens

from ..helpers import VERIFIERS, mcp_env, scsql_process, wait_for

TIMEOUT = 60


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serving(db, *args: str, port: int = 0):
    """``scsql serve`` on DB, on 127.0.0.1 (PORT, or any free one); yields its base URL."""
    proc = scsql_process("serve", "--port", str(port), *args, env=mcp_env(db))
    try:
        line = proc.stdout.readline()
        found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
        assert found, (line, proc.stderr.read() if proc.poll() is not None else "")
        url = found.group(1)
        wait_for(lambda: _healthy(url), timeout=TIMEOUT)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _healthy(url: str) -> bool:
    try:
        return httpx2.get(url + "/healthz", timeout=2).status_code == 200
    except httpx2.HTTPError:
        return False


def token_of(db, agent: str, **kw) -> str:
    return tokens.create(db.admin, agent, **kw)[0]


def mcp(url: str, token: str | None, script, headers: dict | None = None, mode: str = "auto"):
    """``await script(client)`` with the SDK's HTTP client presenting TOKEN."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"

    async def main():
        async with httpx2.AsyncClient(headers=sent, timeout=TIMEOUT) as http:
            async with Client(streamable_http_client(url + "/mcp", http_client=http), mode=mode,
                              read_timeout_seconds=TIMEOUT) as client:
                return await script(client)

    return asyncio.run(main())


def text(result) -> str:
    return result.content[0].text


def refused(url: str, token: str | None, path: str = "/mcp", body: bytes | None = None, **headers) -> httpx2.Response:
    sent = {"content-type": "application/json", "accept": "application/json, text/event-stream", **headers}
    if token is not None:
        sent["authorization"] = f"Bearer {token}"
    body = body if body is not None else json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    return httpx2.post(url + path, content=body, headers=sent, timeout=TIMEOUT)


def sc_code(response: httpx2.Response) -> str:
    """The SC code of a refusal: a JSON-RPC error whose message leads with it and whose data holds it."""
    body = response.json()
    assert body["jsonrpc"] == "2.0" and set(body["error"]) == {"code", "message", "data"}
    code = body["error"]["data"]["code"]
    assert body["error"]["message"].startswith(code)
    return code


@pytest.fixture
def team(scsql_db):
    """Agents a1, a2 of one project and b of another, with a token each."""
    p, q = scsql_db.project(), scsql_db.project()
    a1, a2, b = scsql_db.agent("srv_a1", p), scsql_db.agent("srv_a2", p), scsql_db.agent("srv_b", q)
    return {"db": scsql_db, "a1": a1, "a2": a2, "b": b,
            "tokens": {k: token_of(scsql_db, v.name) for k, v in (("a1", a1), ("a2", a2), ("b", b))}}


def test_each_token_acts_as_its_agent_and_never_reaches_another_projects_rows(team):
    db, t = team["db"], team["tokens"]

    async def as_a1(client):
        names = {x.name for x in (await client.list_tools()).tools}
        who = json.loads(text(await client.call_tool("whoami", {})))
        stored = await client.call_tool("remember", {"key": "deploy-secret-path", "value": "the release runbook "
                                                     "lives in ops/zebra-runbook.md", "importance": 5})
        found = await client.call_tool("search", {"query": "zebra runbook"})
        return names, who, stored, found

    async def as_b(client):
        who = json.loads(text(await client.call_tool("whoami", {})))
        context = await client.call_tool("recall_context", {})
        found = await client.call_tool("search", {"query": "zebra runbook"})
        forged = await client.call_tool("whoami", {"agent": team["a1"].name})
        return who, context, found, forged

    with serving(db) as url:
        names, who, stored, found = mcp(url, t["a1"], as_a1)
        b_who, b_context, b_found, forged = mcp(url, t["b"], as_b, mode="legacy")
    assert {"whoami", "remember", "search", "recall_context"} <= names
    assert not names & {"create_agent_token", "revoke_agent_token", "use_token", "register_agent"}
    assert who["agent"] == team["a1"].name and not stored.is_error
    assert "zebra" in text(found)
    # Agent b works in another project: none of a1's rows reach it, whatever it asks.
    assert b_who["agent"] == team["b"].name
    assert "zebra" not in text(b_context) and "zebra" not in text(b_found)
    assert forged.is_error and ": SC010" in text(forged)  # an argument naming an agent is refused
    with psycopg.connect(db.admin) as conn:
        author = conn.execute("select a.name from scsql.memory_facts f join scsql.agents a on a.agent_id = f.created_by "
                              "where f.key = 'deploy-secret-path'").fetchone()[0]
    assert author == team["a1"].name
    assert VERIFIERS["python"].run(db).ok  # what the server wrote is signed with a1's key, held server side


def test_a_revoked_or_expired_token_is_refused_at_once(team):
    db, t = team["db"], team["tokens"]
    row = tokens.listed(db.admin, team["a2"].name)[0]

    async def twice(client):
        first = await client.call_tool("whoami", {})
        tokens.revoke(db.admin, row["token_id"])
        try:
            await client.call_tool("whoami", {})
        except Exception as exc:  # noqa: BLE001 - the SDK raises the JSON-RPC error
            return first, str(exc)
        return first, None

    with serving(db) as url:
        first, second = mcp(url, t["a2"], twice)
        assert json.loads(text(first))["agent"] == team["a2"].name
        assert second is not None and "SC282" in second
        assert sc_code(refused(url, t["a2"])) == "SC282"
        with psycopg.connect(db.admin) as conn:
            conn.execute("update scsql.agent_tokens set created_at = now() - interval '2 days', "
                         "expires_at = now() - interval '1 day' where agent_id = "
                         "(select agent_id from scsql.agents where name = %s)", (team["a1"].name,))
        expired = refused(url, t["a1"])
        assert expired.status_code == 401 and sc_code(expired) == "SC283"
        assert "invalid_token" in expired.headers["www-authenticate"]
    listed = {r["token_id"]: r for r in tokens.listed(db.admin)}
    assert listed[row["token_id"]]["state"] == "revoked" and listed[row["token_id"]]["last_used_at"] is not None


def test_a_request_cannot_name_another_agent(team):
    db, t = team["db"], team["tokens"]
    a1, a2 = team["a1"].name, team["a2"].name
    secret = t["a1"].rsplit(".", 1)[1]
    with serving(db) as url:
        named = refused(url, t["a1"], **{"x-scsql-agent": a2})
        edited = refused(url, f"scsql.{a2}.{secret}")  # a1's secret, relabelled as a2's token
        nobody = refused(url, f"scsql.nosuchagent.{secret}")
        ok = mcp(url, t["a1"], lambda c: c.call_tool("whoami", {}), headers={"X-Scsql-Agent": a1})
    assert named.status_code == 403 and sc_code(named) == "SC285"
    assert edited.status_code == 401 and sc_code(edited) == "SC281"
    assert nobody.status_code == 401 and sc_code(nobody) == "SC281"  # an unknown agent is told apart from nothing
    assert json.loads(text(ok))["agent"] == a1


def test_missing_token_wrong_scope_rate_and_size_are_refused_with_codes(team):
    db, t = team["db"], team["tokens"]
    hooks_only = token_of(db, team["a1"].name, scope="hooks")
    with serving(db, "--rate", "0.5", "--burst", "3", "--max-request-bytes", "4096") as url:
        assert refused(url, None).status_code == 401 and sc_code(refused(url, None)) == "SC280"
        assert sc_code(refused(url, "not-a-token")) == "SC280"
        scope = refused(url, hooks_only)
        assert scope.status_code == 403 and sc_code(scope) == "SC284"
        big = refused(url, t["b"], body=b"{" + b" " * 8000 + b"}")
        assert big.status_code == 413 and sc_code(big) == "SC287"
        chunked = httpx2.post(url + "/mcp", content=iter([b"{", b" " * 8000, b"}"]), timeout=TIMEOUT,
                              headers={"authorization": f"Bearer {t['b']}", "content-type": "application/json"})
        assert chunked.status_code == 413 and sc_code(chunked) == "SC287"  # no Content-Length: counted as read
        answers = [refused(url, t["a2"]) for _ in range(6)]
    statuses = [r.status_code for r in answers]
    # The burst passes the gate (the MCP transport answers these bare requests); then the rate holds.
    assert all(s not in (401, 403, 413, 429) for s in statuses[:3]) and 429 in statuses[3:], statuses
    limited = next(r for r in answers if r.status_code == 429)
    assert sc_code(limited) == "SC286" and int(limited.headers["retry-after"]) >= 1


def test_hook_events_are_recorded_as_the_tokens_agent_and_name_no_server_path(team):
    db, t = team["db"], team["tokens"]
    checkout = str(Path(__file__).resolve().parents[2])  # a git work tree on this machine, the server's too
    here = subprocess.run(["git", "-C", checkout, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert here  # run locally, the hook server would record this commit for the session's cwd
    event = {"hook_event_name": "PostToolUse", "session_id": "remote-s1", "tool_name": "Bash",
             "tool_input": {"command": "make test"}, "tool_response": {"stdout": "ok"},
             "tool_use_id": "toolu_remote_1", "transcript_path": "/etc/passwd", "cwd": checkout,
             "scsql_git_branch": "feature/remote", "scsql_event_id": "0" * 32}
    with serving(db) as url:
        answer = httpx2.post(url + "/hooks/event", json={"event": event, "budget": 5}, timeout=TIMEOUT,
                             headers={"authorization": f"Bearer {t['b']}"})
        bad = httpx2.post(url + "/hooks/event", json={"nothing": 1}, timeout=TIMEOUT,
                          headers={"authorization": f"Bearer {t['b']}"})
    assert answer.status_code == 200 and answer.json()["degraded"] is None
    assert bad.status_code == 400 and sc_code(bad) == "SC291"
    with psycopg.connect(db.admin) as conn:
        rows = conn.execute("select a.name, s.git_branch, s.git_commit from scsql.tool_calls c join scsql.agents a "
                            "on a.agent_id = c.author_id left join scsql.sessions s on s.project_id = c.project_id "
                            "and s.session_id = c.session_id where c.tool_use_id = 'toolu_remote_1'").fetchall()
    # The branch is the one the client read; no git ran on the server in the directory the event names.
    assert rows == [(team["b"].name, "feature/remote", None)]


def run_hook(command: str, event: dict, env: dict, cwd) -> subprocess.CompletedProcess:
    """A hook command as Claude Code runs it: through the shell, the event on stdin."""
    return subprocess.run(["/bin/sh", "-c", command], input=json.dumps(event), capture_output=True, text=True,
                          timeout=TIMEOUT, env=env, cwd=cwd)


def spooled(home) -> list:
    root = Path(home) / "spool"
    return sorted(p.name for p in root.rglob("*.jsonl") if "failed" not in p.parts) if root.exists() else []


def test_remote_install_writes_no_token_and_its_hooks_spool_while_the_server_is_down(team, tmp_path):
    """scsql install claude --server, committed (project scope): the files name the variable
    that holds the token, never the token; the committed hooks post to the server, spool
    while it is down, and the spool is written, in order, once it answers again."""
    import os

    db, agent, token = team["db"], team["b"].name, team["tokens"]["b"]
    repo, home, bin_dir = tmp_path / "repo", tmp_path / "data", tmp_path / "bin"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    bin_dir.mkdir()
    (bin_dir / "scsql").write_text(f"#!/bin/sh\nPYTHONPATH={Path(__file__).resolve().parents[2]} "
                                   f"exec {sys.executable} -m scsql \"$@\"\n")
    (bin_dir / "scsql").chmod(0o755)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    base = {k: v for k, v in os.environ.items() if not k.startswith("SCSQL_")}
    client = {**base, "SCSQL_DATA_DIR": str(home), "SCSQL_TOKEN": token, "PATH": f"{bin_dir}:{base['PATH']}",
              "CLAUDE_PROJECT_DIR": str(repo)}
    with serving(db, port=port):
        installed = subprocess.run([sys.executable, "-m", "scsql", "install", "claude", "--server", url + "/mcp",
                                    "--project-dir", str(repo)], env=client, capture_output=True, text=True,
                                   timeout=TIMEOUT)
    assert installed.returncode == 0, installed.stderr
    assert f"acts as agent {agent}" in installed.stdout
    written = [p for p in tmp_path.rglob("*") if p.is_file() and "bin" not in p.parts]
    assert written and not [p for p in written if token in p.read_text(errors="replace")]
    mcp = json.loads((repo / ".mcp.json").read_text())["mcpServers"]["scsql"]
    assert mcp == {"type": "http", "url": f"{url}/mcp", "headers": {"Authorization": "Bearer ${SCSQL_TOKEN}"}}
    identity = json.loads((repo / ".claude" / "scsql.local.json").read_text())
    assert identity == {"agent": agent, "home": str(home), "server": url, "token_env": "SCSQL_TOKEN"}
    hooks = json.loads((repo / ".claude" / "settings.json").read_text())["hooks"]
    post = hooks["PostToolUse"][0]["hooks"][0]["command"]
    prompt = hooks["UserPromptSubmit"][0]["hooks"][0]["command"]
    assert post == "scsql hook post-tool-use || exit 1"  # committed: nothing of this machine, no token

    def tool_event(n: int) -> dict:
        return {"hook_event_name": "PostToolUse", "session_id": "remote-install", "tool_name": "Bash",
                "tool_input": {"command": f"make step{n}"}, "tool_response": {"stdout": "ok"},
                "tool_use_id": f"toolu_spool_{n}", "cwd": str(repo)}

    # The server is down: the hooks fail open, say so once, and spool.
    first = run_hook(post, tool_event(1), client, repo)
    said = run_hook(prompt, {"hook_event_name": "UserPromptSubmit", "session_id": "remote-install",
                             "prompt": "why does the ledger drift?", "cwd": str(repo)}, client, repo)
    assert first.returncode == 0 and said.returncode == 0, (first.stderr, said.stderr)
    assert "degraded" in json.loads(said.stdout)["systemMessage"] and url in json.loads(said.stdout)["systemMessage"]
    assert len(spooled(home)) == 2
    # Back: the next capture joins the spool, and the whole spool is written in order.
    with serving(db, port=port):
        again = run_hook(post, tool_event(2), client, repo)
        assert again.returncode == 0, again.stderr
        assert spooled(home) == []
    with psycopg.connect(db.admin) as conn:
        calls = conn.execute("select c.tool_use_id, a.name from scsql.tool_calls c join scsql.agents a "
                             "on a.agent_id = c.author_id where c.tool_use_id like 'toolu_spool_%' "
                             "order by c.seq").fetchall()
        prompts = conn.execute("select count(*) from scsql.prompts where text like 'why does the ledger%'").fetchone()
    assert calls == [("toolu_spool_1", agent), ("toolu_spool_2", agent)]
    assert prompts == (1,)


def test_remote_install_for_one_agent_names_it_and_uninstall_removes_it(tmp_path):
    """Local scope: the entry and the hooks name the agent (a token of another is refused,
    SC285); uninstall takes out exactly what install wrote, and the files it made go."""
    import os

    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SCSQL_")}, "SCSQL_DATA_DIR": str(tmp_path / "d")}
    url = "http://127.0.0.1:9"  # never asked: no token is given

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "scsql", *args, "--project-dir", str(repo), "--scope", "local",
                               "--agent", "dev_remote", "--server", url, "--token-env", "TEAM_TOKEN"],
                              env=env, capture_output=True, text=True, timeout=TIMEOUT)

    installed = run("install", "claude")
    assert installed.returncode == 0, installed.stderr
    entry = json.loads((repo / ".mcp.json").read_text())["mcpServers"]["scsql-dev_remote"]
    assert entry["headers"] == {"Authorization": "Bearer ${TEAM_TOKEN}", "X-Scsql-Agent": "dev_remote"}
    hooks = json.loads((repo / ".claude" / "settings.local.json").read_text())["hooks"]
    command = hooks["SessionStart"][0]["hooks"][0]["command"]
    assert f"--agent dev_remote --home {tmp_path / 'd'} --server {url} --token-env TEAM_TOKEN" in command
    assert run("install", "claude").stdout.count("unchanged") == 2  # a second install changes no byte
    removed = run("uninstall", "claude")
    assert removed.returncode == 0, removed.stderr
    assert not (repo / ".mcp.json").exists() and not (repo / ".claude").exists()
