"""Working memory: remember/forget, bounded capacity that scales with the
project, eviction to the archive (never lost), importance-5 facts kept,
concurrent remembers, and clear errors for bad input."""

from __future__ import annotations

import json
import threading

import psycopg
import pytest
from psycopg.rows import dict_row

from scsql import subsystems
from scsql.core.errors import ScsqlError

from ..helpers import wait_for


def q(agent, sql, *args):
    with agent.transaction() as conn:
        return conn.execute(sql, args).fetchall()


def remember(agent, key, value, importance=3):
    return q(agent, "select * from scsql.remember(%s, %s, %s)", key, value, importance)[0]


def facts(agent) -> dict[str, dict]:
    return {r["key"]: r for r in q(agent, "select * from scsql.memory_facts")}


def archived(agent) -> dict[str, dict]:
    return {r["meta"]["key"]: r for r in q(agent, "select * from scsql.kb_sources where kind = 'archived_fact'")}


@pytest.fixture
def agent(scsql_db):
    return scsql_db.agent("mem", scsql_db.project())


def test_remember_upserts_and_forget_is_true_then_false(agent):
    first = remember(agent, "db.dsn", "Use SCSQL_DSN for the shared server", 4)
    assert (first["key"], first["stored"], first["facts"], first["capacity"]) == ("db.dsn", "memory", 1, 100)
    remember(agent, "db.dsn", "Use SCSQL_AGENT_DSN for agents", 2)
    f = facts(agent)
    assert list(f) == ["db.dsn"]
    assert (f["db.dsn"]["value"], f["db.dsn"]["importance"]) == ("Use SCSQL_AGENT_DSN for agents", 2)
    assert f["db.dsn"]["updated_at"] > f["db.dsn"]["created_at"]
    assert q(agent, "select scsql.forget('db.dsn') as f")[0]["f"] is True
    assert q(agent, "select scsql.forget('db.dsn') as f")[0]["f"] is False
    assert facts(agent) == {}


def test_full_memory_archives_lowest_importance_then_oldest_and_keeps_them_searchable(agent):
    # 100 facts: importance cycles 1..5; the importance-1 ones are the first to go, oldest first.
    for i in range(100):
        remember(agent, f"fact{i:03}", f"value number {i} about topic{i}", i % 5 + 1)
    assert len(facts(agent)) == 100
    out = [remember(agent, f"new{i}", f"fresh value {i}", 3) for i in range(3)]
    assert [o["archived"] for o in out] == [["fact000"], ["fact005"], ["fact010"]]
    assert all(o["stored"] == "memory" and o["facts"] == 100 for o in out)
    f = facts(agent)
    assert len(f) == 100 and not {"fact000", "fact005", "fact010"} & set(f)
    arch = archived(agent)
    assert set(arch) == {"fact000", "fact005", "fact010"}
    assert arch["fact005"]["meta"]["importance"] == 1 and arch["fact005"]["path"] == "fact:fact005"
    # Archived facts are found by search, with their text intact.
    hits = q(agent, "select source_kind, source_path, content from scsql.search('topic5')")
    assert hits[0]["source_kind"] == "archived_fact" and hits[0]["content"] == "fact005\nvalue number 5 about topic5"
    # Remembering an archived key again brings it back and drops the stale archive.
    remember(agent, "fact005", "value revived", 5)
    assert "fact005" not in archived(agent) and facts(agent)["fact005"]["value"] == "value revived"
    # forget removes an archived fact too.
    assert q(agent, "select scsql.forget('fact010') as f")[0]["f"] is True
    assert "fact010" not in archived(agent)


def test_importance_five_survives_any_eviction_a_lower_fact_can_satisfy(agent):
    for i in range(99):
        remember(agent, f"vital{i:02}", f"must keep {i}", 5)
    remember(agent, "minor", "can go", 4)
    # Full: the next fact evicts the only non-5 fact even though it is newer than every vital one.
    out = remember(agent, "vital99", "must keep 99", 5)
    assert out["archived"] == ["minor"]
    # Now only importance-5 facts are left: a new importance-1 fact is itself the one to archive.
    low = remember(agent, "trivia", "low value", 1)
    assert (low["stored"], low["archived"]) == ("archived", ["trivia"])
    assert all(f["importance"] == 5 for f in facts(agent).values()) and len(facts(agent)) == 100
    # With nothing lower left, the oldest importance-5 fact goes to the archive, not away.
    out = remember(agent, "vital100", "must keep 100", 5)
    assert out["archived"] == ["vital00"] and "vital00" in archived(agent)


def test_capacity_scales_with_indexed_file_chunks_from_100_to_250(scsql_db, agent):
    assert q(agent, "select capacity from scsql.memory_status()")[0]["capacity"] == 100
    # 1,000 file chunks (one per heading) raise capacity by 10; notes do not count.
    text = "\n".join(f"# section {i}\nbody {i}\n" for i in range(1000))
    assert q(agent, "select chunks from scsql.index_text('big.md', %s, 'file')", text)[0]["chunks"] == 1000
    q(agent, "select * from scsql.index_text('note', %s, 'note')", text)
    status = q(agent, "select * from scsql.memory_status()")[0]
    assert (status["file_chunks"], status["capacity"]) == (1000, 110)
    assert remember(agent, "k", "v")["capacity"] == 110
    with scsql_db.connect() as conn:  # the cap: a project of 50,000 file chunks
        conn.execute("update scsql.memory_state set n_file_chunks = 50000")
        conn.commit()
    assert q(agent, "select capacity from scsql.memory_status()")[0]["capacity"] == 250


@pytest.mark.parametrize(
    ("key", "value", "importance", "code"),
    [
        ("k" * 201, "v", 3, "SC200"),
        ("k", "v" * 4001, 3, "SC200"),
        ("", "v", 3, "SC201"),
        ("   ", "v", 3, "SC201"),
        ("k", "", 3, "SC201"),
        ("two\nlines", "v", 3, "SC201"),
        ("bell\x07", "v", 3, "SC201"),
        ("k", "v", 0, "SC202"),
        ("k", "v", 6, "SC202"),
    ],
)
def test_bad_facts_are_refused_and_nothing_is_stored(agent, key, value, importance, code):
    remember(agent, "existing", "stays")
    with pytest.raises(ScsqlError) as err:
        remember(agent, key, value, importance)
    assert err.value.code == code and err.value.message
    assert list(facts(agent)) == ["existing"]


def test_nul_bytes_get_a_clear_error_through_the_api(agent):
    from scsql.api import Api

    api = Api(agent)
    with pytest.raises(ScsqlError) as err:
        api.call("remember", key="k", value="a\x00b")
    assert err.value.code == "SC222" and "NUL" in err.value.message
    assert facts(agent) == {}
    assert api.call("remember", key="k", value="ok", importance=5)[0]["stored"] == "memory"


def test_concurrent_remembers_never_exceed_capacity_nor_lose_a_fact(scsql_db, agent):
    for i in range(97):
        remember(agent, f"base{i:02}", f"base {i}", 2)
    sessions = 12
    keys = [f"conc{i:02}" for i in range(sessions)]
    conninfo = scsql_db.login(agent.name)
    errors: list[BaseException] = []

    # The first session takes the project's working-memory lock and holds it
    # until every other session is queued behind it.
    holder = psycopg.connect(conninfo, row_factory=dict_row)
    holder.execute("select * from scsql.remember('holder', 'first in', 3)")

    def worker(key: str) -> None:
        try:
            with psycopg.connect(conninfo, row_factory=dict_row, autocommit=True) as conn:
                conn.execute("select * from scsql.remember(%s, %s, 3)", (key, f"value of {key}"))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in keys]
    for t in threads:
        t.start()
    # On Citus the lock is a shard's row, on a worker: its waits are counted there too.
    waits = ("select count(distinct waiting_gpid) as n from citus_lock_waits" if scsql_db.server.workers else
             "select count(distinct l.pid) as n from pg_locks l join pg_stat_activity a using (pid) "
             "where not l.granted and a.datname = current_database()")
    try:
        with scsql_db.connect(autocommit=True) as mon:  # the race really happens: all wait at once
            wait_for(lambda: mon.execute(waits).fetchone()["n"] == sessions, timeout=30,
                     message="the sessions did not all overlap")
    finally:
        holder.commit()
        holder.close()
        for t in threads:
            t.join(60)
    assert errors == []
    in_memory = facts(agent)
    in_archive = archived(agent)
    all_keys = {f"base{i:02}" for i in range(97)} | set(keys) | {"holder"}
    assert len(in_memory) == 100
    assert set(in_memory) | set(in_archive) == all_keys and not set(in_memory) & set(in_archive)
    assert len(in_archive) == len(all_keys) - 100
    # The archived ones are the importance-2 base facts, oldest first.
    assert set(in_archive) == {f"base{i:02}" for i in range(len(all_keys) - 100)}


def test_agents_of_another_project_see_nothing(scsql_db, agent):
    other = scsql_db.agent("mem_other", scsql_db.project())
    remember(agent, "secret", "only for my project", 5)
    assert q(other, "select count(*) as n from scsql.memory_facts")[0]["n"] == 0
    assert [r for r in q(other, "select * from scsql.recall_context()")] == []
    assert q(other, "select scsql.forget('secret') as f")[0]["f"] is False
    assert "secret" in facts(agent)


def test_recall_context_restores_facts_and_sessions_within_budget_in_a_stable_order(agent):
    for i in range(30):
        remember(agent, f"k{i:02}", f"fact number {i} " + "detail " * (i % 7), i % 5 + 1)
    for i in range(7):
        q(agent, "select * from scsql.summarize_session(%s)",
          f'{{"done": ["step {i}"], "decisions": ["choice {i}"], "open_tasks": "task {i}"}}')
    for budget in (100, 400, 1500):
        rows = q(agent, "select * from scsql.recall_context(%s)", budget)
        assert sum(r["tokens"] for r in rows) <= budget
        assert all(r["tokens"] == -(-len(r["content"]) // 4) for r in rows)  # ceil(characters / 4)
        assert rows == q(agent, "select * from scsql.recall_context(%s)", budget)  # stable
        facts_rows = [r for r in rows if r["section"] == "fact"]
        sessions = [r for r in rows if r["section"] == "session"]
        # Sections in their order: facts first, sessions after the open loops
        # and decisions the summaries fed.
        order = ["fact", "open_loop", "decision", "session", "broadcast"]
        assert [r["section"] for r in rows] == sorted((r["section"] for r in rows), key=order.index)
        assert rows[0]["section"] == "fact"
        # Facts by importance, then the most recently updated first.
        keys = [(-r["importance"], -r["at"].timestamp()) for r in facts_rows]
        assert keys == sorted(keys) and facts_rows and facts_rows[0]["importance"] == 5
        assert len(sessions) <= 5 and sessions  # the latest summaries get their share even when facts are many
        assert [r["at"] for r in sessions] == sorted((r["at"] for r in sessions), reverse=True)
        assert sessions[0]["content"].endswith("open tasks: task 6")
    everything = q(agent, "select * from scsql.recall_context(100000)")
    assert len([r for r in everything if r["section"] == "fact"]) == 30
    with pytest.raises(ScsqlError) as err:
        q(agent, "select * from scsql.recall_context(10)")
    assert err.value.code == "SC209"


def test_pack_keeps_the_best_items_within_budget_with_citations(agent):
    remember(agent, "deploy.rule", "Deploy the ledger service only after migrations ran", 5)
    remember(agent, "unrelated", "The office plant needs water on Fridays", 5)
    q(agent, "select * from scsql.summarize_session(%s)",
      '{"done": ["wrote the ledger"], "decisions": ["ledger migrations run before every deploy"]}')
    for i in range(12):
        q(agent, "select * from scsql.index_text(%s, %s, 'file')", f"src/ledger{i}.py",
          f"def deploy_ledger_{i}():\n    # run migrations, then deploy the ledger\n    return {i}\n" + "# pad\n" * i)
    full = q(agent, "select * from scsql.pack('deploy the ledger after migrations', 100000)")
    kinds = [p["kind"] for p in full]
    assert "fact" in kinds and "decision" in kinds and "chunk" in kinds
    assert "unrelated" not in {p["key"] for p in full}
    assert [p["score"] for p in full] == sorted((p["score"] for p in full), reverse=True)
    for p in full:
        assert p["source_path"] and p["tokens"] == -(-len(p["content"]) // 4)
        assert p["kind"] == "fact" or p["chunk_hash"]
    small = q(agent, "select * from scsql.pack('deploy the ledger after migrations', 120)")
    assert sum(p["tokens"] for p in small) <= 120
    assert [p["item"] for p in small] == [p["item"] for p in full][: len(small)]  # the lowest-scored went first
    assert len(small) < len(full)
    assert q(agent, "select * from scsql.pack('the and of', 500)") == []


def test_expired_session_summaries_are_purged_by_the_worker(scsql_db, agent):
    from scsql.core import worker

    q(agent, "select * from scsql.summarize_session('{\"done\": \"ancient history\"}')")
    q(agent, "select * from scsql.summarize_session('{\"done\": \"recent work\"}')")
    rows = q(agent, "select path, expires_at, created_at from scsql.kb_sources where kind = 'session_summary' "
                    "order by created_at")
    assert all(abs((r["expires_at"] - r["created_at"]).days - 365) <= 1 for r in rows)
    with scsql_db.connect() as conn:
        conn.execute("update scsql.kb_sources set expires_at = now() - interval '1 day' where path = %s",
                     (rows[0]["path"],))
        conn.commit()
    sessions = [r["content"] for r in q(agent, "select * from scsql.recall_context()") if r["section"] == "session"]
    assert len(sessions) == 1 and sessions[0].endswith("done: recent work")
    assert worker.drain(agent, subsystems.jobs(["memory_retention"])) == 1
    assert [r["path"] for r in q(agent, "select path from scsql.kb_sources")] == [rows[1]["path"]]
    assert q(agent, "select * from scsql.search('ancient')") == []


def test_huge_inputs_get_clear_errors(agent):
    five_mb = "x" * (5 * 1024 * 1024)
    for sql, args, code in [
        ("select * from scsql.remember(%s, %s)", ("k", five_mb), "SC200"),
        ("select * from scsql.remember(%s, %s)", (five_mb, "v"), "SC200"),
        ("select * from scsql.search(%s)", (five_mb,), "SC205"),
        ("select * from scsql.pack(%s)", (five_mb,), "SC205"),
        ("select * from scsql.summarize_session(%s)", (json.dumps({"done": five_mb}),), "SC208"),
    ]:
        with pytest.raises(ScsqlError) as err:
            q(agent, sql, *args)
        assert err.value.code == code, sql
    assert facts(agent) == {}


def test_a_fact_that_outgrows_its_limit_once_redacted_is_refused_saying_so(agent):
    """A key of 198 characters passes the 200-character rule, and is 594 once
    each URL password becomes [REDACTED:url_password]: the refusal says the
    length is the redacted one (the caller never sent 594 characters), and
    nothing is stored."""
    for key, value in (("db://u:p@h " * 18, "v"), ("k", "db://u:p@h\n" * 360)):
        with pytest.raises(ScsqlError) as err:
            remember(agent, key, value)
        assert err.value.code == "SC200"
        assert "once redacted" in err.value.message and "REDACTED" not in err.value.message
    assert facts(agent) == {}


def test_text_of_only_zero_width_characters_is_empty(scsql_db):
    """remember, decide and open_loop call a text of zero-width characters
    empty (SC201 / SC235 / SC238), as index_text does: nothing is stored."""
    agent = scsql_db.agent("zw", scsql_db.project())
    blank = "\u200b\u200d \ufeff"
    for call, code in (("select scsql.remember('zw.key', %s)", "SC201"), ("select scsql.decide(%s, 'because')", "SC235"),
                       ("select scsql.open_loop(%s)", "SC238")):
        with pytest.raises(ScsqlError) as e, agent.transaction() as conn:
            conn.execute(call, (blank,))
        assert e.value.code == code, (call, e.value)
    with agent.transaction() as conn:
        assert conn.execute("select count(*) as n from scsql.memory_facts").fetchone()["n"] == 0
        assert conn.execute("select count(*) as n from scsql.decisions").fetchone()["n"] == 0
