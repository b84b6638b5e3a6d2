"""Coordination commands: ``scsql hook stop-check``, ``scsql queue stats``,
``scsql queue run`` and ``scsql queue maintain``.

``scsql hook stop-check --agent NAME`` is meant for a Claude Code Stop hook:
it exits 0 when the agent may stop, and 2 (the status that makes Claude Code
keep going and read the reason) with one line on stderr while tasks remain
claimable for the agent's team role or the agent still holds a lease.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ..core.command import Commands, positive_seconds
from ..core import errors

if TYPE_CHECKING:
    from ..core.db import Agent

# Each command imports what it drives (the queue's client signs broadcasts):
# building the parser imports neither the database driver nor the signing libraries.

STOP_BLOCKED = 2  # Claude Code: a Stop hook exiting 2 blocks the stop; stderr is the reason


def _one(agent: Agent, query: str, params: tuple = ()) -> dict[str, Any]:
    with agent.transaction() as conn:
        return conn.execute(query, params).fetchone()


def cmd_stop_check(ctx, args: argparse.Namespace) -> int:
    from .client import stop_reason  # the Stop hook's drain check, said once

    agent = ctx.open_agent(args.agent, need_key=False, pool_size=1)
    reason = stop_reason(agent)
    if reason:
        print(reason, file=sys.stderr)
        return STOP_BLOCKED
    return 0


def cmd_queue_stats(ctx, args: argparse.Namespace) -> int:
    agent = ctx.open_agent(args.agent, need_key=False, pool_size=1)
    with agent.transaction() as conn:
        rows = conn.execute("select * from scsql.queue_stats()").fetchall()
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return 0
    cols = ["team_role", "queued", "scheduled", "claimed", "expired", "done", "dead", "released", "cancelled"]
    print("\t".join(cols + ["oldest_wait_s"]))
    for r in rows:
        wait = r["oldest_wait_seconds"]
        print("\t".join([str(r[c]) for c in cols] + ["-" if wait is None else f"{wait:.1f}"]))
    return 0


def cmd_queue_maintain(ctx, args: argparse.Namespace) -> int:
    from ..core import roles

    with roles.admin_connection(ctx.admin_conninfo()) as conn:
        row = conn.execute("select * from scsql.queue_maintenance(%s::integer)", (args.limit,)).fetchone()
    print(f"scsql: {row['requeued']} expired lease(s) requeued, {row['dead']} task(s) dead")
    return 0


# -- scsql queue run ----------------------------------------------------------


def cmd_queue_run(ctx, args: argparse.Namespace) -> int:
    from ..core.errors import ScsqlError
    from . import client

    command = [a for a in args.command if a != "--"]
    if not command:
        raise ScsqlError(errors.INVALID_ARGUMENT, "queue run needs a command to run for each task (after --)")
    client.check_command(command)
    agent = ctx.open_agent(args.agent, need_key=False, pool_size=2)
    done = 0
    while args.max_tasks is None or done < args.max_tasks:
        tasks = client.claim(agent, 1, args.lease, args.wait,
                             client.DEFAULT_POLL_SECONDS if args.poll is None else args.poll)
        if not tasks:
            break
        try:
            client.run_task(agent, tasks[0], command, args.lease)
        except ScsqlError as exc:
            print(f"scsql: error {exc}", file=sys.stderr)
        done += 1
    print(f"scsql: ran {done} task(s)", file=sys.stderr)
    return 0


def register(commands: Commands) -> None:
    hook = commands.group("hook", "entry points for agent hooks (Claude Code events)")
    p = hook.add_parser("stop-check", help="exit 2 with a reason while tasks remain claimable for the agent")
    p.add_argument("--agent", help="the agent that wants to stop (required)")
    p.set_defaults(sub_func=cmd_stop_check)

    queue = commands.group("queue", "the task queue: statistics, running a command per task, maintenance")
    p = queue.add_parser("stats", help="queue counts of the agent's project, by team role")
    p.add_argument("--agent", help="the agent whose project to show (required)")
    p.add_argument("--json", action="store_true", help="print the counts as JSON")
    p.set_defaults(sub_func=cmd_queue_stats)
    p = queue.add_parser("run", help="claim tasks and run a command for each (task JSON on stdin), heartbeating")
    p.add_argument("--agent", help="the agent that claims (required)")
    p.add_argument("--lease", type=int, default=300, help="lease length in seconds (heartbeats every third)")
    p.add_argument("--wait", type=float, default=0.0, help="seconds to wait for a task when none is queued")
    p.add_argument("--poll", type=positive_seconds, default=None,  # None: client.DEFAULT_POLL_SECONDS
                   help="seconds between polls while waiting (LISTEN wakes sooner)")
    p.add_argument("--max-tasks", type=int, help="stop after this many tasks")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to run for each task")
    p.set_defaults(sub_func=cmd_queue_run)
    p = queue.add_parser("maintain", help="requeue expired leases in every project (administrator)")
    p.add_argument("--limit", type=int, default=10000, help="expired leases to requeue at most (default 10000)")
    p.set_defaults(sub_func=cmd_queue_maintain)
