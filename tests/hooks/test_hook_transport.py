"""The hook transport for real: the exact installed hook commands, the hook
server they start, the spool, against the real database (reached through a
proxy the tests stop and start: "the database is down")."""

from __future__ import annotations

import fcntl
import json
import os
import random
import signal
import stat
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from scsql.hooks import client, daemon, events, spool

from ..hook_transport_helpers import PgProxy, cleanup, event, make_env, wait_for


@pytest.fixture
def hooks(scsql_db):
    project = scsql_db.project()
    agent = scsql_db.agent("hk", project)
    proxy = PgProxy(scsql_db.server.base)
    proxy.up()
    h = make_env(scsql_db, agent.name, proxy)
    h.db_agent = agent
    try:
        yield h
    finally:
        cleanup(h)
        proxy.down()


def _out(r) -> dict | None:
    text = r.stdout.decode().strip()
    return json.loads(text) if text else None


def _tool(i: int, name: str = "PostToolUse", **kw) -> dict:
    fields = {"tool_name": f"t{i:03d}", "tool_input": {"command": f"echo {i}"}, "tool_use_id": f"tu{i}",
              "tool_response": {"stdout": str(i)}}
    return event(name, **{**fields, **kw})


def test_database_down_hooks_fail_open_tell_once_and_spool_then_replay_in_order_once(hooks):
    hooks.proxy.down()
    started = time.monotonic()
    r = hooks.run("session-start", event("SessionStart", source="startup"))
    took = time.monotonic() - started
    assert r.returncode == 0 and b"Traceback" not in r.stderr
    first = _out(r)
    assert "scsql is degraded" in first["systemMessage"] and "hookSpecificOutput" not in first
    assert took < 6.5, f"the hook waited {took:.2f} s"  # its budget: 5 s (it waits for the server it started)
    wait_for(hooks.server_pid, 30, "the hook server the first hook started")

    # The server runs but the database is down: every hook still answers at once, allows, says nothing more.
    pre = hooks.run("pre-tool-use", _tool(0, "PreToolUse", ))
    assert pre.returncode == 0 and _out(pre) is None  # no decision: Claude Code's own permission rules apply
    posts = [hooks.run("post-tool-use", _tool(i)) for i in range(1, 6)]
    assert all(p.returncode == 0 and _out(p) is None for p in posts)
    prompt = hooks.run("user-prompt-submit", event("UserPromptSubmit", prompt="hello"))
    assert prompt.returncode == 0 and _out(prompt) is None  # told once per session, already told
    other = hooks.run("user-prompt-submit", event("UserPromptSubmit", session="sess-2", prompt="hi"))
    assert "scsql is degraded" in _out(other)["systemMessage"]  # a new session is told too

    spooled = hooks.spooled()
    assert [e["hook_event_name"] for e in spooled] == \
        ["SessionStart"] + ["PostToolUse"] * 5 + ["UserPromptSubmit"] * 2  # PreToolUse has nothing to keep
    assert [e.get("tool_name") for e in spooled[1:6]] == [f"t{i:03d}" for i in range(1, 6)]
    d = hooks.spool()
    assert stat.S_IMODE(d.stat().st_mode) == 0o700 and stat.S_IMODE(d.parent.stat().st_mode) == 0o700
    files = list(d.glob("*.jsonl"))
    assert files and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files)
    assert hooks.rows() == []

    hooks.proxy.up()  # the database is back: the server reconnects and replays, in order, once
    rows = wait_for(lambda: (lambda rs: rs if len(rs) >= len(spooled) else None)(hooks.rows()), 60, "the replay")
    wait_for(lambda: not spool.has_pending(hooks.home, hooks.agent), 30, "the spool to empty")
    rows = hooks.rows()
    assert [r["event_id"] for r in rows] == [e["scsql_event_id"] for e in spooled]
    assert [r["seq"] for r in rows] == list(range(1, len(spooled) + 1))
    from scsql.audit.verify import verify

    report = verify(hooks.admin, workers=1, progress=False, full=True)  # every hash and signature
    assert report.ok and report.rows == len(spooled), report.breaks

    # And the server answers for real again.
    r = hooks.run("session-start", event("SessionStart", source="resume"))
    assert _out(r)["hookSpecificOutput"]["additionalContext"] == "stub context"
    assert len(hooks.rows()) == len(spooled) + 1


def test_database_lost_while_serving_then_back(hooks):
    r = hooks.run("session-start", event("SessionStart", source="startup"))
    # No server was running: the hook started one and, within its budget, got the answer from it.
    assert _out(r) == {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "stub context"}}
    assert len(hooks.rows()) == 1
    ok = hooks.run("post-tool-use", _tool(1))
    assert ok.returncode == 0 and len(hooks.rows()) == 2
    denied = hooks.run("pre-tool-use", event("PreToolUse", tool_name="Edit", tool_input={"file_path": "/x/owned.py"}))
    assert _out(denied)["hookSpecificOutput"]["permissionDecision"] == "deny"

    hooks.proxy.down()
    lost = [hooks.run("post-tool-use", _tool(i)) for i in range(2, 6)]
    assert all(p.returncode == 0 for p in lost)
    assert [e["tool_name"] for e in hooks.spooled()] == [f"t{i:03d}" for i in range(2, 6)]
    pre = hooks.run("pre-tool-use", event("PreToolUse", tool_name="Edit", tool_input={"file_path": "/x/owned.py"}))
    assert pre.returncode == 0 and "permissionDecision" not in json.dumps(_out(pre) or {})  # fails open
    hooks.proxy.up()
    wait_for(lambda: len(hooks.rows()) == 6 and not spool.has_pending(hooks.home, hooks.agent), 60, "the replay")
    assert [r["tool"] for r in hooks.rows()] == ["SessionStart"] + [f"t{i:03d}" for i in range(1, 6)]


def test_kill_9_at_random_points_loses_no_acknowledged_event_and_doubles_none(hooks):
    hooks.run("session-start", event("SessionStart", source="startup"))
    wait_for(lambda: hooks.rows(), 30, "the server")
    rng = random.Random(10)
    acknowledged, killed, modes = [], [], Counter()
    lock_fd = None
    for i in range(60):
        mode = ("server", "database down", "no server")[i // 20]
        if i == 20:
            hooks.proxy.down()
        if i == 40:  # the server is gone and another is "starting" (the test holds its lock): hooks spool
            hooks.stop_server()
            lock_fd = os.open(os.path.join(hooks.home, "hooks", hooks.agent + ".lock"), os.O_RDWR)
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        p = subprocess.Popen(hooks.argv("post-tool-use"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=hooks.env)  # the hook process itself, to kill it
        p.stdin.write(json.dumps(_tool(i)).encode())
        p.stdin.close()
        time.sleep(rng.uniform(0, 0.15))
        p.send_signal(signal.SIGKILL)
        code = p.wait()
        (acknowledged if code == 0 else killed).append(f"t{i:03d}")
        modes[(mode, code == 0)] += 1
    assert lock_fd is not None
    os.close(lock_fd)
    hooks.proxy.up()
    # The next hook starts a server, which replays what the killed and the acknowledged hooks left.
    hooks.run("session-start", event("SessionStart", source="resume"))
    wait_for(lambda: hooks.server_pid() and not spool.has_pending(hooks.home, hooks.agent), 60, "the replay")
    wait_for(lambda: any(r["tool"] == "SessionStart" for r in hooks.rows()[1:]), 30, "the last row")
    rows = hooks.rows()
    tools = Counter(r["tool"] for r in rows if r["tool"].startswith("t"))
    assert not [t for t, n in tools.items() if n > 1], "an event was written twice"
    assert not [t for t in acknowledged if t not in tools], "an acknowledged event was lost"
    # The transport sends an event again only when the database went away
    # before the commit of its batch was acknowledged (the event key makes
    # that one row): at most the batch in flight when it went down, at t019.
    again = {r["tool"] for r in rows if r["event_id"] in hooks.redelivered()}
    assert len(again) <= 2 and all(int(t[1:]) < 20 for t in again), again
    # The kills really landed at different points: some hooks finished, some died, in each mode.
    assert all(modes[(m, True)] and modes[(m, False)] for m in ("server", "database down", "no server")), modes


# ``python -m scsql``, with scsql/hooks/cli.py's commands added to the command line when
# scsql/subsystems.py does not list them yet.
SCSQL = """
import sys
from scsql import cli, subsystems
from scsql.hooks import cli as hooks_cli
if not any(s.name == "hooks" for s in subsystems.SUBSYSTEMS):
    subsystems.SUBSYSTEMS += (subsystems.Subsystem("hooks", commands=hooks_cli.register),)
sys.exit(cli.main(sys.argv[1:]))
"""


MALFORMED = [
    ("post-tool-use", b"not json", "not JSON"),
    ("post-tool-use", b"", "no event on stdin"),
    ("post-tool-use", b"[1, 2]", "not a JSON object"),
    ("post-tool-use", b'{"hook_event_name": "PostToolUse", "tool_name": "Bash"}', "no session_id"),
    ("post-tool-use", b'{"hook_event_name": "PostToolUse", "session_id": "s"}', "no tool_name"),
    ("post-tool-use", b'{"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Bash"}',
     "this is the post-tool-use hook"),
    ("post-tool-use", b'{"session_id": "s", "tool_name": "Bash"}', "hook_event_name is None"),
    ("post-tool-use", b'\xff\xfe{}', "not UTF-8"),
    ("post-tool-use", b'{"a": NaN}', "not JSON"),
    ("post-tool-use", b"[" * 100000, "not JSON"),
    ("no-such-event", b'{}', "unknown hook event 'no-such-event'"),
]


def test_a_home_too_deep_for_a_socket_path_finds_no_server_rather_than_failing(tmp_path):
    """A socket path longer than sun_path (108 bytes) is reached through
    /proc/self/fd of its directory. Before the first server has made that
    directory, a hook must find no server (and start one), not fail."""
    home = tmp_path / ("d" * 60) / ("e" * 60)
    home.mkdir(parents=True)
    assert len(os.fsencode(client.socket_path(str(home), "a"))) > 108
    with pytest.raises(client.Unreachable):
        client.exchange(str(home), "a", b"{}\n", 1.0)


@pytest.mark.parametrize("subcommand,data,message", MALFORMED)
def test_malformed_event_is_refused_clearly_without_traceback(hooks, subcommand, data, message):
    argv = hooks.argv("post-tool-use")
    argv[argv.index("post-tool-use")] = subcommand
    r = subprocess.run(argv, input=data, capture_output=True, env=hooks.env, timeout=60)
    err = r.stderr.decode()
    assert r.returncode == 1 and message in err and "Traceback" not in err, err
    assert err.startswith("scsql hook: ") and err.count("\n") == 1
    assert not hooks.spool().exists() and hooks.server_pid() is None


def test_ten_megabytes_of_input_is_taken_not_refused(hooks):
    big = json.dumps(event("PostToolUse", tool_name="Read", tool_response={"content": "x " * 5_000_000})).encode()
    r = hooks.run("post-tool-use", big)
    assert r.returncode == 0 and b"Traceback" not in r.stderr, r.stderr
    bad_agent = subprocess.run(hooks.argv("stop")[:-4] + ["--agent", "../x"], input=b"{}", capture_output=True,
                               env=hooks.env, timeout=60)
    assert bad_agent.returncode == 1 and b"--agent must name the agent" in bad_agent.stderr


def test_racing_hooks_start_exactly_one_server(hooks):
    procs = [subprocess.Popen(hooks.command("post-tool-use"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=hooks.env) for _ in range(8)]
    for i, p in enumerate(procs):
        p.stdin.write(json.dumps(_tool(i)).encode())
    for p in procs:  # all of them find no server at (nearly) the same moment
        p.stdin.close()
    assert all(p.wait(60) == 0 for p in procs)
    wait_for(lambda: not spool.has_pending(hooks.home, hooks.agent) and len(hooks.rows()) == 8, 60, "the replay")
    log = Path(hooks.home, "hooks", hooks.agent + ".log")
    wait_for(lambda: log.read_text().count("another server serves") + log.read_text().count("listening on") >= 2,
             30, "the racing servers")
    text = log.read_text()
    assert text.count("listening on") == 1, text  # one server ...
    assert text.count("another server serves") >= 1, text  # ... though several were started: the race happened
    assert sorted(r["tool"] for r in hooks.rows()) == [f"t{i:03d}" for i in range(8)]


def test_worker_job_replays_the_spool(hooks, monkeypatch):
    lines = [json.dumps({**_tool(i), "scsql_event_id": f"e{i}", "scsql_received_at": "2026-01-01T00:00:00Z"})
             for i in range(3)]
    client.spool_write(hooks.home, hooks.agent, lines[:2])
    client.spool_write(hooks.home, hooks.agent, lines[2:] + [lines[0]])  # spooled twice: written once
    client.spool_write(hooks.home, hooks.agent, [json.dumps({**_tool(9), "scsql_event_id": "bad",
                                                             "stub_refuse": True})])
    monkeypatch.setenv("SCSQL_DATA_DIR", hooks.home)
    monkeypatch.setenv(daemon.HANDLERS_ENV, "tests.hook_stub_handlers")
    (job,) = daemon.jobs()
    assert job.run(hooks.db_agent) == 3
    assert [r["event_id"] for r in hooks.rows()] == ["e0", "e1", "e2"]
    assert job.run(hooks.db_agent) == 0
    assert len(list((hooks.spool() / "failed").glob("*.jsonl"))) == 1  # the refused one, set aside


def test_settings_hooks_cover_every_event_and_every_tool():
    hooks_obj = events.settings_hooks("alice", "/data/scsql")
    assert set(hooks_obj) == {e.name for e in events.EVENTS}
    for e in events.EVENTS:
        (group,) = hooks_obj[e.name]
        (handler,) = group["hooks"]
        assert handler["command"] == events.hook_command(e.subcommand, "alice", "/data/scsql")
        assert handler["command"].split()[1:3] == ["-S", "-I"] and "client.py" in handler["command"]
        if e.name in client.TOOL_EVENTS:
            assert group["matcher"] == "*"  # every tool, mcp__ ones included
        assert handler.get("async", False) == (e.name in ("PostToolUse", "PostToolUseFailure"))


def test_scsql_hook_serve_single_private_socket_and_idle_exit(hooks):
    cli = [sys.executable, "-c", SCSQL, "--data-dir", hooks.home, "hook"]
    server = subprocess.Popen(cli + ["serve", "--agent", hooks.agent, "--idle", "3"], env=hooks.env,
                              stderr=subprocess.PIPE, text=True)
    sock = Path(client.socket_path(hooks.home, hooks.agent))
    wait_for(sock.exists, 60, "the socket")
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600 and stat.S_IMODE(sock.parent.stat().st_mode) == 0o700
    second = subprocess.run(cli + ["serve", "--agent", hooks.agent], env=hooks.env, capture_output=True, text=True,
                            timeout=120)
    assert second.returncode == 0 and "another server serves" in second.stderr
    r = hooks.run("session-start", event("SessionStart", source="startup"))
    assert _out(r)["hookSpecificOutput"]["additionalContext"] == "stub context"
    assert server.wait(60) == 0 and not sock.exists()  # idle for 3 s: gone, socket removed
    assert "idle for 3 s" in server.stderr.read()
    listed = subprocess.run(cli + ["events", "--json", "--agent", hooks.agent], env=hooks.env, capture_output=True,
                            text=True, timeout=120)
    assert json.loads(listed.stdout) == {"hooks": events.settings_hooks(hooks.agent, hooks.home)}
    stop = subprocess.run(cli + ["stop-check", "--help"], env=hooks.env, capture_output=True, text=True, timeout=120)
    assert stop.returncode == 0 and "--agent" in stop.stdout  # the coordination hook command is still there


def test_replay_takes_a_dead_replayers_claim_first_and_skips_while_another_replays(hooks):
    def line(i):
        return json.dumps({**_tool(i), "scsql_event_id": f"e{i}", "scsql_received_at": "2026-01-01T00:00:00Z"})

    first = Path(client.spool_write(hooks.home, hooks.agent, [line(0), line(1)]))
    claimed = hooks.spool() / "claimed"
    claimed.mkdir(mode=0o700)
    os.rename(first, claimed / first.name)  # a replayer claimed it, then died before writing
    client.spool_write(hooks.home, hooks.agent, [line(2)])
    written: list[list[str]] = []

    def write(evs):
        written.append([e["scsql_event_id"] for e in evs])

    lock = os.open(hooks.spool() / ".replay.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    assert spool.replay(hooks.home, hooks.agent, write) == 0 and written == []  # another replayer is at work
    os.close(lock)
    assert spool.replay(hooks.home, hooks.agent, write) == 3
    assert written == [["e0", "e1", "e2"]]
    assert not spool.has_pending(hooks.home, hooks.agent) and not list(claimed.iterdir())


def test_slow_server_hook_answers_within_its_budget_and_allows(hooks):
    hooks.run("session-start", event("SessionStart", source="startup"))
    wait_for(lambda: hooks.rows(), 30, "the server")
    slow = event("PreToolUse", session="sess-slow", tool_name="Edit", tool_input={"file_path": "/x/owned.py"},
                 stub_sleep=5)
    started = time.monotonic()
    r = hooks.run("pre-tool-use", slow)
    took = time.monotonic() - started
    assert r.returncode == 0 and took < 2.5, took  # budget 0.2 s; the handler takes 5 s
    out = _out(r)
    assert "did not answer within 0.2 s" in out["systemMessage"] and "hookSpecificOutput" not in out


def test_real_handlers_spool_while_the_database_is_down_and_replay_once(hooks):
    hooks.env.pop("SCSQL_HOOK_HANDLERS")  # scsql.hooks.handlers, as installed
    hooks.proxy.down()
    r = hooks.run("session-start", event("SessionStart", source="startup"))
    assert r.returncode == 0 and "scsql is degraded" in _out(r)["systemMessage"]
    for i in range(3):
        assert hooks.run("post-tool-use", _tool(i, tool_name="Bash")).returncode == 0
    assert len(hooks.spooled()) == 4
    hooks.proxy.up()
    wait_for(lambda: not spool.has_pending(hooks.home, hooks.agent), 60, "the replay")
    import psycopg

    with psycopg.connect(hooks.admin) as conn:
        calls = conn.execute("select tool_use_id from scsql.tool_calls order by chain_id, seq").fetchall()
        sessions = conn.execute("select count(*) from scsql.sessions").fetchone()[0]
    assert [c[0] for c in calls] == ["tu0", "tu1", "tu2"] and sessions == 1
