"""docs/schema.sql: the tables of a migrated database as they stand, read
from its catalogue (a table's shape is otherwise the sum of the migrations
that touched it). Each table of schemas scsql and scsql_caller with its
comment, columns (type, identity, default, NOT NULL, comment), constraints,
indexes, partitioning and row-level security; partitions, which partition
maintenance makes by date, are left out. tests/core/test_schema.py checks that the
committed file is what a fresh install renders."""

from __future__ import annotations

from typing import Any

SCHEMAS = ["scsql", "scsql_caller"]

TABLES = """
select c.oid, c.oid::regclass::text as name, c.relkind = 'p' as partitioned,
       pg_catalog.pg_get_partkeydef(c.oid) as partition_key, c.relrowsecurity as rls, c.relforcerowsecurity as forced,
       pg_catalog.obj_description(c.oid, 'pg_class') as comment
from pg_catalog.pg_class c
where c.relnamespace::regnamespace::text = any (%(schemas)s) and c.relkind in ('r', 'p') and not c.relispartition
order by 2
"""

COLUMNS = """
select a.attname as name, pg_catalog.format_type(a.atttypid, a.atttypmod) as type, a.attnotnull as not_null,
       a.attidentity as identity, a.attgenerated as generated,
       pg_catalog.pg_get_expr(d.adbin, d.adrelid) as default,
       pg_catalog.col_description(a.attrelid, a.attnum) as comment
from pg_catalog.pg_attribute a
left join pg_catalog.pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
where a.attrelid = %(oid)s and a.attnum > 0 and not a.attisdropped
order by a.attnum
"""

CONSTRAINTS = """
select conname as name, pg_catalog.pg_get_constraintdef(oid) as definition
from pg_catalog.pg_constraint
where conrelid = %(oid)s and contype <> 'n' and conparentid = 0
order by case contype when 'p' then 0 when 'u' then 1 when 'x' then 2 when 'f' then 3 else 4 end, conname
"""

INDEXES = """
select pg_catalog.pg_get_indexdef(i.indexrelid) as definition
from pg_catalog.pg_index i
join pg_catalog.pg_class x on x.oid = i.indexrelid
where i.indrelid = %(oid)s
  and not exists (select from pg_catalog.pg_constraint k where k.conindid = i.indexrelid and k.conrelid = i.indrelid)
order by x.relname
"""


def _column(c: dict[str, Any]) -> str:
    parts = [c["name"], c["type"]]
    if c["identity"]:
        parts.append("generated " + ("always" if c["identity"] == "a" else "by default") + " as identity")
    elif c["generated"]:
        parts.append(f"generated always as ({c['default']}) stored")
    elif c["default"] is not None:
        parts.append(f"default {c['default']}")
    if c["not_null"]:
        parts.append("not null")
    return " ".join(parts)


def _comment(text: str | None, indent: str = "") -> list[str]:
    return [f"{indent}-- {line}".rstrip() for line in (text or "").splitlines()]


def _table(conn, t: dict[str, Any]) -> list[str]:
    cols = conn.execute(COLUMNS, {"oid": t["oid"]}).fetchall()
    lines = _comment(t["comment"]) + [f"create table {t['name']} ("]
    for n, c in enumerate(cols):
        lines += _comment(c["comment"], "  ")
        lines.append(f"  {_column(c)}{',' if n < len(cols) - 1 else ''}")
    lines.append(")" + (f" partition by {t['partition_key'].lower()}" if t["partitioned"] else "") + ";")
    for k in conn.execute(CONSTRAINTS, {"oid": t["oid"]}).fetchall():
        lines.append(f"alter table {t['name']} add constraint {k['name']} {k['definition']};")
    lines += [f"{i['definition']};" for i in conn.execute(INDEXES, {"oid": t["oid"]}).fetchall()]
    if t["rls"]:
        lines.append(f"alter table {t['name']} enable row level security;")
    if t["forced"]:
        lines.append(f"alter table {t['name']} force row level security;")
    return lines


def render(conn) -> str:
    """docs/schema.sql for the database CONN is connected to."""
    from psycopg.rows import dict_row

    conn.row_factory = dict_row
    out = ["-- The tables of scsql's schema as a fresh install makes them, generated from the",
           "-- database's catalogue (scsql/ops/schema.py); migrations/ is how they got here,",
           "-- sql/ and policies/ hold the functions, triggers and row-level security policies.",
           "-- Not applied by anything: tests/core/test_schema.py checks it is current."]
    for t in conn.execute(TABLES, {"schemas": SCHEMAS}).fetchall():
        out += [""] + _table(conn, t)
    return "\n".join(out) + "\n"
