"""Query embeddings from a process that already runs the model.

Loading the default model (numpy, onnxruntime, the tokenizer, the session)
costs a command seconds, every time: ``scsql search`` spent most of its
time there. So a serving ``scsql worker`` (the background worker of ``scsql
up``, or one started by hand; not ``--once``) also answers query embeddings
on ``DATA_DIR/workers/embed.sock``: one worker per data directory, the one
holding ``DATA_DIR/workers/embed.lock``. A search that is given the data
directory (every agent a command opens) asks it first, and embeds the
query itself only when no worker answers, or one answers with another
model than its own.

The protocol is one JSON line each way, over a unix socket (0600) in a
directory only its user may enter, from this user's processes only::

    {"texts": ["..."]}
    {"pin": "<model> <sha256 of its files>", "model": "<name>", "vectors": ["[0.1,...]"]}
    {"error": "..."}

Vectors travel as pgvector's text form, which the search binds as it is: the
asking process imports neither numpy nor the model. The client side uses
the standard library only.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import threading
from pathlib import Path
from collections.abc import Callable
from typing import Any

from ..hooks import hookclient

log = logging.getLogger("scsql.embed")

SOCKET = "embed.sock"
LOCK = "embed.lock"
MAX_TEXTS = 16
MAX_CHARS = 2000  # the search's own bound on a query
MAX_LINE = 1 << 17
ASK_SECONDS = 8.0  # a worker whose model is not loaded loads it first: seconds on a busy machine


def socket_path(home: str | Path) -> Path:
    return Path(home) / "workers" / SOCKET


# -- the worker's side ---------------------------------------------------------


def serve(home: str | Path | None, provider: Any, pin: str,
          literal: Callable[[Any], str]) -> threading.Thread | None:
    """Answer query embeddings with PROVIDER (whose files PIN names), each
    vector in the text form LITERAL gives it, on HOME's socket, in a daemon thread, unless another process of HOME does;
    the thread, or None."""
    if home is None or provider is None:
        return None
    directory = Path(hookclient.private_dir(str(Path(home) / "workers")))
    fd = os.open(directory / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held while this process lives
    except BlockingIOError:
        os.close(fd)
        return None
    listener = _bind(socket_path(home))  # the lock (FD) stays held: it is never closed
    thread = threading.Thread(target=_accept, args=(listener, provider, pin, literal), name="scsql-embed-service",
                              daemon=True)
    thread.start()
    return thread


def _bind(path: Path) -> socket.socket:
    """A listening socket at PATH, 0600, put in place whole (a stale one of a dead worker replaced)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    address, dir_fd = hookclient.unix_address(str(tmp))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o077)
    try:
        tmp.unlink(missing_ok=True)
        s.bind(address)
    finally:
        os.umask(old)
        if dir_fd is not None:
            os.close(dir_fd)
    os.chmod(tmp, 0o600)
    s.listen(16)
    os.replace(tmp, path)
    return s


def _accept(listener: socket.socket, provider: Any, pin: str, literal: Callable[[Any], str]) -> None:
    while True:
        conn, _ = listener.accept()
        with conn:
            try:
                _answer(conn, provider, pin, literal)
            except Exception as exc:  # noqa: BLE001 - one bad request never stops the service
                log.warning("embedding service: %r", exc)


def _answer(conn: socket.socket, provider: Any, pin: str, literal: Callable[[Any], str]) -> None:
    if hookclient.peer_uid(conn) not in (None, os.getuid()):
        return
    conn.settimeout(10.0)
    request = _read_line(conn)
    texts = request.get("texts") if isinstance(request, dict) else None
    if (not isinstance(texts, list) or not 0 < len(texts) <= MAX_TEXTS
            or not all(isinstance(t, str) and len(t) <= MAX_CHARS for t in texts)):
        reply: dict = {"error": f"texts must be 1 to {MAX_TEXTS} strings of at most {MAX_CHARS} characters"}
    else:
        try:
            reply = {"pin": pin, "model": provider.name,
                     "vectors": [literal(v) for v in provider.embed(texts)]}
        except Exception as exc:  # noqa: BLE001 - said to the asking process, which embeds itself
            reply = {"error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}
    conn.sendall((json.dumps(reply) + "\n").encode())


def _read_line(conn: socket.socket) -> Any:
    data = bytearray()
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk or len(data) + len(chunk) > MAX_LINE:
            return None
        data += chunk
    return json.loads(data)


# -- the asking side -------------------------------------------------------------


def ask(home: str | Path | None, texts: list[str], pin: str, timeout: float = ASK_SECONDS) -> list[str] | None:
    """TEXTS embedded by HOME's worker, as pgvector text, when one serves
    them with the model PIN names; None otherwise (no worker, another model,
    a directory another user controls, an error: the caller embeds itself)."""
    if home is None:
        return None
    path = socket_path(home)
    try:
        if hookclient.check_private(str(path.parent)).st_mode & 0o022 or not path.is_socket():
            return None
    except OSError:
        return None
    address, dir_fd = hookclient.unix_address(str(path))
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(address)
            if hookclient.peer_uid(s) not in (None, os.getuid()):
                return None
            s.sendall((json.dumps({"texts": texts}) + "\n").encode())
            reply = _read_line(s)
    except (OSError, ValueError) as exc:
        log.debug("no embedding from %s: %r", path, exc)
        return None
    finally:
        if dir_fd is not None:
            os.close(dir_fd)
    if not isinstance(reply, dict) or reply.get("pin") != pin:
        return None
    vectors = reply.get("vectors")
    if not isinstance(vectors, list) or len(vectors) != len(texts) or not all(isinstance(v, str) for v in vectors):
        return None
    return vectors
