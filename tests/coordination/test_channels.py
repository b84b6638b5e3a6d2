"""LISTEN/NOTIFY channels reveal nothing about any project: their names are
derived from a secret per project that only the owner reads, and their
payloads are fixed hints."""

from __future__ import annotations

import re

import psycopg
import pytest
from psycopg.rows import dict_row

from scsql.coordination import client
from scsql.api import Api

from ..helpers import enqueue


@pytest.fixture
def two_projects(scsql_db):
    db = scsql_db
    p, q = db.project(), db.project()
    return (db, db.agent("orch", p, "orchestrator"), db.agent("dev", p, "developer"), db.agent("qa", p, "qa"),
            db.agent("qorch", q, "orchestrator"), db.agent("qdev", q, "developer"))


def _ids(db) -> dict[str, int]:
    with db.connect() as conn:
        return {r["name"]: r["project_id"] for r in conn.execute("select name, project_id from scsql.projects")}


def test_channel_names_reveal_neither_project_nor_role(two_projects):
    db, orch, dev, qa, qorch, qdev = two_projects
    names = {a.name: client.my_channel(a) for a in (orch, dev, qa, qorch, qdev)}
    learnings = {a.name: client.my_channel(a, "learnings") for a in (dev, qa, qdev)}
    for name in [*names.values(), *learnings.values()]:
        assert re.fullmatch(r"scsql_[0-9a-f]{32}", name), name
        for word in ("orchestrator", "developer", "qa", *(str(i) for i in _ids(db).values())):
            assert f"_{word}" not in name.removeprefix("scsql_")
    # Stable per (project, role), distinct otherwise: one project's developer
    # channel says nothing about the other's.
    assert client.my_channel(dev) == names[dev.name]
    assert len({names[orch.name], names[dev.name], names[qa.name], names[qorch.name], names[qdev.name]}) == 5
    assert learnings[dev.name] == learnings[qa.name] != learnings[qdev.name]
    assert learnings[dev.name] not in names.values()


def test_an_agent_cannot_derive_another_projects_channel(two_projects):
    db, orch, dev, qa, qorch, qdev = two_projects
    with psycopg.connect(db.login(dev.name), autocommit=True, row_factory=dict_row) as conn:
        for denied in ("select * from scsql.channel_keys",
                       "select scsql._channel(1, 'team:developer')",
                       "select scsql._queue_channel(1, 'developer')"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(denied)
        # Only its own channel, whatever it asks.
        assert conn.execute("select scsql_caller.my_channel() as c").fetchone()["c"] == client.my_channel(dev)
        with pytest.raises(psycopg.Error) as err:
            conn.execute("select scsql_caller.my_channel('team:qa')")
        assert err.value.sqlstate == "SC010"


def test_notifications_reach_only_the_projects_channel_with_a_fixed_hint(two_projects):
    db, orch, dev, qa, qorch, qdev = two_projects
    ids = _ids(db)
    q_id = max(ids.values())
    mine, theirs = client.my_channel(dev), client.my_channel(qdev)
    their_learnings = client.my_channel(qdev, "learnings")
    # A listener (any session may LISTEN on any name) on its own channel and
    # on every name the old scheme gave the other project.
    guesses = [f"scsql_{q_id}_developer", f"scsql_{q_id}_orchestrator", "scsql_learnings"]
    with psycopg.connect(db.login(dev.name), autocommit=True) as spy, \
            psycopg.connect(db.app, autocommit=True) as owner:
        for ch in [mine, *guesses]:
            spy.execute(f'listen "{ch}"')
        for ch in (theirs, their_learnings):
            owner.execute(f'listen "{ch}"')
        enqueue(qorch, payload={"n": 1})
        Api(qorch).call("broadcast", type="STATUS", to_role="developer", payload={"n": 1})
        Api(qdev).call("record_outcome", kind="failed", summary="broke", task_ref="T")
        got = [(n.channel, n.payload) for n in owner.notifies(timeout=5, stop_after=3)]
        assert sorted(got) == sorted([(theirs, "task"), (theirs, "message"), (their_learnings, "learning")])
        assert list(spy.notifies(timeout=0.5)) == []


def test_my_channel_is_not_an_mcp_tool(two_projects):
    db, orch, dev, qa, qorch, qdev = two_projects
    with dev.transaction() as conn:
        api = [r["name"] for r in conn.execute("select name from scsql_caller.api()").fetchall()]
        assert "my_channel" not in api and "enqueue_task" in api
        assert conn.execute("select to_regprocedure('scsql._my_channel()') as f").fetchone()["f"] is None
