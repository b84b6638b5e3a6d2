"""The Claude Code hook events scsql answers, and the command each runs.

The table itself lives in ``client.py`` (the hook process may import nothing
of scsql); this module gives it names, and builds what ``scsql install
claude`` writes: ``hook_command`` (one event's command line) and
``settings_hooks`` (the ``"hooks"`` object of a Claude Code settings file).

Capture-only events (PostToolUse, PostToolUseFailure, PreCompact,
SessionEnd) always answer nothing, so the server batches them, and the tool
ones run as ``async`` hooks Claude Code does not wait for; every other event
is waited for, within its budget.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from . import client


@dataclass(frozen=True)
class Event:
    name: str             # hook_event_name
    subcommand: str       # scsql hook SUBCOMMAND
    matcher: str | None   # the settings matcher (None: the event takes none)
    timeout: int          # seconds Claude Code allows the command
    capture_only: bool    # its answer is always empty: batched, may be async
    spooled: bool         # kept in the spool when it cannot be delivered
    budget: float         # seconds the hook waits for the server before failing open
    run_async: bool       # an async hook: Claude Code does not wait for it


EVENTS: tuple[Event, ...] = tuple(Event(*row) for row in client.EVENTS)
BY_NAME = {e.name: e for e in EVENTS}
BY_SUBCOMMAND = {e.subcommand: e for e in EVENTS}
SUBCOMMANDS = frozenset(BY_SUBCOMMAND)
CLIENT = Path(__file__).resolve().with_name("client.py")   # the small launcher, not hookclient.py


# Appended to every command: exit status 2 blocks in Claude Code, and only a
# decision may block. scsql's decisions are JSON on stdout with exit 0, so any
# other failure of the command itself (a moved checkout: python's own exit 2;
# a missing interpreter: 127; a crash) becomes a non-blocking 1.
FAIL_OPEN = " || exit 1"


def hook_command(subcommand: str, agent: str | None, home: str | Path | None,
                 remote: tuple[str, str] | None = None) -> str:
    """The shell command Claude Code runs for SUBCOMMAND. For one agent and
    data directory of this machine: this interpreter, no site packages (-S)
    and isolated (-I), on client.py by absolute path; with REMOTE (a team
    server's URL and the environment variable holding the agent's token),
    the events go to that server. Portable (AGENT None, for a committed
    settings file): ``scsql hook SUBCOMMAND``, the scsql on PATH, which reads
    the agent of this checkout (and its team server) from
    .claude/scsql.local.json."""
    if subcommand not in BY_SUBCOMMAND:
        raise ValueError(f"unknown hook subcommand {subcommand!r}")
    if agent is None:
        return f"scsql hook {subcommand}{FAIL_OPEN}"
    argv = [sys.executable, "-S", "-I", str(CLIENT), subcommand, "--agent", agent,
            "--home", str(Path(home).expanduser().resolve())]
    if remote is not None:
        argv += ["--server", remote[0], "--token-env", remote[1]]
    return shlex.join(argv) + FAIL_OPEN


def settings_hooks(agent: str | None, home: str | Path | None, remote: tuple[str, str] | None = None) -> dict:
    """The ``"hooks"`` object of a Claude Code settings file: every event, tool
    events matching every tool (MCP tools included); AGENT None: the portable
    commands (see hook_command)."""
    hooks: dict = {}
    for e in EVENTS:
        handler: dict = {"type": "command", "command": hook_command(e.subcommand, agent, home, remote),
                         "timeout": e.timeout}
        if e.run_async:
            handler["async"] = True
        group: dict = {"hooks": [handler]}
        if e.matcher is not None:
            group = {"matcher": e.matcher, **group}
        hooks[e.name] = [group]
    return hooks
