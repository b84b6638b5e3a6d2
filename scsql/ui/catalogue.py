"""The functions the viewer calls, read from the catalogue as the identity
sees them: the ``viewer_*`` functions of sql/60_viewer.sql and a few others
a page shows (status, metrics, capture counts, partitions, search). Each
becomes a :class:`View`: its arguments (``p_`` dropped), their types and what
its comment says of them, its result columns, and one bound call. The API's
paths and its OpenAPI description are derived from them, so nothing is
written twice; a function the identity may not execute (the auditor's
verification, for an agent) is simply absent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import sql

from ..core.registry import Param, property_schema, read_comment

# Functions outside the viewer_ prefix that pages show, by their API name.
EXTRA = {"status": "status", "metrics": "metrics", "capture_counts": "capture_counts",
         "partition_status": "partition_status", "partition_retirements": "partition_retirements",
         "memory_status": "memory_status", "search": "search", "model_prices": "model_prices"}
# Never published: the channel names are secrets of the viewer process.
PRIVATE = {"viewer_channels"}

_CATALOGUE = """
select p.proname::text as name, p.oid::regprocedure::text as signature,
       coalesce(pg_catalog.obj_description(p.oid, 'pg_proc'), '') as comment, p.proretset as returns_set,
       pg_catalog.format_type(p.prorettype, null) as return_type, p.pronargs::integer as n_in,
       p.pronargdefaults::integer as n_defaults, coalesce(p.proargnames, '{}') as arg_names,
       coalesce(p.proargmodes::text[], '{}') as arg_modes,
       array(select pg_catalog.format_type(t, null)
             from unnest(coalesce(p.proallargtypes, p.proargtypes::oid[])) with ordinality a(t, i) order by i) as arg_types,
       array(select pg_catalog.pg_get_function_arg_default(p.oid, i) from generate_series(1, p.pronargs) i order by i)
         as defaults
from pg_catalog.pg_proc p
where p.pronamespace = 'scsql'::regnamespace and p.prokind = 'f'
  and (p.proname like 'viewer\\_%%' or p.proname = any (%s))
  and pg_catalog.has_function_privilege(p.oid, 'execute')
order by p.proname
"""


@dataclass(frozen=True)
class View:
    """One function as an API path: /api/v1/NAME."""

    name: str  # the API name: the function's without viewer_
    function: str
    description: str  # the comment's first paragraph
    manual: str  # the whole comment
    params: tuple[Param, ...]
    columns: tuple[tuple[str, str], ...]  # result columns (name, type); () for a scalar result
    returns_set: bool
    return_type: str

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    def query(self, supplied: list[str]) -> sql.Composed:
        """select * from scsql.FN(p_a => %s::type, ...) for the SUPPLIED arguments."""
        args = [sql.SQL("{} => %s::{}").format(sql.Identifier(p.sql_name), sql.SQL(p.pg_type))
                for p in self.params if p.name in supplied]
        call = sql.SQL("scsql.{}({})").format(sql.Identifier(self.function), sql.SQL(", ").join(args))
        if self.columns:
            return sql.SQL("select * from {}").format(call)
        return sql.SQL("select {} as result").format(call)

    def schema(self) -> dict[str, Any]:
        """The OpenAPI operation of GET /api/v1/NAME."""
        from ..core.registry import _json_type

        parameters = [{"name": p.name, "in": "query", "required": not p.optional, "schema": property_schema(p),
                       **({"style": "form", "explode": True} if p.pg_type.endswith("[]") else {})}
                      for p in self.params]
        item = {"type": "object", "properties": {c: _json_type(t) for c, t in self.columns}} if self.columns else {}
        body = {"type": "array", "items": item} if self.returns_set else item
        return {"get": {"operationId": self.name, "summary": self.description, "description": self.manual,
                        "parameters": parameters,
                        "responses": {"200": {"description": "rows", "content": {"application/json": {"schema": body}}},
                                      "4XX": {"$ref": "#/components/responses/Error"}}}}


def load(conn) -> dict[str, View]:
    """The functions this connection's identity may call, by API name."""
    views: dict[str, View] = {}
    for r in conn.execute(_CATALOGUE, (list(EXTRA.values()),)).fetchall():
        if r["name"] in PRIVATE:
            continue
        comment = read_comment(r["comment"])
        n_in, names, modes, types = r["n_in"], r["arg_names"], r["arg_modes"], r["arg_types"]
        params = []
        for i in range(n_in):
            name = names[i] if i < len(names) and names[i] else f"arg{i + 1}"
            spec, doc = comment.args.get(name.removeprefix("p_"), ("", ""))
            params.append(Param(name, types[i], i >= n_in - r["n_defaults"], doc, spec, r["defaults"][i]))
        columns = tuple((names[i], types[i]) for i in range(len(modes)) if modes[i] in ("t", "o"))
        api_name = r["name"].removeprefix("viewer_")
        if api_name in views:
            raise ValueError(f"scsql.{r['name']} is overloaded; each viewer function has one signature")
        views[api_name] = View(api_name, r["name"], comment.description, r["comment"], tuple(params), columns,
                               r["returns_set"], r["return_type"])
    return views
