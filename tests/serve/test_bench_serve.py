"""``scsql bench serve`` runs, small: a few agents over HTTP and over stdio,
every call answered, and the figures printed beside each other."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from psycopg.conninfo import make_conninfo

from ..hook_transport_helpers import ROOT


def test_bench_serve_small(server):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCSQL_")}
    env.update(SCSQL_DSN=make_conninfo(**server.base), PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "scsql", "bench", "serve", "--agents", "4", "--projects", "2",
                        "--stdio-agents", "3", "--seconds", "30", "--calls", "16", "--json"],
                       capture_output=True, text=True, env=env, timeout=900, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    print(r.stdout)
    text, _, figures = r.stdout.partition("\n{")
    out = json.loads("{" + figures)
    assert out["errors"] == {"stdio": 0, "http_same": 0, "http_all": 0}, text
    for phase in ("stdio", "http_same", "http_all"):
        calls = out["phases"][phase]
        for op in ("recall_context", "search", "remember", "hook", "claim_task", "enqueue_task"):
            assert calls[op]["n"] not in ("-", "0"), (phase, op, text)
    assert "p95 http/stdio" in text and "server memory (MB)" in text
    assert "\r" not in r.stderr  # no progress bar in a pipe
