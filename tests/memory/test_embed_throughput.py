"""The embedding worker's speed and size: texts of similar token length share
an ONNX run under a token budget, batching does not change a vector, the
worker stays under 500 MB resident, and a drain shows a progress bar with
its total and says when the queue is drained. (Throughput against the model
called directly is measured by `scsql bench embed`, not asserted here.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from scsql.core import worker
from scsql.memory import embed


@pytest.fixture(scope="module")
def minilm() -> embed.MiniLM:
    return embed.provider(embed.EmbedSettings(provider="default")).load()


def test_length_batches_group_similar_lengths_under_the_token_budget():
    lengths = [256, 3, 250, 10, 7, 256, 128, 12] * 8
    batches = embed.length_batches(lengths, budget=1024, most=16)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        assert len(b) <= 16 and len(b) * max(lengths[i] for i in b) <= 1024
    flat = [lengths[i] for b in batches for i in b]
    assert flat == sorted(flat)  # similar lengths together: little padding
    assert embed.length_batches([embed.MAX_TOKENS * 4]) == [[0]]  # one text over the budget still runs


def test_batching_by_length_does_not_change_a_vector(minilm):
    texts = ["short", "a somewhat longer sentence about audit chains and hashes",
             " ".join(["tokens"] * 400), "mid length text about embeddings " * 5]
    together = minilm.embed(texts)
    alone = np.vstack([minilm.embed([t]) for t in texts])
    assert np.all(np.sum(together * alone, axis=1) > 0.9999)
    ids = minilm._tokenizer.encode(texts[2]).ids
    assert len(ids) == embed.MAX_TOKENS  # truncated at the model's own maximum sequence length


def _in_a_process(code: str) -> dict:
    """Run CODE in a fresh Python with the default model loaded as ``m``; its printed JSON."""
    code = "import json, resource\nfrom scsql.memory import embed\nm = embed.MiniLM().load()\n" + code
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True,
                         cwd=Path(__file__).resolve().parent.parent.parent)
    return json.loads(out.stdout)


def test_the_embedding_process_stays_under_500_mb():
    result = _in_a_process(
        "texts = [' '.join(f'word{i}x{j}' for j in range(300)) for i in range(24)]\n"
        "texts += ['short text %d' % i for i in range(40)]\n"
        "v = m.embed(texts)\n"
        "print(json.dumps({'n': len(v), 'mb': embed.peak_rss_mb()}))\n")
    assert result["n"] == 64 and result["mb"] < 500, result


def test_the_arena_stays_bounded_over_every_length_under_500_mb():
    # Texts of every length from 2 to 256 tokens, in claims as the worker takes
    # them: every run has a shape of its own, and the memory arena keeps what
    # each run needed. The token budget per run bounds it; RSS after the first
    # claim and at the end differ little.
    result = _in_a_process(
        "def rss():\n"
        "    return int(open('/proc/self/statm').read().split()[1]) * 4096 / 2**20\n"
        "texts = [' '.join(f'w{j}' for j in range(n)) for n in range(1, 128)]\n"
        "texts = [t for pair in zip(texts, reversed(texts)) for t in pair]\n"
        "seen = []\n"
        "for start in range(0, len(texts), 64):\n"
        "    v = m.embed(texts[start:start + 64])\n"
        "    seen.append(rss())\n"
        "print(json.dumps({'arena': m._session.get_session_options().enable_cpu_mem_arena, 'rss': seen,\n"
        "                  'mb': embed.peak_rss_mb()}))\n")
    assert result["arena"] and result["mb"] < 500, result
    assert result["rss"][-1] - result["rss"][0] < 60, result


def test_a_drain_shows_total_and_says_the_queue_is_drained(scsql_db, minilm, capsys):
    agent = scsql_db.agent("thr", scsql_db.project())
    doc = "".join(f"# Section {i}\n\nText of section {i} about topic {i}.\n\n" for i in range(5))
    with agent.transaction() as conn:
        conn.execute("select * from scsql.index_text('doc.md', %s, 'file')", (doc,))
    job = embed.embed_job()
    job.run = lambda a: embed.embed_queued(a, minilm, limit=2)  # three claims: the bar moves
    assert worker.drain(agent, [job], show=True) == 5
    err = capsys.readouterr().err
    assert "embed: 100%" in err and "5/5" in err and "chunk/s" in err
    assert "scsql: embed queue drained: 5 done in" in err
    # Nothing queued: no bar, no line.
    assert worker.drain(agent, [job], show=True) == 0
    assert capsys.readouterr().err == ""
