"""Hostile input for every MCP tool, generated from the tool catalogue.

The cases come from each tool's published input schema (tools/list), so a
new SQL function granted to agents is fuzzed without a line here. They go
through the SDK's own stdio client to ``scsql mcp --agent NAME``, one real
process. Pass means:

* every call is answered within CALL_TIMEOUT seconds;
* every refusal carries a code from scsql.error_codes (SCnnn or 42501),
  never XX000, never the generic SC037 database_error, never a traceback;
* the chained tables hold exactly as many rows as calls that succeeded, and
  ``scsql verify`` is clean afterwards.

Lone surrogates and malformed JSON-RPC cannot be sent through the SDK's
client (it refuses to encode them), so they are written as raw lines to the
server's stdin; each must get a JSON-RPC answer.

SCSQL_FUZZ_ROUNDS=N runs the longer, randomised variant (marked slow).
"""

from __future__ import annotations

import json
import os
import queue
import random
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from scsql.api import Api
from scsql.audit.verify import verify

from ..helpers import mcp_env

CALL_TIMEOUT = 60.0
BIG = 5 * 1024 * 1024  # a 5 MB string, once per tool
ROUNDS = int(os.environ.get("SCSQL_FUZZ_ROUNDS", "0") or 0)

# Chained tables, by the tool that writes one row of them per successful call.
CHAINED = {"start_session": "scsql.sessions", "record_tool_call": "scsql.tool_calls",
           "record_outcome": "scsql.outcomes", "broadcast": "scsql.messages",
           "open_session": "scsql.sessions", "capture_tool_call": "scsql.tool_calls", "record_prompt": "scsql.prompts",
           "record_model_call": "scsql.model_calls"}


def wrote_a_row(tool: str, text: str) -> bool:
    """Whether a successful call of a chained writer added a row: the capture
    writers are idempotent (an event captured before, a session already open,
    writes nothing and says so)."""
    if tool == "open_session":
        return '"created": true' in text.replace('"created":true', '"created": true')
    if tool in ("capture_tool_call", "record_prompt"):
        return '"chain_id": null' not in text.replace('"chain_id":null', '"chain_id": null')
    if tool == "record_model_call":  # a message recorded before is not written again
        return '"model_call_id": null' not in text.replace('"model_call_id":null', '"model_call_id": null')
    return True

CODE = re.compile(r"^Error executing tool [\w.-]+: (SC\d{3}|42501)\b")


def nested(depth: int, leaf: Any = "x") -> Any:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


# -- the schema of a tool, and values of each kind --------------------------------


def kind_of(prop: dict) -> str:
    """string, integer, number, boolean, array, date-time, or json (anything)."""
    options = [o for o in prop.get("anyOf", [prop]) if o.get("type") != "null"]
    if not options:
        return "json"
    o = options[0]
    if o.get("type") == "object":
        return "json"
    if o.get("type") == "string" and o.get("format") == "date-time":
        return "date-time"
    return o.get("type") or "json"


PLAIN = {"string": "fuzz", "integer": 1, "number": 1, "boolean": True, "array": ["fuzz"],
         "date-time": "2024-01-02T03:04:05Z", "json": {"k": "v"}}


def plain(prop: dict) -> Any:
    """A value of an argument that passes its first checks: the first of its
    enumerated values (broadcast's type, resolve_conflict's keep), else its
    kind's plain value (which names the rows _fuzz_agent seeds)."""
    for o in prop.get("anyOf", [prop]):
        if o.get("enum"):
            return o["enum"][0]
    return PLAIN[kind_of(prop)]

SQL = "'); drop table scsql.agents; -- \" ; select pg_sleep(10); --"
TSQUERY = "a & !b | (c <-> d):* & 'e':AB & !!(("

HOSTILE: dict[str, list[Any]] = {
    "string": ["a\x00b", "", "   ", SQL, TSQUERY, "../../../../etc/passwd", "/etc/shadow", "C:\\Windows\\..\\x",
               "\u202e\ufeff\u200b😀", "\x01\x1b[2J\x7f", "%s %n {0} ${x} $(id)", "x" * 100_000,
               "db://u:p@h " * 40,  # 440 characters, 1,240 once each password is [REDACTED:url_password]
               123, 1.5, True, [], {"a": 1}],
    "integer": [1.7, True, "12", -1, 0, 2**31, -(2**31) - 1, 2**63, -(2**63) - 1, 10**30, 1e308, -1e308, [1], "1e5"],
    "number": ["1.5", True, -1, 0, 1e308, -1e308, 10**30, 5e-324, -0.0, [1], "NaN", "Infinity"],
    "boolean": ["true", 1, 0, "yes", [True], {}],
    "array": ["not a list", [1, 2], [None], [["nested"]], ["a\x00"], ["x"] * 10_000, ["../../etc"],
              '["a", "b"]', {}, [SQL, TSQUERY]],
    "date-time": ["yesterday", "2024-13-45T99:00:00Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z",
                  "infinity", 1700000000, "2024-01-01T00:00:00+25:00", ""],
    "json": [nested(50), nested(150), "x" * 100_000, {"a\x00": 1}, [1e308, -1e308, 5e-324], "just a string",
             10**30, {"k": SQL}, True, {"__proto__": {"polluted": 1}}, [None] * 1000, {"x" * 10_000: 1},
             {"decisions": ["db://u:p@h " * 18], "open_tasks": ["db://u:p@h " * 180]}],  # grows when redacted
}

# Extra arguments every tool is offered (with its required arguments filled),
# and the two degenerate calls: at least 30 cases for a tool without arguments.
EXTRA: list[dict[str, Any]] = [
    {"agent_id": "someone_else"}, {"agent": "someone_else"}, {"p_agent": "x"}, {"role": "scsql_owner"},
    {"at": "2024-01-01T00:00:00Z"}, {"key_id": 1}, {"signature": "00" * 64}, {"query_embedding": [0.1] * 384},
    {"manifest": []}, {"__proto__": {}}, {"constructor": {"prototype": {}}}, {"": 1}, {"a\x00": 1},
    {"x" * 10_000: 1}, {SQL: 1}, {"../../etc/passwd": 1}, {"\u202e": 1}, {"nested": nested(50)},
    {"NaN": "NaN"}, {"Infinity": 1e308}, {"1": 1}, {"project": "other"}, {"project_id": 2}, {"self": 1},
    {"kwargs": {}}, {"model_config": 1}, {"model_fields": {}}, {"extra": None},
]


def tool_cases(tool) -> list[tuple[str, dict[str, Any]]]:
    """At least 30 hostile argument sets for one tool, from its input schema."""
    schema = tool.input_schema or {}
    props: dict[str, dict] = schema.get("properties", {})
    required = schema.get("required", [])
    base = {name: plain(props[name]) for name in required}
    cases: list[tuple[str, dict[str, Any]]] = [("no arguments", {}),
                                               ("every argument null", {n: None for n in props})]
    cases += [(f"extra {sorted(e)[0][:20]!r}", {**base, **e}) for e in EXTRA]
    big_done = False
    for name, prop in props.items():
        kind = kind_of(prop)
        for value in HOSTILE[kind]:
            cases.append((f"{name}={_short(value)}", {**base, name: value}))
        if kind in ("string", "json") and not big_done:
            cases.append((f"{name}=5MB", {**base, name: "y" * BIG}))
            big_done = True
        if name in required:
            cases.append((f"without {name}", {k: v for k, v in base.items() if k != name}))
    return cases


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:30]}...({len(text)} chars)"


def random_cases(tool, rng: random.Random, n: int) -> list[tuple[str, dict[str, Any]]]:
    """Random combinations of hostile values over all of a tool's arguments."""
    props = (tool.input_schema or {}).get("properties", {})
    pool = [v for values in HOSTILE.values() for v in values]
    out = []
    for i in range(n):
        args = {}
        for name, prop in props.items():
            r = rng.random()
            if r < 0.4:
                args[name] = plain(prop)
            elif r < 0.8:
                args[name] = rng.choice(HOSTILE[kind_of(prop)])
            elif r < 0.9:
                args[name] = rng.choice(pool)
        if rng.random() < 0.2:
            args.update(rng.choice(EXTRA))
        out.append((f"random {i}", args))
    return out


# -- the run ----------------------------------------------------------------------


def _fuzz_env(scsql_db) -> dict[str, str]:
    env = mcp_env(scsql_db)
    env["SCSQL_EMBED"] = "none"  # the boundary is under test, not the model
    env["SCSQL_MCP_TOOLS"] = "all"  # the tools hidden from the default list too
    return env


def run_cases(scsql_db, agent_name: str, make_cases) -> dict[str, Any]:
    """Every case of every tool through one real stdio client; returns the tally."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "scsql", "mcp", "--agent", agent_name],
                                   env=_fuzz_env(scsql_db))
    tally: dict[str, Any] = {"ok": Counter(), "rows": Counter(), "codes": Counter(), "bad": [], "slow": [], "calls": 0, "per_tool": {},
                             "mapped": set()}

    async def main():
        async with Client(params, read_timeout_seconds=CALL_TIMEOUT + 30) as client:
            tools = (await client.list_tools()).tools
            tally["tools"] = sorted(t.name for t in tools)
            for tool in tools:
                cases = make_cases(tool)
                tally["per_tool"][tool.name] = len(cases)
                for label, args in cases:
                    tally["calls"] += 1
                    start = time.monotonic()
                    try:
                        with anyio.fail_after(CALL_TIMEOUT):
                            result = await client.call_tool(tool.name, args)
                    except TimeoutError:
                        tally["bad"].append((tool.name, label, "no answer within the timeout"))
                        continue
                    except MCPError as exc:
                        tally["bad"].append((tool.name, label, f"JSON-RPC error {exc.error.code}: {exc.error.message}"))
                        continue
                    elapsed = time.monotonic() - start
                    if elapsed > 10:
                        tally["slow"].append((tool.name, label, round(elapsed, 1)))
                    text = result.content[0].text if result.content else ""
                    if not result.is_error:
                        tally["ok"][tool.name] += 1
                        if tool.name in CHAINED and wrote_a_row(tool.name, text):
                            tally["rows"][CHAINED[tool.name]] += 1
                        continue
                    m = CODE.match(text)
                    if not m or "XX000" in text or "Traceback" in text:
                        tally["bad"].append((tool.name, label, text[:300]))
                        continue
                    tally["codes"][m.group(1)] += 1
                    if "(SQLSTATE " in text:  # PostgreSQL's own refusal, mapped: the SQL did not validate it
                        state = re.search(r"\(SQLSTATE (\w{5})\)", text)
                        tally["mapped"].add((tool.name, label.split("=")[0], state.group(1) if state else "?",
                                             text.split(": ", 2)[-1][:120]))
                    if m.group(1) == "SC037":
                        tally["bad"].append((tool.name, label, text[:300]))
            await client.call_tool("whoami", {})  # still serving

    anyio.run(main)
    print(f"\n{tally['calls']} calls, {sum(tally['ok'].values())} succeeded; codes {dict(tally['codes'])}")
    print("never succeeded:", ", ".join(sorted(set(tally.get("tools", [])) - set(tally["ok"]))))
    for finding in sorted(tally["mapped"]):
        print("mapped:", *finding)
    for slow in tally["slow"]:
        print("slow:", *slow)
    return tally


def check_tally(scsql_db, tally: dict[str, Any]) -> None:
    with scsql_db.connect() as conn:
        known = {r["code"] for r in conn.execute("select code from scsql.error_codes").fetchall()}
        rows = {t: conn.execute(f"select count(*) as n from {t}").fetchone()["n"] for t in set(CHAINED.values())}
        # The memory functions chain a row of history for each change they make (sql/26_history.sql).
        history = conn.execute("select count(*) as n from scsql.memory_changes").fetchone()["n"]
    assert not tally["bad"], "\n".join(map(str, tally["bad"][:40]))
    assert set(tally["codes"]) <= known, set(tally["codes"]) - known
    assert {t: tally["rows"][t] for t in rows} == rows
    assert history >= tally["ok"]["remember"]
    report = verify(scsql_db.admin, workers=1, progress=False)
    assert report.ok, report.breaks
    assert report.rows == sum(rows.values()) + history


def _fuzz_agent(scsql_db):
    """The agent the cases run as, with rows the plain values name (key and
    path "fuzz", a conflict of fact "fuzz", open loop and decision 1), so
    hostile values of the other arguments reach past the lookup. Nothing
    seeded is a chained row the tally counts, except the memory history
    (counted apart)."""
    project = scsql_db.project()
    agent = scsql_db.agent("fuzz", project, team_role="orchestrator")
    api = Api(agent)
    api.call("remember", key="fuzz", value="Fuzz runs use seed 7")
    assert api.call("remember", key="fuzz.seed", value="Fuzz runs use seed 9")[0]["conflicts_with"] == ["fuzz"]
    api.call("index_text", path="fuzz", content="the fuzz corpus lives in tests/data")
    api.call("open_loop", text="triage the fuzz findings")
    api.call("decide", title="fuzz every tool", rationale="hostile input must get a coded refusal")
    return agent


def test_every_tool_answers_hostile_arguments_with_a_code(scsql_db):
    agent = _fuzz_agent(scsql_db)
    tally = run_cases(scsql_db, agent.name, tool_cases)
    assert len(tally["tools"]) >= 30 and {"whoami", "broadcast", "record_tool_call", "remember"} <= set(tally["tools"])
    assert min(tally["per_tool"].values()) >= 30, tally["per_tool"]
    check_tally(scsql_db, tally)
    assert tally["ok"]["remember"] > 0  # facts were stored, so the history count above counted something
    assert tally["codes"]["SC222"] and tally["codes"]["SC010"]
    assert sum(tally["ok"].values()) > 0  # some hostile-looking input is legitimate, and is stored


def test_a_nul_byte_in_any_text_argument_of_any_tool_is_sc222(scsql_db):
    """Every string argument, every array of strings, and a string inside
    every jsonb argument: the one code for NUL, whatever the subsystem."""
    agent = _fuzz_agent(scsql_db)

    def nul_cases(tool):
        schema = tool.input_schema or {}
        props = schema.get("properties", {})
        base = {n: plain(props[n]) for n in schema.get("required", [])}
        nul = {"string": "before\x00after", "array": ["ok", "bad\x00"], "json": {"k": ["x\x00"]}}
        return [(name, {**base, name: nul[kind_of(p)]}) for name, p in props.items() if kind_of(p) in nul]

    tally = run_cases(scsql_db, agent.name, nul_cases)
    assert not tally["bad"], tally["bad"][:20]
    assert sum(tally["per_tool"].values()) >= 50, tally["per_tool"]
    assert dict(tally["codes"]) == {"SC222": sum(tally["per_tool"].values())}, tally["codes"]
    assert not tally["ok"]


@pytest.mark.slow
@pytest.mark.skipif(not ROUNDS, reason="set SCSQL_FUZZ_ROUNDS=N for N random argument sets per tool")
def test_random_hostile_arguments_for_every_tool(scsql_db):
    agent = _fuzz_agent(scsql_db)
    rng = random.Random(int(os.environ.get("SCSQL_FUZZ_SEED", "1")))
    tally = run_cases(scsql_db, agent.name, lambda tool: random_cases(tool, rng, ROUNDS))
    check_tally(scsql_db, tally)


# -- raw JSON-RPC lines ---------------------------------------------------------------


class RawServer:
    """``scsql mcp`` with the test holding its stdin and stdout."""

    def __init__(self, scsql_db, agent: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "scsql", "mcp", "--agent", agent], env=_fuzz_env(scsql_db),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, line: bytes) -> None:
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def answer(self, timeout: float = CALL_TIMEOUT) -> dict:
        return json.loads(self.lines.get(timeout=timeout))

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _req(rid: Any, method: str, params: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()


def test_every_malformed_json_rpc_line_is_answered(scsql_db):
    """Invalid JSON, a lone surrogate in any string argument of any tool,
    1,000-deep nesting, a line over the size limit, ids of the wrong type:
    each gets a JSON-RPC error (with its id when it can be read), and the
    server keeps serving."""
    agent = _fuzz_agent(scsql_db)
    srv = RawServer(scsql_db, agent.name)
    try:
        srv.send(_req(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                        "clientInfo": {"name": "raw", "version": "0"}}))
        assert srv.answer()["id"] == 0
        srv.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        srv.send(_req(1, "tools/list", {}))
        tools = srv.answer()["result"]["tools"]
        deep = "[" * 1000 + "]" * 1000
        cases: list[tuple[bytes, Any, int]] = [
            (b"not json at all", None, -32700),
            (b'{"jsonrpc":"2.0","id":11,"method":"ping"', 11, -32700),
            (b'{"jsonrpc":"2.0","id":"s12","method":"tools/call","params":{"name":"whoami","arguments":{"x":"\\ud800"}}}',
             "s12", -32700),
            (b'{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"whoami","arguments":{"x":'
             + deep.encode() + b"}}}", 13, -32700),
            (b'{"jsonrpc":"2.0","id":14,"method":"ping","params":{"x":"' + b"z" * (33 * 1024 * 1024) + b'"}}', 14, -32600),
            (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', None, -32600),
            (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', None, -32600),
            (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', None, -32600),
            (b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', None, -32600),
            (b'{"jsonrpc":"2.0","id":[1],"method":"ping"}', None, -32600),
            (b'[{"jsonrpc":"2.0","id":20,"method":"ping"}]', None, -32600),
            (b'{"jsonrpc":"2.0","id":21,"method":"ping","params":[1]}', 21, -32600),
            (b'{"jsonrpc":"1.0","id":22,"method":"ping"}', 22, -32600),
            (b'{"jsonrpc":"2.0","id":23}', 23, -32600),
            (b"{}", None, -32600),
            (b"[]", None, -32600),
            (b'"just a string"', None, -32600),
            (b'{"jsonrpc":"2.0","id":26,"method":"ping"}\xff\xfe', 26, -32700),
            (b'{"jsonrpc":"2.0","id":27,"method":"tools/call","params":{"name":"x","arguments":{"a":1}}}'
             b'{"jsonrpc":"2.0","id":28}', 27, -32700),
            (b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}', None, -32700),
        ]
        # A lone surrogate in each string argument of each tool.
        rid = 1000
        for tool in tools:
            props = tool["inputSchema"].get("properties", {})
            for name, prop in props.items():
                if kind_of(prop) in ("string", "json", "array"):
                    rid += 1
                    line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                                       "params": {"name": tool["name"], "arguments": {name: "@@"}}})
                    cases.append((line.replace('"@@"', '"a\\udc80b"').encode(), rid, -32700))
        assert rid - 1000 >= 40
        for line, rid, code in cases:
            srv.send(line)
            try:
                got = srv.answer()
            except queue.Empty:
                pytest.fail(f"no answer to {line[:120]!r}")
            assert got.get("id") == rid and got["error"]["code"] == code, (line[:120], got)
        # NaN and Infinity tokens: answered, as a parse error or a coded refusal.
        for i, token in enumerate((b"NaN", b"Infinity", b"-Infinity", b"1e400")):
            srv.send(b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"record_tool_call",'
                     b'"arguments":{"tool":"t","input_tokens":%s}}}' % (2000 + i, token))
            got = srv.answer()
            assert got["id"] == 2000 + i
            if "error" in got:
                assert got["error"]["code"] == -32700, got
            else:
                assert got["result"]["isError"] and CODE.match(got["result"]["content"][0]["text"]), got
        srv.send(_req(3000, "ping", {}))
        assert srv.answer() == {"jsonrpc": "2.0", "id": 3000, "result": {}}
        assert srv.proc.poll() is None
    finally:
        srv.close()
    with scsql_db.connect() as conn:
        assert conn.execute("select count(*) as n from scsql.tool_calls").fetchone()["n"] == 0
