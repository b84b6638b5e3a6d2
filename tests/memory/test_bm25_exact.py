"""Pruned BM25 (scsql_caller.bm25) is exact: on randomized knowledge bases
(short and long chunks, terms repeated many times, common and rare terms)
the ranking equals scoring every posting (scsql.bm25_prune_postings = 0)
for any k1, b and depth, before and after sources are forgotten and
rewritten (postings go, max_tf stays an upper bound), for one project and
for search_global over a granted project's published knowledge.

Scores are sums of term scores added in the order each path meets them, so
two chunks of equal score (b = 0 makes many) may differ in the last bit and
be ranked either way: rankings are compared as equal scores (to 1e-9) in
the same order, the same chunks at each score, and at the lowest score of
the list (where the depth cuts a tie) any chunks of that score."""

from __future__ import annotations

import random

import pytest
from psycopg import sql

VOCAB = [f"u{i}" for i in range(50)]
WEIGHTS = [1.0 / (i + 1) ** 0.8 for i in range(50)]
PARAMS = ((10, 1.2, 0.75), (40, 1.2, 0.75), (5, 0.5, 1.0), (25, 2.0, 0.0), (60, 1.2, 0.3), (1, 9.0, 0.9))


def _text(rng: random.Random) -> str:
    """A note of 1 to 150 words; now and then one word repeated many times."""
    n = rng.choice([rng.randint(1, 6), rng.randint(10, 60), rng.randint(60, 150)])
    words = rng.choices(VOCAB, WEIGHTS, k=n)
    if rng.random() < 0.15:
        words += [rng.choices(VOCAB, WEIGHTS)[0]] * rng.randint(2, 25)
        rng.shuffle(words)
    return " ".join(words)


def _queries(rng: random.Random, n: int) -> list[str]:
    # A rare term with common ones: rounds whose new essential term holds
    # most of the postings.
    out = ["u0", "u0 u1", "u0 u1 u2", "u1 u2 u3 u4 u5", "u49 u0", "u3 u8 u20", "u49 u5 u0 u1", "u45 u8 u1 u2"]
    while len(out) < n:
        out.append(" ".join(rng.sample(VOCAB[:12], rng.randint(1, 3)) + rng.sample(VOCAB, rng.randint(0, 2))))
    return out


def _index(agent, rng: random.Random, paths: list[str]) -> None:
    with agent.transaction() as conn:
        for path in paths:
            conn.execute("select 1 from scsql.index_text(%s, %s, 'note')", (path, _text(rng)))


def _index_common(agent, rng: random.Random, prefix: str, n: int, common: int, words: int, marks) -> None:
    """N notes: "common" 1 to COMMON times and 5 to WORDS words of VOCAB, and
    each (term, in_note, most) of MARKS 1 to MOST times in note i when in_note(i)."""
    with agent.transaction() as conn:
        for i in range(n):
            text = ["common"] * rng.randint(1, common) + rng.choices(VOCAB, k=rng.randint(5, words))
            for term, in_note, most in marks:
                if in_note(i):
                    text += [term] * rng.randint(1, most)
            rng.shuffle(text)
            conn.execute("select 1 from scsql.index_text(%s, %s, 'note')", (f"{prefix}{i}", " ".join(text)))


def _ranked(agent, fn: str, query: str, depth: int, k1: float, b: float, budget: str | None) -> list:
    """The ranking: (project, path, score rounded to 1e-9), best first."""
    with agent.transaction() as conn:
        if budget is not None:
            conn.execute("select set_config('scsql.bm25_prune_postings', %s, true)", (budget,))
        rows = conn.execute(sql.SQL("select project, source_path, score from scsql.{}(%s, p_mode => 'bm25', "
                                    "p_k => %s, p_depth => %s, p_k1 => %s, p_b => %s)").format(sql.Identifier(fn)),
                            (query, min(depth, 200), depth, k1, b)).fetchall()
    return [(r["project"], r["source_path"], round(r["score"], 9)) for r in rows]


def _same(got: list, full: list) -> bool:
    """Equal up to the order of equal scores, and the choice among chunks
    tied at the lowest score."""
    if [s for _, _, s in got] != [s for _, _, s in full]:
        return False
    last = full[-1][2] if full else None
    groups = lambda r: {s: sorted((p, path) for p, path, t in r if t == s) for _, _, s in r if s != last}
    return groups(got) == groups(full)


def _check(agent, fn: str, queries: list[str]) -> None:
    """Every query, every parameter set: the pruned ranking (the default
    budget, and budgets that take the other pruned paths on small bases)
    equals the full one."""
    for query in queries:
        for depth, k1, b in PARAMS:
            full = _ranked(agent, fn, query, depth, k1, b, "0")
            assert full, query
            for budget in (None, "3000", "400", "15"):
                got = _ranked(agent, fn, query, depth, k1, b, budget)
                assert _same(got, full), (fn, query, depth, k1, b, budget, got, full)


@pytest.mark.parametrize("seed", [1, 2])
def test_pruned_bm25_equals_scoring_every_posting_on_random_data(scsql_db, seed):
    rng = random.Random(seed)
    agent = scsql_db.agent(f"exact{seed}", scsql_db.project())
    paths = [f"n{i}" for i in range(600)]
    _index(agent, rng, paths)
    queries = _queries(rng, 14)
    _check(agent, "search", queries)
    # Sources forgotten and rewritten: postings go, max_tf stays (a bound).
    with agent.transaction() as conn:
        for path in rng.sample(paths, 150):
            conn.execute("select scsql.forget_source(%s)", (path,))
    _index(agent, rng, rng.sample(paths, 150))
    _check(agent, "search", queries)


def test_pruned_search_global_equals_scoring_every_posting_on_random_data(scsql_db):
    """A granted project is ranked over its published postings with their
    statistics: its bounds (max_tf of all its chunks) still hold, and its
    session summaries with the same words stay out."""
    from scsql.api import Api

    rng = random.Random(9)
    pa, pb = scsql_db.project(), scsql_db.project()
    a, b = scsql_db.agent("exact_ga", pa), scsql_db.agent("exact_gb", pb)
    with scsql_db.connect() as conn:
        conn.execute("select scsql.grant_project_read(%s, %s)", (pb, a.name))
        conn.commit()
    _index(b, rng, [f"b{i}" for i in range(400)])
    _index(a, rng, [f"a{i}" for i in range(150)])
    api = Api(b)
    for _ in range(4):
        api.call("summarize_session", summary={"done": [" ".join(["u0"] * 30 + ["u1", "u2"])],
                                               "decisions": [" ".join(rng.choices(VOCAB, WEIGHTS, k=20))]})
    queries = _queries(rng, 8)
    _check(a, "search_global", queries)
    full = _ranked(a, "search_global", "u0 u1 u2", 60, 1.2, 0.75, "0")
    assert {p for p, _, _ in full} == {pa, pb}
    assert not any(path.startswith("session:") for _, path, _ in full)


def test_pruned_bm25_is_exact_when_a_common_term_joins_a_rare_one(scsql_db):
    """A rare term, a term in two notes of five and one in every note: the
    round that adds the middle term to the rare one reads its best chunks
    alone and groups only the few holding the rare term."""
    agent = scsql_db.agent("exact_skew", scsql_db.project())
    _index_common(agent, random.Random(5), "s", 800, 6, 60,
                  (("middle", lambda i: i % 5 < 2, 4), ("rare", lambda i: i % 160 == 0, 3)))
    _check(agent, "search", ["rare middle common", "rare middle", "rare common u0", "middle common u1"])


def test_pruned_bm25_is_exact_when_a_result_holds_one_of_two_rare_terms(scsql_db):
    """Two rare terms, seldom together, and a term in every note: no term is
    required (a note may hold either rare term), yet a note holding only the
    common one cannot rank. With more notes holding a rare term than a round
    completes, the last pass scores the rare terms' postings and completes
    only their notes with the common term (bm25_essential_top)."""
    agent = scsql_db.agent("exact_either", scsql_db.project())
    _index_common(agent, random.Random(7), "e", 900, 8, 70,
                  (("ra", lambda i: i % 11 == 0, 3), ("rb", lambda i: i % 13 == 5, 3)))
    _check(agent, "search", ["common ra rb", "ra rb common u0", "ra common", "rb ra"])


def test_pruned_bm25_is_exact_with_tiers(scsql_db):
    """Long notes where most postings have tf 1 (outside the partial index
    kb_postings_tier_idx, bounded together): three terms of about equal
    frequency and bound, where a note holding two of them at tf 1 cannot
    reach the best but one holding all three can (the tiers, after the
    rounds); and rare terms with a middle term too weak to reach the floor
    of the round that adds it (its postings not read alone), then a term in
    every note; and a middle term whose postings at tf 1 cannot reach that
    floor but others can (only its postings in the partial index read
    alone)."""
    rng = random.Random(11)
    agent = scsql_db.agent("exact_tiers", scsql_db.project())
    with agent.transaction() as conn:
        for i in range(900):
            words = rng.choices(VOCAB, WEIGHTS, k=rng.randint(35, 90)) + ["every"]
            for term, share in (("fa", 0.3), ("fb", 0.3), ("fc", 0.3), ("mid", 0.6), ("r1", 0.06), ("r2", 0.06),
                                ("m2", 0.25)):
                if rng.random() < share:
                    words += [term] * (1 if rng.random() < 0.85 else rng.randint(2, 4 if term != "m2" else 12))
            if rng.random() < 0.03:
                words = words[:rng.randint(3, 20)]  # a short note: its postings are in the partial index
            rng.shuffle(words)
            conn.execute("select 1 from scsql.index_text(%s, %s, 'note')", (f"t{i}", " ".join(words)))
    _check(agent, "search", ["fa fb fc", "fa fb fc u7", "fa fb", "r1 r2 mid every", "r1 mid every", "r1 r2 fa mid",
                             "r1 m2 every", "r1 r2 m2 u1"])


def test_pruned_bm25_is_exact_when_a_rounds_list_comes_from_the_partial_index(scsql_db):
    """A term in most long notes, nearly always once (its postings in the
    partial index, tf > 1 or a short note, are few), added to rare terms: the
    round's list is its partial-index postings with the rest bounded by its
    tf-1 bound, and is made again from every posting when that bound, or too
    short a list, keeps the round from bounding the result; the same for a
    first term with few partial-index postings. With b = 0 a note holding
    the middle term once and the common one many times outranks notes
    holding the middle term twice: a list without it must not bound the
    result."""
    rng = random.Random(23)
    agent = scsql_db.agent("exact_tail", scsql_db.project())
    with agent.transaction() as conn:
        for i in range(900):
            words = rng.choices(VOCAB, WEIGHTS, k=rng.randint(35, 90))
            for term, share, many, most in (("big", 0.8, 0.04, 5), ("wide", 0.5, 0.1, 5), ("r1", 0.02, 0.3, 5),
                                            ("r2", 0.05, 0.2, 5), ("r3", 0.12, 0.1, 5), ("mid", 0.2, 0.1, 3),
                                            ("com", 0.7, 0.9, 10)):
                if rng.random() < share:
                    words += [term] * (1 if rng.random() >= many else rng.randint(2, most))
            if rng.random() < 0.02:
                words = words[:rng.randint(3, 20)]  # a short note: its postings are in the partial index
            rng.shuffle(words)
            conn.execute("select 1 from scsql.index_text(%s, %s, 'note')", (f"b{i}", " ".join(words)))
    _check(agent, "search", ["r1 big u0", "r2 big u0", "r1 r2 big u0", "r3 big u0", "r1 big wide u0", "r2 r3 big u1",
                             "r1 big", "big wide u0", "r3 wide big u0 u1", "r1 mid com", "r2 mid com", "r1 r2 mid com"])


def test_a_filtered_ranking_is_the_full_ranking_of_the_chunks_that_pass_the_filter(scsql_db):
    """With kinds, trust or a time the filter is tried on the best chunks
    first: the result is the unfiltered ranking (every posting scored) of
    the chunks that pass it, cut at the depth, whatever the depth."""
    rng = random.Random(5)
    agent = scsql_db.agent("exact_filter", scsql_db.project())
    kinds = {}
    with agent.transaction() as conn:
        for i in range(160):
            kind = rng.choice(["note", "note", "file", "url"])
            path = f"https://example.com/{i}" if kind == "url" else f"k{i}"
            kinds[path] = kind
            conn.execute("select 1 from scsql.index_text(%s, %s, %s)", (path, _text(rng), kind))
    for query in ["u0", "u0 u1 u2", "u3 u8 u20", "u49 u5 u0 u1"]:
        with agent.transaction() as conn:
            rows = conn.execute("select source_path, score from scsql.search(%s, p_mode => 'bm25', p_k => 200, "
                                "p_depth => 1000)", (query,)).fetchall()
        assert len(rows) < 200  # every chunk holding a term
        for wanted in (["file"], ["url"], ["file", "url"], ["note"]):
            full = [(0, r["source_path"], round(r["score"], 9)) for r in rows if kinds[r["source_path"]] in wanted]
            for depth in (1, 5, 40):
                with agent.transaction() as conn:
                    got = conn.execute("select source_path, score from scsql.search(%s, p_mode => 'bm25', p_k => %s, "
                                       "p_depth => %s, p_kinds => %s)", (query, depth, depth, wanted)).fetchall()
                got = [(0, r["source_path"], round(r["score"], 9)) for r in got]
                assert got and _same(got, full[:depth]), (query, wanted, depth, got, full[:depth])
