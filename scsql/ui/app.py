"""The viewer as a Starlette application: the pages, ``/api/v1`` and its
OpenAPI description, live timelines (server-sent events), behind a token.

Every request must carry the token printed with the URL: ``?token=`` (a page
then sets it as a SameSite=Strict, HttpOnly cookie and redirects to the
address without it), the cookie, or ``Authorization: Bearer``; anything else
gets 401. Only the address it was opened on is served (a request naming
another Host is refused, so a web page cannot reach it through DNS
rebinding). Every response carries a strict Content-Security-Policy: scripts
and styles only from /static, no inline script, no framing; every stored
text is escaped by Jinja2's autoescaping, and no stored text is ever put in
a link's address.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import select
import threading
import time
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

from .http import HEADERS, HERE
from .source import Source
from ..core import errors


class Guard:
    """ASGI middleware: the Host check, the token, and the security headers on every response."""

    def __init__(self, app, token: str, hosts: set[str], cookie: str):
        self.app, self.token, self.hosts, self.cookie = app, token, hosts, cookie

    def _given(self, scope) -> tuple[str | None, bool]:
        """The token a request carries, and whether it came in the query string."""
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        headers = dict(scope["headers"])
        auth = headers.get(b"authorization", b"").decode("latin-1")
        if auth.startswith("Bearer "):
            return auth[7:].strip(), False
        if "token" in query:
            return query["token"], True
        jar = SimpleCookie(headers.get(b"cookie", b"").decode("latin-1"))
        return (jar[self.cookie].value if self.cookie in jar else None), False

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def secured(message):
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        if host not in self.hosts:
            return await _plain(secured, 400, errors.VIEWER_TOKEN_REQUIRED, f"this viewer answers only at {' or '.join(sorted(self.hosts))}")
        given, in_query = self._given(scope)
        if given is None or not hmac.compare_digest(given.encode(), self.token.encode()):
            return await _plain(secured, 401, errors.VIEWER_TOKEN_REQUIRED, "a token is required: open the URL scsql ui printed",
                                api=scope["path"].startswith("/api/"))
        if in_query and not scope["path"].startswith("/api/") and scope["method"] == "GET":
            rest = urlencode([(k, v) for k, v in parse_qsl(scope["query_string"].decode("latin-1")) if k != "token"])
            where = scope["path"] + (f"?{rest}" if rest else "")
            cookie = f"{self.cookie}={self.token}; Path=/; HttpOnly; SameSite=Strict"
            return await _send(secured, 303, b"", "text/plain", [(b"location", where.encode()),
                                                                  (b"set-cookie", cookie.encode())])
        return await self.app(scope, receive, secured)


async def _send(send, status: int, body: bytes, ctype: str, extra: list | None = None) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", ctype.encode()), (b"content-length", str(len(body)).encode()), *(extra or [])]})
    await send({"type": "http.response.body", "body": body})


async def _plain(send, status: int, code: str, message: str, api: bool = True) -> None:
    if api:
        body = json.dumps({"error": {"code": code, "name": "viewer_token_required", "message": message}}).encode()
        return await _send(send, status, body, "application/json")
    from html import escape

    page = (f"<!doctype html><html><head><meta charset=utf-8><title>scsql ui</title></head><body>"
            f"<h1>{status}</h1><p>{escape(code)}: {escape(message)}</p></body></html>")
    await _send(send, status, page.encode(), "text/html; charset=utf-8")


class Wakeups:
    """Wakes the open live timelines: set from the LISTEN thread, awaited by
    each stream (with a timeout: polling is the fallback)."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.event: asyncio.Event | None = None
        self.count = 0

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop, self.event = loop, asyncio.Event()

    def fire(self) -> None:
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self._fire)

    def _fire(self) -> None:
        self.count += 1
        event, self.event = self.event, asyncio.Event()
        event.set()

    async def wait(self, timeout: float) -> bool:
        """Whether a notification came before TIMEOUT seconds."""
        event = self.event
        try:
            await asyncio.wait_for(event.wait(), timeout)
            return True
        except TimeoutError:
            return False


class Listener(threading.Thread):
    """LISTENs on the identity's events channels (scsql.viewer_channels) on a
    connection of its own; each notification wakes the live timelines. It
    reconnects after a lost connection; the timelines poll meanwhile."""

    def __init__(self, source: Source, wakeups: Wakeups):
        super().__init__(name="scsql-ui-listen", daemon=True)
        self.source, self.wakeups = source, wakeups
        self.stopped = threading.Event()
        self.listening = threading.Event()

    def run(self) -> None:
        import psycopg
        from psycopg import sql

        while not self.stopped.is_set():
            try:
                channels = self.source.channels()
                with psycopg.connect(self.source.db.conninfo, autocommit=True,
                                     application_name=f"{self.source.db.application_name}:listen") as conn:
                    for ch in channels:
                        conn.execute(sql.SQL("listen {}").format(sql.Identifier(ch)))
                    self.listening.set()
                    while not self.stopped.is_set():
                        ready, _, _ = select.select([conn.fileno()], [], [], 1.0)
                        if ready and any(True for _ in conn.notifies(timeout=0)):
                            self.wakeups.fire()
            except Exception:  # the database went away: polling carries on; try again
                self.listening.clear()
                self.stopped.wait(2.0)


def create_app(source: Source, token: str, port: int, *, poll_seconds: float = 5.0, listen: bool = True,
               settings: Any = None):
    """The viewer of SOURCE at 127.0.0.1:PORT behind TOKEN."""
    from contextlib import asynccontextmanager

    from starlette.applications import Starlette
    from starlette.routing import Mount
    from starlette.staticfiles import StaticFiles

    from . import api, pages

    wakeups = Wakeups()
    listener = Listener(source, wakeups) if listen else None

    @asynccontextmanager
    async def lifespan(app):
        wakeups.bind(asyncio.get_running_loop())
        if listener is not None:
            listener.start()
        yield
        if listener is not None:
            listener.stopped.set()

    state = {"source": source, "wakeups": wakeups, "poll": poll_seconds, "listener": listener, "settings": settings,
             "started": time.time()}
    routes = [*api.routes(state), *pages.routes(state),
              Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static")]
    app = Starlette(routes=routes, lifespan=lifespan,
                    exception_handlers={404: pages.not_found, 405: pages.not_found})
    app.state.viewer = state
    hosts = {f"127.0.0.1:{port}", f"localhost:{port}"}
    return Guard(app, token, hosts, cookie=f"scsql_ui_{port}")

