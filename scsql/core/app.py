"""How scsql is assembled: what a subsystem adds (``Subsystem``), the bundle
of them an application runs (``Bundle``), and the context every command
runs in (``Context``: the settings, the connections they imply, and the
bundle).

scsql's SQL is split by subsystem (sql/1x audit, 2x memory, 3x
coordination, 4x integration, 5x operations), and so is the Python package:
``core`` stands under the subsystems (``audit``, ``memory``,
``coordination``, ``hooks``, ``ops``, ``bench``) and imports none of them. A
subsystem may contribute three things:

* **adapters**: Python help around some of the catalogue's functions (see
  ``registry.py``), by function name. When two subsystems adapt one
  function, the one listed later runs around the one listed earlier (a
  learning is indexed around the signed write of its outcome);
* **jobs**: background work ``scsql worker`` drains (``worker.py``), made
  for a context that each job keeps for when it runs;
* **commands**: subcommands of the ``scsql`` command line (``command.py``).

Core defines these types; only the entry points know every subsystem:
``scsql/subsystems.py`` declares them and builds the one bundle, and
``scsql/cli.py`` hands it to every command in its context, the way River's
application fills the workers bundle its client runs and procrastinate's
blueprints are added to the app by their owner. A command reaches the
subsystems through its context (``ctx.api(agent)``, ``ctx.jobs()``), never
by importing them. Each contribution is a function that imports its
subsystem when first asked, and each part of a context is made when a
command first asks for it, so a command imports only what it uses.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the command line builds its parser without importing them
    from .command import Commands
    from .config import Settings
    from .db import Agent
    from .embedded import EmbeddedServer
    from .keys import Keystore
    from .registry import Adapter, Catalogue
    from .worker import Job


def _no_jobs(ctx: Context) -> list[Job]:
    return []


def _no_commands(commands: Commands) -> None:
    return None


@dataclass(frozen=True)
class Subsystem:
    """One subsystem's contributions, each a function called when first needed."""

    name: str
    adapters: Callable[[], dict[str, Adapter]] = dict
    jobs: Callable[[Context], list[Job]] = _no_jobs
    commands: Callable[[Commands], None] = _no_commands


class Bundle:
    """Subsystems, in order, and what they contribute together."""

    def __init__(self, subsystems: Iterable[Subsystem]):
        self.subsystems = tuple(subsystems)
        self._adapters: dict[str, Adapter] | None = None

    def adapters(self) -> dict[str, Adapter]:
        """Every subsystem's adapters, by function name (two of one function composed)."""
        if self._adapters is None:
            merged: dict[str, Adapter] = {}
            for subsystem in self.subsystems:
                for name, adapter in subsystem.adapters().items():
                    merged[name] = adapter.wrapping(merged[name]) if name in merged else adapter
            self._adapters = merged
        return dict(self._adapters)

    def jobs(self, ctx: Context, only: Iterable[str] | None = None) -> list[Job]:
        """The background jobs of every subsystem for CTX (those named in ``only``, when given)."""
        found = [job for subsystem in self.subsystems for job in subsystem.jobs(ctx)]
        wanted = None if only is None else set(only)
        return [job for job in found if wanted is None or job.name in wanted]

    def add_commands(self, commands: Commands) -> None:
        """Every subsystem's subcommands of ``scsql``."""
        for subsystem in self.subsystems:
            subsystem.commands(commands)


class Context:
    """What a command needs: settings, the connections they imply, and the
    subsystems (``bundle``: their adapters and jobs). The entry points make
    it with the bundle they built; a process that needs only an agent's
    connection (the hook server) makes one without it."""

    def __init__(self, settings: Settings, bundle: Bundle | None = None):
        self.settings = settings
        self._bundle = bundle
        self._server: EmbeddedServer | None = None
        self._keystore: Keystore | None = None

    @property
    def bundle(self) -> Bundle:
        if self._bundle is None:
            raise RuntimeError("this context was made without the subsystems "
                               "(scsql.subsystems.context() makes one with them)")
        return self._bundle

    def at(self, data_dir: str | Path | None) -> Context:
        """The context of another data directory (DATA_DIR), with the same subsystems."""
        from .config import Settings

        return type(self)(Settings.load(data_dir), self._bundle)

    @property
    def server(self) -> EmbeddedServer:
        if self._server is None:
            from .embedded import EmbeddedServer

            self._server = EmbeddedServer(self.settings)
        return self._server

    @property
    def keystore(self) -> Keystore:
        if self._keystore is None:
            from .keys import Keystore

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

        from .config import APP_ROLE, role_for

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
        recorded it in the data directory (config.agent_env)."""
        from .config import agent_env

        return agent_env(self.settings.data_dir, agent)

    def login_conninfo(self, agent: str) -> str:
        """A connection that logs in as the agent's own role (scsql psql --agent)."""
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        from .config import role_for

        base = conninfo_to_dict(self.admin_conninfo())
        base.pop("password", None)
        base["user"] = role_for(agent)
        return make_conninfo(**base)

    def open_agent(self, name: str | None, *, need_key: bool = True, pool_size: int = 4) -> Agent:
        from . import errors
        from .db import Agent, Database, login_refused
        from .errors import ScsqlError

        if not name:
            raise ScsqlError(
                errors.AGENT_REQUIRED,
                "this command acts as an agent: name it with --agent NAME",
                "identity is never taken from the environment; scsql agent list shows the agents",
            )
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
                from .keys import Keystore

                self._keystore = Keystore(Path(keys))
            agent.key = self.keystore.load(name) if need_key else None
        except ScsqlError:
            db.close()
            raise
        return agent

    def api(self, agent: Agent) -> Catalogue:
        """The functions AGENT may call, each with every subsystem's adapters."""
        from .registry import Catalogue

        return Catalogue(agent, self.bundle.adapters())

    def jobs(self, only: list[str] | None = None) -> list[Job]:
        """Every subsystem's background jobs (those named in ``only``, when given)."""
        return self.bundle.jobs(self, only)
