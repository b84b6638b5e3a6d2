"""placeholder"""


def register(bsub) -> None:
    p = bsub.add_parser("retrieval", help="(in progress)")
    p.set_defaults(bench_func=lambda ctx, args: 0)
