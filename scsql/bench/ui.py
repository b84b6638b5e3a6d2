"""``scsql bench ui``: how fast the viewer serves each page's first screen, beside
a ``select 1`` round trip measured in the same run on the same server.

A scratch database gets 10,000 sessions (spread over 30 days) and 100,000
tool calls (one session holding 5,000 events: tool calls, prompts and model
messages), written as the owner through the chain trigger (so every row is
chained; the signatures are random bytes, which the SQL side does not check).
Then ``scsql ui`` runs as its own process, as the auditor (every project: no
row-level security narrows a plan) or with --agent as the agent that wrote the
rows, and each page is fetched N times: p50 and p95 per page, the round trip,
and the viewer process's resident memory at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

SESSIONS = 10_000
TOOL_CALLS = 100_000
BIG = 5_000  # events of the one long session

FILL = """
insert into scsql.sessions (project_id, author_id, client, model, title, at, occurred_at, key_id, signature)
select %(p)s, %(a)s, 'claude-code', 'claude-sonnet-4-5', 'bench session ' || g, clock_timestamp(),
       now() - interval '30 days' + g * interval '259 seconds', %(k)s, scsql._bench_sig()
from generate_series(%(lo)s::integer, %(hi)s::integer) g;
"""


BATCH = 2000  # rows a statement: the chain head's row updated once a row, so each transaction stays short


def _batched(conn, sql: str, params: dict, n: int) -> None:
    """SQL (over generate_series(%(lo)s::integer, %(hi)s::integer) g) in statements of BATCH rows, each its own transaction."""
    for lo in range(1, n + 1, BATCH):
        conn.execute(sql, {**params, "lo": lo, "hi": min(n, lo + BATCH - 1)})


def _fill(conn, project: int, agent: int, key: int, big: int) -> int:
    """Sessions, tool calls, and the long session's prompts and model messages, as the owner."""
    conn.execute("create function scsql._bench_sig() returns bytea language sql as "
                 "$$ select decode(md5(random()::text) || md5(random()::text) || md5(random()::text) "
                 "|| md5(random()::text), 'hex') $$")
    _batched(conn, FILL, {"p": project, "a": agent, "k": key}, SESSIONS - 1)
    _batched(conn, FILL.replace("'bench session ' || g", "'the long session'"), {"p": project, "a": agent, "k": key}, 1)
    big_sid = conn.execute("select max(session_id) as s from scsql.sessions").fetchone()["s"]
    many = TOOL_CALLS - (BIG - 1000)
    _batched(conn,
        "insert into scsql.tool_calls (project_id, author_id, session_id, tool, status, latency_ms, input_preview, "
        "output_preview, occurred_at, at, key_id, signature) "
        "select %(p)s, %(a)s, 1 + (g %% (%(s)s - 1)), (array['Bash','Read','Edit','Grep'])[1 + g %% 4], "
        "case when g %% 17 = 0 then 'error' else 'ok' end, 20 + g %% 80, '{\"command\": \"make test-' || g %% 300 || '\"}', "
        "'result ' || g, now() - interval '30 days' + g * interval '25 seconds', clock_timestamp(), %(k)s, scsql._bench_sig() "
        "from generate_series(%(lo)s::integer, %(hi)s::integer) g", {"p": project, "a": agent, "k": key, "s": SESSIONS}, many)
    _batched(conn,
        "insert into scsql.tool_calls (project_id, author_id, session_id, tool, status, latency_ms, input_preview, "
        "occurred_at, at, key_id, signature) "
        "select %(p)s, %(a)s, %(b)s, 'Bash', case when g %% 13 = 0 then 'error' else 'ok' end, 50, "
        "'{\"command\": \"step ' || g || '\"}', now() - interval '1 day' + g * interval '10 seconds', clock_timestamp(), %(k)s, "
        "scsql._bench_sig() from generate_series(%(lo)s::integer, %(hi)s::integer) g", {"p": project, "a": agent, "b": big_sid, "k": key},
             BIG - 1000)
    _batched(conn,
        "insert into scsql.prompts (project_id, author_id, session_id, text, occurred_at, at, key_id, signature) "
        "select %(p)s, %(a)s, %(b)s, 'prompt ' || g, now() - interval '1 day' + g * interval '80 seconds', clock_timestamp(), %(k)s, "
        "scsql._bench_sig() from generate_series(%(lo)s::integer, %(hi)s::integer) g", {"p": project, "a": agent, "b": big_sid, "k": key}, 500)
    _batched(conn,
        "insert into scsql.model_calls (project_id, author_id, session_id, message_id, model, input_tokens, output_tokens, "
        "cache_read_tokens, occurred_at, cost_usd, at, key_id, signature) "
        "select %(p)s, %(a)s, %(b)s, 'msg_' || g, 'claude-sonnet-4-5', 100, 200, 5000, "
        "now() - interval '1 day' + g * interval '80 seconds' + interval '5 seconds', 0.0048, clock_timestamp(), %(k)s, "
        "scsql._bench_sig() from generate_series(%(lo)s::integer, %(hi)s::integer) g", {"p": project, "a": agent, "b": big_sid, "k": key}, 500)
    conn.execute("drop function scsql._bench_sig()")
    return big_sid


def _pages(big: int, project: str) -> dict[str, str]:
    return {"sessions": "/sessions", "sessions (failed)": "/sessions?status=failed",
            "timeline (5,000 events)": f"/sessions/{big}", "timeline, later page": f"/sessions/{big}?after=__CURSOR__",
            "memory": "/memory", "coordination": "/coordination", "audit": "/audit", "cost (30 days)": "/cost",
            "health": "/health", "api sessions": "/api/v1/sessions?limit=50",
            "api timeline": f"/api/v1/timeline?session={big}&limit=200", "api cost by day": "/api/v1/cost?group=day"}


def _timed(url: str, token: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
        t0 = time.perf_counter()
        with urllib.request.urlopen(req, timeout=60) as r:
            r.read()
            assert r.status == 200, url
        out.append((time.perf_counter() - t0) * 1000)
    return out


def _quantiles(ms: list[float]) -> tuple[float, float]:
    ms = sorted(ms)
    return statistics.median(ms), ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))]


def run(ctx, args: argparse.Namespace) -> int:
    import psycopg
    from psycopg.rows import dict_row

    from ..core.config import APP_ROLE
    from .scratch_db import ScratchDatabase, exit_on_sigterm, with_db

    scratch = ScratchDatabase(ctx.admin_conninfo(), "ui")
    scratch.keep = args.keep
    with exit_on_sigterm():
        try:
            scratch.create()
            name = scratch.add_agent("ui_bench_" + secrets.token_hex(2))
            t0 = time.perf_counter()
            with psycopg.connect(scratch.admin, row_factory=dict_row, autocommit=True) as conn:
                conn.execute("set role scsql_owner")  # each statement its own transaction: a row's time stays near the clock
                ids = conn.execute("select a.agent_id, a.project_id, (select max(key_id) from scsql.agent_keys k "
                                   "where k.agent_id = a.agent_id) as key_id from scsql.agents a where a.name = %s",
                                   (name,)).fetchone()
                big = _fill(conn, ids["project_id"], ids["agent_id"], ids["key_id"], BIG)
            with psycopg.connect(scratch.admin, autocommit=True) as conn:
                conn.execute("vacuum analyze")
            print(f"filled {SESSIONS:,} sessions, {TOOL_CALLS:,} tool calls, a session of {BIG:,} events "
                  f"in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
            env = {**os.environ, "SCSQL_DSN": scratch.admin, "SCSQL_AGENT_DSN": with_db(scratch.server_admin, scratch.name, APP_ROLE),
                   "SCSQL_KEYSTORE": str(scratch.keystore.directory)}
            who = ["--agent", name] if args.agent else ["--auditor"]
            return _measure(env, who, big, scratch.project, args)
        finally:
            scratch.drop()


def _measure(env: dict, who: list[str], big: int, project: str, args: argparse.Namespace) -> int:
    import psycopg

    token = secrets.token_urlsafe(24)
    tokfile = Path(env["SCSQL_KEYSTORE"]) / "ui.token"
    tokfile.write_text(token)
    proc = subprocess.Popen([sys.executable, "-m", "scsql", "ui", *who, "--port", "0", "--token-file", str(tokfile)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        base = None
        for line in proc.stdout:
            if "http://127.0.0.1:" in line and "/?token=" in line:
                base = line.strip().split("/?token=")[0]
                break
        if base is None:
            raise RuntimeError(f"scsql ui did not start: {proc.stderr.read()}")
        with psycopg.connect(env["SCSQL_DSN"]) as conn:
            rt = []
            for _ in range(200):
                t0 = time.perf_counter()
                conn.execute("select 1").fetchone()
                rt.append((time.perf_counter() - t0) * 1000)
        api = json.loads(urllib.request.urlopen(urllib.request.Request(
            f"{base}/api/v1/timeline?session={big}&limit=200", headers={"Authorization": f"Bearer {token}"})).read())
        results = {}
        for label, path in _pages(big, project).items():
            url = base + path.replace("__CURSOR__", api[-1]["cursor"])
            _timed(url, token, 2)  # warm
            results[label] = _quantiles(_timed(url, token, args.n))
        rss = _rss_mb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(10)
    p50, p95 = _quantiles(rt)
    report = {"select_1_ms": {"p50": round(p50, 3), "p95": round(p95, 3)}, "viewer_rss_mb": round(rss, 1),
              "as": " ".join(who), "pages_ms": {k: {"p50": round(a, 1), "p95": round(b, 1)} for k, (a, b) in results.items()}}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"scsql bench ui: {SESSIONS:,} sessions, {TOOL_CALLS:,} tool calls, one session of {BIG:,} events; "
          f"viewer as {' '.join(who).removeprefix('--')}; {args.n} requests a page")
    print(f"  select 1 round trip   p50 {p50:7.2f} ms   p95 {p95:7.2f} ms")
    for label, (a, b) in results.items():
        print(f"  {label:<24} p50 {a:7.1f} ms   p95 {b:7.1f} ms   ({b / max(p95, 1e-6):,.0f}x the round trip)")
    print(f"  viewer process resident memory: {rss:.0f} MB")
    return 0


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def register(bsub) -> None:
    p = bsub.add_parser("ui", help="the viewer's first screen per page (p50, p95) beside a select 1 round trip, "
                                   "over 10,000 sessions and 100,000 tool calls; the viewer's memory")
    p.add_argument("-n", type=int, default=30, help="requests a page")
    p.add_argument("--agent", action="store_true", help="run the viewer as the agent that wrote the rows "
                                                         "(default: the auditor)")
    p.add_argument("--keep", action="store_true", help="keep the scratch database (its name is printed)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(bench_func=run)
