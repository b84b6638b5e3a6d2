"""``scsql bench code`` runs end to end on a small part of the standard
library: the build beside its same-run baselines (ast.parse, the text index),
who calls X and where is X defined against ast, the speeds beside select 1
and a plain search, the code retrieval set; quiet on stderr in a pipe (no
progress bar), the report on stdout. Its numbers are not judged here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from psycopg.conninfo import make_conninfo

from ..hook_transport_helpers import ROOT


def test_bench_code_runs_small_and_prints_ratios_to_its_baselines(server):
    env = dict(os.environ, SCSQL_DSN=make_conninfo(**server.base), PYTHONPATH=str(ROOT))
    env.pop("SCSQL_AGENT_DSN", None)
    r = subprocess.run([sys.executable, "-m", "scsql", "bench", "code", "--limit", "40", "--questions", "5",
                        "--samples", "3", "--code-size", "40"],
                       capture_output=True, text=True, env=env, timeout=900, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert re.search(r"symbols and graph of 40 files of .*: [\d.]+ s .* \d+ definitions, \d+ references", out), out
    assert re.search(r"[\d.]+ files/s, \d+ symbols/s; baselines of this run: ast.parse [\d.]+ files/s .*"
                     r"text index \(chunks\) [\d.]+ files/s", out), out
    assert re.search(r"who calls X \(5 functions.*precision [\d.]+, recall [\d.]+", out), out
    assert re.search(r"where is X defined \(5 names .* repo_map [\d.]+%", out), out
    table = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line[:1].isalpha() and "_" in line.split()[0]}
    for op in ("select_1", "search_bm25", "reindex_text_only", "reindex_one_file", "reindex_inside", "repo_map_1000",
               "file_card"):
        p50, p95, to_one, to_search = table[op]
        assert float(p50) > 0 and float(p95) >= float(p50) and to_one.endswith("x") and to_search.endswith("x"), out
    assert table["select_1"][2] == "1.0x" and table["search_bm25"][3] == "1.00x", out
    slowest = re.search(r"slowest re-indexes of 3 files: (.*)", out)
    assert slowest and len(re.findall(r"\S+\.py \(\d+ KB\) \d+ ms", slowest.group(1))) == 3, out
    assert re.search(r"code retrieval set, name queries \(\d+ test\): nDCG@10 BM25 [\d.]+, with symbol-aware", out), out
    assert "\r" not in r.stderr and "file/s]" not in r.stderr, r.stderr  # no progress bar in a pipe
    print(out)
