"""``scsql bench``: benchmarks that print ratios against a baseline measured
in the same run on the same server, one module a benchmark, each adding
``scsql bench NAME`` with its ``register(subparsers)``."""

from __future__ import annotations


def register(sub, add) -> None:
    from . import chain, queue, retrieval, search, tools

    p = add("bench", lambda ctx, args: args.bench_func(ctx, args), "benchmarks against same-run baselines")
    bsub = p.add_subparsers(dest="bench", metavar="BENCH", required=True)
    for bench in (chain, queue, retrieval, search, tools):
        bench.register(bsub)
