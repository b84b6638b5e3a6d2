"""The everyday commands that read the database open ONE connection:
``scsql agent list``, ``scsql queue stats`` and ``scsql status`` (no probe
connection before a pool, no second connection for a second query)."""

from __future__ import annotations

import psycopg
import pytest

from scsql import cli


@pytest.fixture
def connections(monkeypatch):
    """The connections opened while a command runs (every psycopg connection
    goes through Connection.connect; each is opened for real)."""
    opened: list[str] = []
    real = psycopg.Connection.connect.__func__

    def counting(cls, conninfo="", **kw):
        opened.append(conninfo)
        return real(cls, conninfo, **kw)

    monkeypatch.setattr(psycopg.Connection, "connect", classmethod(counting))
    monkeypatch.setattr(psycopg, "connect", psycopg.Connection.connect)
    return opened


@pytest.mark.parametrize("argv", [["agent", "list"], ["queue", "stats", "--agent", "{agent}"], ["status", "--json"]],
                         ids=["agent-list", "queue-stats", "status"])
def test_a_read_command_opens_one_connection(scsql_db, tmp_path, monkeypatch, connections, capsys, argv):
    name = scsql_db.agent("one", scsql_db.project()).name
    monkeypatch.setenv("SCSQL_DSN", scsql_db.admin)
    monkeypatch.setenv("SCSQL_AGENT_DSN", scsql_db.app)
    monkeypatch.setenv("SCSQL_DATA_DIR", str(tmp_path / "data"))
    argv = [a.replace("{agent}", name) for a in argv]
    connections.clear()
    assert cli.main(argv) == 0, capsys.readouterr().err
    assert len(connections) == 1, connections
    assert capsys.readouterr().out


def test_a_pool_opens_with_its_first_connection_and_no_probe(scsql_db, connections):
    from scsql.core.db import Database

    db = Database(scsql_db.app, max_size=3).open()
    try:
        assert len(connections) == 1
        with db.transaction() as conn:
            assert conn.execute("select 1 as x").fetchone()["x"] == 1
        assert len(connections) == 1                      # the first connection is the pool's
        assert db.pool.get_stats()["pool_size"] >= 1
    finally:
        db.close()


def test_an_unreachable_server_fails_at_once(tmp_path):
    import time

    from scsql.core.db import Database
    from scsql.core.errors import ScsqlError

    for size in (1, 3):
        start = time.monotonic()
        with pytest.raises(ScsqlError) as e:
            Database(f"host={tmp_path} port=1 dbname=x connect_timeout=2", max_size=size).open(timeout=2)
        assert e.value.code == "SC030" and "cannot connect" in e.value.message
        assert time.monotonic() - start < 5
