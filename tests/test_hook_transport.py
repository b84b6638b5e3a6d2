"""The hook transport for real: the exact installed hook commands, the hook
server they start, the spool, against the real database (reached through a
proxy the tests stop and start: "the database is down")."""

from __future__ import annotations

import json
import os
import stat

import pytest

from .hook_transport_helpers import PgProxy, cleanup, event, make_env, wait_for


@pytest.fixture
def hooks(scsql_db):
    project = scsql_db.project()
    agent = scsql_db.agent("hk", project)
    proxy = PgProxy(scsql_db.server.base)
    proxy.up()
    h = make_env(scsql_db, agent.name, proxy)
    try:
        yield h
    finally:
        cleanup(h)
        proxy.down()


def test_smoke_server_started_by_hook(hooks):
    r = hooks.run("session-start", event("SessionStart", source="startup"))
    assert r.returncode == 0, r.stderr
    print(r.stdout, r.stderr)
    wait_for(hooks.server_pid, 30, "the server")
    wait_for(lambda: hooks.rows(), 30, "rows")
    print(hooks.rows())
