"""Telemetry: classification under RLS, cost from the price table, the
learning loop in the outcome's transaction, and the MCP tools."""

from __future__ import annotations

import json
import threading
from decimal import Decimal

import anyio
import mcp_types
import psycopg
import pytest

from scsql import cli
from scsql.audit.telemetry import SIGNED_WRITES
from scsql.audit.cli import export_learnings
from scsql.core.errors import ScsqlError
from scsql.mcp_server import build
from scsql.api import Api

from ..helpers import triggers_off


def _visible(agent, table: str = "outcomes") -> set[str]:
    with agent.transaction() as conn:
        return {r["summary"] for r in conn.execute(f"select summary from scsql.{table}").fetchall()}


def test_classification_decides_who_reads_an_outcome(scsql_db):
    project, other = scsql_db.project(), scsql_db.project()
    a = scsql_db.agent("a", project, team_role="developer")
    b = scsql_db.agent("b", project, team_role="developer")
    q = scsql_db.agent("q", project, team_role="qa")
    g = scsql_db.agent("g", project, team_role="reviewer")
    x = scsql_db.agent("x", other, team_role="developer")
    with scsql_db.connect() as conn:
        conn.execute("select scsql.grant_project_read(%s, %s)", (project, x.name))
        conn.execute("select scsql.grant_confidential(%s, 'developer')", (g.name,))
    api_b = Api(b)
    for cls in ("public", "internal", "confidential", "restricted"):
        api_b.call("record_outcome", kind="failed", summary=f"b-{cls}", task_ref="T-9", classification=cls)
    assert _visible(b) == {"b-public", "b-internal", "b-confidential", "b-restricted"}
    assert _visible(a) == {"b-public", "b-internal", "b-confidential"}  # same team role
    assert _visible(q) == {"b-public", "b-internal"}
    assert _visible(g) == {"b-public", "b-internal", "b-confidential"}  # explicit grant
    assert _visible(x) == {"b-public"}  # another project, granted read
    # Learnings carry the outcome's classification.
    assert _visible(a, "learnings") == {"b-public", "b-internal", "b-confidential"}
    assert _visible(q, "learnings") == {"b-public", "b-internal"}
    assert {r["summary"] for r in Api(q).call("learnings", query="b-restricted")} == set()
    assert {r["summary"] for r in Api(b).call("learnings", query="b-restricted")} == {"b-restricted"}
    with scsql_db.connect() as conn:
        conn.execute("set role scsql_auditor")
        assert len(conn.execute("select * from scsql.outcomes").fetchall()) == 4


def test_restricted_outcome_of_b_is_invisible_to_a(scsql_db):
    project = scsql_db.project()
    a = scsql_db.agent("a", project)
    b = scsql_db.agent("b", project)
    Api(b).call("record_outcome", kind="rejected", summary="secret", session_id=None, task_ref="T-1",
                classification="restricted")
    Api(b).call("record_outcome", kind="accepted", summary="open", task_ref="T-1", classification="public")
    with psycopg.connect(scsql_db.login(a.name)) as conn:
        assert conn.execute("select summary from scsql.outcomes where classification = 'restricted'").fetchall() == []
        assert [r[0] for r in conn.execute("select summary from scsql.outcomes").fetchall()] == ["open"]
    with psycopg.connect(scsql_db.login(b.name)) as conn:
        assert sorted(r[0] for r in conn.execute("select summary from scsql.outcomes").fetchall()) == ["open", "secret"]


def test_unknown_or_null_classification_is_rejected(scsql_db):
    project = scsql_db.project()
    a = scsql_db.agent("a", project)
    api = Api(a)
    with pytest.raises(ScsqlError) as err:
        api.call("record_outcome", kind="failed", summary="x", task_ref="T", classification="secret")
    assert err.value.code == "SC110"
    with pytest.raises(ScsqlError) as err, a.transaction() as conn:
        conn.execute("select * from scsql.record_outcome('failed', 'x', p_task_ref => 'T', p_classification => null)")
    assert err.value.code == "SC110"
    # The constraint itself, below the API, refuses both.
    with scsql_db.connect() as conn:
        for value, state in (("secret", "23514"), (None, "23502")):
            with pytest.raises(psycopg.Error) as exc:
                triggers_off(conn)  # on the workers too, where Citus's shards' triggers fire
                conn.execute("""insert into scsql.outcomes (project_id, at, task_ref, kind, signal, summary, classification,
                                  author_id, key_id, chain_id, seq, prev_hash, row_hash, signature)
                                values (1, now(), 'T', 'failed', 'agent', 'x', %s, 1, 1, 1, 1, '', '', '')""", (value,))
            conn.rollback()
            assert exc.value.sqlstate == state
    with a.transaction() as conn:
        assert conn.execute("select count(*) as n from scsql.outcomes").fetchone()["n"] == 0


def test_cost_is_priced_from_the_models_side(scsql_db, monkeypatch, capsys):
    project = scsql_db.project()
    a = scsql_db.agent("a", project)
    with scsql_db.connect() as conn:
        conn.execute("select scsql.set_model_price('claude-sonnet-4', 3, 15, now() - interval '1 day')")
        conn.execute("select scsql.set_model_price('claude-sonnet-4-turbo', 1, 2, now() - interval '1 day')")
        conn.execute("select scsql.set_model_price('claude-sonnet-4', 6, 30, now() + interval '1 day')")  # not yet
    api = Api(a)
    # 1000 argument tokens written at the output rate, 20000 result tokens read at the input rate.
    r = api.call("record_tool_call", tool="Read", model="claude-sonnet-4-20250514", input_tokens=1000, output_tokens=20000)
    assert Decimal(str(r["cost_usd"])) == Decimal("0.075")  # 1000*15/1e6 + 20000*3/1e6
    r = api.call("record_tool_call", tool="Read", model="claude-sonnet-4-turbo", input_tokens=1000, output_tokens=1000)
    assert Decimal(str(r["cost_usd"])) == Decimal("0.003")  # the longest priced prefix wins
    r = api.call("record_tool_call", tool="context", model="claude-sonnet-4", origin="database", output_tokens=50000)
    assert r["cost_usd"] == 0  # only assembled database content
    r = api.call("record_tool_call", tool="Read", model="mystery-model", input_tokens=5)
    assert r["cost_usd"] is None
    by_model = {x["key"]: x for x in api.call("cost_report", group_by="model")}
    assert Decimal(str(by_model["claude-sonnet-4-20250514"]["cost_usd"])) == Decimal("0.075")
    assert by_model["mystery-model"]["unpriced_calls"] == 1
    by_origin = {x["key"]: x["calls"] for x in api.call("cost_report", group_by="origin")}
    assert by_origin == {"model": 3, "database": 1}
    with pytest.raises(ScsqlError) as err:
        api.call("cost_report", group_by="colour")
    assert err.value.code == "SC010"
    with pytest.raises(ScsqlError) as err, a.transaction() as conn:
        conn.execute("select scsql.set_model_price('x', 1, 1)")
    assert err.value.code == "42501"
    monkeypatch.setenv("SCSQL_DSN", scsql_db.admin)
    assert cli.main(["cost", "--by", "tool", "--json"]) == 0
    rows = {x["key"]: x for x in json.loads(capsys.readouterr().out)}
    assert rows["Read"]["calls"] == 3 and rows["context"]["cost_usd"] == 0


def test_failures_and_confident_successes_become_learnings_in_the_same_transaction(scsql_db):
    project = scsql_db.project()
    a = scsql_db.agent("a", project)
    api = Api(a)
    call = api.call("record_tool_call", tool="pytest", status="error")
    failed = api.call("record_outcome", kind="failed", summary="flaky test in parser", tool_call_id=call["tool_call_id"],
                      signal="test", evidence="AssertionError in test_parse")
    shipped = api.call("record_outcome", kind="shipped", summary="parser rewrite", task_ref="T-2", confidence=0.9)
    unsure = api.call("record_outcome", kind="accepted", summary="maybe", task_ref="T-3", confidence=0.5)
    assert failed["learning_id"] and shipped["learning_id"] and unsure["learning_id"] is None
    found = api.call("learnings", query="parser flaky")
    assert [(x["kind"], x["tool"], x["outcome_kind"]) for x in found] == [("failure", "pytest", "failed")]
    assert [x["summary"] for x in api.call("learnings", kind="experiment")] == ["parser rewrite"]
    # A failing outcome that rolls back leaves no learning either.
    with pytest.raises(ScsqlError):
        api.call("record_outcome", kind="failed", summary="x", tool_call_id=10**12)
    with a.transaction() as conn:
        assert conn.execute("select count(*) as n from scsql.learnings").fetchone()["n"] == 2


def test_learnings_export_appends_only_what_is_new(scsql_db, tmp_path):
    project = scsql_db.project()
    a = scsql_db.agent("a", project, pool_size=6)
    api = Api(a)
    api.call("record_outcome", kind="failed", summary="one", task_ref="T")
    api.call("record_outcome", kind="shipped", summary="two", task_ref="T", confidence=1)
    assert export_learnings(a, tmp_path) == {"failure": 1, "experiment": 1}
    assert export_learnings(a, tmp_path) == {"failure": 0, "experiment": 0}
    # A learning whose transaction is still open when an export starts (with
    # a lower id than learnings committed after it) is not skipped: the export
    # waits for it.
    from scsql.audit.telemetry import OUTCOME_FIELDS
    from scsql.audit.signing import sign_row

    slow = a.db.pool.getconn()
    try:
        slow.execute(f"set local role {a.role}")
        args = sign_row(a, "scsql.outcomes", OUTCOME_FIELDS, {"kind": "errored", "summary": "slow", "task_ref": "T"})
        slow.execute("select * from scsql.record_outcome(p_kind => %s, p_summary => %s, p_task_ref => %s, "
                     "p_at => %s, p_key_id => %s, p_signature => %s)",
                     (args["kind"], args["summary"], args["task_ref"], args["at"], args["key_id"], args["signature"]))
        # Another agent of the project commits a learning with a higher id meanwhile.
        Api(scsql_db.agent("b", project)).call("record_outcome", kind="errored", summary="fast", task_ref="T")
        result: dict = {}
        exporter = threading.Thread(target=lambda: result.update(export_learnings(a, tmp_path)))
        exporter.start()
        # On Citus the lock is a shard's row, on a worker: its waits are counted there too.
        waits = ("select count(*) as n from citus_lock_waits" if scsql_db.server.workers else
                 "select count(*) as n from pg_locks l join pg_stat_activity a using (pid) "
                 "where not l.granted and a.datname = current_database()")
        with scsql_db.connect(autocommit=True) as watch:
            for _ in range(500):
                if watch.execute(waits).fetchone()["n"]:
                    break
                threading.Event().wait(0.02)
            else:
                pytest.fail("the export did not wait for the open transaction")
        slow.commit()
        exporter.join(30)
    finally:
        a.db.pool.putconn(slow)
    assert result == {"failure": 2, "experiment": 0}
    failures = [json.loads(x) for x in (tmp_path / "learnings" / "failures.jsonl").read_text().splitlines()]
    assert sorted(f["summary"] for f in failures) == ["fast", "one", "slow"]
    assert len({f["learning_id"] for f in failures}) == 3
    assert [json.loads(x)["summary"] for x in (tmp_path / "learnings" / "experiments.jsonl").read_text().splitlines()] == ["two"]


def test_mcp_tools_hide_the_signing_arguments(scsql_db):
    project = scsql_db.project()
    a = scsql_db.agent("a", project)
    server = build(Api(a), all_tools=True)
    tools = {t.name: t for t in server.tools.listed}
    for name in ("record_tool_call", "record_outcome", "start_session", "cost_report", "learnings"):
        assert name in tools
    for name in SIGNED_WRITES:
        props = set(tools[name].input_schema["properties"])
        assert {"at", "key_id", "signature"}.isdisjoint(props), name
    assert "tool" in tools["record_tool_call"].input_schema["properties"]
    for hidden in ("verify_chain", "record_checkpoint", "checkpoint_heads_now", "maintain_partitions",
                   "learnings_export"):
        assert hidden not in tools


def test_python_signed_fields_match_the_sql_registry_and_defaults(scsql_db):
    with scsql_db.connect() as conn:
        # The signed fields, then the appended ones (signed too, after them).
        fields = conn.execute("select table_name, column_name, kind from scsql._chain_fields() "
                              "where part in ('signed', 'appended') "
                              "order by table_name, part = 'appended', ordinal").fetchall()
        for function, signed in SIGNED_WRITES.items():
            table, declared = signed.table, signed.fields
            assert [(f["column_name"], f["kind"]) for f in fields if f["table_name"] == table] == \
                [(f.name, f.kind) for f in declared if not f.appended] + \
                [(f.name, f.kind) for f in declared if f.appended], table
            args = conn.execute("select pg_get_function_arguments(oid) as a from pg_proc where proname = %s "
                                "and pronamespace = 'scsql'::regnamespace", (function,)).fetchone()["a"]
            for f in declared:
                if f.default is not None:
                    assert f"p_{f.name} {'text' if isinstance(f.default, str) else 'integer'} DEFAULT " \
                           f"{repr(f.default) if isinstance(f.default, str) else f.default}" in args, (function, f.name)


def test_mcp_tool_writes_a_signed_row_and_cli_exports_learnings(scsql_db, tmp_path, monkeypatch, capsys):
    project = scsql_db.project()
    a = scsql_db.agent("mcp", project)
    tools = build(Api(a)).tools

    def tool(name: str, **arguments):
        result = anyio.run(tools.call_tool, None, mcp_types.CallToolRequestParams(name=name, arguments=arguments))
        assert not result.is_error, result.content[0].text
        return json.loads(result.content[0].text)

    call = tool("record_tool_call", tool="Edit", model="m", input_tokens=3)
    out = tool("record_outcome", kind="reverted", summary="edit broke the build",
               tool_call_id=call["tool_call_id"], signal="ci")
    assert call["seq"] == 1 and out["seq"] == 2 and out["learning_id"]
    monkeypatch.setenv("SCSQL_DSN", scsql_db.admin)
    monkeypatch.setenv("SCSQL_AGENT_DSN", scsql_db.app)
    assert cli.main(["learnings", "export", str(tmp_path), "--agent", a.name]) == 0
    assert cli.main(["learnings", "export", str(tmp_path), "--agent", a.name]) == 0
    lines = (tmp_path / "learnings" / "failures.jsonl").read_text().splitlines()
    assert [json.loads(x)["summary"] for x in lines] == ["edit broke the build"]
    capsys.readouterr()
    assert cli.main(["learnings", "search", "build", "--agent", a.name]) == 0
    assert "edit broke the build" in capsys.readouterr().out
    assert cli.main(["price", "set", "m", "1", "2"]) == 0
    assert cli.main(["price", "list"]) == 0
    assert "m\t" in capsys.readouterr().out
    from scsql.audit.verify import verify

    assert verify(scsql_db.admin, workers=1, progress=False).ok


def test_registry_composes_each_call_once_and_the_server_prepares_it(scsql_db):
    """The registry keeps the composed SQL of a call per set of supplied
    arguments; repeated calls send the same text, so psycopg prepares it on
    the server, and calls with other arguments get their own statement."""
    project = scsql_db.project()
    a = scsql_db.agent("reg", project, pool_size=1)
    with scsql_db.connect() as conn:
        conn.execute("select scsql.set_model_price('m-1', 3, 15, now() - interval '1 day')")
        conn.commit()
    api = Api(a)
    fn = api.functions["record_tool_call"]
    results = [api.call("record_tool_call", tool="Read", model="m-1", input_tokens=1000000) for _ in range(7)]
    assert [r["seq"] for r in results] == list(range(1, 8))
    assert {r["cost_usd"] for r in results} == {15.0}
    other = api.call("record_tool_call", tool="Read", origin="database", input_tokens=5)
    assert other["cost_usd"] == 0 and other["seq"] == 8
    assert len(fn._queries) == 1  # the signing adapter supplies every signed argument
    report = api.functions["cost_report"]
    by_model = api.call("cost_report")
    by_tool = api.call("cost_report", group_by="tool")
    assert [r["key"] for r in by_model] == ["m-1", "(none)"] and [r["calls"] for r in by_tool] == [8]
    assert len(report._queries) == 2
    with a.transaction() as conn:  # the pool's only connection made every call
        prepared = [r["statement"] for r in conn.execute("select statement from pg_prepared_statements").fetchall()]
    assert any("record_tool_call" in s and "p_model" in s for s in prepared), prepared
    with pytest.raises(ScsqlError) as err:
        api.call("record_tool_call", tool="Read", agent_id=1)
    assert err.value.code == "SC010"


def test_a_price_effective_at_a_time_no_client_can_read_is_refused(scsql_db):
    """A price effective from 4713 BC (or the year 9999, which some time
    zones show as 10000) was stored, and then model_prices could not be read
    by any Python client (psycopg: timestamp too small). It is refused (SC010),
    nothing is stored, and model_prices reads."""
    with scsql_db.connect() as conn:
        for at in ("4713-01-01 00:00:00+00 BC", "0001-01-01 00:00:00+00", "9999-12-31 23:59:59+00"):
            with pytest.raises(psycopg.Error) as err:
                conn.execute("select scsql.set_model_price('m-old', 1, 2, %s::timestamptz)", (at,))
            conn.rollback()
            assert err.value.sqlstate == "SC010" and "1970 to 9000" in err.value.diag.message_primary
        conn.execute("select scsql.set_model_price('m-old', 1, 2, '1999-01-01 00:00:00+00')")
        conn.commit()
        assert "m-old" in {r["model"] for r in conn.execute("select * from scsql.model_prices()").fetchall()}
