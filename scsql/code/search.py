"""Search that knows symbols, around ``search`` and ``search_global``.

A query that names a definition (``verify_chain``, ``Store.put``, "where is
index_tree defined") gets the chunks holding it first
(``scsql_caller.symbol_chunks``), and every result says which definitions
start in it, ``defines`` (``scsql_caller.chunk_defines``). Both are SQL;
this adapter applies them to the results the search function returns, in
the same way for the MCP tools and ``scsql search``.
"""

from __future__ import annotations

from typing import Any

from ..core.registry import Adapter, Call

SYMBOL_CHUNKS = "select * from scsql_caller.symbol_chunks({projects}, %s)"
CHUNK_DEFINES = "select i, defines from scsql_caller.chunk_defines(scsql_caller.project_id(), %s, %s, %s)"


def merge(rows: list[dict[str, Any]], hits: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """HITS (the chunks holding the named definitions) first, scored as the
    best result, then the other ROWS; at most K."""
    if not hits:
        return rows
    top = max((r["score"] for r in rows if r.get("score") is not None), default=1.0)
    seen = {h["chunk_hash"] for h in hits}
    first = [{**h, "score": top} for h in hits]
    return (first + [r for r in rows if r.get("chunk_hash") not in seen])[:k]


def annotate(conn, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each row with ``defines``: the definitions that start in its chunk (None for none)."""
    files = [(n, r) for n, r in enumerate(rows, 1) if r.get("line_start") is not None and "defines" not in r]
    if files:
        found = conn.execute(CHUNK_DEFINES, ([r["source_path"] for _, r in files], [r["line_start"] for _, r in files],
                                             [r["line_end"] for _, r in files])).fetchall()
        by = {files[row["i"] - 1][0]: row["defines"] for row in found}
        for n, r in enumerate(rows, 1):
            if "defines" not in r:
                r["defines"] = by.get(n)
    for r in rows:
        r.setdefault("defines", None)
    return rows


def symbol_aware(projects: str):
    def around(agent, args: dict[str, Any], call: Call) -> Any:
        rows = call(args)
        query = args.get("query")
        if not isinstance(rows, list) or not isinstance(query, str):
            return rows
        kinds = args.get("kinds")
        with agent.transaction() as conn:
            hits = []
            if (not kinds or "file" in kinds) and args.get("trust") in (None, "internal") and args.get("since") is None:
                hits = conn.execute(SYMBOL_CHUNKS.format(projects=projects), (query,)).fetchall()
            return annotate(conn, merge(rows, hits, int(args.get("k") or 10)))
    return around


ADAPTERS: dict[str, Adapter] = {
    "search": Adapter(around=symbol_aware("array[scsql_caller.project_id()]")),
    "search_global": Adapter(around=symbol_aware("scsql_caller.readable_projects()")),
}
