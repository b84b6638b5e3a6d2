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

import argparse
import os
import sys
from collections.abc import Callable

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from . import __version__, subsystems
from .core import errors
from .core.config import APP_ROLE, Settings, role_for
from .core.db import Agent, Database, unreachable
from .core.embedded import EmbeddedServer
from .core.errors import ScsqlError
from .core.keys import Keystore


class Context:
    """What a command needs: settings, and the connections they imply."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.server = EmbeddedServer(settings)
        self.keystore = Keystore(settings.keystore)

    def admin_conninfo(self) -> str:
        if self.settings.dsn:
            return self.settings.dsn
        return self.server.conninfo()

    def agent_conninfo(self) -> str:
        """The login agent processes use: SCSQL_AGENT_DSN; else scsql_app on the
        server SCSQL_DSN names (its password from PGPASSWORD or ~/.pgpass); else
        scsql_app on the embedded server, started if it was set up but is down."""
        if self.settings.agent_dsn:
            return self.settings.agent_dsn
        if self.settings.dsn:
            parts = conninfo_to_dict(self.settings.dsn)
            parts.pop("password", None)
            parts["user"] = APP_ROLE
            return make_conninfo(**parts)
        if not self.server.running and self.server.initialized:
            self.server.ensure_running(progress=lambda m: print(f"scsql: {m}", file=sys.stderr))
        return self.server.conninfo(user=APP_ROLE)

    def login_conninfo(self, agent: str) -> str:
        """A connection that logs in as the agent's own role (scsql psql --agent)."""
        base = conninfo_to_dict(self.admin_conninfo())
        base.pop("password", None)
        base["user"] = role_for(agent)
        return make_conninfo(**base)

    def open_agent(self, name: str | None, *, need_key: bool = True, pool_size: int = 4) -> Agent:
        if not name:
            raise ScsqlError(
                errors.AGENT_REQUIRED,
                "this command acts as an agent: name it with --agent NAME",
                "identity is never taken from the environment; scsql agent list shows the agents",
            )
        key = self.keystore.load(name) if need_key else None
        db = Database(self.agent_conninfo(), max_size=pool_size, application_name=f"scsql:{name}").open()
        try:
            db.refuse_privileged_login()
        except ScsqlError:
            db.close()
            raise
        agent = Agent(db, name, key)
        agent.whoami()  # fails now, clearly, for an unknown or revoked agent
        return agent


# -- parser ------------------------------------------------------------------


def build_parser() -> tuple[argparse.ArgumentParser, Callable]:
    parser = argparse.ArgumentParser(prog="scsql", description="Memory, audit and coordination for AI coding agents.")
    parser.add_argument("--version", action="version", version=f"scsql {__version__}")
    parser.add_argument("--data-dir", help="data directory of the embedded server and keystore (SCSQL_DATA_DIR)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, fn: Callable[[Context, argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        p.set_defaults(func=fn)
        return p

    subsystems.register_commands(sub, add)
    return parser, add


def main(argv: list[str] | None = None) -> int:
    parser, _ = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown and not getattr(args, "pass_through", False):
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if unknown:
        args.psql_args = unknown  # scsql psql: psql's own options and arguments, in order
    try:
        ctx = Context(Settings.load(args.data_dir))
        return args.func(ctx, args)
    except ScsqlError as exc:
        print(f"scsql: error {exc}", file=sys.stderr)
        return 1
    except psycopg.OperationalError as exc:
        print(f"scsql: error {unreachable(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # output piped into head and friends
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
