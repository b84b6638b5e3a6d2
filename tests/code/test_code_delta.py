"""An edit's symbols sent as a change of those stored (scsql.index_code_delta):
the hook server keeps what it last stored or read of a file, sends only the
definitions and references that changed, and the database applies them only
to exactly the rows that base stored; otherwise nothing is written and the
whole payload is sent. Whatever the path, the graph is the one the whole
payload gives."""

from __future__ import annotations

import hashlib
import textwrap

import pytest
from psycopg.types.json import Jsonb

from scsql.code import parse
from scsql.code.index import delta, known
from scsql.core import roles
from scsql.core.errors import ScsqlError
from scsql.memory import indexer
from scsql.memory.fresh import Fresh, read, reindex

from ..helpers import rows, wait_for

START = textwrap.dedent('''\
    import os
    from json import loads as parse_json


    class Store:
        """Keeps things."""

        def get(self, key):
            return self._load(key) or os.getenv(key)

        def _load(self, key):
            return parse_json(key)


    def helper(x):
        return Store().get(x)


    def main():
        return helper(1) + helper(2)
    ''')

# Each step is an edit of the file before it, as an agent makes them.
STEPS = {
    "a function added at the end": lambda t: t + "\n\ndef added_last():\n    return main()\n",
    "a function added halfway": lambda t: t.replace("def helper(x):", "def halfway(y):\n    return y\n\n\ndef helper(x):"),
    "a call added and one removed": lambda t: t.replace("return helper(1) + helper(2)", "return helper(1) + halfway(3)"),
    "a definition renamed": lambda t: t.replace("def _load(self, key):", "def _read(self, key):").replace(
        "self._load(key)", "self._read(key)"),
    "a definition removed": lambda t: t.replace("def halfway(y):\n    return y\n\n\n", ""),
    "an import changed": lambda t: t.replace("from json import loads as parse_json", "from pickle import loads as parse_json"),
    "a method becomes a class": lambda t: t.replace("    def get(self, key):\n        return self._read(key) or os.getenv(key)\n",
                                                    "    class get:\n        pass\n"),
    "everything moves down": lambda t: "# a header\n# of two lines\n" + t,
}


def _graph(conn) -> dict:
    """The graph of every file, as a project's own ids would not show it: by paths and keys."""
    defs = conn.execute("""
        select f.path, d.key, d.kind, d.name, d.qualname, d.signature, d.line_start, d.line_end, p.key as parent
        from scsql.code_definitions d join scsql.code_files f using (project_id, file_id)
        left join scsql.code_definitions p on p.project_id = d.project_id and p.def_id = d.parent_id
        order by 1, 2""").fetchall()
    refs = conn.execute("""
        select f.path, r.kind, r.name, r.qualifier, r.alias, o.key as from_key, r.lines, r.n, r.resolution,
               tf.path as target_path, t.key as target_key, r.target_module, cardinality(r.candidates) as candidates
        from scsql.code_references r join scsql.code_files f using (project_id, file_id)
        left join scsql.code_definitions o on o.project_id = r.project_id and o.def_id = r.from_def_id
        left join scsql.code_definitions t on t.project_id = r.project_id and t.def_id = r.target_def_id
        left join scsql.code_files tf on tf.project_id = r.project_id and tf.file_id = r.target_file_id
        order by 1, 2, 3, 4, 5, 6""").fetchall()
    files = conn.execute("select path, content_hash, status, error_lines from scsql.code_files order by 1").fetchall()
    return {"definitions": defs, "references": refs, "files": files}


def _project(scsql_db, tmp_path, name: str):
    root = (tmp_path / name).resolve()
    root.mkdir()
    (root / "store.py").write_text(START)
    (root / "other.py").write_text("from store import helper\n\n\ndef use():\n    return helper(0)\n")
    (root / "pickle_like.py").write_text("def loads(x):\n    return x\n")
    project = scsql_db.project()
    roles.set_project_root(scsql_db.admin, project, str(root))
    agent = scsql_db.agent(name, project)
    assert indexer.index_tree(agent, root, progress=False)["failed"] == []
    return agent, root


def test_edits_sent_as_changes_store_the_graph_the_whole_payloads_store(scsql_db, tmp_path):
    """Two projects hold the same files; each edit is made in both. One
    sends it as a change of what it read (its base kept in ``known``), the
    other's base is forgotten before every edit, so it sends the whole
    payload. After every step the two graphs are the same, references'
    resolutions included, and the first has sent each edit as a change."""
    changes, whole = _project(scsql_db, tmp_path, "changes"), _project(scsql_db, tmp_path, "whole")
    assert read(changes[0], [str(changes[1] / "store.py")]) == 1
    text = START
    for step, edit in STEPS.items():
        text = edit(text)
        for (agent, root) in (changes, whole):
            (root / "store.py").write_text(text)
            if agent is whole[0]:
                known.drop((str(root), "store.py"))
            done = reindex(agent, [str(root / "store.py")])
            assert done.indexed == ["store.py"], (step, done)
            assert done.changed == (["store.py"] if agent is changes[0] else []), step
        for agent in (changes[0], whole[0]):
            with agent.transaction() as conn:
                conn.execute("select scsql.resolve_code()")
        # Read after the commit: on Citus resolve_code writes the shards as
        # the owner, and the agent's reads of them in that transaction are refused.
        with changes[0].transaction() as a, whole[0].transaction() as b:
            assert _graph(a) == _graph(b), step


def _delta_args(root, rel: str, old_text: str, new_text: str, **over):
    old, new = (parse.parse(rel, t).payload() for t in (old_text, new_text))
    change = delta(old, new)
    assert change is not None
    args = {"path": rel, "base": hashlib.sha256(old_text.encode()).hexdigest(),
            "hash": hashlib.sha256(new_text.encode()).hexdigest(), "status": new["status"], "errors": new["error_lines"],
            "counts": change["counts"], "defs": Jsonb(change["definitions"]), "gone_defs": change["gone_definitions"],
            "refs": Jsonb(change["references"]), "gone_refs": Jsonb(change["gone_references"])}
    args.update(over)
    return args


CALL = ("select * from scsql.index_code_delta(%(path)s, %(base)s, %(hash)s, %(status)s, %(errors)s, %(counts)s, "
        "%(defs)s, %(gone_defs)s, %(refs)s, %(gone_refs)s)")


@pytest.mark.parametrize("stale", ["another base", "other counts", "a gone reference not stored",
                                   "an added definition already stored", "a reference named twice"])
def test_a_change_that_does_not_fit_what_is_stored_writes_nothing(scsql_db, tmp_path, stale):
    """A change applies only to exactly the rows its base stored: given
    another base, other counts, or rows that are not (or already are) there,
    index_code_delta writes nothing and says it did not apply."""
    agent, root = _project(scsql_db, tmp_path, "stale")
    new_text = STEPS["a call added and one removed"](STEPS["a function added halfway"](START))
    args = _delta_args(root, "store.py", START, new_text)
    if stale == "another base":
        args["base"] = hashlib.sha256(b"something else").hexdigest()
    elif stale == "other counts":
        args["counts"] = [args["counts"][0] + 1, *args["counts"][1:]]
    elif stale == "a gone reference not stored":
        args["gone_refs"] = Jsonb(args["gone_refs"].obj + [{"kind": "call", "name": "never_called", "qualifier": None,
                                                            "alias": None, "from": "main"}])
        args["counts"] = [*args["counts"][:3], args["counts"][3] - 1]
    elif stale == "an added definition already stored":
        args["defs"] = Jsonb(args["defs"].obj + [{"key": "main", "parent": None, "kind": "function", "name": "main",
                                                  "qualname": "main", "signature": "def main():", "line_start": 30,
                                                  "line_end": 31}])
        args["counts"] = [args["counts"][0], args["counts"][1], args["counts"][2] + 1, args["counts"][3]]
    else:
        args["refs"] = Jsonb(args["refs"].obj + args["refs"].obj[:1])
        args["counts"] = [*args["counts"][:3], args["counts"][3] + 1]
    with agent.transaction() as conn:
        before = _graph(conn)
    with agent.transaction() as conn:
        got = conn.execute(CALL, args).fetchone()
    assert got["applied"] is False and got["definitions"] is None
    with agent.transaction() as conn:  # committed: nothing was written
        assert _graph(conn) == before


def test_a_change_applies_to_its_base(scsql_db, tmp_path):
    """The same change, well formed, applies; the file's hash is the new one."""
    agent, root = _project(scsql_db, tmp_path, "fits")
    new_text = STEPS["a function added halfway"](START)
    with agent.transaction() as conn:
        got = conn.execute(CALL, _delta_args(root, "store.py", START, new_text)).fetchone()
    assert got["applied"] is True
    with agent.transaction() as conn:  # read after the commit (on Citus, the owner wrote the shards)
        assert conn.execute("select content_hash from scsql.code_files where path = 'store.py'").fetchone()[
            "content_hash"] == hashlib.sha256(new_text.encode()).hexdigest()
        assert "halfway" in {r["name"] for r in conn.execute("select name from scsql.code_definitions")}


@pytest.mark.parametrize("bad, code", [
    ({"path": "../store.py"}, "SC260"),
    ({"base": "not-a-hash"}, "SC261"),
    ({"counts": [1, 2, 3]}, "SC261"),
    ({"counts": [1, 2, 3, None]}, "SC261"),
    ({"gone_defs": None}, "SC261"),
    ({"gone_refs": Jsonb([{"kind": "jump", "name": "x"}])}, "SC261"),
    ({"gone_refs": Jsonb({"kind": "call"})}, "SC261"),
    ({"defs": Jsonb([{"key": "k", "kind": "function", "name": "f", "qualname": "f", "line_start": 0,
                      "line_end": 1}])}, "SC261"),
])
def test_a_malformed_change_is_refused_with_its_code(scsql_db, tmp_path, bad, code):
    agent, root = _project(scsql_db, tmp_path, "malformed")
    args = _delta_args(root, "store.py", START, STEPS["a function added at the end"](START), **bad)
    with agent.transaction() as conn:
        before = _graph(conn)
    with pytest.raises(ScsqlError) as err, agent.transaction() as conn:
        conn.execute(CALL, args)
    assert err.value.code == code
    with agent.transaction() as conn:
        assert _graph(conn) == before


def test_a_change_holding_a_secret_is_stored_whole_and_redacted(scsql_db, tmp_path):
    """A change whose texts redaction would change is not applied: the whole
    payload is sent, and stored redacted, as index_code stores it."""
    agent, root = _project(scsql_db, tmp_path, "secret")
    assert read(agent, [str(root / "store.py")]) == 1
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    (root / "store.py").write_text(START + f"\n\ndef connect(token='{token}'):\n    return token\n")
    done = reindex(agent, [str(root / "store.py")])
    assert done.indexed == ["store.py"] and done.changed == []
    sig = rows(agent, "select signature from scsql.code_definitions where name = 'connect'")[0]["signature"]
    assert token not in sig and "connect" in sig


def test_a_read_keeps_the_base_of_the_edit_that_follows(scsql_db, tmp_path):
    """The hook server's re-index thread parses a file when the agent reads
    it (PostToolUse of Read), so the edit that follows is sent as a change."""
    agent, root = _project(scsql_db, tmp_path, "reads")
    path = root / "store.py"
    key = (str(root), "store.py")
    known.drop(key)
    fresh = Fresh(lambda: agent, lambda line: None).start()
    fresh.edited([{"hook_event_name": "PostToolUse", "tool_name": "Read", "tool_input": {"file_path": str(path)},
                   "cwd": str(root)}])
    got = wait_for(lambda: known.get(key), 20)
    assert got.sha256 == hashlib.sha256(path.read_bytes()).hexdigest() and got.tree is not None
    path.write_text(STEPS["a function added at the end"](START))
    done = reindex(agent, [str(path)])
    assert done.changed == ["store.py"]
    assert "added_last" in {r["name"] for r in rows(agent, "select name from scsql.code_definitions")}


def test_what_is_known_of_files_stays_within_its_bounds():
    """The bases kept for the next edits are bounded in files and in
    characters of text (their trees take about 30 bytes a character): the
    least recently used go first, a base taken or dropped frees its share,
    and one file larger than the bound is still kept alone."""
    from scsql.code.index import Base, Known

    held = Known(size=3, chars=100)
    for name in "abc":
        held.put(("r", name), Base(name, {}, "x" * 30))
    held.get(("r", "a"))  # used: d evicts b, the least recently used
    held.put(("r", "d"), Base("d", {}, "x" * 5))
    assert [k[1] for k in held._items] == ["c", "a", "d"]
    held.put(("r", "e"), Base("e", {}, "x" * 70))  # four files: c goes; 30 + 5 + 70 > 100: a goes
    assert [k[1] for k in held._items] == ["d", "e"] and held._held == 75
    assert held.take(("r", "e")).sha256 == "e" and held._held == 5
    held.put(("r", "d"), Base("d2", {}, "x" * 10))  # put again: its old share freed
    assert held._held == 10 and held.get(("r", "d")).sha256 == "d2"
    held.put(("r", "big"), Base("big", {}, "x" * 500))
    assert [k[1] for k in held._items] == ["big"] and held._held == 500
    held.drop(("r", "big"))
    assert held._held == 0 and held.get(("r", "big")) is None
