"""Audit commands: checkpoint (see checkpoints.py), cost, learnings, partitions, price;
and what ``scsql verify`` reports (its exit status, its lines), whose command
is in ``scsql/composed.py``, since it also reports the hooks' spools and
re-embeds memory's vectors.

``verify`` and ``checkpoint`` act as the auditor (the administrator's
connection, with ``SET ROLE scsql_auditor``); ``cost`` and ``learnings`` act
as an agent when ``--agent`` is given.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

from ..core.command import Commands
from ..core import errors

# Each command imports what it drives: building the parser imports neither
# the database driver nor the signing and validation libraries.

# -- verify -----------------------------------------------------------------------

# scsql verify's exit statuses (its help and docs/audit.md list them).
VERIFY_OK = 0  # every chain verifies, but for rows acknowledged quarantines excuse; memory is as its history says
VERIFY_BROKEN = 1  # a break no acknowledged quarantine excuses, or a memory row its history does not say (or an error)
VERIFY_QUARANTINED = 3  # --strict: nothing else, but a chain is quarantined (acknowledged or not)


def verify_status(report, strict: bool) -> int:
    """The exit status of scsql verify for REPORT."""
    if not report.ok:
        return VERIFY_BROKEN
    return VERIFY_QUARANTINED if strict and report.quarantines else VERIFY_OK


def print_report(report) -> None:
    """scsql verify's lines: breaks, excused rows and quarantines on stderr, the summary on stdout."""
    for b in report.breaks:
        print(f"BROKEN {b}", file=sys.stderr)
    for m in report.memory:
        print(f"BROKEN {m}", file=sys.stderr)
    for b in report.excused:
        print(f"EXCUSED {b}", file=sys.stderr)
    for q in report.quarantines:
        print(f"QUARANTINED {quarantine_line(q)}", file=sys.stderr)
    problems = len(report.breaks) + len(report.memory)
    state = "ok" if report.ok else f"{problems} break(s)"
    if report.excused:
        state += f" ({len(report.excused)} row(s) of quarantined chains excused)"
    signatures = ("every signature" if report.full or report.signatures == report.rows else
                  f"signatures of the {report.signatures} rows after the newest verified checkpoints; --full checks all")
    memory = ""
    if report.memory_checked:
        memory = "; memory compared with its history" + (
            f" ({len(report.memory_unrecorded)} row(s) older than the history not compared)"
            if report.memory_unrecorded else "")
    print(f"scsql verify: {state}: {report.rows} rows in {report.chains} chains ({signatures}), "
          f"{report.checkpoints} checkpoints{memory}, {report.seconds:.2f}s ({report.rate:,.0f} rows/s)")


def quarantine_line(q: dict[str, Any]) -> str:
    """One line about a quarantined chain (a row of scsql.chain_quarantines())."""
    ack = (f"; acknowledged {q['acknowledged_at']:%Y-%m-%d %H:%M} by {q['acknowledged_by']}: {q['note']}"
           if q["acknowledged_at"] else "; open")
    return (f"chain {q['chain_id']} ({q['project']}/{q['agent']}) from seq {q['from_seq']}, signed up to seq "
            f"{q['anchored_seq']}: {q['kind']}, found {q['found_at']:%Y-%m-%d %H:%M} by {q['found_by']}{ack}")


# -- checkpoint -------------------------------------------------------------------


def cmd_checkpoint(ctx, args: argparse.Namespace) -> int:
    from . import checkpoints

    if args.init:
        key_id = checkpoints.init_auditor_key(ctx.keystore, ctx.admin_conninfo())
        print(f"scsql: auditor key {key_id} registered ({ctx.keystore.path(checkpoints.AUDITOR_KEY)}, mode 0600)")
        return 0
    if args.export:
        checkpoints.last_exported(Path(args.export))  # a file that is not an export stops us before anything is signed
    run = checkpoints.run_checkpoint(ctx.admin_conninfo(), ctx.keystore.load(checkpoints.AUDITOR_KEY))
    ids = run.ids
    print(f"scsql checkpoint: recorded {len(ids)} checkpoint(s)" + (f" (id {', '.join(map(str, ids))})" if ids else ""))
    for q in run.quarantined:
        qid, b, signed = q
        upto = f"signed up to seq {signed}" if signed is not None else "nothing new signed"
        ack = ", acknowledged" if q in run.acknowledged else ""
        print(f"QUARANTINED chain {b.chain_id} from seq {b.seq} (quarantine {qid}{ack}; {upto}): {b.kind}: {b.detail}",
              file=sys.stderr)
    for b in run.unattributed:
        print(f"BROKEN {b} (no chain to quarantine)", file=sys.stderr)
    for b in run.excused:
        print(f"EXCUSED {b}", file=sys.stderr)
    if args.export:
        n = checkpoints.export_checkpoints(ctx.admin_conninfo(), Path(args.export))
        print(f"scsql checkpoint: appended {n} checkpoint(s) to {args.export}")
    if not run.ok:
        print(f"scsql checkpoint: {len(run.quarantined) - len(run.acknowledged)} chain(s) in open quarantine, "
              f"{len(run.unattributed)} other break(s); "
              "the other chains were signed (scsql verify lists every break)", file=sys.stderr)
        return 1
    return 0


# -- cost -------------------------------------------------------------------------


def iso_time(text: str) -> dt.datetime:
    """An ISO 8601 date or time (argparse type): `scsql cost --since yesterday`
    is a usage error naming the format, not a traceback."""
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 date or time: {text!r} "
                                         "(for example 2026-11-20 or 2026-11-20T09:30+01:00)") from None


def cmd_cost(ctx, args: argparse.Namespace) -> int:
    from ..core.registry import to_json
    from ..core.roles import admin_connection

    since = args.since or dt.datetime.now(dt.UTC) - dt.timedelta(days=args.days)
    query = "select * from scsql.cost_report(%s::timestamptz, %s::text)"
    if args.agent:
        agent = ctx.open_agent(args.agent, need_key=False)
        with agent.transaction() as conn:
            rows = conn.execute(query, (since, args.by)).fetchall()
    else:
        with admin_connection(ctx.admin_conninfo()) as conn:
            conn.execute("set local role scsql_auditor")
            rows = conn.execute(query, (since, args.by)).fetchall()
    if args.json:
        print(json.dumps(to_json(rows), indent=2))
        return 0
    if not rows:
        print(f"scsql cost: no tool calls since {since.isoformat(' ', 'minutes')}" + ("" if args.agent else " in any project")
              + " (the Claude Code hooks, or the MCP tool record_tool_call, record them)", file=sys.stderr)
        return 0
    print(f"{args.by:<32} {'calls':>8} {'in tok':>10} {'out tok':>10} {'USD':>12} {'unpriced':>8}")
    for r in rows:
        print(f"{r['key'][:32]:<32} {r['calls']:>8} {r['input_tokens']:>10} {r['output_tokens']:>10} "
              f"{r['cost_usd']:>12.4f} {r['unpriced_calls']:>8}")
    return 0


# -- learnings --------------------------------------------------------------------


def export_learnings(agent, directory: Path) -> dict[str, int]:
    """Append new learnings to DIR/learnings/{failures,experiments}.jsonl.

    The highest exported learning_id is kept in DIR/learnings/.export-state.json;
    the database waits for writers in flight before answering, so ids never
    appear below it later."""
    from ..core.registry import to_json

    from ..core.errors import ScsqlError

    if not Path(directory).is_dir():  # a typo must not create a tree of directories
        raise ScsqlError(errors.INVALID_ARGUMENT, f"{directory}: " + ("not a directory" if Path(directory).exists() else "no such directory"),
                         "name an existing directory (the repository, say); learnings/ is created in it")
    out = Path(directory) / "learnings"
    out.mkdir(exist_ok=True)
    state_path = out / ".export-state.json"
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    key = agent.name
    last = int(state.get(key, 0))
    counts = {"failure": 0, "experiment": 0}
    files = {"failure": out / "failures.jsonl", "experiment": out / "experiments.jsonl"}
    while True:
        with agent.transaction() as conn:
            rows = conn.execute("select * from scsql.learnings_export(%s::bigint, 5000)", (last,)).fetchall()
        if not rows:
            break
        handles = {k: p.open("a") for k, p in files.items()}
        try:
            for r in rows:
                handles[r["kind"]].write(json.dumps(to_json(r), ensure_ascii=False, sort_keys=True) + "\n")
                counts[r["kind"]] += 1
        finally:
            for h in handles.values():
                h.close()
        last = rows[-1]["learning_id"]
        state[key] = last
        tmp = state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, sort_keys=True))
        tmp.replace(state_path)
    return counts


def cmd_learnings(ctx, args: argparse.Namespace) -> int:
    from ..core.registry import to_json

    agent = ctx.open_agent(args.agent, need_key=False)
    if args.action == "export":
        counts = export_learnings(agent, Path(args.dir))
        print(f"scsql learnings: appended {counts['failure']} failure(s) and {counts['experiment']} experiment(s) "
              f"to {Path(args.dir) / 'learnings'}")
        return 0
    with agent.transaction() as conn:
        rows = conn.execute("select * from scsql.learnings(%s::text, %s::text, null, %s::integer)",
                            (args.query, args.kind, args.limit)).fetchall()
    if not rows:
        print("scsql learnings: none" + (f" whose text contains every word of {args.query!r}" if args.query else "")
              + " (failed outcomes become learnings)", file=sys.stderr)
    for r in rows:
        print(json.dumps(to_json(r), ensure_ascii=False))
    return 0


def cmd_purge(ctx, args: argparse.Namespace) -> int:
    """Purge as the agent named (its own rows), or as an administrator (any row)."""
    from ..core.roles import admin_connection

    query = "select * from scsql.purge(%s::text, %s::bigint, %s::text)"
    values = (args.kind.replace("-", "_"), args.id, args.reason)
    if args.agent:
        with ctx.open_agent(args.agent, need_key=False).transaction() as conn:
            rows = conn.execute(query, values).fetchall()
    else:
        with admin_connection(ctx.admin_conninfo()) as conn:
            rows = conn.execute(query, values).fetchall()
    r = rows[0]
    print(f"scsql purge: {r['kind']} {r['id']}: removed {', '.join(r['fields'])} (purge {r['purge_id']}); "
          "the row and its hashes stay, scsql verify still checks it")
    for c in rows[1:]:  # the copies purged with it
        print(f"scsql purge: copy {c['kind']} {c['id']}: removed {', '.join(c['fields'])} (purge {c['purge_id']})")
    if r["quoted_by"]:
        print(f"scsql purge: still quoted or cited by {', '.join(r['quoted_by'])}, which a purge does not change",
              file=sys.stderr)
    return 0


# -- partitions and prices ----------------------------------------------------------


def cmd_partitions(ctx, args: argparse.Namespace) -> int:
    from ..core.roles import admin_connection
    from . import partitions

    admin = ctx.admin_conninfo()
    if args.action == "enable-partman":
        print(f"scsql: {partitions.enable_partman(admin, args.extension_version)}")
        return 0
    if args.action == "maintain":
        for r in partitions.maintain(admin):
            print(f"{r['parent']}\t{r['action']}\t{r['partition'] or '-'}\t{r['detail'] or ''}")
        return 0
    if args.action == "retention":
        interval = None if args.keep in ("forever", "none") else args.keep
        with admin_connection(admin) as conn:
            conn.execute("select scsql.set_partition_retention(%s::text, %s::interval, %s::integer)",
                         (args.table, interval, args.premake))
        print(f"scsql: {args.table} keeps partitions {'forever' if interval is None else 'for ' + interval}")
        return 0
    for r in partitions.status(admin):
        bounds = "DEFAULT" if r["is_default"] else f"{r['lower_bound']:%Y-%m-%d} .. {r['upper_bound']:%Y-%m-%d}"
        print(f"{r['parent']}\t{r['partition']}\t{bounds}\t{r['managed_by']}\tretention {r['retention'] or 'forever'}")
    return 0


def cmd_price(ctx, args: argparse.Namespace) -> int:
    from ..core.roles import admin_connection

    with admin_connection(ctx.admin_conninfo()) as conn:
        if args.action == "set":
            conn.execute("select scsql.set_model_price(%s::text, %s::numeric, %s::numeric, coalesce(%s::timestamptz, now()))",
                         (args.model, args.input, args.output, args.effective_from))
            print(f"scsql: {args.model}: ${args.input}/M input, ${args.output}/M output tokens")
            return 0
        print("model\teffective_from\tinput_usd_per_mtok\toutput_usd_per_mtok")
        for r in conn.execute("select * from scsql.model_prices()").fetchall():
            print(f"{r['model']}\t{r['effective_from']:%Y-%m-%d %H:%M}\t{r['input_usd_per_mtok']}\t{r['output_usd_per_mtok']}")
    return 0


# -- parser -----------------------------------------------------------------------


def register(commands: Commands) -> None:
    add = commands.add
    p = add("checkpoint", cmd_checkpoint, "sign and record every chain head with the auditor's key")
    p.add_argument("--export", metavar="FILE", help="append new checkpoints to this JSONL file (keep it outside the database)")
    p.add_argument("--init", action="store_true", help="create the auditor's key (keystore auditor.key) and register it")

    p = add("cost", cmd_cost, "cost of tool calls from the price table")
    p.add_argument("--agent", help="report as this agent (its project); default: the auditor, every project")
    p.add_argument("--by", default="model", choices=["model", "tool", "agent", "session", "day", "origin", "status", "project"],
                   help="what to total the cost by (default model)")
    p.add_argument("--days", type=float, default=7.0, help="since this many days ago (default 7)")
    p.add_argument("--since", type=iso_time, help="since this time (ISO 8601: 2026-11-20, 2026-11-20T09:30+01:00)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")

    p = add("learnings", cmd_learnings, "export or search learnings (failures and experiments)")
    lsub = p.add_subparsers(dest="action", required=True)
    c = lsub.add_parser("export", help="append new learnings to DIR/learnings/{failures,experiments}.jsonl")
    c.add_argument("dir", help="the directory whose learnings/ the files are appended to")
    c.add_argument("--agent", help="the agent whose project is exported (required)")
    c = lsub.add_parser("search", help="learnings whose text contains every word of QUERY")
    c.add_argument("query", nargs="?", help="words the learning's text must all contain (none: the newest)")
    c.add_argument("--kind", choices=["failure", "experiment"], help="only failures, or only experiments")
    c.add_argument("--limit", type=int, default=20, help="learnings at most (default 20)")
    c.add_argument("--agent", help="the agent that searches (required)")

    p = add("partitions", cmd_partitions, "daily partitions of tool_calls and outcomes: status, maintenance, retention")
    psub = p.add_subparsers(dest="action", required=True)
    psub.add_parser("status", help="list partitions and who manages them")
    psub.add_parser("maintain", help="create upcoming partitions and apply retention now")
    c = psub.add_parser("retention", help="how long to keep a table's partitions")
    c.add_argument("table", choices=["scsql.tool_calls", "scsql.outcomes"], help="the partitioned table")
    c.add_argument("keep", help="an interval such as '30 days', or 'forever'")
    c.add_argument("--premake", type=int, help="days of partitions to create ahead")
    c = psub.add_parser("enable-partman", help="install pg_partman in the database (superuser) before the first migrate")
    c.add_argument("--extension-version", metavar="VERSION",
                   help="the pg_partman version to install (default: the server's default version; 4.x and 5.x work)")

    p = add("purge", cmd_purge, "remove the text of a prompt, tool call, outcome, learning or chunk (and the copies "
                                "of it you may purge), keeping the row and its proof")
    p.add_argument("kind", choices=["prompt", "tool-call", "tool_call", "chunk", "outcome", "learning", "decision"], help="what to purge")
    p.add_argument("id", type=int, help="its prompt_id, tool_call_id, chunk_id, outcome_id or learning_id")
    p.add_argument("--reason", required=True, help="why (recorded, redacted, in scsql.purges)")
    p.add_argument("--agent", help="purge as this agent, the row's author (default: as an administrator)")

    p = add("price", cmd_price, "model prices (USD per million tokens)")
    prsub = p.add_subparsers(dest="action", required=True)
    c = prsub.add_parser("set", help="set a model's price from now (or --from)")
    c.add_argument("model", help="the model's name as tool calls record it, e.g. claude-sonnet-4")
    c.add_argument("input", type=float, help="USD per million input tokens")
    c.add_argument("output", type=float, help="USD per million output tokens")
    c.add_argument("--from", dest="effective_from", help="effective from (ISO 8601)")
    prsub.add_parser("list", help="list prices")
