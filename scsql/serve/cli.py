"""``scsql serve`` (the team server) and ``scsql agent token create | list |
revoke`` (its bearer tokens).

Building the parser imports nothing of the server: each command imports
what it drives when it runs.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..core.command import Commands

DEFAULT_PORT = 8765
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def cmd_serve(ctx, args: argparse.Namespace) -> int:
    import logging
    import os
    import socket

    import uvicorn

    from ..core import errors
    from ..core.errors import ScsqlError
    from . import app, hooks

    if bool(args.tls_cert) != bool(args.tls_key):
        raise ScsqlError(errors.INVALID_ARGUMENT, "--tls-cert and --tls-key go together",
                         "give both, or neither (then terminate TLS in a reverse proxy in front of the server)")
    for path in filter(None, (args.tls_cert, args.tls_key)):
        if not os.path.isfile(path):
            raise ScsqlError(errors.INVALID_ARGUMENT, f"{path}: no such file", "name the PEM certificate and key files")
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="scsql serve: %(message)s")
    limits = app.Limits(rate=args.rate, burst=args.burst, max_request_bytes=args.max_request_bytes)
    registry = app.Registry(ctx.agent_conninfo, ctx.keystore, ctx.api, pool_size=args.pool,
                            all_tools=args.all_tools)
    gate = app.build(registry, hooks.HookEndpoints(registry), limits, host=args.host, threads=args.threads)
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.create_server((args.host, args.port), family=family, backlog=1024)
    port = sock.getsockname()[1]
    config = uvicorn.Config(gate, log_level="info" if args.verbose else "warning", access_log=args.verbose,
                            ssl_certfile=args.tls_cert, ssl_keyfile=args.tls_key, lifespan="on",
                            server_header=False, timeout_keep_alive=30)
    scheme = "https" if args.tls_cert else "http"
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"scsql serve: listening on {scheme}://{host}:{port} (MCP at /mcp, hook events at /hooks/event); "
          "each request acts as the agent its bearer token names; Ctrl-C stops it", flush=True)
    if args.host not in LOOPBACK and not args.tls_cert:
        print("scsql serve: warning: tokens cross the network in clear text; give --tls-cert and --tls-key, "
              "or put a TLS-terminating reverse proxy in front (docs/team-server.md)", file=sys.stderr, flush=True)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        registry.close()
        sock.close()
    return 0


def cmd_token(ctx, args: argparse.Namespace) -> int:
    from . import tokens

    admin = ctx.admin_conninfo()
    if args.token_action == "create":
        expires = tokens.expires_at(args.expires)
        token, row = tokens.create(admin, args.name, args.scope, expires, args.note)
        when = f"expires {row['expires_at']:%Y-%m-%d %H:%M %Z}" if row["expires_at"] else "never expires"
        print(f"scsql: token {row['token_id']} of agent {row['agent']} (project {row['project']}, scope "
              f"{row['scope']}) {when}; it is shown once, here, and the database keeps only its sha256:",
              file=sys.stderr)
        if not ctx.keystore.exists(args.name):
            print(f"scsql: warning: this data directory holds no key of agent {args.name}; a server started here "
                  "refuses its token (SC290): serve from the data directory that holds its key",
                  file=sys.stderr)
        print(token, flush=True)
    elif args.token_action == "list":
        rows = tokens.listed(admin, args.agent)
        if args.json:
            print(json.dumps(rows, indent=2, default=str))
            return 0
        print("id\tagent\tproject\tscope\tstate\tcreated\texpires\tlast_used\tnote")
        for r in rows:
            print(f"{r['token_id']}\t{r['agent']}\t{r['project']}\t{r['scope']}\t{r['state']}\t"
                  f"{_when(r['created_at'])}\t{_when(r['expires_at'], 'never')}\t{_when(r['last_used_at'])}\t"
                  f"{r['note'] or '-'}")
    else:
        at = tokens.revoke(admin, args.token_id)
        print(f"scsql: token {args.token_id} revoked at {at}; the server refuses it from its next request")
    return 0


def _when(value, none: str = "-") -> str:
    return f"{value:%Y-%m-%d %H:%M}" if value else none


def _bytes(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of bytes: {text!r}") from None
    if not 1024 <= value <= 1 << 30:
        raise argparse.ArgumentTypeError(f"must be from 1024 to {1 << 30} bytes, got {text}")
    return value


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value <= 1e6:
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 1000000, got {text}")
    return value


def _serve_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 or an interface's "
                        "address for a network, with --tls-cert/--tls-key or a TLS-terminating reverse proxy)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="port to listen on (0: any free port, printed)")
    p.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS with this certificate (chain) file")
    p.add_argument("--tls-key", metavar="PEM", help="the private key of --tls-cert")
    p.add_argument("--rate", type=_positive, default=20.0, help="requests a second each token may make, on average")
    p.add_argument("--burst", type=_positive, default=100.0, help="requests each token may make at once")
    p.add_argument("--max-request-bytes", type=_bytes, default=10 * 1024 * 1024,
                   help="largest request body taken (hook events are at most 8 MiB)")
    p.add_argument("--pool", type=int, default=16,
                   help="database connections shared by the agents that log in the same way")
    p.add_argument("--threads", type=int, default=32, help="calls running in the database at once, at most")
    p.add_argument("--all-tools", action="store_true",
                   help="also list the tools hooks do for agents (record_tool_call, start_session)")
    p.add_argument("-v", "--verbose", action="store_true", help="log every request and refusal on stderr")


def _token_commands(actions: argparse._SubParsersAction) -> None:
    """``scsql agent token ...``, added to the ``agent`` command's subcommands."""
    p = actions.add_parser("token", help="bearer tokens of the team server (scsql serve): create, list, revoke")
    p.set_defaults(func=cmd_token)
    tsub = p.add_subparsers(dest="token_action", metavar="ACTION", required=True)
    c = tsub.add_parser("create", help="make a token of agent NAME and print it, once (the database keeps its sha256)")
    c.add_argument("name", help="the agent the token acts as")
    c.add_argument("--expires", default="90d",
                   help="when it stops working: a span from now (90d, 12h, 30m, 2w), an ISO date or time, or never "
                        "(default 90d)")
    c.add_argument("--scope", choices=("agent", "tools", "hooks"), default="agent",
                   help="agent: MCP tools and hook events (default); tools: MCP only; hooks: hook events only")
    c.add_argument("--note", help="what the token is for (shown by token list)")
    c = tsub.add_parser("list", help="the tokens: agent, scope, state, created, expires, last used (never the token)")
    c.add_argument("--agent", help="only this agent's")
    c.add_argument("--json", action="store_true", help="print them as JSON")
    c = tsub.add_parser("revoke", help="revoke a token: the server refuses it from its next request")
    c.add_argument("token_id", type=int, metavar="ID", help="the token's id (scsql agent token list)")


def register(commands: Commands) -> None:
    commands.add("serve", cmd_serve, "the team server: MCP tools and hook events over HTTP for remote agents, each "
                                     "request acting as the agent its bearer token names", populate=_serve_options)
    _token_commands(commands.group("agent", "create, list, revoke agents, rotate their keys, issue their logins"))
