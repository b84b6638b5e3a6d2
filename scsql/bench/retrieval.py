"""``scsql bench retrieval --dataset DIR``: retrieval quality on a BEIR
dataset (SciFact): nDCG@10 and Recall@100 on the test split for BM25 only,
vector only and hybrid search, against a ts_rank baseline (PostgreSQL full
text search with a GIN index, OR of the query's lexemes) measured in the same
run on the same server.

BM25's k1 and b and the fusion's rrf_k and vector weight are tuned on the
train split only, then fixed for the test split. Each document is indexed as
one Markdown note (its title as a heading, then its text) with index_text, so
long abstracts are split into chunks like any other text, each keeping the
title as its anchor; a document ranks where its best chunk ranks. Everything lives in a scratch database that is dropped at the end;
nothing is cached.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from pathlib import Path

from ..memory import embed
from .scratch_db import Scratch, scratch

K_EVAL = 10
K_RECALL = 100
BM25_GRID = [(k1, b) for k1 in (0.9, 1.2, 1.6, 2.0) for b in (0.5, 0.75, 0.9)]
RRF_GRID = [(k, w) for k in (5, 10, 20, 40, 60) for w in (0.5, 0.75, 1.0, 1.25, 1.5, 2.0)]


def _tqdm(iterable=None, **kw):
    from tqdm import tqdm

    return tqdm(iterable, disable=None, file=sys.stderr, **kw)


def load(dataset: Path) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, dict[str, int]]]]:
    corpus = {}
    with (dataset / "corpus.jsonl").open() as f:
        for line in f:
            d = json.loads(line)
            title = d.get("title", "").strip()
            corpus[d["_id"]] = (f"# {title}\n\n" if title else "") + d["text"].strip()
    queries = {}
    with (dataset / "queries.jsonl").open() as f:
        for line in f:
            d = json.loads(line)
            queries[d["_id"]] = d["text"]
    qrels: dict[str, dict[str, dict[str, int]]] = {}
    for split in ("train", "test"):
        path = dataset / "qrels" / f"{split}.tsv"
        rels: dict[str, dict[str, int]] = {}
        with path.open() as f:
            for row in csv.DictReader(f, delimiter="\t"):
                if int(row["score"]) > 0:
                    rels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
        qrels[split] = rels
    return corpus, queries, qrels


def ndcg(ranked: list[str], rel: dict[str, int], k: int = K_EVAL) -> float:
    dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(rel.values(), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall(ranked: list[str], rel: dict[str, int], k: int = K_RECALL) -> float:
    return len(set(ranked[:k]) & set(rel)) / len(rel) if rel else 0.0


def evaluate(runs: dict[str, list[str]], rels: dict[str, dict[str, int]]) -> tuple[float, float]:
    n = [ndcg(runs.get(q, []), r) for q, r in rels.items()]
    c = [recall(runs.get(q, []), r) for q, r in rels.items()]
    return sum(n) / len(n), sum(c) / len(c)


def _docs(paths: list[str]) -> list[str]:
    """Document ids in rank order, each at the rank of its best chunk."""
    seen: dict[str, None] = {}
    for p in paths:
        seen.setdefault(p.removeprefix("scifact/"), None)
    return list(seen)


def index_corpus(s: Scratch, corpus: dict[str, str]) -> None:
    with s.agent.transaction() as conn:
        conn.execute("select 1")
    t0 = time.perf_counter()
    items = list(corpus.items())
    for start in _tqdm(range(0, len(items), 50), desc="indexing", unit="batch"):
        with s.agent.transaction() as conn:
            for doc_id, text in items[start:start + 50]:
                conn.execute("select 1 from scsql.index_text(%s, %s, 'note')", (f"scifact/{doc_id}", text))
    print(f"indexed {len(items)} documents in {time.perf_counter() - t0:.1f} s", file=sys.stderr)


def embed_corpus(s: Scratch, prov) -> None:
    with s.agent.transaction() as conn:
        pending = conn.execute("select pending_embeddings as n from scsql.memory_status()").fetchone()["n"]
    t0 = time.perf_counter()
    bar = _tqdm(total=pending, desc="embedding", unit="chunk")
    while n := embed.embed_queued(s.agent, prov, limit=64):
        bar.update(n)
    bar.close()
    print(f"embedded {pending} chunks in {time.perf_counter() - t0:.1f} s", file=sys.stderr)


def search(s: Scratch, query: str, mode: str, k: int, emb: str | None, model: str | None, **params) -> list[str]:
    """The source paths of the hits, best first (a path once per chunk found)."""
    return [path for path, _ in search_chunks(s, query, mode, k, emb, model, **params)]


def search_chunks(s: Scratch, query: str, mode: str, k: int, emb: str | None, model: str | None,
                  **params) -> list[tuple[str, str]]:
    extra = "".join(f", p_{name} => %s" for name in params)
    with s.agent.transaction() as conn:
        rows = conn.execute(
            f"select source_path, chunk_hash from scsql.search(%s, p_k => %s, p_mode => %s, "
            f"p_query_embedding => %s, p_model => %s{extra})",
            (query, k, mode, emb, model, *params.values())).fetchall()
    return [(r["source_path"], r["chunk_hash"]) for r in rows]


def ts_rank_baseline(s: Scratch, queries: dict[str, str], rels: dict[str, dict[str, int]]) -> dict[str, list[str]]:
    """PostgreSQL full text search: a GIN-indexed tsvector per chunk, ts_rank
    against the OR of the query's lexemes."""
    with s.connect() as conn:
        conn.execute("""create table public.bench_fts as
                        select s.path, to_tsvector('english', c.content) as tsv
                        from scsql.kb_chunks c join scsql.kb_sources s using (project_id, source_id)""")
        conn.execute("create index on public.bench_fts using gin (tsv)")
        conn.commit()
        runs = {}
        for qid in rels:
            rows = conn.execute("""
                with q as (select nullif(array_to_string(tsvector_to_array(to_tsvector('english', %s)), ' | '), '')
                                  as expr)
                select path from public.bench_fts, q
                where q.expr is not null and tsv @@ to_tsquery('english', q.expr)
                order by ts_rank(tsv, to_tsquery('english', q.expr)) desc, path
                limit 200""", (queries[qid],)).fetchall()
            runs[qid] = _docs([r["path"] for r in rows])
    return runs


def fuse(bm25: list[tuple[str, str]], vec: list[tuple[str, str]], rrf_k: float, w_vec: float) -> list[str]:
    """Reciprocal rank fusion of two chunk lists, as scsql.search computes it; the paths, best first."""
    score: dict[tuple[str, str], float] = {}
    for rank, c in enumerate(bm25, 1):
        score[c] = score.get(c, 0.0) + 1.0 / (rrf_k + rank)
    for rank, c in enumerate(vec, 1):
        score[c] = score.get(c, 0.0) + w_vec / (rrf_k + rank)
    return [c[0] for c, _ in sorted(score.items(), key=lambda kv: -kv[1])]


def run(ctx, args: argparse.Namespace) -> int:
    if args.dataset == "code":  # the code dataset (scsql/bench/code_dataset.py), built in the run
        from . import code_dataset

        return code_dataset.run_code(ctx, args, run)
    dataset = Path(args.dataset)
    corpus, queries, qrels = load(dataset)
    train, test = qrels["train"], qrels["test"]
    if args.train_queries:
        train = dict(list(train.items())[: args.train_queries])
    prov = embed.provider()
    print(f"dataset {dataset}: {len(corpus)} documents, {len(train)} train and {len(test)} test queries; "
          f"embeddings: {prov.name if prov else 'none'}", file=sys.stderr)
    with scratch(ctx.admin_conninfo(), "retrieval") as s:
        index_corpus(s, corpus)
        qemb: dict[str, str] = {}
        if prov is not None:
            embed_corpus(s, prov)
            ids = list(set(train) | set(test))
            vecs = prov.embed([queries[q] for q in ids])
            qemb = {q: embed.vector_literal(v) for q, v in zip(ids, vecs, strict=True)}
        model = prov.name if prov else None
        results: list[tuple[str, float, float, str]] = []

        base = ts_rank_baseline(s, queries, test)
        results.append(("ts_rank (GIN tsvector, OR)", *evaluate(base, test), "baseline"))

        # BM25: tune k1, b on train.
        best = (1.2, 0.75, -1.0)
        for k1, b in _tqdm(BM25_GRID, desc="tuning bm25 on train", unit="setting"):
            runs = {q: _docs(search(s, queries[q], "bm25", 200, None, None, k1=k1, b=b, depth=200)) for q in train}
            score = evaluate(runs, train)[0]
            if score > best[2]:
                best = (k1, b, score)
        k1, b, _ = best
        print(f"bm25 tuned on train: k1={k1} b={b} (train nDCG@10 {best[2]:.3f})", file=sys.stderr)
        bm25_test = {q: _docs(search(s, queries[q], "bm25", 200, None, None, k1=k1, b=b, depth=200)) for q in test}
        results.append((f"BM25 (k1={k1}, b={b})", *evaluate(bm25_test, test), "goal >= 0.65"))

        if prov is not None:
            vec_test = {q: _docs(search(s, queries[q], "vector", 200, qemb[q], model, depth=200)) for q in test}
            results.append((f"vector ({model})", *evaluate(vec_test, test), ""))
            # Fusion: the two train lists once, then the grid in Python (same formula as SQL).
            lists = {q: (search_chunks(s, queries[q], "bm25", 100, None, None, k1=k1, b=b, depth=100),
                         search_chunks(s, queries[q], "vector", 100, qemb[q], model, depth=100))
                     for q in _tqdm(list(train), desc="train lists", unit="query")}
            best_f = (60, 1.0, -1.0)
            for rrf_k, w in RRF_GRID:
                runs = {q: _docs(fuse(bl, vl, rrf_k, w)) for q, (bl, vl) in lists.items()}
                score = evaluate(runs, train)[0]
                if score > best_f[2]:
                    best_f = (rrf_k, w, score)
            rrf_k, w, _ = best_f
            print(f"fusion tuned on train: rrf_k={rrf_k} vector_weight={w} (train nDCG@10 {best_f[2]:.3f})",
                  file=sys.stderr)
            latencies = []
            hybrid_test = {}
            for q in test:
                t0 = time.perf_counter()
                hybrid_test[q] = _docs(search(s, queries[q], "hybrid", 200, qemb[q], model, k1=k1, b=b,
                                              rrf_k=rrf_k, vector_weight=w, depth=100))
                latencies.append(time.perf_counter() - t0)
            results.append((f"hybrid RRF (k={rrf_k}, vector weight {w})", *evaluate(hybrid_test, test), "goal >= 0.70"))
            default = {q: _docs(search(s, queries[q], "hybrid", 200, qemb[q], model, depth=100)) for q in test}
            results.append(("hybrid, untuned defaults", *evaluate(default, test), ""))

    print()
    print(f"SciFact test split, {len(test)} queries (reference: BM25 0.660 / 0.886, "
          f"MiniLM dense 0.647 / 0.922, RRF 0.696 / 0.955)")
    print(f"{'ranking':<42} {'nDCG@10':>8} {'Recall@100':>11} {'vs ts_rank':>11}")
    base_ndcg = results[0][1]
    for name, n, r, note in results:
        ratio = f"x{n / base_ndcg:.2f}" if base_ndcg else "-"
        print(f"{name:<42} {n:>8.3f} {r:>11.3f} {ratio:>11}  {note}")
    if prov is not None:
        lat = sorted(latencies)
        print(f"hybrid search latency on this corpus: p50 {1000 * lat[len(lat) // 2]:.1f} ms, "
              f"p95 {1000 * lat[int(len(lat) * 0.95)]:.1f} ms (k=200, both branches depth 100)")
    return 0


def register(bsub) -> None:
    p = bsub.add_parser("retrieval", help="nDCG@10 and Recall@100 on a BEIR dataset (SciFact) in a scratch database")
    p.add_argument("--dataset", required=True, help="directory with corpus.jsonl, queries.jsonl, qrels/{train,test}.tsv")
    p.add_argument("--train-queries", type=int, default=0, help="tune on only the first N train queries (0: all)")
    # The code dataset (scsql/bench/code_dataset.py): --dataset code
    p.add_argument("--code-size", type=int, default=0,
                   help="--dataset code: documented functions of the standard library to use (0: 500)")
    p.set_defaults(bench_func=run)
