"""Paths that could name one thing twice, or nothing scsql should read.

* Exclusive files: a second task cannot own a file already held by naming it
  in another letter case, in NFD rather than NFC, through a symbolic link
  inside the project root, or with invisible characters and stray blanks
  (refused outright). One SQL function reads every path lexically.
* index reads files only below a project's root: a project without one
  indexes nothing, and scsql up gives the default project one.
* index with a path the operating system cannot look up (too long) is
  refused with an error code, never a traceback, from the CLI and the tool.
* index_text refuses look-alikes of the reserved source prefixes.
* search refuses NaN and infinite weights and parameters, naming them.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

import psycopg
import pytest

from scsql.memory import indexer
from scsql.core import roles
from scsql.core.config import role_for
from scsql.core.errors import ScsqlError
from scsql.api import Api

from ..helpers import admin_rows, enqueue, enqueue_against_uncommitted, login, one, one_server_only, rows

REPO = Path(__file__).resolve().parent.parent.parent


def _project(db, root: str | Path | None) -> str:
    name = f"ph{time.monotonic_ns() % 10**10}"
    roles.create_project(db.admin, name, None if root is None else str(root))
    return name


def _cli_env(db) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCSQL_")}
    env.update(SCSQL_DSN=db.admin, SCSQL_AGENT_DSN=db.app, SCSQL_KEYSTORE=str(db.keystore.directory),
               SCSQL_EMBED="none", PYTHONPATH=str(REPO))
    return env


# -- exclusive files ------------------------------------------------------------


@pytest.fixture
def orch(scsql_db):
    return scsql_db.agent("orch", _project(scsql_db, "/work/repo"), "orchestrator")


@pytest.mark.parametrize(("held", "wanted"), [
    ("src/a.py", "SRC/a.py"),
    ("src/a.py", "src/A.py"),
    ("src/a.py", "Src/A.PY"),
    ("SRC", "src/a.py"),                              # a directory in another case covers the file
    ("src/a.py", "/WORK/REPO/src/a.py"),              # the root compared without case too
    ("straße/x.py", "STRASSE/x.py"),                  # full case folding where the server has it
    ("café/x.py", unicodedata.normalize("NFD", "café/x.py")),
    (unicodedata.normalize("NFD", "café/x.py"), "café/x.py"),
    ("Ωmega/x.py", "ωMEGA/x.py"),
])
def test_a_held_file_cannot_be_taken_under_another_spelling(orch, held, wanted):
    if "ß" in held and one(orch, "select current_setting('server_version_num')::int as v")["v"] < 180000:
        pytest.skip("full case folding (ß = SS) needs PostgreSQL 18")
    first = enqueue(orch, files=[held])
    with pytest.raises(ScsqlError) as err:
        enqueue(orch, files=["free.txt", wanted])
    assert err.value.code == "SC322"
    stored = unicodedata.normalize("NFC", held)
    assert f"(held as {stored} by task {first})" in err.value.message
    assert one(orch, "select count(*) as n from scsql.tasks")["n"] == 1


def test_held_paths_are_stored_in_nfc_and_spellings_of_one_path_are_one(orch):
    nfd = unicodedata.normalize("NFD", "café/x.py")
    tid = enqueue(orch, files=[nfd, "src/a.py", "SRC/A.py", "Src"])
    files = one(orch, "select exclusive_files from scsql.tasks where task_id = %s", tid)["exclusive_files"]
    # NFC; one of src/a.py and SRC/A.py, and that one is below Src anyway.
    assert files == ["café/x.py", "Src"] and files[0] != nfd


@pytest.mark.parametrize("path", [
    "src/a.py\u200b", "\u200bsrc/a.py", "src/\u200ca.py", "src/a\u200d.py", "src/\u2060a.py", "src/\ufeffa.py",
    "src/\u202ea.py", "src/\u2066a.py\u2069", "src/\u200fa.py", "src/a\u00ad.py", "src/a\ufe0f.py",
    "src/a\U000e0041.py", "src/a\u034f.py",
    " src/a.py", "src/a.py ", "src /a.py", "src/ a.py", "src/a\u00a0.py", "src/a\u3000.py", "src/a\u2009.py",
    "src/a.py\t", "src/a\x85.py",
])
def test_invisible_characters_and_stray_blanks_are_refused(orch, path):
    enqueue(orch, files=["src/a.py"])
    with pytest.raises(ScsqlError) as err:
        enqueue(orch, files=["free.txt", path])
    assert err.value.code == "SC320", path
    assert one(orch, "select count(*) as n from scsql.tasks")["n"] == 1


def test_a_plain_space_inside_a_name_is_a_name(orch):
    tid = enqueue(orch, files=["docs/release notes.md"])
    assert one(orch, "select exclusive_files from scsql.tasks where task_id = %s", tid)["exclusive_files"] == [
        "docs/release notes.md"]


def test_a_symbolic_link_inside_the_root_names_the_file_it_leads_to(scsql_db, tmp_path):
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("x = 1\n")
    (root / "link").symlink_to(root / "src")
    (root / "a_link.py").symlink_to(root / "src" / "a.py")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (root / "out").symlink_to(outside)
    orch = scsql_db.agent("orch", _project(scsql_db, root), "orchestrator")
    api = Api(orch)
    first = api.call("enqueue_task", role="developer", exclusive_files=["src/a.py"])
    assert first["exclusive_files"] == ["src/a.py"]
    for alias in ("link/a.py", "link", "a_link.py", f"{root}/link/a.py", "link/../src/a.py"):
        with pytest.raises(ScsqlError) as err:
            api.call("enqueue_task", role="developer", exclusive_files=["free.txt", alias])
        assert err.value.code == "SC322", alias
        assert f"held as src/a.py by task {first['task_id']}" in err.value.message
    with pytest.raises(ScsqlError) as err:
        api.call("enqueue_task", role="developer", exclusive_files=["out/x.py"])
    assert err.value.code == "SC321" and str(outside) in err.value.message
    # A name that is not a link, and one that does not exist yet, pass as they are.
    other = api.call("enqueue_task", role="developer", exclusive_files=["src/b.py", "new/dir/"])
    assert other["exclusive_files"] == ["new/dir", "src/b.py"]
    assert one(orch, "select count(*) as n from scsql.tasks")["n"] == 2


def test_case_variants_enqueued_at_once_exactly_one_wins(scsql_db, orch):
    """B's enqueue of SRC/A.py meets A's uncommitted src/a.py and waits for it:
    the exclusion constraint compares folded keys, so there is no window."""
    db = scsql_db
    second = db.agent("orch_b", orch.whoami()["project"], "orchestrator")
    a_task, outcome = enqueue_against_uncommitted(db, orch, second, "src/a.py", "SRC/A.py", commit=True)
    assert outcome["err"].code == "SC322"
    assert f"SRC/A.py (held as src/a.py by task {a_task})" in outcome["err"].message


@one_server_only("an upgrade from the rule before case folding, which no Citus install predates "
                 "(and Citus refuses its staging: a stable function over columns in an UPDATE)")
def test_migrate_takes_spans_held_before_case_folding_again(scsql_db, orch):
    """An upgrade meets spans taken under the old rule (case kept): migrate
    takes them again folded, and leaves two that now collide as they are."""
    from scsql.core.migrate import Migrator

    old_span = ("numrange((project_id || '.' || scsql._path_digits(path) || '0')::numeric, "
                "(project_id || '.' || scsql._path_digits(path) || '002')::numeric, '[)')")
    held = enqueue(orch, files=["SRC/a.py"])
    twins = [enqueue(orch, files=[p]) for p in ("Docs", "other")]
    with psycopg.connect(scsql_db.admin) as conn:
        # Under the old rule Docs and docs were two files: both could be held.
        conn.execute("update scsql.task_files set path = 'docs', span = numrange(0, 1) where task_id = %s",
                     (twins[1],))
        conn.execute(f"update scsql.task_files set span = {old_span}")
    with login(scsql_db, orch.name, autocommit=False) as conn:  # the hole an upgrade must close
        conn.execute("select scsql.enqueue_task('developer', p_exclusive_files => array['src/A.py'])")
        conn.rollback()
    Migrator(scsql_db.admin).run()
    with pytest.raises(ScsqlError) as err:
        enqueue(orch, files=["src/a.PY"])
    assert err.value.code == "SC322" and f"held as SRC/a.py by task {held}" in err.value.message
    spans = admin_rows(scsql_db, "select task_id, path, span = scsql._path_span(project_id, path) as folded "
                                 "from scsql.task_files order by task_id")
    assert sum(not s["folded"] for s in spans) == 1  # one of Docs / docs keeps its old span until it finishes
    assert {s["path"] for s in spans if s["task_id"] in twins} == {"Docs", "docs"}


def test_one_function_reads_paths(scsql_db):
    """Every function that splits a path does it through scsql._path_parts."""
    with psycopg.connect(scsql_db.admin) as conn:
        found = {r[0] for r in conn.execute(
            "select p.proname from pg_proc p where p.pronamespace = 'scsql'::regnamespace "
            "and p.prosrc ~ 'string_to_array\\([^)]*''/''\\)'").fetchall()}
    # The code graph's module keys are made from paths _path_parts already read
    # when they were stored; these split those keys, never a path an agent gives.
    assert found == {"_path_parts", "_code_module_keys", "_code_common_prefix", "_code_invalidate"}


def test_dot_dot_above_the_start_is_refused_the_same_way_everywhere(scsql_db, tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    orch = scsql_db.agent("orch", _project(scsql_db, root), "orchestrator")
    with pytest.raises(ScsqlError) as err:
        enqueue(orch, files=["../x"])
    assert err.value.code == "SC321"
    with pytest.raises(ScsqlError) as err:
        one(orch, "select scsql_caller.index_scope(%s) as root", f"/../..{root}")
    assert err.value.code == "SC213"


# -- index needs a root ------------------------------------------------------------


def test_index_in_a_project_without_a_root_reads_nothing(scsql_db, tmp_path):
    agent = scsql_db.agent("noroot", _project(scsql_db, None))
    tree = tmp_path / "anywhere"
    tree.mkdir()
    (tree / "notes.md").write_text("# Notes\n\nthe launch codes of the telescope\n")
    with pytest.raises(ScsqlError) as err:
        indexer.index_tree(agent, tree, progress=False)
    assert err.value.code == "SC216"
    with pytest.raises(ScsqlError) as err:
        Api(agent).call("index", path=str(tree))
    assert err.value.code == "SC216"
    with pytest.raises(ScsqlError) as err:
        one(agent, "select scsql_caller.index_scope(%s) as root", str(tree))
    assert err.value.code == "SC216" and "no root" in err.value.message
    proc = subprocess.run([sys.executable, "-m", "scsql", "index", str(tree), "--agent", agent.name],
                          env=_cli_env(scsql_db), capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode != 0 and "SC216" in proc.stderr and "Traceback" not in proc.stderr
    assert rows(agent, "select path from scsql.kb_sources") == []
    # Once an administrator sets the root, the same tree indexes.
    assert roles.set_project_root(scsql_db.admin, agent.whoami()["project"], str(tree)) == str(tree.resolve())
    assert indexer.index_tree(agent, tree, progress=False)["indexed"] == 1


def test_set_project_root_refuses_slash_and_relative_paths(scsql_db):
    project = _project(scsql_db, None)
    for bad in ("/", "/..", "relative/dir", "//./"):
        with pytest.raises(ScsqlError) as err:
            roles.set_project_root(scsql_db.admin, project, bad)
        assert err.value.code == "SC010", bad
    with pytest.raises(ScsqlError) as err:
        roles.set_project_root(scsql_db.admin, "no-such-project", "/srv/x")
    assert err.value.code == "SC005"


def test_scsql_up_gives_the_default_project_a_root(scsql_db, tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "sub").mkdir()
    (repo / "README.md").write_text("# Repo\n\nthe default project's own files\n")
    env = _cli_env(scsql_db)
    # A default project from before roots were set has none.
    roles.create_project(scsql_db.admin, "default")
    try:
        up = subprocess.run([sys.executable, "-m", "scsql", "up"], cwd=repo / "sub", env=env,
                            capture_output=True, text=True, timeout=300, check=False)
        assert up.returncode == 0, up.stderr
        assert f"project root    {repo.resolve()}" in up.stdout
        root_of = "select root_path from scsql.projects where name = 'default'"
        assert admin_rows(scsql_db, root_of)[0]["root_path"] == str(repo.resolve())
        # The default agent can index its repository now.
        idx = subprocess.run([sys.executable, "-m", "scsql", "index", str(repo), "--agent", "default", "--json"],
                             env=env, capture_output=True, text=True, timeout=120, check=False)
        assert idx.returncode == 0, idx.stderr
        # A later up elsewhere keeps it; --root changes it.
        again = subprocess.run([sys.executable, "-m", "scsql", "up"], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=300, check=False)
        assert again.returncode == 0, again.stderr
        assert admin_rows(scsql_db, root_of)[0]["root_path"] == str(repo.resolve())
        moved = subprocess.run([sys.executable, "-m", "scsql", "up", "--root", str(repo / "sub")], env=env,
                               capture_output=True, text=True, timeout=300, check=False)
        assert moved.returncode == 0, moved.stderr
        assert admin_rows(scsql_db, root_of)[0]["root_path"] == str((repo / "sub").resolve())
    finally:
        # The default agent's role is cluster-wide: take back what it holds
        # in this database, then drop it.
        role = role_for("default")
        with psycopg.connect(scsql_db.admin, autocommit=True) as conn:
            if conn.execute("select 1 from pg_roles where rolname = %s", (role,)).fetchone():
                conn.execute(f'drop owned by "{role}"')
                conn.execute(f'drop role "{role}"')


# -- index with an unusable path -------------------------------------------------------


@pytest.mark.parametrize("path", [
    "/" + "a" * 10_000,                       # longer than PATH_MAX
    "/tmp/" + "b" * 300,                      # one name longer than NAME_MAX
    "/" + "c/" * (5 * 1024 * 1024 // 2),       # 5 MB
], ids=["path-max", "name-max", "5mb"])
def test_index_with_an_unusable_path_is_an_error_code_not_a_traceback(scsql_db, tmp_path, path):
    agent = scsql_db.agent("long", _project(scsql_db, tmp_path))
    with pytest.raises(ScsqlError) as err:
        indexer.index_tree(agent, path, progress=False)
    assert err.value.code == "SC224"
    assert len(err.value.message) < 1000
    with pytest.raises(ScsqlError) as err:
        Api(agent).call("index", path=path)
    assert err.value.code == "SC224"


def test_cli_index_with_a_long_path_is_one_line(scsql_db, tmp_path):
    agent = scsql_db.agent("longcli", _project(scsql_db, tmp_path))
    for path in ("/" + "a" * 10_000, str(tmp_path / ("n" * 300))):
        proc = subprocess.run([sys.executable, "-m", "scsql", "index", path, "--agent", agent.name],
                              env=_cli_env(scsql_db), capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode != 0
        assert "Traceback" not in proc.stderr and "SC224" in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1


# -- reserved source prefixes ------------------------------------------------------


@pytest.mark.parametrize("path", [
    "l\u0435arning:1",            # Cyrillic е
    "le\u0430rning:1",            # Cyrillic а
    "learn\u0456ng:1",            # Cyrillic і
    "sessi\u03bfn:x/1",           # Greek ο
    "\u0455ession:x/1",           # Cyrillic ѕ
    "m\u0435mory:k",
    "f\u0430ct:k",
    "fa\u0441t:k",                # Cyrillic с
    "m\u0435ss\u0430g\u0435:1",
    "\u039cEMORY:k",              # Greek Μ
    "\uff4c\uff45\uff41\uff52\uff4e\uff49\uff4e\uff47:1",  # fullwidth
    "learning\uff1a1",            # fullwidth colon
    "learning\u02d01",            # modifier letter triangular colon
    "lea\u200drning:1",           # zero-width joiner inside
    "l\u00e9arning:1",            # an accent
    "le\u0301arning:1",           # a combining accent
    "\u029fearning:1",            # small capital L
    "Iearning:1",                 # capital I for l
    "learnlng:1",
    "rnemory:k",                  # rn for m
    "sess1on:x",
    "mem0ry:k",
    "\U0001d425\U0001d41e\U0001d41a\U0001d42b\U0001d427\U0001d422\U0001d427\U0001d420:1",  # mathematical bold
    "LEARN\u0130NG:1",
    "\u2066learning:1",
    " fact :k",
])
def test_look_alikes_of_reserved_prefixes_are_refused(scsql_db, path):
    agent = scsql_db.agent("forger", _project(scsql_db, None))
    with pytest.raises(ScsqlError) as err:
        one(agent, "select * from scsql.index_text(%s, 'forged learning', 'note')", path)
    assert err.value.code == "SC211", path
    with pytest.raises(ScsqlError) as err:
        Api(agent).call("index_text", path=path, content="forged learning")
    assert err.value.code == "SC211", path
    assert rows(agent, "select path from scsql.kb_sources") == []


def test_paths_that_only_mention_a_prefix_are_fine(scsql_db):
    agent = scsql_db.agent("fine", _project(scsql_db, None))
    for path in ("notes/learning:1", "lessons:1", "facts:1", "my-session:1", "learning-notes", "café.md"):
        assert one(agent, "select * from scsql.index_text(%s, 'text', 'note')", path)["chunks"] == 1, path


# -- search arguments -----------------------------------------------------------------


@pytest.mark.parametrize("arg", ["rrf_k", "bm25_weight", "vector_weight", "k1", "b"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_search_refuses_nan_and_infinite_arguments_naming_them(scsql_db, arg, value):
    agent = scsql_db.agent("searcher", _project(scsql_db, None))
    one(agent, "select * from scsql.index_text('notes/a.md', 'verify the telescope chain', 'note')")
    for fn in ("search", "search_global"):
        with pytest.raises(ScsqlError) as err:
            rows(agent, f"select * from scsql.{fn}('telescope', p_{arg} => %s::double precision)", value)
        assert err.value.code == "SC010", (fn, arg, value)
        assert arg in err.value.message
    with pytest.raises(ScsqlError) as err:
        Api(agent).call("search", query="telescope", **{arg: value})
    assert err.value.code == "SC010" and arg in err.value.message
    assert rows(agent, "select * from scsql.search('telescope')")  # ordinary values still work
