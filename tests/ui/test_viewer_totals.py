"""The figures the viewer's sessions and cost pages (and metrics) read from
scsql.session_totals and scsql.usage_days, kept by triggers as rows are
written, equal the sums of the rows themselves: for the auditor and for an
agent (who sees only its project's), for every grouping and for time ranges
of whole and part days; when two agents write into one session at once (one
waits for the other's addition); and after retention drops a partition."""

from __future__ import annotations

import datetime as dt
import threading
from collections import defaultdict
from decimal import Decimal

import psycopg
import pytest

from scsql.api import Api
from scsql.audit.checkpoints import record_checkpoints
from scsql.audit.signing import sign_row
from scsql.audit.telemetry import SESSION_FIELDS, TOOL_CALL_FIELDS

from ..helpers import auditor_key, backdate_keys, old_day, statement_lock_waiters, table_exists, wait_for

NOW = dt.datetime.now(dt.UTC)
GROUPS = ("day", "agent", "model", "session", "project", "tool")


def _signed(conn, agent, fn: str, table: str, fields, args: dict, at: dt.datetime | None = None) -> dict:
    """scsql.FN with ARGS signed as a write of TABLE made AT, on CONN (the caller's transaction)."""
    sent = {k: v for k, v in sign_row(agent, table, fields, args, at=at).items() if v is not None}
    call = ", ".join(f"p_{k} => %({k})s" for k in sent)
    return conn.execute(f"select * from scsql.{fn}({call})", sent).fetchone()


@pytest.fixture
def usage(scsql_db):
    """Projects A (agents a1, a2) and B (agent b): sessions, prompts, tool calls (priced, unpriced, free,
    failed, without a session, imported from days ago) and the model's messages, through the API."""
    out = {}
    for side, names in (("a", ("a1", "a2")), ("b", ("b1",))):
        project = scsql_db.project()
        agents = [scsql_db.agent(f"u{n}", project) for n in names]
        out[side] = {"project": project, "agents": agents, "sessions": []}
        for k, agent in enumerate(agents):
            api = Api(agent)
            sid = api.call("start_session", client="claude-code", model="claude-sonnet-4-5")["session_id"]
            out[side]["sessions"].append(sid)
            api.call("record_prompt", text=f"prompt {k}", session_id=sid)
            api.call("record_prompt", text=f"imported {k}", session_id=sid, imported=True,
                     occurred_at=NOW - dt.timedelta(days=2, hours=3))
            for i, (model, origin, status, days) in enumerate([
                    ("claude-sonnet-4-5", "model", "ok", 0), ("claude-sonnet-4-5", "model", "error", 0),
                    ("mystery-model", "model", "ok", 1), (None, "database", "ok", 0), ("claude-opus-4-1", "model", "ok", 3),
                    (None, "model", "denied", 2)]):
                api.call("capture_tool_call", tool=("Bash", "Read", "Edit")[i % 3], status=status, model=model,
                         origin=origin, session_id=sid if i != 3 else None, input_tokens=100 * (i + 1),
                         output_tokens=7 * i, occurred_at=NOW - dt.timedelta(days=days, hours=i))
            for i, model in enumerate(("claude-sonnet-4-5", "mystery-model", None)):
                api.call("record_model_call", message_id=f"m{side}{k}{i}", model=model, input_tokens=10 + i,
                         output_tokens=20, cache_write_tokens=300, cache_read_tokens=4000, tool_use_ids=[],
                         session_id=sid if i < 2 else None, occurred_at=NOW - dt.timedelta(days=i, minutes=5))
    # An agent writes into another agent's session of its project.
    Api(out["a"]["agents"][1]).call("record_tool_call", tool="Grep", session_id=out["a"]["sessions"][0], input_tokens=5)
    return out


def _raw_cost(conn, group: str, since, until) -> dict:
    """viewer_cost's figures summed here from the rows the connection's identity may read."""
    rows = conn.execute("""
        select t.project_id, p.name as project, a.name as agent, t.session_id, t.model, t.tool, coalesce(t.occurred_at, t.at) as happened,
               1 as calls, 0 as messages, t.input_tokens as i, t.output_tokens as o, 0 as cw, 0 as cr, t.cost_usd as cost,
               (t.cost_usd is null and t.origin = 'model') as unpriced
        from scsql.tool_calls t join scsql.projects p using (project_id) join scsql.agents a on a.agent_id = t.author_id
        union all
        select m.project_id, p.name, a.name, m.session_id, m.model, '(model)', coalesce(m.occurred_at, m.at), 0, 1,
               m.input_tokens, m.output_tokens, m.cache_write_tokens, m.cache_read_tokens, m.cost_usd, m.cost_usd is null
        from scsql.model_calls m join scsql.projects p using (project_id) join scsql.agents a on a.agent_id = m.author_id
    """).fetchall()
    out: dict = defaultdict(lambda: [0, 0, 0, 0, 0, 0, Decimal(0), 0])
    for r in rows:
        if (since and r["happened"] < since) or (until and r["happened"] >= until):
            continue
        key = {"day": r["happened"].astimezone(dt.UTC).strftime("%Y-%m-%d"), "agent": r["agent"],
               "model": r["model"] if r["model"] is not None else "(none)", "project": r["project"], "tool": r["tool"],
               "session": str(r["session_id"]) if r["session_id"] is not None else "(none)"}[group]
        acc = out[key]
        for j, v in enumerate((r["calls"], r["messages"], r["i"], r["o"], r["cw"], r["cr"], r["cost"] or 0, int(r["unpriced"]))):
            acc[j] += v
    return {k: tuple(v) for k, v in out.items()}


def _viewer_cost(conn, group: str, since, until) -> dict:
    rows = conn.execute("select * from scsql.viewer_cost(%s, null, null, %s, %s, 5000)", (group, since, until)).fetchall()
    return {r["key"]: (r["tool_calls"], r["model_messages"], r["input_tokens"], r["output_tokens"], r["cache_write_tokens"],
                       r["cache_read_tokens"], r["cost_usd"], r["unpriced"]) for r in rows}


def _ranges():
    midnight = NOW.replace(hour=0, minute=0, second=0, microsecond=0)
    return [(None, None), (midnight - dt.timedelta(days=2), None), (NOW - dt.timedelta(hours=40), None),
            (None, NOW - dt.timedelta(hours=2)), (midnight - dt.timedelta(days=3, hours=5), midnight - dt.timedelta(hours=7)),
            (midnight - dt.timedelta(days=1, hours=-1), midnight - dt.timedelta(days=1, hours=-20)),
            (NOW - dt.timedelta(hours=50), NOW - dt.timedelta(hours=30))]  # sessions with rows before and after, none in it


def _check_figures(conn) -> int:
    """Every grouping and range of viewer_cost, every session of viewer_sessions and the tool call series of
    metrics against the rows; returns how many cost rows were compared."""
    compared = 0
    for group in GROUPS:
        for since, until in _ranges():
            want = _raw_cost(conn, group, since, until)
            assert _viewer_cost(conn, group, since, until) == want, (group, since, until)
            compared += len(want)
    sessions = conn.execute("""
        select s.prompts, s.tool_calls, s.failures, s.model_messages, s.input_tokens, s.output_tokens, s.cache_tokens,
               s.cost_usd, s.ended_at, t.prompts as r_prompts, t.tool_calls as r_calls, t.failures as r_failures,
               t.model_messages as r_messages, t.input_tokens as r_i, t.output_tokens as r_o, t.cache_tokens as r_c,
               t.cost_usd as r_cost, coalesce(greatest(s.started_at, t.last_at), s.started_at) as r_ended
        from scsql.viewer_sessions(p_limit => 500) s join scsql.sessions x using (session_id)
        cross join lateral scsql_caller.viewer_session_totals(x.project_id, x.session_id, x.at) t""").fetchall()
    assert sessions
    for s in sessions:
        assert (s["prompts"], s["tool_calls"], s["failures"], s["model_messages"], s["input_tokens"], s["output_tokens"],
                s["cache_tokens"], s["cost_usd"], s["ended_at"]) == \
               (s["r_prompts"], s["r_calls"], s["r_failures"], s["r_messages"], s["r_i"], s["r_o"], s["r_c"],
                s["r_cost"], s["r_ended"])
    return compared


def _metrics_calls(conn) -> dict:
    return {(tuple(sorted(r["labels"].items())), r["metric"]): r["value"] for r in conn.execute(
        "select * from scsql.metrics() where metric like 'scsql_tool_call%%'").fetchall()}


def _raw_metrics_calls(conn) -> dict:
    out = {}
    for r in conn.execute("""select p.name, coalesce(t.model, '') as model, t.status, count(*) as n,
                                    coalesce(sum(t.cost_usd), 0) as cost, sum(t.input_tokens) as i, sum(t.output_tokens) as o
                             from scsql.tool_calls t join scsql.projects p using (project_id) group by 1, 2, 3""").fetchall():
        out[((("model", r["model"]), ("project", r["name"]), ("status", r["status"])), "scsql_tool_calls_total")] = float(r["n"])
        for key, metric, value in ((("model", r["model"]), ("project", r["name"])), "scsql_tool_call_cost_usd_total", r["cost"]), \
                                  ((("direction", "input"), ("model", r["model"]), ("project", r["name"])), "scsql_tool_call_tokens_total", r["i"]), \
                                  ((("direction", "output"), ("model", r["model"]), ("project", r["name"])), "scsql_tool_call_tokens_total", r["o"]):
            out[(key, metric)] = out.get((key, metric), 0.0) + float(value)
    return out


def test_kept_figures_equal_the_rows_for_the_auditor_and_an_agent(scsql_db, usage):
    with scsql_db.connect() as conn:
        conn.execute("set role scsql_auditor")
        assert _check_figures(conn) > 50
        assert _metrics_calls(conn) == _raw_metrics_calls(conn)
    a1 = usage["a"]["agents"][0]
    with a1.transaction() as conn:
        assert _check_figures(conn) > 20
        theirs = conn.execute("select (select count(*) from scsql.usage_days where project_id <> p.project_id) "
                              "     + (select count(*) from scsql.session_totals where project_id <> p.project_id) as n, "
                              "       (select count(*) from scsql.usage_days) as mine "
                              "from scsql.projects p where p.name = %s", (usage["a"]["project"],)).fetchone()
        assert theirs["n"] == 0 and theirs["mine"] > 0  # B's figures exist, but an agent of A reads none of them
        assert {r["key"] for r in conn.execute("select * from scsql.viewer_cost('project')").fetchall()} == {usage["a"]["project"]}


def test_two_agents_adding_to_one_session_at_once_lose_nothing(scsql_db, usage):
    """a1 adds a tool call to its session and holds its transaction open; a2's
    tool call into the same session waits for a1's addition to session_totals
    (the race happened), then adds its own: both are counted."""
    a1, a2 = usage["a"]["agents"]
    sid = usage["a"]["sessions"][0]
    before = _session_figures(scsql_db, sid)
    hold, done = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def first():
        try:
            with a1.transaction() as conn:
                _signed(conn, a1, "record_tool_call", "scsql.tool_calls", TOOL_CALL_FIELDS,
                        {"tool": "Bash", "session_id": sid, "status": "error", "input_tokens": 11})
                hold.set()
                done.wait(30)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
            hold.set()

    t = threading.Thread(target=first)
    t.start()
    assert hold.wait(30)
    second = threading.Thread(target=lambda: Api(a2).call("record_tool_call", tool="Read", session_id=sid, input_tokens=13))
    second.start()
    wait_for(lambda: statement_lock_waiters(scsql_db, "%record_tool_call%") >= 1)  # a2 waits on a1's row
    done.set()
    t.join(30)
    second.join(30)
    assert not errors
    after = _session_figures(scsql_db, sid)
    assert (after["tool_calls"] - before["tool_calls"], after["failures"] - before["failures"],
            after["input_tokens"] - before["input_tokens"]) == (2, 1, 24)
    with scsql_db.connect() as conn:
        conn.execute("set role scsql_auditor")
        _check_figures(conn)


def _session_figures(db, sid: int) -> dict:
    with db.connect() as conn:
        return conn.execute("select * from scsql.session_totals where session_id = %s", (sid,)).fetchone()


def test_retention_subtracts_what_it_drops(scsql_db):
    """Tool calls of a session written three days ago, in a partition that
    retention drops: the kept figures lose exactly them, and the session's last
    row is then its newest kept one."""
    db = scsql_db
    three_days_ago = old_day(db)
    project = db.project()
    agent = db.agent("ret", project)
    backdate_keys(db)
    with agent.transaction() as conn:
        sid = _signed(conn, agent, "start_session", "scsql.sessions", SESSION_FIELDS, {"client": "claude-code"},
                      at=three_days_ago)["session_id"]
        for i in range(3):
            _signed(conn, agent, "record_tool_call", "scsql.tool_calls", TOOL_CALL_FIELDS,
                    {"tool": "Bash", "session_id": sid, "model": "claude-sonnet-4-5", "input_tokens": 100, "status": "ok"},
                    at=three_days_ago + dt.timedelta(seconds=i))
    api = Api(agent)
    api.call("record_prompt", text="kept", session_id=sid, occurred_at=three_days_ago + dt.timedelta(hours=1))
    api.call("record_tool_call", tool="Read", session_id=sid, input_tokens=7)
    with db.connect() as conn:
        old = conn.execute("select tableoid::regclass::text as p from scsql.tool_calls where session_id = %s and tool = 'Bash'",
                           (sid,)).fetchone()["p"]
        assert old != conn.execute("select tableoid::regclass::text as p from scsql.tool_calls where tool = 'Read' "
                                   "and session_id = %s", (sid,)).fetchone()["p"]
        conn.execute("set role scsql_auditor")
        before = conn.execute("select * from scsql.viewer_sessions(p_session => %s)", (sid,)).fetchone()
        assert (before["tool_calls"], before["input_tokens"]) == (4, 307)
    record_checkpoints(db.admin, auditor_key(db))
    with db.connect() as conn:
        conn.execute("select scsql.set_partition_retention('scsql.tool_calls', '2 days')")
        conn.execute("select scsql._retire_partition(%s::regclass)", (old,))
        conn.commit()
    assert not table_exists(db, old)
    with db.connect() as conn:
        conn.execute("set role scsql_auditor")
        after = conn.execute("select * from scsql.viewer_sessions(p_session => %s)", (sid,)).fetchone()
        assert (after["tool_calls"], after["input_tokens"]) == (1, 7)
        assert after["ended_at"] > three_days_ago + dt.timedelta(hours=2)  # the Read call, now
        _check_figures(conn)
        assert _metrics_calls(conn) == _raw_metrics_calls(conn)
        assert conn.execute("select count(*) as n from scsql.usage_days where tool_calls = 0 and model_messages = 0"
                            ).fetchone()["n"] == 0
