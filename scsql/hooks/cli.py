"""``scsql hook serve`` (the agent's hook server) and ``scsql hook events``
(the events and the exact commands ``scsql install claude`` writes).

The event subcommands themselves (``scsql hook session-start ...``) are the
hook process, ``client.main``: ``scsql.cli.main`` hands them over before
importing anything heavy. They are listed here too, so ``scsql hook --help``
names them and a parsed ``scsql hook EVENT`` still reaches the client.
"""

from __future__ import annotations

import argparse
import json

from ..core.command import Commands
from . import events
from ..core import errors


def cmd_serve(ctx, args: argparse.Namespace) -> int:
    from . import client, daemon
    from ..core.errors import ScsqlError

    if not args.agent or not set(args.agent) <= client.AGENT_CHARS or args.agent.startswith("."):
        raise ScsqlError(errors.AGENT_REQUIRED, "scsql hook serve acts as an agent: name it with --agent NAME",
                         "scsql agent list shows the agents")
    home = str(ctx.settings.data_dir)
    return daemon.run(home, args.agent, args.idle, connect=lambda: ctx.open_agent(args.agent, pool_size=4))


def cmd_events(ctx, args: argparse.Namespace) -> int:
    home = str(ctx.settings.data_dir)
    if args.json:
        print(json.dumps({"hooks": events.settings_hooks(args.agent, home)}, indent=2))
        return 0
    print("event\tsubcommand\tmatcher\ttimeout_s\tbudget_s\tcapture_only\tasync")
    for e in events.EVENTS:
        print(f"{e.name}\t{e.subcommand}\t{e.matcher or '-'}\t{e.timeout}\t{e.budget:g}\t"
              f"{'yes' if e.capture_only else 'no'}\t{'yes' if e.run_async else 'no'}")
    return 0


def cmd_event(ctx, args: argparse.Namespace) -> int:
    from . import client

    argv = [args.hook_command]
    if args.agent:  # else the agent this checkout's .claude/scsql.local.json names
        argv += ["--agent", args.agent, "--home", str(ctx.settings.data_dir)]
    return client.main(argv)


def register(commands: Commands) -> None:
    hook = commands.group("hook", "entry points for agent hooks (Claude Code events)")
    p = hook.add_parser("serve", help="the agent's hook server (the hooks start it when it is not running)")
    p.add_argument("--agent", help="the agent the server acts as (required)")
    p.add_argument("--idle", type=float, default=1800.0, help="exit after this many seconds without a request")
    p.set_defaults(sub_func=cmd_serve)
    p = hook.add_parser("events", help="the hook events and the commands scsql install claude writes for them")
    p.add_argument("--agent", default="NAME", help="the agent named in the commands (with --json)")
    p.add_argument("--json", action="store_true", help="the settings' \"hooks\" object")
    p.set_defaults(sub_func=cmd_events)
    for e in events.EVENTS:
        p = hook.add_parser(e.subcommand, help=f"the {e.name} hook (event JSON on stdin)")
        p.add_argument("--agent", help="the agent (default: the one this checkout's .claude/scsql.local.json names)")
        p.set_defaults(sub_func=cmd_event)
