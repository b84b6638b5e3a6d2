"""``scsql worker``: drain scsql's background jobs as one agent."""

from __future__ import annotations

import sys

from . import worker


def cmd_worker(ctx, args) -> int:
    agent = ctx.open_agent(args.agent)
    jobs = worker.load_jobs(args.job or None)
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
    p = add("worker", cmd_worker, "drain background jobs (embeddings, maintenance) as an agent")
    p.add_argument("--agent", help="the agent the worker acts as (required)")
    p.add_argument("--once", action="store_true", help="drain what is queued, then exit")
    p.add_argument("--poll", type=float, default=5.0, help="seconds between polls when no NOTIFY arrives")
    p.add_argument("--job", action="append", help="run only this job (repeatable)")
    p.add_argument("-v", "--verbose", action="store_true")
