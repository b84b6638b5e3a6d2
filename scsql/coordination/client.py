"""Client side of coordination: waiting for work, and the queue's background job.

The queue lives in SQL (sql/30_queue.sql). What Python adds is waiting well:
a worker with nothing to do LISTENs on the channel of its (project, team
role), which ``enqueue_task`` and every requeue NOTIFY, and polls as a
fallback, since a notification is only a hint (it is lost while no
connection listens, and it does not say who will win the task).

``scsql.claim_task`` claims and returns at once. The ``claim_task`` tool
adds ``wait_seconds``, which the function does not have: the adapter
registered here turns an empty claim into a LISTEN-and-retry loop, each claim
its own short transaction and no transaction open while it waits, so an MCP
client that asks to wait does not spin or hold the database. The
``broadcast`` tool is a chained, signed write (see :mod:`scsql.audit.signing`): its
adapter signs each message with the agent's key.

:func:`run_task` runs a command for a claimed task, heartbeating its lease,
and completes or fails the task by the command's exit status (``scsql queue
run`` and ``scsql worker -- CMD``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql

from ..audit.signing import SignedField, SignedTable
from ..core.db import Agent
from ..core.errors import ScsqlError
from ..core.paths import resolve_in_root
from ..core.registry import Adapter, Call, Param
from ..core.worker import Job
from ..core import errors

DEFAULT_POLL_SECONDS = 2.0


def my_channel(agent: Agent, purpose: str = "team") -> str:
    """The channel the agent LISTENs on for ``purpose`` (``team``: its (project,
    team role)'s tasks and messages; ``learnings``: its project's queued
    learnings), as the database names it: an opaque name derived from a
    secret of the project, which reveals nothing about any project."""
    with agent.transaction() as conn:
        return conn.execute("select scsql_caller.my_channel(%s) as c", (purpose,)).fetchone()["c"]


class Listener:
    """One autocommit connection LISTENing on a channel."""

    def __init__(self, conninfo: str, channel: str):
        self.channel = channel
        self.conn = psycopg.connect(conninfo, autocommit=True)
        self.conn.execute(sql.SQL("listen {}").format(sql.Identifier(channel)))

    def wait(self, timeout: float) -> bool:
        """Block until a notification arrives or ``timeout`` passes. True when one came."""
        got = False
        for _ in self.conn.notifies(timeout=max(timeout, 0.0), stop_after=1):
            got = True
        # Drain whatever else is pending: several hints mean the same thing.
        for _ in self.conn.notifies(timeout=0):
            pass
        return got

    def close(self) -> None:
        self.conn.close()


@contextmanager
def listening(agent: Agent) -> Iterator[Listener]:
    listener = Listener(agent.db.conninfo, my_channel(agent))
    try:
        yield listener
    finally:
        listener.close()


def claim_once(agent: Agent, n: int = 1, lease_seconds: int = 300) -> list[dict[str, Any]]:
    """Claim up to ``n`` tasks now (scsql.claim_task), in one transaction of its own."""
    with agent.transaction() as conn:
        return conn.execute(
            "select * from scsql.claim_task(p_n => %s::integer, p_lease_seconds => %s::integer)",
            (n, lease_seconds),
        ).fetchall()


def claim(
    agent: Agent,
    n: int = 1,
    lease_seconds: int = 300,
    wait_seconds: float = 0.0,
    poll_seconds: float = DEFAULT_POLL_SECONDS,
) -> list[dict[str, Any]]:
    """Claim up to ``n`` tasks, waiting up to ``wait_seconds`` for some to appear.

    Each claim is a transaction of its own; between claims it waits on LISTEN
    (an autocommit connection, no transaction open) and polls every
    ``poll_seconds`` in case a hint is missed or another worker won the task
    it announced."""
    deadline = time.monotonic() + max(wait_seconds, 0.0)
    rows = claim_once(agent, n, lease_seconds)
    if rows or wait_seconds <= 0:
        return rows
    with listening(agent) as listener:
        while True:
            # Claim after LISTEN is in place, so a task enqueued meanwhile is not missed.
            rows = claim_once(agent, n, lease_seconds)
            remaining = deadline - time.monotonic()
            if rows or remaining <= 0:
                return rows
            listener.wait(min(poll_seconds, remaining))


# -- the claim_task tool: wait on LISTEN rather than in the database ----------

def _claim(agent: Agent, args: dict[str, Any], call: Call) -> Any:
    """Claim; when nothing was claimable and the caller asked to wait, wait
    on LISTEN (outside any transaction) and claim again until the deadline."""
    wait = float(args.pop("wait_seconds", 0) or 0)
    if not 0 <= wait <= 600:
        raise ScsqlError(errors.INVALID_ARGUMENT, "wait_seconds must be 0 to 600")
    deadline = time.monotonic() + wait
    rows = call(args)
    if rows or wait <= 0:
        return rows
    return claim(agent, n=int(args.get("n", 1)), lease_seconds=int(args.get("lease_seconds", 300)),
                 wait_seconds=max(deadline - time.monotonic(), 0.0))


# -- the enqueue_task tool: symbolic links resolved where the files are --------


def project_root(agent: Agent) -> str | None:
    """The root directory of the agent's project (projects.root_path), or None."""
    with agent.transaction() as conn:
        row = conn.execute("select root_path from scsql.projects where project_id = scsql_caller.project_id()"
                           ).fetchone()
    return row["root_path"] if row else None


def resolve_exclusive_files(root: str | None, files: Any) -> Any:
    """Exclusive file paths with symbolic links resolved inside the project
    root (scsql.core.paths.resolve_in_root, as the PreToolUse check resolves
    an edited path); anything but a list goes to the database as given."""
    if not isinstance(files, list):
        return files
    return [resolve_in_root(root, f) if isinstance(f, str) else f for f in files]


def _enqueue(agent: Agent, args: dict[str, Any], call: Call) -> Any:
    if args.get("exclusive_files"):
        args["exclusive_files"] = resolve_exclusive_files(project_root(agent), args["exclusive_files"])
    return call(args)


# -- the broadcast tool: messages are chained and signed like audit rows -------

# scsql.messages' signed fields, in order, named as broadcast's arguments.
BROADCAST_TABLE = "scsql.messages"
BROADCAST_FIELDS = (
    SignedField("type", "text"),
    SignedField("to_role", "text"),
    SignedField("to_agent", "text"),
    SignedField("task", "int"),
    SignedField("payload", "jsonb", {}, redact=True),
)
BROADCASTS = SignedTable(BROADCAST_TABLE, BROADCAST_FIELDS)

ADAPTERS: dict[str, Adapter] = {
    # wait_seconds is the tool's own: the database claims without waiting.
    "claim_task": Adapter(frozenset(), _claim, (Param("wait_seconds", "numeric", True,
                                                      "seconds to wait for a task when none is queued", "0..600"),)),
    "enqueue_task": Adapter(frozenset(), _enqueue),
    "broadcast": BROADCASTS.adapter(),
}


# -- running a claimed task's command ------------------------------------------


class Heartbeat(threading.Thread):
    """Extends the lease of ``task`` every third of its length until stopped;
    ``lost`` holds the error when the lease was lost (the task was claimed
    again or finished)."""

    def __init__(self, agent: Agent, task: dict[str, Any], lease_seconds: int):
        super().__init__(daemon=True)
        self.agent, self.task, self.every = agent, task, max(lease_seconds / 3, 0.2)
        self.stopped = threading.Event()
        self.lost: ScsqlError | None = None

    def run(self) -> None:
        while not self.stopped.wait(self.every):
            try:
                with self.agent.transaction() as conn:
                    conn.execute("select scsql.heartbeat_task(%s::bigint, %s::bigint) as until",
                                 (self.task["task_id"], self.task["lease_token"]))
            except ScsqlError as exc:
                self.lost = exc
                return


def run_task(agent: Agent, task: dict[str, Any], command: list[str], lease_seconds: int) -> bool:
    """Run ``command`` for a task the agent claimed: the task as JSON on its
    stdin, SCSQL_TASK_ID and SCSQL_LEASE_TOKEN in its environment, the lease
    heartbeated meanwhile. Exit status 0 completes the task with the command's
    stdout as the result (JSON, or ``{"stdout": ...}``); anything else fails it
    with the end of its stderr. Returns True when the command succeeded.
    Raises ScsqlError when the completion or failure is refused (a lost lease)."""
    env = dict(os.environ, SCSQL_TASK_ID=str(task["task_id"]), SCSQL_LEASE_TOKEN=str(task["lease_token"]))
    beat = Heartbeat(agent, task, lease_seconds)
    beat.start()
    try:
        proc = subprocess.run(command, input=json.dumps(task, default=str), capture_output=True, text=True, env=env)
    except OSError as exc:  # it could not start (gone, not executable): the task fails now, not at lease expiry
        proc = subprocess.CompletedProcess(command, 127, "", f"scsql could not run {command[0]}: {exc.strerror or exc}")
    finally:
        beat.stopped.set()
        beat.join()
    ident = (task["task_id"], task["lease_token"])
    if proc.returncode == 0:
        out = proc.stdout.strip()
        try:
            result = json.loads(out) if out else None
        except ValueError:
            result = {"stdout": out}
        with agent.transaction() as conn:
            conn.execute("select * from scsql.complete_task(%s::bigint, %s::bigint, %s::jsonb)",
                         (*ident, json.dumps(result)))
        print(f"scsql: task {task['task_id']} done", file=sys.stderr)
        return True
    error = (proc.stderr.strip() or f"exit status {proc.returncode}")[-4000:]
    with agent.transaction() as conn:
        row = conn.execute("select * from scsql.fail_task(%s::bigint, %s::bigint, %s::text)", (*ident, error)).fetchone()
    print(f"scsql: task {task['task_id']} failed ({row['state']})", file=sys.stderr)
    return False


def check_command(command: list[str]) -> None:
    """SC010 unless COMMAND's program can be run (found on PATH, or a path to
    an executable file): refused before any task is claimed for it."""
    import shutil

    if not shutil.which(command[0]):
        raise ScsqlError(errors.INVALID_ARGUMENT, f"{command[0]}: no such command, or not executable",
                         "name a program on PATH or the path of an executable file (chmod +x); it gets each "
                         "task as JSON on its standard input")


# -- scsql worker -------------------------------------------------------------


def task_job(agent: Agent, command: list[str], lease: int) -> Job:
    """``scsql worker -- CMD``: claim the agent's tasks one at a time and run CMD for each (:func:`run_task`)."""

    def run(agent: Agent) -> int:
        tasks = claim_once(agent, 1, lease)
        if not tasks:
            return 0
        run_task(agent, tasks[0], command, lease)
        return 1

    return Job("tasks", run, [my_channel(agent)])


def stop_reason(agent: Agent) -> str | None:
    """Why the agent may not stop yet (the drain check of the Stop hook and of
    ``scsql hook stop-check``): tasks claimable for its role, or leases it
    still holds."""
    with agent.transaction() as conn:
        me = conn.execute("select * from scsql.whoami()").fetchone()
        n = conn.execute("select scsql.claimable_for_me() as n").fetchone()["n"]
        held = conn.execute("select count(*) as n, min(task_id) as first from scsql.my_tasks()").fetchone()
    if n:
        return (f"scsql: {n} task(s) remain claimable for team role {me['team_role']} in project {me['project']}; "
                "claim one with claim_task before stopping")
    if held["n"]:
        return (f"scsql: agent {me['agent']} still holds {held['n']} task lease(s) (task {held['first']} first); "
                "complete_task, fail_task or release_task before stopping")
    return None


def _maintain(agent: Agent) -> int:
    with agent.transaction() as conn:
        row = conn.execute("select * from scsql.queue_maintenance()").fetchone()
    return row["requeued"] + row["dead"]


def jobs() -> list[Job]:
    """Background work for ``scsql worker``: return expired leases to the queue."""
    return [Job("queue-maintenance", _maintain)]
