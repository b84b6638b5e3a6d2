"""``scsql bench queue``: the task queue against two baselines measured in the
same run on the same server.

* enqueue rate (one task per call and transaction, one client);
* claim+complete cycles per second with 1, 8 and 32 workers, each worker one
  connection making one call per task (``complete_and_claim``);
* beside ``pgbench -N`` TPS with as many clients (pgbench ships with the
  embedded server), and beside pgqueuer, a PostgreSQL queue library from
  PyPI, doing the same work at the same batch size (1) on the same server
  (install it with ``pip install scsql[bench]``);
* with ``--history N``, the latency of a claim on a fresh queue and after N
  completed tasks went through the queue (loaded with set-based SQL).

Everything runs in scratch databases of its own (see scratch_db.py)
that are dropped at the end (kept with --keep).
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


def _prefill(setup: Setup, n: int) -> None:
    with psycopg.connect(setup.conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("set role {}").format(sql.Identifier(setup.orchestrator)))
        conn.execute("select scsql.enqueue_task('developer', jsonb_build_object('i', i)) "
                     "from generate_series(1, %s) i", (n,))


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

    start = time.perf_counter()
    await asyncio.gather(*(work(i) for i in range(workers)))
    elapsed = time.perf_counter() - start
    for c in conns:
        await c.close()
    return sum(done) / elapsed


# -- pgqueuer --------------------------------------------------------------------


class Peer:
    """pgqueuer on the same server, in its own tables of the scratch database."""

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

        start = time.perf_counter()
        await asyncio.gather(*(work(i) for i in range(workers)))
        elapsed = time.perf_counter() - start
        for conn, _ in pairs:
            await conn.close()
        return sum(done) / elapsed


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
    _prefill(setup, samples)
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


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


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


def run(ctx, args: argparse.Namespace) -> int:
    admin = ctx.admin_conninfo()
    if ctx.settings.embedded and not ctx.server.running:
        ctx.server.start()
    counts = [int(x) for x in args.workers.split(",")]
    seconds = args.seconds
    setup = None
    pgbench_db = ScratchDatabase(admin, "pgbench")
    out = sys.stdout
    try:
        print("scsql bench queue: setting up scratch databases", file=sys.stderr)
        setup = _setup(admin, n_worker_agents=8)
        peer = None
        if not args.no_peer:
            try:
                peer = Peer(setup.conninfo)
            except ImportError:
                print("scsql bench queue: pgqueuer is not installed (pip install 'scsql[bench]'); "
                      "skipping the peer", file=sys.stderr)
            if peer is not None:
                asyncio.run(peer.install())
        pgb = None if args.no_pgbench else pgbench_init(pgbench_db, args.pgbench_scale)

        print(f"server: {admin.split('dbname=')[0].strip()}  duration per measurement: {seconds:.0f} s", file=out)
        print("(numbers from one run on one server; compare the ratios, not the absolute values)", file=out)
        print(file=out)
        _reset(setup)
        _settle(admin)
        enq = asyncio.run(scsql_enqueue_rate(setup, seconds))
        line = f"enqueue, 1 client, 1 task/transaction: scsql {enq:8.0f}/s"
        if peer is not None:
            peer.reset()
            penq = asyncio.run(peer.enqueue_rate(seconds))
            line += f"   {peer.name} {penq:8.0f}/s   scsql/{peer.name} {_ratio(enq, penq)}"
        print(line, file=out)
        print(file=out)
        header = f"{'workers':>7}  {'scsql cycles/s':>14}  {'pgbench -N tps':>14}  {'scsql/pgbench':>13}"
        if peer is not None:
            header += f"  {peer.name + ' cycles/s':>17}  {'scsql/' + peer.name:>14}"
        print(header, file=out)
        for w in tqdm(counts, desc="worker counts", disable=None, leave=False):
            prefill = max(int(args.tasks_per_second_guess * seconds), 2000)
            _reset(setup)
            _prefill(setup, prefill)
            _settle(admin)
            ours = asyncio.run(scsql_cycles(setup, w, seconds))
            tps = pgbench_tps(pgb, w, seconds) if pgb else 0.0
            line = f"{w:>7}  {ours:>14.0f}  {tps:>14.0f}  {_ratio(ours, tps):>13}"
            if peer is not None:
                peer.reset()
                asyncio.run(peer.prefill(prefill))
                _settle(admin)
                theirs = asyncio.run(peer.cycles(w, seconds))
                line += f"  {theirs:>17.0f}  {_ratio(ours, theirs):>14}"
            print(line, file=out)
            out.flush()
        if args.history:
            _history(setup, args, out)
    finally:
        for db in (pgbench_db, setup.db if setup else None):
            if db is not None:
                db.keep = args.keep
                if db.keep:
                    print(f"scsql bench queue: kept scratch database {db.name}", file=sys.stderr)
                db.drop()
    return 0


def register(bsub) -> None:
    p = bsub.add_parser("queue", help="task queue: enqueue and claim+complete rates against pgbench -N and pgqueuer",
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
    p.add_argument("--no-peer", action="store_true", help="skip the pgqueuer comparison")
    p.add_argument("--no-pgbench", action="store_true", help="skip the pgbench comparison")
    p.add_argument("--keep", action="store_true", help="keep the scratch databases")
    p.set_defaults(bench_func=run)
