"""``scsql worker``: the background process that drains scsql's queued jobs
(embeddings, maintenance, ...), so that writes never wait on slow work.

Each subsystem contributes jobs (``scsql/subsystems.py`` lists them). The worker acts as one agent, named on the command
line; it wakes on LISTEN/NOTIFY hints and polls as a fallback, since a
notification is only a hint and may be missed. Every round of its loop (and
every HEARTBEAT_SECONDS of a long drain) it records a heartbeat
(scsql.worker_heartbeat), which scsql doctor and scsql.metrics() read: the
host and process id it reports, and the server process and login of its
connection, which the database records itself.
"""

from __future__ import annotations

import logging
import os
import select
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from .db import Agent
from .errors import ScsqlError
from . import errors

log = logging.getLogger("scsql.worker")
HEARTBEAT_SECONDS = 10.0  # the longest a drain goes without a heartbeat

@dataclass
class Job:
    """One kind of background work. ``run(agent)`` does a bounded batch and
    returns how many units it did (0 when there was nothing to do)."""

    name: str
    run: Callable[[Agent], int]
    # Channel names, or functions of the agent that return one (names that
    # depend on the agent's project).
    channels: list[str | Callable[[Agent], str]] = field(default_factory=list)
    # How many units are waiting (for a progress bar's total and ETA), or None.
    pending: Callable[[Agent], int] | None = None
    unit: str = "unit"
    # Started once when a worker serves (not for --once): a service of the
    # job to other processes (the embedding job answers query embeddings).
    serves: Callable[[Agent], Any] | None = None


class Heartbeat:
    """The worker's heartbeat: at most one write per HEARTBEAT_SECONDS unless
    forced; a database without scsql.worker_heartbeat (not migrated yet) is
    reported once and otherwise ignored."""

    def __init__(self, agent: Agent, jobs: list[Job], poll_seconds: float):
        self.agent, self.poll = agent, poll_seconds
        self.names = [j.name for j in jobs]
        self.units = 0
        self.last = float("-inf")
        self.enabled = True

    def beat(self, force: bool = False) -> None:
        if not self.enabled or (not force and time.monotonic() - self.last < HEARTBEAT_SECONDS):
            return
        try:
            with self.agent.transaction() as conn:
                conn.execute("select scsql.worker_heartbeat(%s::text, %s::integer, %s::text[], "
                             "%s::double precision, %s::bigint)",
                             (socket.gethostname()[:255] or "localhost", os.getpid(), self.names, self.poll, self.units))
        except ScsqlError as exc:
            if exc.code == errors.AGENT_REVOKED or exc.code == errors.NOT_AN_AGENT:
                raise
            log.warning("no worker heartbeat recorded (scsql migrate adds it): %s", exc)
            self.enabled = False
        self.last = time.monotonic()


class Progress:
    """What a drain shows on stderr: for a job that reports its queue size,
    a progress bar with the total, the rate and the ETA (tqdm; on a terminal
    only, unless SHOW says otherwise); and, once the job has no work left,
    one line saying its queue is drained, with how much it did and how fast
    (also in a pipe)."""

    def __init__(self, agent: Agent, show: bool | None = None, out: Any = None):
        self.agent = agent
        self.show = show
        self.out = out or sys.stderr
        self._bars: dict[str, Any] = {}
        self._done: dict[str, int] = {}
        self._seconds: dict[str, float] = {}  # seconds each job ran

    def visible(self) -> bool:
        """Whether bars are drawn (SHOW, or by default on a terminal)."""
        if self.show is not None:
            return self.show
        try:
            return self.out.isatty()
        except (AttributeError, ValueError):
            return False

    def _bar(self, job: Job, total: int) -> None:
        from tqdm import tqdm

        self._bars[job.name] = tqdm(total=total, desc=job.name, unit=job.unit, file=self.out,
                                    disable=None if self.show is None else not self.show,
                                    dynamic_ncols=True, smoothing=0.1)

    def start(self, job: Job) -> None:
        """Before a job's first batch: draw its bar at once when work waits, so
        the first batch (the model's loading included) is not a silent minute."""
        if job.pending is None or job.name in self._bars or job.name in self._done or not self.visible():
            return
        waiting = job.pending(self.agent)
        if waiting:
            self._bar(job, waiting)

    def update(self, job: Job, done: int, seconds: float = 0.0) -> None:
        """Count DONE units of JOB, done in SECONDS of its own (the time the
        drained line divides by: not that of the other jobs beside it)."""
        if job.name not in self._done:
            self._done[job.name] = 0
            self._seconds[job.name] = 0.0
            if job.pending is not None and job.name not in self._bars:
                self._bar(job, done + job.pending(self.agent))
        self._done[job.name] += done
        self._seconds[job.name] += seconds
        bar = self._bars.get(job.name)
        if bar is not None:
            if bar.n + done > (bar.total or 0):
                bar.total = bar.n + done  # more was queued meanwhile
            bar.update(done)

    def drained(self, report: bool = True) -> dict[str, int]:
        """Close the bars; say (REPORT) which queues are drained. Returns units done per job."""
        for name in [n for n in self._bars if n not in self._done]:  # started, then had nothing to do
            self._bars.pop(name).close()
        for name, n in self._done.items():
            bar = self._bars.pop(name, None)
            if bar is not None:
                bar.close()
            if not report:
                continue
            seconds = self._seconds[name]
            print(f"scsql: {name} queue drained: {n} done in {seconds:.1f} s ({n / max(seconds, 1e-9):.1f}/s)",
                  file=self.out, flush=True)
        done, self._done = self._done, {}
        return done


def drain(agent: Agent, jobs: list[Job], on_progress: Callable[[str, int], None] = lambda n, k: None,
          show: bool | None = None, heartbeat: Heartbeat | None = None) -> int:
    """Run every job until none has work left, showing progress (Progress;
    SHOW None: a bar on a terminal only) and beating the worker's heartbeat.
    Returns the units done."""
    progress = Progress(agent, show)
    heartbeat = heartbeat or Heartbeat(agent, jobs, 5.0)
    heartbeat.beat(force=True)
    total = 0
    busy = True
    try:
        while busy:
            busy = False
            for job in jobs:
                progress.start(job)
                t0 = time.perf_counter()
                done = job.run(agent)
                if done:
                    busy = True
                    total += done
                    heartbeat.units += done
                    progress.update(job, done, time.perf_counter() - t0)
                    on_progress(job.name, done)
                heartbeat.beat()
    except BaseException:
        progress.drained(report=False)
        raise
    progress.drained()
    return total


def serve(
    agent: Agent,
    jobs: list[Job],
    poll_seconds: float = 5.0,
    stop: Callable[[], bool] = lambda: False,
    on_progress: Callable[[str, int], None] = lambda n, k: None,
) -> None:
    """Drain, then sleep until a NOTIFY on a job's channel or the poll interval; repeat."""
    channels = sorted({c(agent) if callable(c) else c for j in jobs for c in j.channels})
    heartbeat = Heartbeat(agent, jobs, poll_seconds)
    for job in jobs:
        if job.serves is not None:
            job.serves(agent)
    with psycopg.connect(agent.db.conninfo, autocommit=True, application_name=agent.db.application_name) as listener:
        for ch in channels:
            listener.execute(sql.SQL("listen {}").format(sql.Identifier(ch)))
        while not stop():
            drain(agent, jobs, on_progress, heartbeat=heartbeat)
            ready, _, _ = select.select([listener.fileno()], [], [], poll_seconds)
            if ready:
                # Consume every pending notification; their content is only a hint.
                for _ in listener.notifies(timeout=0):
                    pass
            time.sleep(0)
