"""``scsql bench retrieval --dataset DIR``: retrieval quality on a BEIR
dataset (SciFact): nDCG@10, Recall@5 and Recall@100 on the TEST split for BM25
only, vector only and hybrid search, against a ts_rank baseline (PostgreSQL
full text search with a GIN index, OR of the query's lexemes) measured in the
same run on the same server.

Splits are explicit: BM25's k1 and b and the fusion's vector weight and
relevance floor are tuned on the TRAIN split only (queries of qrels/train.tsv),
then fixed; every figure printed is of the TEST split (qrels/test.tsv). The
shipped defaults are measured too, and the run says whether hybrid with them
is at least the better of BM25 only and vector only at nDCG@10 and Recall@5.
--corpus-sample N keeps every judged document and N others (a quicker run on
a busy machine; the full corpus by default). Each document is indexed as
one Markdown note (its title as a heading, then its text) with index_text, so
long abstracts are split into chunks like any other text, each keeping the
title as its anchor; a document ranks where its best chunk ranks. Everything
lives in a scratch database that is dropped at the end. The vectors computed
are kept on disk (scsql/bench/vector_cache.py, keyed by model and text), so a
rerun embeds only texts it has not seen; --no-vector-cache embeds everything.
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
K_RECALL_SHORT = 5
DEPTH = 40  # search's default candidates per branch for k <= 40
BM25_GRID = [(k1, b) for k1 in (0.9, 1.2, 1.6, 2.0) for b in (0.5, 0.75, 0.9)]
# Score fusion: (vector weight, relevance floor); BM25 weight 1.
FUSION_GRID = [(w, f) for w in (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0) for f in (0.0, 0.1, 0.2, 0.3, 0.4)]
SHIPPED = {"vector_weight": 1.0, "min_similarity": 0.2}  # scsql.search's defaults


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


def evaluate(runs: dict[str, list[str]], rels: dict[str, dict[str, int]],
             deep: int = K_RECALL) -> tuple[float, float, float]:
    """nDCG@10, Recall@5 and Recall@DEEP (100), means over the queries of rels."""
    n = [ndcg(runs.get(q, []), r) for q, r in rels.items()]
    c5 = [recall(runs.get(q, []), r, K_RECALL_SHORT) for q, r in rels.items()]
    c = [recall(runs.get(q, []), r, deep) for q, r in rels.items()]
    return sum(n) / len(n), sum(c5) / len(c5), sum(c) / len(c)


def sample(corpus: dict[str, str], qrels: dict[str, dict[str, dict[str, int]]], others: int) -> dict[str, str]:
    """Every judged document and the first OTHERS unjudged ones (by id)."""
    judged = {d for rels in qrels.values() for r in rels.values() for d in r}
    rest = sorted(d for d in corpus if d not in judged)[:others]
    return {d: t for d, t in corpus.items() if d in judged or d in set(rest)}


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
    cached = f" ({prov.hits} from the vector cache)" if hasattr(prov, "hits") else ""
    print(f"embedded {pending} chunks in {time.perf_counter() - t0:.1f} s{cached}", file=sys.stderr)


def search(s: Scratch, query: str, mode: str, k: int, emb: str | None, model: str | None, **params) -> list[str]:
    """The source paths of the hits, best first (a path once per chunk found)."""
    return [path for path, *_ in search_chunks(s, query, mode, k, emb, model, **params)]


def search_chunks(s: Scratch, query: str, mode: str, k: int, emb: str | None, model: str | None,
                  **params) -> list[tuple[str, str, float]]:
    extra = "".join(f", p_{name} => %s" for name in params)
    with s.agent.transaction() as conn:
        rows = conn.execute(
            f"select source_path, chunk_hash, score from scsql.search(%s, p_k => %s, p_mode => %s, "
            f"p_query_embedding => %s, p_model => %s{extra})",
            (query, k, mode, emb, model, *params.values())).fetchall()
    return [(r["source_path"], r["chunk_hash"], r["score"]) for r in rows]


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


def fuse(bm25: list[tuple[str, str, float]], vec: list[tuple[str, str, float]], w_vec: float, floor: float,
         depth: int = DEPTH) -> list[str]:
    """Score fusion as scsql.search computes it (fusion score): BM25 as a share
    of the best BM25 score, plus w_vec times the similarity above the floor as
    a share of 1 - floor, over the vector branch's best DEPTH; a vector hit
    counts with its BM25 score wherever BM25 ranks it (here: only within the
    BM25 list given, 100 deep, so a hit BM25 ranks lower counts as search
    would count one holding no query term), and one holding no query term
    only at or above the floor. The paths, best first."""
    vec = vec[:depth]
    bmax = bm25[0][2] if bm25 else 0.0
    score: dict[tuple[str, str], float] = {}
    for path, h, s in bm25:
        score[(path, h)] = s / bmax if bmax > 0 else 0.0
    for path, h, sim in vec:
        if (path, h) in score or sim >= floor:
            score[(path, h)] = score.get((path, h), 0.0) + w_vec * max(sim - floor, 0.0) / (1 - floor)
    return [c[0] for c, _ in sorted(score.items(), key=lambda kv: (-kv[1], kv[0]))]


def _tune_bm25(s: Scratch, queries: dict[str, str], train: dict[str, dict[str, int]]) -> tuple[float, float]:
    best = (1.2, 0.75, -1.0)
    for k1, b in _tqdm(BM25_GRID, desc="tuning bm25 on train", unit="setting"):
        runs = {q: _docs(search(s, queries[q], "bm25", 100, None, None, k1=k1, b=b, depth=100)) for q in train}
        score = evaluate(runs, train)[0]
        if score > best[2]:
            best = (k1, b, score)
    print(f"bm25 tuned on train: k1={best[0]} b={best[1]} (train nDCG@10 {best[2]:.3f})", file=sys.stderr)
    return best[0], best[1]


def _branch_lists(s: Scratch, queries: dict[str, str], ids, qemb: dict[str, str], model: str,
                  **bm25) -> dict[str, tuple[list, list]]:
    """Each query's BM25 and (unfloored) vector top 100, with scores: fusion is computed from them."""
    return {q: (search_chunks(s, queries[q], "bm25", 100, None, None, depth=100, **bm25),
                search_chunks(s, queries[q], "vector", 100, qemb[q], model, depth=100, min_similarity=-1))
            for q in _tqdm(list(ids), desc="branch lists", unit="query")}


def _fused(lists, w: float, floor: float) -> dict[str, list[str]]:
    """Runs of score fusion: the first 10 as search returns them with k <= 40
    (depth 40), then the rest of a depth-100 fusion for Recall@100."""
    out = {}
    for q, (bl, vl) in lists.items():
        top = _docs(fuse(bl, vl, w, floor))
        deep = _docs(fuse(bl, vl, w, floor, depth=100))
        out[q] = top[:10] + [d for d in deep if d not in top[:10]]
    return out


def _tune_fusion(lists, train: dict[str, dict[str, int]]) -> tuple[float, float]:
    best = (SHIPPED["vector_weight"], SHIPPED["min_similarity"], (-1.0, -1.0))
    for w, floor in FUSION_GRID:
        n, r5, _ = evaluate(_fused({q: lists[q] for q in train}, w, floor), train)
        if (n, r5) > best[2]:
            best = (w, floor, (n, r5))
    print(f"fusion tuned on train: vector_weight={best[0]} min_similarity={best[1]} "
          f"(train nDCG@10 {best[2][0]:.3f}, Recall@5 {best[2][1]:.3f})", file=sys.stderr)
    return best[0], best[1]


def _report(results, test, deep: int) -> None:
    print()
    print(f"test split, {len(test)} queries; tuned on the train split only "
          f"(SciFact reference: BM25 0.660 / 0.886, MiniLM dense 0.647 / 0.922, RRF 0.696 / 0.955 nDCG@10 / Recall@100)")
    print(f"{'ranking':<46} {'nDCG@10':>8} {'Recall@5':>9} {f'Recall@{deep}':>11} {'vs ts_rank':>11}")
    base = results[0][1]
    for name, n, r5, r, note in results:
        ratio = f"x{n / base:.2f}" if base else "-"
        print(f"{name:<46} {n:>8.3f} {r5:>9.3f} {r:>11.3f} {ratio:>11}  {note}")
    by = {name.split(" ")[0]: (n, r5) for name, n, r5, _, _ in results}
    if "shipped" in by and "vector" in by:
        best_n, best_r = max(by["BM25"][0], by["vector"][0]), max(by["BM25"][1], by["vector"][1])
        ok = by["shipped"][0] >= best_n and by["shipped"][1] >= best_r
        print(f"fusion never hurts (hybrid, shipped defaults >= max(BM25, vector) at nDCG@10 and Recall@5): "
              f"{'met' if ok else 'NOT met'} ({by['shipped'][0]:.3f} vs {best_n:.3f}; {by['shipped'][1]:.3f} vs "
              f"{best_r:.3f})")


def run(ctx, args: argparse.Namespace) -> int:
    if args.dataset == "code":  # the code dataset (scsql/bench/code_dataset.py), built in the run
        return _run_code(ctx, args)
    return _run_dataset(ctx, args, Path(args.dataset), K_RECALL)


def _run_code(ctx, args: argparse.Namespace) -> int:
    """``--dataset code``: build the dataset (``--code-size`` functions) in a
    temporary directory and run the benchmark on it with Recall@10 (one
    relevant document per query) in the deep recall column."""
    import tempfile

    from . import code_dataset

    pairs = code_dataset.build(size=args.code_size or code_dataset.DEFAULT_SIZE)
    train = sum(code_dataset.is_train(p.doc_id) for p in pairs)
    print(f"code dataset: {len(pairs)} documented public functions of the standard library in "
          f"{code_dataset.stdlib_root()} ({train} train and {len(pairs) - train} test queries)", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="scsql-code-") as tmp:
        status = _run_dataset(ctx, args, code_dataset.write_beir(pairs, Path(tmp) / "code"), deep_k=10)
    print("code dataset (docstring -> function, standard library): the recall column is Recall@10")
    return status


def _run_dataset(ctx, args: argparse.Namespace, dataset: Path, deep_k: int) -> int:
    corpus, queries, qrels = load(dataset)
    if args.corpus_sample:
        corpus = sample(corpus, qrels, args.corpus_sample)
    train, test = qrels["train"], qrels["test"]
    if args.train_queries:
        train = dict(list(train.items())[: args.train_queries])
    prov = embed.provider()
    if prov is not None and not args.no_vector_cache:
        from .vector_cache import CachedProvider

        prov = CachedProvider(prov, args.vector_cache or vector_cache_dir())
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
        results: list[tuple[str, float, float, float, str]] = []
        results.append(("ts_rank (GIN tsvector, OR)", *evaluate(ts_rank_baseline(s, queries, test), test, deep_k),
                        "baseline"))
        k1, b = _tune_bm25(s, queries, train)
        bm25_test = {q: _docs(search(s, queries[q], "bm25", 100, None, None, k1=k1, b=b, depth=100)) for q in test}
        results.append((f"BM25 only (k1={k1}, b={b})", *evaluate(bm25_test, test, deep_k), ""))
        latencies: list[float] = []
        if prov is not None:
            lists = _branch_lists(s, queries, set(train) | set(test), qemb, model, k1=k1, b=b)
            vec_test = {q: _docs([c[0] for c in lists[q][1]]) for q in test}
            results.append((f"vector only ({model})", *evaluate(vec_test, test, deep_k), ""))
            w, floor = _tune_fusion(lists, train)
            results.append((f"hybrid tuned (vector weight {w}, floor {floor})",
                            *evaluate(_fused({q: lists[q] for q in test}, w, floor), test, deep_k), "tuned on train"))
            shipped = {}
            for q in test:  # scsql.search itself, every parameter at its default but the tuned BM25 k1 and b
                t0 = time.perf_counter()
                top = _docs(search(s, queries[q], "hybrid", 10, qemb[q], model, k1=k1, b=b))
                latencies.append(time.perf_counter() - t0)
                deep = _docs(search(s, queries[q], "hybrid", 100, qemb[q], model, k1=k1, b=b))
                shipped[q] = top + [d for d in deep if d not in top]
            results.append(("shipped defaults, hybrid (scsql.search)", *evaluate(shipped, test, deep_k),
                            "goal >= both"))
            rrf = {q: _docs(search(s, queries[q], "hybrid", 100, qemb[q], model, k1=k1, b=b, fusion="rrf"))
                   for q in test}
            results.append(("RRF (fusion rrf, rrf_k 60), for comparison", *evaluate(rrf, test, deep_k), ""))
    _report(results, test, deep_k)
    if latencies:
        lat = sorted(latencies)
        print(f"hybrid search latency on this corpus: p50 {1000 * lat[len(lat) // 2]:.1f} ms, "
              f"p95 {1000 * lat[int(len(lat) * 0.95)]:.1f} ms (k=10, defaults)")
    return 0


def vector_cache_dir() -> Path:
    from .vector_cache import default_dir

    return default_dir()


def register(bsub) -> None:
    p = bsub.add_parser("retrieval", help="nDCG@10, Recall@5 and Recall@100 on a BEIR dataset (SciFact) in a scratch database")
    p.add_argument("--dataset", required=True, help="directory with corpus.jsonl, queries.jsonl, qrels/{train,test}.tsv")
    p.add_argument("--train-queries", type=int, default=0, help="tune on only the first N train queries (0: all)")
    p.add_argument("--corpus-sample", type=int, default=0,
                   help="index every judged document and only N others (0: the whole corpus)")
    p.add_argument("--vector-cache", default=None,
                   help="directory of the vectors kept between runs (default ~/.cache/scsql/bench-vectors)")
    p.add_argument("--no-vector-cache", action="store_true", help="embed every text, read and write no cache")
    # The code dataset (scsql/bench/code_dataset.py): --dataset code
    p.add_argument("--code-size", type=int, default=0,
                   help="--dataset code: documented functions of the standard library to use (0: 500)")
    p.set_defaults(bench_func=run)
