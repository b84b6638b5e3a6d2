"""``scsql bench queue`` (placeholder until the benchmark lands)."""

from __future__ import annotations


def register(bsub) -> None:
    p = bsub.add_parser("queue", help="task queue throughput against pgbench -N and a peer queue library")
    p.set_defaults(bench_func=lambda ctx, args: 0)
