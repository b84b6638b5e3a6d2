"""Schema migrations.

Three kinds of files define the database:

* ``migrations/bootstrap.sql`` -- roles, schema, extensions, the ledger; idempotent,
  run first, as the installing administrator.
* ``migrations/NNNN_name.sql`` -- tables. Forward-only, applied once each, in
  order, each in its own transaction, recorded with its sha256 in
  ``scsql.schema_migrations``. An applied file must never change.
* ``sql/*.sql`` then ``policies/*.sql`` -- functions, triggers, views, grants and
  row-level security; re-applied in one transaction on every migrate.

sql/ and policies/ define what this version has; they do not clean up after
earlier versions. When a function's arguments change (or it is renamed or
moved to another schema), sql/ defines the new one and a new numbered
migration drops the old one, once: ``drop function if exists scsql.f(<old
argument types>)``. When only its results change, CREATE OR REPLACE cannot
change them: the migration drops the function only while it still has the old
results (a ``do`` block testing ``pg_proc``), and sql/ creates it again. A
dropped function takes its grants with it (policies/ grants them again) and,
with ``cascade``, the policies that call it (policies/ recreates them).
tests/core/test_migrations.py installs each earlier release (tests/data/) with its
own migrator, upgrades it, and fails on any object a fresh install does not
have.

Everything after the bootstrap runs as ``scsql_owner``. A session-level
advisory lock serialises migrators: a second one waits, then finds nothing
left to apply. No agent can hold that lock: the bootstrap revokes EXECUTE on
the advisory lock functions from PUBLIC in scsql's database (when run by a
superuser) and gives it back to scsql_owner only.

DDL waits for every session holding a lock on its table, a reader's open
transaction included, and every other session's writes queue behind that
wait. So each transaction of a migration waits at most LOCK_TIMEOUT for a
lock, is rolled back and tried again (for up to ``lock_wait`` seconds in
all), and an agent's long transaction delays the migration, not every
project's writes.

:func:`Migrator.script` renders the same steps as one psql script, so a DBA
can apply them with plain ``psql -f`` and no Python.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from .. import __version__
from . import errors
from .errors import ScsqlError

LOCK_KEY = (1396921201, 1)  # pg_advisory_lock(int4, int4): "scsql", migrate
LOCK_TIMEOUT = "2s"  # the longest one statement of a migration waits for a table lock
LOCK_WAIT = 600.0  # seconds a migrator keeps trying again before it gives up
MIGRATION_LOCK_TIMEOUT = errors.MIGRATION_LOCK_TIMEOUT
_MIGRATION_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
SEQUENCE = "sequence.txt"  # migrations/: the order they are applied in


@dataclass(frozen=True)
class SqlFile:
    name: str
    text: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


@dataclass(frozen=True)
class Migration(SqlFile):
    version: int = 0


def _dir(kind: str) -> Path:
    """Directory of one kind of SQL file: the source checkout's when scsql runs
    from one, else the copy packaged with scsql."""
    package = Path(__file__).resolve().parent.parent  # the scsql package
    checkout = package.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / kind).is_dir():
        return checkout / kind
    return package / kind


@dataclass(frozen=True)
class Source:
    """The files that define the database, read from one root (default: the package)."""

    root: Path | None = None

    def directory(self, kind: str) -> Path:
        """The folder of KIND (migrations, sql, policies) in this source."""
        return self.root / kind if self.root is not None else _dir(kind)

    def bootstrap(self) -> SqlFile:
        path = self.directory("migrations") / "bootstrap.sql"
        return SqlFile("bootstrap.sql", path.read_text())

    def migrations(self) -> list[Migration]:
        """The migrations in the order they are applied: migrations/sequence.txt
        (a source without one, an earlier release's, in file name order)."""
        directory = self.directory("migrations")
        found = {}
        for path in sorted(directory.glob("*.sql")):
            m = _MIGRATION_NAME.match(path.name)
            if m:
                found[path.name] = Migration(path.name, path.read_text(), int(m.group(1)))
            elif path.name != "bootstrap.sql":
                raise ValueError(f"migration file {path.name} is not named NNNN_name.sql")
        versions = [m.version for m in found.values()]
        if len(set(versions)) != len(versions):
            raise ValueError("two migration files share a version number")
        sequence = directory / SEQUENCE
        if not sequence.exists():
            return list(found.values())
        names = [ln.strip() for ln in sequence.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
        twice = sorted({n for n in names if names.count(n) > 1})
        unknown = sorted(set(names) - set(found))
        unlisted = sorted(set(found) - set(names))
        if twice or unknown or unlisted:
            raise ValueError(f"migrations/{SEQUENCE} must list every migration file once: "
                             + "; ".join(f"{what}: {', '.join(n)}" for what, n in
                                         (("listed twice", twice), ("no such file", unknown),
                                          ("not listed", unlisted)) if n))
        return [found[n] for n in names]

    def api(self) -> list[SqlFile]:
        files = []
        for kind in ("sql", "policies"):
            for path in sorted(self.directory(kind).glob("*.sql")):
                files.append(SqlFile(f"{kind}/{path.name}", path.read_text()))
        return files


@dataclass
class Report:
    applied: list[str] = field(default_factory=list)
    api_files: int = 0
    waited: bool = False
    schema_version: int | None = None  # how many migrations of the sequence the database has applied
    schema_head: str | None = None  # the last of them applied

    @property
    def schema(self) -> str:
        """The schema version as people read it: "56 (0780_distill)"."""
        return f"{self.schema_version} ({(self.schema_head or 'none').removesuffix('.sql')})"


_PATH = "set local search_path = scsql, public;\n"
_AS_OWNER = "set local role scsql_owner;\n" + _PATH


def _api_text(f: SqlFile) -> str:
    # Each file starts from the same search_path: a file may call functions
    # (pg_partman's, for one) that change it for the rest of the transaction.
    return f"-- {f.name}\n" + _PATH + f.text


def _api_checksum(api: list[SqlFile]) -> str:
    return hashlib.sha256("\n".join(f"{f.name}\n{f.text}" for f in api).encode()).hexdigest()


def _record_api(checksum: str) -> str:
    return (
        "insert into scsql.applied_definitions (one, checksum, applied_at) "
        f"values (true, '{checksum}', now()) on conflict (one) do update "
        "set checksum = excluded.checksum, applied_at = excluded.applied_at;\n"
    )


def _record(m: Migration) -> str:
    return (
        "insert into scsql.schema_migrations (version, name, checksum) "
        f"values ({m.version}, '{m.name}', '{m.checksum}');\n"
    )


class Migrator:
    def __init__(self, conninfo: str, source: Source | None = None, lock_wait: float = LOCK_WAIT):
        self.conninfo = conninfo
        self.source = source or Source()
        self.lock_wait = lock_wait
        self._progress: Callable[[str], None] = lambda _msg: None

    def run(
        self,
        target: int | None = None,
        with_api: bool = True,
        progress: Callable[[str], None] = lambda _msg: None,
        reapply: bool = True,
    ) -> Report:
        """Apply the bootstrap, pending migrations up to migration number
        ``target`` in the sequence and (at the head, unless ``with_api`` is false) sql/ and policies/. ``reapply``
        false (scsql up): sql/ and policies/ only when a migration was applied
        or they changed since they were last applied. Re-creating functions
        and policies locks every table, so an up with nothing new takes no
        lock an agent's write could wait on; scsql migrate re-applies them
        always, putting back what was changed by hand (a grant, a policy),
        and both it and the writers try again when they deadlock."""
        report = Report()
        self._progress = progress
        every = migrations = self.source.migrations()
        if target is not None:
            at = next((i for i, m in enumerate(every) if m.version == target), None)
            if at is None:
                raise ScsqlError(errors.INVALID_ARGUMENT, f"there is no migration {target:04d}",
                                 f"the migrations are listed in order in migrations/{SEQUENCE}")
            migrations, at_head = every[:at + 1], at == len(every) - 1
        else:
            at_head = True
        try:
            conn = psycopg.connect(self.conninfo, autocommit=True)
        except psycopg.OperationalError as exc:
            from .db import unreachable

            raise unreachable(exc) from None
        with conn:
            got = conn.execute("select pg_try_advisory_lock(%s, %s)", LOCK_KEY).fetchone()[0]
            if not got:
                report.waited = True
                progress("waiting for another migrator to finish")
                conn.execute("select pg_advisory_lock(%s, %s)", LOCK_KEY)
            try:
                self._in_tx(conn, self.source.bootstrap().text)
                applied = self._applied(conn)
                self._check_ledger(every, applied)
                for m in migrations:
                    if m.version in applied:
                        continue
                    self._in_tx(conn, _AS_OWNER + m.text + "\n" + _record(m))
                    report.applied.append(m.name)
                    progress(f"applied {m.name}")
                if with_api and at_head:
                    api = self.source.api()
                    checksum = _api_checksum(api)
                    if reapply or report.applied or self._applied_api(conn) != checksum:
                        self._in_tx(conn, _AS_OWNER + "\n".join(_api_text(f) for f in api) + "\n"
                                    + _record_api(checksum))
                        report.api_files = len(api)
                        progress(f"applied {len(api)} files of sql/ and policies/")
                    else:
                        progress("sql/ and policies/ are as applied last: nothing to re-apply")
                report.schema_version, report.schema_head = self._version(every, self._applied(conn))
            except psycopg.Error as exc:
                raise errors.from_psycopg(exc) from None
            finally:
                conn.execute("select pg_advisory_unlock(%s, %s)", LOCK_KEY)
        return report

    def bootstrap(self) -> None:
        """Apply only the bootstrap: roles, schema, extension and the
        database's privileges. A database cloned from a migrated template
        needs it, because CREATE DATABASE does not copy privileges."""
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            self._in_tx(conn, self.source.bootstrap().text)

    def _in_tx(self, conn: psycopg.Connection, text: str) -> None:
        """Run TEXT in one transaction whose lock waits are bounded by
        LOCK_TIMEOUT; on a lock timeout, roll back and try again, for up to
        ``lock_wait`` seconds, then raise SC024 naming the sessions in the way."""
        deadline = time.monotonic() + self.lock_wait
        pause = 0.2
        while True:
            try:
                with conn.transaction():
                    conn.execute(f"set local lock_timeout = '{LOCK_TIMEOUT}'")
                    conn.execute(text)
                return
            except psycopg.errors.DeadlockDetected:
                # An agent's write and this step wanted each other's locks: PostgreSQL chose this step to
                # give way (the write goes on). Try it again, like a lock timeout.
                if time.monotonic() + pause > deadline:
                    raise
                self._progress("a deadlock with another session's write; trying again")
                time.sleep(pause)
                pause = min(pause * 2, 5.0)
            except psycopg.errors.LockNotAvailable:
                holders = self._lock_holders(conn)
                if time.monotonic() + pause > deadline:
                    raise ScsqlError(
                        MIGRATION_LOCK_TIMEOUT,
                        f"migrate gave up after {self.lock_wait:g} s: sessions holding locks on scsql's tables "
                        f"kept it waiting ({holders or 'they have finished since'}); nothing of this step was applied",
                        "end those sessions' transactions (pg_terminate_backend if they are stuck), "
                        "then run scsql migrate again",
                    ) from None
                self._progress(f"a table is locked by {holders or 'another session'}; trying again")
                time.sleep(pause)
                pause = min(pause * 2, 5.0)

    @staticmethod
    def _lock_holders(conn: psycopg.Connection) -> str:
        rows = conn.execute(
            "select a.pid, a.usename, a.state from pg_catalog.pg_stat_activity a "
            "where a.datname = current_database() and a.pid <> pg_backend_pid() and a.xact_start is not null "
            "and exists (select from pg_catalog.pg_locks l join pg_catalog.pg_class c on c.oid = l.relation "
            "            where l.pid = a.pid and l.granted and c.relnamespace = 'scsql'::regnamespace) "
            "order by a.xact_start limit 5").fetchall()
        return ", ".join(f"pid {pid} ({user}, {state})" for pid, user, state in rows)

    @staticmethod
    def _applied_api(conn: psycopg.Connection) -> str | None:
        """The checksum of the sql/ and policies/ files applied last (None before migration 0601)."""
        with conn.transaction():
            conn.execute("set local role scsql_owner")
            if conn.execute("select to_regclass('scsql.applied_definitions')").fetchone()[0] is None:
                return None
            row = conn.execute("select checksum from scsql.applied_definitions").fetchone()
        return row[0] if row else None

    @staticmethod
    def _applied(conn: psycopg.Connection) -> dict[int, str]:
        with conn.transaction():
            conn.execute("set local role scsql_owner")
            rows = conn.execute("select version, checksum from scsql.schema_migrations").fetchall()
        return dict(rows)

    @staticmethod
    def _version(every: list[Migration], applied: dict[int, str]) -> tuple[int, str | None]:
        """The schema version: how many migrations of the sequence the database
        has applied (one sequence, so the count says which), and the last of them."""
        done = [m.name for m in every if m.version in applied]
        return len(applied), (done[-1] if done else None)

    @staticmethod
    def _check_ledger(migrations: list[Migration], applied: dict[int, str]) -> None:
        known = {m.version: m for m in migrations}
        for version, checksum in sorted(applied.items()):
            m = known.get(version)
            if m is None:
                raise ScsqlError(
                    errors.MIGRATION_UNKNOWN,
                    f"the database has migration {version:04d}, which this scsql {__version__} does not know",
                    "upgrade scsql to the version that migrated this database",
                )
            if m.checksum != checksum:
                raise ScsqlError(
                    errors.MIGRATION_CHANGED,
                    f"migration {m.name} was applied with checksum {checksum[:12]}, "
                    f"but the file now has {m.checksum[:12]}",
                    "applied migrations are immutable: restore the file and add a new migration for the change",
                )

    def script(self) -> str:
        """The whole migration as one psql script (scsql migrate --print)."""
        out = [
            f"-- scsql {__version__}: complete migration script.",
            "-- Run with: psql -X -v ON_ERROR_STOP=1 -f this.sql \"<connection string of an administrator>\"",
            "-- Safe to run again: applied migrations are skipped, changed ones are refused.",
            "\\set ON_ERROR_STOP on",
            "select pg_advisory_lock(%d, %d);" % LOCK_KEY,
            "",
            "begin;",
            self.source.bootstrap().text,
            "commit;",
            "set role scsql_owner;",
        ]
        for m in self.source.migrations():
            out += [
                "",
                f"-- {m.name}",
                "do $scsql$ begin",
                f"  if exists (select from scsql.schema_migrations where version = {m.version}"
                f" and checksum <> '{m.checksum}') then",
                "    raise exception using errcode = 'SC022',",
                f"      message = 'migration {m.name} was applied with a different checksum';",
                "  end if;",
                "end $scsql$;",
                f"select not exists (select from scsql.schema_migrations where version = {m.version})"
                " as scsql_pending \\gset",
                "\\if :scsql_pending",
                "begin;",
                _AS_OWNER + m.text,
                _record(m) + "commit;",
                "\\endif",
            ]
        api = self.source.api()
        out += ["", "-- sql/ and policies/", "begin;", _AS_OWNER]
        out += [_api_text(f) for f in api]
        out += [_record_api(_api_checksum(api)), "commit;", "reset role;",
                "select pg_advisory_unlock(%d, %d);" % LOCK_KEY, ""]
        return "\n".join(out)
