"""Exclusive file ownership: paths normalized relative to the project, a
directory covering what is below it, overlaps refused with the paths named,
race-free (two overlapping enqueues at once: exactly one wins), and files
freed when their task finishes."""

from __future__ import annotations

import time

import psycopg
import pytest

from scsql.core import roles
from scsql.core.errors import ScsqlError

from ..helpers import (admin_rows, claim, enqueue, enqueue_against_uncommitted, enqueues_waiting_on_a_lock, login,
                      one, race_behind_lock)


@pytest.fixture
def orch(scsql_db):
    project = f"files{time.monotonic_ns() % 10**9}"
    roles.create_project(scsql_db.admin, project, "/work/repo")
    return scsql_db.agent("orch", project, "orchestrator")


def files_of(agent, tid):
    return one(agent, "select exclusive_files from scsql.tasks where task_id = %s", tid)["exclusive_files"]


@pytest.mark.parametrize(("given", "held"), [
    (["src/./a.py"], ["src/a.py"]),
    (["src//lib/../b.py"], ["src/b.py"]),
    (["docs/"], ["docs"]),
    (["/work/repo/src/a.py"], ["src/a.py"]),
    (["/work/repo"], ["."]),
    (["./"], ["."]),
    (["b.py", "a.py", "b.py"], ["a.py", "b.py"]),
    (["src/a.py", "src", "src/sub/c.py", "srcx"], ["src", "srcx"]),
    (["naïve/ü.py"], ["naïve/ü.py"]),
])
def test_paths_are_normalized_relative_to_the_project(orch, given, held):
    tid = enqueue(orch, files=given)
    assert files_of(orch, tid) == held


@pytest.mark.parametrize(("path", "code"), [
    ("../secret", "SC321"),
    ("src/../../x", "SC321"),
    ("/etc/passwd", "SC321"),
    ("/work/repository/x", "SC321"),
    ("/work/repo/../other", "SC321"),
    ("", "SC320"),
    ("a\\b", "SC320"),
    ("a\nb", "SC320"),
    ("x" * 1025, "SC320"),
])
def test_paths_that_leave_the_project_or_are_malformed_are_refused(orch, path, code):
    with pytest.raises(ScsqlError) as err:
        enqueue(orch, files=["ok.py", path])
    assert err.value.code == code
    assert one(orch, "select count(*) as n from scsql.tasks")["n"] == 0


def test_absolute_paths_need_a_project_root(scsql_db):
    orch = scsql_db.agent("orch", scsql_db.project(), "orchestrator")
    with pytest.raises(ScsqlError) as err:
        enqueue(orch, files=["/src/a.py"])
    assert err.value.code == "SC321" and "no root path" in err.value.message
    assert files_of(orch, enqueue(orch, files=["src/a.py"])) == ["src/a.py"]


@pytest.mark.parametrize(("held", "wanted", "overlaps"), [
    ("src/a.py", "src/a.py", True),
    ("src", "src/a.py", True),          # a directory covers the files below it
    ("src/a.py", "src", True),          # and cannot be taken while one of them is held
    ("src/deep/er/x.py", "src/deep", True),
    (".", "anything/at/all", True),     # "." is the whole project
    ("src/a.py", "src/b.py", False),
    ("src", "src.py", False),           # neighbours by name are not below
    ("src", "src2/a.py", False),
    ("src/a", "src/a.py", False),
    ("a-b", "a/b", False),
])
def test_overlap_means_equal_or_below(orch, held, wanted, overlaps):
    first = enqueue(orch, files=[held])
    if overlaps:
        with pytest.raises(ScsqlError) as err:
            enqueue(orch, files=["free.txt", wanted])
        assert err.value.code == "SC322"
        wanted_norm = wanted.rstrip("/")
        assert f"{wanted_norm} (held as {held} by task {first})" in err.value.message
    else:
        enqueue(orch, files=[wanted])


def test_other_projects_and_other_tasks_of_other_files_are_independent(scsql_db, orch):
    other = scsql_db.agent("orch2", scsql_db.project(), "orchestrator")
    enqueue(orch, files=["."])
    enqueue(other, files=["."])  # another project's tree
    with pytest.raises(ScsqlError):
        enqueue(orch, role="qa", files=["x"])  # any role of the same project


def test_completing_frees_the_files(scsql_db, orch):
    dev = scsql_db.agent("dev", orch.whoami()["project"])
    tid = enqueue(orch, files=["src"])
    [t] = claim(dev)
    with pytest.raises(ScsqlError):
        enqueue(orch, files=["src/a.py"])
    one(dev, "select * from scsql.complete_task(%s, %s)", tid, t["lease_token"])
    enqueue(orch, files=["src/a.py"])


@pytest.mark.parametrize("first_commits", [True, False])
def test_overlapping_enqueue_waits_for_the_uncommitted_one(scsql_db, orch, first_commits):
    """B's enqueue meets A's uncommitted spans and waits for A's outcome:
    refused if A commits, accepted if A rolls back. No window between a
    check and an insert."""
    db = scsql_db
    second = db.agent("orch_b", orch.whoami()["project"], "orchestrator")
    a_task, outcome = enqueue_against_uncommitted(db, orch, second, "src/auth/login.py", "src/auth", first_commits)
    if first_commits:
        assert outcome["err"].code == "SC322"
        assert f"src/auth (held as src/auth/login.py by task {a_task})" in outcome["err"].message
    else:
        assert "err" not in outcome and outcome["task"]


def test_many_overlapping_enqueues_at_once_exactly_one_wins(scsql_db, orch):
    db = scsql_db
    project = orch.whoami()["project"]
    names = [orch.name] + [roles.create_agent(db.admin, db.keystore, f"{orch.name}_{i}", project,
                                              "orchestrator")["role_name"][len("scsql_agent_"):]
                           for i in range(3)]
    n = 20
    conns = [login(db, names[i % len(names)]) for i in range(n)]
    results: list[object] = [None] * n

    def enqueue_at_once(i: int) -> None:
        # Every set overlaps every other one through docs/ (a directory for
        # half of them, a file below it for the other half).
        files = ["docs" if i % 2 else "docs/readme.md", f"src/mod{i}.py"]
        try:
            results[i] = conns[i].execute("select task_id from scsql.enqueue_task('developer', "
                                          "p_exclusive_files => %s::text[])", (files,)).fetchone()["task_id"]
        except psycopg.Error as exc:
            results[i] = exc

    waiting = race_behind_lock(db, "scsql.task_files", [lambda i=i: enqueue_at_once(i) for i in range(n)],
                               waiting=lambda: enqueues_waiting_on_a_lock(db))
    assert waiting == n  # all twenty were inside enqueue_task together
    for c in conns:
        c.close()
    winners = [r for r in results if isinstance(r, int)]
    losers = [r for r in results if isinstance(r, psycopg.Error)]
    assert len(winners) == 1 and len(losers) == n - 1
    assert {e.sqlstate for e in losers} == {"SC322"}
    assert all("docs" in e.diag.message_primary for e in losers)
    held = admin_rows(db, "select task_id, path from scsql.task_files order by path")
    assert {h["task_id"] for h in held} == {winners[0]}
    assert admin_rows(db, "select count(*) as n from scsql.tasks")[0]["n"] == 1  # losers left nothing
