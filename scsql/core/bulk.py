"""Bulk indexing: many texts into the knowledge base in one transaction.

The texts are copied (COPY, one row each) into the view ``scsql.kb_staging``,
whose trigger checks, redacts, chunks and splits each into terms as
``scsql.index_text`` would; ``scsql.index_staged()`` then writes them all
set-based: the same sources, chunks, terms, postings, statistics and memory
history as one ``index_text`` call per text, in their order
(sql/21_knowledge_bulk.sql). A text the database refuses fails the whole
batch with an error naming it (its ord and path); nothing of the batch stays.
In core: the index tool (memory) and the transcript import (hooks) both use it.

On Citus the set-based statements cannot run (they join the staged rows of
a transaction with the project's tables across shards): there each text is
indexed by ``scsql.index_text`` in turn, in the same transaction, which
stores the same rows (the bulk path's tests compare the two on one server).
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from .errors import ScsqlError

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
    if _on_citus(conn):
        return _per_call(conn, texts)
    return _store(conn, _stage(conn, texts))


def _on_citus(conn) -> bool:
    return conn.execute("select scsql_caller.citus() as c").fetchone()["c"]


def _per_call(conn, texts: Iterable[Text]) -> list[dict[str, Any]]:
    """TEXTS indexed by scsql.index_text one after another on CONN, rows as index_staged returns them."""
    rows = []
    for n, t in enumerate(texts, 1):
        row = conn.execute("select * from scsql.index_text(%s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s)",
                           (t.path, t.content, t.kind, t.trust, t.tier, _json(t.spans), _json(t.meta),
                            t.occurred_at)).fetchone()
        rows.append({"ord": n, **row})
    return rows


def _stage(conn, texts: Iterable[Text]) -> int:
    """Copy TEXTS into scsql.kb_staging on CONN, numbered from 1; how many there were."""
    n = 0
    with conn.cursor().copy(COPY) as copy:
        for n, t in enumerate(texts, 1):
            copy.write_row((n, t.path, t.content, t.kind, t.trust, t.tier, _json(t.spans), _json(t.meta),
                            t.occurred_at))
    return n


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


def index_batches(agent, texts: Iterable[Any], workers: int = 2, stage: Callable[[Any, Any], int] | None = None
                  ) -> Iterator[tuple[Any, list[dict[str, Any]] | ScsqlError]]:
    """Index each batch of TEXTS in a transaction of its own as AGENT, as
    :func:`index_texts` does, yielding each batch with its rows, or with the
    ScsqlError that refused it (nothing of that batch stays), in order.
    STAGE(conn, batch), if given, stages a batch another way (a batch is then
    whatever it takes) and returns how many texts it staged.

    Up to WORKERS batches are in flight on connections of their own: while
    one batch is stored (``scsql.index_staged``, which holds the project's
    lock), the next is staged (checked, redacted, chunked and split into
    terms, most of the work), on another server core. A batch calls
    ``index_staged`` only once the batch before it has committed or failed,
    so what is stored, ids included, is what one batch after another stores.
    An agent without a pool (one connection) indexes one batch at a time."""
    if stage is None:
        with agent.transaction() as conn:
            citus = _on_citus(conn)
        if citus:  # one batch at a time, each text through index_text (the module's docstring)
            yield from _per_call_batches(agent, texts)
            return
    stage = stage or _stage
    workers = max(1, workers) if agent.db.pool is not None else 1
    with ThreadPoolExecutor(workers, thread_name_prefix="scsql-bulk") as pool:
        flight: deque[tuple[Any, Future]] = deque()
        before, stop = threading.Event(), threading.Event()
        before.set()
        try:
            for batch in texts:
                if len(flight) >= workers:
                    yield _done(*flight.popleft())
                done = threading.Event()
                flight.append((batch, pool.submit(_index_after, agent, batch, stage, before, done, stop)))
                before = done
            while flight:
                yield _done(*flight.popleft())
        finally:  # the caller stopped early: a batch not yet being stored is rolled back
            stop.set()
            for _, future in flight:
                future.cancel()


def _per_call_batches(agent, texts: Iterable[list[Text]]) -> Iterator[tuple[Any, list[dict[str, Any]] | ScsqlError]]:
    for batch in texts:
        try:
            with agent.transaction() as conn:
                rows = _per_call(conn, batch)
        except ScsqlError as exc:
            yield batch, exc
        else:
            yield batch, rows


class _Stopped(Exception):
    """The caller stopped reading: the batch is rolled back."""


def _index_after(agent, batch: Any, stage: Callable[[Any, Any], int], before: threading.Event,
                 done: threading.Event, stop: threading.Event) -> list[dict[str, Any]]:
    """BATCH staged in a transaction of its own, stored once BEFORE is set
    (rolled back if STOP is set by then); sets DONE when it has committed or failed."""
    try:
        with agent.transaction() as conn:
            n = stage(conn, batch)
            before.wait()
            if stop.is_set():
                raise _Stopped
            return _store(conn, n)
    finally:
        done.set()


def _store(conn, staged: int) -> list[dict[str, Any]]:
    """What scsql.index_staged stored of the STAGED texts of CONN's transaction."""
    return conn.execute("select * from scsql.index_staged()").fetchall() if staged else []


def _done(batch: Any, future: Future) -> tuple[Any, list[dict[str, Any]] | ScsqlError]:
    try:
        return batch, future.result()
    except ScsqlError as exc:
        return batch, exc
