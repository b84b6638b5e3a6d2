"""``scsql bench serve``: the team server under many agents at once, beside
the same calls over stdio.

A scratch database gets PROJECTS projects of AGENTS/PROJECTS agents each
(one orchestrator, the rest developers), a few notes and facts each, and a
bearer token per agent. ``scsql serve`` runs on 127.0.0.1 (any free port).
Each agent is one client of the MCP SDK (the SDK's own streamable HTTP
client, its token in the Authorization header) that repeats an agent's day
in the same order: recall_context, a hook event (PostToolUse, posted as the
hook client posts it), search, another event, remember, another event, and
claim_task then complete_task (a developer), or enqueue_task (the
orchestrator). Each phase runs for --seconds or --calls per client,
whichever comes first.

Three phases, in this order, on the same database:

* stdio: --stdio-agents agents, each its own ``scsql mcp`` process (the SDK's
  stdio client) and its own hook server (``scsql hook serve``, reached over
  its unix socket as the hook client reaches it): the path of an agent on
  its own machine. Each stdio process holds the embedding model, so fewer
  agents run this way than over HTTP;
* http, the same agents: the same calls through ``scsql serve`` at the same
  concurrency (the p95 ratio is read from this pair);
* http, every agent: all AGENTS clients at once.

Printed: p50/p95/p99 per call of each phase, the p95 ratio http/stdio,
throughput, error counts (a tool result marked as an error counts), and
the server's resident memory: at start, after each phase, and its peak
(VmHWM). The goals: no errors, p95 at most 2x stdio, memory bounded (what
the server holds after the last phase is not what it would hold after
twice as many calls: it holds one Agent and one tool list per agent).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .scratch_db import ScratchDatabase, exit_on_sigterm, with_db

OPS = ("recall_context", "search", "remember", "hook", "claim_task", "complete_task", "enqueue_task")
TOPICS = ("ledger rounding", "refund of discounted items", "release runbook", "flaky payment test",
          "cache invalidation", "database migration order", "token rotation", "retry with backoff")


@dataclass
class Stats:
    ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    first_error: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    bar: Any = None

    def add(self, op: str, ms: float, error: str | None = None) -> None:
        self.ms[op].append(ms)
        if error is not None:
            self.errors[op] += 1
            self.first_error.setdefault(op, error[:300])
        if self.bar is not None:
            if self.bar.total is not None and self.bar.n >= self.bar.total:
                self.bar.total = self.bar.n + 1  # a claimed task completed past the limit
            self.bar.update(1)

    @property
    def calls(self) -> int:
        return sum(len(v) for v in self.ms.values())


def _bar(desc: str, total: int, unit: str) -> Any:
    """A progress bar on stderr with its total and ETA, drawn on a terminal only."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=None, file=sys.stderr, dynamic_ncols=True,
                leave=False, smoothing=0.1)


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(q / 100 * len(s) + 0.5)) - 1))]


# -- the agents' day ---------------------------------------------------------------


@dataclass
class Member:
    name: str
    project: str
    orchestrator: bool
    token: str = ""


def _event(member: Member, n: int) -> dict[str, Any]:
    return {"hook_event_name": "PostToolUse", "session_id": f"bench-{member.name}", "tool_name": "Bash",
            "tool_input": {"command": f"pytest -q tests/test_step_{n % 40}.py", "description": "run the tests"},
            "tool_response": {"stdout": "".join(f"test_{i} PASSED\n" for i in range(12)), "stderr": ""},
            "tool_use_id": f"toolu_{member.name}_{n}_{os.urandom(4).hex()}", "cwd": "/bench",
            "scsql_event_id": os.urandom(16).hex()}


class _DayOver(Exception):
    """The deadline passed, or the client made its calls."""


async def _day(member: Member, call, hook, stats: Stats, deadline: float, limit: int) -> None:
    """Repeat the agent's day until the deadline or LIMIT calls (a claimed
    task is completed even then: no task is left claimed)."""
    n = 0

    async def timed(op: str, fn, paired: bool = False) -> Any:
        nonlocal n
        if not paired and (n >= limit or time.monotonic() >= deadline):
            raise _DayOver
        n += 1
        t0 = time.perf_counter()
        try:
            result, error = await fn()
        except Exception as exc:  # noqa: BLE001 - counted, and the day goes on
            result, error = None, f"{type(exc).__name__}: {exc}"
        stats.add(op, (time.perf_counter() - t0) * 1000, error)
        return result

    def tool(name: str, args: dict):
        return lambda: call(name, args)

    try:
        while True:
            topic = TOPICS[n % len(TOPICS)]
            await timed("recall_context", tool("recall_context", {}))
            await timed("hook", lambda: hook(_event(member, n)))
            await timed("search", tool("search", {"query": topic, "k": 5}))
            await timed("hook", lambda: hook(_event(member, n)))
            await timed("remember", tool("remember", {"key": f"{member.name}-note-{n % 20}",
                                                      "value": f"{topic}: checked in step {n}", "importance": 3}))
            await timed("hook", lambda: hook(_event(member, n)))
            if member.orchestrator:
                await timed("enqueue_task", tool("enqueue_task", {"role": "developer",
                                                                  "payload": {"step": n, "topic": topic}}))
                continue
            claimed = await timed("claim_task", tool("claim_task", {"lease_seconds": 120}))
            task = claimed[0] if isinstance(claimed, list) and claimed else None
            if task:
                done = {"task": task["task_id"], "token": task["lease_token"], "result": {"ok": True}}
                await timed("complete_task", tool("complete_task", done), paired=True)
    except _DayOver:
        return


async def _warm(member: Member, call, hook) -> None:
    """One call of each kind, not counted: the agent's tools loaded, the
    embedding model and the statements prepared, on either path."""
    await call("whoami", {})
    await call("recall_context", {})
    await call("search", {"query": "warm"})
    await call("remember", {"key": f"{member.name}-warm", "value": "warm", "importance": 1})
    await hook(_event(member, -1))


def _tool_result(result) -> tuple[Any, str | None]:
    text = result.content[0].text if result.content else ""
    if result.is_error:
        return None, text
    try:
        return json.loads(text), None
    except ValueError:
        return text, None


# -- the two paths -------------------------------------------------------------------


async def _http_member(member: Member, url: str, stats: Stats, deadline: float, limit: int, started) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {member.token}"}, timeout=120) as http:
        async with Client(streamable_http_client(url + "/mcp", http_client=http), read_timeout_seconds=120) as client:
            async def call(name: str, args: dict):
                return _tool_result(await client.call_tool(name, args))

            async def hook(event: dict):
                r = await http.post(url + "/hooks/event", json={"event": event, "budget": 5})
                body = r.json()
                if r.status_code != 200 or body.get("degraded"):
                    return None, (body.get("error") or {}).get("message") or body.get("degraded") or str(r.status_code)
                return body, None

            await _warm(member, call, hook)
            await started(member)
            await _day(member, call, hook, stats, deadline(), limit)


async def _stdio_member(member: Member, env: dict, home: str, stats: Stats, deadline, limit: int, started) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    from ..hooks import hookclient

    params = StdioServerParameters(command=sys.executable, args=["-m", "scsql", "mcp", "--agent", member.name],
                                   env=env)
    async with Client(params, read_timeout_seconds=120) as client:
        async def call(name: str, args: dict):
            return _tool_result(await client.call_tool(name, args))

        async def hook(event: dict):
            request = (json.dumps({"event": event, "budget": 5}) + "\n").encode()
            reply = await asyncio.to_thread(hookclient.exchange, home, member.name, request, 30.0)
            return (None, reply["degraded"]) if reply.get("degraded") else (reply, None)

        await _warm(member, call, hook)  # each process loads the embedding model once
        await started(member)
        await _day(member, call, hook, stats, deadline(), limit)


async def _phase(name: str, members: list[Member], run_one, seconds: float, limit: int) -> Stats:
    """Every member's day at once; the clock starts once all are connected.
    On a terminal, a bar counts the connections, then the calls: its total is
    what the clients make by the deadline at the rate so far (or their limit)."""
    stats = Stats()
    ready = asyncio.Event()
    waiting = len(members)
    start = [0.0]
    connecting = _bar(f"{name}: connecting", len(members), "client")

    async def started(_member: Member) -> None:
        nonlocal waiting
        waiting -= 1
        connecting.update(1)
        if waiting == 0:
            connecting.close()
            start[0] = time.monotonic()
            stats.bar = _bar(name, len(members) * limit, "call")
            ready.set()
        await ready.wait()

    def deadline() -> float:
        return start[0] + seconds

    async def project_total() -> None:
        while True:
            await asyncio.sleep(1.0)
            bar = stats.bar
            if bar is not None and bar.n and not bar.disable:
                elapsed = time.monotonic() - start[0]
                bar.total = max(bar.n, min(len(members) * limit, round(bar.n / elapsed * seconds)))
                bar.refresh()

    ticker = asyncio.ensure_future(project_total())
    try:
        await asyncio.gather(*(run_one(m, stats, deadline, limit, started) for m in members))
    finally:
        ticker.cancel()
        connecting.close()
        if stats.bar is not None:
            stats.bar.close()
    stats.seconds = time.monotonic() - start[0]
    return stats


# -- setting up, and the processes -----------------------------------------------------


def _setup(scratch: ScratchDatabase, app: str, agents: int, projects: int) -> list[Member]:
    """PROJECTS projects, AGENTS agents spread over them (the first of each an
    orchestrator), a token each, and notes and facts to find."""
    import psycopg

    from ..core import roles
    from ..serve import tokens

    with psycopg.connect(scratch.admin, autocommit=True) as conn:
        conn.execute("select scsql.set_login_mode('one_login')")  # the server's login acts as every agent
    names = [scratch.project] + [f"{scratch.project}-{i}" for i in range(1, projects)]
    for p in names[1:]:
        roles.create_project(scratch.admin, p)
    tag = scratch.name.rsplit("_", 1)[1]
    members = []
    bar = _bar("agents and tokens", agents, "agent")
    for i in range(agents):
        name = f"bsv{tag}_{i:03d}"
        orchestrator = i < projects
        roles.create_agent(scratch.admin, scratch.keystore, name, names[i % projects],
                           "orchestrator" if orchestrator else "developer")
        scratch.agents.append(name)
        members.append(Member(name, names[i % projects], orchestrator, tokens.create(scratch.admin, name)[0]))
        bar.update(1)
    bar.close()
    for m in members[:projects]:
        agent = scratch.open_agent(m.name, app, with_key=False, max_size=1)
        with agent.transaction() as conn:
            for n in range(40):
                topic = TOPICS[n % len(TOPICS)]
                conn.execute("select * from scsql.index_text(%s, %s)", (
                    f"notes/{n}.md", f"# {topic}\n\nNote {n} of {m.project}: how we handle {topic}; see step {n}."))
            for n in range(10):
                conn.execute("select * from scsql.remember(%s, %s, 3)",
                             (f"fact-{n}", f"{TOPICS[n % 8]} is owned by team {n}"))
    return members


def _env(scratch: ScratchDatabase, app: str, home: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCSQL_")}
    env.update(SCSQL_DSN=scratch.admin, SCSQL_AGENT_DSN=app, SCSQL_KEYSTORE=str(scratch.keystore.directory),
               SCSQL_DATA_DIR=home)
    return env


def _start_server(env: dict, log, pool: int, threads: int) -> tuple[subprocess.Popen, str]:
    import httpx2

    proc = subprocess.Popen([sys.executable, "-m", "scsql", "serve", "--port", "0", "--rate", "1000000", "--burst",
                             "1000000", "--pool", str(pool), "--threads", str(threads)],
                            env=env, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True)
    found = re.search(r"listening on (http://\S+:\d+)", proc.stdout.readline())
    if not found:
        proc.kill()
        raise SystemExit("scsql bench serve: the server did not start (see its log)")
    url = found.group(1)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx2.get(url + "/healthz", timeout=2).status_code == 200:
                return proc, url
        except httpx2.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("scsql bench serve: the server did not answer within 60 s")


def _start_hook_servers(members: list[Member], env: dict, home: str, log) -> list[subprocess.Popen]:
    from .hooks import _wait_for_socket
    from ..hooks import hookclient

    procs = [subprocess.Popen([sys.executable, "-m", "scsql", "hook", "serve", "--agent", m.name], env=env,
                              stdout=log, stderr=log, stdin=subprocess.DEVNULL) for m in members]
    for m in members:
        _wait_for_socket(hookclient.socket_path(home, m.name), 120)
    return procs


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()


def memory_mb(pid: int) -> tuple[float, float]:
    """(resident, peak resident) of process PID in MB (Linux /proc; nan elsewhere)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return float("nan"), float("nan")
    kb = {k: int(v.split()[0]) for k, v in re.findall(r"^(VmRSS|VmHWM):\s+(.*)$", text, re.M)}
    return kb.get("VmRSS", 0) / 1024, kb.get("VmHWM", 0) / 1024


def processes_mb(marker: str) -> float:
    """Resident memory of every process whose command line holds MARKER, in MB."""
    total = 0.0
    for d in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (d / "cmdline").read_bytes()
            if marker.encode() in cmdline and b"scsql" in cmdline:
                total += memory_mb(int(d.name))[0]
        except (OSError, ValueError):
            continue
    return total


async def _sampled(coro, marker: str) -> tuple[Stats, float]:
    """CORO's result, and the peak memory of the processes MARKER names while it ran."""
    peak = 0.0
    task = asyncio.ensure_future(coro)
    while not task.done():
        peak = max(peak, await asyncio.to_thread(processes_mb, marker))
        await asyncio.wait([task], timeout=1.0)
    return task.result(), peak


# -- the report ---------------------------------------------------------------------------


def _row(stats: Stats, op: str | None) -> list[str]:
    values = [v for vs in stats.ms.values() for v in vs] if op is None else stats.ms.get(op, [])
    if not values:
        return ["-"] * 4
    return [str(len(values))] + [f"{pct(values, q):.1f}" for q in (50, 95, 99)]


def _p95(stats: Stats, op: str | None) -> float:
    return pct([v for vs in stats.ms.values() for v in vs] if op is None else stats.ms.get(op, []), 95)


def report(phases: dict[str, Stats], memory: dict[str, float], stdio_mb: float, head: str) -> dict:
    stdio, http_same, http_all = phases["stdio"], phases["http_same"], phases["http_all"]
    print(head)
    print(f"{'':16}{'stdio, same agents':>28}  {'http, same agents':>28}  {'p95':>6}  {'http, every agent':>28}")
    print(f"{'call (ms)':16}" + ("{:>7}{:>7}{:>7}{:>7}  ".format("n", "p50", "p95", "p99") * 2) + f"{'ratio':>6}  "
          + "{:>7}{:>7}{:>7}{:>7}".format("n", "p50", "p95", "p99"))
    ratios = {}
    for op in (*OPS, None):
        ratio = _p95(http_same, op) / _p95(stdio, op) if stdio.ms.get(op) or op is None else float("nan")
        ratios[op or "all"] = ratio
        cells = "".join(f"{c:>7}" for c in _row(stdio, op)) + "  " + "".join(f"{c:>7}" for c in _row(http_same, op))
        print(f"{op or 'all calls':16}{cells}  {ratio:>6.2f}  " + "".join(f"{c:>7}" for c in _row(http_all, op)))
    tput = {k: s.calls / s.seconds if s.seconds else 0.0 for k, s in phases.items()}
    errs = {k: sum(s.errors.values()) for k, s in phases.items()}
    print(f"{'throughput /s':16}{tput['stdio']:>28.1f}  {tput['http_same']:>28.1f}  {'':>6}  {tput['http_all']:>28.1f}")
    print(f"{'errors':16}{errs['stdio']:>28}  {errs['http_same']:>28}  {'':>6}  {errs['http_all']:>28}")
    for name, s in phases.items():
        for op, text in s.first_error.items():
            print(f"  first error, {name} {op}: {text}")
    print(f"server memory (MB): {memory['start']:.0f} at start, {memory['http_same']:.0f} after the same agents, "
          f"{memory['http_all']:.0f} after every agent, peak {memory['peak']:.0f}; the stdio processes held "
          f"{stdio_mb:.0f} at their peak")
    per_agent = (memory["http_all"] - memory["http_same"]) / max(1, memory["agents_added"])
    ok_errors = not any(errs.values())
    print(f"goals: no errors: {'yes' if ok_errors else 'NO'}; p95 http/stdio {ratios['all']:.2f} "
          f"(at most 2: {'yes' if ratios['all'] <= 2 else 'NO'}); memory: {per_agent:.1f} MB more per agent served")
    return {"throughput": tput, "errors": errs, "p95_ratio": ratios, "memory_mb": memory, "stdio_mb": stdio_mb,
            "phases": {k: {op or "all": dict(zip(("n", "p50", "p95", "p99"), _row(s, op))) for op in (*OPS, None)}
                       for k, s in phases.items()}}


# -- the run --------------------------------------------------------------------------


async def _phases(members: list[Member], same: list[Member], url: str, env: dict, home: str, args,
                  server: subprocess.Popen, log) -> tuple[dict[str, Stats], dict[str, float], float]:
    memory: dict[str, float] = {"start": memory_mb(server.pid)[0], "agents_added": len(members) - len(same)}
    hook_servers = await asyncio.to_thread(_start_hook_servers, same, env, home, log)
    try:
        stdio, stdio_mb = await _sampled(_phase(
            "stdio", same, lambda m, s, d, n, st: _stdio_member(m, env, home, s, d, n, st), args.seconds, args.calls),
            same[0].name.rsplit("_", 1)[0])
    finally:
        await asyncio.to_thread(_stop, hook_servers)
    def over_http(m, s, d, n, st):
        return _http_member(m, url, s, d, n, st)

    http_same = await _phase("http, same agents", same, over_http, args.seconds, args.calls)
    memory["http_same"] = memory_mb(server.pid)[0]
    http_all = await _phase("http, every agent", members, over_http, args.seconds, args.calls)
    memory["http_all"], memory["peak"] = memory_mb(server.pid)
    return {"stdio": stdio, "http_same": http_same, "http_all": http_all}, memory, stdio_mb


def run(ctx, args: argparse.Namespace) -> int:
    if args.agents < args.projects or args.stdio_agents < 1 or args.stdio_agents > args.agents:
        raise SystemExit("scsql bench serve: --agents must be at least --projects, and --stdio-agents 1 to --agents")
    scratch = ScratchDatabase(ctx.admin_conninfo(), "serve")
    home = tempfile.mkdtemp(prefix="scsql-bench-serve-")
    log_path = Path(home) / "server.log"
    with exit_on_sigterm(), open(log_path, "w") as log:
        server = None
        try:
            scratch.create()
            app = with_db(ctx.agent_conninfo(), scratch.name)
            t0 = time.perf_counter()
            members = _setup(scratch, app, args.agents, args.projects)
            print(f"set up {args.agents} agents in {args.projects} projects, a token each, in "
                  f"{time.perf_counter() - t0:.0f} s", file=sys.stderr)
            env = _env(scratch, app, home)
            server, url = _start_server(env, log, args.pool, args.threads)
            same = _spread(members, args.stdio_agents, args.projects)
            phases, memory, stdio_mb = asyncio.run(_phases(members, same, url, env, home, args, server, log))
            head = (f"scsql bench serve: {args.agents} agents in {args.projects} projects over HTTP "
                    f"({url}, the SDK's streamable HTTP client), {len(same)} of them over stdio too; "
                    f"each phase {args.seconds:g} s or {args.calls} calls a client")
            out = report(phases, memory, stdio_mb, head)
            if args.json:
                print(json.dumps(out, indent=2, default=str))
        finally:
            if server is not None:
                _stop([server])
            scratch.drop()
            if args.keep_log:
                print(f"server log kept: {log_path}", file=sys.stderr)
            else:
                shutil.rmtree(home, ignore_errors=True)
    return 0


def _spread(members: list[Member], n: int, projects: int) -> list[Member]:
    """N members taken round-robin over the projects, orchestrators first."""
    by_project: dict[str, list[Member]] = defaultdict(list)
    for m in members:
        by_project[m.project].append(m)
    picked: list[Member] = []
    i = 0
    while len(picked) < n:
        for group in by_project.values():
            if i < len(group) and len(picked) < n:
                picked.append(group[i])
        i += 1
    return picked


def register(bsub) -> None:
    p = bsub.add_parser("serve", help="the team server under many agents at once (MCP over HTTP and hook "
                                      "events), p50/p95/p99 per call beside the same calls over stdio")
    p.add_argument("--agents", type=int, default=50, help="HTTP clients, one agent each")
    p.add_argument("--projects", type=int, default=5, help="projects the agents are spread over")
    p.add_argument("--stdio-agents", type=int, default=10,
                   help="agents that also run over stdio (a scsql mcp process and a hook server each), and over "
                        "HTTP at that concurrency for the ratio")
    p.add_argument("--seconds", type=float, default=20.0, help="length of each phase")
    p.add_argument("--calls", type=int, default=400, help="calls a client makes at most in each phase")
    p.add_argument("--pool", type=int, default=16, help="the server's database connections (scsql serve --pool)")
    p.add_argument("--threads", type=int, default=32, help="the server's calls at once (scsql serve --threads)")
    p.add_argument("--json", action="store_true", help="also print the figures as JSON")
    p.add_argument("--keep-log", action="store_true", help="keep the server's log (its path is printed)")
    p.set_defaults(bench_func=run)
