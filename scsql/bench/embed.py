"""``scsql bench embed``: the embedding worker's throughput against the same
ONNX model called directly on the same texts, in the same run.

The texts are a BEIR corpus (``--dataset DIR``, SciFact: each document as a
note) or a source tree (``--tree PATH``, default: Python's standard
library; each ``.py`` file chunked as ``scsql index`` chunks it), indexed
into a scratch database. The chunk texts the queue holds (what a worker
embeds, anchors included) are read back, then embedded three times, each
in a fresh process:

1. directly: onnxruntime's InferenceSession with its default options on the
   model file, the tokenizer truncating at the model's 256 tokens, texts
   sorted by length, batches of 32, mean pooling (how one calls the model by
   hand);
2. by the worker: ``scsql worker``'s embed job (claim, embed, store, one
   transaction per claim) draining the queue;
3. directly again (the machine's load drifts: the baseline is the mean of
   1 and 3).

It prints chunks/s for each, the ratio worker / direct, the peak resident
memory of each process (model loaded, after the run), the CPU seconds each
spent on the texts (user and system, every thread: on a shared machine the
wall-clock rates move with the load, the CPU time much less; the direct
run's idle threads spin, onnxruntime's default, and that counts as CPU time)
and the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import sys
import sysconfig
import time
from pathlib import Path

from .scratch_db import Scratch, scratch


def corpus_texts(dataset: Path, limit: int) -> list[tuple[str, str]]:
    """(path, Markdown text) of the first LIMIT documents of a BEIR corpus."""
    out = []
    with (dataset / "corpus.jsonl").open() as f:
        for line in f:
            if len(out) >= limit:
                break
            d = json.loads(line)
            title = d.get("title", "").strip()
            out.append((f"doc/{d['_id']}", (f"# {title}\n\n" if title else "") + d["text"].strip()))
    return out


def tree_files(root: Path) -> list[Path]:
    """The .py files under ROOT, sorted, outside test and vendored directories."""
    skip = {"test", "tests", "idlelib", "site-packages", "__pycache__", "lib2to3", "turtledemo"}
    return sorted(p for p in root.rglob("*.py") if not skip & set(p.relative_to(root).parts[:-1]))


def index_docs(s: Scratch, docs: list[tuple[str, str]]) -> None:
    with s.agent.transaction() as conn:
        for path, text in docs:
            conn.execute("select 1 from scsql.index_text(%s, %s, 'note')", (path, text))


def index_tree(s: Scratch, root: Path, limit: int) -> int:
    """Index .py files of ROOT as scsql index does until LIMIT chunks are queued. Returns the files indexed."""
    from psycopg.types.json import Jsonb

    from ..memory.indexer import spans_for

    files = 0
    chunks = 0
    for path in tree_files(root):
        if chunks >= limit:
            break
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        rel = path.relative_to(root).as_posix()
        spans = spans_for(rel, text, s.agent.rules().chunk_chars)
        with s.agent.transaction() as conn:
            row = conn.execute("select chunks from scsql.index_text(%s, %s, 'file', null, 'standard', %s, %s)",
                               (rel, text, Jsonb(spans) if spans is not None else None,
                                Jsonb({"language": "py"}))).fetchone()
        chunks += row["chunks"]
        files += 1
    return files


def queued_texts(s: Scratch) -> list[str]:
    """What the worker will embed: each queued chunk's text as embed_claim hands it out."""
    with s.connect() as conn:
        rows = conn.execute("select scsql._embed_input(q.project_id, q.chunk_hash) as t from scsql.kb_embed_queue q "
                            "order by q.enqueued_at, q.chunk_hash").fetchall()
    return [r["t"] for r in rows if r["t"] is not None]


def _peak_mb() -> float:
    from ..memory import embed

    return embed.peak_rss_mb()


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _direct(texts: list[str], result) -> None:
    """Child process: the model called by hand (see the module docstring)."""
    import numpy as np
    import onnxruntime as ort
    from tokenizers import Tokenizer

    from ..memory import embed

    tok = Tokenizer.from_file(str(embed.TOKENIZER))
    tok.enable_truncation(max_length=embed.MAX_TOKENS)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    session = ort.InferenceSession(str(embed.MiniLM.model_path()), providers=["CPUExecutionProvider"])

    def run(batch: list[str]) -> np.ndarray:
        enc = tok.encode_batch(batch)
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        hidden = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
        m = mask[..., None].astype(np.float32)
        return (hidden * m).sum(1) / np.clip(m.sum(1), 1e-9, None)

    run(texts[:2])  # warm up
    t0, c0 = time.perf_counter(), _cpu_seconds()
    ordered = sorted(texts, key=len)
    for start in range(0, len(ordered), 32):
        run(ordered[start:start + 32])
    result.put((len(texts), time.perf_counter() - t0, _peak_mb(), _cpu_seconds() - c0))


def _worker(login: str, agent_name: str, result) -> None:
    """Child process: scsql worker's embed job draining the queue as the agent."""
    from ..core.db import Agent, Database
    from ..core.worker import drain
    from ..memory import embed

    embed.provider().embed(["warm up", "the model"])
    db = Database(login, max_size=2, application_name="scsql-bench:embed-worker").open()
    try:
        agent = Agent(db, agent_name, None)
        t0, c0 = time.perf_counter(), _cpu_seconds()
        n = drain(agent, [embed.embed_job()])
        result.put((n, time.perf_counter() - t0, _peak_mb(), _cpu_seconds() - c0))
    finally:
        db.close()


def _child(target, *args) -> tuple[int, float, float, float]:
    ctx = multiprocessing.get_context("spawn")
    result = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, result))
    proc.start()
    out = result.get()
    proc.join()
    return out


def measure(s: Scratch, login: str) -> dict[str, float]:
    """Direct, worker, direct again on the queued texts; chunks/s, ratio, peak RSS (MB), CPU seconds."""
    texts = queued_texts(s)
    load = os.getloadavg()[0]
    n1, t1, rss_direct, cpu1 = _child(_direct, texts)
    n, t, rss_worker, cpu = _child(_worker, login, s.agent.name)
    n2, t2, _, cpu2 = _child(_direct, texts)
    direct = (n1 / t1 + n2 / t2) / 2
    worker = n / t
    cpu_direct = (cpu1 + cpu2) / 2
    per_cpu = (n / cpu) / (n1 / cpu_direct) if cpu and cpu_direct else 0.0
    return {"chunks": len(texts), "embedded": n, "direct": direct, "direct_first": n1 / t1, "direct_again": n2 / t2,
            "worker": worker, "ratio": worker / direct, "rss_worker_mb": rss_worker, "rss_direct_mb": rss_direct,
            "cpu_direct": cpu_direct, "cpu_worker": cpu, "cpu_ratio": per_cpu,
            "load_before": load, "load_after": os.getloadavg()[0]}


def run(ctx, args: argparse.Namespace) -> int:
    from ..memory import embed

    prov = embed.provider()
    if not isinstance(prov, embed.MiniLM):
        print("scsql: bench embed measures the default model (SCSQL_EMBED=default)", file=sys.stderr)
        return 1
    source = f"dataset {args.dataset}" if args.dataset else f"tree {args.tree}"
    with scratch(ctx.admin_conninfo(), "embed") as s:
        t0 = time.perf_counter()
        if args.dataset:
            index_docs(s, corpus_texts(Path(args.dataset), args.limit))
        else:
            files = index_tree(s, Path(args.tree), args.limit)
            source += f" ({files} .py files)"
        print(f"indexed {source} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        login = s.agent.db.conninfo
        r = measure(s, login)
    print(f"embedding {r['chunks']} chunk texts of {source}; model {prov.name}, "
          f"{embed.embed_threads()} thread(s), max {embed.MAX_TOKENS} tokens, worker runs of at most "
          f"{embed.BATCH_TOKENS} tokens")
    print(f"{'':<28} {'chunks/s':>9} {'peak RSS':>10} {'CPU s':>7}")
    print(f"{'ONNX model called directly':<28} {r['direct']:>9.1f} {r['rss_direct_mb']:>7.0f} MB "
          f"{r['cpu_direct']:>7.1f}   (runs {r['direct_first']:.1f} and {r['direct_again']:.1f})")
    print(f"{'scsql worker (embed job)':<28} {r['worker']:>9.1f} {r['rss_worker_mb']:>7.0f} MB {r['cpu_worker']:>7.1f}")
    print(f"worker / direct: x{r['ratio']:.2f} (goal >= 0.9); worker peak RSS "
          f"{r['rss_worker_mb']:.0f} MB (goal < 500 MB)")
    print(f"chunks per CPU second, worker / direct: x{r['cpu_ratio']:.2f}; load average "
          f"{r['load_before']:.1f} before, {r['load_after']:.1f} after")
    return 0


def register(bsub) -> None:
    p = bsub.add_parser("embed", help="scsql worker's embedding throughput against the ONNX model called directly")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--dataset", help="a BEIR dataset directory (corpus.jsonl), e.g. SciFact")
    src.add_argument("--tree", default=sysconfig.get_paths()["stdlib"],
                     help="a source tree whose .py files are chunked as scsql index does (default: the standard library)")
    p.add_argument("--limit", type=int, default=400, help="documents (--dataset) or chunks (--tree) to embed")
    p.set_defaults(bench_func=run)
