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
