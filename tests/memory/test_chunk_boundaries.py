"""scsql._chunk_text cuts every text where its one-piece form did
(tests/data/chunk_text_before_split.sql): the same chunks, byte for byte,
with the same anchors, line and character spans, hashes and contexts, over
the project's own documents and test data, at several chunk sizes, by
headings and by spans, with and without conversation context; and it
refuses the same bad spans with the same errors."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]
BEFORE = (ROOT / "tests" / "data" / "chunk_text_before_split.sql").read_text()
COLUMNS = "seq, anchor, line_start, line_end, char_start, char_end, content, chunk_hash, context"


def _corpus() -> dict[str, str]:
    """Every text file under docs/ and tests/data/, and README.md."""
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*")), *sorted((ROOT / "tests" / "data").rglob("*"))]
    texts = {}
    for path in paths:
        if not path.is_file():
            continue
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            continue
        if "\x00" not in text:
            texts[str(path.relative_to(ROOT))] = text
    return texts


# Shapes the documents may lack: nothing, blanks only, CRLF, fences that
# never close, headings on the first and last line, a line far over the size.
EDGES = {
    "empty": "", "blank": "\n \n\t\n", "one": "x", "crlf": "# A\r\none\r\n\r\ntwo\r\n# B\r\nthree\r\n",
    "fence": "intro\n```\n# not a heading\n~~~\n## still code\n```\n# Real\nbody\n~~~\n# open fence\n",
    "headings": "# First\n\n\n# Second ##\n#Third is no heading\n###### Sixth\n####### seventh\n# Last",
    "long": "# L\n" + "word " * 900 + "\n\n" + "y" * 2500 + "\n \n" + ("short line\n\n" * 200),
    "blanks": "\n\n\n# H\n\n\n\na\n\n\n\nb\n\n\n",
}


def _spans(text: str, every: int) -> list[dict]:
    """Spans of EVERY lines with gaps between them, some with a context (true or a text)."""
    n = len(text.split("\n")) if text else 0  # PostgreSQL splits the empty text into no lines
    spans, start, i = [], 1, 0
    while start <= n:
        end = min(n, start + every - 1)
        span = {"start": start, "end": end, "anchor": f"part {i}"}
        if i % 3 == 1:
            span["context"] = True
        elif i % 3 == 2:
            span["context"] = f"what came before part {i}"
        spans.append(span)
        start, i = end + 2, i + 1
    return spans


@pytest.fixture(scope="module")
def conn(server, template):
    """A database in which the one-piece chunker exists for the module's transaction, rolled back."""
    from ..conftest import SESSION

    with server.scratch(f"{SESSION}_chunks", template) as admin:
        with psycopg.connect(server.conninfo(f"{SESSION}_chunks")) as c:
            c.execute("set role scsql_owner")
            c.execute(BEFORE)
            yield c
            c.rollback()
        assert admin.execute("select to_regprocedure('scsql._chunk_text_before_split(text,jsonb,integer,boolean)')"
                             ).fetchone()[0] is None


def _both(conn, texts: list[str], spans: list, size: int, context: bool) -> tuple[list, list]:
    rows = []
    for fn in ("_chunk_text", "_chunk_text_before_split"):
        rows.append(conn.execute(f"""
            select u.n, c.* from unnest(%s::text[], %s::jsonb[]) with ordinality u(t, s, n),
                 scsql.{fn}(u.t, u.s, %s, %s) c({COLUMNS})
            order by u.n, c.seq""", (texts, spans, size, context)).fetchall())
    return rows[0], rows[1]


@pytest.mark.parametrize("size", [1500, 400, 80, 7])
def test_chunks_are_those_of_the_one_piece_chunker(conn, size):
    corpus = {**_corpus(), **EDGES}
    texts = list(corpus.values())
    assert len(corpus) >= 35 and sum(map(len, texts)) > 500_000, len(corpus)
    cases = [(texts, [None] * len(texts), False), (texts, [None] * len(texts), True),
             (texts, [json.dumps(_spans(t, every)) for t, every in zip(texts, [5, 40, 1, 300] * len(texts))], False),
             (texts, [json.dumps(_spans(t, 17)) for t in texts], True)]
    for texts_, spans, context in cases:
        new, old = _both(conn, texts_, spans, size, context)
        assert new == old, (size, context)
        assert len(new) > len(texts_)
        # Every chunk is the text between its character offsets.
        for n, _seq, _a, _ls, _le, cs, ce, content, *_ in new[:2000]:
            assert texts_[n - 1][cs:ce] == content


@pytest.mark.parametrize("spans", [
    "{}", "[1]", '[{"start": 1}]', '[{"start": 1, "end": 2, "anchor": 3}]', '[{"start": 1.5, "end": 2}]',
    '[{"start": 2, "end": 1}]', '[{"start": 1, "end": 9}]', '[{"start": 1, "end": 1}, {"start": 1, "end": 2}]',
    '[{"start": 1, "end": 2, "context": 7}]', '[{"start": 1, "end": 2, "context": "' + "c" * 1001 + '"}]',
])
def test_bad_spans_are_refused_alike(conn, spans):
    errors = []
    for fn in ("_chunk_text", "_chunk_text_before_split"):
        conn.execute("savepoint s")
        with pytest.raises(psycopg.Error) as err:
            conn.execute(f"select * from scsql.{fn}(%s, %s::jsonb)", ("a\nb\nc", spans)).fetchall()
        conn.execute("rollback to savepoint s")
        errors.append((err.value.sqlstate, err.value.diag.message_primary))
    assert errors[0] == errors[1] and errors[0][0] == "SC206", errors


# The normalized form as it was written first, in one expression: NFC
# always, the trailing-blank expression always.
NORMALIZE_BEFORE = r"""
  select pg_catalog.btrim(
           pg_catalog.regexp_replace(
             pg_catalog.replace(pg_catalog.replace(
               pg_catalog.translate(pg_catalog.normalize(t, 'NFC'), U&'\200B\200C\200D\2060\FEFF', ''),
               E'\r\n', E'\n'), E'\r', E'\n'),
             '[ \t]+(\n|$)', '\1', 'g'),
           E' \t\n')"""


def test_normalizing_only_what_needs_it_gives_the_same_text(conn):
    """_normalize skips NFC for text already in it and the trailing-blank
    expression for text with none: the same normalized text (so the same
    chunk hashes) for every text of the corpus and for the shapes that need
    each step."""
    shapes = ["plain ascii", "trailing \nspaces\t\nand tabs \t", "e\u0301cole NFD", "\u00e9cole NFC",
              "zero\u200bwidth \u200b\n", "crlf  \r\nlines\r\n\r\n", "cr only \rline", " \t\n ", "",
              "Hangul \u1100\u1161 jamo", "Å\u030a twice", "end with tab\t", "mixed é and e\u0301 \t \n",
              "\ufeffbom then é\u2060 joiner", "only zero width \u200c\u200d"]
    texts = [*_corpus().values(), *EDGES.values(), *shapes, *(s * 50 for s in shapes)]
    new = conn.execute("select array_agg(scsql._normalize(t) order by n) from unnest(%s::text[]) with ordinality u(t, n)",
                       (texts,)).fetchone()[0]
    old = conn.execute(f"select array_agg(({NORMALIZE_BEFORE}) order by n) from unnest(%s::text[]) with ordinality u(t, n)",
                       (texts,)).fetchone()[0]
    assert new == old
    assert new[len(texts) - 2 * len(shapes) + 2] == "\u00e9cole NFD"  # normalized where it had to be
