"""The commands composed of several subsystems: ``scsql status`` (the
server, and the chains audit quarantined), ``scsql mcp`` (an agent's tools,
with every subsystem's adapters), ``scsql worker`` (every subsystem's
background jobs, and the agent's queued tasks) and ``scsql verify`` (audit's
chains, capture and the hooks' spools, memory's vectors). They stand above
the subsystems, and take the subsystems' adapters and jobs from their
context (``ctx.api``, ``ctx.jobs``), which the entry point made with them.

``scsql worker`` drains background jobs as one agent, and optionally runs
the agent's queued tasks with a command. With ``-- CMD ...`` the worker also
claims the tasks of its agent's team role, one at a time, and runs CMD for
each (the task as JSON on stdin, heartbeating the lease; exit 0 completes
the task with its stdout as the result, anything else fails it). It LISTENs
on its (project, team role) channel, so an enqueue wakes it at once; polling
every --poll seconds is the fallback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from . import __version__
from .core.command import Commands, positive_seconds, uri
from .core import errors

if TYPE_CHECKING:
    from .core.app import Bundle, Context

# Every other import is made by the command that needs it: building the
# parser must not load the database driver.


# -- scsql status -------------------------------------------------------------


def cmd_status(ctx: Context, args: argparse.Namespace) -> int:
    from .core import roles

    if ctx.settings.embedded and not ctx.server.running:
        ctx.server.conninfo()  # SC034, saying whether scsql down --hold keeps it down
    with roles.admin_connection(ctx.admin_conninfo()) as conn:   # one connection for both
        st = conn.execute("select scsql.status() as s").fetchone()["s"]
        st["quarantines"] = _open_quarantines(conn)
    if ctx.settings.embedded:
        st["server"] = {"kind": "embedded", "pid": ctx.server.pid, "data_dir": str(ctx.settings.pgdata)}
    else:
        st["server"] = {"kind": "external", "dsn": uri(ctx.settings.dsn or "")}
    if args.json:
        print(json.dumps(st, indent=2, default=str))
        return 0
    srv = st["server"]
    where = (f"embedded, pid {srv['pid']}, {srv['data_dir']}" if srv["kind"] == "embedded" else srv["dsn"])
    exts = ", ".join(f"{k} {v}" if v else f"{k} absent" for k, v in st["extensions"].items())
    print(f"server      PostgreSQL {st['server_version']} ({where})")
    print(f"schema      version {st['schema_version']} (scsql {__version__})")
    print(f"extensions  {exts}")
    print(f"projects    {', '.join(p['name'] for p in st['projects']) or '-'}")
    agents = [f"{a['name']} ({a['project']}, {a['team_role']}{', revoked' if a['revoked'] else ''})"
              for a in st["agents"]]
    print(f"agents      {', '.join(agents) or '-'}")
    if st["quarantines"] is None:
        print("quarantine  unknown (the schema predates quarantines: scsql migrate)")
    elif st["quarantines"]:
        from .audit.cli import quarantine_line

        print(f"quarantine  {len(st['quarantines'])} chain(s) not verified past their signed rows "
              "(scsql verify; scsql.acknowledge_quarantine once dealt with):")
        for q in st["quarantines"]:
            print(f"            {quarantine_line(q)}")
    else:
        print("quarantine  -")
    return 0


def _open_quarantines(conn) -> list[dict] | None:
    """Quarantined chains no administrator acknowledged yet (None before the schema has them)."""
    import psycopg

    try:
        with conn.transaction():
            return conn.execute("select * from scsql.chain_quarantines(true)").fetchall()
    except psycopg.errors.UndefinedFunction:
        return None


# -- scsql mcp ------------------------------------------------------------------


def cmd_mcp(ctx: Context, args: argparse.Namespace) -> int:
    from . import mcp_server
    from .core.interrupt import ctrl_c_stops

    ctrl_c_stops()
    if args.agent is None:  # a committed .mcp.json: the agent this checkout acts as on this machine
        ctx, args.agent = _checkout_agent(ctx)
    agent = ctx.open_agent(args.agent)
    if sys.stdin.isatty():  # a person, not an MCP client, started it
        print(f"scsql mcp: serving agent {args.agent}'s tools over MCP on this terminal's standard input and output, "
              f"for an MCP client to start, not a person to type into (scsql install claude --agent {args.agent} "
              "configures Claude Code to start it); Ctrl-C stops it", file=sys.stderr, flush=True)
    mcp_server.build(ctx.api(agent), all_tools=True if args.all_tools else None).run("stdio")
    return 0


def _checkout_agent(ctx: Context) -> tuple[Context, str]:
    """The context and agent .claude/scsql.local.json names for the project
    directory ($CLAUDE_PROJECT_DIR, else the current one); SC035 when none."""
    from .core import errors
    from .core.errors import ScsqlError
    from .hooks.hookclient import IDENTITY_FILE, project_identity

    found = project_identity()
    if found is None:
        where = os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
        raise ScsqlError(errors.AGENT_REQUIRED, f"scsql mcp acts as an agent: name it with --agent NAME, or run it in "
                         f"a project whose {IDENTITY_FILE} names one ({where} has none)",
                         "scsql install claude --agent NAME writes it for this checkout")
    return ctx.at(found.get("home")), found["agent"]


# -- scsql worker ---------------------------------------------------------------


def cmd_worker(ctx: Context, args: argparse.Namespace) -> int:
    from .coordination import client
    from .core import errors, worker
    from .core.errors import ScsqlError
    from .core.interrupt import ctrl_c_stops

    ctrl_c_stops()
    every = ctx.jobs()
    unknown = sorted(set(args.job or ()) - {j.name for j in every})
    if unknown:
        raise ScsqlError(errors.INVALID_ARGUMENT, f"--job {', '.join(unknown)}: no such background job",
                         f"the jobs are {', '.join(j.name for j in every)}")
    command = [a for a in args.command if a != "--"]
    if command:
        client.check_command(command)
    agent = ctx.open_agent(args.agent)
    jobs = [j for j in every if not args.job or j.name in args.job]
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
    project = agent.whoami()["project"]
    print(f"scsql worker: acting as {agent.name} in project {project}; jobs {', '.join(j.name for j in jobs)}; "
          f"waiting for work (woken by NOTIFY, polling every {args.poll:g} s); Ctrl-C stops it", file=sys.stderr,
          flush=True)
    worker.serve(agent, jobs, poll_seconds=args.poll, on_progress=report)
    return 0


def job_names(bundle: Bundle) -> list[str]:
    """The names of the background jobs, for the parser's help: made with
    placeholder settings (a job uses its context only when it runs), so a bad
    setting in the environment is reported when a command runs, as an error,
    not while the command line is read."""
    from pathlib import Path

    from .core.app import Context
    from .core.config import Settings

    return [j.name for j in bundle.jobs(Context(Settings(None, None, Path(), Path()), bundle))]


# -- scsql verify ----------------------------------------------------------------


def cmd_verify(ctx: Context, args: argparse.Namespace) -> int:
    from .audit import checkpoints
    from .audit.cli import print_report, verify_status
    from .audit.verify import verify
    from .core.registry import to_json

    if args.embeddings:
        return verify_embeddings(ctx, args)
    for path in args.checkpoints or ():
        checkpoints.checkpoint_file(path)  # a missing or unreadable file is one clear error, before any work
    report = verify(ctx.admin_conninfo(), workers=args.workers, checkpoint_files=args.checkpoints or (),
                    from_checkpoint=args.from_checkpoint, full=args.full)
    status = verify_status(report, args.strict)
    capture = capture_state(ctx)
    if args.json:
        print(json.dumps({"ok": report.ok, "status": status, "rows": report.rows, "chains": report.chains,
                          "signatures": report.signatures, "full": report.full,
                          "checkpoints": report.checkpoints, "seconds": round(report.seconds, 3),
                          "rows_per_second": round(report.rate),
                          "breaks": [b.__dict__ for b in report.breaks],
                          "excused": [b.__dict__ for b in report.excused],
                          "memory_checked": report.memory_checked,
                          "memory": [m.__dict__ for m in report.memory],
                          "memory_before_history": [m.__dict__ for m in report.memory_unrecorded],
                          "quarantines": to_json(report.quarantines), "capture": capture},
                         indent=2, default=str))
    else:
        print_report(report)
        print(capture_line(capture))
    return status


def capture_state(ctx: Context) -> dict[str, int]:
    """What capture could not store as given: events waiting in this data
    directory's hook spools, events kept there because not even a stub of
    them could be stored, and the rows stored as stubs or with text made
    storable (scsql.capture_counts)."""
    from .core.roles import admin_connection
    from .hooks.hookclient import spool_totals

    waiting, unstorable = spool_totals(str(ctx.settings.data_dir))
    with admin_connection(ctx.admin_conninfo()) as conn:  # read as the auditor, who reads every project
        if not conn.execute("select rolsuper from pg_catalog.pg_roles where rolname = current_user").fetchone()["rolsuper"]:
            conn.execute("set local role scsql_auditor")
        rows = conn.execute("select * from scsql.capture_counts()").fetchall()
    return {"spooled": waiting, "unstorable": unstorable, "stubs": sum(r["stubs"] for r in rows),
            "replaced": sum(r["replaced"] for r in rows), "clipped": sum(r["clipped"] for r in rows)}


def capture_line(c: dict[str, int]) -> str:
    return (f"scsql verify: capture: {c['stubs']} call(s) stored as stubs of refused events, {c['replaced']} with "
            f"text replaced, {c['clipped']} clipped; {c['spooled']} event(s) waiting in this machine's hook spools, "
            f"{c['unstorable']} kept there unstored")


def verify_embeddings(ctx: Context, args: argparse.Namespace) -> int:
    """Re-embed a sample of stored vectors with this process's provider, as the auditor."""
    from .core.errors import ScsqlError
    from .core.roles import admin_connection
    from .memory import embed

    prov = embed.provider()
    if prov is None:
        raise ScsqlError(errors.INVALID_ARGUMENT, "verify --embeddings needs an embedding provider", "unset SCSQL_EMBED=none")
    with admin_connection(ctx.admin_conninfo()) as conn:
        conn.execute("set local role scsql_auditor")
        check = embed.check_stored(conn, prov, args.sample)
    if args.json:
        print(json.dumps(check.model_dump() | {"ok": check.ok}, indent=2))
    else:
        for m in check.mismatches:
            print(f"MISMATCH project {m.project} chunk {m.chunk_hash} model {m.model}: cosine {m.similarity} "
                  f"to its text re-embedded; stored by {m.stored_by or 'unknown'} at {m.stored_at}", file=sys.stderr)
        others = ", ".join(f"{n} of {model}" for model, n in sorted(check.skipped.items()))
        print(f"scsql verify --embeddings: {'ok' if check.ok else f'{len(check.mismatches)} mismatch(es)'}: "
              f"{check.checked} vector(s) of {prov.name} re-embedded"
              + (f"; not checked (other models): {others}" if others else "")
              + (f"; {check.gone} whose text is gone" if check.gone else ""))
    return 0 if check.ok else 1


# -- parser ---------------------------------------------------------------------


def register(commands: Commands, bundle: Bundle) -> None:
    """The commands of this module; BUNDLE names the worker's jobs in its help."""
    add = commands.add
    p = add("status", cmd_status, "server and schema versions, extensions, projects and agents")
    p.add_argument("--json", action="store_true", help="print the status as JSON")

    p = add("mcp", cmd_mcp, "serve the agent's tools over MCP (stdio)")
    p.add_argument("--agent", help="the agent this server acts as (default: the one this checkout's "
                                   ".claude/scsql.local.json names, which scsql install claude writes)")
    p.add_argument("--all-tools", action="store_true",
                   help="also list the tools hooks do for agents (record_tool_call, start_session); "
                        "SCSQL_MCP_TOOLS=all does the same")

    def jobs_argument(p: argparse.ArgumentParser) -> None:  # the jobs are named once the command is used
        p.add_argument("--job", action="append",
                       help=f"run only this background job (repeatable): {', '.join(job_names(bundle))}")

    p = add("worker", cmd_worker, "drain background jobs (embeddings, learnings, maintenance) as an agent, "
                                  "and run its queued tasks with -- CMD", populate=jobs_argument)
    p.add_argument("--agent", help="the agent the worker acts as (required)")
    p.add_argument("--once", action="store_true", help="drain what is queued, then exit")
    p.add_argument("--poll", type=positive_seconds, default=5.0, help="seconds between polls when no NOTIFY arrives")
    p.add_argument("--lease", type=int, default=300, help="with a command: lease length of each task, in seconds")
    p.add_argument("-v", "--verbose", action="store_true", help="print on stderr each job's units of work as they are done")
    p.add_argument("command", nargs="*", help="-- a command to run for each claimed task")

    p = add("verify", cmd_verify, "verify every chain and signature (as the auditor), and with --full every memory "
                                   "table against its history; exits 0 when verified (rows acknowledged quarantines "
                                   "excuse are reported), 1 naming each break, 3 with --strict when a chain is "
                                   "quarantined")
    p.add_argument("--checkpoints", action="append", type=Path, metavar="FILE",
                   help="exported checkpoint JSONL the chains must still contain (repeatable)")
    p.add_argument("--workers", type=int, help="processes (default: one per core when there is enough to do)")
    p.add_argument("--from-checkpoint", type=int, metavar="ID",
                   help="start each chain at this checkpoint's head instead of its horizon")
    p.add_argument("--full", action="store_true",
                   help="check every signature again, also of rows the newest verified checkpoints cover "
                        "(by default every hash and link is checked, and signatures after those checkpoints), and "
                        "compare facts, sources, chunks, decisions, open loops and learnings with their chained history")
    p.add_argument("--strict", action="store_true",
                   help="exit 3 when any chain is quarantined, acknowledged or not (exit 1 still wins for a break)")
    p.add_argument("--embeddings", action="store_true",
                   help="instead: re-embed a random sample of stored vectors with this process's model (SCSQL_EMBED) "
                        "and name who stored each one whose cosine similarity is below 0.99")
    p.add_argument("--sample", type=int, default=100, help="with --embeddings: vectors to check (default 100)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
