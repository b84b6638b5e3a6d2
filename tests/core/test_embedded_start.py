"""Agent processes started while the embedded server is down: one starts it,
the others wait for it and then connect (real processes, a real server in a
temporary data directory)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import fasteners
import pytest

from ..helpers import one_error_line, scsql, scsql_process, scsql_up

N = 4


def _agent_process(env: dict[str, str]) -> subprocess.Popen:
    """scsql worker --once as the default agent: opens the agent like scsql mcp does, drains, exits."""
    return scsql_process("worker", "--agent", "default", "--once", "--job", "learnings", env=env)


class Watched:
    """A process whose stderr lines are collected as they come."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.lines: list[str] = []
        self.out: list[str] = []
        self.readers = [threading.Thread(target=self._read, args=(proc.stderr, self.lines), daemon=True),
                        threading.Thread(target=self._read, args=(proc.stdout, self.out), daemon=True)]
        for r in self.readers:
            r.start()

    @staticmethod
    def _read(stream, into: list[str]) -> None:
        for line in stream:
            into.append(line.rstrip("\n"))

    def said(self, text: str) -> bool:
        return any(text in ln for ln in list(self.lines))

    def finish(self, timeout: float) -> tuple[int, str]:
        self.proc.wait(timeout)
        for r in self.readers:
            r.join(10)
        return self.proc.returncode, "\n".join(self.out)


@pytest.fixture(scope="module")
def set_up(tmp_path_factory):
    """A data directory set up once by scsql up (server, schema, default agent and key)."""
    yield from scsql_up(tmp_path_factory, "embedded")


@pytest.fixture
def stopped(set_up):
    """That data directory with its server stopped."""
    data, env = set_up
    scsql("down", env=env)
    assert scsql("status", env=env).returncode != 0
    return data, env


def test_agent_processes_started_together_wait_for_the_one_that_starts_the_server(stopped):
    data, env = stopped
    # Hold the start lock, as a starter does, until every process is waiting on it.
    lock = fasteners.InterProcessLock(str(data / ".up.lock"))
    assert lock.acquire(blocking=False)
    procs: list[Watched] = []
    try:
        procs = [Watched(_agent_process(env)) for _ in range(N)]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not all(p.said("waiting for pid") for p in procs):
            if any(p.proc.poll() is not None for p in procs):
                break
            time.sleep(0.05)
        waiting = sum(p.said("waiting for pid") for p in procs)
    finally:
        lock.release()
    results = [p.finish(180) for p in procs]
    assert waiting == N, [p.lines for p in procs]  # the race really happened: all were waiting at once
    assert [rc for rc, _ in results] == [0] * N, [p.lines for p in procs]
    assert all("drained" in out for _, out in results)
    starters = [p for p in procs if p.said("starting the embedded server")]
    assert len(starters) == 1, [p.lines for p in procs]
    assert scsql("status", env=env).returncode == 0


def test_agent_processes_racing_on_a_stopped_server_all_connect(stopped):
    data, env = stopped
    procs = [Watched(_agent_process(env)) for _ in range(N)]
    results = [p.finish(180) for p in procs]
    assert [rc for rc, _ in results] == [0] * N, [p.lines for p in procs]
    assert sum(p.said("starting the embedded server") for p in procs) == 1, [p.lines for p in procs]


def test_a_start_that_never_comes_up_is_one_clear_error(stopped):
    data, env = stopped
    lock = fasteners.InterProcessLock(str(data / ".up.lock"))
    assert lock.acquire(blocking=False)
    try:
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "scsql", "worker", "--agent", "default", "--once"],
                              env={**{k: v for k, v in os.environ.items() if not k.startswith("SCSQL_")},
                                   **env, "SCSQL_START_TIMEOUT": "1"},
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        elapsed = time.monotonic() - started
    finally:
        lock.release()
    assert proc.returncode != 0
    errors = [ln for ln in proc.stderr.splitlines() if "error" in ln]
    assert len(errors) == 1 and "SC033" in errors[0] and "did not come up within 1 s" in errors[0], proc.stderr
    assert elapsed < 60
    one_error_line(scsql("worker", "--agent", "default", "--once", env={**env, "SCSQL_START_TIMEOUT": "x"}), "SC010")
