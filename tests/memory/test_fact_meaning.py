"""Contradictions between facts by meaning, without a model: measured on
tests/data/fact_meaning_pairs.jsonl, 82 pairs written by hand (not from
templates): facts that contradict each other in other words (another tool in
the same role, a negation, an antonym, another number), facts that say the
same in other words, and facts of the same area that are unrelated."""

from __future__ import annotations

import json
from pathlib import Path

PAIRS = [json.loads(line) for line in (Path(__file__).parent.parent / "data" / "fact_meaning_pairs.jsonl").read_text().splitlines()]


def _scores(rows):
    out = {}
    for label in ("conflict", "duplicate"):
        tp = sum(1 for want, got in rows if want == got == label)
        predicted = sum(1 for _, got in rows if got == label)
        actual = sum(1 for want, _ in rows if want == label)
        out[label] = (tp / predicted if predicted else 0.0, tp / actual if actual else 0.0)
    return out


def test_contradictions_by_meaning_on_the_labelled_pairs(scsql_db, capsys):
    with scsql_db.connect() as conn:
        got = [(p["label"], conn.execute("select scsql._fact_relation(%s, %s, %s, %s) as r",
                                         (p["b"]["key"], p["b"]["value"], p["a"]["key"], p["a"]["value"])
                                         ).fetchone()["r"]) for p in PAIRS]
    report = {}
    for split in ("tune", "holdout", "all"):
        rows = [g for p, g in zip(PAIRS, got) if split in ("all", p["split"])]
        report[split] = _scores(rows)
        with capsys.disabled():
            print(f"\nfacts by meaning, {split} ({len(rows)} pairs): " + ", ".join(
                f"{label} precision {p:.2f} recall {r:.2f}" for label, (p, r) in report[split].items()))
    with capsys.disabled():
        for p, (want, have) in zip(PAIRS, got):
            if want != have:
                print(f"  {p['split']}: {want} taken for {have}: {p['a']['value']!r} / {p['b']['value']!r}")
    assert len(PAIRS) >= 80
    conflict = report["all"]["conflict"]
    assert conflict[0] >= 0.8 and conflict[1] >= 0.6, report


def test_a_key_naming_another_subject_is_never_folded_into_another_fact(scsql_db):
    """remember refreshes a fact that says the same under another key instead
    of storing a second; a key whose own terms name another subject (old.three
    beside new.three, each value naming its key) is that subject's fact, stored
    under its key, and at most flagged as a possible conflict."""
    agent = scsql_db.agent("meaning_keys", scsql_db.project())
    pairs = [("old.three", "value of old.three"), ("new.three", "value of new.three"),
             ("build.linux", "runs the build on linux"), ("build.windows", "runs the build on windows")]
    with agent.transaction() as conn:
        stored = [conn.execute("select key, stored from scsql.remember(%s, %s)", pair).fetchone() for pair in pairs]
        keys = {r["key"] for r in conn.execute("select key from scsql.memory_facts")}
    assert [r["key"] for r in stored] == [k for k, _ in pairs], stored
    assert {r["stored"] for r in stored} == {"memory"} and {k for k, _ in pairs} <= keys
