"""What parse() returns for one file, read without a database: imports in
the file's order on every parse; names, signatures and qualifiers cut at the
right characters in a file that is not ASCII; a method defined outside its
type parented by that type."""

from __future__ import annotations

from scsql.code import parse


def test_imports_come_in_the_files_order_on_every_parse():
    text = "\n".join([*(f"import m{i}" for i in range(20)),
                      "try:", "    import t0", "except ImportError:", "    import t1",
                      "def f():", "    from a import b", "    import c.d as e",
                      *(f"from p{i} import q{i}" for i in range(20))]) + "\n"
    expected = [f"m{i}" for i in range(20)] + ["t0", "t1", "a", "c/d"] + [f"p{i}" for i in range(20)]
    for _ in range(5):
        assert [r.name for r in parse.parse("x.py", text).references if r.kind == "import"] == expected


def test_a_file_that_is_not_ascii_keeps_its_names_signatures_and_qualifiers_whole():
    text = ('"""Größe."""\n\nclass Straße(Basis):\n'
            '    def länge(self, ö: str = "é") -> int:\n        return naïve.größe(ö) + Maß.wert(ö)\n')
    p = parse.parse("x.py", text)
    assert [(d.kind, d.key, d.signature, d.line_start, d.line_end, d.parent) for d in p.definitions] == [
        ("class", "Straße", "class Straße(Basis)", 3, 5, None),
        ("method", "Straße.länge", 'def länge(self, ö: str = "é") -> int', 4, 5, "Straße")]
    assert [(r.kind, r.name, r.qualifier, r.from_key, r.lines) for r in p.references] == [
        ("inherit", "Basis", None, "Straße", [3]), ("call", "größe", "naïve", "Straße.länge", [5]),
        ("call", "wert", "Maß", "Straße.länge", [5])]


def test_a_method_defined_outside_its_type_has_the_type_as_parent():
    go = parse.parse("a/a.go", "package a\n\nfunc (s *Store) Put(k string) { s.save(k) }\n\ntype Store struct{}\n")
    assert [(d.key, d.parent) for d in go.definitions] == [("Store.Put", "Store"), ("Store", None)]
    cpp = parse.parse("a.cpp", "void Other::run() { go(); }\nclass Shape { void area(); };\n"
                               "void Shape::area() { run(); }\n")
    assert [(d.key, d.parent) for d in cpp.definitions] == [
        ("Other.run", None), ("Shape", None), ("Shape.area", "Shape")]
    assert [(r.name, r.from_key) for r in cpp.references] == [("go", "Other.run"), ("run", "Shape.area")]


def _edits(text: str, rng) -> list[str]:
    """Texts an agent's edits could make of TEXT: a line added at the end, one
    inserted, a block deleted, a name replaced, text pasted into a line, non-ASCII
    text added, everything removed and put back."""
    lines = text.split("\n")
    k = rng.randrange(len(lines))
    j = min(len(lines), k + rng.randrange(1, 30))
    out = [text + "\n\ndef added_at_end(x):\n    return helper(x)\n",
           "\n".join(lines[:k] + ["def inserted(y):", "    return y.call_me()", ""] + lines[k:]),
           "\n".join(lines[:k] + lines[j:]),
           text.replace("self", "this", 3),
           text[:len(text) // 2] + "(" + text[len(text) // 2:],
           "\n".join(lines[:k] + ["# é — ünïcode ✓", "def é_name(): return 'ß'"] + lines[k:]),
           "",
           text]
    return out


def test_an_incremental_parse_gives_what_a_whole_parse_gives():
    """A file parsed again from its tree before an edit (what the hook server
    does with a file it read) has the same symbols and outline as a whole
    parse of the new text, edit after edit, in every language: added, moved
    and deleted lines, broken syntax, non-ASCII text, an emptied file."""
    import random
    import sysconfig
    from pathlib import Path

    rng = random.Random(31)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = {rel: (stdlib / rel).read_text(encoding="utf-8")
             for rel in ("json/decoder.py", "argparse.py", "textwrap.py", "asyncio/tasks.py")}
    files["web/app.ts"] = ("import { a } from './a';\nexport class App extends Base {\n  run(x: number) { return a(x); }\n}\n"
                           "function helper(y) { return y + 1; }\n")
    files["src/lib.rs"] = "use crate::b::c;\nstruct S;\nimpl S {\n    fn go(&self) { c(); }\n}\nfn main() { S.go(); }\n"
    files["main.go"] = 'package main\nimport "fmt"\nfunc main() { fmt.Println(helper()) }\nfunc helper() int { return 1 }\n'
    files["a.c"] = "#include <stdio.h>\nint helper(int x) { return x; }\nint main(void) { return helper(1); }\n"
    for rel, text in files.items():
        tree = parse.tree_of(rel, text)
        for new in _edits(text, rng):
            tree = parse.tree_of(rel, new, (text, tree))
            whole = parse.tree_of(rel, new)
            assert parse.parse(rel, new, tree).payload() == parse.parse(rel, new, whole).payload(), rel
            assert parse.outline(rel, new, tree) == parse.outline(rel, new, whole), rel
            assert str(tree.root_node) == str(whole.root_node), rel
            text = new
