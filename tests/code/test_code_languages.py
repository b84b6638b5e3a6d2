"""References resolved to the right definition in Go, Java, C, C++ and SQL
(calls, imports and includes, inheritance), as test_code.py shows them for
Python, TypeScript and Rust; and the graph walked from and to the nodes of
work: an agent (its edits), a task (the files it holds), a decision and a
fact (the files and definitions they name)."""

from __future__ import annotations

import textwrap

import pytest

from scsql.api import Api
from scsql.core import roles
from scsql.memory import indexer

from ..helpers import enqueue, rows

# Names differ between languages, so that each reference has one right answer in the project.
FILES = {
    # Go: a module's packages under the root (import "example.com/app/util" is the package util/).
    "store/store.go": """\
        package store

        import "example.com/app/util"

        type Base struct{}

        type Store struct{ Base }

        func (s *Store) Put(k string) { util.Check(k); s.save(k) }

        func (s *Store) save(k string) {}

        func New() *Store { return &Store{} }
        """,
    "util/util.go": 'package util\n\nfunc Check(k string) bool { return k != "" }\n',
    "cmd/app/main.go": """\
        package main

        import "example.com/app/store"

        func main() { s := store.New(); s.Put("a") }
        """,
    # Java: packages as directories, an import, a base class and an interface.
    "java/com/acme/Animal.java": "package com.acme;\npublic class Animal { public void close() {} }\n",
    "java/com/acme/Pet.java": "package com.acme;\npublic interface Pet { int feed(String k); }\n",
    "java/com/acme/Dog.java": """\
        package com.acme;
        import com.acme.util.Names;
        public class Dog extends Animal implements Pet {
          public int feed(String k) { Names.valid(k); return bark(k); }
          int bark(String k) { return 1; }
        }
        """,
    "java/com/acme/util/Names.java": "package com.acme.util;\n"
                                     "public class Names { public static boolean valid(String k) { return true; } }\n",
    # C: a header, its implementation, a caller including the header.
    "c/util.h": "int check(int k);\n",
    "c/util.c": '#include "util.h"\nint check(int k) { return k > 0; }\n',
    "c/main.c": '#include "util.h"\nstatic int twice(int k) { return 2 * k; }\n'
                "int run_c(void) { return check(twice(1)); }\n",
    # C++: a namespace, a base class in a header, a method calling its sibling.
    "cpp/shape.hpp": "namespace geo { class Shape { public: virtual double area() { return 0; } }; }\n",
    "cpp/circle.cpp": """\
        #include "shape.hpp"
        namespace geo {
        class Circle : public Shape {
         public:
          double area() { return scale(2.0); }
          double scale(double r) { return r; }
        };
        }
        double total_area() { geo::Circle c; return c.area(); }
        """,
    # SQL: functions calling a function of the same file and of another file, a view using one.
    "db/schema.sql": """\
        create table accounts (id int);
        create function balance(p int) returns int language sql as $$ select p $$;
        create function total_balance() returns int language sql as $$ select balance(1) $$;
        create view report as select balance(id) from accounts;
        """,
    "db/monthly.sql": "create function monthly() returns int language sql as $$ select balance(2) $$;\n",
}


@pytest.fixture
def indexed(scsql_db, tmp_path):
    root = (tmp_path / "langs").resolve()
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    project = scsql_db.project()
    roles.set_project_root(scsql_db.admin, project, str(root))
    agent = scsql_db.agent("langs", project)
    report = indexer.index_tree(agent, root, progress=False)
    assert report["failed"] == [] and report["symbols"]["partial"] == []
    return agent, root, project


def references(agent) -> dict[tuple[str, str, str], dict]:
    """(kind, where it is written: path#caller or path, name) -> resolution, target (path#qualname or path), candidates."""
    # The candidates' names are read apart: Citus refuses a subquery correlated with a row of a sharded table.
    names = {r["def_id"]: r["name"] for r in rows(agent, """
        select d.def_id, f.path || '#' || d.qualname as name
        from scsql.code_definitions d join scsql.code_files f using (project_id, file_id)""")}
    refs = rows(agent, """
        select r.kind, f.path || coalesce('#' || fd.qualname, '') as site, r.name, r.resolution,
               coalesce(tf.path || '#' || td.qualname, xf.path) as target, coalesce(r.candidates, '{}') as candidates
        from scsql.code_references r join scsql.code_files f using (project_id, file_id)
        left join scsql.code_definitions fd on fd.project_id = r.project_id and fd.def_id = r.from_def_id
        left join scsql.code_definitions td on td.project_id = r.project_id and td.def_id = r.target_def_id
        left join scsql.code_files tf on tf.project_id = td.project_id and tf.file_id = td.file_id
        left join scsql.code_files xf on xf.project_id = r.project_id and xf.file_id = r.target_file_id
                                     and r.kind = 'import'""")
    return {(r["kind"], r["site"], r["name"]): dict(r, candidates=sorted(names[i] for i in r["candidates"] if i in names))
            for r in refs}


def target(refs, kind: str, site: str, name: str) -> str:
    r = refs[(kind, site, name)]
    assert r["resolution"] not in ("ambiguous", "unresolved", "external", "pending"), r
    return r["target"]


def test_go_calls_imports_and_embedding_resolve_to_their_definitions(indexed):
    refs = references(indexed[0])
    assert target(refs, "import", "store/store.go", "example.com/app/util") == "util/util.go"
    assert target(refs, "import", "cmd/app/main.go", "example.com/app/store") == "store/store.go"
    assert target(refs, "call", "store/store.go#Store.Put", "Check") == "util/util.go#Check"      # util.Check()
    assert target(refs, "call", "store/store.go#Store.Put", "save") == "store/store.go#Store.save"  # s.save()
    assert target(refs, "call", "cmd/app/main.go#main", "New") == "store/store.go#New"            # store.New()
    assert target(refs, "call", "cmd/app/main.go#main", "Put") == "store/store.go#Store.Put"
    assert target(refs, "inherit", "store/store.go#Store", "Base") == "store/store.go#Base"       # embedding


def test_java_calls_imports_and_inheritance_resolve_to_their_definitions(indexed):
    refs = references(indexed[0])
    assert target(refs, "import", "java/com/acme/Dog.java", "com/acme/util/Names") == "java/com/acme/util/Names.java"
    assert target(refs, "inherit", "java/com/acme/Dog.java#Dog", "Animal") == "java/com/acme/Animal.java#Animal"
    assert target(refs, "inherit", "java/com/acme/Dog.java#Dog", "Pet") == "java/com/acme/Pet.java#Pet"
    assert target(refs, "call", "java/com/acme/Dog.java#Dog.feed", "valid") == "java/com/acme/util/Names.java#Names.valid"
    assert target(refs, "call", "java/com/acme/Dog.java#Dog.feed", "bark") == "java/com/acme/Dog.java#Dog.bark"
    assert refs[("call", "java/com/acme/Dog.java#Dog.feed", "bark")]["resolution"] == "local"


def test_c_calls_and_includes_resolve_to_their_definitions(indexed):
    refs = references(indexed[0])
    assert target(refs, "import", "c/main.c", "util.h") == "c/util.h"
    assert target(refs, "import", "c/util.c", "util.h") == "c/util.h"
    assert target(refs, "call", "c/main.c#run_c", "check") == "c/util.c#check"  # declared in the header, defined here
    assert target(refs, "call", "c/main.c#run_c", "twice") == "c/main.c#twice"
    assert refs[("call", "c/main.c#run_c", "twice")]["resolution"] == "local"


def test_cpp_calls_includes_and_bases_resolve_to_their_definitions(indexed):
    refs = references(indexed[0])
    assert target(refs, "import", "cpp/circle.cpp", "shape.hpp") == "cpp/shape.hpp"
    assert target(refs, "inherit", "cpp/circle.cpp#geo.Circle", "Shape") == "cpp/shape.hpp#geo.Shape"
    assert target(refs, "call", "cpp/circle.cpp#geo.Circle.area", "scale") == "cpp/circle.cpp#geo.Circle.scale"
    # c.area(): the method of some class, and two classes have one: both kept, best effort said.
    area = refs[("call", "cpp/circle.cpp#total_area", "area")]
    assert area["resolution"] == "ambiguous" and area["target"] is None
    assert area["candidates"] == ["cpp/circle.cpp#geo.Circle.area", "cpp/shape.hpp#geo.Shape.area"]


def test_sql_calls_resolve_to_their_definitions(indexed):
    refs = references(indexed[0])
    assert target(refs, "call", "db/schema.sql#total_balance", "balance") == "db/schema.sql#balance"
    assert target(refs, "call", "db/schema.sql#report", "balance") == "db/schema.sql#balance"  # a view using it
    assert target(refs, "call", "db/monthly.sql#monthly", "balance") == "db/schema.sql#balance"  # another file
    who = Api(indexed[0]).call("graph_neighbors", node="db/schema.sql#balance", direction="in", kinds=["calls"])
    assert {r["node"] for r in who} == {"db/schema.sql#total_balance", "db/schema.sql#report", "db/monthly.sql#monthly"}


def test_the_graph_walks_to_and_from_agents_tasks_decisions_and_facts(indexed, scsql_db):
    agent, root, project = indexed
    api = Api(agent)
    captured = api.call("capture_tool_call", tool="Edit", files=[str(root / "util" / "util.go")])
    call = (captured[0] if isinstance(captured, list) else captured)["tool_call_id"]
    orch = scsql_db.agent("orch", project, "orchestrator")
    task = enqueue(orch, "developer", ["java/com/acme"])
    decided = api.call("decide", title="Keep key checks in util/util.go",
                       rationale="Names.valid and store.Store.Put call them")
    decision = (decided[0] if isinstance(decided, list) else decided)["decision_id"]
    api.call("remember", key="sql.reports", value="db/monthly.sql reads the balance of db/schema.sql")

    edited = api.call("graph_neighbors", node=f"agent:{agent.name}", direction="out", kinds=["edited"])
    assert [(r["node"], r["cite"]) for r in edited] == [("util/util.go", f"tool_call:{call}")]
    editors = api.call("graph_neighbors", node="util/util.go", direction="in", kinds=["edited"])
    assert [r["node"] for r in editors] == [f"agent:{agent.name}"]

    owned = api.call("graph_neighbors", node=f"task:{task}", direction="out", kinds=["owns"])
    assert {r["node"] for r in owned} == {f for f in FILES if f.startswith("java/com/acme/")}
    assert all(r["cite"] == f"task:{task}" for r in owned)
    assert [r["node"] for r in api.call("graph_neighbors", node="java/com/acme/Dog.java", direction="in",
                                         kinds=["owns"])] == [f"task:{task}"]

    said = api.call("graph_neighbors", node=f"decision:{decision}", direction="out", kinds=["mentions"])
    assert {r["node"] for r in said} == {"util/util.go", "java/com/acme/util/Names.java#Names.valid"}
    assert all(r["cite"] == f"decision:{decision}" for r in said)
    fact = api.call("graph_neighbors", node="memory:sql.reports", direction="out", kinds=["mentions"])
    assert {r["node"] for r in fact} == {"db/monthly.sql", "db/schema.sql"}
    assert {r["node"] for r in api.call("graph_neighbors", node="db/schema.sql", direction="in",
                                         kinds=["mentions"])} == {"memory:sql.reports"}

    # From a fact to the code it names and on to what that calls; from the agent to its edit's callers.
    path = api.call("graph_path", **{"from": "memory:sql.reports", "to": "db/schema.sql#balance"})
    assert [r["node"] for r in path] == ["memory:sql.reports", "db/schema.sql", "db/schema.sql#balance"]
    assert [r["edge"] for r in path[1:]] == ["mentions", "defines"]
    path = api.call("graph_path", **{"from": f"agent:{agent.name}", "to": "store/store.go#Store.Put", "max_depth": 4})
    assert [r["node"] for r in path] == [f"agent:{agent.name}", "util/util.go", "util/util.go#Check",
                                         "store/store.go#Store.Put"]
    assert [r["edge"] for r in path[1:]] == ["edited", "defines", "calls"] and path[-1]["direction"] == "in"
