"""``scsql bench hooks`` runs the installed hook commands against a scratch
database and prints p50/p95 per event beside true and python -c pass."""

from __future__ import annotations

import os
import subprocess
import sys

from psycopg.conninfo import make_conninfo

from ..hook_transport_helpers import ROOT


def test_bench_hooks_smoke(server):
    env = dict(os.environ, SCSQL_DSN=make_conninfo(**server.base), PYTHONPATH=str(ROOT))
    env.pop("SCSQL_AGENT_DSN", None)
    r = subprocess.run([sys.executable, "-m", "scsql", "bench", "hooks", "--chunks", "0", "--tool-calls", "20",
                        "--rounds", "5", "--warmup", "1", "--handlers", "tests.hook_stub_handlers"],
                       capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    lines = {line.split()[0]: line for line in r.stdout.splitlines() if line.strip()}
    for name in ("true", "python", "PreToolUse", "PostToolUse", "SessionStart", "UserPromptSubmit", "SessionEnd"):
        assert name in lines, r.stdout
    assert "goal: PreToolUse and PostToolUse p95 <= 50 ms" in r.stdout
    rows = [line.split() for line in r.stdout.splitlines() if line.startswith(("PreToolUse", "PostToolUse "))]
    assert all(row[-1] == "0" for row in rows), r.stdout  # no hook failed
    print(r.stdout)


def test_bench_chain_reports_the_captured_path(server):
    env = dict(os.environ, SCSQL_DSN=make_conninfo(**server.base), PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "scsql", "bench", "chain", "--agents", "2", "--seconds", "0.3",
                        "--rounds", "1", "--verify-rows", "100", "--workers", "1"],
                       capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    (line,) = [x for x in r.stdout.splitlines() if x.startswith("captured, signed")]
    assert "group commit, 8 tool calls a transaction" in line
    print(r.stdout)
