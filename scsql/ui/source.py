"""The viewer's identity and its read-only connection.

An agent's viewer logs in as agent processes do (``Context.agent_conninfo``)
and acts as the agent in every transaction (SET LOCAL ROLE, as the MCP
server); the auditor's logs in as the administrator with role
scsql_auditor, as ``scsql psql --auditor`` does. Either way every
transaction is read only (``default_transaction_read_only``), so no page can
change anything whatever a function does, and row-level security decides
what each function returns.
"""

from __future__ import annotations

import datetime as dt
import decimal
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from ..core import errors
from ..core.errors import ScsqlError
from . import catalogue

READ_ONLY = "-c default_transaction_read_only=on -c TimeZone=UTC"  # a time without a zone is UTC


def with_options(conninfo: str, *options: str) -> str:
    """CONNINFO with server options added (after any it has)."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    parts = conninfo_to_dict(conninfo)
    parts["options"] = " ".join(filter(None, [parts.get("options"), *options]))
    return make_conninfo(**parts)


@dataclass
class Source:
    """What one viewer reads, as one identity: ``call(view, args)`` runs one
    function of its catalogue in a read-only transaction."""

    db: Any  # core.db.Database
    role: str | None  # SET LOCAL ROLE in each transaction (an agent); None: the login's own (the auditor)
    kind: str  # agent or auditor
    name: str  # the agent's name, or "auditor"
    project: str | None = None  # an agent's project
    views: dict[str, catalogue.View] = field(default_factory=dict)
    admin_conninfo: str | None = None  # the auditor's viewer: for scsql doctor's checks
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        with self.db.transaction(self.role) as conn:
            yield conn

    def load(self) -> Source:
        with self.transaction() as conn:
            errors.learn_names(conn)
            self.views = catalogue.load(conn)
            if self.kind == "agent":
                self.project = conn.execute("select project from scsql.whoami()").fetchone()["project"]
        return self

    def call(self, name: str, args: dict[str, Any] | None = None) -> Any:
        """The rows of view NAME called with ARGS (API names, without p_); a
        scalar function's value. Unknown views and arguments are SC602 and SC010."""
        return self.call_many({name: (name, args)})[name]

    def call_many(self, calls: dict[str, tuple[str, dict[str, Any] | None]]) -> dict[str, Any]:
        """What ``call`` gives for each of CALLS (key: (view, args)), in one
        read-only transaction, its statements sent together (one pipeline: a
        page's sections cost one round trip). The first that fails raises."""
        bound = {key: self._bound(name, args) for key, (name, args) in calls.items()}
        with self.transaction() as conn:
            with conn.pipeline() if len(bound) > 1 else nullcontext():
                cursors = {key: conn.execute(query, params) for key, (_, query, params) in bound.items()}
            return {key: _result(bound[key][0], cursors[key].fetchall()) for key in calls}

    def _bound(self, name: str, args: dict[str, Any] | None) -> tuple[catalogue.View, Any, list[Any]]:
        """View NAME, its query for ARGS and their values, checked."""
        view = self.views.get(name)
        if view is None:
            raise ScsqlError(errors.VIEWER_PATH_UNKNOWN, f"no view {name!r} for {self.kind} {self.name}",
                             "/api/v1/openapi.json lists what this identity may read")
        args = {k: v for k, v in (args or {}).items() if v is not None and v != ""}
        unknown = sorted(set(args) - {p.name for p in view.params})
        if unknown:
            raise ScsqlError(errors.INVALID_ARGUMENT, f"{name} takes no argument {', '.join(unknown)}",
                             f"its arguments: {', '.join(p.name for p in view.params) or 'none'}")
        missing = [p.name for p in view.params if not p.optional and p.name not in args]
        if missing:
            raise ScsqlError(errors.INVALID_ARGUMENT, f"{name} needs {', '.join(missing)}")
        supplied = [p.name for p in view.params if p.name in args]
        return view, view.query(supplied), [args[n] for n in supplied]

    def channels(self) -> list[str]:
        with self.transaction() as conn:
            return [r["channel"] for r in conn.execute("select channel from scsql.viewer_channels()").fetchall()]

    def close(self) -> None:
        self.db.close()


def _result(view: catalogue.View, rows: list[Any]) -> Any:
    if not view.columns:
        return rows[0]["result"] if rows else None
    return rows if view.returns_set else (rows[0] if rows else None)


def open_source(ctx, agent: str | None, auditor: bool, pool_size: int = 4) -> Source:
    """The viewer's Source: as AGENT, or (AUDITOR) as scsql_auditor on the administrator's login."""
    if auditor:
        return auditor_source(ctx.admin_conninfo(), pool_size)
    if not agent:
        raise ScsqlError(errors.AGENT_REQUIRED, "scsql ui shows what one identity may read: name it",
                         "--agent NAME (what that agent may read) or --auditor (everything, changing nothing)")
    return agent_source(ctx.agent_conninfo(agent), agent, pool_size)


def auditor_source(admin_conninfo: str, pool_size: int = 4) -> Source:
    """Role scsql_auditor on the administrator's login (as scsql psql --auditor), read only."""
    from ..core.config import AUDITOR_ROLE
    from ..core.db import Database

    db = Database(with_options(admin_conninfo, f"-c role={AUDITOR_ROLE}", READ_ONLY), max_size=pool_size,
                  application_name="scsql:ui:auditor").open()
    return _loaded(Source(db, None, "auditor", "auditor", admin_conninfo=admin_conninfo))


def agent_source(conninfo: str, agent: str, pool_size: int = 4) -> Source:
    """Agent AGENT on an agent process's login (CONNINFO), read only; refused
    for a privileged login, an unknown or a revoked agent."""
    from ..core.db import Agent, Database, login_refused

    try:
        db = Database(with_options(conninfo, READ_ONLY), max_size=pool_size, application_name=f"scsql:ui:{agent}").open()
    except ScsqlError as exc:
        raise login_refused(exc, agent, conninfo) from None
    try:
        db.refuse_privileged_login()
        who = Agent(db, agent)
        who.whoami()  # an unknown or revoked agent fails here, clearly
    except ScsqlError:
        db.close()
        raise
    return _loaded(Source(db, who.role, "agent", agent))


def _loaded(source: Source) -> Source:
    try:
        return source.load()
    except ScsqlError:
        source.close()
        raise


def jsonable(value: Any) -> Any:
    """A row value as JSON: times in ISO 8601, numbers as numbers, bytes as hex."""
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() and abs(value) < 2**53 else float(value)
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes | memoryview):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value
