"""Daily partitions of tool_calls and outcomes.

The work is done by SQL functions (``scsql.maintain_partitions``,
``scsql.partition_status``, ``scsql.set_partition_retention``); this module
calls them on an administrator's connection, and installs pg_partman into a
database (which needs a superuser) before its first migrate.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

from ..core import errors
from ..core.db import unreachable
from ..core.errors import ScsqlError
from ..core.roles import admin_connection
from ..core.worker import Job

# What a superuser runs so scsql_owner can drive pg_partman (4.x or 5.x).
ENABLE_PARTMAN = """
do $$ begin
  -- The role scsql's migrations create; made here when pg_partman is enabled first.
  if not exists (select from pg_roles where rolname = 'scsql_owner') then
    create role scsql_owner nologin createrole;
  end if;
end $$;
create schema if not exists partman;
create extension if not exists pg_partman schema partman{version};
grant usage, create on schema partman to scsql_owner;
grant select, insert, update, delete on all tables in schema partman to scsql_owner;
grant usage on all sequences in schema partman to scsql_owner;
grant execute on all functions in schema partman to scsql_owner;
grant execute on all procedures in schema partman to scsql_owner;
"""


def partman_versions(conninfo: str) -> list[str]:
    """The pg_partman versions whose install scripts the server has, oldest first."""
    with admin_connection(conninfo) as conn:
        rows = conn.execute("select version from pg_available_extension_versions where name = 'pg_partman'").fetchall()
    return sorted((r["version"] for r in rows), key=_version_key)


def _version_key(version: str) -> tuple:
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in version.replace("-", ".").split("."))


def enable_partman(conninfo: str, version: str | None = None) -> str:
    """Create pg_partman in schema partman (its default version, or VERSION) and
    let scsql_owner use it. Returns a line naming the version installed."""
    clause = sql.SQL(" version {}").format(sql.Literal(version)) if version else sql.SQL("")
    # A plain connection: the database may not be migrated yet.
    try:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(sql.SQL(ENABLE_PARTMAN).format(version=clause))
            installed = conn.execute("select extversion from pg_extension where extname = 'pg_partman'").fetchone()[0]
    except psycopg.OperationalError as exc:
        raise unreachable(exc) from None
    except psycopg.Error as exc:
        raise errors.from_psycopg(exc) from None
    if version and installed != version:
        raise ScsqlError(errors.INVALID_ARGUMENT, f"pg_partman {installed} is already installed in this database, not {version}",
                         "upgrading pg_partman is its own procedure (ALTER EXTENSION pg_partman UPDATE, then "
                         "pg_partman's migration notes); scsql does not do it")
    return f"pg_partman {installed} is installed in schema partman"


def maintain(conninfo: str) -> list[dict[str, Any]]:
    with admin_connection(conninfo) as conn:
        conn.execute("set local role scsql_admin")
        return conn.execute("select * from scsql.maintain_partitions()").fetchall()


def status(conninfo: str) -> list[dict[str, Any]]:
    with admin_connection(conninfo) as conn:
        conn.execute("set local role scsql_admin")
        return conn.execute("select * from scsql.partition_status()").fetchall()


MAINTENANCE_EVERY = 600.0  # seconds between partition maintenance runs


def maintenance_job(admin_conninfo: Callable[[], str]) -> Job:
    """Partition maintenance over an administrator's connection (ADMIN_CONNINFO(),
    asked for when the job first runs), at most once every MAINTENANCE_EVERY
    seconds. It takes ACCESS EXCLUSIVE locks that every project's writes
    queue behind, so agents may not run it; a worker without an
    administrator's connection says so once and leaves it to `scsql
    partitions maintain` (or pg_partman's background worker)."""
    last = [-MAINTENANCE_EVERY]

    def run(_agent) -> int:
        now = time.monotonic()
        if now - last[0] < MAINTENANCE_EVERY:
            return 0
        last[0] = now
        try:
            maintain(admin_conninfo())
        except ScsqlError as exc:
            print(f"scsql worker: partition maintenance skipped ({exc.code}: {exc.message}); "
                  "run scsql partitions maintain as an administrator", file=sys.stderr)
            last[0] = float("inf")  # said once
        return 0  # creating partitions is not "more work pending": the worker sleeps

    return Job("partitions", run)
