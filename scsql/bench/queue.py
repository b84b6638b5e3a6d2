"""``scsql bench queue``: the task queue against two peer libraries and a
baseline, measured in the same run on the same server.

* enqueue rate (one task per call and transaction, one client);
* claim+complete cycles per second with 1, 8 and 32 workers, each worker one
  connection making one call per task (``complete_and_claim``), each task
  leased and fenced;
* beside procrastinate and pgqueuer, PostgreSQL queue libraries from PyPI,
  installed in the scratch database and doing the same work at the same
  batch size (1) with as many workers, one connection each (install them
  with ``pip install 'scsql[bench]'``; a peer that is not installed is named
  and its columns show -), and beside ``pgbench -N`` TPS with as many
  clients (pgbench ships with the embedded server);
* each figure the median of ``--rounds`` measurements (default 3), the
  systems taking turns in a rotated order each round;
* with ``--history N``, the latency of a claim on a fresh queue and after N
  completed tasks went through the queue (loaded with set-based SQL).

On a terminal a bar counts the measurements (with an estimate of the time
left); in a pipe only the figures are printed. Everything runs in scratch
databases of its own (see scratch_db.py) that are dropped at the end (kept
with --keep).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from tqdm import tqdm

from ..core.config import role_for
from ..core.embedded import bin_path
from .scratch_db import ScratchDatabase

@dataclass
class Setup:
    db: ScratchDatabase
    conninfo: str  # administrator, scratch database
    orchestrator: str  # role names
    workers: list[str]
    project_id: int


def _setup(admin: str, n_worker_agents: int) -> Setup:
    db = ScratchDatabase(admin, "queue").create()
    orch = db.add_agent(f"{db.name}_orch", "orchestrator")
    workers = [db.add_agent(f"{db.name}_w{i}") for i in range(n_worker_agents)]
    with psycopg.connect(db.admin) as conn:
        pid = conn.execute("select project_id from scsql.projects where name = %s", (db.project,)).fetchone()[0]
    return Setup(db, db.admin, role_for(orch), [role_for(w) for w in workers], pid)


async def _agent_conn(conninfo: str, role: str) -> psycopg.AsyncConnection:
    conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
    await conn.execute(sql.SQL("set role {}").format(sql.Identifier(role)))
    return conn


def _reset(setup: Setup) -> None:
    with psycopg.connect(setup.conninfo, autocommit=True) as conn:
        conn.execute("delete from scsql.tasks")
        conn.execute("delete from scsql.tasks_archive")
        conn.execute("vacuum (analyze) scsql.tasks")


def _settle(admin: str) -> None:
    """Write out what setting up left dirty (pgbench -i, the prefill) before a
    measurement: otherwise the operating system flushes it while the
    measurement runs, and the WAL flushes of each commit wait behind it."""
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("checkpoint")
    os.sync()


def _prefill(setup: Setup, n: int, analyze: bool = True) -> None:
    """N tasks queued, and with ANALYZE the hot table analyzed with them in it
    (as autovacuum would soon have it; otherwise the statistics the reset
    left describe an empty table): each peer's prefill does the same."""
    with psycopg.connect(setup.conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("set role {}").format(sql.Identifier(setup.orchestrator)))
        conn.execute("select scsql.enqueue_task('developer', jsonb_build_object('i', i)) "
                     "from generate_series(1, %s) i", (n,))
        if analyze:
            conn.execute("reset role")
            conn.execute("analyze scsql.tasks")


# -- scsql ---------------------------------------------------------------------


async def scsql_enqueue_rate(setup: Setup, seconds: float) -> float:
    conn = await _agent_conn(setup.conninfo, setup.orchestrator)
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        await conn.execute("select task_id from scsql.enqueue_task('developer', %s::jsonb)", (f'{{"i": {n}}}',))
        n += 1
    elapsed = time.perf_counter() - start
    await conn.close()
    return n / elapsed


async def scsql_cycles(setup: Setup, workers: int, seconds: float) -> float:
    conns = [await _agent_conn(setup.conninfo, setup.workers[i % len(setup.workers)]) for i in range(workers)]
    done = [0] * workers
    stop = time.perf_counter() + seconds

    async def work(i: int) -> None:
        conn = conns[i]
        cur = await conn.execute("select task_id, lease_token from scsql.claim_task()")
        task = await cur.fetchone()
        while task is not None and time.perf_counter() < stop:
            cur = await conn.execute("select task_id, lease_token from scsql.complete_and_claim(%s, %s)", task)
            task = await cur.fetchone()
            done[i] += 1

    return await _run_workers(work, done, conns)


async def _run_workers(work, done: list[int], conns: list) -> float:
    """Runs WORK(i) for each of CONNS at once and closes them: tasks a second,
    from the counts the workers kept in DONE."""
    start = time.perf_counter()
    await asyncio.gather(*(work(i) for i in range(len(conns))))
    elapsed = time.perf_counter() - start
    for c in conns:
        await c.close()
    return sum(done) / elapsed


# -- peers: procrastinate and pgqueuer ---------------------------------------------


class Peer:
    """A queue library on the same server, in its own tables of the scratch
    database: installed, emptied, filled, and timed enqueueing one task a
    transaction and running claim+complete cycles of one task per worker
    connection."""

    name = ""

    async def install(self) -> None:
        raise NotImplementedError

    def reset(self) -> None:
        raise NotImplementedError

    async def prefill(self, n: int) -> None:
        raise NotImplementedError

    async def enqueue_rate(self, seconds: float) -> float:
        raise NotImplementedError

    async def cycles(self, workers: int, seconds: float) -> float:
        raise NotImplementedError


class Procrastinate(Peer):
    """procrastinate: the schema its package ships (``schema.sql``, as
    ``procrastinate schema --apply`` applies it) and its own queries
    (``procrastinate.sql.queries``), called with the arguments its job manager
    passes: ``defer_jobs`` with one job to enqueue; per task ``fetch_job`` (all
    queues, the worker's default) then ``finish_job`` as succeeded, the job
    kept (the worker's default ``delete_jobs``), each worker registered with
    ``register_worker``. One connection per worker, without the connection
    pool procrastinate's connector puts in front of each query."""

    name = "procrastinate"

    def __init__(self, conninfo: str):
        from procrastinate import sql as procrastinate_sql
        from procrastinate.schema import SchemaManager
        from procrastinate.types import JobToDefer

        self.conninfo = conninfo
        self.queries = procrastinate_sql.queries
        self.schema = SchemaManager.get_schema()
        self.JobToDefer = JobToDefer

    async def _conn(self) -> psycopg.AsyncConnection:
        return await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True, row_factory=dict_row)

    def _jobs(self, lo: int, n: int) -> dict:
        return {"jobs": [self.JobToDefer(queue_name="bench", task_name="bench", priority=0, lock=None,
                                         queueing_lock=None, args=Jsonb({"i": i}), scheduled_at=None)
                         for i in range(lo, lo + n)]}

    async def install(self) -> None:
        conn = await self._conn()
        await conn.execute(self.schema)  # no parameters: run as written, every statement
        await conn.close()

    def reset(self) -> None:
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            conn.execute("truncate procrastinate_events, procrastinate_periodic_defers, procrastinate_jobs, "
                         "procrastinate_workers")
            conn.execute("vacuum (analyze) procrastinate_jobs, procrastinate_events")

    async def prefill(self, n: int) -> None:
        conn = await self._conn()
        for lo in range(0, n, 5000):
            await conn.execute(self.queries["defer_jobs"], self._jobs(lo, min(5000, n - lo)))
        await conn.execute("analyze procrastinate_jobs")
        await conn.close()

    async def enqueue_rate(self, seconds: float) -> float:
        conn = await self._conn()
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            await (await conn.execute(self.queries["defer_jobs"], self._jobs(n, 1))).fetchall()
            n += 1
        elapsed = time.perf_counter() - start
        await conn.close()
        return n / elapsed

    async def cycles(self, workers: int, seconds: float) -> float:
        conns = [await self._conn() for _ in range(workers)]
        ids = [(await (await c.execute(self.queries["register_worker"])).fetchone())["worker_id"] for c in conns]
        done = [0] * workers
        stop = time.perf_counter() + seconds

        async def work(i: int) -> None:
            conn, fetch = conns[i], {"queues": None, "worker_id": ids[i]}
            while time.perf_counter() < stop:
                job = await (await conn.execute(self.queries["fetch_job"], fetch)).fetchone()
                if job["id"] is None:
                    return
                await conn.execute(self.queries["finish_job"],
                                   {"job_id": job["id"], "status": "succeeded", "delete_job": False})
                done[i] += 1

        return await _run_workers(work, done, conns)


class PgQueuer(Peer):
    """pgqueuer, through its own query class: ``enqueue`` one job, per task
    ``dequeue`` (batch size 1) then ``log_jobs`` as successful."""

    name = "pgqueuer"

    def __init__(self, conninfo: str):
        from pgqueuer.queries import EntrypointExecutionParameter, Queries

        self.conninfo = conninfo
        self.Queries = Queries
        self.Param = EntrypointExecutionParameter

    async def _queries(self):
        conn = await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True)
        return conn, self.Queries.from_psycopg_connection(conn)

    async def install(self) -> None:
        conn, q = await self._queries()
        await q.install()
        await conn.close()

    def reset(self) -> None:
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            conn.execute("truncate pgqueuer, pgqueuer_log")
            conn.execute("vacuum (analyze) pgqueuer")

    async def prefill(self, n: int) -> None:
        conn, q = await self._queries()
        for lo in range(0, n, 5000):
            k = min(5000, n - lo)
            await q.enqueue(["bench"] * k, [b"{}"] * k, [0] * k)
        await conn.execute("analyze pgqueuer")
        await conn.close()

    async def enqueue_rate(self, seconds: float) -> float:
        conn, q = await self._queries()
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            await q.enqueue("bench", f'{{"i": {n}}}'.encode())
            n += 1
        elapsed = time.perf_counter() - start
        await conn.close()
        return n / elapsed

    async def cycles(self, workers: int, seconds: float) -> float:
        pairs = [await self._queries() for _ in range(workers)]
        done = [0] * workers
        stop = time.perf_counter() + seconds
        entry = {"bench": self.Param(concurrency_limit=0)}

        async def work(i: int) -> None:
            _, q = pairs[i]
            manager = uuid.uuid4()
            while time.perf_counter() < stop:
                jobs = await q.dequeue(batch_size=1, entrypoints=entry, queue_manager_id=manager,
                                       global_concurrency_limit=None, heartbeat_timeout=timedelta(seconds=300))
                if not jobs:
                    return
                await q.log_jobs([(job, "successful", None) for job in jobs])
                done[i] += len(jobs)

        return await _run_workers(work, done, [conn for conn, _ in pairs])


PEERS = (Procrastinate, PgQueuer)


def _peers(conninfo: str) -> list[Peer]:
    """The peers that are installed, each installed in the scratch database;
    a missing one is named on stderr and its columns show -."""
    found = []
    for cls in PEERS:
        try:
            peer = cls(conninfo)
        except ImportError:
            print(f"scsql bench queue: {cls.name} is not installed (pip install 'scsql[bench]'); "
                  f"its columns show -", file=sys.stderr)
            continue
        asyncio.run(peer.install())
        found.append(peer)
    return found


# -- pgbench ---------------------------------------------------------------------


def _pgbench_bin() -> str:
    return bin_path("pgbench")


def pgbench_init(db: ScratchDatabase, scale: int) -> str:
    subprocess.run([_pgbench_bin(), "-i", "-q", "-s", str(scale), db.create(migrate=False).admin],
                   check=True, capture_output=True, text=True)
    return db.admin


def pgbench_tps(conninfo: str, clients: int, seconds: float) -> float:
    out = subprocess.run(
        [_pgbench_bin(), "-N", "-n", "-c", str(clients), "-j", str(min(clients, 4)), "-T", str(max(int(seconds), 1)),
         conninfo], check=True, capture_output=True, text=True).stdout
    m = re.search(r"tps = ([0-9.]+)", out)
    if not m:
        raise RuntimeError(f"cannot read pgbench output: {out}")
    return float(m.group(1))


# -- history: claim latency after many completed tasks -----------------------------


def _claim_latency_ms(setup: Setup, samples: int) -> float:
    """Median of claim_task round trips on a queue of ``samples`` tasks, one worker."""
    _prefill(setup, samples, analyze=False)
    times = []
    with psycopg.connect(setup.conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("set role {}").format(sql.Identifier(setup.workers[0])))
        for _ in range(samples):
            t0 = time.perf_counter()
            row = conn.execute("select task_id, lease_token from scsql.claim_task()").fetchone()
            times.append(time.perf_counter() - t0)
            conn.execute("select scsql.complete_task(%s, %s)", row)
    return statistics.median(times) * 1000


def _load_history(setup: Setup, total: int, batch: int = 100_000) -> None:
    """Push ``total`` tasks through the hot table, set-based: enqueue, claim,
    complete, ``batch`` at a time, as busy workers would have."""
    with psycopg.connect(setup.conninfo, autocommit=True) as conn:
        ids = conn.execute("select agent_id from scsql.agents where role_name = any(%s) order by agent_id",
                           ([setup.orchestrator, setup.workers[0]],)).fetchall()
        orch_id, worker_id = ids[0][0], ids[1][0]
        bar = tqdm(total=total, unit="task", desc="completed tasks", disable=None)
        loaded = 0
        while loaded < total:
            k = min(batch, total - loaded)
            with conn.transaction():
                conn.execute("insert into scsql.tasks (project_id, team_role, payload, created_by) "
                             "select %s, 'developer', jsonb_build_object('i', i), %s from generate_series(1, %s) i",
                             (setup.project_id, orch_id, k))
            with conn.transaction():
                conn.execute("update scsql.tasks set state = 'claimed', fence = fence + 1, attempts = attempts + 1, "
                             "claimed_by = %s, claimed_at = now(), lease_seconds = 300, "
                             "lease_expires_at = now() + interval '5 minutes' where state = 'queued'", (worker_id,))
            with conn.transaction():
                conn.execute("""
                    with d as (delete from scsql.tasks where state = 'claimed' returning *)
                    insert into scsql.tasks_archive (project_id, task_id, team_role, state, priority, payload,
                      acceptance_criteria, complexity, exclusive_files, attempts, max_attempts, fence, claimed_by,
                      result, created_by, created_at, finished_by)
                    select project_id, task_id, team_role, 'done', priority, payload, acceptance_criteria, complexity,
                           exclusive_files, attempts, max_attempts, fence, claimed_by, '{}'::jsonb, created_by,
                           created_at, claimed_by
                    from d""")
            loaded += k
            bar.update(k)
        bar.close()


def _await_autovacuum(setup: Setup, timeout: float) -> float | None:
    """Wait until autovacuum (not this program) has vacuumed the hot table
    since the load: the queue's autovacuum settings are part of what keeps
    claims fast. Returns the seconds waited, None on timeout."""
    start = time.monotonic()
    with psycopg.connect(setup.conninfo, autocommit=True) as conn:
        loaded_at = conn.execute("select now()").fetchone()[0]
        with tqdm(desc="waiting for autovacuum of scsql.tasks", unit="s", disable=None,
                  bar_format="{desc}: {elapsed}") as bar:
            while time.monotonic() - start < timeout:
                last = conn.execute("select last_autovacuum from pg_stat_user_tables "
                                    "where relid = 'scsql.tasks'::regclass").fetchone()[0]
                if last is not None and last >= loaded_at:
                    return time.monotonic() - start
                time.sleep(1)
                bar.update(1)
    return None


# -- the command -------------------------------------------------------------------


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a and b else "-"


def _rate(x: float | None) -> str:
    return f"{x:.0f}" if x else "-"


SYSTEMS = ("scsql", "procrastinate", "pgqueuer", "pgbench -N")


@dataclass
class Bench:
    """One run's systems and what it prints: the enqueue rates and a row of
    cycle rates per worker count, each figure the median of --rounds
    measurements (see _medians); the bar counts the measurements."""

    setup: Setup
    admin: str
    peers: dict[str, Peer]
    pgbench: str | None
    args: argparse.Namespace
    out: object
    bar: tqdm | None = None

    def systems(self) -> list[str]:
        return [s for s in SYSTEMS if s == "scsql" or s in self.peers or (s == "pgbench -N" and self.pgbench)]

    def measurements(self) -> int:
        return (1 + len(self.peers) + len(self.systems()) * len(self.args.counts)) * self.args.rounds

    def _step(self, what: str) -> None:
        self.bar.set_description(what)

    def _medians(self, systems: list[str], measure) -> dict[str, float]:
        """The median of --rounds calls of MEASURE(system) per system, the
        systems in a rotated order each round."""
        runs: dict[str, list[float]] = {s: [] for s in systems}
        for r in range(self.args.rounds):
            for name in systems[r % len(systems):] + systems[:r % len(systems)]:
                runs[name].append(measure(name))
                self.bar.update()
        return {s: statistics.median(v) for s, v in runs.items()}

    def enqueue_once(self, name: str) -> float:
        self._step(f"enqueue, {name}")
        if name == "scsql":
            _reset(self.setup)
            _settle(self.admin)
            return asyncio.run(scsql_enqueue_rate(self.setup, self.args.seconds))
        self.peers[name].reset()
        _settle(self.admin)
        return asyncio.run(self.peers[name].enqueue_rate(self.args.seconds))

    def enqueue(self) -> str:
        rates = self._medians(["scsql", *self.peers], self.enqueue_once)
        line = "enqueue, 1 client, 1 task/transaction: " + "   ".join(
            f"{n} {_rate(rates.get(n)) + '/s' if rates.get(n) else '-':>8}" for n in ("scsql", "procrastinate", "pgqueuer"))
        return line + "   " + "   ".join(
            f"scsql/{n} {_ratio(rates['scsql'], rates.get(n))}" for n in ("procrastinate", "pgqueuer"))

    def cycles_once(self, name: str, workers: int) -> float:
        """One measurement of NAME at WORKERS workers, on a queue filled anew."""
        seconds = self.args.seconds
        prefill = max(int(self.args.tasks_per_second_guess * seconds), 2000)
        self._step(f"{name}, {workers} worker(s)")
        if name == "pgbench -N":
            _settle(self.admin)
            return pgbench_tps(self.pgbench, workers, seconds)
        if name == "scsql":
            _reset(self.setup)
            _prefill(self.setup, prefill)
            _settle(self.admin)
            return asyncio.run(scsql_cycles(self.setup, workers, seconds))
        peer = self.peers[name]
        peer.reset()
        asyncio.run(peer.prefill(prefill))
        _settle(self.admin)
        return asyncio.run(peer.cycles(workers, seconds))

    def row(self, workers: int) -> str:
        m = self._medians(self.systems(), lambda name: self.cycles_once(name, workers))
        ours = m["scsql"]
        return (f"{workers:>7}  " + "  ".join(f"{_rate(m.get(s)):>{max(len(s), 8)}}" for s in SYSTEMS)
                + "  " + "  ".join(f"{_ratio(ours, m.get(s)):>{len('scsql/' + s.split()[0])}}" for s in SYSTEMS[1:]))

    def header(self) -> str:
        return (f"{'workers':>7}  " + "  ".join(f"{s:>{max(len(s), 8)}}" for s in SYSTEMS)
                + "  " + "  ".join("scsql/" + s.split()[0] for s in SYSTEMS[1:]))

    def print(self, line: str = "") -> None:
        tqdm.write(line, file=self.out)
        self.out.flush()


def _history(setup: Setup, args: argparse.Namespace, out) -> None:
    """--history N: claim latency on a fresh queue and after N completed tasks."""
    print(file=out)
    _reset(setup)
    fresh = _claim_latency_ms(setup, args.latency_samples)
    _reset(setup)
    _load_history(setup, args.history)
    waited = _await_autovacuum(setup, args.autovacuum_wait)
    after = _claim_latency_ms(setup, args.latency_samples)
    with psycopg.connect(setup.conninfo) as conn:
        st = conn.execute("select n_live_tup, n_dead_tup, autovacuum_count from pg_stat_user_tables "
                          "where relid = 'scsql.tasks'::regclass").fetchone()
    print(f"claim latency (median of {args.latency_samples}): fresh queue {fresh:.3f} ms, "
          f"after {args.history:,} completed tasks {after:.3f} ms, ratio {after / fresh:.2f}x "
          f"(goal <= 1.5x); hot table: {st[0]} live, {st[1]} dead rows, autovacuumed {st[2]} time(s); "
          + (f"autovacuum cleaned it {waited:.0f} s after the load" if waited is not None
             else f"autovacuum had not run {args.autovacuum_wait:.0f} s after the load"),
          file=out)


def _measure(bench: Bench) -> None:
    args = bench.args
    bench.print(f"server: {bench.admin.split('dbname=')[0].strip()}  duration per measurement: {args.seconds:g} s, "
                f"median of {args.rounds} round(s)")
    bench.print("(numbers from one run on one server; compare the ratios, not the absolute values)")
    bench.print()
    with tqdm(total=bench.measurements(), unit="measurement", disable=None, leave=False) as bench.bar:
        bench.print(bench.enqueue())
        bench.print()
        bench.print("claim+complete cycles/s, one task a cycle, each worker its own connection "
                    "(pgbench -N: transactions/s with as many clients)")
        bench.print(bench.header())
        for w in args.counts:
            bench.print(bench.row(w))


def run(ctx, args: argparse.Namespace) -> int:
    admin = ctx.admin_conninfo()
    if ctx.settings.embedded and not ctx.server.running:
        ctx.server.start()
    args.counts = [int(x) for x in args.workers.split(",")]
    setup = None
    pgbench_db = ScratchDatabase(admin, "pgbench")
    try:
        print("scsql bench queue: setting up scratch databases", file=sys.stderr)
        setup = _setup(admin, n_worker_agents=8)
        peers = {} if args.no_peer else {p.name: p for p in _peers(setup.conninfo)}
        pgb = None if args.no_pgbench else pgbench_init(pgbench_db, args.pgbench_scale)
        _measure(Bench(setup, admin, peers, pgb, args, sys.stdout))
        if args.history:
            _history(setup, args, sys.stdout)
    finally:
        for db in (pgbench_db, setup.db if setup else None):
            if db is not None:
                db.keep = args.keep
                if db.keep:
                    print(f"scsql bench queue: kept scratch database {db.name}", file=sys.stderr)
                db.drop()
    return 0


def _at_least_one(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return n


def register(bsub) -> None:
    p = bsub.add_parser("queue", help="task queue: enqueue and claim+complete rates against procrastinate, pgqueuer and pgbench -N",
                        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", default="1,8,32", help="comma-separated worker counts (default 1,8,32)")
    p.add_argument("--seconds", type=float, default=5.0, help="duration of each measurement (default 5)")
    p.add_argument("--history", type=int, metavar="N", nargs="?", const=1_000_000, default=0,
                   help="also compare claim latency after N completed tasks (default N: 1,000,000)")
    p.add_argument("--latency-samples", type=int, default=1000)
    p.add_argument("--autovacuum-wait", type=float, default=300.0,
                   help="seconds to wait for autovacuum to clean the hot table after the history load")
    p.add_argument("--pgbench-scale", type=int, default=4)
    p.add_argument("--tasks-per-second-guess", type=int, default=6000,
                   help="tasks queued before each run: this times --seconds (the queue must not run dry)")
    p.add_argument("--rounds", type=_at_least_one, default=3,
                   help="measurements of each system at each worker count, taking turns; the median is printed "
                        "(default 3: on a shared machine one 5-second window can swing a ratio by a third)")
    p.add_argument("--no-peer", action="store_true", help="skip the peer libraries (procrastinate, pgqueuer)")
    p.add_argument("--no-pgbench", action="store_true", help="skip the pgbench comparison")
    p.add_argument("--keep", action="store_true", help="keep the scratch databases")
    p.set_defaults(bench_func=run)
