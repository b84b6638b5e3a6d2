"""``scsql bench citus --cluster DSN``: each call an agent makes, timed on a
Citus cluster (DSN: an administrator of its coordinator, in a database where
the workers are added) and on one server, with the same data loaded into a
scratch database on each, in the same run.

The data, the same on both, through the real write paths: several projects
(``--projects``), an orchestrator and a developer in each, ``--chunks``
chunks indexed with index_text (ten-section files from the synthetic corpus
of ``scsql bench search``, no vectors: search is BM25 only, SCSQL_EMBED=none
while it runs), 50 facts, 50
tool calls and 50 queued tasks a project; the first project's developer may
read the second project (grant_project_read), for search_global.

Timed as the first project's agents, through the registry (as MCP tool calls
are made, each its own transaction): remember, recall_context, search, pack,
record_tool_call (capture of a tool call, signed), enqueue_task, claim_task
then complete_task, verify_chain of the developer's tool-call chain,
search_global; and an administrator's metrics(). A ``select 1`` in an agent
transaction on each is the floor. Printed: p50/p95 per call on both, and the
ratio cluster / one server of each, and the commands the coordinator sent to
the workers for each call on the cluster (citus.log_remote_commands: round
trips to the shards, the deterministic part of the cost). Goals: at most 3x
for own-project calls, 10x for the calls over every shard.

The cluster's scratch database is made like .ci/citus.sh makes its own: a
database on every node (the nodes read from the DSN's pg_dist_node), citus
in it, the workers added, ``migrate --citus`` (``--shards`` sets
citus.shard_count first; without it, migrate --citus's choice). Both scratch databases are dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ..core import citus as citus_mod
from ..core.config import role_for
from ..core.db import Agent
from .scratch_db import ScratchDatabase, exit_on_sigterm, with_db
from .search import _TEXT, SECTIONS, VOCAB

OWN_GOAL, EVERY_SHARD_GOAL = 3.0, 10.0
EVERY_SHARD = ("search_global", "metrics (administrator)")


def _tqdm(**kw):
    from tqdm import tqdm

    return tqdm(disable=None, file=sys.stderr, **kw)


class ClusterScratch(ScratchDatabase):
    """A scratch database on every node of a Citus cluster, distributed by
    migrate --citus; dropped from every node."""

    def __init__(self, server_admin: str, label: str, shards: int | None = None, workers: list[str] | None = None):
        super().__init__(server_admin, label)
        self.shards = shards
        base = conninfo_to_dict(server_admin)
        self.coordinator = (base.get("host", "localhost"), int(base.get("port", 5432)))
        self.workers = workers or self._workers(server_admin)

    @staticmethod
    def _workers(server_admin: str) -> list[str]:
        """The workers of the coordinator, as its pg_dist_node names them, with SERVER_ADMIN's user."""
        with psycopg.connect(server_admin, autocommit=True) as conn:
            if conn.execute("select to_regclass('pg_catalog.pg_dist_node') is null").fetchone()[0]:
                raise SystemExit("--cluster: this database has no citus (name the database the workers were "
                                 "added to, e.g. dbname=scsql)")
            rows = conn.execute("select nodename, nodeport from pg_dist_node where groupid <> 0 "
                                "and noderole = 'primary' order by nodeport").fetchall()
        if not rows:
            raise SystemExit("--cluster: the coordinator has no workers (pg_dist_node)")
        base = conninfo_to_dict(server_admin)
        return [make_conninfo(**dict(base, host=h, port=str(p))) for h, p in rows]

    def nodes(self) -> list[str]:
        return [self.server_admin, *self.workers]

    def create(self, migrate: bool = True) -> ClusterScratch:
        for node in self.nodes():
            with psycopg.connect(node, autocommit=True) as conn:
                conn.execute(sql.SQL("create database {}").format(sql.Identifier(self.name)))
            with psycopg.connect(with_db(node, self.name), autocommit=True) as conn:
                conn.execute("create extension if not exists citus")
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute("select citus_set_coordinator_host(%s, %s::int)", self.coordinator)
            for w in self.workers:
                d = conninfo_to_dict(w)
                conn.execute("select citus_add_node(%s, %s::int)", (d.get("host", "localhost"), int(d.get("port", 5432))))
            if self.shards:
                conn.execute(sql.SQL("alter database {} set citus.shard_count = {}").format(
                    sql.Identifier(self.name), sql.Literal(self.shards)))
        print(f"scratch database {self.name} on {len(self.nodes())} nodes: migrate --citus", file=sys.stderr)
        t0 = time.perf_counter()
        citus_mod.migrate(self.admin)
        print(f"migrated in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        from ..core import roles

        roles.create_project(self.admin, self.project)
        return self

    def drop(self) -> None:
        for db in self._pools:
            db.close()
        self._pools.clear()
        if self.keep:
            print(f"scratch database {self.name}: kept", file=sys.stderr)
        else:
            for node in reversed(self.nodes()):
                with psycopg.connect(node, autocommit=True) as conn:
                    conn.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(self.name)))
                    for name in self.agents:
                        conn.execute(sql.SQL("drop role if exists {}").format(sql.Identifier(role_for(name))))
            print(f"scratch database {self.name}: dropped from every node", file=sys.stderr)
        self._keys.cleanup()


class Loaded:
    """One scratch database loaded with the benchmark's data, and the
    registry of its first project's developer and orchestrator."""

    def __init__(self, db: ScratchDatabase, api: Callable[[Agent], object]):
        self.db, self.api = db, api
        self.projects: list[str] = []
        self.dev = self.orch = None
        self._admin: psycopg.Connection | None = None

    def admin_conn(self) -> psycopg.Connection:
        """One administrator's connection, kept open (closed by close())."""
        if self._admin is None:
            self._admin = psycopg.connect(self.db.admin, autocommit=True)
        return self._admin

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def load(self, projects: int, chunks: int, per_project: int = 50) -> None:
        from ..core import roles

        db, token = self.db, self.db.name.rsplit("_", 1)[1]
        self.projects = [db.project] + [f"{db.project}-{i}" for i in range(1, projects)]
        for p in self.projects[1:]:
            roles.create_project(db.admin, p)
        names = []
        for i, p in enumerate(self.projects):
            for team_role in ("orchestrator", "developer"):
                name = f"bc_{token}_{team_role[:4]}{i}"
                roles.create_agent(db.admin, db.keystore, name, p, team_role)
                db.agents.append(name)
                names.append(name)
        with psycopg.connect(db.admin, autocommit=True) as conn:
            conn.execute("select scsql.grant_project_read(%s, %s)", (self.projects[1], names[1]))
        docs = max(1, chunks // SECTIONS // projects)
        bar = _tqdm(total=docs * projects * SECTIONS, desc=f"loading {db.name}", unit="chunk")
        for i in range(projects):
            orch, dev = (db.open_agent(n, max_size=1) for n in names[2 * i: 2 * i + 2])
            self._fill(orch, dev, docs, per_project, bar)
            if i == 0:
                self.orch, self.dev = self.api(orch), self.api(dev)
        bar.close()
        with psycopg.connect(db.admin, autocommit=True) as conn:
            conn.execute("vacuum analyze")

    @staticmethod
    def _fill(orch: Agent, dev: Agent, docs: int, n: int, bar) -> None:
        for start in range(1, docs + 1, 100):
            end = min(start + 99, docs)
            with dev.transaction() as conn:
                conn.execute(f"select count(*) from (select scsql.index_text('src/doc' || d || '.md', {_TEXT}, 'file') "
                             f"from generate_series(%s::int, %s::int) d) x", (start, end))
            bar.update((end - start + 1) * SECTIONS)
        with dev.transaction() as conn:
            for i in range(n):
                conn.execute("select 1 from scsql.remember(%s, %s, %s)",
                             (f"fact.{i:03}", f"fact {i}: the w{i} module keeps its ledger in verify{i}Chain", i % 5 + 1))
        with orch.transaction() as conn:
            conn.execute("select count(*) from generate_series(1, %s) i, "
                         "lateral scsql.enqueue_task('developer', jsonb_build_object('i', i)) t", (n,))


def _queries(n: int) -> list[str]:
    import random

    rng = random.Random(11)
    return [" ".join(f"w{int(pow(VOCAB, rng.random()))}" for _ in range(3)) for _ in range(n)]


def measure(fn: Callable[[int], object], n: int) -> tuple[float, float]:
    for i in range(min(n, 5)):  # warm up
        fn(i)
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


def calls(s: Loaded, qs: list[str]) -> list[tuple[str, Callable[[int], object]]]:
    """Each timed call, as a function of its iteration."""
    dev, orch = s.dev, s.orch

    def floor(i: int) -> None:
        with dev.agent.transaction() as conn:
            conn.execute("select 1").fetchall()

    def claim_complete(i: int) -> None:
        task = dev.call("claim_task")[0]
        dev.call("complete_task", task=task["task_id"], token=task["lease_token"])

    chain = dev.call("record_tool_call", tool="Read")["chain_id"]

    conn = s.admin_conn()

    def metrics(i: int) -> None:
        with conn.transaction():
            conn.execute("select * from scsql.metrics()").fetchall()

    def verify(i: int) -> None:
        with conn.transaction():
            conn.execute("set local role scsql_auditor")
            conn.execute("select * from scsql.verify_chain(%s)", (chain,)).fetchall()

    return [
        ("round trip (select 1)", floor),
        ("remember", lambda i: dev.call("remember", key=f"fact.{i % 50:03}", value=f"fact {i % 50}: revision {i}",
                                        importance=3)),
        ("recall_context", lambda i: dev.call("recall_context")),
        ("search (BM25, k=10)", lambda i: dev.call("search", query=qs[i], k=10)),
        ("pack (budget 1500)", lambda i: dev.call("pack", intent=qs[i], budget=1500)),
        ("record_tool_call (capture)", lambda i: dev.call(
            "record_tool_call", tool="Read", input_tokens=100, output_tokens=900,
            input_preview=f'{{"path": "src/doc{i}.md"}}', output_preview="x" * 200)),
        ("enqueue_task", lambda i: orch.call("enqueue_task", role="developer", payload={"i": i})),
        ("claim_task + complete_task", claim_complete),
        ("verify_chain (one chain, auditor)", verify),
        ("search_global", lambda i: dev.call("search_global", query=qs[i], k=10)),
        ("metrics (administrator)", metrics),
    ]


def _measure_all(s: Loaded, qs: list[str], n: int, bar) -> dict[str, tuple[float, float]]:
    out = {}
    for name, fn in calls(s, qs):
        out[name] = measure(fn, n)
        bar.update(1)
    return out


def remote_commands(s: Loaded, qs: list[str]) -> dict[str, int]:
    """The commands the coordinator sends to the workers for each call
    (citus.log_remote_commands, counted from its notices; BEGIN and COMMIT
    included), the most of three calls of each kind: each is a round trip to
    a worker, and what a call costs on a cluster beyond what it costs on one
    server. Deterministic, unlike the times."""
    sent: list[str] = []

    def notice(d) -> None:
        if (d.message_primary or "").startswith("issuing "):
            sent.append(d.message_primary)

    conns = [s.dev.agent.db, s.orch.agent.db]
    with conns[0].connection() as a, conns[1].connection() as b:
        handled = [a, b, s.admin_conn()]
    for conn in handled:
        conn.add_notice_handler(notice)
        conn.execute("set citus.log_remote_commands = on")
        if not conn.autocommit:
            conn.commit()
    out = {}
    try:
        for name, fn in calls(s, qs):
            counts = []
            for i in range(3):
                sent.clear()
                fn(i)
                counts.append(len(sent))
            out[name] = max(counts)
    finally:
        for conn in handled:
            conn.remove_notice_handler(notice)
            conn.execute("reset citus.log_remote_commands")
            if not conn.autocommit:
                conn.commit()
    return out


def report(one: dict, cluster: dict, n: int, sent: dict | None = None) -> list[str]:
    lines = [f"{n} calls each; times in ms from the client; ratio = cluster / one server; "
             "cmds = commands sent to the workers per call",
             f"{'call':<34} {'one p50':>8} {'one p95':>8} {'cit p50':>8} {'cit p95':>8} {'x p50':>6} {'x p95':>6} "
             f"{'cmds':>5} goal"]
    for name, (p50, p95) in one.items():
        c50, c95 = cluster[name]
        goal = EVERY_SHARD_GOAL if name in EVERY_SHARD else OWN_GOAL
        verdict = "" if name.startswith("round trip") else \
            f"<= {goal:.0f}x: {'met' if c95 / p95 <= goal else 'not met'}"
        cmds = (sent or {}).get(name, "-")
        lines.append(f"{name:<34} {p50:>8.2f} {p95:>8.2f} {c50:>8.2f} {c95:>8.2f} {c50 / p50:>5.1f}x {c95 / p95:>5.1f}x "
                     f"{cmds:>5} {verdict}")
    return lines


def run(ctx, args: argparse.Namespace) -> int:
    # BM25 only, and no write embeds inline, on both databases alike: with the
    # model loaded by the first database's searches, each remember on the
    # second would embed up to 16 of its queued chunks (seconds a call).
    saved = os.environ.get("SCSQL_EMBED")
    os.environ["SCSQL_EMBED"] = "none"
    try:
        return _run(ctx, args)
    finally:
        if saved is None:
            del os.environ["SCSQL_EMBED"]
        else:
            os.environ["SCSQL_EMBED"] = saved


def _run(ctx, args: argparse.Namespace) -> int:
    qs = _queries(args.calls + 5)
    dbs = [ScratchDatabase(ctx.admin_conninfo(), "citus1"), ClusterScratch(
        args.cluster, "citus", args.shards, [w for w in (args.workers or "").split(";") if w])]
    for db in dbs:
        db.keep = args.keep
    results, loaded, sent = [], [], {}
    with exit_on_sigterm():
        try:
            for db in dbs:
                db.create()
                s = Loaded(db, ctx.api)
                t0 = time.perf_counter()
                s.load(args.projects, args.chunks)
                print(f"{db.name}: loaded in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
                loaded.append(s)
            bar = _tqdm(total=2 * len(calls(loaded[0], qs)), desc="measuring", unit="call")
            results = [_measure_all(s, qs, args.calls, bar) for s in loaded]
            bar.close()
            sent = remote_commands(loaded[1], qs)
        finally:
            for s in loaded:
                s.close()
            for db in dbs:
                if db.name:
                    try:
                        db.drop()
                    except psycopg.Error as exc:
                        print(f"scratch database {db.name}: not dropped ({exc})", file=sys.stderr)
    print(f"{args.projects} projects, {args.chunks} chunks, 50 facts, tool calls and tasks a project; "
          f"cluster: coordinator and {len(dbs[1].workers)} workers")
    for line in report(*results, args.calls, sent):
        print(line)
    return 0


def register(bsub) -> None:
    p = bsub.add_parser("citus", help="p50/p95 of each agent call on a Citus cluster vs one server, same data")
    p.add_argument("--cluster", required=True, metavar="DSN",
                   help="an administrator of the cluster's coordinator, in a database the workers were added to")
    p.add_argument("--workers", metavar="DSN;DSN",
                   help="administrators of the workers (default: the nodes the DSN's pg_dist_node names)")
    p.add_argument("--chunks", type=int, default=2000, help="chunks over all projects (default 2000)")
    p.add_argument("--projects", type=int, default=4)
    p.add_argument("--calls", type=int, default=60, help="timed calls of each kind (default 60)")
    p.add_argument("--shards", type=int, default=None, help="citus.shard_count of the scratch database (default: migrate --citus's, 4 a node holding shards)")
    p.add_argument("--keep", action="store_true", help="keep both scratch databases (their names are printed)")
    p.set_defaults(bench_func=run)
