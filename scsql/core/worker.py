"""``scsql worker``: the background process that drains scsql's queued jobs
(embeddings, maintenance, ...), so that writes never wait on slow work.

Each subsystem contributes jobs (``scsql/subsystems.py`` lists them). The worker acts as one agent, named on the command
line; it wakes on LISTEN/NOTIFY hints and polls as a fallback, since a
notification is only a hint and may be missed. Every round of its loop (and
every HEARTBEAT_SECONDS of a long drain) it records a heartbeat
(scsql.worker_heartbeat), which scsql doctor and scsql.metrics() read.
"""

from __future__ import annotations

import logging
import os
import select
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psycopg
from psycopg import sql

from .db import Agent
from .errors import ScsqlError

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
            if exc.code == "SC002" or exc.code == "SC001":
                raise
            log.warning("no worker heartbeat recorded (scsql migrate adds it): %s", exc)
            self.enabled = False
        self.last = time.monotonic()


def drain(agent: Agent, jobs: list[Job], on_progress: Callable[[str, int], None] = lambda n, k: None,
          heartbeat: Heartbeat | None = None) -> int:
    """Run every job until none has work left. Returns the units done."""
    heartbeat = heartbeat or Heartbeat(agent, jobs, 5.0)
    heartbeat.beat(force=True)
    total = 0
    busy = True
    while busy:
        busy = False
        for job in jobs:
            done = job.run(agent)
            if done:
                busy = True
                total += done
                heartbeat.units += done
                on_progress(job.name, done)
            heartbeat.beat()
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
    with psycopg.connect(agent.db.conninfo, autocommit=True) as listener:
        for ch in channels:
            listener.execute(sql.SQL("listen {}").format(sql.Identifier(ch)))
        while not stop():
            drain(agent, jobs, on_progress, heartbeat)
            ready, _, _ = select.select([listener.fileno()], [], [], poll_seconds)
            if ready:
                # Consume every pending notification; their content is only a hint.
                for _ in listener.notifies(timeout=0):
                    pass
            time.sleep(0)
