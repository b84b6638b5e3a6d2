"""``scsql bench chain``: chained, signed inserts against plain inserts."""


def register(bsub) -> None:
    p = bsub.add_parser("chain", help="chained, signed inserts vs plain inserts; verification rows/s")
    p.set_defaults(bench_func=lambda ctx, args: 0)
