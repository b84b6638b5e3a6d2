"""The docstring-to-code dataset of `scsql bench retrieval --dataset code`:
queries are first docstring sentences, the only relevant document is the
function without its docstring, the selection is deterministic, and the BEIR
files it writes load as the retrieval benchmark loads SciFact."""

from __future__ import annotations

import textwrap

from scsql.bench import code_dataset, retrieval

MOD = textwrap.dedent('''\
    """A module."""


    def parse_header(line, strict=False):
        """Split a header line into its name and value.

        More text that is not the query.
        """
        name, _, value = line.partition(":")
        return name.strip(), value.strip()


    def _private(x):
        """Private helpers are not queries."""
        return x
        pass


    def tiny():
        """Too short a function."""
        return 1


    class Reader:
        def read_all(self, stream):
            """Read every record, e.g. rows, from the stream. Then stop."""
            records = []
            for row in stream:
                records.append(row)
            return records

        def same_one(self):
            """Return the shared answer here."""
            a = 1
            return a

        def same_two(self):
            """Return the shared answer here."""
            b = 2
            return b
''')


def test_a_tiny_dataset_from_a_module_tree(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "headers.py").write_text(MOD)
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "test_x.py").write_text(MOD)  # tests are not part of the corpus
    pairs = code_dataset.build(tmp_path, size=10)
    by_id = {p.doc_id: p for p in pairs}
    assert set(by_id) == {"pkg.headers.parse_header", "pkg.headers.Reader.read_all"}
    assert by_id["pkg.headers.parse_header"].query == "Split a header line into its name and value."
    assert by_id["pkg.headers.Reader.read_all"].query == "Read every record, e.g. rows, from the stream."
    assert by_id["pkg.headers.parse_header"].code == (
        'def parse_header(line, strict=False):\n    name, _, value = line.partition(":")\n'
        '    return name.strip(), value.strip()')
    assert by_id["pkg.headers.Reader.read_all"].code.startswith("def read_all(self, stream):\n    records = []")
    assert code_dataset.build(tmp_path, size=1) == [pairs[0]]  # the order is fixed: a prefix of the same list

    directory = code_dataset.write_beir(pairs, tmp_path / "beir")
    corpus, queries, qrels = retrieval.load(directory)
    assert set(corpus) == set(queries) == set(by_id)
    for split in ("train", "test"):
        assert all(rels == {q: 1} for q, rels in qrels[split].items())
    assert set(qrels["train"]) | set(qrels["test"]) == set(by_id)
    assert "Split a header" not in corpus["pkg.headers.parse_header"]


def test_the_standard_library_dataset_is_deterministic():
    root = code_dataset.stdlib_root() / "json"
    first = code_dataset.build(root, size=20)
    assert first == code_dataset.build(root, size=20) and 5 <= len(first) <= 20
    for p in first:
        assert len(p.query.split()) >= 3 and p.query not in p.code
        assert p.code.lstrip().startswith(("def ", "async def ", "@"))
