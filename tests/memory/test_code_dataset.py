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


class _CountingModel:
    """A stand-in provider: a text's vector is its length and checksum; counts the texts it embeds."""

    def __init__(self, name: str = "fake-model"):
        self.name, self.calls = name, []

    dims = 4
    loaded = True

    def embed(self, texts):
        import numpy as np

        self.calls += texts
        return np.array([[len(t), sum(map(ord, t)) % 97, 1.0, 0.0] for t in texts], dtype=np.float32)


def test_the_benchmark_vector_cache_embeds_only_texts_it_has_not_seen(tmp_path):
    import numpy as np

    from scsql.bench.vector_cache import CachedProvider

    first = CachedProvider(_CountingModel(), tmp_path)
    a = first.embed(["alpha", "beta", "alpha"])
    assert first.prov.calls == ["alpha", "beta"] and (first.hits, first.misses) == (1, 2)
    # Another run reads them back; a changed text or another model is a miss.
    again = CachedProvider(_CountingModel(), tmp_path)
    b = again.embed(["beta", "alpha", "alpha!"])
    assert again.prov.calls == ["alpha!"]
    assert np.array_equal(b[0], a[1]) and np.array_equal(b[1], a[0])
    other = CachedProvider(_CountingModel("other-model"), tmp_path)
    other.embed(["alpha"])
    assert other.prov.calls == ["alpha"]
    # Two runs sharing the cache see what the other appended; a record cut
    # short (a crash while writing) is ignored.
    assert first.embed(["alpha!"]).shape == (1, 4) and first.prov.calls == ["alpha", "beta"]
    with again.path.open("ab") as f:
        f.write(b"\x01" * 10)
    late = CachedProvider(_CountingModel(), tmp_path)
    late.embed(["alpha", "beta", "alpha!", "delta"])
    assert late.prov.calls == ["delta"] and late.hits == 3
    assert CachedProvider(_CountingModel(), tmp_path).embed(["delta"])[0][0] == 5  # appended after the cut
