"""The scsql command line: the context every command gets (settings and the
connections they imply), the parser, and ``main``.

The commands live beside what they drive (``core/cli.py``: the server,
projects, agents, MCP and the worker; ``audit/cli.py``, ``memory/cli.py``,
``coordination/cli.py``; ``bench/``), and ``subsystems.py`` lists them.
Every command that changes or reads the database calls stored functions; a
command only chooses the connection, prints, and maps errors to one line and
a non-zero exit status.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from . import __version__

if TYPE_CHECKING:
    import argparse

    from .core.config import Settings
    from .core.db import Agent
    from .core.embedded import EmbeddedServer
    from .core.keys import Keystore

# ``scsql hook SUBCOMMAND``: every subcommand but these is an event, answered
# by the standard-library hook client before anything else is imported.
FULL_HOOK_COMMANDS = frozenset({"stop-check", "serve", "events"})


class Context:
    """What a command needs: settings, and the connections they imply (each
    part made when a command first asks for it, so a command imports only
    what it uses)."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._server: EmbeddedServer | None = None
        self._keystore: Keystore | None = None

    @property
    def server(self) -> EmbeddedServer:
        if self._server is None:
            from .core.embedded import EmbeddedServer

            self._server = EmbeddedServer(self.settings)
        return self._server

    @property
    def keystore(self) -> Keystore:
        if self._keystore is None:
            from .core.keys import Keystore

            self._keystore = Keystore(self.settings.keystore)
        return self._keystore

    def admin_conninfo(self) -> str:
        if self.settings.dsn:
            return self.settings.dsn
        return self.server.conninfo()

    def agent_conninfo(self, agent: str | None = None) -> str:
        """The login agent processes use: SCSQL_AGENT_DSN; else, on the server
        SCSQL_DSN names, AGENT's own login role (scsql_app when no agent is
        named), its password from PGPASSWORD or ~/.pgpass; else scsql_app on
        the embedded server, started if it was set up but is down."""
        if self.settings.agent_dsn:
            return self.settings.agent_dsn
        recorded = self.agent_env(agent).get("SCSQL_AGENT_DSN") if agent else None
        if recorded:
            return recorded
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        from .core.config import APP_ROLE, role_for

        if self.settings.dsn:
            parts = conninfo_to_dict(self.settings.dsn)
            parts.pop("password", None)
            parts["user"] = role_for(agent) if agent else APP_ROLE
            return make_conninfo(**parts)
        if not self.server.running and self.server.initialized:
            self.server.ensure_running(progress=lambda m: print(f"scsql: {m}", file=sys.stderr))
        return self.server.conninfo(user=APP_ROLE)

    def agent_env(self, agent: str) -> dict[str, str]:
        """How AGENT's processes reach its database, as scsql install claude
        recorded it in the data directory (hooks.hookclient.agent_env)."""
        from .hooks.hookclient import agent_env

        return agent_env(str(self.settings.data_dir), agent)

    def login_conninfo(self, agent: str) -> str:
        """A connection that logs in as the agent's own role (scsql psql --agent)."""
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        from .core.config import role_for

        base = conninfo_to_dict(self.admin_conninfo())
        base.pop("password", None)
        base["user"] = role_for(agent)
        return make_conninfo(**base)

    def open_agent(self, name: str | None, *, need_key: bool = True, pool_size: int = 4) -> Agent:
        from .core import errors
        from .core.db import Agent, Database
        from .core.errors import ScsqlError

        if not name:
            raise ScsqlError(
                errors.AGENT_REQUIRED,
                "this command acts as an agent: name it with --agent NAME",
                "identity is never taken from the environment; scsql agent list shows the agents",
            )
        from .core.db import login_refused

        conninfo = self.agent_conninfo(name)
        try:
            db = Database(conninfo, max_size=pool_size, application_name=f"scsql:{name}").open()
        except ScsqlError as exc:
            raise login_refused(exc, name, conninfo) from None
        try:
            db.refuse_privileged_login()
            agent = Agent(db, name)
            agent.home = self.settings.data_dir
            agent.whoami()  # fails now, clearly, for an unknown or revoked agent (before its key is looked for)
            keys = self.agent_env(name).get("SCSQL_KEYSTORE")
            if keys and not os.environ.get("SCSQL_KEYSTORE"):
                from .core.keys import Keystore

                self._keystore = Keystore(Path(keys))
            agent.key = self.keystore.load(name) if need_key else None
        except ScsqlError:
            db.close()
            raise
        return agent


# -- parser ------------------------------------------------------------------


def build_parser() -> tuple[argparse.ArgumentParser, Callable]:
    import argparse

    from . import subsystems

    class Formatter(argparse.HelpFormatter):
        """Help that shows an option's default where its text does not
        already say it (nothing for flags and options without one)."""

        def _get_help_string(self, action: argparse.Action) -> str | None:
            text = action.help or ""
            if (not action.option_strings or action.default in (None, False, argparse.SUPPRESS)
                    or "default" in text or "%(default)" in text):
                return action.help
            return f"{text} (default %(default)s)" if text else "default %(default)s"

    class Parser(argparse.ArgumentParser):
        """A parser whose arguments a command may add only when it is used
        (``populate``), so building the parser imports no command's
        implementation."""

        def __init__(self, *a, populate: Callable[[argparse.ArgumentParser], None] | None = None, **kw):
            kw.setdefault("formatter_class", Formatter)
            super().__init__(*a, **kw)
            self._populate = populate

        def _complete(self) -> None:
            populate, self._populate = self._populate, None
            if populate is not None:
                populate(self)

        def parse_known_args(self, args=None, namespace=None):
            self._complete()
            return super().parse_known_args(args, namespace)

        def format_usage(self) -> str:
            self._complete()
            return super().format_usage()

        def format_help(self) -> str:
            self._complete()
            return super().format_help()

        def error(self, message: str):
            """argparse's error, plus what a person needs next: a command
            named without its subcommand prints its help; a misspelled
            command or choice gets the nearest ones suggested."""
            import difflib
            import re

            subs = next((a for a in self._actions if isinstance(a, argparse._SubParsersAction)), None)
            if subs is not None and message.startswith("the following arguments are required"):
                self.print_help(sys.stderr)
                self.exit(2, f"{self.prog}: error: name one of its commands: {', '.join(subs.choices)}\n")
            bad = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
            if bad:
                near = difflib.get_close_matches(bad.group(1), re.findall(r"'([^']*)'", bad.group(2)), n=3)
                if near:
                    message = f"{message}; did you mean {' or '.join(map(repr, near))}?"
            super().error(message)

    parser = Parser(prog="scsql", description="Memory, audit and coordination for AI coding agents.")
    parser.add_argument("--version", action="version", version=f"scsql {__version__}")
    parser.add_argument("--data-dir", help="data directory of the embedded server and keystore (SCSQL_DATA_DIR)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, fn: Callable[[Context, argparse.Namespace], int], help: str, *,
            populate: Callable[[argparse.ArgumentParser], None] | None = None) -> argparse.ArgumentParser:
        """Add command NAME running FN; POPULATE(parser), when given, adds its
        arguments once the command is parsed or its help printed."""
        p = sub.add_parser(name, help=help, description=help, populate=populate)
        p.set_defaults(func=fn)
        return p

    subsystems.register_commands(sub, add)
    return parser, add


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    event = _hook_event(argv)
    if event is not None:
        answered = _hook_client(*event)
        if answered is not None:
            return answered
    parser, _ = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown and not getattr(args, "pass_through", False):
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if unknown:
        args.psql_args = unknown  # scsql psql: psql's own options and arguments, in order
    try:
        from .core.config import Settings

        ctx = Context(Settings.load(args.data_dir))
        return args.func(ctx, args)
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
# names only SQL functions.
SHELL_HINTS = {
    "SC005": "scsql project list shows the projects, scsql project create NAME adds one",
    "SC213": "scsql up --root DIR sets the default project's root",
}


def _error_line(exc: Exception) -> str | None:
    """The one line a command's error is reported in (None: not an error scsql
    reports; let it propagate). psycopg is consulted only when it was imported,
    since otherwise no error of it can have been raised."""
    from .core.errors import ScsqlError

    if isinstance(exc, ScsqlError):
        shell = SHELL_HINTS.get(exc.code)
        if shell and shell not in (exc.hint or ""):
            exc.hint = f"{exc.hint.rstrip('.')}; from the shell: {shell}" if exc.hint else shell
        return str(exc)
    if isinstance(exc, (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError,
                        FileExistsError)) and exc.filename:  # a path the command was given, or derived from one
        return str(ScsqlError("SC010", f"{exc.filename}: {exc.strerror}", "name another path"))
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None and isinstance(exc, psycopg.OperationalError):
        from .core.db import unreachable

        return str(unreachable(exc))
    return None


def _hook_event(argv: list[str]) -> tuple[list[str], str | None] | None:
    """For ``scsql [--data-dir DIR] hook EVENT ...``: the client's arguments
    (EVENT ...) and DIR; None for any other command."""
    data_dir = None
    if argv[:1] == ["--data-dir"] and len(argv) > 1:
        data_dir, argv = argv[1], argv[2:]
    elif argv[:1] and argv[0].startswith("--data-dir="):
        data_dir, argv = argv[0].partition("=")[2], argv[1:]
    if len(argv) < 2 or argv[0] != "hook" or argv[1].startswith("-") or argv[1] in FULL_HOOK_COMMANDS:
        return None
    return argv[1:], data_dir


def _hook_client(argv: list[str], data_dir: str | None) -> int | None:
    """Run an event subcommand by the hook client (scsql/hooks/client.py), as
    the hook configuration runs it, with --home the data directory unless it
    is given; None when this installation has no client."""
    try:
        from .hooks import client
    except ModuleNotFoundError as exc:
        if exc.name not in ("scsql.hooks.client", "scsql.hooks"):
            raise
        return None
    if "--home" not in argv and "--agent" in argv:  # without --agent: the checkout's .claude/scsql.local.json
        from .core.config import find_data_dir

        argv = [*argv, "--home", str(find_data_dir(data_dir))]
    return client.main(argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
