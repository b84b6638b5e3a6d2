"""Bulk indexing (scsql.kb_staging, scsql.index_staged) stores what index_text
called once per text stores: the same sources, chunks, terms (numbered in
the same order), postings, statistics, redacted text, embedding queue and
memory history. A bad text fails the batch, names the row and leaves
nothing; a staged text is the acting agent's, in its project only."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from psycopg.types.json import Jsonb

from scsql.core import errors
from scsql.core.errors import ScsqlError
from scsql.core import bulk
from scsql.memory.indexer import spans_for

from ..helpers import ON_CITUS, one_server_only

STAGING = one_server_only("the staging view and index_staged (Citus has no bulk path: SC372)")

AWS = "AKIA" + "IOSFODNN7EXAMPLE"
CODE = "\n".join(
    [f"def step_{i}(x):\n    \"\"\"Step {i} of verifyChain for hmac_chain.ts.\"\"\"\n" + "\n".join(
        f"    x = x * {j} + {i}  # keep SKIP LOCKED row {j}" for j in range(12)) + "\n    return x\n"
     for i in range(8)])
LONG = "\n\n".join(f"Paragraph {i}: the ledger keeps word{i % 7} and word{i % 11} for the nightly job "
                   f"and the retention window of partition p{i}." * 3 for i in range(30))
TURNS = "\n".join(["## user", "How should we restructure verify_part?", "## assistant",
                   "Two ways: a Verifier class, or helper functions sharing a state record.",
                   "## user", "use the second option", "## assistant", "Done."])


def _corpus(round_: int, chunk_chars: int) -> list[bulk.Text]:
    """Texts of every shape index_text takes; round 2 changes some, keeps some, adds some."""
    texts = [
        bulk.Text("notes/intro.md", f"# Intro\nThe ledger, round {min(round_, 1)}.\n\n## Keys\naws key {AWS} here\n"
                                    "password = 'hunter2hunter2'\n", "note", meta={"token": "ghp_" + "a" * 36}),
        bulk.Text("src/steps.py", CODE, "file", spans=spans_for("src/steps.py", CODE, chunk_chars),
                  meta={"language": "py"}),
        bulk.Text("https://bob:s3cretpass@example.com/doc", "# Doc\nExternal text about word3.", "url"),
        bulk.Text("notes/long.md", LONG + ("" if round_ == 1 else "\n\nAnd one more paragraph."), "note",
                  tier="session"),
        bulk.Text("claude/sessions/s1/1.md", TURNS, "note",
                  spans=[{"start": 1, "end": 4, "anchor": "turn 1", "context": True},
                         {"start": 5, "end": 8, "anchor": "turn 2", "context": True}],
                  occurred_at=dt.datetime(2026, 11, 20, 9, 0, tzinfo=dt.UTC)),
        bulk.Text("claude/sessions/s1/2.md", "## user\nyes, the first\n## assistant\nSet.", "note",
                  spans=[{"start": 1, "end": 4, "anchor": "turn 3",
                          "context": "Two ways: a Verifier class, or helper functions sharing a state record."}]),
    ]
    if round_ == 2:
        texts += [bulk.Text(f"notes/more{i}.md", f"# More {i}\nword{i} and verify{i}Chain_{i} again.", "note")
                  for i in range(5)]
        texts += [bulk.Text("claude/sessions/s1/3.md", "## user\nand then?\n## assistant\nThe helper functions.", "note",
                            spans=[{"start": 1, "end": 4, "anchor": "turn 4",
                                    "context": "use the second option"}])]
    return texts


def _per_call(agent, texts: list[bulk.Text]) -> list[dict]:
    out = []
    with agent.transaction() as conn:
        for t in texts:
            out.append(conn.execute(
                "select * from scsql.index_text(%s, %s, %s, %s, %s, %s, %s, %s)",
                (t.path, t.content, t.kind, t.trust, t.tier, None if t.spans is None else Jsonb(t.spans),
                 None if t.meta is None else Jsonb(t.meta), t.occurred_at)).fetchone())
    return out


STATE = {
    "sources": """select s.path, s.kind, s.trust, s.tier, s.content_hash, s.spans_hash, s.n_chunks, s.n_chars, s.meta,
                         s.expires_at is not null as expires, s.occurred_at, s.published
                  from scsql.kb_sources s where s.project_id = %(p)s order by s.source_id""",
    "chunks": """select s.path, c.seq, c.chunk_hash, c.anchor, c.line_start, c.line_end, c.char_start, c.char_end,
                        c.content, c.n_terms, c.published, c.context, c.context_hashes,
                        (select array_agg(t.term order by t.term_id) from scsql.kb_terms t
                         where t.project_id = c.project_id and t.term_id = any(c.term_ids)) as terms,
                        (select array_agg(o.path order by x.n) from unnest(c.context_sources) with ordinality x(id, n)
                         join scsql.kb_sources o on o.project_id = c.project_id and o.source_id = x.id) as context_from
                 from scsql.kb_chunks c join scsql.kb_sources s using (project_id, source_id)
                 where c.project_id = %(p)s order by s.path, c.seq""",
    "terms": """select t.term, t.df, t.max_tf, t.published_df, t.tier_min_dl from scsql.kb_terms t
                where t.project_id = %(p)s order by t.term_id""",
    "postings": """select t.term, s.path, c.seq, po.tf, po.dl, po.published
                   from scsql.kb_postings po
                   join scsql.kb_terms t on t.project_id = po.project_id and t.term_id = po.term_id
                   join scsql.kb_chunks c on c.project_id = po.project_id and c.chunk_id = po.chunk_id
                   join scsql.kb_sources s on s.project_id = c.project_id and s.source_id = c.source_id
                   where po.project_id = %(p)s order by 1, 2, 3""",
    "statistics": """select n_chunks, total_len, n_file_chunks, published_chunks, published_len
                     from scsql.memory_state where project_id = %(p)s""",
    "queue": "select chunk_hash from scsql.kb_embed_queue where project_id = %(p)s order by 1",
    "history": """select op, kind, target, chunk_hash, old_hash, new_hash, reason, related
                  from scsql.memory_changes where project_id = %(p)s order by change_id""",
}


def _state(db, project: str) -> dict[str, list]:
    with db.connect() as conn:
        p = conn.execute("select project_id from scsql.projects where name = %s", (project,)).fetchone()["project_id"]
        return {k: conn.execute(q, {"p": p}).fetchall() for k, q in STATE.items()}


def test_bulk_and_per_call_paths_store_identical_tables(scsql_db):
    one, two = scsql_db.project(), scsql_db.project()
    a, b = scsql_db.agent("percall", one), scsql_db.agent("bulk", two)
    for round_ in (1, 2):  # a fresh index, then changed, unchanged and new texts
        expected = _per_call(a, _corpus(round_, a.rules().chunk_chars))
        with b.transaction() as conn:
            got = bulk.index_texts(conn, _corpus(round_, b.rules().chunk_chars))
        assert [{k: r[k] for k in expected[0]} for r in got] == expected
        assert [r["ord"] for r in got] == list(range(1, len(got) + 1))
    if round_ == 2:
        assert [r["unchanged"] for r in got][:3] == [True, True, True]
    left, right = _state(scsql_db, one), _state(scsql_db, two)
    for table in STATE:
        assert left[table] == right[table], table
    assert len(left["postings"]) > 500 and len(left["history"]) == 6 + 7  # round 2: one changed, six new
    # The secrets are stored redacted, the same way on both paths.
    text = "\n".join(r["content"] for r in right["chunks"]) + str([r["meta"] for r in right["sources"]])
    paths = [r["path"] for r in right["sources"]]
    assert AWS not in text and "hunter2hunter2" not in text and "ghp_" not in text and "[REDACTED:" in text
    assert not any("s3cretpass" in p for p in paths)
    # A context given in the batch came from the text before it, never from one after it.
    ctx = {(r["path"], r["seq"]): r["context_from"] for r in right["chunks"]}
    assert ctx[("claude/sessions/s1/2.md", 1)] == ["claude/sessions/s1/1.md"]
    with scsql_db.connect() as conn:  # nothing stays staged
        assert conn.execute("select count(*) as n from scsql.kb_staged_chunks").fetchone()["n"] == 0


@STAGING
@pytest.mark.parametrize("bad, code, named", [
    (bulk.Text("notes/big.md", "x" * (2 * 1024 * 1024 + 1)), "SC204", "staged text 3 (notes/big.md)"),
    (bulk.Text("notes/key.md", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n"
                               "-----END PRIVATE KEY-----\n"), "SC215", "staged text 3 (notes/key.md)"),
    (bulk.Text("src/x.py", "a\nb\n", "file", spans=[{"start": 2, "end": 1}]), "SC206", "staged text 3 (src/x.py)"),
    (bulk.Text("learning:7", "text"), "SC211", "staged text 3"),
    (bulk.Text("notes/a.md", "again"), errors.STAGED_PATH_REPEATED, "staged texts 1 and 3"),
])
def test_a_bad_text_fails_the_batch_names_it_and_leaves_nothing(scsql_db, bad, code, named):
    agent = scsql_db.agent("badrow", scsql_db.project())
    texts = [bulk.Text("notes/a.md", "# A\nfirst"), bulk.Text("notes/b.md", "# B\nsecond"), bad,
             bulk.Text("notes/c.md", "# C\nfourth")]
    with pytest.raises(ScsqlError) as err, agent.transaction() as conn:
        bulk.index_texts(conn, texts)
    assert err.value.code == code and named in str(err.value)
    with scsql_db.connect() as conn:
        left = conn.execute("""select (select count(*) from scsql.kb_sources) + (select count(*) from scsql.kb_chunks)
                                    + (select count(*) from scsql.kb_terms) + (select count(*) from scsql.kb_postings)
                                    + (select count(*) from scsql.kb_staged_sources)
                                    + (select count(*) from scsql.kb_staged_chunks) as n""").fetchone()["n"]
    assert left == 0


@STAGING
def test_ord_must_be_given_once_each(scsql_db):
    agent = scsql_db.agent("ords", scsql_db.project())
    for rows in (["(null, 'notes/a.md', 'a')"], ["(0, 'notes/a.md', 'a')"],
                 ["(1, 'notes/a.md', 'a')", "(1, 'notes/b.md', 'b')"]):
        with pytest.raises(ScsqlError) as err, agent.transaction() as conn:
            conn.execute(f"insert into scsql.kb_staging (ord, path, content) values {', '.join(rows)}")
        assert err.value.code == errors.STAGED_TEXT_ORDER_INVALID


@STAGING
def test_staged_texts_are_the_acting_agents_in_its_project_only(scsql_db):
    """The view has no project or agent column; what one agent stages another
    agent (of another project) cannot read, index or see indexed; agents
    cannot read or change the staged rows."""
    one, two = scsql_db.project(), scsql_db.project()
    a, b = scsql_db.agent("stager", one), scsql_db.agent("other", two)
    from scsql.core.config import role_for

    with a.transaction() as conn:
        conn.execute("insert into scsql.kb_staging (ord, path, content) values (1, 'notes/mine.md', 'mine')")
        with pytest.raises(Exception):  # noqa: B017 - no such column
            with conn.transaction():
                conn.execute("insert into scsql.kb_staging (ord, path, content, project_id) values (2, 'x', 'y', 1)")
        # Acting as another project's agent in the same transaction: nothing of a's is indexed.
        conn.execute(f'set local role "{role_for(b.name)}"')
        assert conn.execute("select * from scsql.index_staged()").fetchall() == []
        conn.execute(f'set local role "{role_for(a.name)}"')
        assert [r["path"] for r in conn.execute("select * from scsql.index_staged()").fetchall()] == ["notes/mine.md"]
    for sql in ("select * from scsql.kb_staged_sources", "select * from scsql.kb_staging",
                "delete from scsql.kb_staged_chunks", "update scsql.kb_staged_sources set path = 'x'"):
        with pytest.raises(ScsqlError) as err, b.transaction() as conn:
            conn.execute(sql)
        assert err.value.code == "42501", sql
    with scsql_db.connect() as conn:
        rows = conn.execute("select p.name from scsql.kb_sources s join scsql.projects p using (project_id)").fetchall()
    assert [r["name"] for r in rows] == [one]


@STAGING
def test_texts_staged_by_a_transaction_that_did_not_index_them_are_discarded(scsql_db):
    agent = scsql_db.agent("leftover", scsql_db.project())
    with agent.transaction() as conn:
        conn.execute("insert into scsql.kb_staging (ord, path, content) values (1, 'notes/old.md', 'old')")
    with agent.transaction() as conn:
        conn.execute("insert into scsql.kb_staging (ord, path, content) values (1, 'notes/new.md', 'new')")
        assert [r["path"] for r in conn.execute("select * from scsql.index_staged()").fetchall()] == ["notes/new.md"]
    with scsql_db.connect() as conn:
        assert conn.execute("select count(*) as n from scsql.kb_staged_sources").fetchone()["n"] == 0


def _batches(chunk_chars: int, bad: bulk.Text | None = None) -> list[list[bulk.Text]]:
    """Both rounds of the corpus and more, two or three texts a batch; BAD, if given, in the third batch."""
    texts = _corpus(1, chunk_chars) + [bulk.Text(f"notes/extra{i}.md", f"# Extra {i}\nword{i} verify{i}Chain_{i} "
                                                 f"new{i}term and word{i + 1}.", "note") for i in range(6)]
    out = [texts[i:i + 2] for i in range(0, len(texts), 2)]
    if bad is not None:
        out[2] = out[2] + [bad]
    return out + [_corpus(2, chunk_chars)[-6:]]


@STAGING
def test_batches_in_flight_store_what_one_batch_after_another_stores(scsql_db, monkeypatch):
    """scsql index keeps two batches in flight (one staged while the one before
    it is stored): the tables, term and chunk numbering and history included,
    are those of one batch after another; a refused batch leaves nothing and
    the batches after it are stored."""
    one, two = scsql_db.project(), scsql_db.project()
    a, b = scsql_db.agent("serial", one), scsql_db.agent("flight", two)
    bad = bulk.Text("notes/key.md", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n"
                                    "-----END PRIVATE KEY-----\n")
    staged: dict[int, float] = {}
    stage = bulk._stage

    def timed_stage(conn, texts):
        texts = list(texts)
        staged[id(texts[0])] = time.monotonic()
        return stage(conn, texts)

    monkeypatch.setattr(bulk, "_stage", timed_stage)
    results = {}
    for agent, workers in ((a, 1), (b, 2)):
        batches = _batches(agent.rules().chunk_chars, bad)
        got, stored = [], []
        for batch, rows in bulk.index_batches(agent, batches, workers=workers):
            got.append((batch, rows))
            stored.append(time.monotonic())
        assert [g[0] for g in got] == batches  # in order, every batch
        results[workers] = [r if isinstance(r, ScsqlError) else [x["path"] for x in r] for _, r in got]
        if workers == 2:  # the race: a batch was staged before the one before it was stored
            starts = [staged[id(batch[0])] for batch in batches]
            assert any(starts[k + 1] < stored[k] for k in range(len(batches) - 1))
    refused = [i for i, r in enumerate(results[2]) if isinstance(r, ScsqlError)]
    assert refused == [2] and results[2][2].code == "SC215"
    assert [r for r in results[1] if not isinstance(r, ScsqlError)] == \
        [r for r in results[2] if not isinstance(r, ScsqlError)]
    left, right = _state(scsql_db, one), _state(scsql_db, two)
    for table in STATE:
        assert left[table] == right[table], table
    paths = {r["path"] for r in right["sources"]}
    assert not paths & {t.path for t in _batches(a.rules().chunk_chars, bad)[2]}  # nothing of the refused batch
    assert "notes/extra5.md" in paths and "claude/sessions/s1/3.md" in paths  # the batches after it are stored
    with scsql_db.connect() as conn:
        assert conn.execute("select count(*) as n from scsql.kb_staged_chunks").fetchone()["n"] == 0


@pytest.mark.skipif(not ON_CITUS, reason="a Citus cluster's own behaviour (.ci/citus.sh)")
def test_on_a_cluster_the_bulk_path_refuses_and_its_callers_index_each_text(scsql_db):
    """Citus cannot run the bulk path's statements on its shards: staging
    says so (SC372), and index_texts and index_batches (scsql index, the
    hooks' transcripts) index each text with index_text instead."""
    agent = scsql_db.agent("cluster", scsql_db.project())
    with pytest.raises(ScsqlError) as err, agent.transaction() as conn:
        conn.execute("insert into scsql.kb_staging (ord, path, content) values (1, 'notes/a.md', 'a')")
    assert err.value.code == errors.BULK_PATH_UNAVAILABLE
    batches = [[bulk.Text(f"notes/{b}-{i}.md", f"# {b} {i}\nword{i} of batch {b}") for i in range(3)] for b in "xy"]
    batches.insert(1, [bulk.Text("notes/bad.md", "")])
    got = list(bulk.index_batches(agent, batches))
    assert [r["path"] for r in got[0][1]] == ["notes/x-0.md", "notes/x-1.md", "notes/x-2.md"]
    assert isinstance(got[1][1], ScsqlError) and got[1][1].code == "SC201"
    assert [r["ord"] for r in got[2][1]] == [1, 2, 3] and all(r["chunks"] == 1 for r in got[2][1])
    with agent.transaction() as conn:
        assert conn.execute("select count(*) as n from scsql.kb_sources").fetchone()["n"] == 6
