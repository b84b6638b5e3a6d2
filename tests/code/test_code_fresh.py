"""The index stays fresh as agents edit, through the hooks ``scsql install
claude`` wrote: an Edit's new text is found by search as soon as its hook
has been answered and the hook server has indexed it (without the hook
waiting for that), a file changed or deleted by a shell command is picked up
at Stop from ``git status``, and a new session starts with a map of the
code."""

from __future__ import annotations

import subprocess
import time
import uuid

from scsql.api import Api

from ..helpers import rows, wait_for
from ..hooks.test_capture_integrity import _event, _tool, installed  # noqa: F401 - the fixture


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"})


def _found(agent, query: str) -> list[dict]:
    return [h for h in Api(agent).call("search", query=query, mode="bm25", k=5)]


def test_an_edit_is_found_by_search_at_once_and_a_shell_change_at_stop(installed):  # noqa: F811
    repo, agent = installed.repo, installed.agent
    _git(repo, "init", "-q")
    _git(repo, "add", "src/owned.py")
    _git(repo, "commit", "-qm", "start")
    sid = uuid.uuid4().hex
    installed.fire(_event("SessionStart", sid, repo, source="startup"))
    # The agent edits a file with its Edit tool: the hook is answered, the server indexes it.
    target = repo / "src" / "owned.py"
    target.write_text("def quokka_counter(n):\n    return n + 1\n")
    started = time.monotonic()
    installed.fire(_tool(sid, repo, "Edit", {"file_path": str(target), "old_string": "x = 1",
                                             "new_string": "def quokka_counter(n): ..."}))
    answered = time.monotonic() - started
    hits = wait_for(lambda: _found(agent, "quokka_counter"), 20)
    searchable = time.monotonic() - started
    assert hits[0]["source_path"] == "src/owned.py" and "quokka_counter" in hits[0]["defines"]
    assert searchable < 20 and answered < 10, (answered, searchable)
    assert "symbol" in hits[0]["retrievers"] or hits[0]["retrievers"] == ["bm25"]
    assert rows(agent, "select name from scsql.code_definitions")[0]["name"] == "quokka_counter"
    # A shell command writes one file and deletes another: picked up at Stop.
    (repo / "src" / "made.py").write_text("def wombat_maker():\n    return 2\n")
    target.unlink()
    installed.fire(_tool(sid, repo, "Bash", {"command": "sh make.sh"}, {"stdout": ""}))
    installed.fire(_event("Stop", sid, repo, stop_hook_active=False))
    wait_for(lambda: _found(agent, "wombat_maker"), 20)
    wait_for(lambda: not _found(agent, "quokka_counter"), 20)
    assert "src/owned.py" not in {r["path"] for r in rows(agent, "select path from scsql.code_files")}
    assert rows(agent, "select 1 from scsql.code_definitions where name = 'quokka_counter'") == []
    # A new session starts with a map of the code.
    answers = installed.fire(_event("SessionStart", uuid.uuid4().hex, repo, source="startup"))
    context = next(a for a in answers if a)["hookSpecificOutput"]["additionalContext"]
    assert "Map of this project's code" in context and "wombat_maker" in context


def test_an_edit_outside_the_root_is_not_indexed(installed, tmp_path):  # noqa: F811
    repo, agent = installed.repo, installed.agent
    outside = tmp_path / "outside.py"
    outside.write_text("def platypus_outside():\n    pass\n")
    sid = uuid.uuid4().hex
    installed.fire(_tool(sid, repo, "Write", {"file_path": str(outside), "content": "def platypus_outside(): pass"}))
    inside = repo / "src" / "inside.py"
    inside.write_text("def echidna_inside():\n    pass\n")
    installed.fire(_tool(sid, repo, "Write", {"file_path": str(inside), "content": "def echidna_inside(): pass"}))
    wait_for(lambda: _found(agent, "echidna_inside"), 20)
    assert _found(agent, "platypus_outside") == []
    assert {r["path"] for r in rows(agent, "select path from scsql.code_files")} == {"src/inside.py"}


def test_multiedit_and_notebookedit_are_indexed_and_the_card_says_who_edited(installed):  # noqa: F811
    repo, agent = installed.repo, installed.agent
    sid = uuid.uuid4().hex
    many = repo / "src" / "many.py"
    many.write_text("def numbat_first():\n    return 1\n\n\ndef numbat_second():\n    return numbat_first()\n")
    installed.fire(_tool(sid, repo, "MultiEdit", {"file_path": str(many), "edits": [
        {"old_string": "a", "new_string": "def numbat_first(): ..."}]}))
    book = repo / "src" / "book.ipynb"
    book.write_text('{"cells": [{"cell_type": "code", "source": ["bilby_notebook_cell = 3"]}], "nbformat": 4}\n')
    installed.fire(_tool(sid, repo, "NotebookEdit", {"notebook_path": str(book), "new_source": "bilby_notebook_cell = 3"}))
    hits = wait_for(lambda: _found(agent, "numbat_second"), 20)
    assert hits[0]["source_path"] == "src/many.py" and "numbat_second" in hits[0]["defines"]
    assert wait_for(lambda: _found(agent, "bilby_notebook_cell"), 20)[0]["source_path"] == "src/book.ipynb"
    card = Api(agent).call("file_card", path="src/many.py")
    assert {d["name"] for d in card["defines"]} == {"numbat_first", "numbat_second"}
    assert [(e["agent"], e["tool"]) for e in card["edits"]] == [(agent.name, "MultiEdit")]
    assert card["edits"][0]["cite"].startswith("tool_call:")


OUTLINED = '''\
import functools


# the comment above f belongs to its span
@functools.cache
@functools.wraps(print)
def f(x):
    return x  # a comment on the last line
    # a comment after the last statement is not f's


async def g():
    pass


class Big:
    """A class with methods, decorated ones too."""

    x = 1

    @staticmethod
    def one():
        return 1

    async def two(self):
        return [
            2,
        ]

    class Inner:
        def hidden(self):
            pass
    # trailing


@dataclass
class Small: pass


if True:
    def conditional():
        pass
'''


def test_an_edited_python_file_is_outlined_from_its_one_parse_as_from_its_ast():
    """The hook server parses an edited file once (tree-sitter, for its
    symbols) and takes its chunk spans from that parse (parse.outline), where
    scsql index reads them from Python's ast: the same outline, so the same
    chunks, for a module with decorators, trailing comments, async and nested
    definitions, and for a sample of the standard library's modules."""
    from scsql.bench.code_dataset import stdlib_root
    from scsql.code import parse
    from scsql.memory import indexer

    root = stdlib_root()
    files = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts)[::6]
    texts = {"outlined.py": OUTLINED}
    for p in files:
        try:
            texts[p.relative_to(root).as_posix()] = p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
    compared, differ = 0, []
    for rel, text in texts.items():
        mine, theirs = parse.outline(rel, text, parse.tree_of(rel, text)), indexer.python_outline(text)
        if mine is None or theirs is None:  # a file the grammar or ast cannot parse: spans from the ast, or none
            continue
        compared += 1
        if mine != theirs:
            differ.append(rel)
    assert compared > 250 and differ == []
    outline = parse.outline("outlined.py", OUTLINED, parse.tree_of("outlined.py", OUTLINED))
    assert [(first, end, name) for first, end, name, _ in outline] == [(5, 8, "f"), (12, 13, "g"), (16, 32, "Big"),
                                                                         (36, 37, "Small")]
    assert outline[2][3] == [(21, 23, "one"), (25, 28, "two")]
    text = OUTLINED.replace("pass\n    # trailing", "pass\n    # trailing\n" + "    # filler line\n" * 60)
    assert indexer.spans_for("x.py", text, 1500, parse.outline("x.py", text, parse.tree_of("x.py", text))) == \
        indexer.spans_for("x.py", text, 1500)
