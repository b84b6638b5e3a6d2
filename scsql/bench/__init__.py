"""``scsql bench``: benchmarks that print ratios against a baseline measured
in the same run on the same server. Each module listed in ``BENCH_MODULES``
defines ``register(subparsers)``, adding one ``scsql bench NAME`` command."""

from __future__ import annotations

import importlib

BENCH_MODULES: list[str] = [
    "scsql.bench.chain",
    "scsql.bench.queue",
    "scsql.bench.retrieval",
    "scsql.bench.search",
]


def register(sub, add) -> None:
    p = add("bench", lambda ctx, args: args.bench_func(ctx, args), "benchmarks against same-run baselines")
    bsub = p.add_subparsers(dest="bench", metavar="BENCH", required=True)
    for module in BENCH_MODULES:
        importlib.import_module(module).register(bsub)
