"""``scsql bench citus`` runs, small, on the Citus cluster .ci/citus.sh
starts (skipped without one, as in normal CI): the same data on the cluster
and on one server (a database without citus on the coordinator), every call
timed on both, the ratios and the commands sent to the workers printed, both
scratch databases dropped."""

from __future__ import annotations

import os
import subprocess
import sys

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from ..hook_transport_helpers import ROOT

CALLS = ("round trip (select 1)", "remember", "recall_context", "search (BM25, k=10)", "pack (budget 1500)",
         "record_tool_call (capture)", "enqueue_task", "claim_task + complete_task",
         "verify_chain (one chain, auditor)", "search_global", "metrics (administrator)")


def test_bench_citus_small(server):
    if not server.workers:
        pytest.skip("needs Citus (.ci/citus.sh)")
    admin = make_conninfo(**dict(server.base, dbname="postgres"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCSQL_")}
    env.update(SCSQL_DSN=admin, PYTHONPATH=str(ROOT))
    workers = ";".join(make_conninfo(**dict(w, dbname="postgres")) for w in server.workers)
    r = subprocess.run([sys.executable, "-m", "scsql", "bench", "citus", "--cluster", admin, "--workers", workers,
                        "--chunks", "100", "--projects", "2", "--calls", "5", "--shards", "4"],
                       capture_output=True, text=True, env=env, timeout=900, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    print(r.stdout)
    rows = {line[:34].strip(): line[34:].split() for line in r.stdout.splitlines()[2:]}
    for call in CALLS:
        assert call in rows, r.stdout
        assert rows[call][4].endswith("x") and rows[call][5].endswith("x"), rows[call]
        assert rows[call][6].isdigit(), rows[call]  # commands sent to the workers, counted on the cluster
    assert "dropped from every node" in r.stderr and "not dropped" not in r.stderr
    assert "\r" not in r.stderr  # no progress bar in a pipe
    with psycopg.connect(admin) as conn:
        assert conn.execute("select count(*) from pg_database where datname like 'scsql_bench_citus%'").fetchone()[0] == 0
