"""Python help for the memory functions (registry adapters).

* search, search_global, search_confidence, pack: the query is embedded and passed as the
  hidden arguments query_embedding and model: by this process's provider when
  it has the model loaded already, else by the worker of the agent's data
  directory when one serves the same model (embed_service.py: no model load
  in this process), else by this process's provider (loaded on first use).
  Without a provider, or when it fails, the search is BM25 only, never broken.
* search, search_global, pack, recall_context: the MCP tool adds the
  confidence of the whole answer after the rows (scsql_caller.answer_confidence,
  context_confidence): found, confidence, level, reason, so a model told
  "found": false says memory has nothing rather than guess.
* search, given no since, of a query that names a time ("yesterday", "on
  8 May"): what happened then, searched without the time words, else the
  search as asked (core/when.py).
* remember, index_text, summarize_session: once the write has committed, a
  process that already has the model loaded embeds the few chunks just
  queued (inline for small writes); otherwise ``scsql worker`` does. The
  write itself never waits on the model.
* index: has the database check that the agent may index the local
  directory, walks it (see indexer.py; secrets are never read), lets the
  database compare it with what is indexed, then indexes what changed.

Arguments reach an adapter already checked by the function's model in the
registry (types, NUL bytes, nesting).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from ..core.db import on_connect
from ..core.errors import ScsqlError
from ..core.registry import Adapter, Call
from ..core import errors

log = logging.getLogger("scsql.memory")

INLINE_LIMIT = 16  # chunks a write may embed inline; more wait for scsql worker
SEARCH_K = 10      # search's p_k when a caller gives none (its default in sql/23_search.sql)


@on_connect
def _register_vector(conn) -> None:
    """pgvector's adapters on every pooled connection (numpy arrays as vectors)."""
    from pgvector.psycopg import register_vector

    try:
        register_vector(conn)
    except Exception as exc:  # noqa: BLE001 - the vector type is absent (a database not migrated yet)
        log.debug("pgvector adapters not registered: %s", exc)
    finally:
        if not conn.autocommit:
            conn.rollback()  # leave the new connection idle, as the pool requires


def _with_query_embedding(text_arg: str):
    """Around a search: the query's embedding, when a provider gives one."""

    def around(agent, args: dict[str, Any], call: Call) -> Any:
        return call(_query_embedding(agent, args, text_arg))

    return around


def _loaded_here():
    """This process's provider when it has its model loaded (embed.py imported, and used), else None."""
    embed = sys.modules.get(f"{__package__}.embed")
    prov = embed.provider() if embed is not None else None
    return prov if prov is not None and prov.loaded else None


def _query_embedding(agent, args: dict[str, Any], text_arg: str) -> dict[str, Any]:
    query = args.get(text_arg)
    if (not isinstance(query, str) or not query.strip() or len(query) > agent.rules().query_max_chars
            or args.get("mode") == "bm25"):
        return args  # the database gives the error for a bad query
    kind = os.environ.get("SCSQL_EMBED") or "default"
    if kind == "none":
        return args
    if kind == "default" and _loaded_here() is None:
        from . import embed_service
        from .pinned import DEFAULT_MODEL, DEFAULT_PIN

        served = embed_service.ask(getattr(agent, "home", None), [query], DEFAULT_PIN)
        if served is not None:
            return {**args, "query_embedding": served[0], "model": DEFAULT_MODEL}
    from . import embed

    prov = embed.provider()
    if prov is None:
        return args
    try:
        vector = prov.embed([query])[0]
    except ScsqlError as exc:
        log.warning("search without embeddings: %s", exc)
        return args
    return {**args, "query_embedding": embed.vector_literal(vector), "model": prov.name}


def _embed_inline(agent, result: Any) -> Any:
    """After a committed write: embed what it queued if the model is loaded here."""
    prov = _loaded_here()
    if prov is not None:
        from . import embed

        try:
            embed.embed_queued(agent, prov, limit=INLINE_LIMIT)
        except ScsqlError as exc:
            log.warning("inline embedding skipped (scsql worker will do it): %s", exc)
    return result


def _write_then_embed(agent, args: dict[str, Any], call: Call) -> Any:
    return _embed_inline(agent, call(args))


def _index(agent, args: dict[str, Any], call: Call) -> Any:
    """The database checks that the agent may index the directory; it is
    walked here; the database compares it with what is indexed; what changed
    is indexed."""
    path = args.get("path")
    if not isinstance(path, str) or not path.strip():
        raise ScsqlError(errors.INVALID_ARGUMENT, "index needs path, a directory to index")
    from . import indexer

    tree = indexer.prepare(agent, path)
    rows = call({"path": tree.prefix, "manifest": tree.manifest()})
    return _embed_inline(agent, indexer.index_files(agent, tree, rows))


def _within_named_time(agent, args: dict[str, Any], call: Call) -> Any:
    """A search whose query names a time ("yesterday", "in March") and that
    is given no since: the hits that happened then (core/when.py), the
    query searched without its time words; the search as asked when nothing
    in that time matches."""
    from ..core import when

    query, k = args.get("query"), args.get("k", SEARCH_K)
    span = when.read(query) if isinstance(query, str) and args.get("since") is None else None
    if span is None or not isinstance(k, int) or not 1 <= k <= 200:
        return call(args)   # the database gives the error for a bad k

    def run(text: str, since, k: int) -> list[dict[str, Any]]:
        return call({**args, "query": text, "k": k} | ({"since": since} if since is not None else {}))

    def times(hits: list[dict[str, Any]]) -> dict:
        with agent.transaction() as conn:
            return when.happened(conn, hits)

    return when.search_within(span, query, k, run, times)


def _answer_of(text_arg: str):
    """The confidence of a search's or a pack's hits as a whole
    (scsql_caller.answer_confidence), for the words searched: a query's
    time words left out as the search tool leaves them out."""

    def answer(agent, args: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
        from ..core import when

        text = args.get(text_arg)
        span = when.read(text) if text_arg == "query" and isinstance(text, str) and args.get("since") is None else None
        if span is not None:
            text = when.query_of(span, text)
        with agent.transaction() as conn:
            return conn.execute(
                "select * from scsql_caller.answer_confidence(%s, %s::text[], %s::float8[], %s::integer[], %s::integer[])",
                (text, [r["content"] for r in rows], [r["score"] for r in rows],
                 [r.get("bm25_rank") for r in rows], [r.get("vector_rank") for r in rows])).fetchone()

    return answer


def _context_answer(agent, args: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """recall_context's confidence: what it returned of the project's own context (scsql_caller.context_confidence)."""
    with agent.transaction() as conn:
        return conn.execute("select * from scsql_caller.context_confidence(%s::text[])",
                            ([r["section"] for r in rows],)).fetchone()


_EMBEDDING = frozenset({"query_embedding", "model"})

ADAPTERS: dict[str, Adapter] = {
    "search": Adapter(frozenset(), _within_named_time, answer=_answer_of("query")).wrapping(
        Adapter(_EMBEDDING, _with_query_embedding("query"))),
    "search_global": Adapter(_EMBEDDING, _with_query_embedding("query"), answer=_answer_of("query")),
    "search_confidence": Adapter(_EMBEDDING, _with_query_embedding("query")),
    "pack": Adapter(_EMBEDDING, _with_query_embedding("intent"), answer=_answer_of("intent")),
    "recall_context": Adapter(answer=_context_answer),
    **{fn: Adapter(frozenset(), _write_then_embed) for fn in ("remember", "index_text", "summarize_session")},
    "index": Adapter(frozenset({"manifest"}), _index),
}
