"""SQL functions are verbs a reader can hold in view: none is longer than
MAX_LINES, except at most MAX_KERNELS hot-path kernels of at most
KERNEL_MAX_LINES whose comments say why they are one piece.

The definitions are read from the catalogue after migration, so functions a
migration generates (the chain triggers, one per chained table) count as
much as those written in sql/."""

from __future__ import annotations

MAX_LINES = 80
KERNEL_MAX_LINES = 150
MAX_KERNELS = 3
KERNEL_MARK = "Hot-path kernel:"

DEFINITIONS = """
select p.oid::regprocedure::text as function,
       array_length(string_to_array(pg_catalog.pg_get_functiondef(p.oid), E'\\n'), 1) as lines,
       coalesce(pg_catalog.obj_description(p.oid, 'pg_proc'), '') as comment
  from pg_catalog.pg_proc p
  left join pg_catalog.pg_depend d on d.objid = p.oid and d.deptype = 'e'
 where p.pronamespace::regnamespace::text like 'scsql%%' and d.objid is null
   and p.prokind in ('f', 'p')
 order by 2 desc
"""


def _definitions(db) -> list[dict]:
    with db.connect() as conn:
        return conn.execute(DEFINITIONS).fetchall()


def test_no_function_is_longer_than_a_verb(scsql_db):
    rows = _definitions(scsql_db)
    assert len(rows) > 200, "the catalogue query found too few functions to be the schema"
    long = [(r["function"], r["lines"]) for r in rows
            if r["lines"] > MAX_LINES and KERNEL_MARK not in r["comment"]]
    assert not long, f"over {MAX_LINES} lines: {long}"


def test_kernels_are_few_short_and_say_why(scsql_db):
    kernels = [r for r in _definitions(scsql_db) if KERNEL_MARK in r["comment"]]
    assert len(kernels) <= MAX_KERNELS, [r["function"] for r in kernels]
    assert all(r["lines"] <= KERNEL_MAX_LINES for r in kernels), \
        [(r["function"], r["lines"]) for r in kernels]
    for r in kernels:
        why = r["comment"].split(KERNEL_MARK, 1)[1].strip()
        assert len(why.split()) >= 8, f"{r['function']}: a kernel's comment says why it is one piece"
