"""Memory commands: ``scsql index PATH``, ``scsql search QUERY``, ``scsql
memory status`` and ``scsql memory set-model``. Each calls the stored
functions through the registry, as the MCP tools do."""

from __future__ import annotations

import json
import sys

from ..core.command import Commands



def index_summary(report: dict, verbose: bool = False) -> tuple[list[str], list[str]]:
    """The lines ``scsql index`` prints: a summary on stdout (files indexed,
    unchanged, removed, failed; skipped files counted by reason), and on
    stderr each failure, and each skipped file only when VERBOSE."""
    out = [f"scsql: indexed {report['indexed']} file(s) ({report['chunks']} chunks), "
           f"{report['unchanged']} unchanged, {len(report['removed'])} removed, "
           f"{len(report['failed'])} failed; root {report['root']}"]
    counts = report["skipped_counts"]
    if counts:
        why = ", ".join(f"{n} {reason}" for reason, n in counts.items())
        out.append(f"scsql: skipped {len(report['skipped'])}: {why}" + ("" if verbose else " (-v lists them)"))
    err = [f"  skipped {s['path']}: {s['reason']}" for s in report["skipped"]] if verbose else []
    err += [f"  failed  {f['path']}: {f['error']}" for f in report["failed"]]
    return out, err


def cmd_index(ctx, args) -> int:
    agent = ctx.open_agent(args.agent, need_key=False)
    from . import indexer

    report = indexer.index_tree(agent, args.path, progress=None if not args.quiet else False)
    if args.embed:
        from . import embed

        report["embedded"] = embed.embed_all(agent, show=None if not args.quiet else False)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0 if not report["failed"] else 1
    out, err = index_summary(report, args.verbose)
    for line in out:
        print(line)
    for line in err:
        print(line, file=sys.stderr)
    return 0 if not report["failed"] else 1


def cmd_search(ctx, args) -> int:
    agent = ctx.open_agent(args.agent, need_key=False)
    api, name = ctx.api(agent), "search_global" if args.all_projects else "search"
    rows = api.call(name, query=args.query, k=args.k, mode=args.mode)
    answer = api.answer(name, rows, query=args.query, k=args.k, mode=args.mode)
    if answer is not None and rows:  # the whole answer's confidence, beside the rows (stdout stays the rows)
        print(answer_line(answer), file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    if not rows:
        print(f"scsql: nothing found for {args.query!r} in the agent's project"
              + ("s" if args.all_projects else "") + " (scsql index PATH adds files; remember adds facts)",
              file=sys.stderr)
    for r in rows:
        print(search_line(r))
        if args.content:
            print("    " + r["content"].replace("\n", "\n    "))
    return 0


def answer_line(a: dict) -> str:
    """The confidence of a search's answer as a whole, in one line."""
    if not a["found"]:
        return f"scsql: nothing relevant found (confidence {a['confidence']:.2f}, level none): {a['reason']}"
    return f"scsql: answer confidence {a['confidence']:.2f} ({a['level']}): {a['reason']}"


def search_line(r: dict) -> str:
    """One result of ``scsql search``: score, project:path[:lines] [anchor],
    the retrievers that found it, and the chunk hash, or for what is no
    chunk (a fact, a decision) its kind."""
    where = f"{r['project']}:{r['source_path']}"
    if r["line_start"] is not None:
        where += f":{r['line_start']}-{r['line_end']}"
    if r["anchor"] and not r["source_path"].endswith(f":{r['anchor']}"):
        where += f" [{r['anchor']}]"
    ident = r["chunk_hash"][:12] if r["chunk_hash"] else r["source_kind"]
    if r["chunk_hash"] and r["source_kind"] != "file":
        ident += f" {r['source_kind']}"
    label = "" if r["trust"] == "internal" else "  (UNTRUSTED external)"
    return f"{r['score']:.4f}  {where}  {'+'.join(r['retrievers'])}  {ident}{label}"


def cmd_memory(ctx, args) -> int:
    from . import embed

    if args.action == "history":
        return _history(ctx, args)
    if args.action == "status":
        agent = ctx.open_agent(args.agent, need_key=False)
        rows = ctx.api(agent).call("memory_status")
        print(json.dumps(rows[0] if rows else {}, indent=2))
        return 0
    # set-model: administrators register this process's provider for a project.
    prov = embed.provider()
    if prov is None:
        print("scsql: SCSQL_EMBED=none: there is no model to switch to", file=sys.stderr)
        return 1
    import psycopg

    with psycopg.connect(ctx.admin_conninfo()) as conn:
        n = conn.execute("select scsql.set_embedding_model(%s, %s, %s)",
                         (args.project, prov.name, prov.dims)).fetchone()[0]
    print(f"scsql: project {args.project} now embeds with {prov.name} ({prov.dims} dimensions); "
          f"{n} chunk text(s) queued for scsql worker")
    return 0


def _history(ctx, args) -> int:
    """``scsql memory history TARGET``: who changed a fact, source or chunk, newest first."""
    agent = ctx.open_agent(args.agent, need_key=False)
    rows = ctx.api(agent).call("memory_history", target=args.target, limit=args.limit)
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False, default=str))
        return 0
    if not rows:
        print(f"scsql: no recorded change of {args.target}")
        return 0
    for r in rows:
        hashes = f"{(r['old_hash'] or '-')[:12]} -> {(r['new_hash'] or '-')[:12]}"
        related = f" ({r['related']})" if r["related"] else ""
        print(f"{str(r['at'])[:19]}  {r['agent']}  {r['op']} {r['kind']} {r['target']}{related}  {hashes}"
              + (f"  {r['reason']}" if r["reason"] else ""))
        if r["value"] is not None:
            print("    " + r["value"].replace("\n", "\n    "))
    return 0


def register(commands: Commands) -> None:
    add = commands.add
    p = add("index", cmd_index, "index a project tree into the knowledge base (incremental, honours .gitignore)")
    p.add_argument("path", help="directory to index")
    p.add_argument("--agent", help="the agent whose project the files belong to (required)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.add_argument("-v", "--verbose", action="store_true", help="list each skipped file with its reason")
    p.add_argument("--embed", action="store_true",
                   help="embed the queued chunks here and now (with a progress bar), not in scsql worker")

    p = add("search", cmd_search, "hybrid search of the knowledge base (BM25 + embeddings), with citations")
    p.add_argument("query", help="words, identifiers (verifyChain), paths or dates to find")
    p.add_argument("--agent", help="the agent searching (required)")
    p.add_argument("-k", type=int, default=10, help="results at most (default 10)")
    p.add_argument("--mode", choices=["hybrid", "bm25", "vector"], default="hybrid",
                   help="hybrid (default), BM25 only, or vector only")
    p.add_argument("--all-projects", action="store_true", help="every project the agent may read")
    p.add_argument("--content", action="store_true", help="print each chunk's text")
    p.add_argument("--json", action="store_true", help="print the results, with their citations, as JSON")

    p = add("memory", cmd_memory, "memory status, and switching a project's embedding model")
    msub = p.add_subparsers(dest="action", required=True)
    c = msub.add_parser("history", help="who changed a fact (by key), a source (by path) or a chunk (by chunk_hash), and when")
    c.add_argument("target", help="fact key, source path or chunk_hash")
    c.add_argument("--agent", help="the agent (required)")
    c.add_argument("--limit", type=int, default=100, help="rows at most (1 to 1,000)")
    c.add_argument("--json", action="store_true", help="print the rows as JSON")
    c = msub.add_parser("status", help="working memory, knowledge base and embedding queue of the agent's project")
    c.add_argument("--agent", help="the agent (required)")
    c = msub.add_parser("set-model", help="embed PROJECT with this process's provider (SCSQL_EMBED); re-embeds in the background")
    c.add_argument("--project", required=True, help="the project whose chunks to embed again")
