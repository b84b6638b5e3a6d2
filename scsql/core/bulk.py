"""Bulk indexing: many texts into the knowledge base in one transaction.

The texts are copied (COPY, one row each) into the view ``scsql.kb_staging``,
whose trigger checks, redacts, chunks and splits each into terms as
``scsql.index_text`` would; ``scsql.index_staged()`` then writes them all
set-based: the same sources, chunks, terms, postings, statistics and memory
history as one ``index_text`` call per text, in their order
(sql/21_knowledge_bulk.sql). A text the database refuses fails the whole
batch with an error naming it (its ord and path); nothing of the batch stays.
In core: the index tool (memory) and the transcript import (hooks) both use it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

COPY = ("copy scsql.kb_staging (ord, path, content, kind, trust, tier, spans, meta, occurred_at) "
        "from stdin")


@dataclass
class Text:
    """One text to index, as ``scsql.index_text`` takes it."""

    path: str
    content: str
    kind: str = "note"
    trust: str | None = None
    tier: str = "standard"
    spans: list[dict[str, Any]] | None = None
    meta: dict[str, Any] | None = None
    occurred_at: Any = None


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def index_texts(conn, texts: Iterable[Text]) -> list[dict[str, Any]]:
    """Index TEXTS on CONN (an agent's transaction) in one batch: one row per
    text (ord, path as stored, kind, trust, chunks, unchanged, content_hash),
    in order. Raises what the database raises for the first bad text."""
    n = 0
    with conn.cursor().copy(COPY) as copy:
        for n, t in enumerate(texts, 1):
            copy.write_row((n, t.path, t.content, t.kind, t.trust, t.tier, _json(t.spans), _json(t.meta),
                            t.occurred_at))
    if n == 0:
        return []
    return conn.execute("select * from scsql.index_staged()").fetchall()


def batches(texts: Iterable[Text], max_bytes: int = 4 << 20, max_texts: int = 2000) -> Iterator[list[Text]]:
    """TEXTS in batches of at most MAX_TEXTS texts and about MAX_BYTES of text
    (a text larger than that is a batch of its own)."""
    batch: list[Text] = []
    size = 0
    for t in texts:
        n = len(t.content.encode("utf-8", "surrogatepass"))
        if batch and (size + n > max_bytes or len(batch) >= max_texts):
            yield batch
            batch, size = [], 0
        batch.append(t)
        size += n
    if batch:
        yield batch
