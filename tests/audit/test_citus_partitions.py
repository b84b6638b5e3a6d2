"""Partition maintenance and retention through pg_partman on a Citus cluster
(.ci/citus.sh runs this file there; on one server it runs unchanged, without
the cluster's checks).

pg_partman is installed in the database before the first migrate, as on one
server: the migration sets tool_calls and outcomes up with create_parent
while they are still local tables, then migrate --citus distributes them with
their partitions. pg_partman's own tables (part_config, 5.x's template
tables) stay local to the coordinator. A partition run_maintenance makes
later is created LIKE its parent and attached to it: Citus distributes it
there and then, co-located with its parent. Retention stays with scsql
(part_config.retention stays NULL) and drops a partition only when a
checkpoint covers its rows."""

from __future__ import annotations

import datetime as dt
import os
import secrets
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from scsql.api import Api
from scsql.audit import partitions
from scsql.audit.checkpoints import record_checkpoints
from scsql.audit.verify import verify
from scsql.core.keys import Keystore
from scsql.core.migrate import Migrator, Source

from ..conftest import ScsqlDb, _citus_cluster
from ..helpers import SESSION, allow_old_rows, auditor_key, backdate_keys, partition_of, table_exists, write_at


@pytest.fixture(params=[4, 5], ids=["pg_partman-4.x", "pg_partman-5.x"])
def cluster_partman_db(request, server, tmp_path_factory):
    """A database where pg_partman (the newest version of the major the test is
    parametrized with) was installed before the first migrate; on Citus, made
    on every node and distributed as migrate --citus does."""
    major = request.param
    versions = [v for v in partitions.partman_versions(server.conninfo("postgres")) if v.split(".")[0] == str(major)]
    if not versions:
        pytest.skip(f"pg_partman {major}.x's extension files are not installed on this server "
                    "(.ci/partman.sh; .ci/citus.sh installs them in its copy of the server)")
    name = f"{SESSION}_cpm{major}_{secrets.token_hex(2)}"
    janitor = server.janitor(name)
    janitor.init()
    db = ScsqlDb(server, name, Keystore(Path(tmp_path_factory.mktemp("cluster-partman-keys"))))
    try:
        if server.workers:
            _citus_cluster(server, name)
        partitions.enable_partman(db.admin, versions[-1])
        root = os.environ.get("SCSQL_TEST_SOURCE")
        Migrator(db.admin, Source(Path(root)) if root else None).run()
        if server.workers:
            from scsql.core.citus import distribute

            shards = os.environ.get("SCSQL_TEST_CITUS_SHARDS")
            if shards:
                with psycopg.connect(db.admin, autocommit=True) as conn:
                    conn.execute(sql.SQL("alter database {} set citus.shard_count = {}").format(
                        sql.Identifier(name), sql.Literal(int(shards))))
            distribute(db.admin)
        yield db
    finally:
        db.close()
        janitor.drop()


def _partitions(db: ScsqlDb, parent: str = "scsql.tool_calls") -> dict[str, dict]:
    """PARENT's partitions by name, with their lower bound, and on Citus how
    each is distributed (method, co-location group, shard count) beside its parent."""
    with db.connect() as conn:
        citus = conn.execute("select to_regclass('pg_catalog.pg_dist_partition') is not null as c").fetchone()["c"]
        rows = conn.execute("select partition, lower_bound from scsql.partition_status() where parent = %s"
                            " and not is_default", (parent,)).fetchall()
        out = {r["partition"]: {"day": r["lower_bound"].date()} for r in rows}
        if citus:
            for name in [parent, *out]:
                d = conn.execute(
                    "select d.partmethod::text as method, d.colocationid as colocation,"
                    " (select count(*) from pg_dist_shard s where s.logicalrelid = d.logicalrelid) as shards"
                    " from pg_dist_partition d where d.logicalrelid = %s::regclass", (name,)).fetchone()
                out.setdefault(name, {}).update(d or {"method": None})
    return out


def test_partman_maintains_and_retires_distributed_partitions(cluster_partman_db, server):
    db = cluster_partman_db
    with db.connect() as conn:
        version = conn.execute("select extversion from pg_extension where extname = 'pg_partman'").fetchone()["extversion"]
        config = conn.execute("select parent_table, retention from partman.part_config order by 1").fetchall()
    assert [(c["parent_table"], c["retention"]) for c in config] == [("scsql.outcomes", None), ("scsql.tool_calls", None)]
    assert {r["managed_by"] for r in partitions.status(db.admin)} == {f"pg_partman {version}"}

    allow_old_rows(db)
    project = db.project()
    a = db.agent("cpm", project)
    backdate_keys(db)
    today = dt.datetime.now(dt.UTC)
    expired = today - dt.timedelta(days=3)
    with db.connect() as conn:  # a partition three days old, made by pg_partman on the distributed table
        conn.execute("set role scsql_owner")
        conn.execute("select partman.create_partition_time('scsql.tool_calls', array[%s::timestamptz])", (expired,))
    write_at(a, expired, "old-1")
    write_at(a, expired, "old-2")
    Api(a).call("record_tool_call", tool="new-1")

    # Future partitions: premake 10, and run_maintenance makes them ahead of the newest row.
    before = _partitions(db)
    with db.connect() as conn:
        conn.execute("select scsql.set_partition_retention('scsql.tool_calls', null, 10)")
    assert {x["action"] for x in partitions.maintain(db.admin)} == {"partman-maintenance"}
    after = _partitions(db)
    new = {name: p for name, p in after.items() if name not in before}
    assert max(p["day"] for p in after.values() if "day" in p) >= today.date() + dt.timedelta(days=10)
    assert new, (sorted(before), sorted(after))
    if server.workers:  # every partition, the new ones included, distributed and co-located with its parent
        parent = after.pop("scsql.tool_calls")
        assert parent["method"] == "h"
        assert {(p["method"], p["colocation"], p["shards"]) for p in after.values()} == \
            {(parent["method"], parent["colocation"], parent["shards"])}
    ahead = today + dt.timedelta(days=9)
    write_at(a, ahead, "ahead-1")  # a row lands in a partition maintenance just made
    landed = partition_of(db, "ahead-1")
    assert landed in new and new[landed]["day"] == ahead.date()
    with db.connect() as conn:  # new partitions are protected like the others
        with pytest.raises(psycopg.Error) as err:
            conn.execute(f"delete from {landed}")
        assert err.value.sqlstate == "SC100"

    # Retention: refused until a checkpoint covers the old rows, then the partition goes.
    old = partition_of(db, "old-1")
    with db.connect() as conn:
        conn.execute("select scsql.set_partition_retention('scsql.tool_calls', '2 days')")
    refused = [x for x in partitions.maintain(db.admin) if x["action"] in ("dropped", "refused")]
    assert [(x["action"], x["partition"]) for x in refused] == [("refused", old)]
    assert "no checkpoint covers" in refused[0]["detail"] and table_exists(db, old)
    record_checkpoints(db.admin, auditor_key(db))
    dropped = [x for x in partitions.maintain(db.admin) if x["action"] in ("dropped", "refused")]
    assert [(x["action"], x["partition"]) for x in dropped] == [("dropped", old)]
    assert not table_exists(db, old)
    assert {x["action"] for x in partitions.maintain(db.admin)} == {"partman-maintenance"}  # pg_partman copes
    with db.connect() as conn:
        retired = conn.execute("select ok, chains from scsql.partition_retirements()").fetchall()
    assert [(r["ok"], [c["rows"] for c in r["chains"]]) for r in retired] == [(True, [2])]

    # The agent still reads its rows, across the partitions kept, and the chain verifies from the checkpoint.
    with a.transaction() as conn:
        tools = [r["tool"] for r in conn.execute("select tool from scsql.tool_calls order by seq").fetchall()]
    assert tools == ["new-1", "ahead-1"]
    report = verify(db.admin, workers=1, progress=False)
    assert report.ok, report.breaks
    assert report.rows == 2
