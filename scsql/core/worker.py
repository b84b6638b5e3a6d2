"""``scsql worker``: the background process that drains scsql's queued jobs
(embeddings, maintenance, ...), so that writes never wait on slow work.

Each subsystem contributes jobs (``scsql/subsystems.py`` lists them). The worker acts as one agent, named on the command
line; it wakes on LISTEN/NOTIFY hints and polls as a fallback, since a
notification is only a hint and may be missed.
"""

from __future__ import annotations

import select
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psycopg
from psycopg import sql

from .db import Agent

@dataclass
class Job:
    """One kind of background work. ``run(agent)`` does a bounded batch and
    returns how many units it did (0 when there was nothing to do)."""

    name: str
    run: Callable[[Agent], int]
    # Channel names, or functions of the agent that return one (names that
    # depend on the agent's project).
    channels: list[str | Callable[[Agent], str]] = field(default_factory=list)


def drain(agent: Agent, jobs: list[Job], on_progress: Callable[[str, int], None] = lambda n, k: None) -> int:
    """Run every job until none has work left. Returns the units done."""
    total = 0
    busy = True
    while busy:
        busy = False
        for job in jobs:
            done = job.run(agent)
            if done:
                busy = True
                total += done
                on_progress(job.name, done)
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
    with psycopg.connect(agent.db.conninfo, autocommit=True) as listener:
        for ch in channels:
            listener.execute(sql.SQL("listen {}").format(sql.Identifier(ch)))
        while not stop():
            drain(agent, jobs, on_progress)
            ready, _, _ = select.select([listener.fileno()], [], [], poll_seconds)
            if ready:
                # Consume every pending notification; their content is only a hint.
                for _ in listener.notifies(timeout=0):
                    pass
            time.sleep(0)
