"""Migrations: fresh install equals the upgrade path, the runner is safe to
race and to re-run, changed files are refused, and the psql script a DBA runs
builds the same database.

Every earlier release in RELEASES is installed from its snapshot in
tests/data/ with its own migrator, upgraded with this tree, and compared with
a fresh install. At a release, add its version and commit to RELEASES and
write its snapshot:

    PYTHONPATH=$PWD python3 -m tests.core.test_migrations snapshot <version>
"""

from __future__ import annotations

import difflib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import psycopg
import pytest

from scsql.core.errors import ScsqlError
from scsql.core.migrate import Migrator, Source

from ..helpers import one_server_only, schema_dump, wait_for

# On Citus migrations run as migrate --citus does (tests/core/test_distributable.py);
# these compare plain migrations, dumps and scripts of one server.
pytestmark = one_server_only("plain migrations of one server")

REPO = Path(__file__).resolve().parent.parent.parent


def test_fresh_install_equals_step_by_step_upgrade(server, empty_db, template):
    """One database migrated a version at a time (as successive releases
    would), the other built at the current version in one go: same schema."""
    source = Source(REPO)
    versions = [m.version for m in source.migrations()]
    for v in versions[:-1]:
        report = Migrator(empty_db, source).run(target=v)
        assert report.applied == [m.name for m in source.migrations() if m.version == v]
        assert report.api_files == 0  # sql/ and policies/ belong to the head only
    final = Migrator(empty_db, source).run()
    assert final.applied == [source.migrations()[-1].name]
    upgraded = schema_dump(server, empty_db)
    fresh = schema_dump(server, server.conninfo(template))
    assert "create table scsql.agents" in upgraded.lower()
    assert upgraded == fresh


# -- upgrades from earlier releases ---------------------------------------------

DATA = Path(__file__).resolve().parent.parent / "data"

# Earlier releases, oldest first, whose upgrade to this tree is tested: each
# version and the commit it was released from (recorded here, so every clone
# has it: a tag is not copied by every clone or fork). Each has a snapshot,
# tests/data/release-<version>.tar.xz (see the module's docstring).
RELEASES = {"0.1.0": "f3cc2223912406836f1e0a0ed8c1bbe36b9ad5f0"}

# Each release upgraded to this tree, and, once there are two, the oldest
# upgraded by every later release's migrator in turn, then by this tree.
UPGRADE_PATHS = [(tag,) for tag in RELEASES] + ([tuple(RELEASES)] if len(RELEASES) > 1 else [])

# A snapshot holds these directories of the release, whole, and the modules
# of its package that its migrator imports (found when the snapshot is made).
SNAPSHOT_DIRS = ("migrations", "sql", "policies")

# Run from an extracted snapshot with PYTHONPATH at it: the release's own
# migrator applies the release's files. Arguments: conninfo, snapshot root.
# (Every release so far has this API; one that changes it gets its own.)
_RELEASE_MIGRATE = """
import sys
from pathlib import Path
import scsql
from scsql.migrate import Migrator, Source
root = Path(sys.argv[2]).resolve()
if not Path(scsql.__file__).resolve().is_relative_to(root):
    sys.exit(f"imported scsql from {scsql.__file__}, not from the release in {root}")
Migrator(sys.argv[1], Source(root)).run()
print(scsql.__version__)
"""

_RELEASE_MODULES = """
import sys
import scsql.migrate
for name, module in sorted(sys.modules.items()):
    if name == "scsql" or name.startswith("scsql."):
        print(module.__file__)
"""

# What pg_dump of scsql's schemas leaves out: owners, the other schemas and
# what is in them, extensions, default privileges, the database's own grants
# and settings, event triggers.
_CATALOG = """
with ns as (
  select oid, nspname from pg_catalog.pg_namespace
  where nspname not in ('pg_catalog', 'information_schema') and nspname !~ '^pg_(toast|temp_|toast_temp_)'
)
select 'schema', ns.nspname, pg_catalog.pg_get_userbyid(n.nspowner), coalesce(n.nspacl::text, '')
  from ns join pg_catalog.pg_namespace n using (oid)
union all
select 'extension', extname, extversion, extnamespace::regnamespace::text from pg_catalog.pg_extension
union all
select 'relation ' || c.relkind::text, c.oid::regclass::text, pg_catalog.pg_get_userbyid(c.relowner),
       coalesce(c.relacl::text, '')
  from pg_catalog.pg_class c join ns on ns.oid = c.relnamespace
union all
select 'function ' || p.prokind::text, p.oid::regprocedure::text, pg_catalog.pg_get_userbyid(p.proowner),
       coalesce(p.proacl::text, '')
  from pg_catalog.pg_proc p join ns on ns.oid = p.pronamespace
union all
select 'type ' || t.typtype::text, t.oid::regtype::text, pg_catalog.pg_get_userbyid(t.typowner),
       coalesce(t.typacl::text, '')
  from pg_catalog.pg_type t join ns on ns.oid = t.typnamespace
union all
select 'default acl ' || d.defaclobjtype::text, coalesce(d.defaclnamespace::regnamespace::text, ''),
       pg_catalog.pg_get_userbyid(d.defaclrole), d.defaclacl::text
  from pg_catalog.pg_default_acl d
union all
select 'database', '', pg_catalog.pg_get_userbyid(datdba), coalesce(datacl::text, '')
  from pg_catalog.pg_database where datname = pg_catalog.current_database()
union all
select 'setting', coalesce(s.setrole::regrole::text, ''), pg_catalog.array_to_string(s.setconfig, ' '), ''
  from pg_catalog.pg_db_role_setting s join pg_catalog.pg_database d on d.oid = s.setdatabase
 where d.datname = pg_catalog.current_database()
union all
select 'event trigger', evtname, evtevent, evtfoid::regprocedure::text from pg_catalog.pg_event_trigger
order by 1, 2, 3, 4
"""


def _catalog(conninfo: str) -> str:
    with psycopg.connect(conninfo) as conn:
        return "\n".join(" | ".join(row) for row in conn.execute(_CATALOG).fetchall())


def _contents(conninfo: str) -> str:
    """The rows of scsql's tables, without their timestamps: in a database no
    one has used yet, what the migrations and sql/ put there (the error
    catalogue, team roles, settings, the ledger)."""
    out = []
    with psycopg.connect(conninfo) as conn:
        tables = conn.execute(
            "select c.oid::regclass::text, array_agg(pg_catalog.quote_ident(a.attname) order by a.attnum) "
            "from pg_catalog.pg_class c join pg_catalog.pg_attribute a on a.attrelid = c.oid "
            "where c.relnamespace = 'scsql'::regnamespace and c.relkind in ('r', 'p') and not c.relispartition "
            "and a.attnum > 0 and not a.attisdropped "
            "and a.atttypid not in ('timestamptz'::regtype, 'timestamp'::regtype) "
            "group by 1 order by 1").fetchall()
        for table, columns in tables:
            rows = conn.execute(f"select ({', '.join(columns)})::text from {table} order by 1").fetchall()
            out += [f"{table} | {row}" for (row,) in rows]
    return "\n".join(out)


def _assert_same(fresh: str, upgraded: str, what: str) -> None:
    if upgraded != fresh:
        diff = difflib.unified_diff(fresh.splitlines(), upgraded.splitlines(), "fresh install", what,
                                    lineterm="", n=1)
        pytest.fail(f"{what} differs from a fresh install (+: only in the upgraded database, -: missing there):\n"
                    + "\n".join(list(diff)[:120]), pytrace=False)


def _snapshot(tag: str) -> Path:
    return DATA / f"release-{tag}.tar.xz"


def _files(tar: tarfile.TarFile) -> dict[str, bytes]:
    return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def _tagged_files(tag: str) -> dict[str, bytes] | str:
    """The files of the snapshot's directories and of scsql/ at the commit
    release TAG was made from, or why they cannot be read (no git, no
    repository, a clone without that commit)."""
    commit = RELEASES[tag]
    try:
        proc = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", f"{commit}^{{commit}}", "--",
                               *SNAPSHOT_DIRS, "scsql"], capture_output=True, timeout=120)
    except FileNotFoundError:
        return "git is not installed"
    if proc.returncode != 0:
        return f"git archive of commit {commit} (release {tag}) failed ({proc.stderr.decode().strip()})"
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
        return _files(tar)


def _run_release(root: Path, script: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(root))
    return subprocess.run([sys.executable, "-c", script, *args], cwd=root, env=env, capture_output=True, text=True,
                          timeout=600)


def write_snapshot(tag: str) -> Path:
    """Write tests/data/release-TAG.tar.xz from the commit RELEASES names for
    TAG: the snapshot directories whole, and the modules of scsql its
    migrator imports."""
    import tempfile

    tagged = _tagged_files(tag)
    if isinstance(tagged, str):
        raise SystemExit(tagged)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, data in tagged.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(data)
        proc = _run_release(root, _RELEASE_MODULES)
        if proc.returncode != 0:
            raise SystemExit(proc.stderr)
        modules = [Path(f).resolve().relative_to(root.resolve()).as_posix() for f in proc.stdout.split()]
    names = sorted(n for n in tagged if n.split("/")[0] in SNAPSHOT_DIRS) + sorted(modules)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz", preset=9 | 0x80000000) as tar:  # lzma.PRESET_EXTREME
        for name in names:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(tagged[name]), 0o644
            tar.addfile(info, io.BytesIO(tagged[name]))
    _snapshot(tag).write_bytes(buf.getvalue())
    return _snapshot(tag)


def install_release(tag: str, conninfo: str, into: Path) -> Path:
    """Install release TAG into the database CONNINFO, as that release's own
    migrator does, from its snapshot extracted under INTO; returns the root."""
    root = into / f"release-{tag}"
    with tarfile.open(_snapshot(tag)) as tar:
        tar.extractall(root, filter="data")
    proc = _run_release(root, _RELEASE_MIGRATE, conninfo, str(root))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [tag]  # the release's package ran, not this tree's
    return root


@pytest.mark.parametrize("tag", RELEASES)
def test_release_snapshot_is_the_released_tree(tag):
    """The snapshot an upgrade test installs is the release: its migrations,
    sql/ and policies/ exactly as committed, and its migrator's modules. The
    release is read from the commit RELEASES names, which every clone has
    (the test skipped in every clone while it read a git tag no clone had)."""
    with tarfile.open(_snapshot(tag)) as tar:
        snapshot = _files(tar)
    assert {n.split("/")[0] for n in snapshot} == {*SNAPSHOT_DIRS, "scsql"}
    assert "scsql/migrate.py" in snapshot
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout (a source archive): the release's commit cannot be read")
    tagged = _tagged_files(tag)
    assert not isinstance(tagged, str), (f"{tagged}; a shallow clone lacks it: git fetch --unshallow")
    assert f'__version__ = "{tag}"'.encode() in tagged["scsql/__init__.py"]
    in_dirs = {n: data for n, data in tagged.items() if n.split("/")[0] in SNAPSHOT_DIRS}
    assert sorted(n for n in snapshot if n.split("/")[0] in SNAPSHOT_DIRS) == sorted(in_dirs)
    changed = [n for n, data in snapshot.items() if tagged.get(n) != data]
    assert changed == []


@pytest.mark.parametrize("tag", RELEASES)
def test_every_install_applies_migrations_in_one_sequence(tag, empty_db):
    """A fresh install applies the migrations in the order
    migrations/sequence.txt lists them, and each release's migrations are
    that sequence's start: an upgrade applies what the release lacks in the
    same order as a fresh install. (Files were applied in number order: a
    migration numbered below one already released ran before it on a fresh
    install and after it on an upgrade.) The schema version is how far along
    the sequence a database is."""
    sequence = [m.name for m in Source(REPO).migrations()]
    with tarfile.open(_snapshot(tag)) as tar:
        released = sorted(Path(n).name for n in tar.getnames() if re.match(r"migrations/\d{4}_.*\.sql$", n))
    assert sequence[:len(released)] == released
    report = Migrator(empty_db, Source(REPO)).run(with_api=False)
    assert report.applied == sequence
    assert (report.schema_version, report.schema_head) == (len(sequence), sequence[-1])
    with psycopg.connect(empty_db) as conn:
        conn.execute("set role scsql_owner")
        ledger = [r[0] for r in conn.execute("select name from scsql.schema_migrations order by applied_at, version")]
    assert ledger == sequence


def test_a_migration_missing_from_the_sequence_is_refused(tmp_path):
    """A migration file not in migrations/sequence.txt (or listed twice, or
    listed without its file) is refused before anything is applied."""
    root = tmp_path / "tree"
    shutil.copytree(REPO / "migrations", root / "migrations")
    (root / "migrations" / "9999_new_table.sql").write_text("create table scsql.t (x int);\n")
    with pytest.raises(ValueError, match="not listed: 9999_new_table.sql"):
        Source(root).migrations()
    with (root / "migrations" / "sequence.txt").open("a") as f:
        f.write("9999_new_table.sql\n0001_identity.sql\n")
    with pytest.raises(ValueError, match="listed twice: 0001_identity.sql"):
        Source(root).migrations()


@pytest.mark.parametrize("path", UPGRADE_PATHS, ids="-".join)
def test_release_upgraded_equals_fresh_install(server, empty_db, template, tmp_path, path):
    """A database that a release installed (and later releases upgraded, in
    turn), then migrated with this tree, is a fresh install of this tree: no
    object an earlier version made and this one does not (an old overload of
    a function, a policy, a grant, an error code) is left behind, and none
    is missing."""
    for tag in path:
        root = install_release(tag, empty_db, tmp_path)
    tag = path[-1]
    released = [m.name for m in Source(root).migrations()]
    report = Migrator(empty_db, Source(REPO)).run()
    assert report.applied == [m.name for m in Source(REPO).migrations() if m.name not in released]
    fresh = server.conninfo(template)
    _assert_same(schema_dump(server, fresh), schema_dump(server, empty_db), f"schema after upgrading from {tag}")
    _assert_same(_catalog(fresh), _catalog(empty_db), f"catalog after upgrading from {tag}")
    _assert_same(_contents(fresh), _contents(empty_db), f"contents after upgrading from {tag}")


# Functions earlier versions had, in the shapes they had, that this tree no
# longer defines (migrations 0003, 0114, 0206 and 0306 drop them), with the
# policies that called some of them.
_EARLIER_FUNCTIONS = """
set role scsql_owner;
set search_path = scsql, public;
create function scsql._readable_projects() returns bigint[] language sql as 'select array[]::bigint[]';
create function scsql._confidential_authors() returns bigint[] language sql as 'select array[]::bigint[]';
create function scsql._published_text(bigint, text) returns boolean language sql as 'select false';
create policy earlier_readable on scsql.projects for select using (project_id = any (scsql._readable_projects()));
create policy earlier_confidential on scsql.projects for select
  using (project_id = any (scsql._confidential_authors()));
create policy earlier_published on scsql.projects for select using (scsql._published_text(project_id, name));
create function scsql._api() returns setof text language sql as 'select null::text where false';
create function scsql._chain_link(bigint, bigint, bigint, bytea, bytea) returns void language plpgsql as 'begin end';
create function scsql._tool_call_cost(text, timestamptz, text, integer, integer) returns numeric
  language sql as 'select 0::numeric';
create function scsql._lock_my_learnings() returns void language plpgsql as 'begin end';
create function scsql.record_checkpoint(bigint, timestamptz, integer, bigint[], bigint[], bytea[], bytea)
  returns bigint language sql as 'select 0::bigint';
drop function scsql._chain_gap(bigint, bigint, bigint[], bigint[], boolean[], bigint);
create function scsql._chain_gap(bigint, bigint, bigint[], bigint[], boolean[], bigint,
  out ok boolean, out legacy_used boolean, out missing_at bigint) language sql as 'select true, false, null::bigint';
drop function scsql.chain_heads();
create function scsql.chain_heads()
  returns table (project text, agent text, chain_id bigint, head_seq bigint, head_hash text, horizon_seq bigint)
  language sql as 'select null::text, null::text, 0::bigint, 0::bigint, null::text, 0::bigint where false';
create function scsql._terms(text) returns setof text language sql as 'select null::text where false';
create function scsql._tokens(text) returns integer language sql as 'select 0';
create function scsql._index_scope(text) returns text language sql as 'select null::text';
create function scsql._bm25(bigint[], text[], double precision, double precision, integer, text[], text, timestamptz)
  returns setof bigint language sql as 'select 0::bigint where false';
create function scsql._search(bigint[], text, integer, text[], text, timestamptz, text, vector, text, double precision,
  double precision, double precision, double precision, double precision, integer)
  returns setof bigint language sql as 'select 0::bigint where false';
create function scsql._my_channel() returns text language sql as 'select null::text';
create function scsql.my_channel(text) returns text language sql as 'select null::text';
create function scsql.broadcast(text, text, text, jsonb, bigint) returns bigint language sql as 'select 0::bigint';
drop function scsql.explain(bigint);
create function scsql.explain(p_message_id bigint, out message_id bigint, out chain_id bigint)
  language sql as 'select 0::bigint, 0::bigint';
"""


def test_functions_of_earlier_versions_are_dropped_by_migrations(server, empty_db, template, tmp_path):
    """A database with the functions that versions before 0.1.0 had (an old
    overload, an old result type, a policy calling a private function) is,
    once upgraded, a fresh install: the numbered migrations drop them, once,
    and sql/ and policies/ do not need to."""
    install_release(next(iter(RELEASES)), empty_db, tmp_path)
    with psycopg.connect(empty_db, autocommit=True) as conn:
        conn.execute(_EARLIER_FUNCTIONS)
    before = schema_dump(server, empty_db)
    assert "scsql._chain_link(" in before and "earlier_published" in before  # they really were there
    Migrator(empty_db, Source(REPO)).run()
    fresh = server.conninfo(template)
    _assert_same(schema_dump(server, fresh), schema_dump(server, empty_db), "schema after the upgrade")
    _assert_same(_catalog(fresh), _catalog(empty_db), "catalog after the upgrade")
    _assert_same(_contents(fresh), _contents(empty_db), "contents after the upgrade")


def test_the_upgrade_comparison_finds_what_is_left_behind(server, scsql_db):
    """The comparison the upgrade tests make fails on an old overload of a
    function, an object outside scsql's schemas, an object of another owner
    and an error code sql/ no longer defines: what an upgrade could leave
    behind."""
    def state():
        return schema_dump(server, scsql_db.admin), _catalog(scsql_db.admin), _contents(scsql_db.admin)

    fresh = state()
    leftovers = [  # (what is left behind, which comparison sees it, how it is undone)
        ("create function scsql.broadcast(text, text, text, jsonb, bigint) returns bigint "
         "language sql as 'select 0::bigint'", "schema",
         "drop function scsql.broadcast(text, text, text, jsonb, bigint)"),
        ("create function public.scsql_leftover() returns int language sql as 'select 1'", "catalog",
         "drop function public.scsql_leftover()"),
        ("alter function scsql.chain_heads() owner to current_user", "catalog",
         "alter function scsql.chain_heads() owner to scsql_owner"),
        ("select scsql._define_error('SC999', 'withdrawn', 'An error no version raises any more.')", "contents",
         "delete from scsql.error_codes where code = 'SC999'"),
    ]
    for leftover, seen_by, undo in leftovers:
        with psycopg.connect(scsql_db.admin, autocommit=True) as conn:
            conn.execute(leftover)
            try:
                after = state()
            finally:
                conn.execute(undo)
        with pytest.raises(pytest.fail.Exception) as failed:
            for what, before, now in zip(("schema", "catalog", "contents"), fresh, after):
                _assert_same(before, now, what)
        assert str(failed.value).startswith(seen_by), leftover
    assert state() == fresh

def test_rerunning_migrate_changes_nothing(server, scsql_db):
    before = schema_dump(server, scsql_db.admin)
    report = Migrator(scsql_db.admin).run()
    assert report.applied == []
    assert report.api_files > 0
    assert schema_dump(server, scsql_db.admin) == before
    lines: list[str] = []
    report = Migrator(scsql_db.admin).run(progress=lines.append, reapply=False)  # as scsql up runs it
    assert report.api_files == 0 and "nothing to re-apply" in lines[-1]  # unchanged sql/ and policies/: no lock taken
    assert schema_dump(server, scsql_db.admin) == before


def test_changed_migration_is_refused_and_nothing_applied(server, scsql_db, tmp_path):
    shutil.copytree(REPO / "migrations", tmp_path / "migrations")
    shutil.copytree(REPO / "sql", tmp_path / "sql")
    shutil.copytree(REPO / "policies", tmp_path / "policies")
    first = sorted((tmp_path / "migrations").glob("0001_*.sql"))[0]
    first.write_text(first.read_text() + "\ncreate table scsql.sneaky (id int);\n")
    before = schema_dump(server, scsql_db.admin)
    with pytest.raises(ScsqlError) as err:
        Migrator(scsql_db.admin, Source(tmp_path)).run()
    assert err.value.code == "SC022"
    assert first.name in err.value.message
    assert schema_dump(server, scsql_db.admin) == before


def test_database_from_a_newer_scsql_is_refused(scsql_db):
    with scsql_db.connect() as conn:
        conn.execute("set role scsql_owner")
        conn.execute("insert into scsql.schema_migrations (version, name, checksum) values (9999, '9999_future.sql', 'x')")
    with pytest.raises(ScsqlError) as err:
        Migrator(scsql_db.admin).run()
    assert err.value.code == "SC023"


def test_two_migrators_racing_apply_each_migration_once(empty_db):
    barrier = threading.Barrier(2)
    results, failures = [], []

    def migrate():
        barrier.wait()
        try:
            results.append(Migrator(empty_db).run())
        except Exception as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    # Hold the lock first so both migrators really contend for it.
    with psycopg.connect(empty_db, autocommit=True) as holder:
        holder.execute("select pg_advisory_lock(1396921201, 1)")
        threads = [threading.Thread(target=migrate) for _ in range(2)]
        for t in threads:
            t.start()
        _wait_for_lock_waiters(holder, 2)
        holder.execute("select pg_advisory_unlock(1396921201, 1)")
        for t in threads:
            t.join(60)
    assert failures == []
    assert all(r.waited for r in results)
    applied = sorted(name for r in results for name in r.applied)
    expected = sorted(m.name for m in Source().migrations())
    assert applied == expected  # each applied by exactly one of the two
    with psycopg.connect(empty_db) as conn:
        count = conn.execute("select count(*), count(distinct version) from scsql.schema_migrations").fetchone()
    assert count == (len(expected), len(expected))


def _wait_for_lock_waiters(conn, n: int) -> None:
    wait_for(lambda: conn.execute(
        "select count(*) from pg_locks where locktype = 'advisory' and not granted "
        "and database = (select oid from pg_database where datname = current_database())").fetchone()[0] >= n,
        timeout=30, message="the migrators never waited on the advisory lock")


def test_printed_script_builds_the_same_database_with_plain_psql(server, empty_db, template):
    script = Migrator("").script()
    for _ in range(2):  # and running it again is harmless
        proc = subprocess.run(
            [server.bin("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", empty_db, "-f", "-"],
            input=script, capture_output=True, text=True,
        )
        assert proc.returncode == 0, proc.stderr
    assert schema_dump(server, empty_db) == schema_dump(server, server.conninfo(template))
    with psycopg.connect(empty_db) as conn:
        rows = conn.execute("select name, checksum from scsql.schema_migrations order by version").fetchall()
    assert rows == [(m.name, m.checksum) for m in sorted(Source().migrations(), key=lambda m: m.version)]


def test_printed_script_refuses_a_changed_migration(server, scsql_db, tmp_path):
    shutil.copytree(REPO, tmp_path / "repo", ignore=shutil.ignore_patterns(".git", "*.egg-info", "__pycache__"))
    first = sorted((tmp_path / "repo" / "migrations").glob("0001_*.sql"))[0]
    first.write_text(first.read_text() + "\n-- edited\n")
    script = Migrator("", Source(tmp_path / "repo")).script()
    proc = subprocess.run(
        [server.bin("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", scsql_db.admin, "-f", "-"],
        input=script, capture_output=True, text=True,
    )
    assert proc.returncode != 0
    assert "different checksum" in proc.stderr


def test_a_grant_removed_from_policies_is_taken_back(server, scsql_db):
    """Grants are re-applied exactly: one made by hand (or by an older
    policies/ file) disappears on the next migrate."""
    with psycopg.connect(scsql_db.admin, autocommit=True) as conn:
        conn.execute("grant execute on function scsql.register_agent(text, text, text, bytea) to scsql_agent")
        conn.execute("grant delete on scsql.projects to scsql_agent")
    Migrator(scsql_db.admin).run()
    with psycopg.connect(scsql_db.admin) as conn:
        held = conn.execute(
            "select has_function_privilege('scsql_agent', 'scsql.register_agent(text, text, text, bytea)', 'execute'), "
            "has_table_privilege('scsql_agent', 'scsql.projects', 'delete')").fetchone()
    assert held == (False, False)


if __name__ == "__main__":  # python3 -m tests.core.test_migrations snapshot <version>: write a release's snapshot
    if len(sys.argv) != 3 or sys.argv[1] != "snapshot" or sys.argv[2] not in RELEASES:
        raise SystemExit("usage: python3 -m tests.core.test_migrations snapshot <version>, "
                         "the version and its commit added to RELEASES first")
    print(write_snapshot(sys.argv[2]))
