"""The SQL API as Python calls and MCP tools, derived from the catalogue.

``scsql_caller.api()`` lists the public functions of schema scsql the acting
role may execute, with their argument names and types. Each becomes an :class:`ApiFunction`: a
pydantic model of its arguments (``p_`` prefixes dropped, trailing defaulted
arguments optional, unknown arguments refused) and one bound
``select ... from scsql.fn(arg => %s::type, ...)`` call. Nothing about a
function is written twice: add a function to sql/, grant it to scsql_agent in
policies/, and it is a tool.

Where Python must add something a caller cannot (a signature made with the
agent's private key, an embedding of the query), or do something around the
call (walk a directory, wait for work), an :class:`Adapter` for the function
does it: the arguments it supplies are hidden from the tool's schema. Each
subsystem declares its adapters; ``scsql/subsystems.py`` gathers them.

This module knows nothing of MCP. The pydantic model of a function's
arguments checks them; the schema ``mcp_server.py`` publishes
(:meth:`ApiFunction.tool_schema`) adds what the function's comment says of
each argument (:func:`read_comment`): a description, choices, a range, the
JSON type of a jsonb value; defaults come from the signature.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from psycopg import sql
from psycopg.types.json import Jsonb
from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, PlainValidator, Strict, ValidationError,
                      WithJsonSchema, create_model)

from . import errors
from .db import Agent
from .errors import ScsqlError
from .jsonb import JsonValue, jsonb_text

# -- argument values: what each PostgreSQL type accepts ------------------------
#
# Strict: a value is taken only as the type it is (a float is not an integer,
# a bool is not a number, a string is not a number); nothing lossy is
# coerced. What the model returns is exactly what is bound, and what a signed
# write signs.

MAX_JSON_DEPTH = 100  # nesting of a jsonb argument (PostgreSQL's own limit is its stack)
MAX_NUMERIC_EXPONENT = 131072  # digits numeric holds before the decimal point

_INT_RANGES = {"smallint": 2**15, "integer": 2**31, "bigint": 2**63}


def _invalid(message: str, hint: str | None = None) -> ScsqlError:
    return ScsqlError(errors.INVALID_ARGUMENT, message, hint)


def check_text(name: str, value: Any, depth: int = 0) -> None:
    """Refuse what PostgreSQL text cannot hold, anywhere in an argument (jsonb
    and arrays included): a NUL byte (SC222) or a lone surrogate (SC010); and
    nesting deeper than MAX_JSON_DEPTH (SC010)."""
    if isinstance(value, str):
        if "\x00" in value:
            raise ScsqlError(errors.TEXT_HAS_NUL, f"argument {name} contains a NUL byte (\\x00); nothing was stored",
                             "PostgreSQL text cannot hold NUL bytes: remove them")
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise _invalid(f"argument {name} is not valid Unicode text: it holds a lone surrogate",
                               "send well-formed UTF-8; \\ud800-\\udfff alone are not characters") from None
        return
    if depth > MAX_JSON_DEPTH:
        raise _invalid(f"argument {name} is nested deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(value, dict):
        for k, v in value.items():
            check_text(name, k, depth + 1)
            check_text(name, v, depth + 1)
    elif isinstance(value, list | tuple):
        for v in value:
            check_text(name, v, depth + 1)


def _finite_decimal(value: decimal.Decimal, what: str) -> decimal.Decimal:
    if not value.is_finite():
        raise ValueError(f"{what} must be a finite number")
    if abs(value.adjusted()) > MAX_NUMERIC_EXPONENT:
        raise ValueError(f"{what} is too large or too small for PostgreSQL numeric")
    return value


def _numeric(value: Any) -> decimal.Decimal:
    """int, finite float or finite Decimal, as the exact Decimal that is bound and signed."""
    if isinstance(value, bool) or not isinstance(value, int | float | decimal.Decimal):
        raise ValueError("Input should be a number")
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("Input should be a finite number")
        return decimal.Decimal(repr(value))
    if isinstance(value, int):
        try:
            str(value)
        except ValueError:
            raise ValueError("Input has too many digits") from None
    return _finite_decimal(decimal.Decimal(value), "Input")


def _json_walk(value: Any, depth: int) -> None:
    if depth > MAX_JSON_DEPTH:
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    if value is None or isinstance(value, bool | str):
        return
    if isinstance(value, int):
        try:
            str(value)
        except ValueError:
            raise ValueError("JSON integer has too many digits") from None
        return
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("JSON has no NaN or Infinity")
        return
    if isinstance(value, decimal.Decimal):
        _finite_decimal(value, "a JSON number")
        return
    if isinstance(value, list | tuple):
        for v in value:
            _json_walk(v, depth + 1)
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"JSON object keys are strings, not {type(k).__name__}")
            _json_walk(v, depth + 1)
        return
    raise ValueError(f"{type(value).__name__} is not a JSON value")


def json_value(value: Any) -> Any:
    """A JSON value as PostgreSQL's jsonb stores it: its jsonb text read back
    (numbers with a fraction or exponent as Decimal, keys in jsonb's order).
    That text is what is bound (see :func:`jsonb`), and a signed write signs it."""
    _json_walk(value, 0)
    return JsonValue.parse(jsonb_text(value)).value


def jsonb(value: Any) -> Jsonb:
    """A jsonb parameter written as :func:`.jsonb.jsonb_text` writes it, Decimals exactly."""
    return Jsonb(value, dumps=jsonb_text)


def _timestamp(value: Any) -> Any:
    if isinstance(value, dt.datetime | str):
        return value
    raise ValueError("Input should be an ISO 8601 timestamp string")


def _aware(value: dt.datetime) -> dt.datetime:
    """A timestamp without a zone is taken as UTC (never as the server's zone)."""
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def _date(value: Any) -> Any:
    if isinstance(value, dt.datetime) or not isinstance(value, dt.date | str):
        raise ValueError("Input should be an ISO 8601 date string")
    return value


def _uuid(value: Any) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, str):
        try:
            return uuid.UUID(value)
        except ValueError:
            pass
    raise ValueError("Input should be a UUID")


def _bytea(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str) and value.startswith("\\x"):
        try:
            return bytes.fromhex(value[2:])
        except ValueError:
            pass
    raise ValueError("Input should be bytes, or a string \\x followed by hex digits")


_SCALARS: dict[str, Any] = {
    "text": str,
    "character varying": str,
    "name": str,
    "interval": str,
    "uuid": Annotated[uuid.UUID, PlainValidator(_uuid), WithJsonSchema({"type": "string", "format": "uuid"})],
    "bytea": Annotated[bytes, PlainValidator(_bytea), WithJsonSchema({"type": "string"})],
    "numeric": Annotated[decimal.Decimal, PlainValidator(_numeric), WithJsonSchema({"type": "number"})],
    "double precision": float,
    "real": float,
    "boolean": bool,
    "jsonb": Annotated[Any, AfterValidator(json_value)],
    "json": Annotated[Any, AfterValidator(json_value)],
    "timestamp with time zone": Annotated[dt.datetime, BeforeValidator(_timestamp), Strict(False),
                                          AfterValidator(_aware)],
    "date": Annotated[dt.date, BeforeValidator(_date), Strict(False)],
    "vector": list[float],
}


def python_type(pg_type: str) -> Any:
    """The pydantic type of an argument of a PostgreSQL type (strict; ranges of the integer types)."""
    if pg_type.endswith("[]"):
        return list[python_type(pg_type[:-2])]
    if pg_type in _INT_RANGES:
        bound = _INT_RANGES[pg_type]
        return Annotated[int, Field(ge=-bound, le=bound - 1)]
    return _SCALARS.get(pg_type, str)


def _validation_message(fn: str, exc: ValidationError) -> str:
    seen: dict[str, str] = {}
    for err in exc.errors(include_url=False, include_input=False):
        loc = [str(x) for x in err["loc"]]
        if loc and loc[0].startswith("f_"):
            loc[0] = loc[0][2:]
        # A union (T | None) reports once per member: keep the first message per place.
        where = ".".join(x for x in loc if not x.startswith("function-") and x != "none") or "arguments"
        seen.setdefault(where, err["msg"].removeprefix("Value error, "))
    return f"{fn}: " + "; ".join(f"{k}: {v}" for k, v in seen.items())


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
    doc: str = ""  # one line for the tool's schema (an adapter's own argument says it here)
    spec: str = ""  # choices a|b|c, a range lo..hi, or the JSON type of a jsonb value (see ArgDoc)
    default: str | None = None  # the SQL default expression, as the catalogue prints it
    name: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.sql_name[2:] if self.sql_name.startswith("p_") else self.sql_name)

    @property
    def tuning(self) -> bool:
        """A knob for operators and benchmarks, not published to agents by default."""
        return "tuning" in (x.strip() for x in self.spec.split(","))


# -- what a tool's schema says: the structured part of COMMENT ON FUNCTION ------
#
# A function's comment is read as:
#
#   * its first paragraph (up to the first blank line): the tool's description;
#   * each line ``p_name: what it is`` or ``p_name (spec): what it is``: the
#     description of argument p_name, and its constraints. ``spec`` is a
#     comma-separated list of: choices ``a|b|c`` (a JSON-schema enum; for an
#     array argument, of its items), a range ``lo..hi`` (either side may be
#     empty), the JSON type of a jsonb argument (object, array, string, ...),
#     or ``tuning``: a knob for operators and benchmarks (BM25's k1, fusion
#     weights), left out of the tool's published schema unless all tools are
#     asked for, and still accepted when an agent passes it;
#   * a line ``hidden: why``: the tool is left out of tools/list unless all
#     tools are asked for (``scsql mcp --all-tools``, SCSQL_MCP_TOOLS=all): hooks
#     do what it does;
#   * the rest: the manual (``\df+ scsql.*``), not sent to models.
#
# Choices and ranges repeat the CHECK constraints of the column an argument is
# stored in, or the function's own validation; tests/system/test_tool_schemas.py
# derives the constraints from pg_constraint and fails when they differ.

_ARG_LINE = re.compile(r"^p_(\w+)(?:\s*\(([^)]*)\))?:\s+(\S.*)$")
_JSON_TYPES = {"object", "array", "string", "number", "integer", "boolean"}


@dataclass(frozen=True)
class Comment:
    description: str
    args: dict[str, tuple[str, str]]  # argument name without p_ -> (spec, description)
    hidden: str | None


def read_comment(text: str) -> Comment:
    """The parts of a function's comment a tool is built from (see above)."""
    lines = text.strip().split("\n")
    lead: list[str] = []
    for line in lines:
        if not line.strip():
            break
        lead.append(line.strip())
    args: dict[str, tuple[str, str]] = {}
    hidden = None
    for line in lines[len(lead):]:
        m = _ARG_LINE.match(line.strip())
        if m:
            args[m.group(1)] = ((m.group(2) or "").strip(), m.group(3).strip())
        elif line.startswith("hidden:"):
            hidden = line.removeprefix("hidden:").strip()
    return Comment(" ".join(lead), args, hidden)


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        return float(text)


def _default(expr: str | None, pg_type: str) -> Any:
    """A literal default as JSON (None when there is none or it is not a literal)."""
    if expr is None:
        return None
    m = re.fullmatch(r"'((?:[^']|'')*)'::[\w .]+(?:\[\])?", expr)
    if m and not pg_type.endswith("[]") and pg_type not in ("jsonb", "json", "interval"):
        return m.group(1).replace("''", "'")
    if expr in ("true", "false"):
        return expr == "true"
    try:
        return _number(expr.removesuffix("::numeric").strip("()"))
    except ValueError:
        return None


def _json_type(pg_type: str) -> dict[str, Any]:
    if pg_type.endswith("[]"):
        return {"type": "array", "items": _json_type(pg_type[:-2])}
    if pg_type in _INT_RANGES:
        return {"type": "integer"}
    return dict({
        "uuid": {"type": "string", "format": "uuid"},
        "numeric": {"type": "number"}, "double precision": {"type": "number"}, "real": {"type": "number"},
        "boolean": {"type": "boolean"},
        "jsonb": {}, "json": {},
        "timestamp with time zone": {"type": "string", "format": "date-time"},
        "date": {"type": "string", "format": "date"},
        "vector": {"type": "array", "items": {"type": "number"}},
    }.get(pg_type, {"type": "string"}))


def property_schema(p: Param) -> dict[str, Any]:
    """The JSON schema of one argument: type, description, choices, range, default."""
    prop = _json_type(p.pg_type)
    target = prop["items"] if p.pg_type.endswith("[]") else prop
    for item in (x.strip() for x in p.spec.split(",") if x.strip()):
        if item == "tuning":
            continue
        if item in _JSON_TYPES:
            prop["type"] = item
        elif "|" in item:
            target["enum"] = [c.strip() for c in item.split("|")]
        elif ".." in item:
            lo, hi = (x.strip() for x in item.split("..", 1))
            if lo:
                target["minimum"] = _number(lo)
            if hi:
                target["maximum"] = _number(hi)
        else:
            raise ValueError(f"argument {p.name}: unknown constraint {item!r} in the function's comment")
    out: dict[str, Any] = {"type": prop.pop("type")} if "type" in prop else {}
    if p.doc:
        out["description"] = p.doc
    out.update(prop)
    default = _default(p.default, p.pg_type)
    if default is not None:
        out["default"] = default
    return out


Call = Callable[[dict[str, Any]], Any]  # sends the call with these arguments; returns its result


@dataclass(frozen=True)
class Adapter:
    """Python-side help for one function: the arguments it supplies (hidden
    from the tool's schema), and ``around(agent, args, call)``, which does
    what the function needs around the call and makes it with ``call(args)``
    (or not at all), returning the result."""

    supplies: frozenset[str] = frozenset()
    around: Callable[[Agent, dict[str, Any], Call], Any] | None = None
    # Arguments of the tool that the function does not have: ``around`` reads and removes them.
    takes: tuple[Param, ...] = ()
    # ``answer(agent, args, result)``: the confidence of the whole result, as a
    # row of scsql_caller.answer_confidence, which the MCP tool adds to it.
    answer: Callable[[Agent, dict[str, Any], Any], dict[str, Any]] | None = None

    def wrapping(self, inner: Adapter) -> Adapter:
        """This adapter around ``inner``: ``inner`` runs closest to the call."""
        outer_fn, inner_fn = self.around, inner.around
        answer = self.answer or inner.answer
        if outer_fn is None or inner_fn is None:
            return Adapter(self.supplies | inner.supplies, outer_fn or inner_fn, self.takes + inner.takes, answer)

        def around(agent: Agent, args: dict[str, Any], call: Call) -> Any:
            return outer_fn(agent, args, lambda a: inner_fn(agent, a, call))
        return Adapter(self.supplies | inner.supplies, around, self.takes + inner.takes, answer)


class ArgModel(BaseModel):
    """Tool arguments: unknown names (say, an agent_id) are refused, not ignored."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, strict=True, allow_inf_nan=False)


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
    hidden: str | None = None  # why hooks do this for agents (see read_comment); None: a tool of every agent

    @property
    def visible_params(self) -> list[Param]:
        return [p for p in self.params if p.name not in self.adapter.supplies] + list(self.adapter.takes)

    def arg_model(self, partial: bool = False) -> type[ArgModel]:
        """The arguments' model, whose JSON schema is the tool's input schema;
        ``partial``: every argument optional (a required one left out is
        reported after the adapter has supplied what it supplies)."""
        fields: dict[str, Any] = {}
        for p in self.visible_params:
            typ = python_type(p.pg_type)
            optional = p.optional or partial
            default = None if optional else ...
            if optional:
                typ = typ | None
            fields[f"f_{p.name}"] = (typ, Field(default, alias=p.name, description=f"{p.pg_type}"))
        return create_model(f"{self.name}_args", __base__=ArgModel, **fields)

    def tool_schema(self, tuning: bool = True) -> dict[str, Any]:
        """The tool's input schema as published: each argument's JSON type,
        description, choices, range and default (:func:`property_schema`);
        without ``tuning``, arguments whose spec says tuning are left out.
        Arguments are checked by :meth:`arg_model` (an unknown one is refused
        with SC010 naming the arguments, so the schema need not say
        additionalProperties); the SQL function checks choices and ranges
        itself, with its own codes."""
        params = [p for p in self.visible_params if tuning or not p.tuning]
        schema: dict[str, Any] = {"type": "object", "properties": {p.name: property_schema(p) for p in params}}
        required = [p.name for p in params if not p.optional]
        if required:
            schema["required"] = required
        return schema

    def __post_init__(self) -> None:
        self._known = {p.name: p for p in self.params}
        self._visible = {p.name: p for p in self.visible_params}
        self._required = [p.name for p in self.params if not p.optional]
        self._queries: dict[tuple[str, ...], str] = {}
        self._model: type[ArgModel] | None = None  # arg_model(partial=True), made at the first call
        self._arg_help = ", ".join(f"{p.name} {p.pg_type}" for p in self.visible_params) or "none"

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

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """The caller's arguments checked against the tool's model (the MCP input
        schema) and converted to the values that are bound: a ScsqlError
        (SC010, SC222) for anything else. Arguments that are None are omitted."""
        visible = self._visible
        unknown = [k for k in args if k not in visible]
        if unknown:
            raise _invalid(f"{self.name} has no argument {', '.join(sorted(map(str, unknown)))}",
                           f"arguments: {', '.join(visible) or 'none'}")
        args = {k: v for k, v in args.items() if v is not None}
        for k, v in args.items():
            check_text(k, v)
        if self._model is None:  # made once, when first needed: a command calls one or two of the functions
            self._model = self.arg_model(partial=True)
        try:
            model = self._model.model_validate({f"f_{k}": v for k, v in args.items()}, by_alias=False, by_name=True)
        except ValidationError as exc:
            raise _invalid(_validation_message(self.name, exc), f"arguments: {self._arg_help}") from None
        return {k: getattr(model, f"f_{k}") for k in args}

    def call(self, agent: Agent, args: dict[str, Any]) -> Any:
        try:
            return self._call(agent, args)
        except OSError as exc:
            # An adapter that touches the file system (index) was given a path
            # the system refuses (too long, say): the argument's fault.
            raise _invalid(f"{self.name}: the path cannot be used: {exc.strerror or type(exc).__name__}") from None

    def answer(self, agent: Agent, args: dict[str, Any], result: Any) -> dict[str, Any] | None:
        """The confidence of RESULT (what :meth:`call` returned for ARGS) as a
        whole, for the functions whose adapter weighs it (search, pack,
        recall_context): found, confidence, level, reason and the evidence."""
        if self.adapter.answer is None:
            return None
        return to_json(self.adapter.answer(agent, self.validate(args), result))

    def _call(self, agent: Agent, args: dict[str, Any]) -> Any:
        args = self.validate(args)
        around = self.adapter.around
        if around is None:
            return to_json(self._send(agent, args))
        return to_json(around(agent, args, lambda given: self._send(agent, given)))

    def _send(self, agent: Agent, args: dict[str, Any]) -> Any:
        """The call with these arguments (the caller's, as the adapter completed them), in one transaction."""
        for k, v in args.items():
            if k not in self._visible:
                check_text(k, v)  # what an adapter supplies (paths read from disk, say) too
        missing = [n for n in self._required if n not in args]
        if missing:
            raise _invalid(f"{self.name} needs argument {', '.join(missing)}")
        known = self._known
        supplied = tuple(p.name for p in self.params if p.name in args)
        values = [jsonb(args[n]) if known[n].pg_type in ("jsonb", "json") else args[n] for n in supplied]
        rows = _retrying(lambda: _fetch(agent, self._query_text(supplied), values))
        if self.returns_set:
            return rows if self.returns_row else [next(iter(r.values())) for r in rows]
        if self.returns_row:
            return rows[0] if rows else None
        return rows[0]["result"]


# The default expression of each argument of the API functions, as the catalogue prints it.
_DEFAULTS = """
select a.signature,
       array(select pg_catalog.pg_get_function_arg_default(a.signature::regprocedure, i)
               from generate_series(1, coalesce(array_length(a.arg_types, 1), 0)) i order by i) as defaults
  from scsql_caller.api() a
"""


# A deadlock or serialization failure rolled the call back whole: it is tried
# again (a migration re-creating policies while agents write is one cause).
TRANSIENT = frozenset({"40P01", "40001"})


def _fetch(agent: Agent, query: Any, values: list[Any]) -> list[Any]:
    with agent.transaction() as conn:
        return conn.execute(query, values).fetchall()


def _retrying(fn: Callable[[], Any], attempts: int = 5) -> Any:
    """FN, tried again after a deadlock or serialization failure (nothing of it was committed)."""
    for attempt in range(attempts):
        try:
            return fn()
        except ScsqlError as exc:
            if exc.sqlstate not in TRANSIENT or attempt == attempts - 1:
                raise
            time.sleep(0.02 * 2 ** attempt)
    raise AssertionError("unreachable")


class Catalogue:
    """The functions one agent may call, loaded once from the catalogue, each
    with its adapter from ``adapters`` (``ctx.api(agent)`` and
    :class:`scsql.api.Api` give it every subsystem's)."""

    def __init__(self, agent: Agent, adapters: dict[str, Adapter] | None = None):
        self.agent = agent
        adapters = adapters or {}
        with agent.transaction() as conn:
            rows = conn.execute("select * from scsql_caller.api()").fetchall()
            defaults = {d["signature"]: d["defaults"] for d in conn.execute(_DEFAULTS).fetchall()}
        self.functions: dict[str, ApiFunction] = {}
        for r in rows:
            if r["name"] in self.functions:
                raise ScsqlError(errors.INVALID_ARGUMENT, f"API function {r['name']} is overloaded; give each signature its own name")
            n_in = len(r["arg_types"])
            comment = read_comment(r["description"])
            given = defaults.get(r["signature"], [])
            params = []
            for i, (name, typ) in enumerate(zip(r["arg_names"], r["arg_types"], strict=True)):
                spec, doc = comment.args.get(name.removeprefix("p_"), ("", ""))
                params.append(Param(name or f"arg{i + 1}", typ, i >= n_in - r["n_defaults"], doc, spec,
                                    given[i] if i < len(given) else None))
            self.functions[r["name"]] = ApiFunction(
                r["name"], r["signature"], comment.description, r["returns_set"], r["return_type"],
                r["returns_row"], params, adapters.get(r["name"], Adapter()), comment.hidden,
            )

    def answer(self, name: str, result: Any, **args: Any) -> dict[str, Any] | None:
        """The confidence of RESULT, what ``call(NAME, **ARGS)`` returned, as a
        whole (:meth:`ApiFunction.answer`); None for a function without one."""
        fn = self.functions.get(name)
        return None if fn is None else fn.answer(self.agent, args, result)

    def call(self, name: str, **args: Any) -> Any:
        fn = self.functions.get(name)
        if fn is None:
            raise ScsqlError("42501", f"agent {self.agent.name!r} may not call scsql.{name} (or it does not exist)")
        return fn.call(self.agent, args)
