"""``scsql bench hooks``: what each Claude Code hook costs, end to end, as
Claude Code runs it.

It runs the exact commands ``scsql install claude`` writes
(``scsql.hooks.events.settings_hooks``), each through ``/bin/sh -c`` as
Claude Code does, with a realistic event on stdin, and times each from
start to exit: the hook process, the round trip to the agent's hook server
(started by the first hook, as in a session) and the handler's work in the
database. Beside them, in the same rounds (the commands take turns, so drift
on a busy machine hits all alike), the cost of starting ``true``,
``python -c pass`` and ``python -S -c pass``.

The database is a scratch one, populated as the issue sets it (by default
100,000 knowledge-base chunks with vectors, working memory full with 250
facts, 10,000 signed tool calls; ``--chunks`` and ``--tool-calls`` make it
smaller), dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..core.config import APP_ROLE
from .scratch_db import ScratchDatabase, Scratch, exit_on_sigterm, with_db


def payloads(cwd: str, transcript: str) -> dict[str, dict]:
    """A realistic event for each hook (as Claude Code sends them)."""
    base = {"session_id": "bench-" + secrets.token_hex(4), "transcript_path": transcript, "cwd": cwd,
            "permission_mode": "default"}
    edit = {"file_path": f"{cwd}/src/ledger.py", "old_string": "return total\n",
            "new_string": "return round(total, 2)\n", "replace_all": False}
    bash = {"command": "pytest -q tests/test_ledger.py", "description": "run the ledger tests", "timeout": 120000}
    out = "".join(f"tests/test_ledger.py::test_case_{i} PASSED\n" for i in range(40))
    return {
        "SessionStart": {"source": "resume", "model": "claude-sonnet-4-5"},
        "UserPromptSubmit": {"prompt": "Why does the ledger total drift by a cent after a refund? Fix it and "
                                       "add a test that covers refunds of discounted items."},
        "PreToolUse": {"tool_name": "Edit", "tool_input": edit, "tool_use_id": "toolu_01bench"},
        "PostToolUse": {"tool_name": "Bash", "tool_input": bash, "tool_use_id": "toolu_02bench",
                        "tool_response": {"stdout": out, "stderr": "", "interrupted": False}},
        "PostToolUseFailure": {"tool_name": "Bash", "tool_input": bash, "tool_use_id": "toolu_03bench",
                               "error": "Exit code 1\nFAILED tests/test_ledger.py::test_refund - AssertionError"},
        "PreCompact": {"trigger": "auto", "custom_instructions": ""},
        "SessionEnd": {"reason": "other"},
        "Stop": {"stop_hook_active": False},
        "SubagentStop": {"stop_hook_active": False},
        "TeammateIdle": {"teammate_name": "qa", "team_name": "bench"},
        "TaskCompleted": {"task_id": "1", "task_subject": "fix the ledger", "teammate_name": "dev",
                          "team_name": "bench"},
        "ConfigChange": {"source": "project_settings", "file_path": f"{cwd}/.claude/settings.json"},
    } | {"_base": base}


def transcript(path: Path, cwd: str) -> None:
    """A short transcript for the PreCompact and SessionEnd handlers to read."""
    lines = []
    for i in range(20):
        lines.append({"type": "user", "uuid": f"u{i}", "sessionId": "bench", "cwd": cwd, "timestamp":
                      f"2026-01-01T00:{i:02d}:00Z", "message": {"role": "user", "content": f"step {i} of the fix"}})
        lines.append({"type": "assistant", "uuid": f"a{i}", "parentUuid": f"u{i}", "sessionId": "bench",
                      "timestamp": f"2026-01-01T00:{i:02d}:30Z",
                      "message": {"role": "assistant", "content": [{"type": "text", "text": f"done step {i}"}]}})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def populate(s: Scratch, api, chunks: int, tool_calls: int) -> None:
    """Load S as the benchmark sets it, writing as API's agent (``ctx.api(agent)``)."""
    from . import search

    search.load(s, chunks, rewrites=0)  # chunks with vectors, working memory full, 20 summaries
    t0 = time.perf_counter()
    for i in range(tool_calls):
        api.call("record_tool_call", tool=("Bash", "Read", "Edit", "Grep")[i % 4], latency_ms=20 + i % 80,
                 status="ok" if i % 17 else "error", input_preview=f'{{"command": "make test-{i % 300}"}}',
                 output_preview=f"result {i}")
    print(f"recorded {tool_calls} signed tool calls in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    with s.connect() as conn:
        conn.autocommit = True
        conn.execute("vacuum analyze")


def _timed(argv: list[str], data: bytes, env: dict) -> tuple[float, int]:
    t0 = time.perf_counter()
    p = subprocess.run(argv, input=data, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return (time.perf_counter() - t0) * 1000, p.returncode


def _wait_for_socket(path: str, timeout: float) -> None:
    from ..hooks import client

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = socket.socket(socket.AF_UNIX)
        try:
            address, fd = client.unix_address(path)
            try:
                s.connect(address)
                return
            finally:
                if fd is not None:
                    os.close(fd)
        except OSError:
            time.sleep(0.05)
        finally:
            s.close()
    raise SystemExit(f"scsql bench hooks: the hook server did not start within {timeout:g} s (see its log)")


def _stop_server(home: str, agent: str) -> None:
    import fcntl

    path = os.path.join(home, "hooks", agent + ".lock")
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = int(Path(path).read_text().strip() or 0)
        if pid:
            os.kill(pid, signal.SIGTERM)
            fcntl.flock(fd, fcntl.LOCK_EX)  # held until that server is gone
    finally:
        os.close(fd)


def run(ctx, args: argparse.Namespace) -> int:
    from ..hooks import events

    scratch_db = ScratchDatabase(ctx.admin_conninfo(), "hooks")
    home = tempfile.mkdtemp(prefix="scsqlb")
    with exit_on_sigterm():
        try:
            scratch_db.create()
            name = scratch_db.add_agent(f"bench_hooks_{scratch_db.name.rsplit('_', 1)[1]}")
            app = ctx.settings.agent_dsn and with_db(ctx.settings.agent_dsn, scratch_db.name) or \
                with_db(ctx.admin_conninfo(), scratch_db.name, APP_ROLE)
            agent = scratch_db.open_agent(name, app)
            populate(Scratch(scratch_db.admin, scratch_db.project, agent), ctx.api(agent), args.chunks,
                     args.tool_calls)
            env = dict(os.environ, SCSQL_AGENT_DSN=app, SCSQL_KEYSTORE=str(scratch_db.keystore.directory),
                       SCSQL_DATA_DIR=home)
            if args.handlers:
                env["SCSQL_HOOK_HANDLERS"] = args.handlers
            return _measure(events, home, name, env, args)
        finally:
            _stop_server(home, scratch_db.agents[0]) if scratch_db.agents else None
            scratch_db.drop()
            if not args.keep_home:
                import shutil

                shutil.rmtree(home, ignore_errors=True)


def _measure(events, home: str, agent: str, env: dict, args: argparse.Namespace) -> int:
    from ..hooks import client

    cwd = str(Path(home) / "project")
    os.makedirs(cwd, exist_ok=True)
    tpath = Path(home) / "transcript.jsonl"
    transcript(tpath, cwd)
    events_ = payloads(cwd, str(tpath))
    base = events_.pop("_base")
    hooks = events.settings_hooks(agent, home)
    commands: list[tuple[str, list[str], bytes, bool]] = []
    for e in events.EVENTS:
        (group,) = hooks[e.name]
        (handler,) = group["hooks"]
        data = json.dumps({**base, "hook_event_name": e.name, **events_[e.name]}).encode()
        commands.append((e.name, ["/bin/sh", "-c", handler["command"]], data, bool(handler.get("async"))))
    py = shlex.quote(sys.executable)
    baselines = [("true", ["/bin/sh", "-c", "true"], b"", False),
                 ("python -c pass", ["/bin/sh", "-c", f"{py} -c pass"], b"", False),
                 ("python -S -c pass", ["/bin/sh", "-c", f"{py} -S -c pass"], b"", False)]
    everything = baselines + commands
    # The first hook starts the agent's server, as the first hook of a session does.
    subprocess.run(commands[0][1], input=commands[0][2], capture_output=True, env=env)
    _wait_for_socket(client.socket_path(home, agent), 120)
    times: dict[str, list[float]] = {n: [] for n, *_ in everything}
    failures: dict[str, int] = {n: 0 for n, *_ in everything}
    for i in range(args.warmup + args.rounds):
        for name, argv, data, _ in everything:
            ms, code = _timed(argv, data, env)
            if i >= args.warmup:
                times[name].append(ms)
                failures[name] += code not in (0, 2)
    spooled = sum(1 for _ in Path(client.spool_dir(home, agent)).glob("*.jsonl")) \
        if Path(client.spool_dir(home, agent)).is_dir() else 0
    print()
    print(f"{args.rounds} rounds, after {args.warmup} warm-up; database: {args.chunks} chunks, working memory "
          f"full, {args.tool_calls} tool calls; times in ms, start to exit, through /bin/sh -c as Claude Code runs "
          f"hooks")
    print(f"{'command':<22} {'p50':>7} {'p95':>7} {'mean':>7}  {'Claude Code waits':<18} failed")
    for name, _, _, is_async in everything:
        t = sorted(times[name])
        p50, p95 = statistics.median(t), t[int(0.95 * (len(t) - 1))]
        waits = "no (async)" if is_async else "yes"
        print(f"{name:<22} {p50:>7.1f} {p95:>7.1f} {statistics.fmean(t):>7.1f}  {waits:<18} {failures[name]}")
    if spooled:
        print(f"note: {spooled} spool file(s) were written: some hooks failed open (budget exceeded or an error)")
    tool = {n: sorted(times[n]) for n in ("PreToolUse", "PostToolUse")}
    worst = max(t[int(0.95 * (len(t) - 1))] for t in tool.values())
    print(f"goal: PreToolUse and PostToolUse p95 <= 50 ms ({'met' if worst <= 50 else 'not met'}: {worst:.1f} ms)")
    return 0


def register(bsub) -> None:
    p = bsub.add_parser("hooks", help="p50/p95 of each installed Claude Code hook command, end to end, beside "
                                      "true and python -c pass")
    p.add_argument("--chunks", type=int, default=100_000, help="knowledge-base chunks (with vectors)")
    p.add_argument("--tool-calls", type=int, default=10_000, help="signed tool calls recorded beforehand")
    p.add_argument("--rounds", type=int, default=100, help="invocations of each command")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--handlers", help=argparse.SUPPRESS)  # a stand-in handler module (tests)
    p.add_argument("--keep-home", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(bench_func=run)
