"""Fusion never hurts: results are prefix-stable (the first 5 of k = 20 are
k = 5), a hit only the vector branch found comes back only above the
relevance floor, and score fusion keeps BM25's clear first hit first where
reciprocal rank fusion would let weak similarities outvote it."""

from __future__ import annotations

import numpy as np
import pytest

from scsql.memory.embed import DEFAULT_MODEL, vector_literal

from ..helpers import agent_query as q, agent_search as search


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def _at_cosine(target: np.ndarray, cos: float, rng) -> np.ndarray:
    """A unit vector whose cosine similarity with the unit TARGET is COS."""
    u = rng.normal(size=target.shape)
    u = _unit(u - u.dot(target) * target)
    return cos * target + np.sqrt(1 - cos * cos) * u


def _index_with_vectors(agent, docs: dict[str, tuple[str, np.ndarray]]) -> None:
    for path, (text, _) in docs.items():
        q(agent, "select * from scsql.index_text(%s, %s, 'note')", path, text)
    hashes = {r["path"]: r["chunk_hash"] for r in q(agent, "select s.path, c.chunk_hash from scsql.kb_chunks c "
                                                           "join scsql.kb_sources s using (project_id, source_id)")}
    with agent.transaction() as conn:
        token = conn.execute("select claim_token from scsql.embed_claim(%s, 1000) limit 1",
                             (DEFAULT_MODEL,)).fetchone()["claim_token"]
        conn.execute("select scsql.embed_store(%s, %s, %s::text[], %s::vector[])",
                     (DEFAULT_MODEL, token, [hashes[p] for p in docs], [vector_literal(v) for _, v in docs.values()]))


@pytest.fixture
def corpus(scsql_db):
    """120 notes drawn from a small vocabulary, with vectors in a few clusters:
    many chunks share terms and lie near the query, so the branch lists of
    depth 20 and 40 differ."""
    rng = np.random.default_rng(5)
    a = scsql_db.agent("prefix", scsql_db.project())
    words = [f"w{i}" for i in range(40)]
    centres = [_unit(rng.normal(size=384)) for _ in range(4)]
    docs = {}
    for i in range(120):
        text = " ".join(rng.choice(words, size=12))
        docs[f"n/{i}"] = (text, _unit(centres[i % 4] + 0.6 * _unit(rng.normal(size=384))))
    _index_with_vectors(a, docs)
    return a, centres, rng


@pytest.mark.parametrize("mode", ["hybrid", "bm25", "vector"])
def test_first_five_of_k20_are_the_k5_results(corpus, mode):
    a, centres, rng = corpus
    for i in range(6):
        query = f"w{i} w{i + 7} w{i + 13}"
        emb = vector_literal(_unit(centres[i % 4] + 0.5 * _unit(rng.normal(size=384))))
        kw = {"mode": mode, "query_embedding": emb, "model": DEFAULT_MODEL}
        five = [(h["source_path"], h["score"]) for h in search(a, query, k=5, **kw)]
        twenty = [(h["source_path"], h["score"]) for h in search(a, query, k=20, **kw)]
        assert len(five) == 5 and len(twenty) == 20
        assert twenty[:5] == five, (mode, query)


def test_vector_hits_below_the_floor_do_not_come_back_when_nothing_matches(scsql_db):
    rng = np.random.default_rng(9)
    a = scsql_db.agent("floor", scsql_db.project())
    target = _unit(rng.normal(size=384))
    _index_with_vectors(a, {f"doc/{i}": (f"ordinary note {i} about gardening", _at_cosine(target, 0.1, rng))
                            for i in range(30)} | {"doc/near": ("tomatoes need sun", _at_cosine(target, 0.8, rng))})
    emb = vector_literal(target)
    # Nothing shares a term with the query; only one chunk is close to it.
    for mode in ("hybrid", "vector"):
        hits = search(a, "quantum chromodynamics", mode=mode, query_embedding=emb, model=DEFAULT_MODEL)
        assert [h["source_path"] for h in hits] == ["doc/near"], mode
    # Without the floor the unrelated notes fill k: the floor is what drops them.
    assert len(search(a, "quantum chromodynamics", query_embedding=emb, model=DEFAULT_MODEL,
                      min_similarity=-1)) == 10
    # A far query embedding finds nothing at all.
    far = vector_literal(_unit(rng.normal(size=384)))
    assert search(a, "quantum chromodynamics", query_embedding=far, model=DEFAULT_MODEL) == []
    # A BM25 hit is never dropped for its low similarity.
    hits = search(a, "gardening", query_embedding=far, model=DEFAULT_MODEL, k=40)
    assert len(hits) == 30 and all("bm25" in h["retrievers"] for h in hits)


def test_score_fusion_keeps_bm25s_clear_first_hit_and_adds_a_close_vector_match(scsql_db):
    """BM25 ranks the method first by a wide margin; the vector branch is
    lukewarm about everything (its first hits reach 0.45 similarity and
    barely match the words). Reciprocal rank fusion lets those ranks outvote
    BM25's first hit; score fusion does not. A chunk only the vector branch
    finds, very close to the query, comes into the top 3."""
    rng = np.random.default_rng(11)
    a = scsql_db.agent("scorefuse", scsql_db.project())
    target = _unit(rng.normal(size=384))
    docs = {
        "client.py#initialize": ("ClientSession initialize sends the initialize request and waits for the server "
                                 "capabilities", _at_cosine(target, 0.3, rng)),
        "client.py#send": ("session send request", _at_cosine(target, 0.45, rng)),
        "client.py#close": ("session close", _at_cosine(target, 0.44, rng)),
        "client.py#open": ("session open", _at_cosine(target, 0.43, rng)),
        "server.py#hello": ("handshake greeting negotiation of capabilities", _at_cosine(target, 0.9, rng)),
    } | {f"other/{i}": (f"unrelated text {i}", _at_cosine(target, 0.05, rng)) for i in range(20)}
    _index_with_vectors(a, docs)
    query = "ClientSession initialize"
    kw = {"query_embedding": vector_literal(target), "model": DEFAULT_MODEL}
    bm25 = [h["source_path"] for h in search(a, query, mode="bm25")]
    assert bm25[0] == "client.py#initialize"
    rrf = [h["source_path"] for h in search(a, query, fusion="rrf", **kw)]
    assert rrf[0] != "client.py#initialize"  # the failure score fusion removes
    hybrid = [h["source_path"] for h in search(a, query, **kw)]
    assert hybrid[0] == "client.py#initialize"
    assert "server.py#hello" in hybrid[:3]


def _fusion_over_every_bm25_score(agent, fn: str, query: str, emb: str, floor: float = 0.2) -> list:
    """Runs FN (search or search_global) hybrid with k = 10 as AGENT, checks
    that it is score fusion over every chunk's BM25 score (BM25 alone, k 200)
    and the vector branch's best 40, and returns the hits BM25 ranks below
    its best 10 (bm25_rank null, yet retrieved by bm25)."""
    def run(**kw):
        extra = "".join(f", p_{k} => %s" for k in kw)
        return {(h["project"], h["source_path"]): h for h in q(agent, f"select * from scsql.{fn}(%s{extra})", query,
                                                                 *kw.values())}

    bm25 = {key: h["score"] for key, h in run(mode="bm25", k=200, depth=1000).items()}
    vec = {key: h["score"] for key, h in run(mode="vector", k=40, query_embedding=emb, model=DEFAULT_MODEL,
                                            min_similarity=-1).items()}
    bmax = max(bm25.values())
    fused = {key: s / bmax for key, s in bm25.items()}
    for key, sim in vec.items():
        if key in bm25 or sim >= floor:
            fused[key] = fused.get(key, 0.0) + max(sim - floor, 0.0) / (1 - floor)
    want = sorted(fused.items(), key=lambda kv: -kv[1])[:10]
    hits = q(agent, f"select * from scsql.{fn}(%s, p_k => 10, p_query_embedding => %s, p_model => %s)",
             query, emb, DEFAULT_MODEL)
    # The same scores in the same order (chunks of equal score may swap).
    assert [round(h["score"], 9) for h in hits] == [round(s, 9) for _, s in want], query
    last = round(want[-1][1], 9)
    assert {(h["project"], h["source_path"]) for h in hits if round(h["score"], 9) > last} == \
        {key for key, s in want if round(s, 9) > last}, query
    below = []
    for h in hits:
        key = (h["project"], h["source_path"])
        assert ("bm25" in h["retrievers"]) == (key in bm25), (query, key)
        if h["bm25_rank"] is None and "bm25" in h["retrievers"]:
            below.append(key)
            assert sum(s >= bm25[key] for k, s in bm25.items() if k != key) >= 10
    return below


def test_score_fusion_gives_every_vector_hit_its_bm25_score(corpus):
    """Hybrid search (k = 10) is score fusion over the whole BM25 ranking:
    BM25 ranks only its best k, and each vector hit below them is given its
    BM25 score. Computed from BM25 over every chunk and the vector branch's
    best 40, fusion must give the same results and scores; some of them must
    be vector hits BM25 ranks below its best 10, or the test would not tell
    the two apart."""
    a, centres, rng = corpus
    below = []
    for i in range(6):
        emb = vector_literal(_unit(centres[i % 4] + 0.5 * _unit(rng.normal(size=384))))
        below += _fusion_over_every_bm25_score(a, "search", f"w{i} w{i + 7} w{i + 13}", emb)
    assert below


def test_search_global_scores_another_projects_vector_hits_by_its_published_chunks(scsql_db, corpus):
    """Over a project granted for reading, BM25 uses the statistics of its
    published chunks: the vector hits BM25 ranks below its best k are scored
    with them too. The corpus's project also holds an unpublished session
    summary of the same words, so its whole statistics differ."""
    a, centres, rng = corpus
    q(a, "select * from scsql.summarize_session(%s::jsonb)",
      '{"done": "' + " ".join(f"w{i}" for i in range(20)) + '"}')
    reader = scsql_db.agent("fusereader", scsql_db.project())
    _index_with_vectors(reader, {f"own/{i}": (" ".join(rng.choice([f"w{j}" for j in range(40)], size=12)),
                                             _unit(centres[i % 4] + 0.6 * _unit(rng.normal(size=384))))
                                 for i in range(30)})
    project = q(a, "select p.name from scsql.projects p where p.project_id = scsql_caller.project_id()")[0]["name"]
    with scsql_db.connect(autocommit=True) as admin:
        admin.execute("select scsql.grant_project_read(%s, %s)", (project, reader.name))
    below = []
    for i in range(6):
        emb = vector_literal(_unit(centres[i % 4] + 0.5 * _unit(rng.normal(size=384))))
        below += _fusion_over_every_bm25_score(reader, "search_global", f"w{i} w{i + 7} w{i + 13}", emb)
    assert any(p == project for p, _ in below), below
