"""``scsql bench index``: chunks stored per second by the bulk path (COPY into
scsql.kb_staging, then scsql.index_staged, as ``scsql index`` sends a tree)
against index_text called once per file, over the same synthetic files (the
Markdown files of ``scsql bench search``: ten sections of about 60 words),
each path into a project of its own in one scratch database, in the same
run. The texts are made before either is timed and held by the client;
both paths are timed from the client: index_text a transaction a file, as
an agent calls it (many calls in one transaction would update the same
rows of common terms again and again, each version kept until the
transaction ends), the bulk path BATCH files a transaction as ``scsql
index`` sends them (two batches in flight, one staged while the one before
it is stored).
Afterwards the two projects' statistics are compared (they must be equal)."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from ..core import bulk, roles
from ..core.db import Agent
from ..core.keys import Keystore
from .scratch_db import Scratch, scratch
from .search import _TEXT, SECTIONS, _tqdm


def _other_agent(s: Scratch) -> Agent:
    """A second project of the scratch database and its agent (dropped with it)."""
    name = f"{s.agent.name}_b"
    project = f"{s.project}-b"
    roles.create_project(s.admin, project)
    with tempfile.TemporaryDirectory(prefix="scsql-bench-") as keys:
        roles.create_agent(s.admin, Keystore(Path(keys)), name, project, "developer")
    return Agent(s.agent.db, name)


def _texts(s: Scratch, docs: int) -> list[bulk.Text]:
    with s.connect() as conn:
        rows = conn.execute(f"select d, {_TEXT} as t from generate_series(1, %s) d order by d", (docs,)).fetchall()
    return [bulk.Text(f"src/doc{r['d']}.md", r["t"], "file") for r in rows]


def _run_path(agent: Agent, texts: list[bulk.Text], batch: int, per_call: bool) -> float:
    """Seconds to index TEXTS as AGENT: one call a transaction, or through the bulk path BATCH files a transaction."""
    bar = _tqdm(total=len(texts) * SECTIONS, desc="index_text" if per_call else "bulk", unit="chunk")
    parts = [texts[i:i + batch] for i in range(0, len(texts), batch)]
    t0 = time.perf_counter()
    if per_call:  # as an agent calls it: a transaction a call (whose commit is not waited for)
        for t in texts:
            with agent.transaction() as conn:
                conn.execute("set local synchronous_commit = off")
                conn.execute("select 1 from scsql.index_text(%s, %s, 'file')", (t.path, t.content))
            bar.update(SECTIONS)
    else:
        for part, rows in bulk.index_batches(agent, parts):
            if isinstance(rows, Exception):
                raise rows
            bar.update(len(part) * SECTIONS)
    bar.close()
    return time.perf_counter() - t0


def _stats(s: Scratch, agent: Agent) -> dict:
    with agent.transaction() as conn:
        return conn.execute("select n_chunks, total_len, n_file_chunks, published_chunks, published_len "
                            "from scsql.memory_state").fetchone()


def run(ctx, args: argparse.Namespace) -> int:
    docs = max(1, args.chunks // SECTIONS)
    with scratch(ctx.admin_conninfo(), "index", keep=args.keep) as s:
        other = _other_agent(s)
        texts = _texts(s, docs)
        took_call = _run_path(s.agent, texts, args.batch, per_call=True)
        took_bulk = _run_path(other, texts, args.batch, per_call=False)
        same = _stats(s, s.agent) == _stats(s, other)
    n = docs * SECTIONS
    call, bulk_rate = n / took_call, n / took_bulk
    print(f"\n{n} chunks ({docs} files); index_text a transaction a file, bulk {args.batch} files a transaction; "
          "chunks/s measured from the client")
    print(f"{'path':<44} {'seconds':>8} {'chunks/s':>9}")
    print(f"{'index_text, one call a file':<44} {took_call:>8.1f} {call:>9.0f}")
    print(f"{'bulk (COPY into kb_staging, index_staged)':<44} {took_bulk:>8.1f} {bulk_rate:>9.0f}")
    print(f"bulk / index_text: {bulk_rate / call:.1f}x; goal: bulk >= 3,000 chunks/s "
          f"({'met' if bulk_rate >= 3000 else 'not met'}); statistics of both projects "
          f"{'equal' if same else 'DIFFER'}", file=sys.stdout)
    return 0 if same else 1


def register(bsub) -> None:
    p = bsub.add_parser("index", help="chunks/s of bulk indexing vs index_text, one call a file")
    p.add_argument("--chunks", type=int, default=20_000, help="chunks each path stores (ten a file)")
    p.add_argument("--batch", type=int, default=500, help="files a transaction of the bulk path")
    p.add_argument("--keep", action="store_true", help="keep the scratch database (its name is printed)")
    p.set_defaults(bench_func=run)
