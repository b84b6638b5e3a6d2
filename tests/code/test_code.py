"""The symbol graph: files of every supported language parsed into
definitions and references, stored with the chunks by ``scsql index`` and
kept incrementally; references resolved (or kept with their candidates); the
repo map, file and project cards and graph queries built on it; search that
knows symbols; bad input refused with its code; another project's graph
unseen."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from psycopg.types.json import Jsonb

from scsql.api import Api
from scsql.code import parse
from scsql.core import roles
from scsql.core.errors import ScsqlError
from scsql.memory import indexer

from ..helpers import enqueue, one_server_only, rows, statement_lock_waiters, wait_for

FILES = {
    "pkg/__init__.py": "",
    "pkg/store.py": '''\
        """Storage."""
        from .util import check_key


        class Base:
            def close(self):
                return None


        class Store(Base):
            def put(self, key):
                check_key(key)
                return self._save(key)

            def _save(self, key):
                return key
        ''',
    "pkg/util.py": '''\
        def check_key(key):
            return bool(key)


        def put(key):
            return key
        ''',
    "app.py": '''\
        from pkg.store import Store
        import pkg.util


        def main():
            s = Store()
            s.put("a")
            pkg.util.check_key("b")


        if __name__ == "__main__":
            main()
        ''',
    "broken.py": '''\
        def before():
            return 1


        def broken(:
            pass


        def after():
            return before()
        ''',
    "web/app.ts": '''\
        import { helper } from "./helper";
        export class Widget extends Base {
          render(): string { return helper(this.name); }
        }
        ''',
    "web/helper.ts": "export function helper(x: string): string { return x; }\n",
    "web/legacy.js": "function legacy() { return 1; }\nclass Old { run() { legacy(); } }\n",
    "go/store.go": "package store\n\ntype Store struct{}\n\nfunc (s *Store) Put(k string) { New() }\n\nfunc New() *Store { return nil }\n",
    "rs/lib.rs": "pub struct Store;\nimpl Store { pub fn put(&self) { helper(); } }\nfn helper() {}\n",
    "java/Store.java": "class Store { int put(String k) { return helper(k); } int helper(String k) { return 1; } }\n",
    "c/store.c": '#include "store.h"\nint helper(int k) { return k; }\nint put(int k) { return helper(k); }\n',
    "cpp/store.cpp": "namespace db { class Store { public: int put(int k) { return 1; } }; }\n",
    "db/schema.sql": "create table t (a int);\ncreate or replace function f(x int) returns int language sql as $$ select x $$;\n",
    "notes/readme.txt": "Nothing here parses; the word zebrafish is only text.\n",
    "script.rb": "def ruby_method\n  1\nend\n",
    "pkg/wrap.py": "def wrap(key):\n    return str(key).check_key()\n",
    "tests/test_util.py": "from pkg.util import check_key\n\n\ndef test_check_key():\n    assert check_key('a')\n",
}


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "proj"
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root.resolve()


@pytest.fixture
def indexed(scsql_db, tree):
    project = f"code{abs(hash(str(tree))) % 10**6}"
    roles.create_project(scsql_db.admin, project, str(tree))
    agent = scsql_db.agent("coder", project)
    report = indexer.index_tree(agent, tree, progress=False)
    assert report["failed"] == []
    return agent, tree, report


def defs(agent, path: str) -> dict[str, dict]:
    return {r["qualname"]: r for r in rows(agent, """
        select d.* from scsql.code_definitions d join scsql.code_files f using (project_id, file_id) where f.path = %s""",
                                             path)}


def test_every_language_gives_its_definitions_and_unknown_ones_are_text(indexed):
    agent, _, report = indexed
    assert report["symbols"]["files"] == len([f for f in FILES if FILES[f].strip()])  # empty files are not read
    assert {"Base", "Base.close", "Store", "Store.put", "Store._save"} <= set(defs(agent, "pkg/store.py"))
    assert defs(agent, "pkg/store.py")["Store.put"]["kind"] == "method"
    assert {"Widget", "Widget.render"} <= set(defs(agent, "web/app.ts"))
    assert {"legacy", "Old", "Old.run"} <= set(defs(agent, "web/legacy.js"))
    assert {"Store", "Store.Put", "New"} <= set(defs(agent, "go/store.go"))
    assert {"Store", "Store.put", "helper"} <= set(defs(agent, "rs/lib.rs"))
    assert {"Store", "Store.put", "Store.helper"} <= set(defs(agent, "java/Store.java"))
    assert {"helper", "put"} <= set(defs(agent, "c/store.c"))
    assert {"db", "db.Store", "db.Store.put"} <= set(defs(agent, "cpp/store.cpp"))
    assert {"t", "f"} <= set(defs(agent, "db/schema.sql"))
    files = {r["path"]: r for r in rows(agent, "select * from scsql.code_files")}
    assert files["notes/readme.txt"]["status"] == "text" and files["script.rb"]["language"] is None
    assert defs(agent, "script.rb") == {}
    # Indexed as text all the same: search finds what only it holds.
    assert Api(agent).call("search", query="zebrafish", mode="bm25")[0]["source_path"] == "notes/readme.txt"


def test_a_file_that_does_not_parse_keeps_what_parsed_and_says_so(indexed):
    agent, _, report = indexed
    assert "broken.py" in report["symbols"]["partial"]
    card = Api(agent).call("file_card", path="broken.py")
    assert card["status"] == "partial" and card["parse_errors_at"] == [5]
    assert {"before", "after"} <= {d["name"] for d in card["defines"]}


def test_references_resolve_or_keep_their_candidates(indexed):
    agent, _, _ = indexed
    calls = {(r["caller"], r["name"]): r for r in rows(agent, """
        select coalesce(fd.qualname, f.path) as caller, r.name, r.resolution, td.qualname as target, tf.path as target_path,
               array(select q.qualname from scsql.code_definitions q where q.def_id = any(r.candidates)) as candidates
        from scsql.code_references r join scsql.code_files f using (project_id, file_id)
        left join scsql.code_definitions fd on fd.def_id = r.from_def_id
        left join scsql.code_definitions td on td.def_id = r.target_def_id
        left join scsql.code_files tf on tf.file_id = td.file_id
        where r.kind = 'call'""")}
    assert calls[("Store.put", "check_key")]["resolution"] == "import"   # from .util import check_key
    assert calls[("Store.put", "check_key")]["target_path"] == "pkg/util.py"
    assert calls[("Store.put", "_save")]["resolution"] == "local"        # self._save
    assert calls[("main", "check_key")]["target_path"] == "pkg/util.py"  # import pkg.util; pkg.util.check_key
    assert calls[("main", "Store")]["target_path"] == "pkg/store.py"
    # s.put: a method named put of some class; Python's only one is Store.put (those of Rust, Java and
    # C++ are no candidates: a call resolves by name within its language family).
    put = calls[("main", "put")]
    assert put["resolution"] == "unique" and put["target"] == "Store.put"
    assert calls[("after", "before")]["resolution"] == "local"          # around the syntax error
    assert calls[("Widget.render", "helper")]["target_path"] == "web/helper.ts"
    assert calls[("Store.put", "helper")]["resolution"] in ("local", "unique")  # rust: helper() beside it


def test_who_calls_and_what_breaks_are_one_call_each(indexed):
    agent, _, _ = indexed
    api = Api(agent)
    who = api.call("graph_neighbors", node="check_key", direction="in", kinds=["calls"])
    assert {r["node"] for r in who} == {"pkg/store.py#Store.put", "app.py#main", "tests/test_util.py#test_check_key"}
    assert all(r["cite"].split(":")[0] in ("pkg/store.py", "app.py", "tests/test_util.py") for r in who)
    breaks = api.call("graph_neighbors", node="pkg/util.py#check_key", direction="in",
                      kinds=["calls", "inherits", "imports"], depth=3)
    assert "app.py#main" in {r["node"] for r in breaks}
    path = api.call("graph_path", **{"from": "app.py#main", "to": "pkg/util.py#check_key"})
    assert [r["node"] for r in path][0] == "app.py#main" and path[-1]["node"] == "pkg/util.py#check_key"
    assert all(r["cite"] for r in path[1:])
    out = api.call("graph_neighbors", node="pkg/store.py#Store", direction="out", kinds=["inherits", "defines"])
    assert {"pkg/store.py#Base", "pkg/store.py#Store.put"} <= {r["node"] for r in out}


def test_the_repo_map_fits_its_budget_and_centres_on_its_focus(indexed):
    agent, _, _ = indexed
    api = Api(agent)
    whole = api.call("repo_map", budget_tokens=2000, focus=[])
    assert {"pkg/store.py", "pkg/util.py"} <= {r["path"] for r in whole}
    small = api.call("repo_map", budget_tokens=50, focus=["web/app.ts"])
    assert small and small[0]["path"] == "web/app.ts"
    assert sum(len(r["path"]) + 1 + len(r["definitions"]) + 1 for r in small) <= 50 * 4
    named = api.call("repo_map", budget_tokens=100, focus=["where is check_key defined?"])
    assert named[0]["path"] == "pkg/util.py" and "check_key" in named[0]["definitions"]
    with pytest.raises(ScsqlError) as err:
        api.call("repo_map", budget_tokens=10)
    assert err.value.code == "SC262"


def test_cards_say_what_a_file_and_the_project_are(indexed, scsql_db):
    agent, root, _ = indexed
    api = Api(agent)
    api.call("decide", title="pkg/util.py keeps key checks", rationale="one place for them")
    card = api.call("file_card", path=str(root / "pkg" / "util.py"))  # absolute under the root
    assert card["path"] == "pkg/util.py" and {d["name"] for d in card["defines"]} == {"check_key", "put"}
    assert {r["path"] for r in card["imported_by"]} >= {"pkg/store.py", "app.py"}
    assert card["decisions"][0]["title"] == "pkg/util.py keeps key checks"
    project = api.call("project_card")
    assert {"python", "typescript", "go", "rust", "java", "c", "cpp", "sql", "text"} <= {
        x["language"] for x in project["languages"]}
    assert any(e["name"] == "main" for e in project["entry_points"])
    assert project["test_command"] == "python -m pytest"  # tests/test_util.py
    with pytest.raises(ScsqlError) as err:
        api.call("file_card", path="nowhere.py")
    assert err.value.code == "SC264"


def test_a_file_card_names_its_tests_lessons_and_the_task_holding_it(indexed, scsql_db):
    agent, root, _ = indexed
    api = Api(agent)
    assert api.call("file_card", path="pkg/util.py")["tests"] == ["tests/test_util.py"]  # by name and by import
    assert api.call("file_card", path="pkg/store.py")["tests"] == []
    api.call("record_outcome", kind="failed", summary="pkg/util.py rejected an empty key", task_ref="T-31")
    orch = scsql_db.agent("orch", f"code{abs(hash(str(root))) % 10**6}", "orchestrator")
    task = enqueue(orch, "developer", ["pkg/util.py"])
    card = api.call("file_card", path="pkg/util.py")
    assert [x["summary"] for x in card["lessons"]] == ["pkg/util.py rejected an empty key"]
    assert card["lessons"][0]["cite"].startswith("learning:")
    assert card["task"]["task"] == task and card["task"]["cite"] == f"task:{task}"
    other = api.call("file_card", path="app.py")
    assert other["lessons"] == [] and other["task"] is None and other["edits"] == []


def test_search_ranks_a_named_definition_first_and_says_what_chunks_define(indexed):
    agent, _, _ = indexed
    hits = Api(agent).call("search", query="Store.put", k=5)
    assert hits[0]["source_path"] == "pkg/store.py" and "Store.put" in hits[0]["defines"]
    assert "symbol" in hits[0]["retrievers"]
    plain = Api(agent).call("search", query="zebrafish", k=5)
    assert plain[0]["defines"] is None  # text defines nothing


def test_index_again_is_incremental_and_deleted_files_leave_the_graph(indexed):
    agent, root, _ = indexed
    before = defs(agent, "pkg/store.py")
    (root / "pkg" / "store.py").write_text((root / "pkg" / "store.py").read_text() + "\n\ndef extra():\n    return 2\n")
    (root / "pkg" / "util.py").unlink()
    report = indexer.index_tree(agent, root, progress=False)
    assert report["symbols"]["files"] == 1 and report["symbols"]["removed"] == 1
    after = defs(agent, "pkg/store.py")
    assert "extra" in after and after["Store.put"]["def_id"] == before["Store.put"]["def_id"]  # kept its id
    assert rows(agent, "select 1 from scsql.code_files where path = 'pkg/util.py'") == []
    [ref] = rows(agent, """select r.resolution from scsql.code_references r join scsql.code_definitions d
                           on d.project_id = r.project_id and d.def_id = r.from_def_id where d.qualname = 'Store.put' and r.name = 'check_key'""")
    assert ref["resolution"] == "unresolved"  # its definition left with the file
    assert indexer.index_tree(agent, root, progress=False)["symbols"]["files"] == 0  # nothing changed


def test_another_project_sees_none_of_the_graph(indexed, scsql_db):
    agent, _, _ = indexed
    other = scsql_db.agent("outsider", scsql_db.project())
    for table in ("code_files", "code_definitions", "code_references", "code_links", "code_state"):
        assert rows(other, f"select 1 from scsql.{table}") == [], table
    assert Api(other).call("repo_map", focus=[]) == []
    with pytest.raises(ScsqlError) as err:
        Api(other).call("graph_neighbors", node="check_key")
    assert err.value.code == "SC266"


def test_bad_input_is_refused_with_its_code(indexed):
    agent, _, _ = indexed
    api = Api(agent)
    for args, code in [({"node": "x", "direction": "up"}, "SC267"), ({"node": "x", "kinds": ["eats"]}, "SC268"),
                       ({"node": "x", "depth": 9}, "SC269"), ({"node": ""}, "SC265")]:
        with pytest.raises(ScsqlError) as err:
            api.call("graph_neighbors", **args)
        assert err.value.code == code, args
    with pytest.raises(ScsqlError) as err, agent.transaction() as conn:
        conn.execute("select scsql.index_code('../x.py', %s, 'python', 'x', 'parsed', '{}', '[]', '[]')", ("0" * 64,))
    assert err.value.code == "SC260"
    with pytest.raises(ScsqlError) as err, agent.transaction() as conn:
        conn.execute("""select scsql.index_code('x.py', %s, 'python', 'x', 'parsed', '{}', '[{"key": "a", "kind": "spell"}]',
                        '[]')""", ("0" * 64,))
    assert err.value.code == "SC261" and "unknown kind" in err.value.message


def test_a_path_outside_the_root_is_refused_as_before(indexed, tmp_path):
    agent, root, _ = indexed
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "x.py").write_text("def outside():\n    pass\n")
    with pytest.raises(ScsqlError) as err:
        indexer.index_tree(agent, outside, progress=False)
    assert err.value.code == "SC213"
    from scsql.memory.fresh import reindex

    done = reindex(agent, [str(outside / "x.py"), str(root / ".." / "elsewhere" / "x.py")])
    assert done.indexed == [] and len(done.skipped) == 2
    assert rows(agent, "select 1 from scsql.code_definitions where name = 'outside'") == []


def test_parsing_needs_no_network():
    """The grammars are in the wheels: a parse in a process that cannot resolve any host works."""
    script = ("import socket\n"
              "def no(*a, **k): raise OSError('no network')\n"
              "socket.socket.connect = no; socket.getaddrinfo = no\n"
              "from scsql.code import parse\n"
              "for p, t in [('a.py', 'def f(): pass'), ('a.ts', 'function f() {}'), ('a.go', 'package a\\nfunc F() {}'),"
              " ('a.rs', 'fn f() {}'), ('A.java', 'class A {}'), ('a.c', 'int f() { return 0; }'),"
              " ('a.cpp', 'class A {};'), ('a.sql', 'create table t (a int);'), ('a.js', 'function f() {}')]:\n"
              "    assert parse.parse(p, t).definitions, p\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr


def test_parse_reads_imports_as_module_keys():
    p = parse.parse("pkg/sub/mod.py", "from . import a\nfrom ..b import c as d\nimport x.y as z\n")
    assert {(r.name, r.qualifier, r.alias) for r in p.references} == {
        ("pkg/sub", "a", "a"), ("pkg/b", "c", "d"), ("x/y", None, "z")}
    assert parse.parse("src/app.ts", "import { h as k } from '../lib/h';").references[0].name == "lib/h"
    # A call on an expression is a method call, not a call of the function of that name.
    [call] = parse.parse("a.py", "def f(v):\n    return str(v).encode('ascii')\n").references[1:]
    assert (call.name, call.qualifier) == ("encode", "()")


@one_server_only("the code tables are analyzed on one server only (scsql._code_analyze_for); on Citus the "
                 "coordinator's tables hold no rows and each worker keeps its shards' statistics")
def test_a_large_index_resolves_on_fresh_statistics(scsql_db, tmp_path):
    """Resolution joins references with definitions: planned on the statistics
    of empty tables it takes minutes on a real tree. A large pending set (a
    first index) has the code tables analyzed first; one edit does not."""
    root = (tmp_path / "big").resolve()
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "callees.py").write_text("".join(f"def f{i}():\n    return {i}\n\n\n" for i in range(30)))
    (root / "pkg" / "callers.py").write_text("from pkg.callees import *\n\n\n" + "".join(
        f"def g{j}():\n" + "".join(f"    f{i}()\n" for i in range(30)) + "\n\n" for j in range(40)))
    project = scsql_db.project()
    roles.set_project_root(scsql_db.admin, project, str(root))
    agent = scsql_db.agent("big", project)

    def known() -> float:  # the references the statistics know
        with scsql_db.connect() as conn:
            return conn.execute("select reltuples from pg_class where oid = 'scsql.code_references'::regclass"
                                ).fetchone()["reltuples"]

    assert known() < 1000
    report = indexer.index_tree(agent, root, progress=False)
    assert report["symbols"]["resolved"] >= 1200
    assert known() >= 1200
    with agent.transaction() as conn:
        assert conn.execute("select count(*) as n from scsql.code_references where kind = 'call' "
                            "and target_def_id is not null").fetchone()["n"] == 1200


def _graph(scsql_db, tmp_path, files: dict[str, str], name: str):
    root = (tmp_path / name).resolve()
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    project = scsql_db.project()
    roles.set_project_root(scsql_db.admin, project, str(root))
    agent = scsql_db.agent(name, project)
    assert indexer.index_tree(agent, root, progress=False)["failed"] == []
    return agent, root


def _refs(conn, path: str) -> dict[tuple, dict]:
    return {(r["name"], r["qualifier"], r["owner"]): r for r in conn.execute("""
        select r.ref_id, r.name, r.qualifier, d.qualname as owner, r.lines, r.resolution, r.target_def_id
        from scsql.code_references r join scsql.code_files f using (project_id, file_id)
        left join scsql.code_definitions d on d.project_id = r.project_id and d.def_id = r.from_def_id
        where f.path = %s and r.kind = 'call'""", (path,)).fetchall()}


def _store(conn, root, rel: str, text: str) -> None:
    import hashlib

    from scsql.code.index import store

    (root / rel).write_text(text)
    store(conn, rel, text, hashlib.sha256(text.encode()).hexdigest())


def test_an_edit_keeps_the_resolved_references_it_did_not_change(scsql_db, tmp_path):
    """Re-indexing an edited file costs what the edit changed: a reference
    found again keeps its row and resolution (its lines follow the text), so
    only the new ones wait for resolution; when the file's imports change,
    its calls are resolved again, through the new imports."""
    agent, root = _graph(scsql_db, tmp_path, {
        "a.py": "def alpha():\n    return 1\n",
        "b.py": "def alpha():\n    return 2\n",
        "main.py": "from a import alpha\n\n\ndef run():\n    return alpha()\n"}, "keeps")
    # Read, stored and read again in transactions of their own: on Citus the
    # store writes the project's shards as the owner, after which the agent's
    # own reads of them in that transaction are refused.
    with agent.transaction() as conn:
        before = _refs(conn, "main.py")
    assert before[("alpha", None, "run")]["resolution"] == "import"
    with agent.transaction() as conn:
        _store(conn, root, "main.py", "# moved down\nfrom a import alpha\n\n\ndef run():\n    return alpha() + beta()\n")
    with agent.transaction() as conn:
        after = _refs(conn, "main.py")
    kept = after[("alpha", None, "run")]
    assert (kept["ref_id"], kept["resolution"]) == (before[("alpha", None, "run")]["ref_id"], "import")
    assert kept["lines"] == [6]
    assert after[("beta", None, "run")]["resolution"] == "pending"  # only the new call waits
    with agent.transaction() as conn:
        _store(conn, root, "main.py", "from b import alpha\n\n\ndef run():\n    return alpha()\n")
    with agent.transaction() as conn:
        assert _refs(conn, "main.py")[("alpha", None, "run")]["resolution"] == "pending"
    with agent.transaction() as conn:
        conn.execute("select scsql.resolve_code()")
    with agent.transaction() as conn:
        target = conn.execute("select f.path from scsql.code_definitions d join scsql.code_files f "
                              "using (project_id, file_id) where d.def_id = %s",
                              (_refs(conn, "main.py")[("alpha", None, "run")]["target_def_id"],)).fetchone()
    assert target["path"] == "b.py"


def test_a_definition_that_moves_is_found_again_by_its_callers(scsql_db, tmp_path):
    """A method that moves to another class keeps its name's count but not its
    definition: the references elsewhere that resolved to it resolve again,
    never to a definition that is gone."""
    agent, root = _graph(scsql_db, tmp_path, {
        "jobs.py": "class Old:\n    def run_nightly(self):\n        return 1\n",
        "main.py": "def go(x):\n    return x.run_nightly()\n"}, "moves")
    with agent.transaction() as conn:
        assert _refs(conn, "main.py")[("run_nightly", "x", "go")]["resolution"] == "unique"
    (root / "jobs.py").write_text("class New:\n    def run_nightly(self):\n        return 1\n")
    indexer.index_tree(agent, root, progress=False)
    with agent.transaction() as conn:
        ref = _refs(conn, "main.py")[("run_nightly", "x", "go")]
        target = conn.execute("select qualname from scsql.code_definitions where def_id = %s",
                              (ref["target_def_id"],)).fetchone()
    assert ref["resolution"] == "unique" and target == {"qualname": "New.run_nightly"}


@one_server_only("the code tables are analyzed on one server only (scsql._code_analyze_for); on Citus the "
                 "coordinator's tables hold no rows and each worker keeps its shards' statistics")
def test_a_growing_graph_is_written_on_fresh_statistics(scsql_db, tmp_path):
    """The writes of a first index are planned on the graph as it grows (the
    delete that replaces a file's references and the foreign-key checks
    otherwise read the whole project per row): once a table has changed by
    more rows than its statistics know, the code tables are analyzed, before
    any resolution runs."""
    import hashlib
    import time

    from scsql.code.index import store

    project = scsql_db.project()
    roles.set_project_root(scsql_db.admin, project, str(tmp_path))
    agent = scsql_db.agent("grows", project)
    for i in range(24):
        text = "".join(f"def f{i}_{j}():\n    return g{j}() + h{j}()\n\n\n" for j in range(40))
        with agent.transaction() as conn:
            store(conn, f"m{i}.py", text, hashlib.sha256(text.encode()).hexdigest())
        time.sleep(0.1)  # a backend reports what it changed at most once a second
    with scsql_db.connect() as conn:
        known = conn.execute("select reltuples from pg_class where oid = 'scsql.code_references'::regclass"
                             ).fetchone()["reltuples"]
        pending = conn.execute("select count(*) as n from scsql.code_references where resolution = 'pending'"
                               ).fetchone()["n"]
    assert pending == 24 * 80 and known >= 500, known


def test_what_the_parser_found_is_stored_redacted_string_by_string(scsql_db, tmp_path):
    """A default argument, a name or an import may hold a secret: each string
    of a definition or reference is stored redacted, as every text is; the
    words that only look like secrets (key, token, pass) are left alone."""
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    agent, _root = _graph(scsql_db, tmp_path, {
        "conn.py": f'def connect(user, password="Tr0ub4dor-and-3-more"):\n    return user\n\n\n'
                   f'def {token}():\n    return 1\n\n\n'
                   f'def get_key(self, key, token=None, passes=2):\n    return {token}() + get_key(1, 2)\n',
        "uses.py": f"from conn import {token} as fresh\n"}, "redacts")
    with agent.transaction() as conn:
        stored = conn.execute("""
            select string_agg(concat_ws(' ', d.key, d.name, d.qualname, d.signature), E'\\n') as defs
            from scsql.code_definitions d""").fetchone()["defs"]
        refs = conn.execute("select string_agg(concat_ws(' ', name, qualifier, alias), E'\\n') as r "
                            "from scsql.code_references").fetchone()["r"]
    assert "Tr0ub4dor" not in stored and token not in stored and token not in refs
    assert 'password="[REDACTED' in stored or "password=[REDACTED" in stored, stored
    assert "[REDACTED:github_token]" in stored and "[REDACTED:github_token]" in refs
    assert "def get_key(self, key, token=None, passes=2)" in stored


_SECRET = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
_DEF = {"key": "f", "parent": None, "kind": "function", "name": "f", "qualname": "f", "signature": "def f()",
        "line_start": 1, "line_end": 2}
_REF = {"kind": "call", "name": "g", "qualifier": None, "alias": None, "from": "f", "lines": [2], "n": 1}


@pytest.mark.parametrize("where", ["def.name", "def.qualname", "def.signature", "ref.name", "ref.qualifier",
                                   "ref.alias", "def.key+ref.from", "def.key+def.parent"])
def test_each_text_index_code_stores_is_judged_on_its_own(scsql_db, tmp_path, where):
    """A secret in any one text of a definition or a reference (the rest
    clean) is found: nothing of it is stored. A key is looked up by the
    references in its definition (from) and the definitions in it (parent):
    redacted alike, they still find it."""
    agent, _root = _graph(scsql_db, tmp_path, {"a.py": "x = 1\n"}, "judged")
    secret = _SECRET
    defs = [dict(_DEF), dict(_DEF, key="f.h", name="h", qualname="f.h", parent="f", signature="def h()")]
    refs = [dict(_REF)]
    for part in where.split("+"):
        kind, field = part.split(".")
        if field in ("key", "parent", "from"):
            defs[0]["key"] = refs[0]["from"] = defs[1]["parent"] = secret
        else:
            (defs if kind == "def" else refs)[0][field] = secret
    with agent.transaction() as conn:
        conn.execute("select * from scsql.index_code('judged.py', %s, 'python', 'judged', 'parsed', '{}', %s, %s)",
                     ("0" * 64, Jsonb(defs), Jsonb(refs)))
    with agent.transaction() as conn:  # read after the commit (on Citus, the owner wrote the shards)
        stored = conn.execute("""
            select d.key, d.name, d.qualname, d.signature, p.key as parent, r.name as ref, r.qualifier, r.alias,
                   r.from_def_id = d.def_id as placed
            from scsql.code_files f join scsql.code_definitions d using (project_id, file_id)
            left join scsql.code_definitions p on p.project_id = d.project_id and p.def_id = d.parent_id
            left join scsql.code_references r on r.project_id = f.project_id and r.file_id = f.file_id
            where f.path = 'judged.py' order by d.line_start, d.key""").fetchall()
    assert len(stored) == 2 and _SECRET not in str(stored) and "[REDACTED" in str(stored), stored
    outer, inner = sorted(stored, key=lambda r: r["parent"] is not None)
    assert outer["placed"] and inner["parent"] == outer["key"], stored


def test_a_call_resolves_by_name_only_within_its_language_family(scsql_db, tmp_path):
    """Resolution by name looks at the caller's language family only: a
    Python call of a name only Go defines is unresolved, while C++ calls C
    and TypeScript calls JavaScript."""
    agent, _root = _graph(scsql_db, tmp_path, {
        "tool.py": "def run(x):\n    return shared_helper(x)\n",
        "lib.go": "package lib\n\nfunc shared_helper(x int) int { return x }\n",
        "core.c": "int c_helper(int x) { return x; }\n",
        "app.cpp": "int use(int x) { return c_helper(x); }\n",
        "util.js": "function jsHelper(x) { return x; }\n",
        "main.ts": "export function go(x: number) { return jsHelper(x); }\n"}, "families")
    with agent.transaction() as conn:
        got = {r["name"]: (r["resolution"], r["path"]) for r in conn.execute("""
            select r.name, r.resolution, f.path from scsql.code_references r
            left join scsql.code_files f on f.project_id = r.project_id and f.file_id = r.target_file_id
            where r.kind = 'call'""").fetchall()}
    assert got["shared_helper"] == ("unresolved", None)
    assert got["c_helper"] == ("unique", "core.c") and got["jsHelper"] == ("unique", "util.js")


@pytest.mark.parametrize("pooled", [True, False], ids=["two-connections", "one-connection"])
def test_an_edit_is_stored_whole_or_not_at_all(indexed, pooled):
    """An edit's chunks and symbols are stored together: on two connections
    at once for an agent with a pool (the hook server's), in one transaction
    for an agent of one connection. An edit the database refuses (a file
    now empty to it: zero-width characters and blanks, which the client
    reads as text) leaves both as they were; the next edit stores both."""
    from scsql.core.db import Agent, Database
    from scsql.memory.fresh import reindex

    agent, root, _ = indexed
    if not pooled:
        agent = Agent(Database(agent.db.conninfo, max_size=1).open(), agent.name)
    path = root / "pkg" / "wrap.py"
    before = path.read_text()
    chunks = rows(agent, "select c.content from scsql.kb_chunks c join scsql.kb_sources s using (project_id, source_id) "
                         "where s.path = 'pkg/wrap.py' order by c.seq")
    path.write_text("\u200b\n\n  \u200b\n")
    done = reindex(agent, [str(path)])
    assert done.indexed == [] and [s["path"] for s in done.skipped] == ["pkg/wrap.py"]
    assert "SC201" in done.skipped[0]["reason"]
    assert [r["name"] for r in rows(agent, "select d.name from scsql.code_definitions d join scsql.code_files f "
                                           "using (project_id, file_id) where f.path = 'pkg/wrap.py'")] == ["wrap"]
    assert rows(agent, "select c.content from scsql.kb_chunks c join scsql.kb_sources s using (project_id, source_id) "
                       "where s.path = 'pkg/wrap.py' order by c.seq") == chunks
    path.write_text(before + "\n\ndef stored_edit():\n    return wrap(1)\n")
    done = reindex(agent, [str(path)])
    assert done.indexed == ["pkg/wrap.py"] and done.skipped == []
    assert [r["name"] for r in rows(agent, "select d.name from scsql.code_definitions d join scsql.code_files f "
                                           "using (project_id, file_id) where f.path = 'pkg/wrap.py' order by 1")] == [
        "stored_edit", "wrap"]
    hits = Api(agent).call("search", query="stored_edit", mode="bm25", k=3)
    assert hits and hits[0]["source_path"] == "pkg/wrap.py" and "def stored_edit" in hits[0]["content"]
    calls = rows(agent, "select r.resolution, t.name from scsql.code_references r join scsql.code_definitions f "
                        "on f.project_id = r.project_id and f.def_id = r.from_def_id left join scsql.code_definitions t "
                        "on t.project_id = r.project_id and t.def_id = r.target_def_id "
                        "where f.name = 'stored_edit' and r.kind = 'call'")
    assert calls == [{"resolution": "local", "name": "wrap"}]


def test_an_edit_on_two_connections_never_waits_on_itself(indexed, scsql_db):
    """A transaction elsewhere holds the graph's lock and then asks for the
    knowledge base's (a deleted file: forget_code, then forget_source) while
    an edit is stored on two connections. The edit's text commits before
    this process waits for its symbols, so all three finish. (Had the text
    waited, it would hold the knowledge base's lock for the symbols, which
    wait for the graph's lock: a circle the server cannot see, ended here by
    the lock timeout.) The race is shown: the edit's symbols are seen
    waiting for the graph's lock."""
    import threading

    from scsql.core.db import Agent, Database
    from scsql.memory.fresh import reindex

    agent, root, _ = indexed
    other = Agent(Database(agent.db.conninfo, max_size=1).open(), agent.name)
    path = root / "pkg" / "wrap.py"
    path.write_text(path.read_text() + "\n\ndef raced():\n    return wrap(2)\n")
    out: dict = {}
    edit = threading.Thread(target=lambda: out.update(done=reindex(agent, [str(path)])))

    def symbols_waiting():  # on Citus the lock is the project's code_state row, on a worker
        return statement_lock_waiters(scsql_db, "%index_code%") > 0

    with other.transaction() as held:
        held.execute("set local lock_timeout = '10s'")
        held.execute("select scsql.forget_code(%s)", (["notes/readme.txt"],))  # the graph's lock, held
        edit.start()
        wait_for(symbols_waiting, timeout=20, message="the edit's symbols never waited for the graph's lock")
        held.execute("select scsql.forget_source('notes/readme.txt')")  # now the knowledge base's
    edit.join(30)
    assert not edit.is_alive() and out["done"].indexed == ["pkg/wrap.py"] and out["done"].skipped == []
    assert rows(agent, "select 1 from scsql.code_definitions where name = 'raced'") != []
    assert rows(agent, "select 1 from scsql.kb_sources where path = 'notes/readme.txt'") == []
