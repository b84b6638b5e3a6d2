"""``scsql bench tools``: what the MCP tools' schemas cost a session: the size
of tools/list's result as a client receives it (compact JSON), in bytes, in
bytes / 4 (the usual estimate of a model's tokens), and in tokens of the
offline tokenizer shipped with scsql (all-MiniLM-L6-v2's WordPiece: a model
tokenizer that is on every installation, not the serving model's own, and
one that counts JSON punctuation heavily). With ``--agent NAME`` it measures
that agent's tools on the configured server; otherwise those of a fresh agent
in a scratch database. It prints the default list and the list with
``--all-tools`` (the tools hooks do for agents included)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

MODEL_TOKENIZER = Path(__file__).resolve().parent.parent / "memory" / "models" / "all-MiniLM-L6-v2.tokenizer.json"


def wordpiece_tokens(text: str) -> int | None:
    """Tokens of TEXT by the shipped MiniLM tokenizer, no truncation (None without the tokenizers package)."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return None
    tok = Tokenizer.from_file(str(MODEL_TOKENIZER))
    tok.no_truncation()
    return len(tok.encode(text).ids)


def measure(api: Any, all_tools: bool) -> dict[str, Any]:
    from ..mcp_server import build, schema_size

    tools = build(api, all_tools=all_tools).tools.listed
    text = schema_size(tools)
    size = len(text.encode())
    return {"tools": len(tools), "bytes": size, "bytes_div_4": size // 4, "minilm_tokens": wordpiece_tokens(text),
            "names": [t.name for t in tools]}


def _report(api: Any, as_json: bool) -> int:
    rows = {"default": measure(api, False), "all_tools": measure(api, True)}
    if as_json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'tools/list':<12} {'tools':>5} {'bytes':>7} {'bytes/4':>8} {'MiniLM tokens':>14}")
    for label, r in rows.items():
        print(f"{label:<12} {r['tools']:>5} {r['bytes']:>7} {r['bytes_div_4']:>8} {r['minilm_tokens'] or '-':>14}")
    hidden = sorted(set(rows["all_tools"]["names"]) - set(rows["default"]["names"]))
    print(f"hidden by default (scsql mcp --all-tools or SCSQL_MCP_TOOLS=all lists them): {', '.join(hidden) or 'none'}")
    return 0


def run(ctx, args: argparse.Namespace) -> int:
    if args.agent:
        agent = ctx.open_agent(args.agent, need_key=False, pool_size=1)
        try:
            return _report(ctx.api(agent), args.json)
        finally:
            agent.db.close()
    from .scratch_db import scratch

    with scratch(ctx.admin_conninfo(), "tools") as s:
        return _report(ctx.api(s.agent), args.json)


def register(bsub) -> None:
    p = bsub.add_parser("tools", help="size of the MCP tools' schemas (tools/list) in bytes and tokens")
    p.add_argument("--agent", help="measure this agent's tools (default: a fresh agent in a scratch database)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(bench_func=run)
