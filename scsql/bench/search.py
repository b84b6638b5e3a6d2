"""``scsql bench search``: latency of hybrid search (k = 10), of
recall_context and of remember over a knowledge base of 100,000 chunks, 250
facts and 5,000 rewrites of them (memory history).

The corpus is synthetic and generated set-based in SQL, through the real
write path (the bulk path: kb_staging and index_staged, 500 files a
transaction, or index_text with --per-call; then embed_claim and
embed_store, 1,000 vectors a call, as a worker does, with the HNSW index
dropped and built again by its owner once the vectors are in, which gives
the same index in a fraction of the time): Markdown files of ten sections,
each section about 60 words drawn from a 20,000-word vocabulary with a
Zipf-like (log-uniform) distribution, with camelCase/snake_case identifiers
mixed in; 384-dimensional unit vectors around 200 cluster centres. Query
texts are three words from the same distribution, query embeddings are
precomputed points near a centre. Working memory is full (250 facts) and
there are 20 session summaries; search returns facts and summaries beside
chunks. The facts are then rewritten 5,000 times through remember, so
working memory has a history.

A second project's agent, granted read access to the first project, runs
search_global over both: the path where row-level security shows it only
the first project's published knowledge (files, URLs, notes).

Printed against baselines measured in the same run on the same server: a
round trip that does nothing (``select 1`` in an agent transaction), and
PostgreSQL full text search (GIN-indexed tsvector, ts_rank, OR of the
terms) over the same chunks. Everything lives in a scratch database that is
dropped at the end (kept with --keep; --database NAME measures again on one
loaded before and kept, without loading).
"""

from __future__ import annotations

import argparse
import json
import random
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
from psycopg import sql

from ..core import bulk, roles
from ..core.config import role_for
from ..core.db import Agent, Database
from ..memory.embed import DEFAULT_MODEL
from ..core.keys import Keystore
from .scratch_db import Scratch, scratch

SECTIONS = 10
WORDS = 60
VOCAB = 20000
CLUSTERS = 200

# One synthetic Markdown file per d: SECTIONS headed sections of WORDS words.
_TEXT = f"""
  (select string_agg('# section ' || d || '.' || s || E'\\n' || (
     select string_agg(case when random() < 0.03
                            then 'verify' || (floor(random() * 300))::int || 'Chain_' || (floor(random() * 50))::int
                            else 'w' || floor(exp(random() * ln({VOCAB})))::int end, ' ')
     from generate_series(1, {WORDS} + 0 * s + 0 * d)), E'\\n\\n')
   from generate_series(1, {SECTIONS}) s)"""

# A deterministic pseudo-random centre per cluster, and points around it.
_CENTRE = "(select array_agg(sin(({c}) * 12.9898 + i * 78.233) * 43758.5453 - floor(sin(({c}) * 12.9898 + i * 78.233) * 43758.5453) - 0.5 order by i) from generate_series(1, 384) i)::vector"
_POINT = ("l2_normalize(" + _CENTRE + " + (select array_agg((random() - 0.5) * {spread} order by i) "
          "from generate_series(1, 384 + 0 * ({c})) i)::vector)")


def _tqdm(**kw):
    from tqdm import tqdm

    return tqdm(disable=None, file=sys.stderr, **kw)


def load(s: Scratch, chunks: int, rewrites: int | None = None, per_call: bool = False) -> None:
    """Index CHUNKS chunks, fill working memory, write 20 summaries and REWRITES (default HISTORY) fact rewrites."""
    index_docs(s, chunks // SECTIONS, per_call=per_call)
    finish_load(s, rewrites)


def finish_load(s: Scratch, rewrites: int | None = None) -> None:
    """What load does after indexing: the vectors, working memory, summaries
    and history, and fresh statistics (also to finish a load that stopped
    while it stored the vectors: --database resumes it)."""
    store_vectors(s)
    t0 = time.perf_counter()
    with s.agent.transaction() as conn:
        cap = conn.execute("select capacity from scsql.memory_status()").fetchone()["capacity"]
        for i in range(cap):
            conn.execute("select 1 from scsql.remember(%s, %s, %s)",
                         (f"fact.{i:03}", (f"fact {i}: the w{i} module uses verify{i}Chain_{i % 50} for its ledger "
                                           f"and must keep its invariant number {i}"), i % 5 + 1))
        for i in range(20):  # their decisions and open tasks become decisions and open loops
            conn.execute("select 1 from scsql.summarize_session(%s)", (json.dumps({
                "done": [f"worked on w{i} and w{i + 1}"], "decisions": [f"keep w{i + 2}"],
                "files": [f"src/doc{i}.md"], "open_tasks": [f"check w{i + 3}"]}),))
    history(s, cap, HISTORY if rewrites is None else rewrites)
    print(f"remembered {cap} facts, 20 summaries, {HISTORY if rewrites is None else rewrites} rewrites "
          f"in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    with s.connect() as conn:  # fresh statistics for the planner, as autovacuum would give
        conn.autocommit = True
        conn.execute("vacuum analyze")


def index_docs(s: Scratch, docs: int, batch: int = 500, per_call: bool = False) -> float:
    """DOCS synthetic files, BATCH to a transaction, through the bulk path
    (inserted into scsql.kb_staging, then scsql.index_staged), or with
    PER_CALL through index_text, one call a file (the scratch database need
    not survive a crash: commits do not wait for the disk). Returns chunks/s."""
    t0 = time.perf_counter()
    bar = _tqdm(total=docs * SECTIONS, desc="indexing", unit="chunk")
    spans = [(start, min(start + batch - 1, docs)) for start in range(1, docs + 1, batch)]
    if per_call:
        for start, end in spans:
            with s.agent.transaction() as conn:
                conn.execute("set local synchronous_commit = off")
                conn.execute(f"select count(*) from (select scsql.index_text('src/doc' || d || '.md', {_TEXT}, 'file') "
                             f"from generate_series(%s::int, %s::int) d) x", (start, end))
            bar.update((end - start + 1) * SECTIONS)
    else:  # as scsql index sends batches: one staged while the one before it is stored
        def stage(conn, span: tuple[int, int]) -> int:
            conn.execute("set local synchronous_commit = off")
            conn.execute(f"insert into scsql.kb_staging (ord, path, content, kind) "
                         f"select d - %s + 1, 'src/doc' || d || '.md', {_TEXT}, 'file' "
                         f"from generate_series(%s::int, %s::int) d", (span[0], span[0], span[1]))
            return span[1] - span[0] + 1

        for (start, end), rows in bulk.index_batches(s.agent, spans, stage=stage):
            if isinstance(rows, Exception):
                raise rows
            bar.update((end - start + 1) * SECTIONS)
    bar.close()
    took = time.perf_counter() - t0
    print(f"indexed {docs * SECTIONS} chunks in {took:.0f} s ({docs * SECTIONS / took:.0f} chunks/s, "
          f"{'index_text' if per_call else 'bulk'})", file=sys.stderr)
    return docs * SECTIONS / took


def store_vectors(s: Scratch, rebuild: bool = True) -> None:
    """Every queued chunk's vector, claimed and stored by the agent as scsql
    worker does (embed_claim, embed_store; the vectors are synthetic points).
    With REBUILD the HNSW index is dropped first and built again, as its
    owner, once the vectors are in: one build costs a fraction of as many
    inserts into it, and gives the same index."""
    t0 = time.perf_counter()
    with s.connect() as conn:
        hnsw = [] if not rebuild else conn.execute(
            "select indexrelid::regclass::text as name, pg_get_indexdef(indexrelid) as def "
            "from pg_index where indrelid = 'scsql.kb_embeddings'::regclass and indexrelid::regclass::text "
            "like 'scsql.kb_embeddings_hnsw_%'").fetchall()
        for ix in hnsw:
            conn.execute(f"drop index {ix['name']}")
        conn.commit()
    with s.agent.transaction() as conn:
        pending = conn.execute("select pending_embeddings as n from scsql.memory_status()").fetchone()["n"]
    bar = _tqdm(total=pending, desc="vectors", unit="chunk")
    stored = 0
    # The cluster centres once a batch, then each chunk's point around its
    # own (the same points as _POINT makes, at a fraction of its cost).
    noise = "(select array_agg((random() - 0.5) * 0.15 order by i) from generate_series(1, 384 + 0 * k.k) i)::vector"
    while True:
        with s.agent.transaction() as conn:
            conn.execute("set local synchronous_commit = off")
            n = conn.execute(f"with c as materialized (select * from scsql.embed_claim(%s, 1000)), "
                             f"k as materialized (select k, {_CENTRE.format(c='k')} as v "
                             f"from generate_series(0, {CLUSTERS - 1}) k) "
                             f"select coalesce(scsql.embed_store(%s, min(c.claim_token::text)::uuid, "
                             f"array_agg(c.chunk_hash), array_agg(l2_normalize(k.v + {noise}))), 0) as n "
                             f"from c join k on k.k = abs(hashtext(c.chunk_hash)) %% {CLUSTERS} having count(*) > 0",
                             (DEFAULT_MODEL, DEFAULT_MODEL)).fetchone()
        if n is None:
            break
        stored += n["n"]
        bar.update(n["n"])
    bar.close()
    t1 = time.perf_counter()
    if not rebuild:
        print(f"stored {stored} vectors in {t1 - t0:.0f} s", file=sys.stderr)
        return
    with s.connect() as conn:
        conn.autocommit = True
        vectors = conn.execute("select count(*) as n from scsql.kb_embeddings").fetchone()["n"]
        # The graph of a million vectors is built in memory only with a few GB.
        conn.execute(f"set maintenance_work_mem = '{min(8192, max(512, vectors * 4 // 1000))}MB'")
        conn.execute("set max_parallel_maintenance_workers = 1")
        for ix in hnsw:
            conn.execute(ix["def"])
        # A load stopped after the drop above and resumed (--database) finds no index to drop: each
        # model's index is made again as scsql.embed_model made it.
        for m in conn.execute("select model_id, dims from scsql.embed_models").fetchall():
            conn.execute(f"create index if not exists kb_embeddings_hnsw_{int(m['model_id'])} on scsql.kb_embeddings "
                         f"using hnsw ((embedding::vector({int(m['dims'])})) vector_cosine_ops) "
                         f"where model_id = {int(m['model_id'])}")
    print(f"stored {stored} vectors in {t1 - t0:.0f} s, built the HNSW index in {time.perf_counter() - t1:.0f} s",
          file=sys.stderr)


HISTORY = 5000


def history(s: Scratch, cap: int, rewrites: int) -> None:
    """REWRITES rewrites of the facts through remember: each is a change of
    working memory (a row of memory history where this build records it)."""
    for start in range(0, rewrites, 500):
        with s.agent.transaction() as conn:
            conn.execute("select count(*) from generate_series(%s::int, %s::int) i, "
                         "lateral scsql.remember('fact.' || lpad((i %% %s)::text, 3, '0'), "
                         "'fact ' || i || ': revision ' || i || ' of the w' || (i %% %s) || ' module', (i %% 5) + 1) r",
                         (start, min(start + 499, rewrites - 1), cap, cap))


def history_rows(s: Scratch) -> str:
    with s.connect() as conn:
        n = conn.execute("select count(*) as n from scsql.memory_changes").fetchone()["n"]
    return f"{n} history rows"


def queries(s: Scratch, n: int, seed: int = 11) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        words = [f"w{int(pow(VOCAB, rng.random()))}" for _ in range(3)]
        if rng.random() < 0.2:
            words[0] = f"verify{rng.randrange(300)}Chain_{rng.randrange(50)}"
        texts.append(" ".join(words))
    with s.connect() as conn:
        embs = [r["e"] for r in conn.execute(
            "select " + _POINT.format(c="c", spread="0.25") + "::text as e "
            f"from (select (floor(random() * {CLUSTERS}))::int as c from generate_series(1, %s)) x",
            (n,)).fetchall()]
    return list(zip(texts, embs, strict=True))


def measure(name: str, fn: Callable[[int], None], n: int, warm: int = 20) -> dict:
    for i in range(min(n, warm)):
        fn(i)
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {"name": name, "p50": statistics.median(times), "p95": times[int(0.95 * (len(times) - 1))],
            "mean": statistics.fmean(times), "n": n}


def reader(s: Scratch, name: str) -> Agent:
    """An agent of another project, granted read access to the benchmark's project."""
    project = f"{s.project}-{name[-6:]}"
    roles.create_project(s.admin, project)
    with tempfile.TemporaryDirectory(prefix="scsql-bench-") as keys:
        roles.create_agent(s.admin, Keystore(Path(keys)), name, project, "developer")
    with s.connect() as conn:
        conn.execute("select scsql.grant_project_read(%s, %s)", (s.project, name))
        conn.commit()
    agent = Agent(s.agent.db, name)
    with agent.transaction() as conn:
        conn.execute("select 1 from scsql.index_text('notes/own.md', 'the reader''s own notes about w1 and w2', 'note')")
    return agent


def run(ctx, args: argparse.Namespace) -> int:
    reader_name = f"bench_reader_{secrets.token_hex(3)}"
    try:
        return _run(ctx, args, reader_name)
    finally:
        with psycopg.connect(ctx.admin_conninfo(), autocommit=True) as conn:
            conn.execute(sql.SQL("drop role if exists {}").format(sql.Identifier(role_for(reader_name))))


def _run(ctx, args: argparse.Namespace, reader_name: str) -> int:
    if args.database:
        s = existing(ctx.admin_conninfo(), args.database)
        with s.agent.transaction() as conn:
            pending = conn.execute("select pending_embeddings as n from scsql.memory_status()").fetchone()["n"]
        with s.connect() as conn:
            unindexed = conn.execute(
                "select count(*) as n from scsql.embed_models m where not exists (select from pg_class c "
                "where c.relname = 'kb_embeddings_hnsw_' || m.model_id and c.relnamespace = 'scsql'::regnamespace)"
            ).fetchone()["n"]
        if unindexed:  # a load that stopped while it stored the vectors (their index dropped)
            print(f"{pending} chunks have no vector yet, {unindexed} models no HNSW index: finishing the load first",
                  file=sys.stderr)
            finish_load(s)
        elif pending:  # written since (a reader's notes, facts): stored into the index as a worker would
            store_vectors(s, rebuild=False)
        return _measure(s, args, reader_name)
    with scratch(ctx.admin_conninfo(), "search", keep=args.keep) as s:
        load(s, args.chunks, per_call=args.per_call)
        return _measure(s, args, reader_name)


def existing(admin_conninfo: str, dbname: str) -> Scratch:
    """A scratch database loaded before (its one project and agent), measured again as it is."""
    from .scratch_db import with_db

    admin = with_db(admin_conninfo, dbname)
    with psycopg.connect(admin) as conn:
        project, name = conn.execute("select p.name, a.name from scsql.agents a join scsql.projects p using (project_id) "
                                     "order by a.agent_id limit 1").fetchone()
        conn.execute("drop table if exists public.bench_fts")
    return Scratch(admin, project, Agent(Database(admin, max_size=2, application_name="scsql-bench").open(), name))


def _measure(s: Scratch, args: argparse.Namespace, reader_name: str) -> int:
    other = reader(s, reader_name)
    qs = queries(s, args.queries)
    with s.connect() as conn:
        conn.execute("create table public.bench_fts as select c.chunk_id, to_tsvector('english', c.content) tsv "
                     "from scsql.kb_chunks c")
        conn.execute("create index on public.bench_fts using gin (tsv)")
        conn.execute("grant select on public.bench_fts to scsql_agent")
        conn.commit()
        conn.autocommit = True
        conn.execute("vacuum analyze public.bench_fts")
    agent = s.agent

    def call(query: str, params: Callable[[int], tuple], who: Agent = agent) -> Callable[[int], None]:
        def fn(i: int) -> None:
            with who.transaction() as conn:
                conn.execute(query, params(i)).fetchall()
        return fn

    n = len(qs)
    with s.agent.transaction() as conn:
        st = conn.execute("select * from scsql.memory_status()").fetchone()
    print()
    print(f"{st['chunks']} chunks, {st['terms']} terms, {st['embedded']} vectors, {st['facts']} facts, "
          f"{history_rows(s)}; {n} queries (search_global: {min(n, args.global_queries)}); times in ms, measured "
          f"from the client")
    print(f"{'operation':<44} {'p50':>7} {'p95':>7} {'mean':>7} {'p50 / round trip':>17}", flush=True)
    results: list[dict] = []

    def row(r: dict) -> None:  # printed as soon as measured: a long run stopped keeps what it measured
        results.append(r)
        print(f"{r['name']:<44} {r['p50']:>7.2f} {r['p95']:>7.2f} {r['mean']:>7.2f} "
              f"{r['p50'] / results[0]['p50']:>16.1f}x", flush=True)

    row(measure("round trip (select 1, agent transaction)", call("select 1", lambda i: ()), n))
    row(measure("ts_rank, GIN tsvector, OR of terms (k=10)", call(
        "select chunk_id from public.bench_fts, "
        "to_tsquery('english', array_to_string(tsvector_to_array(to_tsvector('english', %s)), ' | ')) q "
        "where tsv @@ q order by ts_rank(tsv, q) desc limit 10", lambda i: (qs[i][0],)), n))
    row(measure("search, BM25 only (k=10)", call(
        "select * from scsql.search(%s, p_k => 10, p_mode => 'bm25')", lambda i: (qs[i][0],)), n))
    row(measure("search, vector only (k=10)", call(
        "select * from scsql.search(%s, p_k => 10, p_mode => 'vector', p_query_embedding => %s::vector, "
        "p_model => %s)", lambda i: (qs[i][0], qs[i][1], DEFAULT_MODEL)), n))
    row(measure("search, hybrid (k=10)", call(
        "select * from scsql.search(%s, p_k => 10, p_query_embedding => %s::vector, p_model => %s)",
        lambda i: (qs[i][0], qs[i][1], DEFAULT_MODEL)), n))
    row(measure("recall_context (budget 1500)", call("select * from scsql.recall_context()", lambda i: ()), n))
    row(measure("remember (rewrite of an existing fact)", call(
        "select scsql.remember(%s, %s, 3)",
        lambda i: (f"fact.{i % 250:03}", f"fact {i % 250}: the w{i} module, measured rewrite {i}")), n))
    row(measure("search_global by a granted reader, hybrid", call(
        "select * from scsql.search_global(%s, p_k => 10, p_query_embedding => %s::vector, p_model => %s)",
        lambda i: (qs[i][0], qs[i][1], DEFAULT_MODEL), other), min(n, args.global_queries), warm=2))
    ts, hybrid, recall, remember = results[1], results[4], results[5], results[6]
    ratio = hybrid["p95"] / ts["p95"]
    print(f"goals: hybrid p95 <= 0.2x ts_rank p95 ({ratio:.2f}x: {'met' if ratio <= 0.2 else 'not met'}), "
          f"remember p95 <= 15 ms ({remember['p95']:.1f}: {'met' if remember['p95'] <= 15 else 'not met'}), "
          f"recall_context p95 <= 10 ms ({recall['p95']:.1f}: {'met' if recall['p95'] <= 10 else 'not met'}); "
          f"the round trip's p95 ({results[0]['p95']:.2f} ms) is the noise floor of this run")
    return 0


def register(bsub) -> None:
    p = bsub.add_parser("search", help="p50/p95 latency of hybrid search, recall_context and remember over 100,000 chunks")
    p.add_argument("--chunks", type=int, default=100_000)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--global-queries", type=int, default=50,
                   help="queries of search_global by a granted reader, at most --queries (default 50: over a "
                        "million chunks each takes seconds)")
    p.add_argument("--per-call", action="store_true",
                   help="load through index_text, one call a file, instead of the bulk path")
    p.add_argument("--database", metavar="NAME",
                   help="measure again on a scratch database loaded before (not dropped), instead of loading a new one")
    p.add_argument("--keep", action="store_true",
                   help="keep the scratch database (its name is printed) to measure it again with --database")
    p.set_defaults(bench_func=run)
