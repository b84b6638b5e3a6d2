"""``scsql bench cli``: how long the everyday commands take, start to exit,
as a ratio to starting Python itself.

Each command is run as a user runs it, a process of its own (``python -m
scsql ...`` with this interpreter, against the server this process is
configured for), alternating with ``python -c pass``; the ratio is taken
pair by pair, so it holds when the machine's speed drifts. The target for
commands that need neither the embedding model nor the MCP SDK is 0.3 s; on a
machine where ``python -c pass`` takes 60 ms that is a ratio of about 5.
The commands only read: they are safe to run against a live server.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

TARGET_SECONDS = 0.3


def _wall(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE)
    return time.perf_counter() - start, proc.returncode


def run(ctx, args) -> int:
    env = dict(os.environ)
    if args.data_dir:
        env["SCSQL_DATA_DIR"] = str(ctx.settings.data_dir)
    commands = [["errors"], ["status"], ["agent", "list"]]
    if args.agent:
        commands.append(["queue", "stats", "--agent", args.agent])
    baseline = [sys.executable, "-c", "pass"]
    rows = []
    for command in commands:
        argv = [sys.executable, "-m", "scsql", *command]
        for _ in range(args.warmup):
            _wall(argv, env)
            _wall(baseline, env)
        times, bases, failed = [], [], 0
        for _ in range(args.runs):
            t, rc = _wall(argv, env)
            b, _rc = _wall(baseline, env)
            times.append(t)
            bases.append(b)
            failed += rc != 0
        ratios = [t / b for t, b in zip(times, bases)]
        rows.append({"command": "scsql " + " ".join(command), "median_s": round(statistics.median(times), 4),
                     "min_s": round(min(times), 4), "max_s": round(max(times), 4),
                     "python_pass_median_s": round(statistics.median(bases), 4),
                     "ratio": round(statistics.median(ratios), 2), "failed_runs": failed})
    if args.json:
        print(json.dumps({"runs": args.runs, "target_s": TARGET_SECONDS, "commands": rows}, indent=2))
        return 0
    print(f"scsql bench cli: {args.runs} run(s) each, alternating with python -c pass; "
          f"ratio = median of the pairwise ratios (target {TARGET_SECONDS} s)")
    print(f"{'command':<36} {'median s':>9} {'min s':>7} {'max s':>7} {'pass s':>7} {'ratio':>6}")
    for r in rows:
        note = f"  ({r['failed_runs']} run(s) failed)" if r["failed_runs"] else ""
        print(f"{r['command'][:36]:<36} {r['median_s']:>9.3f} {r['min_s']:>7.3f} {r['max_s']:>7.3f} "
              f"{r['python_pass_median_s']:>7.3f} {r['ratio']:>6.2f}{note}")
    return 1 if any(r["failed_runs"] for r in rows) else 0


def register(bsub) -> None:
    p = bsub.add_parser("cli", help="start-to-exit time of errors, status, agent list and queue stats, "
                                    "as a ratio to python -c pass")
    p.add_argument("--agent", help="also time queue stats as this agent")
    p.add_argument("--runs", type=int, default=10, help="timed runs of each command (default 10)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs first (default 1)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(bench_func=run)
