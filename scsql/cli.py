"""The scsql command line: the parser of every subsystem's commands, and
``main``, which runs a command in its context (``core/app.py``: the
settings, the connections they imply, and the subsystems of
``subsystems.py``).

The commands live beside what they drive (``core/cli.py``: the server,
projects and agents; ``audit/cli.py``, ``memory/cli.py``,
``coordination/cli.py``, ...; ``composed.py``: status, mcp, worker and verify),
and ``subsystems.py`` lists them. Every command that changes or reads the
database calls stored functions; a command only chooses the connection,
prints, and maps errors to one line and a non-zero exit status.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from . import __version__

if TYPE_CHECKING:
    import argparse

    from .core.command import Commands


def build_parser() -> tuple[argparse.ArgumentParser, Commands]:
    """The parser of ``scsql`` and every subsystem's commands."""
    from . import subsystems
    from .core.command import Commands, Parser

    parser = Parser(prog="scsql", description="Memory, audit and coordination for AI coding agents.")
    parser.add_argument("--version", action="version", version=f"scsql {__version__}")
    parser.add_argument("--data-dir", help="data directory of the embedded server and keystore (SCSQL_DATA_DIR)")
    commands = Commands(parser)
    subsystems.BUNDLE.add_commands(commands)
    return parser, commands


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    event = _hook_event(argv)
    if event is not None:
        return _hook_client(*event)
    parser, _ = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown and not getattr(args, "pass_through", False):
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if unknown:
        args.psql_args = unknown  # scsql psql: psql's own options and arguments, in order
    try:
        from . import subsystems

        return args.func(subsystems.context(args.data_dir), args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # output piped into head and friends
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        message = _error_line(exc)
        if message is None:
            raise
        print(f"scsql: error {message}", file=sys.stderr)
        return 1


# What to run from the shell for errors whose hint, written for psql users,
# names only SQL functions (by the catalogue's name: core/errors.py).
SHELL_HINTS = {
    "PROJECT_UNKNOWN": "scsql project list shows the projects, scsql project create NAME adds one",
    "INDEX_PATH_OUTSIDE_ROOT": "scsql up --root DIR sets the default project's root",
}


def _error_line(exc: Exception) -> str | None:
    """The one line a command's error is reported in (None: not an error scsql
    reports; let it propagate). psycopg is consulted only when it was imported,
    since otherwise no error of it can have been raised."""
    from .core import errors
    from .core.errors import ScsqlError

    if isinstance(exc, ScsqlError):
        shell = next((h for name, h in SHELL_HINTS.items() if getattr(errors, name) == exc.code), None)
        if shell and shell not in (exc.hint or ""):
            exc.hint = f"{exc.hint.rstrip('.')}; from the shell: {shell}" if exc.hint else shell
        return str(exc)
    if isinstance(exc, (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError,
                        FileExistsError)) and exc.filename:  # a path the command was given, or derived from one
        return str(ScsqlError(errors.INVALID_ARGUMENT, f"{exc.filename}: {exc.strerror}", "name another path"))
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None and isinstance(exc, psycopg.OperationalError):
        from .core.db import unreachable

        return str(unreachable(exc))
    return None


def _hook_event(argv: list[str]) -> tuple[list[str], str | None] | None:
    """For ``scsql [--data-dir DIR] hook EVENT ...``, EVENT one of the events
    the hook client answers (its own table, ``hooks/hookclient.py``): the
    client's arguments (EVENT ...) and DIR; None for any other command,
    ``scsql hook serve`` and ``stop-check`` among them."""
    data_dir = None
    if argv[:1] == ["--data-dir"] and len(argv) > 1:
        data_dir, argv = argv[1], argv[2:]
    elif argv[:1] and argv[0].startswith("--data-dir="):
        data_dir, argv = argv[0].partition("=")[2], argv[1:]
    if len(argv) < 2 or argv[0] != "hook" or argv[1].startswith("-"):
        return None
    try:
        from .hooks import client
    except ModuleNotFoundError as exc:  # an installation without the hooks
        if exc.name not in ("scsql.hooks.client", "scsql.hooks"):
            raise
        return None
    return (argv[1:], data_dir) if argv[1] in client.BY_SUBCOMMAND else None


def _hook_client(argv: list[str], data_dir: str | None) -> int:
    """Run an event subcommand by the hook client (scsql/hooks/client.py), as
    the hook configuration runs it, with --home the data directory unless it
    is given."""
    from .hooks import client

    if "--home" not in argv and "--agent" in argv:  # without --agent: the checkout's .claude/scsql.local.json
        from .core.config import find_data_dir

        argv = [*argv, "--home", str(find_data_dir(data_dir))]
    return client.main(argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
