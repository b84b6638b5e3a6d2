"""Who starts the embedded server (scsql/core/embedded.py): scsql up starts it
and lifts a hold; agent processes start it when it is down and wait for each
other; scsql down --hold keeps it down (SC013) until scsql up; other commands
never start it (SC034). Real processes on a real server in a temporary data
directory."""

from __future__ import annotations

import subprocess

import fasteners
import pytest

from ..helpers import one_error_line, scsql, scsql_process, scsql_up, wait_for

N = 4


def _worker(env: dict[str, str]) -> subprocess.Popen:
    return scsql_process("worker", "--agent", "default", "--once", "--job", "learnings", env=env)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    yield from scsql_up(tmp_path_factory, "rule")


def _running(d) -> bool:
    pid = d / "pg" / "postmaster.pid"
    return pid.exists() and "ready" in pid.read_text()


def test_down_hold_keeps_agent_processes_from_starting_it_until_up(data):
    d, env = data
    down = scsql("down", "--hold", env=env)
    assert down.returncode == 0 and "held down" in down.stdout, down.stderr
    line = one_error_line(scsql("worker", "--agent", "default", "--once", env=env), "SC013")
    assert "scsql up" in line
    assert not _running(d)
    status = one_error_line(scsql("status", env=env), "SC034")  # status never starts it, and says why it is down
    assert "held down by scsql down --hold" in status
    one_error_line(scsql("verify", env=env), "SC034")
    up = scsql("up", env=env, timeout=300)
    assert up.returncode == 0 and "(started)" in up.stdout, up.stderr
    assert not (d / ".hold").exists()
    done = scsql("worker", "--agent", "default", "--once", env=env)
    assert done.returncode == 0, done.stderr


def test_plain_down_then_agents_racing_all_succeed_and_one_starts_it(data):
    d, env = data
    assert scsql("down", env=env).returncode == 0
    procs = [_worker(env) for _ in range(N)]
    results = [(p.wait(180), *p.communicate()) for p in procs]
    assert [rc for rc, _, _ in results] == [0] * N, [err for _, _, err in results]
    starters = [err for _, _, err in results if "starting the embedded server" in err]
    waiters = [err for _, _, err in results if "waiting for pid" in err]
    assert len(starters) == 1, [err for _, _, err in results]
    print(f"\n{N} agent processes on a stopped server: 1 started it, {len(waiters)} waited for it, "
          f"{N - 1 - len(waiters)} found it up")
    assert _running(d)


def test_a_hold_written_while_agents_wait_stops_them_all(data):
    """Agents waiting on the start lock re-check the hold once they hold it: a scsql down --hold
    that lands while they wait keeps every one of them from starting the server."""
    d, env = data
    assert scsql("down", env=env).returncode == 0
    lock = fasteners.InterProcessLock(str(d / ".up.lock"))
    assert lock.acquire(blocking=False)
    procs: list[subprocess.Popen] = []
    try:
        procs = [_worker(env) for _ in range(N)]
        pids = {p.pid for p in procs}
        # the race: all of them are waiting on the lock (each says so) before the hold is written
        buffers = {p.pid: "" for p in procs}

        def all_waiting() -> bool:
            for p in procs:
                if "waiting for pid" not in buffers[p.pid]:
                    line = p.stderr.readline()
                    buffers[p.pid] += line
            return all("waiting for pid" in buffers[pid] for pid in pids)

        wait_for(all_waiting, timeout=120, every=0)
        # scsql down --hold writes the hold at once, then waits for the lock like a starter
        down = scsql_process("down", "--hold", env=env)
        wait_for(lambda: (d / ".hold").exists(), timeout=60)
    finally:
        lock.release()
    out, err = down.communicate(timeout=120)
    assert down.returncode == 0 and "was not running" in out, err
    for p in procs:
        rc = p.wait(120)
        err = buffers[p.pid] + p.stderr.read()
        assert rc != 0 and "SC013" in err and "starting the embedded server" not in err, err
    assert not _running(d)
    assert scsql("up", env=env, timeout=300).returncode == 0


def test_an_agent_process_for_an_unknown_agent_says_no_such_agent(data):
    d, env = data
    for command in (["mcp", "--agent", "nosuch"], ["worker", "--agent", "nosuch", "--once"]):
        line = one_error_line(scsql(*command, env=env), "SC003")
        assert "'nosuch' is not registered" in line and "private key" not in line, line
    # a registered agent whose key is not here: still the key error
    key = d / "keys" / "default.key"
    moved = key.with_suffix(".away")
    key.rename(moved)
    try:
        one_error_line(scsql("worker", "--agent", "default", "--once", env=env), "SC031")
    finally:
        moved.rename(key)
