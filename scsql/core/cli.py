"""``scsql worker``: drain background jobs as one agent, and optionally run
the agent's queued tasks with a command.

With ``-- CMD ...`` the worker also claims the tasks of its agent's team role,
one at a time, and runs CMD for each (the task as JSON on stdin, heartbeating
the lease; exit 0 completes the task with its stdout as the result, anything
else fails it). It LISTENs on its (project, team role) channel, so an enqueue
wakes it at once; polling every --poll seconds is the fallback.
"""

from __future__ import annotations

import sys

from . import worker

def cmd_worker(ctx, args) -> int:
    from .. import subsystems
    from ..audit import partitions
    from ..coordination import client

    agent = ctx.open_agent(args.agent)
    jobs = subsystems.jobs(args.job or None)
    if not args.job or "partitions" in args.job:
        jobs.append(partitions.maintenance_job(ctx.admin_conninfo()))
    command = [a for a in args.command if a != "--"]
    if command:
        jobs.append(client.task_job(agent, command, args.lease))
    if not jobs:
        print("scsql: no background jobs are defined", file=sys.stderr)
        return 0

    def report(name: str, n: int) -> None:
        if args.verbose:
            print(f"{name}: {n}", file=sys.stderr)

    if args.once:
        done = worker.drain(agent, jobs, report)
        print(f"scsql: drained {done} unit(s) of work")
        return 0
    worker.serve(agent, jobs, poll_seconds=args.poll, on_progress=report)
    return 0


def register(sub, add) -> None:
    p = add("worker", cmd_worker, "drain background jobs (embeddings, learnings, maintenance) as an agent, "
                                  "and run its queued tasks with -- CMD")
    p.add_argument("--agent", help="the agent the worker acts as (required)")
    p.add_argument("--once", action="store_true", help="drain what is queued, then exit")
    p.add_argument("--poll", type=float, default=5.0, help="seconds between polls when no NOTIFY arrives")
    p.add_argument("--job", action="append", help="run only this background job (repeatable)")
    p.add_argument("--lease", type=int, default=300, help="with a command: lease length of each task, in seconds")
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("command", nargs="*", help="-- a command to run for each claimed task")
