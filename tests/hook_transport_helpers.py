"""What the hook transport tests share: a TCP proxy in front of the test
server (stopping it is "the database is down"), a data directory with the
agent's hook environment, and running the exact installed hook commands."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from scsql.hooks import client, events

ROOT = Path(__file__).resolve().parents[1]


class PgProxy:
    """Forwards TCP connections on 127.0.0.1:port to PostgreSQL; ``down()``
    refuses new ones and cuts the open ones, ``up()`` listens again."""

    def __init__(self, target: dict):
        host, port = target.get("host", "localhost"), int(target.get("port", 5432))
        self.target = (socket.AF_UNIX, f"{host}/.s.PGSQL.{port}") if host.startswith("/") else \
            (socket.AF_INET, (host, port))
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.listener: socket.socket | None = None
        self.conns: list[socket.socket] = []
        self.lock = threading.Lock()

    def up(self) -> None:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
        s.listen(64)
        self.listener = s
        threading.Thread(target=self._accept, args=(s,), daemon=True).start()

    def down(self) -> None:
        if self.listener is not None:
            self.listener.shutdown(socket.SHUT_RDWR)
            self.listener.close()
            self.listener = None
        with self.lock:
            for c in self.conns:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                c.close()
            self.conns.clear()

    def _accept(self, s: socket.socket) -> None:
        while True:
            try:
                a, _ = s.accept()
            except OSError:
                return
            b = socket.socket(self.target[0], socket.SOCK_STREAM)
            try:
                b.connect(self.target[1])
            except OSError:
                a.close()
                continue
            with self.lock:
                self.conns += [a, b]
            for x, y in ((a, b), (b, a)):
                threading.Thread(target=self._pipe, args=(x, y), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


@dataclass
class HookEnv:
    home: str
    agent: str
    env: dict
    admin: str
    proxy: PgProxy
    sessions: list[str] = field(default_factory=list)

    def command(self, subcommand: str) -> list[str]:
        """The installed command line, run by a shell as Claude Code runs it."""
        return ["/bin/sh", "-c", events.hook_command(subcommand, self.agent, self.home)]

    def argv(self, subcommand: str) -> list[str]:
        """The hook client's own argument vector (the installed command without its shell part)."""
        return shlex.split(events.hook_command(subcommand, self.agent, self.home).removesuffix(events.FAIL_OPEN))

    def run(self, subcommand: str, event: dict | bytes | str, **kw) -> subprocess.CompletedProcess:
        data = event if isinstance(event, bytes) else (event if isinstance(event, str) else json.dumps(event)).encode()
        return subprocess.run(self.command(subcommand), input=data, capture_output=True, env=self.env,
                              timeout=kw.pop("timeout", 60), **kw)

    def spool(self) -> Path:
        return Path(client.spool_dir(self.home, self.agent))

    def spooled(self) -> list[dict]:
        from scsql.hooks import spool

        return [json.loads(line) for p in spool.pending(self.home, self.agent)
                for line in p.read_text().splitlines() if line.strip()]

    def server_pid(self) -> int | None:
        """The pid of the server holding the lock, if one does."""
        import fcntl

        path = os.path.join(self.home, "hooks", self.agent + ".lock")
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return int(Path(path).read_text().strip() or 0) or None
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def stop_server(self, sig: int = signal.SIGTERM) -> None:
        pid = self.server_pid()
        if pid:
            os.kill(pid, sig)
            wait_for(lambda: self.server_pid() is None, 30, "the hook server to exit")

    def redelivered(self) -> list[str]:
        """The event ids the stub handlers found already written (tests/hook_stub_handlers.py)."""
        path = Path(self.home) / "redelivered"
        return path.read_text().split() if path.exists() else []

    def rows(self) -> list[dict]:
        """The tool-call rows the stub handlers wrote, in chain order."""
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(self.admin, row_factory=dict_row) as conn:
            return conn.execute("select tool, input_preview as event_id, output_preview as received_at, seq "
                                "from scsql.tool_calls order by chain_id, seq").fetchall()


def wait_for(cond, timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


def make_env(scsql_db, agent_name: str, proxy: PgProxy) -> HookEnv:
    home = tempfile.mkdtemp(prefix="scsqlh")
    app = conninfo_to_dict(scsql_db.app)
    app.update(host="127.0.0.1", port=str(proxy.port))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root"),
           "SCSQL_AGENT_DSN": make_conninfo(**app), "SCSQL_KEYSTORE": str(scsql_db.keystore.directory),
           "SCSQL_HOOK_HANDLERS": "tests.hook_stub_handlers", "PYTHONPATH": str(ROOT),
           "SCSQL_DATA_DIR": home}
    return HookEnv(home, agent_name, env, scsql_db.admin, proxy)


def cleanup(h: HookEnv) -> None:
    h.stop_server()
    shutil.rmtree(h.home, ignore_errors=True)


def event(name: str, session: str = "sess-1", **fields) -> dict:
    base = {"session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": "/work/project",
            "permission_mode": "default", "hook_event_name": name}
    return {**base, **fields}
