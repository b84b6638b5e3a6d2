"""The viewer's commands: ``scsql ui`` (the viewer and its /api/v1) and
``scsql report`` (a signed report of a period, and its verification).

Building the parser imports nothing the commands drive; each imports what it
needs when it runs.
"""

from __future__ import annotations

import argparse
from ..core import errors


def cmd_ui(ctx, args: argparse.Namespace) -> int:
    import secrets
    import socket

    from .source import open_source

    source = open_source(ctx, args.agent, args.auditor)
    token = args.token_file and _read_token(args.token_file) or secrets.token_urlsafe(32)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", args.port))
        sock.listen(128)  # connections wait for the server from the moment the address is printed
    except OSError as exc:
        source.close()
        from ..core.errors import ScsqlError

        raise ScsqlError(errors.INVALID_ARGUMENT, f"cannot listen on 127.0.0.1:{args.port}: {exc.strerror}",
                         "choose another --port (0 picks a free one)") from None
    port = sock.getsockname()[1]
    who = f"agent {source.name} (project {source.project})" if source.kind == "agent" else "the auditor (every project)"
    print(f"scsql ui: read-only viewer as {who}", flush=True)
    print(f"  http://127.0.0.1:{port}/?token={token}", flush=True)
    print(f"  API     http://127.0.0.1:{port}/api/v1/openapi.json  (header Authorization: Bearer {token})", flush=True)
    print("  Ctrl-C stops it", flush=True)
    try:
        serve(source, token, sock, port, poll=args.poll, settings=ctx.settings)
    finally:
        source.close()
    return 0


def serve(source, token: str, sock, port: int, poll: float = 5.0, settings=None) -> None:
    import uvicorn

    from .app import create_app

    app = create_app(source, token, port, poll_seconds=poll, settings=settings)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=2)
    uvicorn.Server(config).run(sockets=[sock])


def _read_token(path: str) -> str:
    from pathlib import Path

    token = Path(path).read_text().strip()
    if len(token) < 16:
        from ..core.errors import ScsqlError

        raise ScsqlError(errors.INVALID_ARGUMENT, f"--token-file {path}: a token is at least 16 characters")
    return token


def cmd_report(ctx, args: argparse.Namespace) -> int:
    from . import report

    if args.verb == "verify":
        if not args.file:
            from ..core.errors import ScsqlError

            raise ScsqlError(errors.INVALID_ARGUMENT, "scsql report verify FILE: name the report to check")
        return report.cmd_verify(ctx, args)
    if args.file:
        from ..core.errors import ScsqlError

        raise ScsqlError(errors.INVALID_ARGUMENT, f"unexpected argument {args.file!r}", "scsql report verify FILE checks a report")
    return report.cmd_write(ctx, args)


def _positive(text: str) -> float:
    from ..core.command import positive_seconds

    return positive_seconds(text)


def register(commands) -> None:
    add = commands.add
    p = add("ui", cmd_ui, "a read-only web viewer on 127.0.0.1 (sessions, timelines, memory, queue, audit, cost, "
                          "health) and its JSON API /api/v1, as one agent or the auditor, behind a token")
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--agent", help="show what this agent may read (its project)")
    who.add_argument("--auditor", action="store_true",
                     help="show everything, as role scsql_auditor on the administrator's login (changes nothing)")
    p.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (0: a free one)")
    p.add_argument("--poll", type=_positive, default=5.0,
                   help="seconds between polls of an open live timeline when no NOTIFY arrives")
    p.add_argument("--token-file", metavar="FILE", help="read the access token from FILE (default: a new random one)")

    p = add("report", cmd_report, "write a report of a period (who did what, verification, redactions, memory "
                                  "changes, cost) as signed JSON or HTML; scsql report verify FILE checks one")
    p.add_argument("verb", nargs="?", choices=["verify"], help="verify: check a report's signature")
    p.add_argument("file", nargs="?", help="with verify: the report (JSON, or the HTML it was written as)")
    p.add_argument("--since", help="from this time (ISO 8601; default 7 days ago)")
    p.add_argument("--until", help="until this time, exclusive (default now)")
    p.add_argument("--project", help="only this project")
    who = p.add_mutually_exclusive_group()
    who.add_argument("--agent", help="as this agent (its project's rows; signed with its key)")
    who.add_argument("--auditor", action="store_true",
                     help="as the auditor (every project, with verification; signed with the auditor key; the default)")
    p.add_argument("--format", choices=("json", "html"), default="json", help="JSON (signed) or HTML (the same content, signed inside)")
    p.add_argument("-o", "--output", metavar="FILE", help="write it to FILE (default: standard output)")
    p.add_argument("--public-key", metavar="HEX", help="with verify: the signer's public key you trust (hex)")
