"""``scsql distill``: turn a project's distillation on and off, see its
budget and jobs, what it wrote, and undo one session's distillation.

``enable`` and ``disable`` are the administrator's (the command a worker runs
is a setting, so only administrators set it; ``enable`` is
``hooks/install.py``'s ``enable_distill``, as ``scsql install claude
--distill`` runs it); ``jobs``, ``show`` and ``undo``
act as an agent of the project (``--agent``, else the agent this checkout's
``.claude/scsql.local.json`` names). The jobs themselves run in ``scsql worker
--agent DISTILLER`` (its ``distill`` job). Building the parser imports
nothing heavy; each command imports what it drives.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import TYPE_CHECKING
from ..core import errors

if TYPE_CHECKING:
    from ..core.command import Commands

def cmd_enable(ctx, args: argparse.Namespace) -> int:
    import shlex

    from ..hooks.install import enable_distill

    command = None if args.command_line is None else shlex.split(args.command_line)
    for line in enable_distill(ctx, args.project, args.distiller, model=args.model, daily_tokens=args.daily_tokens,
                       command=command, max_input_chars=args.max_input_chars):
        print(line)
    return 0


def cmd_disable(ctx, args: argparse.Namespace) -> int:
    from ..core import roles

    with roles.admin_connection(ctx.admin_conninfo()) as conn:
        current = conn.execute("select distiller from scsql.distill_overview() where project = %s",
                               (args.project,)).fetchone()
        if current is None:
            print(f"scsql: project {args.project} does not distil its sessions")
            return 0
        conn.execute("select * from scsql.set_distill(%s, %s, false)", (args.project, current["distiller"]))
    print(f"scsql: project {args.project} no longer distils its sessions (what was distilled stays; "
          "scsql distill undo SESSION reverts one session's)")
    return 0


def cmd_status(ctx, args: argparse.Namespace) -> int:
    from ..core import roles

    with roles.admin_connection(ctx.admin_conninfo()) as conn:
        rows = conn.execute("select * from scsql.distill_overview()").fetchall()
    rows = [r for r in rows if args.project is None or r["project"] == args.project]
    if args.json:
        print(json.dumps(rows, default=str, indent=2))
        return 0
    if not rows:
        print("scsql: no project distils its sessions (scsql install claude --distill, or scsql distill enable)")
    for r in rows:
        how = " ".join(r["command"]) if r["command"] else f"claude -p --model {r['model']}"
        print(f"{r['project']}: {'on' if r['enabled'] else 'off'}, {how}, as {r['distiller']}; "
              f"{r['used_today']:,} of {r['daily_tokens']:,} tokens used today (UTC); jobs: {r['queued']} queued, "
              f"{r['deferred']} waiting for the budget, {r['running']} running, {r['done_today']} done and "
              f"{r['failed_today']} failed today")
    return 0


def _agent(ctx, args: argparse.Namespace):
    if args.agent is None:  # the agent this checkout acts as on this machine
        from ..core import errors
        from ..core.errors import ScsqlError
        from ..hooks.hookclient import IDENTITY_FILE, project_identity

        found = project_identity()
        if found is None:
            where = os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
            raise ScsqlError(errors.AGENT_REQUIRED, f"scsql distill {args.distill_command} acts as an agent: name it "
                             f"with --agent NAME, or run it in a project whose {IDENTITY_FILE} names one "
                             f"({where} has none)", "scsql install claude --agent NAME writes it for this checkout")
        ctx, args.agent = ctx.at(found.get("home")), found["agent"]
    return ctx.open_agent(args.agent, need_key=False, pool_size=1)


def cmd_jobs(ctx, args: argparse.Namespace) -> int:
    agent = _agent(ctx, args)
    with agent.transaction() as conn:
        rows = conn.execute("select * from scsql.distillations(%s)", (args.limit,)).fetchall()
    for r in rows:
        tokens = (r["input_tokens"] or 0) + (r["output_tokens"] or 0)
        print(f"job {r['job_id']}  session {r['session_id']} ({r['claude_session']}) segment {r['segment']}  "
              f"{r['state']}{'  undone' if r['undone_at'] else ''}  {tokens:,} tokens  {r['written'] or 0} written, "
              f"{r['refused']} refused" + (f"  {r['error']}" if r["error"] else ""))
    return 0


def cmd_show(ctx, args: argparse.Namespace) -> int:
    agent = _agent(ctx, args)
    with agent.transaction() as conn:
        rows = conn.execute("select * from scsql.distilled(%s, %s)", (args.session, args.limit)).fetchall()
    if args.json:
        print(json.dumps(rows, default=str, indent=2))
        return 0
    for r in rows:
        print(f"item {r['item_id']} (job {r['job_id']}, session {r['session_id']}) {r['kind']} {r['action']} "
              f"{r['target']}  cites {', '.join(r['cites'])}  signed by {r['distiller']}"
              + ("  [undone]" if r["undone_at"] else ""))
    return 0


def cmd_queue(ctx, args: argparse.Namespace) -> int:
    agent = _agent(ctx, args)
    with agent.transaction() as conn:
        found = conn.execute("select session_id from scsql.sessions where external_id = %s "
                             "or (%s ~ '^[0-9]{1,18}$' and session_id::text = %s)",
                             (args.session, args.session, args.session)).fetchone()
        if found is None:
            from ..core.errors import ScsqlError

            raise ScsqlError(errors.DISTILL_SESSION_UNKNOWN, f"no session {args.session} in agent {agent.name}'s project",
                             "name it by its Claude Code session id or scsql session id")
        rows = conn.execute("select * from scsql.queue_distill(%s)", (found["session_id"],)).fetchall()
    if not rows:
        print(f"scsql: agent {agent.name}'s project does not distil its sessions (scsql distill enable)")
    for r in rows:
        print(f"job {r['job_id']}: segment {r['segment']} of session {found['session_id']} "
              + ("queued" if r["queued"] else "was queued before; nothing new since"))
    return 0


def cmd_schema(ctx, args: argparse.Namespace) -> int:
    from . import answer, model

    if args.request:
        print(json.dumps(model.request({"job": 0, "session": {}, "conversation": [], "omitted": 0,
                                        "memory": {"facts": [], "decisions": [], "open_loops": []}}), indent=2))
    else:
        print(json.dumps(answer.schema(), indent=2))
    return 0


def cmd_undo(ctx, args: argparse.Namespace) -> int:
    agent = _agent(ctx, args)
    with agent.transaction() as conn:
        rows = conn.execute("select * from scsql.distill_undo(%s)", (args.session,)).fetchall()
    if not rows:
        print(f"scsql: nothing distilled from session {args.session} is left to undo")
    for r in rows:
        print(f"job {r['job_id']} item {r['item_id']} {r['kind']} {r['target']}: {r['outcome']}")
    return 0


def register(commands: Commands) -> None:
    from ..hooks.install import DISTILL_DAILY_TOKENS

    group = commands.group("distill", "distil sessions into facts, decisions and open loops with a model")
    p = group.add_parser("enable", help="make a project distil its sessions (administrators)")
    p.add_argument("--project", required=True, help="the project")
    p.add_argument("--distiller", help="its distiller agent (created with its key when it does not exist; "
                                       "default: the one it has, else <project>_distiller)")
    p.add_argument("--model", help="the model claude -p runs (default haiku)")
    p.add_argument("--daily-tokens", type=int, metavar="N",
                   help=f"tokens the project's jobs may use per UTC day (default {DISTILL_DAILY_TOKENS:,})")
    p.add_argument("--max-input-chars", type=int, metavar="N",
                   help="characters of conversation one job sends at most (default 60,000)")
    p.add_argument("--command", dest="command_line", metavar="COMMAND",
                   help="a program (with its arguments, as a shell would split them) that reads the JSON request on "
                        "stdin and writes the JSON answer on stdout, instead of claude -p; '' goes back to claude -p")
    p.set_defaults(sub_func=cmd_enable)
    p = group.add_parser("disable", help="stop a project's distillation; what it wrote stays (administrators)")
    p.add_argument("--project", required=True, help="the project")
    p.set_defaults(sub_func=cmd_disable)
    p = group.add_parser("status", help="each project's distillation: command, budget used today, jobs")
    p.add_argument("--project", help="only this project")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(sub_func=cmd_status)
    p = group.add_parser("schema", help="the JSON schema of the answer a model command writes")
    p.add_argument("--request", action="store_true", help="print an empty request instead, as a command reads it")
    p.set_defaults(sub_func=cmd_schema)
    for name, func, text in (("jobs", cmd_jobs, "the project's distillation jobs, newest first"),
                             ("queue", cmd_queue, "queue what a session of the agent added since its last job "
                                                  "(an imported session, say)"),
                             ("show", cmd_show, "what distillation wrote, each item with the rows it cites"),
                             ("undo", cmd_undo, "revert what distillation wrote for one session, keeping the history")):
        p = group.add_parser(name, help=text)
        p.add_argument("--agent", help="act as this agent (default: the one this checkout's .claude/scsql.local.json names)")
        if name in ("undo", "queue"):
            p.add_argument("session", help="the session: its Claude Code session id or scsql session id")
        elif name == "show":
            p.add_argument("session", nargs="?", help="only this session (Claude Code or scsql session id)")
        if name in ("jobs", "show"):
            p.add_argument("--limit", type=int, default=50, help="at most this many rows")
        if name == "show":
            p.add_argument("--json", action="store_true", help="print the items as JSON")
        p.set_defaults(sub_func=func)
