"""``scsql code``: the repo map, file and project cards and graph queries of
the agent's project, through the same stored functions as the MCP tools
(repo_map, file_card, project_card, graph_neighbors, graph_path)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..core.command import Commands


def _print_rows(rows, as_json: bool, line) -> None:
    if as_json:
        print(json.dumps(rows, indent=2, ensure_ascii=False, default=str))
        return
    for r in rows:
        print(line(r))


def cmd_code(ctx, args) -> int:
    api = ctx.api(ctx.open_agent(args.agent, need_key=False))
    if args.action == "map":
        rows = api.call("repo_map", budget_tokens=args.budget, focus=args.focus)
        _print_rows(rows, args.json, lambda r: f"{r['path']}\n{r['definitions']}")
    elif args.action in ("card", "project"):
        card = api.call("file_card", path=args.path) if args.action == "card" else api.call("project_card")
        print(json.dumps(card, indent=2, ensure_ascii=False, default=str))
    elif args.action == "neighbors":
        rows = api.call("graph_neighbors", node=args.node, direction=args.direction, kinds=args.kinds, depth=args.depth)
        _print_rows(rows, args.json, lambda r: f"{r['depth']} {r['direction']:<3} {r['edge']:<8} {r['node']}  "
                                               f"[{r['cite']}]" + (f" ({r['resolution']})" if r["resolution"] else ""))
    else:
        rows = api.call("graph_path", **{"from": args.source, "to": args.target, "max_depth": args.depth})
        _print_rows(rows, args.json, lambda r: f"{r['step']} {r['node']}" + (
            f"  <- {r['edge']} {r['direction']} [{r['cite']}]" if r["edge"] else ""))
    return 0


def register(commands: Commands) -> None:
    p = commands.add("code", cmd_code, "the code of the agent's project: repo map, file and project cards, graph queries")
    csub = p.add_subparsers(dest="action", required=True)
    c = csub.add_parser("map", help="the files that matter most, with their definitions' signatures, within a budget")
    c.add_argument("--budget", type=int, default=1000, help="tokens the map may take (50 to 20,000)")
    c.add_argument("--focus", nargs="*", default=None,
                   help="paths, names or text to centre the map on (default: the files the agent edited lately)")
    c = csub.add_parser("card", help="what one file defines, imports and is imported by, its tests, edits, decisions")
    c.add_argument("path", help="the file, relative to the project root (or absolute under it)")
    csub.add_parser("project", help="languages, entry points, test command, main modules, recent decisions")
    c = csub.add_parser("neighbors", help="what a file, definition, agent, task, decision or fact is linked to")
    c.add_argument("node", help="a path, path#qualified.name, a name, agent:NAME, task:ID, decision:ID or memory:KEY")
    c.add_argument("--direction", choices=["in", "out", "both"], default="both",
                   help="out: what it uses; in: what uses it (who calls it)")
    c.add_argument("--kinds", nargs="*", default=None,
                   choices=["calls", "inherits", "imports", "defines", "edited", "owns", "mentions"],
                   help="edge kinds to follow (default all)")
    c.add_argument("--depth", type=int, default=1, help="steps (1 to 5)")
    c = csub.add_parser("path", help="how two nodes are connected: the shortest chain of edges between them")
    c.add_argument("source", help="the node to start from")
    c.add_argument("target", help="the node to reach")
    c.add_argument("--depth", type=int, default=3, help="steps at most (1 to 6)")
    for name in ("map", "card", "project", "neighbors", "path"):
        c = csub.choices[name]
        c.add_argument("--agent", help="the agent whose project it is (required)")
        c.add_argument("--json", action="store_true", help="print JSON")
