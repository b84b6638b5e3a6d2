"""scsql.metrics() and ``scsql metrics``: the figures an operator graphs,
each project's visible to its agents only, exported in the Prometheus text
format (parsed back with prometheus_client's own parser) and served for
scraping with --listen (read with a real HTTP GET)."""

from __future__ import annotations

import subprocess
import sys
import os
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from scsql.api import Api
from scsql.core import worker
from scsql.core.errors import ScsqlError
from scsql.ops import metrics

from ..helpers import claim, enqueue, rows, scsql


def record_call(agent, model: str, **kw) -> None:
    Api(agent).call("record_tool_call", tool="Bash", model=model, **kw)


def series(text: str) -> dict[tuple[str, tuple], float]:
    """Every sample of an exposition, by (name, sorted labels)."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


@pytest.fixture
def two_projects(scsql_db):
    """Two projects with tool calls, tasks and a search each; returns (db, agents)."""
    found = {}
    for short in ("a", "b"):
        project = scsql_db.project()
        orch = scsql_db.agent(f"o{short}", project, team_role="orchestrator")
        dev = scsql_db.agent(f"d{short}", project)
        record_call(orch, model="claude-test", input_tokens=100, output_tokens=50)
        enqueue(orch, "developer")
        enqueue(orch, "developer")
        claim(dev)
        with dev.transaction() as conn:
            conn.execute("select scsql.record_search_latency(array[0.003, 0.04, 0.04, 7]::float8[])")
        found[short] = (project, orch, dev)
    return scsql_db, found


def test_admin_sees_every_project_and_an_agent_only_its_own(two_projects):
    db, found = two_projects
    with db.connect() as conn:
        every = conn.execute("select * from scsql.metrics()").fetchall()
    projects = {r["labels"].get("project") for r in every} - {None}
    assert {found["a"][0], found["b"][0]} <= projects
    assert any(r["metric"] == "scsql_partition_days_ahead" for r in every)  # server-wide: administrators only

    (pa, orch_a, dev_a) = found["a"]
    mine = rows(dev_a, "select * from scsql.metrics()")
    assert {r["labels"].get("project") for r in mine} == {pa}
    assert not any(r["metric"].startswith("scsql_partition") for r in mine)
    by = {(r["metric"], tuple(sorted(r["labels"].items()))): r for r in mine}
    assert by[("scsql_tool_calls_total", (("model", "claude-test"), ("project", pa), ("status", "ok")))]["value"] == 1
    assert by[("scsql_queue_depth", (("project", pa), ("state", "queued"), ("team_role", "developer")))]["value"] == 1
    assert by[("scsql_queue_depth", (("project", pa), ("state", "claimed"), ("team_role", "developer")))]["value"] == 1
    hist = by[("scsql_search_latency_seconds", (("project", pa),))]
    assert hist["buckets"][0] == ["0.005", 1] and hist["buckets"][3] == ["0.05", 3] and hist["buckets"][-1] == ["+Inf", 4]
    assert hist["value"] == pytest.approx(7.083)


def test_agents_may_not_read_the_tables_behind_the_figures(two_projects):
    _, found = two_projects
    with pytest.raises(ScsqlError) as err:
        rows(found["a"][2], "select * from scsql.search_latency")
    assert err.value.code == "42501"


def test_bad_latency_samples_are_refused(two_projects):
    _, found = two_projects
    for bad in ("array[]::float8[]", "array[-1]::float8[]", "array['NaN']::float8[]", "array[null]::float8[]"):
        with pytest.raises(ScsqlError) as err:
            rows(found["a"][2], f"select scsql.record_search_latency({bad})")
        assert err.value.code == "SC010", bad


def test_worker_heartbeat_makes_a_worker_alive(scsql_db):
    project = scsql_db.project()
    agent = scsql_db.agent("w", project)
    alive = lambda: next(r["value"] for r in rows(agent, "select * from scsql.metrics()")  # noqa: E731
                         if r["metric"] == "scsql_workers_alive")
    assert alive() == 0
    worker.drain(agent, [])
    assert alive() == 1


def test_searches_through_the_api_are_timed(scsql_db):
    agent = scsql_db.agent("t", scsql_db.project())
    metrics.TIMER.flush()  # whatever earlier tests left
    api = Api(agent)
    api.call("search", query="verifyChain", mode="bm25")
    api.call("search_global", query="verifyChain", mode="bm25")
    assert metrics.TIMER.flush() == 2
    [hist] = [r for r in rows(agent, "select * from scsql.metrics()") if r["metric"] == "scsql_search_latency_seconds"]
    assert hist["buckets"][-1] == ["+Inf", 2] and hist["value"] > 0


def test_search_timing_is_sent_in_batches(scsql_db):
    agent = scsql_db.agent("s", scsql_db.project())
    timer = metrics.SearchTimer()
    for _ in range(3):
        timer.around(agent, {}, lambda args: None)
    assert timer.flush() == 3
    [hist] = [r for r in rows(agent, "select * from scsql.metrics()") if r["metric"] == "scsql_search_latency_seconds"]
    assert hist["buckets"][-1] == ["+Inf", 3]
    assert timer.flush() == 0  # sent once


def test_scsql_metrics_prints_the_prometheus_text_format(two_projects, tmp_path):
    db, found = two_projects
    env = {"SCSQL_DSN": db.admin, "SCSQL_DATA_DIR": str(tmp_path)}
    out = scsql("metrics", env=env)
    assert out.returncode == 0, out.stderr
    got = series(out.stdout)
    pa = found["a"][0]
    assert got[("scsql_tool_calls_total", (("model", "claude-test"), ("project", pa), ("status", "ok")))] == 1
    assert got[("scsql_search_latency_seconds_count", (("project", pa),))] == 4
    assert got[("scsql_search_latency_seconds_bucket", (("le", "0.05"), ("project", pa)))] == 3
    assert "# TYPE scsql_tool_calls_total counter" in out.stdout

    agent_env = {**env, "SCSQL_AGENT_DSN": db.app}
    mine = scsql("metrics", "--agent", found["b"][2].name, env=agent_env)
    assert mine.returncode == 0, mine.stderr
    assert {dict(labels).get("project") for _, labels in series(mine.stdout)} == {found["b"][0]}


def test_metrics_listen_serves_a_scrape(two_projects, tmp_path):
    db, found = two_projects
    base = {k: v for k, v in os.environ.items() if not k.startswith("SCSQL_")}
    proc = subprocess.Popen([sys.executable, "-m", "scsql", "metrics", "--listen", "127.0.0.1:0"],
                            env={**base, "SCSQL_DSN": db.admin, "SCSQL_DATA_DIR": str(tmp_path)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert "serving http://" in line, proc.stderr.read() if proc.poll() is not None else line
        url = line.split()[3]
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"].startswith("text/plain")
            body = resp.read().decode()
        got = series(body)
        assert got[("scsql_tool_calls_total", (("model", "claude-test"), ("project", found["a"][0]), ("status", "ok")))] == 1
        # Each scrape reads the database afresh.
        record_call(found["a"][1], model="claude-test")
        with urllib.request.urlopen(url, timeout=10) as resp:
            again = series(resp.read().decode())
        assert again[("scsql_tool_calls_total", (("model", "claude-test"), ("project", found["a"][0]), ("status", "ok")))] == 2
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_listen_on_a_bad_address_is_one_clear_line(tmp_path, scsql_db):
    from ..helpers import one_error_line

    env = {"SCSQL_DSN": scsql_db.admin, "SCSQL_DATA_DIR": str(tmp_path)}
    one_error_line(scsql("metrics", "--listen", "nowhere", env=env), "SC056")


def test_a_revoked_agent_sees_no_figures(scsql_db):
    from scsql.core import roles

    agent = scsql_db.agent("r", scsql_db.project())
    roles.revoke_agent(scsql_db.admin, agent.name)
    with pytest.raises(ScsqlError) as err:
        rows(agent, "select * from scsql.metrics()")
    assert err.value.code == "SC002"
