"""``scsql bench``: benchmarks that print ratios against a baseline measured
in the same run on the same server, one module a benchmark, each adding
``scsql bench NAME`` with its ``register(subparsers)``. The modules are
imported only when ``scsql bench`` is run (or its help printed): they need
the database drivers, the embedding model and more."""

from __future__ import annotations


def register(commands) -> None:
    commands.add("bench", lambda ctx, args: args.bench_func(ctx, args), "benchmarks against same-run baselines",
        populate=_benches)


def _benches(p) -> None:
    from . import (chain, citus, code_graph, confidence, embed, hooks, index, queue, retrieval, search, serve, start,
                   tools, ui)

    bsub = p.add_subparsers(dest="bench", metavar="BENCH", required=True)
    for bench in (chain, citus, code_graph, confidence, embed, hooks, index, queue, retrieval, search, serve, start,
                  tools, ui):
        bench.register(bsub)
