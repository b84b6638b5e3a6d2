"""The hook server: ``scsql hook serve --agent NAME``, one per (data
directory, agent), which the hook processes (``client.py``) talk to.

It holds the agent's key and a pool of connections, and answers one JSON
line per connection on ``<home>/hooks/<agent>.sock`` (0600, in a 0700
directory no other user controls, ``client.check_private``; a connection from
another user is closed unanswered; the protocol is in ``client.py``). Decision events go to
``handlers.handle`` on the connection's thread; capture-only events queue
for one writer thread, which hands everything that arrived meanwhile to
``handlers.capture`` in one transaction (group commit) and answers each
hook only after that commit, so an acknowledged event is written.

A lock file (``<home>/hooks/<agent>.lock``, flock) keeps one server per
agent: it is taken before anything heavy is imported, so the extra servers
that racing hooks start exit at once. When the database is down the server
answers at once (degraded: allow, no context), spools the events that record
something, and reconnects in the background; on reconnecting, at start, and
before it writes anything new, it replays the spool in order. It exits after
``--idle`` seconds without a request (30 minutes by default).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import importlib
import json
import os
import queue
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import client, events, spool
from ..core import errors

DEFAULT_IDLE_SECONDS = 1800.0
RECONNECT_SECONDS = 1.0
DB_TIMEOUT_SECONDS = 1.5
# For tests: a module with handle(agent, event) and capture(agent, events) used instead of scsql.hooks.handlers.
HANDLERS_ENV = "SCSQL_HOOK_HANDLERS"


def lock_path(home: str, agent: str) -> str:
    return os.path.join(home, "hooks", agent + ".lock")


def take_lock(home: str, agent: str) -> int | None:
    """The agent's server lock (a file descriptor), or None when another server holds it."""
    client.private_dir(os.path.join(home, "hooks"))
    fd = os.open(lock_path(home, agent), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def is_down(exc: BaseException) -> bool:
    """The database (or the connection to it) is gone, as opposed to a refused event."""
    from ..core.errors import is_unreachable

    return is_unreachable(exc)


# What the hook server cannot cure by waiting: the agent is unknown, revoked
# or has no usable key here. Events are then not spooled (no replay could
# write them); the hooks say what to do.
MISCONFIGURED = frozenset({errors.AGENT_REVOKED, errors.AGENT_UNKNOWN, errors.KEY_FILE_MISSING, errors.KEY_FILE_INSECURE, errors.AGENT_REQUIRED, errors.AGENT_LOGIN_PRIVILEGED, errors.SIGNING_KEY_INVALID})


def misconfiguration(exc: BaseException) -> str | None:
    """What is wrong when EXC says the agent cannot act here (not that the database is down)."""
    from ..core.errors import ScsqlError

    if isinstance(exc, ScsqlError) and exc.code in MISCONFIGURED:
        return f"{exc.message} ({exc.code}); run `scsql install claude` again for this agent"
    return None


def load_handlers():
    return importlib.import_module(os.environ.get(HANDLERS_ENV) or "scsql.hooks.handlers")


@dataclass
class _Pending:
    event: dict
    line: str
    done: threading.Event = field(default_factory=threading.Event)
    reply: dict | None = None


def _reply(output: dict | None = None, exit: int = 0, stderr: str | None = None,
           degraded: str | None = None) -> dict:
    return {"output": output, "exit": exit, "stderr": stderr, "degraded": degraded}


class HookServer:
    def __init__(self, home: str, agent_name: str, connect: Callable[[], Any], *, idle: float = DEFAULT_IDLE_SECONDS,
                 handlers=None, log: Callable[[str], None] = lambda m: print(f"scsql hook server: {m}",
                                                                              file=sys.stderr, flush=True)):
        self.home = home
        self.name = agent_name
        self.connect = connect  # () -> Agent; raises when the database cannot be reached
        self.idle = idle
        self.handlers = handlers or load_handlers()
        self.log = log
        self.agent = None
        self.down_reason: str | None = "not connected yet"
        self.misconfigured: str | None = None  # the agent cannot act here: nothing is spooled
        self.last_active = time.monotonic()
        self.stopping = threading.Event()
        self.captures: queue.Queue[_Pending] = queue.Queue()
        self.write_lock = threading.Lock()  # one writer of captures and the spool at a time
        self.connected = threading.Event()
        self.sock_path = client.socket_path(home, agent_name)
        self.listener: socket.socket | None = None
        self.inode: int | None = None

    # -- the database -------------------------------------------------------

    def _try_connect(self, replay: bool = True) -> bool:
        try:
            agent = self.connect()
            agent.db.pool.timeout = DB_TIMEOUT_SECONDS
        except Exception as exc:  # noqa: BLE001
            self._misconfigured(misconfiguration(exc))
            self._lost(exc)
            return False
        self.agent = agent
        self._misconfigured(None)
        self.down_reason = None
        self.connected.set()
        self.log(f"connected as agent {self.name}")
        self._forget_notices()
        if replay:
            self.replay()
        return True

    def _misconfigured(self, wrong: str | None) -> None:
        """Record (or clear) what keeps the agent from acting here, in the
        marker file the hook client reads before it spools an event."""
        if wrong == self.misconfigured:
            return
        self.misconfigured = wrong
        marker = os.path.join(self.home, "hooks", self.name + ".misconfigured")
        if wrong is None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(marker)
            return
        self.log(wrong)
        tmp = marker + f".{os.getpid()}"
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as f:
            f.write(wrong + "\n")
        os.rename(tmp, marker)

    def _forget_notices(self) -> None:
        """The degraded state is over: a later one is told again, once per Claude session."""
        notified = os.path.join(self.home, "hooks", self.name + ".notified")
        try:
            names = os.listdir(notified)
        except FileNotFoundError:
            return
        for name in names:
            try:
                os.unlink(os.path.join(notified, name))
            except FileNotFoundError:
                pass

    def _lost(self, exc: BaseException) -> None:
        first = self.down_reason is None
        self.down_reason = f"the database is unreachable: {str(exc).splitlines()[0] if str(exc) else repr(exc)}"
        self.connected.clear()
        if first:
            self.log(self.down_reason)

    def _reconnector(self) -> None:
        while not self.stopping.is_set():
            try:
                self._reconnect_once()
            except Exception as exc:  # noqa: BLE001 - keep reconnecting
                self.log(f"reconnecting: {exc!r}")
            self.stopping.wait(RECONNECT_SECONDS)

    def _reconnect_once(self) -> None:
        if not self.connected.is_set():
            if self.agent is not None:
                try:
                    self.agent.db.close()
                except Exception:  # noqa: BLE001
                    pass
                self.agent = None
            self._try_connect()
        elif spool.has_pending(self.home, self.name):
            self.replay()

    def replay(self) -> int:
        """Write the spool (in order, once); False-y when the database went away meanwhile."""
        agent = self.agent
        if agent is None:
            return 0
        with self.write_lock:
            try:
                n = spool.replay(self.home, self.name, lambda evs: self.handlers.capture(agent, evs),
                                 is_down=is_down, stub=self._stub_writer(agent),
                                 on_failed=lambda p, e: self.log(f"spool file {p.name}: not even a stub was stored: {e}"))
            except Exception as exc:  # noqa: BLE001
                if is_down(exc):
                    self._lost(exc)
                    return 0
                raise
        if n:
            self.log(f"replayed {n} spooled event(s)")
        return n

    def _stub_writer(self, agent):
        """Stores events the database refused as stub rows (handlers.capture_stubs)."""
        stubs = getattr(self.handlers, "capture_stubs", None)
        if stubs is None:
            return None

        def write(evs, exc):
            self.log(f"stored {len(evs)} refused event(s) as stubs: {exc}")
            stubs(agent, evs, exc)
        return write

    # -- answering ----------------------------------------------------------

    def answer(self, request: dict) -> dict:
        event = request.get("event")
        if not isinstance(event, dict):
            return _reply(exit=0, stderr="scsql hook server: the request has no event")
        row = events.BY_NAME.get(event.get("hook_event_name"))
        if row is None:
            return _reply(stderr=f"scsql hook server: unknown event {event.get('hook_event_name')!r}")
        line = json.dumps(event)
        agent = self.agent
        if self.misconfigured:
            return {**_reply(degraded=self.misconfigured), "spooled": False}
        if agent is None or not self.connected.is_set():
            return self._degraded(row, [line])
        if row.capture_only:
            pending = _Pending(event, line)
            self.captures.put(pending)
            pending.done.wait()
            return pending.reply or _reply()
        if row.spooled and spool.has_pending(self.home, self.name):
            self.replay()  # what happened before this event is written before it
        try:
            result = self.handlers.handle(agent, event)
        except Exception as exc:  # noqa: BLE001
            if is_down(exc):
                self._lost(exc)
                return self._degraded(row, [line])
            self.log(f"{row.name}: {exc}")
            return _reply(degraded=f"its {row.name} handler failed: {str(exc).splitlines()[0] if str(exc) else exc!r}")
        if result is None:
            return _reply()
        if getattr(result, "spool", None):  # what it captured was refused: replayed, stored as a stub at worst
            self._degraded(row, [json.dumps(e) for e in result.spool])
        return _reply(result.output, result.exit if result.exit in (0, 2) else 0, result.stderr)

    def _degraded(self, row, lines: list[str]) -> dict:
        reason = self.down_reason or "the database is unreachable"
        if row.spooled:
            try:
                client.spool_write(self.home, self.name, lines)
            except OSError as exc:
                self.log(f"cannot spool: {exc}")
                return _reply(degraded=f"{reason}; the event could not be spooled ({exc})")
        return _reply(degraded=reason)

    def _writer(self) -> None:
        while not self.stopping.is_set():
            try:
                first = self.captures.get(timeout=0.5)
            except queue.Empty:
                continue
            batch = [first]
            while True:
                try:
                    batch.append(self.captures.get_nowait())
                except queue.Empty:
                    break
            try:
                self._write(batch)
            except Exception as exc:  # noqa: BLE001 - every waiting hook gets an answer
                self.log(f"writing captured events: {exc!r}")
                for p in batch:
                    if not p.done.is_set():
                        p.reply = _reply(degraded=f"its hook server failed: {exc!r}")
                        p.done.set()

    def _write(self, batch: list[_Pending]) -> None:
        row = events.BY_NAME[batch[0].event["hook_event_name"]]
        if self.connected.is_set() and spool.has_pending(self.home, self.name):
            self.replay()  # what was spooled before these events is written before them
        with self.write_lock:
            agent = self.agent
            if agent is None or not self.connected.is_set():
                reply = self._degraded(row, [p.line for p in batch])
                for p in batch:
                    p.reply = reply
                    p.done.set()
                return
            try:
                self.handlers.capture(agent, [p.event for p in batch])
                reply = _reply()
            except Exception as exc:  # noqa: BLE001
                if is_down(exc):
                    self._lost(exc)
                    reply = self._degraded(row, [p.line for p in batch])
                elif len(batch) > 1:
                    reply = None
                else:  # refused: spooled, and its replay stores it (as a stub if nothing cures it)
                    self.log(f"{row.name} refused, spooled: {exc}")
                    try:
                        client.spool_write(self.home, self.name, [p.line for p in batch])
                        reply = _reply()
                    except OSError as err:
                        reply = _reply(degraded=f"the event was refused ({str(exc).splitlines()[0]}) "
                                                f"and could not be spooled ({err})")
        if reply is None:  # one refused event in the batch: write them one by one
            for p in batch:
                self._write([p])
            return
        for p in batch:
            p.reply = reply
            p.done.set()

    # -- the socket ---------------------------------------------------------

    def _serve_connection(self, conn: socket.socket) -> None:
        with conn:
            peer = client.peer_uid(conn)
            if peer is not None and peer != os.getuid():
                self.log(f"refused a connection from user {peer}")
                return
            try:
                conn.settimeout(10.0)
                data = bytearray()
                while not data.endswith(b"\n"):
                    chunk = conn.recv(1 << 20)
                    if not chunk:
                        return  # the hook went away before sending a whole request
                    data += chunk
                    if len(data) > client.MAX_EVENT_BYTES + 4096:
                        return
                request = json.loads(data)
                reply = self.answer(request if isinstance(request, dict) else {})
            except Exception as exc:  # noqa: BLE001
                self.log(f"bad request: {exc!r}")
                reply = _reply(degraded=f"its hook server failed: {exc!r}")
            finally:
                self.last_active = time.monotonic()
            try:
                conn.sendall((json.dumps(reply, default=str) + "\n").encode())
            except OSError:
                pass

    def bind(self) -> None:
        hooks = client.private_dir(os.path.join(self.home, "hooks"))
        tmp = os.path.join(hooks, f".{self.name}.{os.getpid()}.sock")
        address, dir_fd = client.unix_address(tmp)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o077)
        try:
            if os.path.exists(tmp):
                os.unlink(tmp)
            s.bind(address)
        finally:
            os.umask(old)
            if dir_fd is not None:
                os.close(dir_fd)
        os.chmod(tmp, 0o600)
        s.listen(128)
        os.rename(tmp, self.sock_path)  # published whole: a hook never meets a half-made socket
        self.inode = os.stat(self.sock_path).st_ino
        self.listener = s

    def unbind(self) -> None:
        try:
            if self.inode is not None and os.stat(self.sock_path).st_ino == self.inode:
                os.unlink(self.sock_path)
        except FileNotFoundError:
            pass
        if self.listener is not None:
            self.listener.close()

    def serve(self) -> None:
        self._try_connect(replay=False)  # before the first hook is answered; the spool is replayed once serving
        self.bind()
        self.log(f"listening on {self.sock_path} (pid {os.getpid()})")
        threading.Thread(target=self._writer, name="capture-writer", daemon=True).start()
        threading.Thread(target=self._reconnector, name="reconnect", daemon=True).start()
        assert self.listener is not None
        self.listener.settimeout(1.0)
        try:
            while not self.stopping.is_set():
                try:
                    conn, _ = self.listener.accept()
                except TimeoutError:
                    if time.monotonic() - self.last_active > self.idle:
                        self.log(f"idle for {self.idle:g} s: exiting")
                        break
                    continue
                self.last_active = time.monotonic()
                threading.Thread(target=self._serve_connection, args=(conn,), daemon=True).start()
        finally:
            self.stopping.set()
            self.unbind()
            with self.write_lock:
                if self.agent is not None:
                    self.agent.db.close()


def run(home: str, agent: str, idle: float = DEFAULT_IDLE_SECONDS, connect: Callable[[], Any] | None = None) -> int:
    """Serve the agent's hooks until idle; 0 at once when another server has the lock."""
    home = os.path.abspath(home)
    lock = take_lock(home, agent)
    if lock is None:
        print(f"scsql hook server: another server serves agent {agent} in {home}", file=sys.stderr)
        return 0
    try:
        if connect is None:
            from ..core.config import Settings
            from ..core.app import Context

            ctx = Context(Settings.load(home))

            def connect():
                return ctx.open_agent(agent, pool_size=4)

        server = HookServer(home, agent, connect, idle=idle)
        signal.signal(signal.SIGTERM, lambda *_: server.stopping.set())
        server.serve()
    finally:
        os.close(lock)
    return 0


def main(argv: list[str]) -> int:
    """The entry point the hook process starts (before anything heavy is imported)."""
    p = argparse.ArgumentParser(prog="scsql hook serve")
    p.add_argument("command", choices=["serve"])
    p.add_argument("--agent", required=True)
    p.add_argument("--home", required=True)
    p.add_argument("--idle", type=float, default=DEFAULT_IDLE_SECONDS)
    p.add_argument("--detached", action="store_true")
    args = p.parse_args(argv)
    if args.detached:
        os.closerange(3, 1 << 16)  # nothing of the hook's parent stays open in the server
    try:
        return run(args.home, args.agent, args.idle)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001
        print(f"scsql hook server: error {exc}", file=sys.stderr)
        return 1


def jobs(data_dir: str | os.PathLike | None = None) -> list:
    """``scsql worker``'s job that writes the agent's hook spool in DATA_DIR
    (default: the data directory of the environment) when the database is back."""
    from ..core.config import Settings
    from ..core.worker import Job

    def replay_spool(agent) -> int:
        home = str(data_dir or agent.home or Settings.load().data_dir)
        if not spool.has_pending(home, agent.name):
            return 0
        handlers = load_handlers()
        stub = getattr(handlers, "capture_stubs", None)
        return spool.replay(home, agent.name, lambda evs: handlers.capture(agent, evs), is_down=is_down,
                            stub=(lambda evs, exc: stub(agent, evs, exc)) if stub else None)

    return [Job("hook-spool", replay_spool)]
