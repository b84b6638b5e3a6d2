"""``scsql bench confidence``: whether memory says when it has nothing.

The corpus is the sessions of tests/data/recall_by_time.json (each turn
indexed as a note: the question and its answer). Two sets of questions are
weighed on it, and reported apart:

* calibration: that set's 70 questions (answerable) and
  tests/data/unanswerable.json (questions about the same project that none of
  its sessions answers), the set the floor in
  scsql_caller.confidence_levels was chosen on;
* held-out: tests/data/unanswerable_heldout.json, written separately and
  never used to choose the floor: its unanswerable questions and its
  answerable ones (each answered by one turn).

Each question is searched as the search tool searches it (a time it names
is left out of the words searched: core/when.py) and weighed by
scsql.search_confidence. Printed for each set: of the unanswerable
questions, the share flagged not found (level none; goal at least 0.8); of
the answerable ones, the share wrongly flagged not found (goal at most 0.1),
and the shares at other floors (on the calibration set, how the floor was
chosen). With an embedding provider (SCSQL_EMBED) the search is hybrid,
else BM25 only. Everything lives in a scratch database dropped at the end.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..core import when
from .scratch_db import Scratch, scratch

FLOORS = [0.3, 0.34, 0.36, 0.38, 0.4, 0.42, 0.45, 0.5, 0.55, 0.6, 0.7, 0.8]


def default_data() -> Path:
    return Path(__file__).resolve().parents[2] / "tests" / "data"


@dataclass
class QuestionSet:
    name: str
    answerable: list[str]
    unanswerable: list[str]


def load(data: Path) -> tuple[dict, list[QuestionSet]]:
    """The corpus, and the calibration and held-out sets."""
    doc = json.loads((data / "recall_by_time.json").read_text())
    unanswerable = json.loads((data / "unanswerable.json").read_text())["questions"]
    held = json.loads((data / "unanswerable_heldout.json").read_text())
    return doc, [QuestionSet("calibration", [q["question"] for q in doc["questions"]], unanswerable),
                 QuestionSet("held-out", [q["question"] for q in held["answerable"]], held["questions"])]


def index_sessions(s: Scratch, doc: dict) -> int:
    n = 0
    with s.agent.transaction() as conn:
        for sess in doc["sessions"]:
            for i, t in enumerate(sess["turns"]):
                conn.execute("select 1 from scsql.index_text(%s, %s, 'note', p_occurred_at => %s)",
                             (f"sessions/{sess['id']}/{i}", f"{t['user']}\n\n{t['assistant']}", t["at"]))
                n += 1
    return n


def weigh(s: Scratch, question: str, now: dt.datetime, prov) -> dict:
    span = when.read(question, now)
    text = when.query_of(span, question) if span is not None else question
    emb, model = (None, None)
    if prov is not None:
        from ..memory import embed

        emb, model = embed.vector_literal(prov.embed([text])[0]), prov.name
    with s.agent.transaction() as conn:
        return conn.execute("select * from scsql.search_confidence(%s, p_query_embedding => %s, p_model => %s)",
                            (text, emb, model)).fetchone()


def added_cost(s: Scratch, questions: list[str]) -> tuple[float, float]:
    """Mean milliseconds of a search (k 10, BM25) and of answer_confidence over its rows."""
    search = answer = 0.0
    with s.agent.transaction() as conn:
        for q in questions:
            t0 = time.perf_counter()
            rows = conn.execute("select content, score, bm25_rank, vector_rank from scsql.search(%s)", (q,)).fetchall()
            t1 = time.perf_counter()
            conn.execute("select * from scsql_caller.answer_confidence(%s, %s::text[], %s::float8[], %s::integer[], "
                         "%s::integer[])", (q, [r["content"] for r in rows], [r["score"] for r in rows],
                                            [r["bm25_rank"] for r in rows], [r["vector_rank"] for r in rows])).fetchone()
            search += t1 - t0
            answer += time.perf_counter() - t1
    return 1000 * search / len(questions), 1000 * answer / len(questions)


def report(qs: QuestionSet, pos: list[dict], neg: list[dict], verbose: bool) -> None:
    """One set's shares, levels and the shares at other floors."""
    print(f"{qs.name}: {len(qs.answerable)} answerable and {len(qs.unanswerable)} unanswerable questions")
    flagged = sum(not r["found"] for r in neg) / len(neg)
    wrong = sum(not r["found"] for r in pos) / len(pos)
    print(f"  unanswerable flagged not found: {flagged:.3f} (goal >= 0.8)")
    print(f"  answerable wrongly flagged not found: {wrong:.3f} (goal <= 0.1)")
    for name, rows in (("answerable", pos), ("unanswerable", neg)):
        levels = {lv: sum(r["level"] == lv for r in rows) for lv in ("high", "medium", "low", "none")}
        print(f"    {name:13} levels: " + ", ".join(f"{lv} {c}" for lv, c in levels.items()))
    print("  floor  unanswerable flagged  answerable wrongly flagged")
    for f in FLOORS:
        print(f"  {f:5.2f}  {sum(r['confidence'] < f for r in neg) / len(neg):20.3f}"
              f"  {sum(r['confidence'] < f for r in pos) / len(pos):26.3f}")
    if verbose:
        for name, questions, rows in (("answerable", qs.answerable, pos), ("unanswerable", qs.unanswerable, neg)):
            for q, r in zip(questions, rows, strict=True):
                print(f"{qs.name} {name[:3]} {r['confidence']:.2f} {r['level']:6} {q}", file=sys.stderr)


def run(ctx, args: argparse.Namespace) -> int:
    data = Path(args.data) if args.data else default_data()
    doc, sets = load(data)
    now = dt.datetime.fromisoformat(doc["now"].replace("Z", "+00:00"))
    prov = None
    if args.embed:
        from ..memory import embed

        prov = embed.provider()
    with scratch(ctx.admin_conninfo(), "confidence") as s:
        n = index_sessions(s, doc)
        if prov is not None:
            from ..memory import embed
            while embed.embed_queued(s.agent, prov, limit=64):
                pass
        t0 = time.perf_counter()
        weighed = [([weigh(s, q, now, prov) for q in qs.answerable], [weigh(s, q, now, prov) for q in qs.unanswerable])
                   for qs in sets]
        took = time.perf_counter() - t0
        cost = added_cost(s, sets[0].answerable + sets[0].unanswerable)
    print(f"corpus: {n} turns of {len(doc['sessions'])} sessions; retrievers: "
          f"{'hybrid, ' + prov.name if prov else 'BM25 only'}; the floor was chosen on the calibration set")
    for qs, (pos, neg) in zip(sets, weighed, strict=True):
        report(qs, pos, neg, args.verbose)
    total = sum(len(p) + len(q) for p, q in weighed)
    print(f"search_confidence: {1000 * took / total:.1f} ms a question; search alone "
          f"{cost[0]:.1f} ms, the answer's confidence of its rows (what the MCP tool adds) {cost[1]:.1f} ms")
    return 0


def register(bsub) -> None:
    p = bsub.add_parser("confidence", help="how often search_confidence says nothing relevant, on answerable "
                                           "and unanswerable questions (calibration and held-out sets), in a "
                                           "scratch database")
    p.add_argument("--data", default=None, help="directory with recall_by_time.json, unanswerable.json and "
                                                "unanswerable_heldout.json (default: the source tree's tests/data)")
    p.add_argument("--embed", action="store_true", help="hybrid search with the embedding provider (SCSQL_EMBED)")
    p.add_argument("--verbose", action="store_true", help="each question's confidence and level, on stderr")
    p.set_defaults(bench_func=run)
