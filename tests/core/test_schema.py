"""docs/schema.sql shows every table as it stands (scsql/ops/schema.py): a
freshly migrated database renders it, and the committed file must be exactly
that. After a migration, regenerate it with

    SCSQL_WRITE_SCHEMA=1 python -m pytest tests/core/test_schema.py
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import psycopg

from scsql.ops import schema

SCHEMA = Path(__file__).resolve().parent.parent.parent / "docs" / "schema.sql"


def _render(conninfo: str) -> str:
    with psycopg.connect(conninfo) as conn:
        return schema.render(conn)


def test_the_committed_schema_is_the_generated_one(scsql_db):
    generated = _render(scsql_db.admin)
    if os.environ.get("SCSQL_WRITE_SCHEMA"):
        SCHEMA.write_text(generated)
    committed = SCHEMA.read_text() if SCHEMA.exists() else ""
    diff = "\n".join(difflib.unified_diff(committed.splitlines(), generated.splitlines(),
                                          "docs/schema.sql (committed)", "generated", lineterm=""))
    assert not diff, ("docs/schema.sql is not what the migrations make; regenerate it with "
                      "SCSQL_WRITE_SCHEMA=1 python -m pytest tests/core/test_schema.py\n" + diff[:6000])


def test_the_schema_names_each_table_and_what_a_migration_adds(scsql_db):
    """Every table of the schema is in the file with its columns, and a
    column a migration adds shows up in the rendering (it reads the live
    catalogue, not a list of its own)."""
    text = _render(scsql_db.admin)
    with psycopg.connect(scsql_db.admin) as conn:
        tables = [r[0] for r in conn.execute(
            "select oid::regclass::text from pg_class where relnamespace = 'scsql'::regnamespace "
            "and relkind in ('r', 'p') and not relispartition")]
        assert len(tables) > 20
        for t in tables:
            assert f"create table {t} (" in text, t
        assert "create table scsql.memory_facts (" in text and "  key text not null," in text
        conn.execute("alter table scsql.memory_facts add column schema_probe integer default 7")
        assert "  schema_probe integer default 7\n);" in schema.render(conn)
