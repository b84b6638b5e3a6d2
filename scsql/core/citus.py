"""Sharding scsql's tables on Citus (``scsql migrate --citus``).

Every table of schema scsql is either distributed by ``project_id``
(``create_distributed_table``, all co-located, so one project's rows of every
table live on one shard group and no write path crosses nodes) or, when it is
small and global, replicated to every node (``create_reference_table``):
exactly the tables named in REFERENCE_TABLES. A table is distributable when
``project_id`` is in its primary key, in every unique constraint and unique
index, compared with = in every exclusion constraint, and in every foreign key to another distributed table (at the same
position as the referenced ``project_id``); a reference table may refer only
to reference tables. :func:`undistributable` checks this on the catalog;
tests/core/test_distributable.py runs it on every migrated database, with or
without Citus.

Queries that cross shards (every project at once) are the fan-out a Citus
deployment pays for; CROSS_SHARD names them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import psycopg

from . import errors
from .errors import ScsqlError
from .migrate import Migrator, Report, Source, SqlFile

# Small, global tables: identities, keys, catalogues and settings. Replicated
# to every node; writes to them are rare (a new agent, a new model, a migration).
REFERENCE_TABLES = frozenset({
    "agent_keys", "agents", "auditor_keys", "chain_break_kinds", "chain_quarantines", "chain_settings", "chained_tables",
    "confidential_grants", "embed_models", "error_codes", "login_settings", "model_prices", "partition_retirements",
    "partition_settings", "partition_settings_log", "project_grants", "projects", "schema_migrations",
    "applied_definitions", "team_roles",
})
# (project_grants and confidential_grants are read by the policies, for every
# statement of every agent and on the node that holds the shard: a replica
# on each node is read there, where a distributed table would be a query to
# another node from inside a query on a shard.)

# Tables left plain PostgreSQL tables on the coordinator: written and read
# there only, within one transaction, so that writing them touches no shard.
# kb_use_pending holds the uses of search and pack results until commit
# (migrations/0222_use_at_commit.sql).
LOCAL_TABLES = frozenset({"kb_use_pending"})

# Functions whose queries read every project's shards (a multi-shard query,
# one task per shard, run in parallel on the workers) and what that costs.
# Measured by tests/core/test_citus_cost.py (3 projects x 20 notes, three nodes on
# one machine, 32 shards): a query over every shard costs about 45 ms on the
# cluster where one server answers in 0.1 ms (an administrator counting every
# project's chunks), and an agent's read of its own chunks 285 ms against
# 0.3 ms (the policies' direct calls, evaluated row by row on the shards).
CROSS_SHARD = {
    "scsql.search_global": "BM25 and vector search over every project the caller may read: the "
                           "statistics and candidate queries run on every shard (SHARDS_PER_NODE a node "
                           "unless citus.shard_count is set, as parallel tasks over the workers), merged on "
                           "the coordinator",
    "scsql.verify_chain": "without a project, walks every chain of every chained table: a scan of each shard",
    "scsql.checkpoint_heads_now / scsql.record_checkpoint": "read the head of every chain (scsql.chains, "
                                                            "every shard) and write one row per chain",
    "scsql.cost_report / scsql.learnings": "no project in their queries (row-level security alone keeps an "
                                           "agent to what it may see, other projects' included): every shard",
    "scsql.maintain_partitions": "DDL on outcomes and tool_calls (new and dropped partitions), propagated "
                                 "to every shard of both; retention reads each dropped partition on every shard",
    "scsql.purge_expired": "deletes expired rows of every project: one statement per shard",
    "scsql.metrics / scsql.status (administrator)": "counts over every project's rows: every shard",
}

# Triggers on reference tables that write another table: Citus fires a
# reference table's triggers on every replica, where writing a table is
# refused (a distributed one: "cannot execute a distributed query from a
# query on a shard"). The log trigger of partition_settings writes
# partition_settings_log, a reference table too: set_partition_retention
# logs instead when it is gone. (A project's lock rows and channel key are
# made by create_project, on one server too: migration 0503.)
REFERENCE_TRIGGERS = (("partition_settings", "zz_log"),)

_DISTRIBUTION_COLUMN = "project_id"

# Shards per node that holds shards, when the database does not set
# citus.shard_count itself. A project's calls go to its one shard whatever
# the count; what the count decides is the fan-out of a query over every
# shard (metrics, search_global, verify_chain's locator, purges), one task
# per shard, and how many nodes the projects can later spread over. On the
# .ci/citus.sh cluster (two workers) `scsql bench citus` gave metrics 89 ms
# at p95 with Citus's default of 32 shards and 31 ms with 8, verify_chain
# 134 against 65, search_global 59 against 60 (docs/citus.md).
SHARDS_PER_NODE = 4

# Roles whose statements reach the workers as themselves: Citus opens a
# statement's connections to the workers as the current user. scsql's
# functions run as the owner (its migrations too, whose DDL Citus sends on),
# and the auditor reads the tables itself (scsql verify, chain_heads);
# agent roles are login roles already. Citus keeps a role the same on every
# node: it copies the coordinator's definition to the workers when it adds a
# node and when a database first uses the role, so both may log in on the
# coordinator too. Who may connect as them is pg_hba.conf's to decide: no
# password, admitted only from the cluster's own nodes.
CLUSTER_LOGINS = ("scsql_owner", "scsql_auditor")
# Raised when a node refuses to let them log in.
CLUSTER_SETUP_FAILED = errors.CITUS_WORKER_SETUP

# A policy's call of a caller function in a scalar subquery, `(select
# scsql_caller.f())`, evaluated once per statement on PostgreSQL; Citus
# refuses subqueries in policies of distributed and reference tables.
_CALLER_SUBQUERY = re.compile(r"\(select (scsql_caller\.[a-z_]+\(\))\)")


def citus_policies(text: str) -> str:
    """The policies/ file TEXT as migrate --citus applies it: every
    `(select scsql_caller.f())` becomes `scsql_caller.f()` (the same function,
    the same rows visible; PostgreSQL may evaluate it once per row instead of
    once per statement). Raises ValueError when a policy still holds a
    subquery after that, naming it."""
    out = _CALLER_SUBQUERY.sub(r"\1", text)
    for m in re.finditer(r"create policy (.*?);", out, re.S | re.I):
        body = m.group(1)
        using = body[body.lower().find(" using "):] if " using " in body.lower() else ""
        if re.search(r"\bselect\b", using, re.I):
            raise ValueError(f"policy with a subquery Citus refuses: create policy {' '.join(body.split())}")
    return out


# Statements Citus propagates to the workers as the text of the whole query
# they arrived in; a file of many statements then fails there ("cannot insert
# multiple commands into a prepared statement") once the tables are Citus's.
_WHOLE_TEXT_DDL = re.compile(
    r"^(?:alter table|create trigger|create or replace trigger|drop trigger|drop policy)\b.*?;[ \t]*$",
    re.I | re.M | re.S)


def one_statement_ddl(text: str) -> str:
    """TEXT with each top-level statement of _WHOLE_TEXT_DDL run by EXECUTE in
    a DO block, so Citus sees that statement's text alone."""
    def wrap(m: re.Match) -> str:
        statement = m.group(0).rstrip().rstrip(";")
        if "$citus_ddl$" in statement:
            raise ValueError(f"cannot wrap a statement holding $citus_ddl$: {statement[:80]}")
        return f"do $citus_do$ begin execute $citus_ddl${statement}$citus_ddl$; end $citus_do$;"
    return _WHOLE_TEXT_DDL.sub(wrap, text)


# A GRANT or REVOKE on every function of a schema: Citus sends the workers
# each distributed function by name with its argument types as the
# coordinator's search_path shows them ("violation", not "scsql.violation"),
# which the workers, on another search_path, do not find. Run with
# search_path pg_catalog, every type of a schema of scsql's is qualified.
_ALL_FUNCTIONS = re.compile(r"^(?:grant|revoke)\b[^;]*\ball functions in schema\b[^;]*;[ \t]*$", re.I | re.M)


def qualified_function_grants(text: str) -> str:
    """TEXT with each GRANT or REVOKE on all functions in a schema run with
    search_path pg_catalog (restored after it), so Citus names the argument
    types of the functions it sends to the workers with their schema."""
    def wrap(m: re.Match) -> str:
        statement = m.group(0).rstrip().rstrip(";")
        if "$citus_ddl$" in statement:
            raise ValueError(f"cannot wrap a statement holding $citus_ddl$: {statement[:80]}")
        return ("do $citus_do$ declare p text := pg_catalog.current_setting('search_path'); begin "
                "perform pg_catalog.set_config('search_path', 'pg_catalog', true); "
                f"execute $citus_ddl${statement}$citus_ddl$; "
                "perform pg_catalog.set_config('search_path', p, true); end $citus_do$;")
    return _ALL_FUNCTIONS.sub(wrap, text)


class CitusSource(Source):
    """The files of a source (its root, default the package's) as migrate
    --citus applies them, on every run (sql/ and policies/ are re-applied
    each time): the policies written as citus_policies() writes them, and the
    DDL Citus would send to the workers as the whole file's text
    (one_statement_ddl) run one statement at a time. Numbered migrations are
    applied as written (their checksums are recorded)."""

    def bootstrap(self) -> SqlFile:
        f = super().bootstrap()
        return SqlFile(f.name, one_statement_ddl(f.text))

    def api(self) -> list[SqlFile]:
        return [SqlFile(f.name, qualified_function_grants(one_statement_ddl(
                    citus_policies(f.text) if f.name.startswith("policies/") else f.text)))
                for f in super().api()]


def write_citus_source(target: Path, root: Path | None = None) -> None:
    """Copies the source (ROOT, default the package's) to TARGET with its
    policies as CitusSource applies them (citus_policies,
    qualified_function_grants), for tools that take a source tree
    (.ci/citus.sh, SCSQL_TEST_SOURCE)."""
    import shutil

    source = Source(root)
    for kind in ("migrations", "sql", "policies"):
        if (target / kind).exists():
            shutil.rmtree(target / kind)
        shutil.copytree(source.directory(kind), target / kind)
    for path in sorted((target / "policies").glob("*.sql")):
        path.write_text(qualified_function_grants(citus_policies(path.read_text())))

_TABLES = """
select c.relname::text
  from pg_catalog.pg_class c
 where c.relnamespace = 'scsql'::regnamespace and c.relkind in ('r', 'p') and not c.relispartition
 order by 1
"""

# (table, reason) for each unique index or key of a table that leaves out project_id.
_KEY_PROBLEMS = """
with t as (
  select c.oid, c.relname::text as name,
         (select a.attnum from pg_catalog.pg_attribute a
           where a.attrelid = c.oid and a.attname = 'project_id' and not a.attisdropped) as pid
    from pg_catalog.pg_class c
   where c.relnamespace = 'scsql'::regnamespace and c.relkind in ('r', 'p') and not c.relispartition
)
select t.name, 'has no project_id column' from t where t.pid is null and not (t.name = any(%(ref)s))
union all
select t.name, 'unique index ' || i.indexrelid::regclass::text || ' does not include project_id'
  from t join pg_catalog.pg_index i on i.indrelid = t.oid and i.indisunique
 where t.pid is not null and not (t.name = any(%(ref)s)) and not (t.pid = any(i.indkey::int2[]))
union all
select t.name, 'exclusion constraint ' || k.conname || ' does not compare project_id with ='
  from t join pg_catalog.pg_constraint k on k.conrelid = t.oid and k.contype = 'x'
 where not (t.name = any(%(ref)s))
   and not exists (select from unnest(k.conkey, k.conexclop) as e(col, op)
                    join pg_catalog.pg_operator o on o.oid = e.op
                   where e.col = t.pid and o.oprname = '=')
union all
select t.name, 'foreign key ' || k.conname || ' to ' || r.relname || ' does not pair project_id with project_id'
  from t join pg_catalog.pg_constraint k on k.conrelid = t.oid and k.contype = 'f'
  join pg_catalog.pg_class r on r.oid = k.confrelid
 where not (t.name = any(%(ref)s)) and not (r.relname = any(%(ref)s))
   and not exists (select from unnest(k.conkey, k.confkey) as p(col, refcol)
                    join pg_catalog.pg_attribute a on a.attrelid = k.confrelid and a.attnum = p.refcol
                   where p.col = t.pid and a.attname = 'project_id')
union all
select t.name, 'reference table refers to the distributed table ' || r.relname || ' (' || k.conname || ')'
  from t join pg_catalog.pg_constraint k on k.conrelid = t.oid and k.contype = 'f'
  join pg_catalog.pg_class r on r.oid = k.confrelid
 where t.name = any(%(ref)s) and not (r.relname = any(%(ref)s))
order by 1, 2
"""

_FOREIGN_KEYS = """
select c.relname::text, r.relname::text
  from pg_catalog.pg_constraint k
  join pg_catalog.pg_class c on c.oid = k.conrelid
  join pg_catalog.pg_class r on r.oid = k.confrelid
 where k.contype = 'f' and c.relnamespace = 'scsql'::regnamespace and r.relnamespace = 'scsql'::regnamespace
   and k.conrelid <> k.confrelid
"""


def undistributable(conn: psycopg.Connection) -> list[tuple[str, str]]:
    """(table, why) for every table of schema scsql Citus could not shard by
    project_id as REFERENCE_TABLES says; empty when all of them can be."""
    found = conn.execute(_KEY_PROBLEMS, {"ref": sorted(REFERENCE_TABLES)}).fetchall()
    tables = {name for (name,) in conn.execute(_TABLES).fetchall()}
    found += [(name, "is in REFERENCE_TABLES but is not a table of schema scsql")
              for name in sorted(REFERENCE_TABLES - tables)]
    return [(str(t), str(why)) for t, why in found]


def creation_order(conn: psycopg.Connection, keys: list[tuple[str, str]] | None = None) -> list[str]:
    """Every table of schema scsql, each after the tables its foreign keys (or
    KEYS, pairs of table and referenced table) name."""
    tables = [name for (name,) in conn.execute(_TABLES).fetchall()]
    refers: dict[str, set[str]] = {t: set() for t in tables}
    for child, parent in (keys if keys is not None else conn.execute(_FOREIGN_KEYS).fetchall()):
        refers.setdefault(child, set()).add(parent)
    order: list[str] = []
    seen: set[str] = set()

    def visit(t: str) -> None:
        if t in seen:
            return
        seen.add(t)
        for parent in sorted(refers.get(t, ())):
            visit(parent)
        order.append(t)

    for t in tables:
        visit(t)
    return order


def is_distributed(conninfo: str) -> bool:
    """Whether a migrate --citus distributed scsql's tables in the database
    CONNINFO names (an administrator's): every later migrate takes that path."""
    from .db import unreachable

    try:
        conn = psycopg.connect(conninfo, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        raise unreachable(exc) from None
    with conn:
        try:
            if conn.execute("select to_regclass('pg_catalog.pg_dist_partition') is null "
                            "or to_regclass('scsql.projects') is null").fetchone()[0]:
                return False
            return conn.execute("select exists (select from pg_catalog.pg_dist_partition "
                                "where logicalrelid = 'scsql.projects'::regclass)").fetchone()[0]
        except psycopg.Error as exc:
            raise errors.from_psycopg(exc) from None


def migrate(conninfo: str, root: Path | None = None, target: int | None = None,
            progress: Callable[[str], None] = lambda _m: None) -> tuple[Report, dict[str, list[str]]]:
    """scsql migrate --citus: the roles and their logins on every node, the
    migrations and sql/ and policies/ from the Citus form of the source (ROOT,
    default the installed one), then distribute (which sets again what
    re-created functions lost). Returns the migration report and what
    distribute changed. Raises like Migrator.run, cluster_logins and distribute."""
    migrator = Migrator(conninfo, CitusSource(root))
    migrator.bootstrap()  # creates the roles
    cluster_logins(conninfo)  # the owner's statements (migrations too) reach the workers as the owner
    report = migrator.run(target=target, progress=progress)
    return report, distribute(conninfo, progress=progress)


def cluster_logins(conninfo: str) -> None:
    """Lets each role of CLUSTER_LOGINS log in, on every node of the cluster
    whose coordinator CONNINFO (an administrator's) names: ALTER ROLE on the
    coordinator, which Citus sends on to the workers. migrate --citus runs
    it first, every time. Raises SC042 (and changes nothing) when the
    database has no citus extension, SC044 with the node's error when one
    refuses."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        _require_citus(conn)
        _cluster_logins(conn)


_CLUSTER_HINT = ("run migrate --citus as a superuser of the coordinator, with every worker "
                 "reachable (select * from citus_check_cluster_node_health())")


def _on_workers(conn: psycopg.Connection, command: str, what: str) -> None:
    """Runs COMMAND on every worker (run_command_on_workers); raises SC044
    naming WHAT and the first node where it failed."""
    for node, port, ok, result in conn.execute(
            "select nodename, nodeport, success, result from run_command_on_workers(%s)", (command,)).fetchall():
        if not ok:
            raise ScsqlError(CLUSTER_SETUP_FAILED, f"{what} could not be set on {node}:{port}: {result}", _CLUSTER_HINT)


def _require_citus(conn: psycopg.Connection) -> None:
    """Raises SC042 when the database of CONN has no citus extension."""
    if conn.execute("select count(*) from pg_catalog.pg_extension where extname = 'citus'").fetchone()[0] == 0:
        raise ScsqlError(errors.CITUS_MISSING, "the database has no citus extension",
                         "load citus (shared_preload_libraries = 'citus'), run create extension citus "
                         "on the coordinator and add the workers (citus_add_node), then migrate --citus again")


def _shard_count(conn: psycopg.Connection, progress: Callable[[str], None]) -> None:
    """The shard count of scsql's distributed tables, chosen when the first is
    distributed: citus.shard_count when the database, the role or the
    connection sets it, else SHARDS_PER_NODE for each node that holds shards.
    Tables distributed later co-locate with the first, whose count stays."""
    existing = conn.execute("select max(shard_count) from citus_tables where citus_table_type = 'distributed' "
                            "and table_name::text like 'scsql.%'").fetchone()[0]
    if existing is not None:
        progress(f"shards: {existing} (the distributed tables')")
        return
    source, count = conn.execute(
        "select source, setting::int from pg_catalog.pg_settings where name = 'citus.shard_count'").fetchone()
    if source == "default":
        nodes = conn.execute("select count(*) from pg_catalog.pg_dist_node "
                             "where isactive and noderole = 'primary' and shouldhaveshards").fetchone()[0]
        count = SHARDS_PER_NODE * max(1, nodes)
        conn.execute(f"set citus.shard_count = {count:d}")
        progress(f"shards: {count} ({SHARDS_PER_NODE} for each of {nodes} node(s) holding shards; "
                 "set citus.shard_count on the database before migrate --citus to choose)")
    else:
        progress(f"shards: {count} (citus.shard_count of the {source})")


def _cluster_logins(conn: psycopg.Connection) -> None:
    _alter_cluster_logins(conn, "login", "allowed to log in on every node")


def _worker_planning(conn: psycopg.Connection) -> None:
    """Turns constraint exclusion off for the sessions Citus opens as the
    roles of CLUSTER_LOGINS in this database (ALTER ROLE ... IN DATABASE,
    which Citus sends on to the workers). With it on, a worker planning a
    read of a partitioned table, or of a UNION ALL over tables (verify_chain's
    reads of the chained tables), re-derives the CHECK and NOT NULL
    constraints of every partition and arm at every plan, for every shard: on
    the .ci/citus.sh cluster about 2 ms of the 3 ms a shard spent planning
    verify_chain's query over every shard. scsql never relies on it (its
    partitions are pruned by their bounds); results are the same either way."""
    db = conn.execute("select current_database()").fetchone()[0]
    _alter_cluster_logins(conn, f"in database {_ident(db)} set constraint_exclusion = off",
                          "planned without constraint exclusion")


def _alter_cluster_logins(conn: psycopg.Connection, change: str, what: str) -> None:
    """ALTER ROLE r CHANGE for each role r of CLUSTER_LOGINS (Citus sends it
    on to the workers); raises SC044 saying which role could not be WHAT."""
    for role in CLUSTER_LOGINS:
        try:
            conn.execute(f"alter role {_ident(role)} {change}")
        except psycopg.Error as exc:
            raise ScsqlError(CLUSTER_SETUP_FAILED, f"role {role} could not be {what}: {exc}", _CLUSTER_HINT) from None


def distribute(conninfo: str, progress: Callable[[str], None] = lambda _m: None) -> dict[str, list[str]]:
    """Make every table of schema scsql a Citus reference table or a table
    distributed by project_id, co-located; tables Citus already manages are
    left as they are. Returns the tables it changed, by kind. Raises SC042
    when the database has no citus extension, SC043 (naming each table and
    why) when some table cannot be sharded by project_id; nothing is changed then."""
    done: dict[str, list[str]] = {"reference": [], "distributed": []}
    with psycopg.connect(conninfo, autocommit=True) as conn:
        _require_citus(conn)
        problems = undistributable(conn)
        if problems:
            raise ScsqlError(errors.NOT_DISTRIBUTABLE,
                             "tables that cannot be sharded by project_id: "
                             + "; ".join(f"{t} {why}" for t, why in problems),
                             "put project_id in every primary, unique and foreign key of the table "
                             "(a new migration), or name a small global table in scsql.core.citus.REFERENCE_TABLES")
        _owner_is_no_agent(conn)
        _cluster_logins(conn)
        _worker_planning(conn)
        # scsql's tables carry triggers (chains, append-only, redaction): Citus
        # runs them on the shards, and only distributes such tables with this on.
        conn.execute("set citus.enable_unsafe_triggers = on")
        # Citus turns a table with a foreign key to a reference table into a
        # "citus local" table by itself; those are made distributed or reference here.
        managed = {name for (name,) in conn.execute(
            "select table_name::text from citus_tables where citus_table_type in ('distributed', 'reference')").fetchall()}
        _shard_count(conn, progress)
        # A table with a foreign key to a new reference table would become a
        # "citus local" table, which cannot be distributed later when it has an
        # identity column: the foreign keys are dropped while the tables are
        # created and added again afterwards (checked on the shards then).
        # Citus cannot create shards inside a transaction that changed the
        # tables, so each step commits; the keys are added again even when a
        # step fails.
        keys = conn.execute(_FOREIGN_KEY_DEFINITIONS).fetchall()
        for table in _without_project_default(conn):
            if f"scsql.{table}" not in managed:
                conn.execute(f"alter table scsql.{_ident(table)} alter column project_id set default {ROW_PROJECT}")
        try:
            for table, name, _definition in keys:
                conn.execute(f"alter table scsql.{_ident(table)} drop constraint {_ident(name)}")
            _create(conn, creation_order(conn, keys=[(t, r) for t, _n, r in _targets(keys)]), managed, done,
                    progress)
        except psycopg.Error as exc:
            raise errors.from_psycopg(exc) from None
        finally:
            _restore_keys(conn, keys)
        for table, trigger in REFERENCE_TRIGGERS:
            conn.execute(f"drop trigger if exists {_ident(trigger)} on scsql.{_ident(table)}")
        _functions_on_every_node(conn)
        _project_defaults_of_distributed(conn)
        _constraint_comments_on_workers(conn)
    return done


# The comments of check constraints ("SC010: ...") say which SC code and
# message a violation gets; scsql._check_row reads them in the chain trigger,
# which on Citus runs on a worker, where the table is Citus's copy and Citus
# copied no comments: there a bad argument got the signature's error instead.
_CONSTRAINT_COMMENTS = """
select 'do $citus_do$ begin perform pg_catalog.set_config(''citus.enable_ddl_propagation'', ''off'', true); '
       || string_agg(format('execute %L;', format('comment on constraint %I on %I.%I is %L', k.conname, n.nspname,
                                                  c.relname, d.description)), ' ' order by c.relname, k.conname)
       || ' end $citus_do$'
  from pg_catalog.pg_constraint k
  join pg_catalog.pg_class c on c.oid = k.conrelid and not c.relispartition
  join pg_catalog.pg_namespace n on n.oid = c.relnamespace and n.nspname = 'scsql'
  join pg_catalog.pg_description d on d.objoid = k.oid and d.classoid = 'pg_catalog.pg_constraint'::regclass
 where k.contype = 'c'
"""


def _constraint_comments_on_workers(conn: psycopg.Connection) -> None:
    """The comments of scsql's check constraints, set on the workers'
    copies of the tables too (Citus sends no COMMENT ON CONSTRAINT)."""
    command = conn.execute(_CONSTRAINT_COMMENTS).fetchone()[0]
    if command is not None:
        _on_workers(conn, command, "the comments of the check constraints")


# The default of project_id of every chained table on Citus. On one server a
# chained row may name no project: its insert trigger stamps the author's.
# Citus routes a row by project_id before any trigger runs, and refuses a row
# without it (22004, "cannot perform an INSERT without a partition column
# value"); it evaluates the default on the coordinator, so a row that names
# no project goes to the acting agent's, whose trigger then checks it as on
# one server (a forged author is SC011, the owner naming no agent SC001).
# Set before a table is distributed: Citus refuses ALTER TABLE of the
# distribution column of a distributed table.
ROW_PROJECT = "scsql_caller.row_project()"

_CHAINED_WITHOUT_DEFAULT = """
select c.relname::text
  from scsql.chained_tables t
  join pg_catalog.pg_class c on c.oid = pg_catalog.to_regclass(t.table_name)
  join pg_catalog.pg_attribute a on a.attrelid = c.oid and a.attname = 'project_id' and not a.attisdropped
  left join pg_catalog.pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
 where d.oid is null or pg_catalog.pg_get_expr(d.adbin, d.adrelid) <> %s
 order by 1
"""


def _without_project_default(conn: psycopg.Connection) -> list[str]:
    """The chained tables whose project_id lacks the default ROW_PROJECT."""
    return [name for (name,) in conn.execute(_CHAINED_WITHOUT_DEFAULT, (ROW_PROJECT,)).fetchall()]


def _project_defaults_of_distributed(conn: psycopg.Connection) -> None:
    """Chained tables distributed by an earlier migrate --citus, without
    the default: it is set on the coordinator and on the workers' copies of
    the table (where queries started on a worker are planned) with Citus's
    DDL propagation off, which alone lets it change the distribution column
    (no shard needs the default: the node that plans the INSERT evaluates it)."""
    for table in _without_project_default(conn):
        alter = f"alter table scsql.{_ident(table)} alter column project_id set default {ROW_PROJECT}"
        off = "pg_catalog.set_config('citus.enable_ddl_propagation', 'off', true)"
        with conn.transaction():
            conn.execute(f"select {off}")
            conn.execute(alter)
            _on_workers(conn, f"do $citus_do$ begin perform {off}; execute $citus_ddl${alter}$citus_ddl$; end $citus_do$",
                        f"the default of scsql.{table}.project_id")


# The functions the policies call, which read tables: on a worker they run
# inside the query on a shard, where Citus refuses any query of a Citus
# table ("cannot execute a distributed query from a query on a shard") unless
# the function allows it. What they read is a reference table (agents, the
# grants: a replica on the same node) or, for published_text, the same
# project's shard.
_POLICY_FUNCTIONS = r"""
select distinct p.oid::regprocedure::text
  from pg_catalog.pg_policy pol
  join pg_catalog.pg_class c on c.oid = pol.polrelid and c.relnamespace = 'scsql'::regnamespace
  cross join lateral regexp_matches(coalesce(pg_catalog.pg_get_expr(pol.polqual, pol.polrelid), ''),
                                    'scsql_caller\.([a-z_]+)\(', 'g') m
  join pg_catalog.pg_proc p on p.proname = m[1] and p.pronamespace = 'scsql_caller'::regnamespace
union
select 'scsql._me()'
order by 1
"""


def _functions_on_every_node(conn: psycopg.Connection) -> None:
    """Citus creates a function on the workers only when every table it
    depends on is a Citus table: those created before the tables were
    distributed are created there now (create_distributed_function), and the
    functions the policies call may query Citus tables from a shard."""
    missing = [name for (name,) in conn.execute("""
        select p.oid::regprocedure::text from pg_catalog.pg_proc p
         where p.pronamespace in ('scsql'::regnamespace, 'scsql_caller'::regnamespace)
           and not exists (select from pg_dist_object o
                            where o.classid = 'pg_catalog.pg_proc'::regclass and o.objid = p.oid)
         order by 1""").fetchall()]
    # A language sql function's body is checked where it is created, and Citus
    # knows no dependency on the functions it calls (_claim_queued calls
    # _claimed; the worker's error reaches here as an aborted transaction):
    # each round creates what it can, and fails when a round adds nothing.
    while missing:
        failed: list[tuple[str, psycopg.Error]] = []
        for name in missing:
            try:
                conn.execute("select create_distributed_function(%s)", (name,))
            except psycopg.Error as exc:
                failed.append((name, exc))
        if len(failed) == len(missing):
            raise errors.from_psycopg(failed[0][1])
        missing = [name for name, _exc in failed]
    for (name,) in conn.execute(_POLICY_FUNCTIONS).fetchall():
        conn.execute(f"alter function {name} set citus.allow_nested_distributed_execution = on")


def _owner_is_no_agent(conn: psycopg.Connection) -> None:
    """The owner holds ADMIN on scsql_agent (it adds agent roles to it) and,
    as bootstrap grants it, inherits it, so the agent policies apply to the
    owner too, OR'ed with its owner_all policy. PostgreSQL folds `true OR
    ...` away; Citus evaluates the stable functions of a modification on the
    coordinator first, where scsql_caller.readable_projects() raises SC001 for
    the security-definer function's caller (an administrator is no agent).
    The owner keeps ADMIN and stops inheriting (PostgreSQL 16 and newer, which
    every Citus that builds against scsql's servers needs)."""
    conn.execute("grant scsql_agent to scsql_owner with admin option, inherit false, set false")
    # Citus writes the rows of an INSERT ... SELECT it cannot push down to the
    # shards with COPY, which PostgreSQL refuses on a table whose policies
    # apply to the writer (forced for the owner too). The owner's policy on
    # every table is owner_all, USING (true) WITH CHECK (true): bypassing row
    # security changes nothing it may see or write.
    conn.execute("alter role scsql_owner bypassrls")


def _no_triggers(conn: psycopg.Connection) -> None:
    """Citus copies a table's rows into its new shards with COPY, which fires
    the table's triggers on the shards (a chain would be appended to again, a
    settings change logged twice): this transaction's copies run with
    triggers off, on every node (SET LOCAL is sent to the workers)."""
    conn.execute("set local citus.propagate_set_commands = 'local'")
    conn.execute("set local session_replication_role = replica")


def _restore_keys(conn: psycopg.Connection, keys: list[tuple[str, str, str]]) -> None:
    present = {(t, n) for t, n, _d in conn.execute(_FOREIGN_KEY_DEFINITIONS).fetchall()}
    for table, name, definition in keys:
        if (table, name) not in present:
            conn.execute(f"alter table scsql.{_ident(table)} add constraint {_ident(name)} {definition}")


_FOREIGN_KEY_DEFINITIONS = """
select c.relname::text, k.conname::text, pg_catalog.pg_get_constraintdef(k.oid)
  from pg_catalog.pg_constraint k join pg_catalog.pg_class c on c.oid = k.conrelid
 where k.contype = 'f' and c.relnamespace = 'scsql'::regnamespace and not c.relispartition
   and k.conparentid = 0
 order by 1, 2
"""


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _targets(keys: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """(table, constraint, referenced table) of foreign key definitions."""
    import re

    out = []
    for table, name, definition in keys:
        m = re.search(r"REFERENCES (?:scsql\.)?\"?([a-z_]+)\"?", definition)
        if m:
            out.append((table, name, m.group(1)))
    return out


def _create(conn: psycopg.Connection, order: list[str], managed: set[str], done: dict[str, list[str]],
            progress: Callable[[str], None]) -> None:
    anchor = None
    for table in order:
        qualified = f"scsql.{table}"
        if table in LOCAL_TABLES:
            progress(f"{table}: local table (coordinator)")
            continue
        if table in REFERENCE_TABLES:
            if qualified not in managed:
                with conn.transaction():
                    _no_triggers(conn)
                    conn.execute("select create_reference_table(%s)", (qualified,))
                done["reference"].append(table)
            progress(f"{table}: reference table")
            continue
        if qualified not in managed:
            with conn.transaction():
                _no_triggers(conn)
                conn.execute("select create_distributed_table(%s, %s, colocate_with => %s)",
                             (qualified, _DISTRIBUTION_COLUMN, anchor or "default"))
            done["distributed"].append(table)
        anchor = anchor or qualified
        progress(f"{table}: distributed by project_id")
