"""The SQL API as Python calls and MCP tools, derived from the catalogue.

``scsql_caller.api()`` lists the public functions of schema scsql the acting
role may execute, with their argument names and types. Each becomes an :class:`ApiFunction`: a
pydantic model of its arguments (``p_`` prefixes dropped, trailing defaulted
arguments optional, unknown arguments refused) and one bound
``select ... from scsql.fn(arg => %s::type, ...)`` call. Nothing about a
function is written twice: add a function to sql/, grant it to scsql_agent in
policies/, and it is a tool.

Where Python must add something a caller cannot (a signature made with the
agent's private key, an embedding of the query), an :class:`Adapter`
registered under the function's name supplies those arguments; they are hidden
from the tool's schema.
"""

from __future__ import annotations

import datetime as dt
import importlib
import decimal
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from pydantic import ConfigDict, Field, create_model

from .db import Agent
from .errors import ScsqlError

_SCALARS: dict[str, Any] = {
    "text": str,
    "character varying": str,
    "name": str,
    "uuid": str,
    "interval": str,
    "bytea": str,
    "integer": int,
    "bigint": int,
    "smallint": int,
    "numeric": float,
    "double precision": float,
    "real": float,
    "boolean": bool,
    "jsonb": Any,
    "json": Any,
    "timestamp with time zone": dt.datetime,
    "date": dt.date,
    "vector": list[float],
}


def python_type(pg_type: str) -> Any:
    if pg_type.endswith("[]"):
        return list[python_type(pg_type[:-2])]
    return _SCALARS.get(pg_type, str)


def to_json(value: Any) -> Any:
    """A database value as plain JSON data."""
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes | memoryview):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if hasattr(value, "tolist"):  # numpy arrays and pgvector values
        return value.tolist()
    return value


@dataclass(frozen=True)
class Param:
    sql_name: str
    pg_type: str
    optional: bool
    name: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.sql_name[2:] if self.sql_name.startswith("p_") else self.sql_name)


@dataclass
class Adapter:
    """Python-side help for one function: arguments it supplies, and a result hook."""

    supplies: frozenset[str] = frozenset()
    before: Callable[[Agent, dict[str, Any]], dict[str, Any]] | None = None
    after: Callable[[Agent, Any], Any] | None = None


ADAPTERS: dict[str, Adapter] = {}

# Modules that register adapters when imported. Subsystems append theirs.
ADAPTER_MODULES: list[str] = [
    "scsql.audit",
    "scsql.coordination",
    "scsql.memory",
    "scsql.learning",
]


def load_adapters() -> None:
    for module in ADAPTER_MODULES:
        importlib.import_module(module)


def adapter(function: str, supplies: tuple[str, ...] = ()):
    """Register ``before(agent, args) -> args`` for an API function."""

    def deco(fn: Callable[[Agent, dict[str, Any]], dict[str, Any]]):
        ADAPTERS[function] = Adapter(frozenset(supplies), fn, ADAPTERS.get(function, Adapter()).after)
        return fn

    return deco


def after(function: str):
    """Register ``after(agent, result) -> result`` for an API function, keeping its ``before``."""

    def deco(fn: Callable[[Agent, Any], Any]):
        old = ADAPTERS.get(function, Adapter())
        ADAPTERS[function] = Adapter(old.supplies, old.before, fn)
        return fn

    return deco


class ArgModel(ArgModelBase):
    """Tool arguments: unknown names (say, an agent_id) are refused, not ignored."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


@dataclass
class ApiFunction:
    name: str
    signature: str
    description: str
    returns_set: bool
    return_type: str
    returns_row: bool
    params: list[Param]
    adapter: Adapter = field(default_factory=Adapter)

    @property
    def visible_params(self) -> list[Param]:
        return [p for p in self.params if p.name not in self.adapter.supplies]

    def arg_model(self) -> type[ArgModel]:
        fields: dict[str, Any] = {}
        for p in self.visible_params:
            typ = python_type(p.pg_type)
            default = None if p.optional else ...
            if p.optional:
                typ = typ | None
            fields[f"f_{p.name}"] = (typ, Field(default, alias=p.name, description=f"{p.pg_type}"))
        return create_model(f"{self.name}_args", __base__=ArgModel, **fields)

    def __post_init__(self) -> None:
        self._known = {p.name: p for p in self.params}
        self._required = [p.name for p in self.params if not p.optional]
        self._queries: dict[tuple[str, ...], str] = {}

    def query(self, supplied: list[Param]) -> sql.Composed:
        args = sql.SQL(", ").join(
            sql.SQL("{} => %s::{}").format(sql.Identifier(p.sql_name), sql.SQL(p.pg_type)) for p in supplied
        )
        fn = sql.SQL("scsql.{}({})").format(sql.Identifier(self.name), args)
        if self.returns_set or self.returns_row:
            return sql.SQL("select * from {}").format(fn)
        return sql.SQL("select {} as result").format(fn)

    def _query_text(self, supplied: tuple[str, ...]) -> str:
        """The call for one set of supplied arguments, composed once and kept:
        the same text each time also lets psycopg prepare it on the server."""
        text = self._queries.get(supplied)
        if text is None:
            text = self._queries[supplied] = self.query([self._known[n] for n in supplied]).as_string(None)
        return text

    def call(self, agent: Agent, args: dict[str, Any]) -> Any:
        known = self._known
        for k in args:
            if k not in known:
                unknown = sorted(set(args) - set(known))
                raise ScsqlError(
                    "SC010", f"{self.name} has no argument {', '.join(unknown)}",
                    f"arguments: {', '.join(p.name for p in self.visible_params) or 'none'}",
                )
        args = {k: v for k, v in args.items() if v is not None}
        if self.adapter.before is not None:
            args = self.adapter.before(agent, args)
        missing = [n for n in self._required if n not in args]
        if missing:
            raise ScsqlError("SC010", f"{self.name} needs argument {', '.join(missing)}")
        supplied = tuple(p.name for p in self.params if p.name in args)
        values = [Jsonb(args[n]) if known[n].pg_type in ("jsonb", "json") else args[n] for n in supplied]
        with agent.transaction() as conn:
            rows = conn.execute(self._query_text(supplied), values).fetchall()
        if self.returns_set:
            result: Any = rows if self.returns_row else [next(iter(r.values())) for r in rows]
        elif self.returns_row:
            result = rows[0] if rows else None
        else:
            result = rows[0]["result"]
        if self.adapter.after is not None:
            result = self.adapter.after(agent, result)
        return to_json(result)


class Api:
    """The functions one agent may call, loaded once from the catalogue."""

    def __init__(self, agent: Agent):
        self.agent = agent
        load_adapters()
        with agent.transaction() as conn:
            rows = conn.execute("select * from scsql_caller.api()").fetchall()
        self.functions: dict[str, ApiFunction] = {}
        for r in rows:
            if r["name"] in self.functions:
                raise ScsqlError("SC010", f"API function {r['name']} is overloaded; give each signature its own name")
            n_in = len(r["arg_types"])
            params = [
                Param(name or f"arg{i + 1}", typ, i >= n_in - r["n_defaults"])
                for i, (name, typ) in enumerate(zip(r["arg_names"], r["arg_types"], strict=True))
            ]
            self.functions[r["name"]] = ApiFunction(
                r["name"], r["signature"], r["description"], r["returns_set"], r["return_type"],
                r["returns_row"], params, ADAPTERS.get(r["name"], Adapter()),
            )

    def call(self, name: str, **args: Any) -> Any:
        fn = self.functions.get(name)
        if fn is None:
            raise ScsqlError("42501", f"agent {self.agent.name!r} may not call scsql.{name} (or it does not exist)")
        return fn.call(self.agent, args)
