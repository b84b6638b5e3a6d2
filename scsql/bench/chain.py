"""``scsql bench chain``: chained, signed inserts against plain inserts into an
identical unchained table, on the same server in the same run, then
``scsql verify`` speed.

It works against any server the administrator's connection reaches: it
creates a scratch database (migrated like any scsql database) with its own
project, agents and plain table, and drops them at the end.

Both paths do one transaction per row, as an agent (``SET LOCAL ROLE``), from
N threads (one connection and one chain each), with one bound statement: the
chained path signs the payload with the agent's key and calls
``scsql.record_tool_call`` (validation, cost, the chain trigger); the plain
path inserts the same values into a copy of ``scsql.tool_calls`` (same
columns, constraints and partitioning, its primary key and time index; no
trigger and no (chain_id, seq) index, which exist for the chain). A third
phase makes the chained writes through the registry, as MCP tool calls do; a
fourth as the hook server captures them: the tool calls that arrived
together (``--capture-batch``, 8 by default), each signed, in one
transaction.
The phases alternate (plain, chained, registry, plain, ...) so drift on a
busy machine hits all alike.

``--breakdown`` then measures, in a second scratch database, where the
chained path's cost goes: the same writes as a direct INSERT into
scsql.tool_calls (no writing function), unsigned (random signature bytes),
with the generated trigger reduced to advancing the head without encoding
or hashing, and to no head update at all; each against plain inserts in the
same rounds. The reduced triggers break the chains, which is why they run in
a database of their own.

Verification is timed twice: in full (every hash and every signature: the
headline figure), and incrementally, as ``scsql verify`` runs by default
after ``scsql checkpoint`` verified and signed the heads and some more rows
were written (every hash, the signatures of the newer rows).
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable

import psycopg

from ..audit.telemetry import TOOL_CALLS
from ..core.db import Agent
from ..core.registry import Catalogue
from .scratch_db import ScratchDatabase, exit_on_sigterm

PLAIN_INSERT = """
insert into bench_plain (project_id, tool_call_id, at, session_id, tool, model, origin, input_tokens, output_tokens,
  latency_ms, status, input_preview, output_preview, cost_usd, author_id, key_id, chain_id, seq, prev_hash, row_hash,
  signature)
values (%s, %s, %s, null, %s, %s, 'model', %s, %s, %s, 'ok', %s, %s, null, %s, 1, %s, %s, %s, %s, %s)
"""


CHAINED_CALL = (
    "select * from scsql.record_tool_call(p_tool => %s, p_model => %s, p_input_tokens => %s, p_output_tokens => %s, "
    "p_latency_ms => %s, p_input_preview => %s, p_output_preview => %s, p_at => %s, p_key_id => %s, p_signature => %s)"
)


DIRECT_INSERT = """
insert into scsql.tool_calls (tool, model, origin, input_tokens, output_tokens, latency_ms, status, input_preview,
  output_preview, cost_usd, at, key_id, signature)
values (%s, %s, 'model', %s, %s, %s, 'ok', %s, %s, null, %s, %s, %s)
"""


def _chained_params(b: dict) -> tuple:
    return (b["tool"], b["model"], b["input_tokens"], b["output_tokens"], b["latency_ms"], b["input_preview"],
            b["output_preview"], b["at"], b["key_id"], b["signature"])


def _call_args(i: int) -> dict:
    return {"tool": "Read", "model": "claude-sonnet-4", "input_tokens": 120 + i % 50, "output_tokens": 900 + i % 300,
            "latency_ms": 40 + i % 20, "input_preview": f'{{"path": "src/module_{i % 97}.py"}}',
            "output_preview": f"def f{i}():\n    return {i}\n" * 4}


class Bench:
    def __init__(self, admin_conninfo: str, agents: int, api: Callable[[Agent], Catalogue]):
        self.db = ScratchDatabase(admin_conninfo, "chain")
        self.api = api  # an agent's functions with every subsystem's adapters (ctx.api)
        self.dbname, self.conninfo = self.db.name, self.db.admin
        self.n_agents = agents
        self.capture_batch = 8
        self.agents: list[Agent] = []
        self._plain_ids = iter(range(1, 10**12))

    def setup(self) -> None:
        self.db.create()
        with psycopg.connect(self.conninfo) as conn:
            # Same columns, partitioning and indexes as scsql.tool_calls; no chain.
            conn.execute("create table public.bench_plain (like scsql.tool_calls including defaults including constraints) "
                         "partition by range (at)")
            conn.execute("create table public.bench_plain_default partition of public.bench_plain default")
            conn.execute("alter table public.bench_plain add primary key (project_id, tool_call_id, at)")
            conn.execute("create index on public.bench_plain (project_id, at)")
            conn.execute("grant usage on schema public to scsql_agent")
            conn.execute("grant insert on public.bench_plain to scsql_agent")
            conn.execute("select scsql.set_model_price('claude-sonnet-4', 3, 15, now() - interval '1 day')")
        for i in range(self.n_agents):
            self.agents.append(self.db.open_agent(self.db.add_agent(f"{self.dbname}_{i}")))

    def cleanup(self) -> None:
        self.db.drop()

    # -- phases ---------------------------------------------------------------

    def _run(self, work, seconds: float) -> int:
        stop = time.monotonic() + seconds
        counts = [0] * len(self.agents)
        errors: list[BaseException] = []
        start = threading.Barrier(len(self.agents))

        def loop(k: int) -> None:
            try:
                step = work(k)
                start.wait()
                while time.monotonic() < stop:
                    step(counts[k])
                    counts[k] += 1
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                errors.append(exc)

        threads = [threading.Thread(target=loop, args=(k,)) for k in range(len(self.agents))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return sum(counts)

    def chained(self, seconds: float) -> int:
        """Signed (Ed25519, in Python) and chained (the trigger) writes, one bound statement each."""
        def work(k: int):
            agent = self.agents[k]

            def step(i: int) -> None:
                b = TOOL_CALLS.sign(agent, _call_args(i))
                with agent.transaction() as conn:
                    conn.execute(CHAINED_CALL, _chained_params(b))
            return step
        return self._run(work, seconds)

    def captured(self, seconds: float) -> int:
        """The hook server's path: the tool calls that arrived together (``batch`` of
        them), each signed, written in one transaction (group commit)."""
        batch = self.capture_batch

        def work(k: int):
            agent = self.agents[k]

            def step(i: int) -> None:
                signed = [TOOL_CALLS.sign(agent, _call_args(i * batch + j)) for j in range(batch)]
                with agent.transaction() as conn, conn.cursor() as cur:
                    cur.executemany(CHAINED_CALL, [_chained_params(b) for b in signed])
            return step
        return self._run(work, seconds) * batch

    def registry(self, seconds: float) -> int:
        """The same writes through the registry, as MCP tool calls are made."""
        def work(k: int):
            api = self.api(self.agents[k])

            def step(i: int) -> None:
                api.call("record_tool_call", **_call_args(i))
            return step
        return self._run(work, seconds)

    def plain(self, seconds: float) -> int:
        ids = self._plain_ids
        lock = threading.Lock()
        with self.agents[0].transaction() as conn:
            me = conn.execute("select project_id, agent_id from scsql.agents where name = %s",
                              (self.agents[0].name,)).fetchone()

        def work(k: int):
            agent = self.agents[k]

            def step(i: int) -> None:
                with lock:
                    tid = next(ids)
                a = _call_args(i)
                with agent.transaction() as conn:
                    conn.execute(PLAIN_INSERT, (me["project_id"], tid, dt.datetime.now(dt.UTC), a["tool"], a["model"],
                                                a["input_tokens"], a["output_tokens"], a["latency_ms"],
                                                a["input_preview"], a["output_preview"], me["agent_id"], k + 1, i + 1,
                                                secrets.token_bytes(32), secrets.token_bytes(32), secrets.token_bytes(64)))
            return step
        return self._run(work, seconds)

    def direct(self, seconds: float, signed: bool = True) -> int:
        """The chained writes as a direct INSERT into scsql.tool_calls (--breakdown)."""
        from ..audit.signing import key_id

        def work(k: int):
            agent = self.agents[k]
            kid = key_id(agent)

            def step(i: int) -> None:
                a = _call_args(i)
                if signed:
                    b = TOOL_CALLS.sign(agent, a)
                    at, sig = b["at"], b["signature"]
                else:
                    at, sig = dt.datetime.now(dt.UTC), secrets.token_bytes(64)
                with agent.transaction() as conn:
                    conn.execute(DIRECT_INSERT, (a["tool"], a["model"], a["input_tokens"], a["output_tokens"],
                                                 a["latency_ms"], a["input_preview"], a["output_preview"], at, kid, sig))
            return step
        return self._run(work, seconds)

    def allow_direct_inserts(self) -> None:
        """Let agents INSERT into scsql.tool_calls (this scratch database only)."""
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            conn.execute("grant insert on scsql.tool_calls to scsql_agent")
            conn.execute("grant usage on sequence scsql.tool_calls_id_seq to scsql_agent")
            conn.execute("create policy bench_insert on scsql.tool_calls for insert to scsql_agent with check (true)")

    def link_rows(self, link: str) -> None:
        """Replace the insert trigger of scsql.tool_calls with the generator's form ``link``
        (chain, head or none: see scsql._chain_trigger_sql)."""
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            conn.execute(conn.execute("select scsql._chain_trigger_sql('scsql.tool_calls', %s)", (link,)).fetchone()[0])

    def fill(self, rows: int) -> None:
        """Add chained, signed rows quickly (many per transaction) for the verification phase."""
        n = len(self.agents)

        def fill_one(agent: Agent, count: int) -> None:
            for start in range(0, count, 1000):
                batch = [TOOL_CALLS.sign(agent, _call_args(i))
                         for i in range(start, min(count, start + 1000))]
                with agent.transaction() as conn, conn.cursor() as cur:
                    cur.executemany(CHAINED_CALL, [_chained_params(b) for b in batch])

        # Every row asked for is written: the remainder goes to the first agents.
        threads = [threading.Thread(target=fill_one, args=(a, rows // n + (i < rows % n)))
                   for i, a in enumerate(self.agents)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def _checkpoint(bench: Bench) -> float:
    """Register an auditor key and record a (verifying) checkpoint; returns its seconds."""
    from ..core import keys
    from ..audit.checkpoints import record_checkpoints

    key = keys.generate()
    with psycopg.connect(bench.conninfo) as conn:
        conn.execute("select scsql.register_auditor_key(%s::bytea)", (keys.public_bytes(key),))
    t = time.perf_counter()
    record_checkpoints(bench.conninfo, key, workers=None, progress=False)
    return time.perf_counter() - t


def _alternate(phases: list[tuple[str, Callable[[], None] | None, Callable[[float], int]]], rounds: int,
               seconds: float) -> dict[str, tuple[int, float]]:
    """Run the phases (name, preparation or None, run) in turn, ROUNDS times, so
    drift on a busy machine hits all alike; returns rows and rows/s per name."""
    rows = {name: 0 for name, _, _ in phases}
    secs = dict.fromkeys(rows, 0.0)
    for _ in range(rounds):
        for name, prepare, phase in phases:
            if prepare is not None:
                prepare()
            t = time.perf_counter()
            rows[name] += phase(seconds)
            secs[name] += time.perf_counter() - t
    return {name: (rows[name], rows[name] / secs[name]) for name in rows}


def _breakdown(ctx, args) -> list[tuple[str, float]]:
    """Rates of the --breakdown variants against plain inserts, in a scratch database of their own."""
    bench = Bench(ctx.admin_conninfo(), args.agents, ctx.api)
    print(f"breakdown: scratch database {bench.dbname}", file=sys.stderr)
    try:
        bench.setup()
        bench.allow_direct_inserts()

        def trigger(link: str) -> Callable[[], None]:
            return lambda: bench.link_rows(link)

        def unsigned(seconds: float) -> int:
            return bench.direct(seconds, signed=False)

        rates = _alternate([
            ("plain", None, bench.plain),
            ("record_tool_call, signed (as above)", trigger("chain"), bench.chained),
            ("direct INSERT, signed", trigger("chain"), bench.direct),
            ("direct INSERT, unsigned", trigger("chain"), unsigned),
            ("  trigger: head advanced, no encoding or hash", trigger("head"), unsigned),
            ("  trigger: no head update", trigger("none"), unsigned),
        ], args.rounds, args.seconds)
        return [(name, rate) for name, (_, rate) in rates.items()]
    finally:
        bench.cleanup()


def run(ctx, args) -> int:
    
    with exit_on_sigterm():  # a terminated run still drops its scratch databases
        return _run(ctx, args)


def _run(ctx, args) -> int:
    from ..audit.verify import verify

    bench = Bench(ctx.admin_conninfo(), args.agents, ctx.api)
    bench.capture_batch = args.capture_batch
    print(f"scsql bench chain: {args.agents} agents, {args.seconds:g} s per phase x {args.rounds} rounds, "
          f"scratch database {bench.dbname}", file=sys.stderr)
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    try:
        bench.setup()
        with psycopg.connect(bench.conninfo) as conn:
            version = conn.execute("show server_version").fetchone()[0]
        measured = _alternate([(p, None, getattr(bench, p)) for p in ("plain", "chained", "registry", "captured")],
                              args.rounds, args.seconds)
        rows = {p: n for p, (n, _) in measured.items()}
        rate = {p: r for p, (_, r) in measured.items()}
        chained_rows = rows["chained"] + rows["registry"] + rows["captured"]
        extra = max(0, args.verify_rows - chained_rows)
        if extra:
            print(f"filling {extra} more chained rows for verification ...", file=sys.stderr)
            bench.fill(extra)
        full = verify(bench.conninfo, workers=args.workers, progress=None, full=True)
        checkpoint_s = _checkpoint(bench)
        new_rows = max(1, full.rows // 20)
        bench.fill(new_rows)  # written after the checkpoint: their signatures are checked
        incremental = verify(bench.conninfo, workers=args.workers, progress=None)
        load_after = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"server            PostgreSQL {version}; load average {load_before:.2f} before, {load_after:.2f} after")
        print(f"plain inserts     {rows['plain']:>9} rows  {rate['plain']:>10,.0f} rows/s")
        print(f"chained, signed   {rows['chained']:>9} rows  {rate['chained']:>10,.0f} rows/s")
        print(f"ratio             {rate['chained'] / rate['plain']:>26.2f}x  (goal >= 0.70x)")
        print(f"  through the registry (MCP path): {rate['registry']:,.0f} rows/s, {rate['registry'] / rate['plain']:.2f}x")
        print(f"captured, signed  {rows['captured']:>9} rows  {rate['captured']:>10,.0f} rows/s  "
              f"({rate['captured'] / rate['plain']:.2f}x; the hook server's group commit, {bench.capture_batch} "
              f"tool calls a transaction; goal >= 0.70x)")
        print(f"verify (full)     {full.rows:>9} rows  {full.rate:>10,.0f} rows/s  "
              f"({full.seconds:.2f} s, every hash and signature, {'ok' if full.ok else 'BROKEN'}; goal >= 50,000 rows/s)")
        print(f"  checkpoint (verifies, then signs the heads): {checkpoint_s:.2f} s")
        print(f"  incremental verify (the default): {incremental.rows} rows, {incremental.signatures} signatures "
              f"(rows after the checkpoint), {incremental.rate:,.0f} rows/s ({incremental.seconds:.2f} s, "
              f"{'ok' if incremental.ok else 'BROKEN'}); not the headline figure")
    finally:
        bench.cleanup()
    if args.breakdown:
        print("breakdown (a second scratch database; each rate against its own plain inserts):")
        rates = _breakdown(ctx, args)
        plain = rates[0][1]
        for name, rate in rates:
            print(f"  {name:<46} {rate:>8,.0f} rows/s  {rate / plain if plain else float('nan'):5.2f}x")
    return 0 if full.ok and incremental.ok else 1


def register(bsub) -> None:
    p = bsub.add_parser("chain", help="chained, signed inserts vs plain inserts (same server, same run); verify rows/s")
    p.add_argument("--agents", type=int, default=8, help="concurrent agents (default 8)")
    p.add_argument("--seconds", type=float, default=10.0, help="duration of each phase (default 10)")
    p.add_argument("--verify-rows", type=int, default=200000, help="rows to verify (filled up to this; default 200000)")
    p.add_argument("--workers", type=int, help="verification processes (default: one per core)")
    p.add_argument("--rounds", type=int, default=2, help="rounds of alternating phases (default 2)")
    p.add_argument("--capture-batch", type=int, default=8,
                   help="tool calls per transaction in the captured phase (hook events that arrive together)")
    p.add_argument("--breakdown", action="store_true",
                   help="also measure where the chained path's cost goes (direct INSERT, unsigned, reduced triggers)")
    p.set_defaults(bench_func=run)
