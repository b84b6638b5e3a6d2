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
import time

from . import worker

MAINTENANCE_EVERY = 600.0  # seconds between partition maintenance runs


def partitions_job(admin_conninfo: str) -> worker.Job:
    """Partition maintenance over an administrator's connection, at most once
    every MAINTENANCE_EVERY seconds. It takes ACCESS EXCLUSIVE locks that
    every project's writes queue behind, so agents may not run it; a worker
    without an administrator's connection says so once and leaves it to
    `scsql partitions maintain` (or pg_partman's background worker)."""
    from . import partitions
    from .errors import ScsqlError

    last = [-MAINTENANCE_EVERY]

    def run(_agent) -> int:
        now = time.monotonic()
        if now - last[0] < MAINTENANCE_EVERY:
            return 0
        last[0] = now
        try:
            partitions.maintain(admin_conninfo)
        except ScsqlError as exc:
            print(f"scsql worker: partition maintenance skipped ({exc.code}: {exc.message}); "
                  "run scsql partitions maintain as an administrator", file=sys.stderr)
            last[0] = float("inf")  # said once
        return 0  # creating partitions is not "more work pending": the worker sleeps

    return worker.Job("partitions", run)


def _task_job(agent, command: list[str], lease: int) -> worker.Job:
    from . import coordination

    def run(agent) -> int:
        tasks = coordination.claim_once(agent, 1, lease)
        if not tasks:
            return 0
        coordination.run_task(agent, tasks[0], command, lease)
        return 1

    return worker.Job("tasks", run, [coordination.my_channel(agent)])


def cmd_worker(ctx, args) -> int:
    agent = ctx.open_agent(args.agent)
    jobs = worker.load_jobs(args.job or None)
    if not args.job or "partitions" in args.job:
        jobs.append(partitions_job(ctx.admin_conninfo()))
    command = [a for a in args.command if a != "--"]
    if command:
        jobs.append(_task_job(agent, command, args.lease))
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
