"""The operations commands: ``scsql doctor`` and ``scsql metrics`` (here), ``scsql backup``
and ``scsql restore`` (backup.py).

Each command imports what it drives when it runs (building the parser loads
no database driver and no Prometheus client).
"""

from __future__ import annotations

import argparse
import sys

from ..core.command import Commands
from . import backup


def cmd_doctor(ctx, args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..hooks.settings import git_root
    from . import doctor

    project_dir = Path(args.project_dir).resolve() if args.project_dir else git_root(Path.cwd())
    probe = doctor.Probe(ctx.settings, ctx.admin_conninfo, project_dir, full=args.full)
    findings = doctor.run(probe)
    print(doctor.as_json(findings) if args.json else doctor.as_text(findings))
    return 1 if doctor.needs_action(findings) else 0


def _rows_source(ctx, args: argparse.Namespace):
    """A function reading scsql.metrics() afresh: as the agent with --agent, else as the administrator."""
    from . import metrics

    if args.agent:
        agent = ctx.open_agent(args.agent, need_key=False, pool_size=1)

        def as_agent():
            with agent.transaction() as conn:
                return metrics.fetch(conn)
        return as_agent

    conninfo = ctx.admin_conninfo()

    def as_admin():
        from ..core.roles import admin_connection

        with admin_connection(conninfo) as conn:
            return metrics.fetch(conn)
    return as_admin


def cmd_metrics(ctx, args: argparse.Namespace) -> int:
    import threading

    from . import metrics

    rows = _rows_source(ctx, args)
    if not args.listen:
        sys.stdout.write(metrics.render(rows()).decode())
        return 0
    from ..core.interrupt import ctrl_c_stops

    ctrl_c_stops()
    rows()  # a database that cannot answer is one clear error now, not at the first scrape
    server, _ = metrics.serve(args.listen, rows)
    host, port = server.server_address[:2]
    print(f"scsql metrics: serving http://{host}:{port}/metrics (Ctrl-C stops)", flush=True)
    threading.Event().wait()
    return 0  # not reached


def register(commands: Commands) -> None:
    add = commands.add
    p = add("doctor", cmd_doctor, "check the server, schema, partitions, worker, checkpoints, chains, keys, clock, "
                                  "hooks, spool and distillation; say what to run for each problem (exit 1 when one needs action)")
    p.add_argument("--json", action="store_true", help="one JSON object: ok, and every check's finding")
    p.add_argument("--full", action="store_true",
                   help="re-compute every chain from its first row (default: from its newest checkpoint)")
    p.add_argument("--project-dir", metavar="DIR",
                   help="the project whose Claude Code hooks to check (default: the git repository of the current directory)")
    p = add("metrics", cmd_metrics, "scsql.metrics() in the Prometheus text format, printed or served (--listen)")
    p.add_argument("--agent", help="read as this agent: only its project's figures (default: the administrator, all)")
    p.add_argument("--listen", metavar="ADDRESS", help="serve /metrics on [HOST]:PORT for scraping, e.g. 127.0.0.1:9187")
    backup.register(commands)
