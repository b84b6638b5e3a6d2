"""Every table can be sharded by project on Citus (scsql migrate --citus), a
catalog invariant checked without Citus: project_id is in every primary,
unique and foreign key of each table, or the table is a named reference table."""

from __future__ import annotations

import psycopg
import pytest

from scsql.api import Api
from scsql.core import citus
from scsql.core.errors import ScsqlError

from ..conftest import _citus_cluster
from ..helpers import scsql


def test_every_table_is_distributable_by_project(scsql_db):
    with psycopg.connect(scsql_db.admin) as conn:
        assert citus.undistributable(conn) == []


def test_reference_tables_are_few_and_global(scsql_db):
    """A reference table is copied to every node: only tables without a
    project (or identities every project's queries join) may be one."""
    with psycopg.connect(scsql_db.admin) as conn:
        per_project = {name for (name,) in conn.execute(
            "select c.relname::text from pg_class c join pg_attribute a on a.attrelid = c.oid "
            "where c.relnamespace = 'scsql'::regnamespace and c.relkind in ('r', 'p') "
            "and a.attname = 'project_id' and not a.attisdropped").fetchall()}
    assert per_project & citus.REFERENCE_TABLES == {"projects", "agents", "chain_quarantines", "project_grants",
                                                  "confidential_grants"}


@pytest.mark.parametrize("ddl, table, why", [
    ("create table scsql.zz_child (project_id bigint, item bigint, primary key (item))",
     "zz_child", "unique index scsql.zz_child_pkey does not include project_id"),
    ("create table scsql.zz_child (project_id bigint, item bigint, primary key (project_id, item), unique (item))",
     "zz_child", "unique index scsql.zz_child_item_key does not include project_id"),
    ("create table scsql.zz_child (item bigint primary key)", "zz_child", "has no project_id column"),
    ("create table scsql.zz_child (project_id bigint, item bigint, primary key (project_id, item), "
     "constraint zz_x exclude using gist (item with =))",
     "zz_child", "exclusion constraint zz_x does not compare project_id with ="),
    ("create table scsql.zz_child (project_id bigint, task_id bigint, primary key (project_id, task_id), "
     "constraint zz_fk foreign key (task_id, project_id) references scsql.tasks (project_id, task_id))",
     "zz_child", "foreign key zz_fk to tasks does not pair project_id with project_id"),
    ("alter table scsql.team_roles add column task_project bigint, add column task_id bigint; "
     "alter table scsql.team_roles "
     "add constraint zz_fk foreign key (task_project, task_id) references scsql.tasks (project_id, task_id)",
     "team_roles", "reference table refers to the distributed table tasks (zz_fk)"),
])
def test_the_check_names_each_key_that_leaves_project_out(scsql_db, ddl, table, why):
    with psycopg.connect(scsql_db.admin) as conn:
        for statement in ddl.split("; "):
            if scsql_db.server.workers and "references scsql.tasks" in statement and table == "team_roles":
                # Citus itself refuses a reference table's key to a distributed table.
                with pytest.raises(psycopg.errors.FeatureNotSupported, match="from reference tables"):
                    conn.execute(statement)
                conn.rollback()
                return
            conn.execute(statement)
        assert citus.undistributable(conn) == [(table, why)]
        conn.rollback()


def test_tables_are_created_after_the_tables_they_refer_to(scsql_db):
    with psycopg.connect(scsql_db.admin) as conn:
        order = citus.creation_order(conn)
    assert len(order) == len(set(order))
    for child, parent in [("agents", "projects"), ("agents", "team_roles"), ("task_files", "tasks"),
                          ("kb_chunks", "kb_sources"), ("checkpoint_heads", "checkpoints")]:
        assert order.index(parent) < order.index(child)


def test_migrate_citus_without_citus_says_so_and_changes_nothing(scsql_db):
    """Without Citus, distributing and letting the owner and the auditor log in
    (Citus connects to the workers as them) both refuse with SC042, and no
    extension or login appears."""
    if scsql_db.server.workers:
        pytest.skip("this database has citus (.ci/citus.sh)")
    for step in (citus.distribute, citus.cluster_logins):
        with pytest.raises(ScsqlError) as err:
            step(scsql_db.admin)
        assert err.value.code == "SC042", step
    with psycopg.connect(scsql_db.admin) as conn:
        assert conn.execute("select count(*) from pg_extension where extname = 'citus'").fetchone()[0] == 0
        logins = conn.execute("select rolname, rolcanlogin from pg_roles where rolname = any(%s) order by 1",
                              (list(citus.CLUSTER_LOGINS),)).fetchall()
    assert logins == [("scsql_auditor", False), ("scsql_owner", False)]


def test_chained_rows_that_name_no_project_go_to_the_acting_agents_on_citus(scsql_db):
    """On Citus, project_id of every chained table defaults to the acting
    agent's project (scsql_caller.row_project()) on every node, so a row
    that names none is routed and then checked by its trigger as on one
    server (tests/audit/test_chain.py). A cluster distributed before the default
    existed gets it from the next migrate --citus, though Citus refuses
    ALTER TABLE of a distributed table's distribution column."""
    if not scsql_db.server.workers:
        pytest.skip("needs Citus (.ci/citus.sh)")
    nodes = scsql_db.server.every_node(scsql_db.name)
    defaults = ("select c.relname::text, pg_get_expr(d.adbin, d.adrelid) from scsql.chained_tables t "
                "join pg_class c on c.oid = to_regclass(t.table_name) "
                "join pg_attribute a on a.attrelid = c.oid and a.attname = 'project_id' "
                "left join pg_attrdef d on d.adrelid = c.oid and d.adnum = a.attnum order by 1")
    with psycopg.connect(scsql_db.admin) as conn:
        chained = [name for (name,) in conn.execute("select c.relname::text from scsql.chained_tables t "
                                                    "join pg_class c on c.oid = to_regclass(t.table_name) "
                                                    "order by 1").fetchall()]
    assert "tool_calls" in chained and "memory_changes" in chained
    expected = [(name, citus.ROW_PROJECT) for name in chained]
    for node in nodes:
        with psycopg.connect(node) as conn:
            assert conn.execute(defaults).fetchall() == expected, node
    for node in nodes:  # as an earlier migrate --citus left it
        with psycopg.connect(node) as conn:
            conn.execute("alter table scsql.sessions alter column project_id drop default")
    with psycopg.connect(scsql_db.admin) as conn:
        with pytest.raises(psycopg.Error, match="involving partition column"):
            conn.execute(f"alter table scsql.sessions alter column project_id set default {citus.ROW_PROJECT}")
    citus.distribute(scsql_db.admin)
    for node in nodes:
        with psycopg.connect(node) as conn:
            assert conn.execute(defaults).fetchall() == expected, node


def test_workers_plan_the_owners_queries_without_constraint_exclusion_on_citus(scsql_db):
    """migrate --citus turns constraint_exclusion off for the sessions Citus
    opens to the workers for scsql's functions (the owner's) and the auditor's
    reads, in this database, on every node: a worker would otherwise re-derive
    the constraints of every partition and UNION ALL arm at each plan, on
    every shard (verify_chain's query over every shard)."""
    if not scsql_db.server.workers:
        pytest.skip("needs Citus (.ci/citus.sh)")
    citus.distribute(scsql_db.admin)  # as every migrate --citus does (a test database is a clone, without it)
    settings = ("select s.setrole::regrole::text, s.setconfig from pg_db_role_setting s "
                "join pg_database d on d.oid = s.setdatabase where d.datname = current_database() "
                "and s.setrole::regrole::text = any(%s) order by 1")
    for node in scsql_db.server.every_node(scsql_db.name):
        with psycopg.connect(node) as conn:
            assert conn.execute(settings, (list(citus.CLUSTER_LOGINS),)).fetchall() == [
                ("scsql_auditor", ["constraint_exclusion=off"]), ("scsql_owner", ["constraint_exclusion=off"])], node


def test_check_constraints_say_their_codes_on_every_node_on_citus(scsql_db):
    """The chain trigger, on a worker on Citus, maps a bad argument by the
    comments of the table's check constraints (scsql._check_row): every node
    holds them, so a bad classification is SC110 there, not the signature's SC101
    (tests/audit/test_audit.py)."""
    if not scsql_db.server.workers:
        pytest.skip("needs Citus (.ci/citus.sh)")
    comments = ("select c.relname::text, k.conname::text, obj_description(k.oid, 'pg_constraint') from pg_constraint k "
                "join pg_class c on c.oid = k.conrelid and not c.relispartition "
                "where c.relnamespace = 'scsql'::regnamespace and k.contype = 'c' order by 1, 2")
    found = []
    for node in scsql_db.server.every_node(scsql_db.name):
        with psycopg.connect(node) as conn:
            found.append(conn.execute(comments).fetchall())
    assert any(r[0] == "outcomes" and r[2] and r[2].startswith("SC110") for r in found[0])
    for rows in found[1:]:
        assert rows == found[0]


def test_a_sharded_database_is_migrated_the_citus_way_without_the_flag(scsql_db):
    """scsql migrate without --citus, on a database migrate --citus sharded,
    takes the same path: the plain one fails there (Citus refuses several
    commands in one statement), and functions it re-creates would lose the
    settings distribute gives them. Agents read and write as before after it."""
    if not scsql_db.server.workers:
        assert not citus.is_distributed(scsql_db.admin)
        pytest.skip("needs Citus (.ci/citus.sh)")
    assert citus.is_distributed(scsql_db.admin)
    agent = scsql_db.agent("after", scsql_db.project())
    proc = scsql("migrate", env={"SCSQL_DSN": scsql_db.admin, "SCSQL_EMBED": "none"}, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "scsql: citus: 0 table(s) distributed by project_id, 0 made reference tables" in proc.stdout
    api = Api(agent)
    api.call("remember", key="k", value="kept after the migration", importance=3)
    assert [r["content"] for r in api.call("recall_context") if r["section"] == "fact"] == ["k: kept after the migration"]


def test_migrate_citus_chooses_the_shard_count_once_and_keeps_it(scsql_db):
    """migrate --citus shards the tables SHARDS_PER_NODE times for each node
    holding shards unless citus.shard_count is set (on the database here, as
    the tests' template does), and a later migrate keeps the distributed
    tables' count (new tables co-locate with them)."""
    if not scsql_db.server.workers:
        pytest.skip("needs Citus (.ci/citus.sh)")
    server = scsql_db.server
    counts = ("select distinct shard_count from citus_tables "
              "where citus_table_type = 'distributed' and table_name::text like 'scsql.%'")
    with psycopg.connect(scsql_db.admin, autocommit=True) as conn:
        (before,) = conn.execute(counts).fetchall()
        said: list[str] = []
        citus._shard_count(conn, said.append)
        assert said == [f"shards: {before[0]} (the distributed tables')"]
    name = f"{scsql_db.name}_shards"
    janitor = server.janitor(name)
    janitor.init()
    try:
        _citus_cluster(server, name)
        with psycopg.connect(server.conninfo(name), autocommit=True) as conn:
            nodes = conn.execute("select count(*) from pg_dist_node where isactive and noderole = 'primary' "
                                 "and shouldhaveshards").fetchone()[0]
            assert nodes == len(server.workers)
            said = []
            citus._shard_count(conn, said.append)
            assert conn.execute("show citus.shard_count").fetchone()[0] == str(citus.SHARDS_PER_NODE * nodes)
            assert said[0].startswith(f"shards: {citus.SHARDS_PER_NODE * nodes} ({citus.SHARDS_PER_NODE} for each of "
                                      f"{nodes} node(s)")
            conn.execute(f'alter database "{name}" set citus.shard_count = 6')
        with psycopg.connect(server.conninfo(name), autocommit=True) as conn:
            said = []
            citus._shard_count(conn, said.append)
            assert conn.execute("show citus.shard_count").fetchone()[0] == "6"
            assert said == ["shards: 6 (citus.shard_count of the database)"]
    finally:
        janitor.drop()
