"""A bad argument stopped by a table's constraint gets its SC code on Citus too.

On Citus the constraint is checked on the worker that holds the shard, and
Citus hands the error back to the coordinator as its SQLSTATE and message
only: no schema, table, constraint or column, and the message names the
shard (tasks_102008, tasks_complexity_check_102008). scsql._raise_violation
maps such a violation by the names in the message. These tests give it
exactly what Citus passes on, on one server (and run unchanged on the
cluster, .ci/citus.sh, where test_queue's bad enqueues go through it)."""

from __future__ import annotations

import psycopg
import pytest

_RAISE = "select scsql._raise_violation(row(%s, '', '', '', '', %s)::scsql.violation)"


def _raised(conn, sqlstate: str, message: str) -> psycopg.Error:
    with pytest.raises(psycopg.Error) as err:
        conn.execute(_RAISE, (sqlstate, message))
    conn.rollback()
    return err.value


def test_a_violation_known_only_by_a_shards_message_gets_the_constraints_code(scsql_db):
    with scsql_db.connect() as conn:
        err = _raised(conn, "23514", 'new row for relation "tasks_102008" violates check constraint '
                                     '"tasks_complexity_check_102008"')
        assert err.sqlstate == "SC010" and err.diag.message_primary == "complexity must be 1 (trivial) to 5 (very large)"
        assert (err.diag.table_name, err.diag.constraint_name) == ("tasks", "tasks_complexity_check")
        # A shard of a partition: the constraint's comment is on the partitioned table.
        part = conn.execute("select c.relname from pg_inherits i join pg_class c on c.oid = i.inhrelid"
                            " where i.inhparent = 'scsql.tool_calls'::regclass and c.relname ~ '_p[0-9]{8}$'"
                            " order by 1 limit 1").fetchone()["relname"]  # a partition that exists: a dated name passes out of the window
        err = _raised(conn, "23514", f'new row for relation "{part}_102209" violates check constraint '
                                     '"tool_calls_tool_check_102209"')
        assert err.sqlstate == "SC010" and err.diag.message_primary == "tool must be 1 to 200 characters"
        # A NULL in a NOT NULL column: the check constraint on that column alone says the rule.
        err = _raised(conn, "23502", 'null value in column "max_attempts" of relation "tasks_102008" violates '
                                     'not-null constraint')
        assert err.sqlstate == "SC010" and err.diag.message_primary == "max_attempts must be 1 to 100"
        err = _raised(conn, "23502", 'null value in column "tool" of relation "tool_calls_102209" violates '
                                     'not-null constraint')
        assert err.sqlstate == "SC010" and err.diag.message_primary == "tool must be 1 to 200 characters"


def test_a_violation_the_message_does_not_map_is_raised_as_it_was(scsql_db):
    with scsql_db.connect() as conn:
        for sqlstate, message in (
                # an invariant the database keeps (not mapped)
                ("23514", 'new row for relation "tasks_102008" violates check constraint "tasks_state_check_102008"'),
                # a table scsql does not have, a message of another form (another language)
                ("23514", 'new row for relation "nothing_1" violates check constraint "nothing_check_1"'),
                ("23514", 'la nouvelle ligne de la relation « tasks_102008 » viole la contrainte de vérification'),
                ("23502", 'null value in column "x" violates not-null constraint')):
            err = _raised(conn, sqlstate, message)
            assert (err.sqlstate, err.diag.message_primary) == (sqlstate, message)
