"""What the viewer's tests share: a real scsql ui server (uvicorn on a free
port of 127.0.0.1, in a thread) over a Source, and plain HTTP requests to it."""

from __future__ import annotations

import json
import secrets
import socket
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **kw):
        return None


class RunningViewer:
    """scsql ui over SOURCE, as ``scsql ui`` serves it, until ``stop()``."""

    def __init__(self, source, poll: float = 5.0):
        import uvicorn

        from scsql.ui.app import create_app

        self.source = source
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.token = secrets.token_urlsafe(24)
        self.app = create_app(source, self.token, self.port, poll_seconds=poll)
        self.server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", lifespan="on", access_log=False))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "the viewer did not start"
            time.sleep(0.02)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def state(self) -> dict:
        return self.app.app.state.viewer

    def get(self, path: str, token: bool = True, headers: dict | None = None) -> Reply:
        h = {"Authorization": f"Bearer {self.token}"} if token else {}
        req = urllib.request.Request(self.base + path, headers={**h, **(headers or {})})
        opener = urllib.request.build_opener(NoRedirect)
        try:
            with opener.open(req, timeout=30) as r:
                return Reply(r.status, dict(r.headers), r.read())
        except urllib.error.HTTPError as e:
            return Reply(e.code, dict(e.headers), e.read())

    def api(self, path: str, **query: Any) -> Any:
        from urllib.parse import urlencode

        reply = self.get(f"/api/v1/{path}" + (f"?{urlencode(query, doseq=True)}" if query else ""))
        assert reply.status == 200, (reply.status, reply.text)
        return reply.json()

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)
        self.source.close()
