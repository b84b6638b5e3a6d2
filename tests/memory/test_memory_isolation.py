"""What each kind of reader sees of a project's memory.

Project B is filled through the real write paths: working-memory facts (one
archived by eviction), files, a note, a URL, learnings from failed outcomes
(internal and public) and a session summary, all embedded. Then, table by
table and through search, search_global, pack and recall_context:

* an agent of B sees all of it;
* an agent granted read access to B (grant_project_read) sees only B's
  published knowledge (sources of kind file, url and note, with their
  chunks, postings, vocabulary and embeddings), never facts, archived
  facts, learnings or session summaries;
* an agent of a third project without a grant sees nothing of B.
"""

from __future__ import annotations

import numpy as np
import pytest

from scsql.memory.embed import DEFAULT_MODEL, vector_literal
from scsql.api import Api

PUBLISHED = ("file", "url", "note")
# One word per kind of content, found nowhere else.
HIDDEN_WORDS = {"archived_fact": "orchid", "learning": "zeppelin", "public_learning": "quasar",
                "session_summary": "marmoset", "fact": "walrus"}
SHARED_WORDS = {"file": "telescope", "note": "nebula", "url": "starchart"}


def q(agent, sql, *args):
    with agent.transaction() as conn:
        return conn.execute(sql, args).fetchall()


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


@pytest.fixture
def world(scsql_db):
    pa, pb, pc = scsql_db.project(), scsql_db.project(), scsql_db.project()
    a = scsql_db.agent("reader", pa)
    b1, b2 = scsql_db.agent("author", pb), scsql_db.agent("colleague", pb)
    c = scsql_db.agent("stranger", pc)
    with scsql_db.connect() as conn:
        conn.execute("select scsql.grant_project_read(%s, %s)", (pb, a.name))
        conn.commit()
    q(a, "select * from scsql.index_text('own.md', 'the reader''s own telescope notes', 'note')")
    q(c, "select * from scsql.index_text('own.md', 'the stranger''s own telescope notes', 'note')")

    # Working memory: the orchid fact has the lowest importance, so the 101st fact archives it.
    api = Api(b1)
    api.call("remember", key="vault.combination", value="the vault combination is orchid 42", importance=1)
    with b1.transaction() as conn:
        conn.execute("select count(*) from (select scsql.remember('filler.' || i, 'filler fact ' || i, 3) "
                     "from generate_series(1, 99) i) x")
    api.call("remember", key="pet", value="the office walrus is called Bob", importance=5)
    # Published knowledge.
    q(b1, "select * from scsql.index_text('src/optics.py', %s, 'file')",
      "def point_telescope(target):\n    return target\n")
    q(b1, "select * from scsql.index_text('notes/catalogue', 'the nebula catalogue is published weekly', 'note')")
    q(b1, "select * from scsql.index_text('https://example.com/sky', 'external starchart of the northern sky', 'url')")
    # Derived knowledge.
    api.call("record_outcome", kind="failed", summary="the zeppelin deploy failed on migration 12", task_ref="T-1")
    api.call("record_outcome", kind="failed", summary="quasar cache warmed the wrong region", task_ref="T-1",
             classification="public")
    api.call("summarize_session", summary={"done": ["calibrated the marmoset pipeline"],
                                           "decisions": ["keep the marmoset pipeline"]})
    # Every chunk of B embedded; the learning's vector is the one the attacker will query with.
    rng = np.random.default_rng(11)
    hashes = [r["chunk_hash"] for r in q(b1, "select distinct chunk_hash from scsql.kb_chunks")]
    vectors = {h: _unit(rng.normal(size=384)) for h in hashes}
    # Vectors an MCP server with the model loaded stored inline are replaced:
    # the administrator drops them and queues every chunk again; B's worker
    # claims them all and stores these.
    with scsql_db.connect() as conn:
        conn.execute("delete from scsql.kb_embeddings e using scsql.projects p "
                     "where p.project_id = e.project_id and p.name = %s", (pb,))
        # (Committed first: on Citus a transaction may not touch a shard as the
        # administrator and then, in the definer function, as the owner.)
        conn.commit()
        conn.execute("select scsql.set_embedding_model(%s, %s, 384)", (pb, DEFAULT_MODEL))
        conn.commit()
    with b1.transaction() as conn:
        token = conn.execute("select claim_token from scsql.embed_claim(%s, 1000) limit 1",
                             (DEFAULT_MODEL,)).fetchone()["claim_token"]
        conn.execute("select scsql.embed_store(%s, %s, %s::text[], %s::vector[])",
                     (DEFAULT_MODEL, token, hashes, [vector_literal(v) for v in vectors.values()]))
    return scsql_db, pb, a, b1, b2, c, vectors


def _admin_view(db, project: str) -> dict[str, set]:
    """Rows of B as the owner sees them, whole and restricted to published sources."""
    with db.connect() as conn:
        pid = conn.execute("select project_id from scsql.projects where name = %s", (project,)).fetchone()["project_id"]

        def rows(sql):
            return {tuple(r.values()) for r in conn.execute(sql, {"p": pid, "kinds": list(PUBLISHED)}).fetchall()}

        shared_chunks = ("select c.chunk_id from scsql.kb_chunks c join scsql.kb_sources s using (project_id, source_id) "
                         "where c.project_id = %(p)s and s.kind = any(%(kinds)s)")
        return {
            "pid": pid,
            "kb_sources": rows("select source_id from scsql.kb_sources where project_id = %(p)s"),
            "kb_sources/shared": rows("select source_id from scsql.kb_sources where project_id = %(p)s "
                                      "and kind = any(%(kinds)s)"),
            "kb_chunks": rows("select chunk_id from scsql.kb_chunks where project_id = %(p)s"),
            "kb_chunks/shared": rows(shared_chunks),
            "kb_postings": rows("select term_id, chunk_id from scsql.kb_postings where project_id = %(p)s"),
            "kb_postings/shared": rows("select term_id, chunk_id from scsql.kb_postings where project_id = %(p)s "
                                       f"and chunk_id in ({shared_chunks})"),
            "kb_terms": rows("select term_id from scsql.kb_terms where project_id = %(p)s"),
            "kb_terms/shared": rows("select distinct term_id from scsql.kb_postings where project_id = %(p)s "
                                    f"and chunk_id in ({shared_chunks})"),
            "kb_embeddings": rows("select chunk_hash from scsql.kb_embeddings where project_id = %(p)s"),
            "kb_embeddings/shared": rows("select distinct c.chunk_hash from scsql.kb_chunks c join scsql.kb_sources s "
                                         "using (project_id, source_id) where c.project_id = %(p)s "
                                         "and s.kind = any(%(kinds)s)"),
            "memory_facts": rows("select key from scsql.memory_facts where project_id = %(p)s"),
            "kinds": rows("select kind from scsql.kb_sources where project_id = %(p)s"),
        }


def _seen(agent, pid: int) -> dict[str, set]:
    def rows(sql):
        return {tuple(r.values()) for r in q(agent, sql, pid)}

    return {
        "kb_sources": rows("select source_id from scsql.kb_sources where project_id = %s"),
        "kb_chunks": rows("select chunk_id from scsql.kb_chunks where project_id = %s"),
        "kb_postings": rows("select term_id, chunk_id from scsql.kb_postings where project_id = %s"),
        "kb_terms": rows("select term_id from scsql.kb_terms where project_id = %s"),
        "kb_embeddings": rows("select chunk_hash from scsql.kb_embeddings where project_id = %s"),
        "memory_facts": rows("select key from scsql.memory_facts where project_id = %s"),
        "memory_state": rows("select project_id from scsql.memory_state where project_id = %s"),
    }


def test_each_reader_sees_exactly_what_it_may_table_by_table(world):
    db, pb, a, _b1, b2, c, _ = world
    full = _admin_view(db, pb)
    # B really holds every kind of content, and some of it is hidden from readers.
    assert full["kinds"] == {(k,) for k in ("file", "note", "url", "learning", "session_summary", "archived_fact")}
    for table in ("kb_sources", "kb_chunks", "kb_postings", "kb_terms", "kb_embeddings"):
        assert full[f"{table}/shared"] and full[f"{table}/shared"] < full[table], table
    pid = full["pid"]

    colleague = _seen(b2, pid)
    for table in ("kb_sources", "kb_chunks", "kb_postings", "kb_terms", "kb_embeddings", "memory_facts"):
        assert colleague[table] == full[table], table
    assert colleague["memory_state"] == {(pid,)}

    reader = _seen(a, pid)
    for table in ("kb_sources", "kb_chunks", "kb_postings", "kb_terms", "kb_embeddings"):
        assert reader[table] == full[f"{table}/shared"], table
    assert reader["memory_facts"] == set()
    kinds = {r["kind"] for r in q(a, "select kind from scsql.kb_sources where project_id = %s", pid)}
    assert kinds == set(PUBLISHED)
    hidden_terms = {r["term"] for r in q(b2, "select term from scsql.kb_terms where project_id = %s", pid)} - {
        r["term"] for r in q(a, "select term from scsql.kb_terms where project_id = %s", pid)}
    assert {"zeppelin", "quasar", "marmoset", "orchid", "walrus"} & hidden_terms == {
        "zeppelin", "quasar", "marmoset", "orchid"}  # walrus is in working memory, never in the knowledge base

    stranger = _seen(c, pid)
    assert all(rows == set() for rows in stranger.values()), stranger


def _projects(rows) -> set[str]:
    return {r["project"] for r in rows}


def test_search_pack_and_recall_show_a_reader_only_published_knowledge(world):
    _db, pb, a, _b1, b2, c, vectors = world
    for word in HIDDEN_WORDS.values():
        assert pb not in _projects(q(a, "select * from scsql.search_global(%s, p_k => 50)", word)), word
        assert pb not in _projects(q(c, "select * from scsql.search_global(%s, p_k => 50)", word)), word
        assert q(a, "select * from scsql.search(%s)", word) == []
    for kind, word in SHARED_WORDS.items():
        hits = [h for h in q(a, "select * from scsql.search_global(%s, p_k => 50)", word) if h["project"] == pb]
        assert hits and {h["source_kind"] for h in hits} == {kind}, word
        assert pb not in _projects(q(c, "select * from scsql.search_global(%s, p_k => 50)", word)), word
    # A colleague in B finds everything that is in the knowledge base.
    for word in ("orchid", "zeppelin", "quasar", "marmoset", *SHARED_WORDS.values()):
        assert q(b2, "select * from scsql.search(%s)", word), word
    # The vector branch: the attacker queries with the learning's own vector.
    learning_hash = q(b2, "select c.chunk_hash from scsql.kb_chunks c join scsql.kb_sources s "
                          "using (project_id, source_id) where s.kind = 'learning' order by c.chunk_id limit 1")[0][
        "chunk_hash"]
    emb = vector_literal(vectors[learning_hash])
    hits = q(a, "select * from scsql.search_global('anything', p_k => 50, p_mode => 'vector', "
                "p_query_embedding => %s, p_model => %s, p_min_similarity => -1)", emb, DEFAULT_MODEL)
    b_hits = [h for h in hits if h["project"] == pb]
    assert b_hits and {h["source_kind"] for h in b_hits} <= set(PUBLISHED)
    own = q(b2, "select * from scsql.search('anything', p_mode => 'vector', p_query_embedding => %s, p_model => %s)",
            emb, DEFAULT_MODEL)
    assert own[0]["chunk_hash"] == learning_hash and own[0]["source_kind"] == "learning"
    # pack and recall_context stay within the reader's own project.
    packed = q(a, "select * from scsql.pack(%s)", " ".join([*HIDDEN_WORDS.values(), *SHARED_WORDS.values()]))
    assert {p["source_path"] for p in packed} == {"own.md"}
    assert not any(w in (p["content"] or "") for p in packed for w in HIDDEN_WORDS.values())
    recalled = q(a, "select * from scsql.recall_context(p_budget => 100000)")
    assert not any(w in r["content"] for r in recalled for w in HIDDEN_WORDS.values())
    mine = q(b2, "select * from scsql.recall_context(p_budget => 100000)")
    assert {"fact", "session"} <= {r["section"] for r in mine}
    assert any("walrus" in r["content"] for r in mine) and any("marmoset" in r["content"] for r in mine)


def test_a_readers_scores_do_not_depend_on_hidden_knowledge(world):
    """BM25 over another project uses the statistics of its published sources
    only: adding hidden learnings that share the query's words changes the
    colleague's scores, not the reader's."""
    _db, pb, a, b1, b2, _c, _ = world

    def score(agent, fn):
        return {h["source_path"]: h["score"] for h in q(agent, f"select * from scsql.{fn}('telescope', p_mode => 'bm25')")
                if h["project"] == pb}

    reader_before, colleague_before = score(a, "search_global"), score(b2, "search")
    for i in range(5):
        Api(b1).call("record_outcome", kind="failed", summary=f"telescope mount {i} slipped", task_ref="T-2")
    reader_after, colleague_after = score(a, "search_global"), score(b2, "search")
    assert reader_after == reader_before and "src/optics.py" in reader_after
    assert colleague_after["src/optics.py"] != colleague_before["src/optics.py"]
    assert len(colleague_after) == len(colleague_before) + 5


def test_a_text_is_visible_to_a_reader_exactly_while_a_published_source_holds_it(world):
    """Embeddings are stored per text (chunk_hash): the vector of a session
    summary's text becomes visible to a reader when a note publishes the same
    text, and hidden again when the note is forgotten."""
    _db, pb, a, b1, b2, _c, _ = world
    session = q(b2, "select c.content, c.chunk_hash, c.project_id from scsql.kb_chunks c "
                    "join scsql.kb_sources s using (project_id, source_id) "
                    "where s.kind = 'session_summary' and c.content like '%%marmoset%%' order by c.seq limit 1")[0]

    def reader_sees() -> int:
        return q(a, "select count(*) as n from scsql.kb_embeddings where project_id = %s and chunk_hash = %s",
                 session["project_id"], session["chunk_hash"])[0]["n"]

    assert reader_sees() == 0
    q(b1, "select * from scsql.index_text('notes/published-copy', %s, 'note')", session["content"])
    assert reader_sees() == 1
    hits = q(a, "select * from scsql.search_global('marmoset', p_k => 50)")
    assert {(h["project"], h["source_path"]) for h in hits if h["project"] == pb} == {(pb, "notes/published-copy")}
    assert q(b1, "select scsql.forget_source('notes/published-copy') as ok")[0]["ok"] is True
    assert reader_sees() == 0
    assert pb not in _projects(q(a, "select * from scsql.search_global('marmoset', p_k => 50)"))


# search_projects' arguments after the projects, as search (and search_own) pass them by default.
_INVOKER = ("select * from scsql_caller.search_projects({projects}, %s, 50, null, null, null, %s, %s::vector, %s, "
            "60, 1, 1, 1.2, 0.75, null, 'score', 0.2)")
_OWN = ("select * from scsql_caller.search_own(%s, 50, null, null, null, %s, %s::vector, %s, "
        "60, 1, 1, 1.2, 0.75, null, 'score', 0.2)")


def _hits(rows) -> list[tuple]:
    return [tuple(v for k, v in r.items() if k != "retrieved_at") for r in rows]


def test_own_project_reads_as_the_owner_return_exactly_what_row_level_security_gives(world):
    """search, search_confidence and pack read the acting agent's own project
    as the owner (search_own, pack_facts, pack_hits: no policy call per row
    on Citus's shards). They return what the same reads give the caller under
    row-level security, for every kind of content and both retrievers, and
    never a row of another project, whatever project an argument names."""
    _db, pb, a, _b1, b2, c, vectors = world
    emb = vector_literal(next(iter(vectors.values())))
    pid_b = q(b2, "select scsql_caller.project_id() as p")[0]["p"]
    for agent in (a, b2, c):
        for word in (*HIDDEN_WORDS.values(), *SHARED_WORDS.values(), "anything"):
            for mode, vec, model in (("hybrid", None, None), ("vector", emb, DEFAULT_MODEL)):
                own = q(agent, _OWN, word, mode, vec, model)
                under_rls = q(agent, _INVOKER.format(projects="array[scsql_caller.project_id()]"), word, mode, vec, model)
                assert _hits(own) == _hits(under_rls), (agent.name, word, mode)
                assert all(h["project"] != pb for h in own) or agent is b2
        # search itself is search_own's list (lifecycle ranking off by default).
        word = "telescope"
        assert _hits(q(agent, "select * from scsql.search(%s, p_k => 50)", word)) == _hits(
            q(agent, _OWN, word, "hybrid", None, None))
    # BM25 of the own project for search_global (bm25_own_top), beside the
    # same ranking under row-level security.
    for agent in (a, b2, c):
        for word in ("telescope nebula", "marmoset orchid zeppelin quasar", "own notes"):
            terms = q(agent, "select array_agg(t.term) as t from scsql_caller.terms(%s) t", word)[0]["t"]
            assert q(agent, "select * from scsql_caller.bm25_own_top(%s, 1.2, 0.75, 50)", terms) == q(
                agent, "select * from scsql_caller.bm25_project_top(scsql_caller.project_id(), %s, 1.2, 0.75, 50)", terms)
        assert pb not in _projects(q(agent, "select * from scsql.search_global('marmoset orchid zeppelin', p_k => 50)")) \
            or agent is b2
    # B's own agent finds B's hidden kinds; the reader of B and the stranger
    # find none of them in their own project's search.
    assert {h["source_kind"] for h in q(b2, _OWN, "marmoset orchid zeppelin", "bm25", None, None)} >= {
        "session_summary", "archived_fact", "learning"}
    for agent in (a, c):
        assert q(agent, _OWN, "marmoset orchid zeppelin walrus", "bm25", None, None) == []

    # pack's facts: the caller's own project only, whatever project is named.
    terms = "(select array_agg(t.term) from scsql_caller.terms('walrus office') t)"
    facts = f"select f.* from scsql_caller.pack_facts(%s, {terms}) f"
    assert q(b2, facts, pid_b)[0]["keys"] == ["pet"]
    for agent in (a, c):
        assert q(agent, facts, pid_b)[0]["keys"] is None
        assert q(agent, "select count(*) as n from scsql.memory_facts where project_id = %s", pid_b)[0]["n"] == 0
    # pack's hits: the own project as search_own gives it; another project
    # as the caller reads it (a reader of B: its published knowledge only).
    hits = "select h.* from scsql_caller.pack_hits(%s, %s, null, null) h"
    for word in ("marmoset telescope nebula starchart zeppelin", "orchid quasar"):
        packed_b2 = q(b2, hits, pid_b, word)[0]
        assert packed_b2["paths"] == [h["source_path"] for h in q(b2, _OWN, word, "hybrid", None, None)
                                      if h["source_kind"] not in ("fact", "decision")][:20]
        read = q(a, hits, pid_b, word)[0]
        assert read["paths"] == [h["source_path"] for h in q(a, _INVOKER.format(projects="array[%s::bigint]"), pid_b, word,
                                                             "hybrid", None, None)
                                 if h["source_kind"] not in ("fact", "decision")][:20] or read["paths"] is None
        assert set(read["kinds"] or []) <= {"chunk"}
        assert q(c, hits, pid_b, word)[0]["paths"] is None


# BM25 of one project read as the caller under row-level security (p_published
# off: the policies decide), unfiltered (bm25_project_top) or filtered
# (bm25_filtered_top), and the same project read as the owner for a granted
# reader (bm25_granted_top).
_RLS_TOP = "select * from scsql_caller.bm25_project_top(%s, %s, 1.2, 0.75, 50)"
_RLS_FILTERED = "select * from scsql_caller.bm25_filtered_top(array[%s::bigint], %s, 1.2, 0.75, 50, %s, %s, %s)"
_GRANTED = "select * from scsql_caller.bm25_granted_top(%s, %s, 1.2, 0.75, 50, %s, %s, %s)"
_WORDS = ("telescope nebula starchart", "marmoset orchid zeppelin quasar", "telescope marmoset weekly sky",
          "own notes telescope", "point target catalogue northern", "anything")


def _terms(agent, words: str) -> list[str]:
    return q(agent, "select array_agg(t.term) as t from scsql_caller.terms(%s) t", words)[0]["t"]


def _granted_world(world):
    """The world, plus hidden knowledge of B sharing its published words (a
    learning and a session summary), and a project D granted to the reader
    and revoked again, its notes sharing them too; the project ids by name."""
    db, pb, a, b1, _b2, c, _ = world
    api = Api(b1)
    api.call("record_outcome", kind="failed", summary="the telescope nebula starchart mount slipped", task_ref="T-3")
    api.call("summarize_session", summary={"done": ["pointed the telescope at the nebula of the northern starchart"]})
    pd = db.project()
    d = db.agent("revoked", pd)
    q(d, "select * from scsql.index_text('notes/d', 'telescope nebula starchart of project d', 'note')")
    with db.connect() as conn:
        conn.execute("select scsql.grant_project_read(%s, %s)", (pd, a.name))
        conn.commit()
        conn.execute("select scsql.revoke_project_read(%s, %s)", (pd, a.name))
        conn.commit()
        ids = {r["name"]: r["project_id"] for r in conn.execute("select name, project_id from scsql.projects")}
    return ids, pd


def test_granted_projects_read_as_the_owner_return_exactly_what_row_level_security_gives(world):
    """search_global ranks a project granted to the reader as the owner
    (bm25_granted_top: its published postings, no policy call per posting).
    For every project an argument may name (granted, the own one, one never
    granted, one whose grant was revoked), every query (published and
    hidden words) and every filter, it returns the same chunks and scores as
    the same ranking under row-level security; and search_global's BM25 list
    over all of them equals scoring every posting the caller sees."""
    db, pb, a, _b1, b2, c, _ = world
    ids, pd = _granted_world(world)
    pid_b = ids[pb]
    full = _admin_view(db, pb)
    hidden = sorted(ch for (ch,) in full["kb_chunks"] - full["kb_chunks/shared"])
    with db.connect() as conn:  # a time between B's first and last sources
        d_chunks = [r["chunk_id"] for r in conn.execute("select chunk_id from scsql.kb_chunks where project_id = %s",
                                                         (ids[pd],))]
        since = conn.execute("select created_at from scsql.kb_sources where project_id = %s and path = %s",
                             (pid_b, "notes/catalogue")).fetchone()["created_at"]
    filters = [(None, None, None), (["file", "note"], None, None), (["session_summary", "learning", "archived_fact"], None, None),
               (None, "external", None), (None, "internal", None), (None, None, since),
               (["file", "url", "note", "session_summary", "archived_fact", "learning"], "internal", since)]
    compared = 0
    for agent in (a, b2, c):
        own = q(agent, "select scsql_caller.project_id() as p")[0]["p"]
        readable = q(agent, "select scsql_caller.readable_projects() as r")[0]["r"]
        for words in _WORDS:
            terms = _terms(agent, words)
            for pid in sorted(set(ids.values())):
                for kinds, trust, when in filters:
                    fast = q(agent, _GRANTED, pid, terms, kinds, trust, when)
                    if pid == own:
                        assert fast == [], "the own project is bm25_own_top's"
                        continue
                    rls = (q(agent, _RLS_TOP, pid, terms) if (kinds, trust, when) == (None, None, None)
                           else q(agent, _RLS_FILTERED, pid, terms, kinds, trust, when))
                    assert fast == rls or (fast == [] and rls[0]["chunk_ids"] is None), (agent.name, words, pid, kinds)
                    compared += bool(fast and fast[0]["chunk_ids"])
                    if fast and fast[0]["chunk_ids"]:
                        assert pid == pid_b and pid in readable and agent is a
                        assert {(ch,) for ch in fast[0]["chunk_ids"]} <= full["kb_chunks/shared"]
            # search_global's BM25 list (bm25 over every readable project, each
            # ranked on its own and merged) equals scoring every visible
            # posting at once, under row-level security, with and without filters.
            projects = sorted(set(ids.values()))
            for kinds, trust, when in filters:
                merged = q(agent, "select * from scsql_caller.bm25(%s, %s, 1.2, 0.75, 50, %s, %s, %s)",
                           projects, terms, kinds, trust, when)[0]
                every = q(agent, "select * from scsql_caller.bm25_filtered_top(%s, %s, 1.2, 0.75, 50, %s, %s, %s)",
                          projects, terms, kinds, trust, when)[0]
                assert merged["project_ids"] == every["project_ids"] and merged["chunk_ids"] == every["chunk_ids"]
                assert [round(s, 9) for s in merged["scores"] or []] == [round(s, 9) for s in every["scores"] or []]
                assert not set(merged["project_ids"] or []) - set(readable)
                if (kinds, trust, when) == (None, None, None):
                    # The BM25 scores of given chunks (vector hits under score
                    # fusion): those of the list, and none for a hidden chunk
                    # of B or one of D (bm25_granted_scores for other projects).
                    listed = list(zip(every["project_ids"] or [], every["chunk_ids"] or [], every["scores"] or []))
                    extra = [(ids[pd], ch) for ch in d_chunks] + ([] if agent is b2 else [(pid_b, ch) for ch in hidden])
                    pairs = [(p, ch) for p, ch, _ in listed] + extra
                    scored = q(agent, "select * from scsql_caller.bm25_scores(%s, %s, 1.2, 0.75, %s, %s)", projects, terms,
                               [p for p, _ in pairs], [ch for _, ch in pairs])
                    assert {(r["project_id"], r["chunk_id"]): round(r["score"], 9) for r in scored} == {
                        (p, ch): round(sc, 9) for p, ch, sc in listed}, (agent.name, words)
    assert compared >= 10, compared  # the granted project really returned rows to compare


def test_granted_vector_hits_read_as_the_owner_return_exactly_what_row_level_security_gives(world):
    """search_projects' vector branch reads as the owner
    (search_vector_readable: the readable projects re-read from the acting
    role, a granted project's published chunks and texts only, no policy
    call per row the index visits). For every agent, every set of projects
    an argument may name, query vectors of hidden and published texts, and
    every filter, it returns the same hits and distances as the same scan
    under row-level security."""
    db, pb, a, _b1, b2, c, vectors = world
    ids, pd = _granted_world(world)
    full = _admin_view(db, pb)
    with db.connect() as conn:
        since = conn.execute("select created_at from scsql.kb_sources where project_id = %s and path = %s",
                             (ids[pb], "notes/catalogue")).fetchone()["created_at"]
    rng = np.random.default_rng(5)
    queries = [vector_literal(v) for v in list(vectors.values())[:6]] + [vector_literal(_unit(rng.normal(size=384)))]
    filters = [(None, None, None), (["file", "note"], None, None), (["session_summary", "learning"], None, None),
               (None, "external", None), (None, None, since)]
    project_sets = [sorted(set(ids.values())), [ids[pb]], [ids[pb], ids[pd]], [ids[pd]]]
    rls = "select * from scsql_caller.search_vector_hits(%s, %s::vector, %s, 50, %s, %s, %s)"
    owner = "select * from scsql_caller.search_vector_readable(%s, %s::vector, %s, 50, %s, %s, %s)"
    seen_b = 0
    for agent in (a, b2, c):
        own = q(agent, "select scsql_caller.project_id() as p")[0]["p"]
        for projects in (*project_sets, [own, ids[pb]]):
            for emb in queries:
                for kinds, trust, when in filters:
                    with agent.transaction() as conn:
                        conn.execute("set local hnsw.iterative_scan = 'relaxed_order'")
                        under_rls = conn.execute(rls, (projects, emb, DEFAULT_MODEL, kinds, trust, when)).fetchall()
                        fast = conn.execute(owner, (projects, emb, DEFAULT_MODEL, kinds, trust, when)).fetchall()
                    assert fast == under_rls, (agent.name, projects, kinds, trust, when)
                    hits = set(zip(fast[0]["project_ids"] or [], fast[0]["chunk_ids"] or []))
                    if agent is a:
                        b_hits = {(ch,) for p, ch in hits if p == ids[pb]}
                        assert b_hits <= full["kb_chunks/shared"]
                        seen_b += bool(b_hits)
                        assert {p for p, _ in hits} <= {own, ids[pb]}
                    elif agent is c:
                        assert {p for p, _ in hits} <= {own}
    assert seen_b >= 10, seen_b  # the granted project really returned hits to compare


def test_the_granted_fast_path_never_shows_hidden_or_ungranted_rows(world):
    """bm25_granted_top reads as the owner, so it must itself keep what the
    policies keep: never a chunk of an unpublished source (session summary,
    archived fact, learning) of a granted project, nothing of the own
    project (bm25_own_top's), of a project never granted or of one whose
    grant was revoked, whatever the arguments, and nothing of a project as
    soon as its grant is revoked, in the very session that read it."""
    db, pb, a, b1, b2, c, _ = world
    ids, pd = _granted_world(world)
    pid_b, pid_d = ids[pb], ids[pd]
    full = _admin_view(db, pb)
    hidden = full["kb_chunks"] - full["kb_chunks/shared"]
    assert hidden
    everything = " ".join([*HIDDEN_WORDS.values(), *SHARED_WORDS.values(), "vault combination office deploy migration "
                           "cache region calibrated pipeline"])
    for agent in (a, b2, c):
        own = q(agent, "select scsql_caller.project_id() as p")[0]["p"]
        terms = _terms(agent, everything)
        for pid in (pid_b, pid_d, *ids.values(), None, -1):
            for kinds in (None, ["session_summary", "archived_fact", "learning"], ["file", "url", "note"]):
                granted = q(agent, _GRANTED, pid, terms, kinds, None, None)
                # bm25 over one project: the own one as the owner, any other through bm25_granted_top.
                ranked = q(agent, "select * from scsql_caller.bm25(array[%s::bigint], %s, 1.2, 0.75, 50, %s, null, null)",
                           pid, terms, kinds)
                for rows in (granted, ranked if pid != own else []):
                    got = {(ch,) for r in rows for ch in (r["chunk_ids"] or [])}
                    if agent is a and pid == pid_b and kinds != ["session_summary", "archived_fact", "learning"]:
                        assert got and got <= full["kb_chunks/shared"], (pid, kinds)
                        assert {p for r in rows for p in r["project_ids"]} == {pid_b}
                    else:
                        assert not got, (agent.name, pid, kinds)
                if pid == own:
                    assert {p for r in ranked for p in (r["project_ids"] or [])} <= {own}
    # A grant revoked while the reader's session reads: the next statement
    # of the same transaction (and session) finds nothing of B any more.
    terms = _terms(a, "telescope nebula starchart")
    with a.transaction() as conn:
        before = conn.execute(_GRANTED, (pid_b, terms, None, None, None)).fetchall()
        assert before and before[0]["chunk_ids"]
        glob = "select * from scsql.search_global('telescope nebula starchart', p_k => 50, p_mode => 'bm25')"
        assert pb in _projects(conn.execute(glob).fetchall())
        emb = vector_literal(next(iter(world[6].values())))
        vec = "select * from scsql_caller.search_vector_readable(%s, %s::vector, %s, 50, null, null, null)"
        assert conn.execute(vec, ([pid_b], emb, DEFAULT_MODEL)).fetchone()["chunk_ids"]
        with db.connect() as admin:
            admin.execute("select scsql.revoke_project_read(%s, %s)", (pb, a.name))
            admin.commit()
        assert conn.execute(_GRANTED, (pid_b, terms, None, None, None)).fetchall() == []
        assert conn.execute(_GRANTED, (pid_b, terms, ["note"], None, None)).fetchall() == []
        assert pb not in _projects(conn.execute(glob).fetchall())
        assert pb not in _projects(conn.execute(glob.replace("p_mode => 'bm25'", "p_kinds => array['note']")).fetchall())
        assert conn.execute(vec, ([pid_b], emb, DEFAULT_MODEL)).fetchone()["chunk_ids"] is None
