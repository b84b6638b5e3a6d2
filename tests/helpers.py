"""Code the test modules share: naming, queries, the queue's clock, waiting on
a condition, MCP clients, audit trails. Test modules import from here, never
from one another; conftest.py holds the fixtures of the database itself."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import psycopg
import pytest
from psycopg.rows import dict_row

from scsql.core import roles, keys
from scsql.audit.telemetry import TOOL_CALL_FIELDS
from scsql.audit.signing import sign_row
from scsql.core.db import Agent
from scsql.api import Api

if TYPE_CHECKING:
    from .conftest import ScsqlDb, Server

T = TypeVar("T")

SESSION = "t" + secrets.token_hex(3)  # prefix of every database and agent of this run
# The tests run against a Citus cluster (.ci/citus.sh sets the workers).
ON_CITUS = bool(os.environ.get("SCSQL_TEST_CITUS_WORKERS"))
serial = itertools.count(1)  # numbers the databases, projects and agents of this run


# -- waiting on a condition ---------------------------------------------------

def wait_for(predicate: Callable[[], T], timeout: float = 30.0, every: float = 0.02,
             message: str = "condition not reached in time") -> T:
    """Poll ``predicate`` until it returns something true, and return that;
    fail with MESSAGE after ``timeout`` s. Every test that waits for a
    condition waits with this (no deadline loop of its own)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"{message} (after {timeout:g} s)")


def lock_waiters(db: ScsqlDb, table: str) -> int:
    """How many sessions wait for a lock on ``table``."""
    with psycopg.connect(db.admin, autocommit=True) as conn:
        return conn.execute(
            "select count(*) from pg_locks where relation = %s::regclass and not granted", (table,)
        ).fetchone()[0]


def statement_lock_waiters(db: ScsqlDb, like: str) -> int:
    """How many sessions whose statement is LIKE ``like`` wait for a lock held by
    another. On Citus the lock is on the worker that holds the row, and the
    waiting statement is the coordinator's (citus_lock_waits)."""
    with psycopg.connect(db.admin, autocommit=True) as conn:
        if db.server.workers:
            sql = "select count(distinct waiting_gpid) from citus_lock_waits where blocked_statement like %s"
        else:
            sql = ("select count(*) from pg_stat_activity where datname = current_database() "
                   "and wait_event_type = 'Lock' and query like %s and cardinality(pg_blocking_pids(pid)) > 0")
        return conn.execute(sql, (like,)).fetchone()[0]


def one(agent: Agent, query: str, *params: Any) -> dict[str, Any] | None:
    with agent.transaction() as conn:
        return conn.execute(query, params).fetchone()


def rows(agent: Agent, query: str, *params: Any) -> list[dict[str, Any]]:
    with agent.transaction() as conn:
        return conn.execute(query, params).fetchall()


def enqueue(orch: Agent, role: str = "developer", files: list[str] | None = None, **kw: Any) -> int:
    args = {"p_role": role, "p_exclusive_files": files or [], **{f"p_{k}": v for k, v in kw.items()}}
    casts = {"p_role": "text", "p_exclusive_files": "text[]", "p_payload": "jsonb", "p_priority": "integer",
             "p_acceptance_criteria": "text", "p_complexity": "integer", "p_run_after": "timestamptz",
             "p_max_attempts": "integer"}
    sql = ", ".join(f"{k} => %({k})s::{casts[k]}" for k in args)
    if "p_payload" in args:
        args["p_payload"] = psycopg.types.json.Jsonb(args["p_payload"])
    with orch.transaction() as conn:
        return conn.execute(f"select task_id from scsql.enqueue_task({sql})", args).fetchone()["task_id"]


def claim(agent: Agent, n: int = 1, lease: int = 300, task: int | None = None) -> list[dict[str, Any]]:
    """claim_task, or with TASK claim_task_by_id."""
    if task is not None:
        return rows(agent, "select * from scsql.claim_task_by_id(p_task => %s::bigint, p_lease_seconds => %s::integer)",
                    task, lease)
    return rows(agent, "select * from scsql.claim_task(p_n => %s::integer, p_lease_seconds => %s::integer)", n, lease)


def register(db: ScsqlDb, short: str, project: str, team_role: str = "developer") -> str:
    """Register an agent without opening a pool for it; returns its name."""
    name = f"{SESSION}_{short}_{next(serial)}"
    roles.create_agent(db.admin, db.keystore, name, project, team_role)
    return name


def login(db: ScsqlDb, name: str, autocommit: bool = True) -> psycopg.Connection:
    """A connection that logs in as the agent's own role."""
    return psycopg.connect(db.login(name), autocommit=autocommit, row_factory=dict_row)


def enqueue_against_uncommitted(db: ScsqlDb, first: Agent, second: Agent, held: str, wanted: str,
                                commit: bool) -> tuple[int, dict[str, Any]]:
    """FIRST enqueues a task owning HELD in an open transaction; SECOND enqueues
    one owning WANTED from a thread and is shown to wait on FIRST's lock; then
    FIRST commits (or rolls back). Returns FIRST's task id and what SECOND got
    (``task`` or ``err``)."""
    from scsql.core.errors import ScsqlError

    outcome: dict[str, Any] = {}
    with login(db, first.name, autocommit=False) as a:
        a_task = a.execute("select task_id from scsql.enqueue_task('developer', p_exclusive_files => array[%s])",
                           (held,)).fetchone()["task_id"]

        def b() -> None:
            try:
                outcome["task"] = enqueue(second, files=[wanted])
            except ScsqlError as exc:
                outcome["err"] = exc

        th = threading.Thread(target=b)
        th.start()
        wait_for(lambda: enqueues_waiting_on_a_lock(db) >= 1)
        assert enqueues_waiting_on_a_lock(db) == 1  # the second really waits on the first
        a.commit() if commit else a.rollback()
        th.join(30)
    return a_task, outcome


def enqueues_waiting_on_a_lock(db: ScsqlDb) -> int:
    return statement_lock_waiters(db, "%enqueue_task%")


def admin_rows(db: ScsqlDb, query: str, *params: Any) -> list[dict[str, Any]]:
    with db.connect() as conn:
        return conn.execute(query, params).fetchall()


# -- the queue's clock ----------------------------------------------------------
# Lease expiry and retry backoff are decided in SQL against clock_timestamp()
# and the timestamps stored on each task. Instead of sleeping until the clock
# reaches them, a test moves them into the past as the administrator.

def expire_leases(db: ScsqlDb) -> int:
    """Lets the lease of every claimed task run out now, as if its time had
    passed; returns how many leases it moved."""
    with db.connect() as conn:
        return conn.execute("update scsql.tasks set lease_expires_at = now() - interval '1 second' "
                            "where state = 'claimed'").rowcount


def end_backoff(db: ScsqlDb) -> int:
    """Lets the run_after of every queued task pass now (the end of a retry
    backoff, without waiting for it); returns how many tasks it moved."""
    with db.connect() as conn:
        return conn.execute("update scsql.tasks set run_after = now() - interval '1 second' "
                            "where state = 'queued'").rowcount


class Sampler(threading.Thread):
    """Samples pg_stat_activity until stopped: the most sessions of the
    database that were at once running a statement matching ``like``."""

    def __init__(self, db: ScsqlDb, like: str, every: float = 0.005):
        super().__init__(daemon=True)
        self.db, self.like, self.every = db, like, every
        self.peak = 0
        self.stop = threading.Event()

    def run(self) -> None:
        with psycopg.connect(self.db.admin, autocommit=True) as conn:
            while not self.stop.is_set():
                n = conn.execute(
                    "select count(*) from pg_stat_activity where datname = current_database() "
                    "and state = 'active' and query like %s and pid <> pg_backend_pid()", (self.like,)
                ).fetchone()[0]
                self.peak = max(self.peak, n)
                time.sleep(self.every)

    def __enter__(self) -> Sampler:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.join()


class InFlight:
    """Counts calls in flight at once across threads; ``peak`` is the most."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0

    def __enter__(self) -> InFlight:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        return self

    def __exit__(self, *exc: Any) -> None:
        with self.lock:
            self.now -= 1


# -- MCP servers, each its own process -------------------------------------------

def mcp_env(db: ScsqlDb) -> dict[str, str]:
    """The environment of an scsql process serving DB (no SCSQL_ variable of ours leaks in), with a
    data directory of its own: never the user's, whose worker would embed its queries (and so
    nothing would embed what the process indexes here)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCSQL_")}
    home = db.keystore.directory.parent / "process-home"
    home.mkdir(mode=0o700, exist_ok=True)
    env.update(SCSQL_DSN=db.admin, SCSQL_AGENT_DSN=db.app, SCSQL_KEYSTORE=str(db.keystore.directory),
               SCSQL_DATA_DIR=str(home))
    return env


def run_client(db: ScsqlDb, agent: str, script):
    """Runs ``await script(client)`` against an MCP server process of AGENT; returns its result."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "scsql", "mcp", "--agent", agent],
                                   env=mcp_env(db))

    async def main():
        async with Client(params, read_timeout_seconds=60) as client:
            return await script(client)

    return asyncio.run(main())


# -- audit trails, checkpoints and partitions -----------------------------------

@pytest.fixture
def trail(scsql_db):
    """Agents A and B of one project, each with a few chained rows."""
    project = scsql_db.project()
    a = scsql_db.agent("a", project)
    b = scsql_db.agent("b", project)
    api_a, api_b = Api(a), Api(b)
    for i in range(1, 6):
        api_a.call("record_tool_call", tool=f"tool{i}", input_preview=f"args {i}", output_preview=f"result {i}",
                   input_tokens=i, output_tokens=10 * i)
    api_a.call("record_outcome", kind="accepted", summary="done", task_ref="T-1", confidence=0.5)
    for i in range(3):
        api_b.call("record_tool_call", tool=f"b{i}")
    with scsql_db.connect() as conn:
        chains = {r["name"]: r["chain_id"] for r in conn.execute(
            "select a.name, c.chain_id from scsql.chains c join scsql.agents a using (agent_id)").fetchall()}
    return scsql_db, a, b, chains[a.name], chains[b.name]


def triggers_off(conn: psycopg.Connection) -> None:
    """User triggers off for the rest of CONN's transaction, as a superuser
    (an attacking DBA). On Citus the setting also reaches the workers, where
    the shards' triggers fire (citus.propagate_set_commands = 'local')."""
    conn.execute("set local citus.propagate_set_commands = 'local'")
    conn.execute("set local session_replication_role = replica")


def tamper(db: ScsqlDb, *statements: str) -> None:
    """Runs STATEMENTS as a superuser with user triggers off (an attacking
    DBA); DROP and ALTER with them on, as they need none off (on Citus an
    event trigger, which replica mode turns off too, drops a table's shards)."""
    with db.connect() as conn:
        for s in statements:
            ddl = s.lstrip().lower().startswith(("drop ", "alter "))
            if ddl:
                conn.execute("set local session_replication_role = origin")
            else:
                triggers_off(conn)
            conn.execute(s)


def moved(table: str, where: str, project: int) -> list[str]:
    """Statements for tamper(): the rows of TABLE matching WHERE moved to
    project PROJECT, deleted and inserted again (Citus refuses an UPDATE of
    the column it distributes rows by)."""
    return [f"create temp table moved on commit drop as select * from {table} where {where}",
            f"delete from {table} where {where}",
            f"update moved set project_id = {project}",
            f"insert into {table} overriding system value select * from moved",
            "drop table moved"]


def sql_verify(db: ScsqlDb, chain: int) -> dict:
    """scsql.verify_chain(CHAIN) as the auditor role."""
    with db.connect() as conn:
        conn.execute("set role scsql_auditor")
        return conn.execute("select * from scsql.verify_chain(%s)", (chain,)).fetchone()


# -- the two verifiers, behind one interface --------------------------------------
# The rules of gaps, segments, horizons and checkpoints are written twice: in
# Python (scsql verify) and in SQL (scsql.verify_chain). Tamper tests take the
# ``verifier`` fixture (conftest.py), which runs them against each, so the two
# cannot drift apart. Where one of them legitimately cannot check something,
# the test marks that combination (``sql_cannot``) and says why; a check of an
# exported checkpoint file inside a test about the database's own rows runs
# only where ``verifier.reads_files`` (scsql.verify_chain reads the database).


class Finding(NamedTuple):
    """One break as a verifier reports it."""

    chain: int
    seq: int
    kind: str
    detail: str


@dataclass
class Verdict:
    """What a verifier found in the whole database, normalised: the breaks by
    (chain, seq), the rows it checked and the chains it went through."""

    findings: list[Finding]
    rows: int
    chains: int

    @property
    def breaks(self) -> list[tuple[int, int, str]]:
        return [(f.chain, f.seq, f.kind) for f in self.findings]

    @property
    def ok(self) -> bool:
        return not self.findings


class VerifierCannot(Exception):
    """The verifier has no means to do what a test asks of it (checkpoint files,
    signatures): the test's mark for that verifier says why."""


class PythonVerifier:
    """scsql verify (scsql/verify.py): links, hashes, signatures, checkpoints of
    the database and of exported files, as the auditor."""

    name = "python"
    reads_files = True  # exported checkpoints (checkpoint_files)

    def run(self, db: ScsqlDb, *, checkpoint_files=(), from_checkpoint: int | None = None, full: bool = False,
            key_override: dict[str, bytes] | None = None, workers: int = 1) -> Verdict:
        from scsql.audit.verify import verify

        report = verify(db.admin, workers=workers, progress=False, checkpoint_files=checkpoint_files,
                        from_checkpoint=from_checkpoint, full=full, key_override=key_override)
        findings = [Finding(b.chain_id, b.seq, b.kind, b.detail) for b in report.breaks]
        return Verdict(findings, report.rows, report.chains)

    def breaks(self, db: ScsqlDb, **kw: Any) -> list[tuple[int, int, str]]:
        return self.run(db, **kw).breaks

    def exported(self, *paths: Any) -> dict[str, Any]:
        """The arguments that add exported checkpoint files to what the verifier reads."""
        return {"checkpoint_files": list(paths)}


class SqlVerifier:
    """scsql.verify_chain (sql/10_chain.sql) as the auditor, over every chain of
    scsql.chains and every chain a checkpoint of the database names; with a
    starting checkpoint, the chains it holds start from it, the others from
    their first row (as scsql verify does). It reads only the database: no
    checkpoint file, and no Ed25519 (PostgreSQL has no verifier of its own)."""

    name = "sql"
    reads_files = False

    def run(self, db: ScsqlDb, *, checkpoint_files=(), from_checkpoint: int | None = None, full: bool = False,
            key_override: dict[str, bytes] | None = None, workers: int = 1) -> Verdict:
        if list(checkpoint_files):
            raise VerifierCannot("scsql.verify_chain reads the checkpoints in the database, not exported files")
        if full or key_override:
            raise VerifierCannot("scsql.verify_chain checks no signature (no Ed25519 in PostgreSQL)")
        with db.connect() as conn:
            chains = [r["chain_id"] for r in conn.execute(
                "select chain_id from scsql.chains union select chain_id from scsql.checkpoint_heads order by 1")]
            starting = {r["chain_id"] for r in conn.execute(
                "select chain_id from scsql.checkpoint_heads where checkpoint_id = %s", (from_checkpoint,))}
        findings, rows = [], 0
        with db.connect() as conn:
            conn.execute("set role scsql_auditor")
            for chain in chains:
                r = conn.execute("select * from scsql.verify_chain(%s, %s)",
                                 (chain, from_checkpoint if chain in starting else None)).fetchone()
                rows += r["rows_checked"]
                if not r["ok"]:
                    findings.append(Finding(chain, r["broken_seq"], r["kind"], r["detail"]))
        with db.connect() as conn:  # the kinds it may report: the catalogue's, those both verifiers find
            kinds = {r["kind"] for r in conn.execute(
                "select kind from scsql.chain_break_kinds where found_by = 'both'")}
        assert {f.kind for f in findings} <= kinds, f"kinds outside scsql.chain_break_kinds: {findings}"
        findings.sort(key=lambda f: (f.chain, f.seq))
        return Verdict(findings, rows, len(chains))

    def breaks(self, db: ScsqlDb, **kw: Any) -> list[tuple[int, int, str]]:
        return self.run(db, **kw).breaks

    def exported(self, *paths: Any) -> dict[str, Any]:
        """None: it reads the database's checkpoints, of which the files are copies."""
        return {}


VERIFIERS = {"python": PythonVerifier(), "sql": SqlVerifier()}


def one_server_only(reason: str) -> pytest.MarkDecorator:
    """Skips a test on a Citus cluster, for REASON: what it stages or checks
    exists on one server only."""
    return pytest.mark.skipif(ON_CITUS, reason=f"one server only: {reason}")


def sql_cannot(reason: str, raises: type[BaseException] = AssertionError) -> pytest.MarkDecorator:
    """Runs a test against both verifiers, expecting the SQL one to fail it
    (strictly: should it ever pass, the mark must go) for REASON: an assertion
    it cannot meet, or a VerifierCannot for what it has no means to do."""
    return pytest.mark.parametrize("verifier", [
        "python",
        pytest.param("sql", marks=pytest.mark.xfail(strict=True, raises=raises,
                                                    reason=f"scsql.verify_chain: {reason}")),
    ], indirect=True)


def write_at(agent: Agent, at: dt.datetime, tool: str) -> dict:
    """A tool call recorded (and signed) as made AT."""
    args = sign_row(agent, "scsql.tool_calls", TOOL_CALL_FIELDS, {"tool": tool}, at=at)
    with agent.transaction() as conn:
        return conn.execute(
            "select * from scsql.record_tool_call(p_tool => %s, p_at => %s, p_key_id => %s, p_signature => %s)",
            (tool, at, args["key_id"], args["signature"])).fetchone()


def allow_old_rows(db: ScsqlDb) -> None:
    """Rows written 'days ago': an administrator widens the clock tolerance (test setup only)."""
    with db.connect(autocommit=True) as conn:
        conn.execute("select scsql.set_clock_skew('10 days')")


def old_day(db: ScsqlDb, days: int = 3) -> dt.datetime:
    """A time DAYS ago whose day partition of scsql.tool_calls exists, with
    rows that old allowed (test setup only)."""
    allow_old_rows(db)
    at = dt.datetime.now(dt.UTC) - dt.timedelta(days=days)
    with db.connect() as conn:
        conn.execute("set role scsql_owner")
        conn.execute("select scsql._create_day_partition('scsql.tool_calls', %s)", (at.date(),))
    return at


def backdate_keys(db: ScsqlDb) -> None:
    """Every agent key valid since 30 days ago, so rows written in the past verify."""
    with db.connect() as conn:
        conn.execute("update scsql.agent_keys set valid_from = now() - interval '30 days'")


def auditor_key(db: ScsqlDb):
    """A new auditor signing key, registered; returns the private key."""
    key = keys.generate()
    with db.connect() as conn:
        conn.execute("select scsql.register_auditor_key(%s)", (keys.public_bytes(key),))
    return key


def table_exists(db: ScsqlDb, table: str) -> bool:
    with db.connect() as conn:
        return conn.execute("select to_regclass(%s) is not null as ok", (table,)).fetchone()["ok"]


def partition_of(db: ScsqlDb, tool: str) -> str:
    """The partition of scsql.tool_calls holding the call of TOOL (on Citus
    tableoid names a shard on a worker: scsql._chain_part_expr names the
    coordinator's partition, as verification does)."""
    with db.connect() as conn:
        part = conn.execute("select scsql._chain_part_expr('scsql.tool_calls') as e").fetchone()["e"]
        oid = conn.execute(f"select ({part}) as o from scsql.tool_calls where tool = %s", (tool,)).fetchone()["o"]
        # Named here, not in the query above: on Citus that runs on a worker,
        # where the coordinator's oid names nothing and prints as a number.
        return conn.execute("select %s::regclass::text as p", (oid,)).fetchone()["p"]


# -- schemas -----------------------------------------------------------------------

def schema_dump(server: Server, conninfo: str) -> str:
    """pg_dump --schema-only of schemas scsql and scsql_caller, without volatile lines."""
    out = subprocess.run(
        [server.bin("pg_dump"), "--schema-only", "--no-owner", "--schema=scsql", "--schema=scsql_caller", "-d",
         conninfo],
        check=True, capture_output=True, text=True,
    ).stdout
    keep = [ln for ln in out.splitlines() if ln.strip() and not ln.startswith("--")
            and not ln.startswith("\\restrict") and not ln.startswith("\\unrestrict")]
    return "\n".join(keep)


def scsql(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SCSQL_")}
    return subprocess.run([sys.executable, "-m", "scsql", *args], env={**base, **(env or {})},
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def one_error_line(proc: subprocess.CompletedProcess, code: str) -> str:
    assert proc.returncode != 0, proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert code in lines[0]
    return lines[0]


# -- coordination scaffolding shared by the queue, broadcast and file tests ----------


def coordination_team(db: ScsqlDb) -> tuple[str, Agent, Agent, Agent, Agent]:
    """A new project with an orchestrator (orch), two developers (dev, dev2) and a qa agent:
    (project, orch, dev, dev2, qa)."""
    project = db.project()
    return (project, db.agent("orch", project, "orchestrator"), db.agent("dev", project, "developer"),
            db.agent("dev2", project, "developer"), db.agent("qa", project, "qa"))


def race_behind_lock(db: ScsqlDb, table: str, calls: list[Callable[[], None]],
                     waiting: Callable[[], int] | None = None, timeout: float = 30.0, join: float = 60.0) -> int:
    """Runs every call of ``calls`` in a thread of its own, all released at once while an
    administrator holds ``table`` (a trusted name) locked in exclusive mode, so they meet
    behind the lock; once ``waiting()`` (default: the sessions waiting for a lock on the
    table) counts all of them, releases the lock and joins the threads. Returns that count
    as read just before the release: the test asserts it to show the race happened."""
    count = waiting or (lambda: lock_waiters(db, table))
    ready = threading.Barrier(len(calls) + 1)

    def run(call: Callable[[], None]) -> None:
        ready.wait()
        call()

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    with psycopg.connect(db.admin) as holder:
        holder.execute(f"lock table {table} in exclusive mode")
        for t in threads:
            t.start()
        ready.wait()
        wait_for(lambda: count() >= len(calls), timeout=timeout)
        seen = count()
        holder.rollback()
        for t in threads:
            t.join(join)
    return seen


# -- scsql as separate processes on a data directory of its own ----------------------


def scsql_process(*args: str, env: dict[str, str]) -> subprocess.Popen:
    """``scsql ARGS`` started as a process of its own (like ``scsql()``, no SCSQL_ variable of
    this process inherited), its stdout and stderr piped as text."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("SCSQL_")}
    return subprocess.Popen([sys.executable, "-m", "scsql", *args], env={**base, **env}, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def scsql_up(tmp_path_factory, name: str):
    """The body of a module fixture: a data directory (under a temporary directory called NAME)
    set up by scsql up (server, schema, default agent and key), yielded as (data, env) with env
    naming it in SCSQL_DATA_DIR; its server is stopped when the fixture ends."""
    data = tmp_path_factory.mktemp(name) / "data"
    env = {"SCSQL_DATA_DIR": str(data)}
    up = scsql("up", env=env, timeout=300)
    assert up.returncode == 0, up.stderr
    yield data, env
    scsql("down", env=env)


# -- the search API as tests call it ---------------------------------------------------


def agent_query(agent, query: str, *args):
    """The rows of QUERY (with ARGS bound) run in one transaction of AGENT."""
    with agent.transaction() as conn:
        return conn.execute(query, args).fetchall()


def agent_search(agent, query: str, **kw):
    """scsql.search(QUERY) as AGENT, each keyword argument passed as the named parameter p_<name>."""
    extra = "".join(f", p_{k} => %s" for k in kw)
    return agent_query(agent, f"select * from scsql.search(%s{extra})", query, *kw.values())
