"""The background workers ``scsql up`` keeps on the embedded server.

On the embedded default nobody else would run ``scsql worker``, and without
one nothing is embedded, partitions are not made ahead and ``scsql doctor``
fails. So ``scsql up`` starts one worker for each project that has an
active agent whose key is in the keystore, acting as the project's agent
``default`` when it has one, else as the first by name. Each runs in a
session of its own (Ctrl-C in the terminal that ran ``scsql up`` does not
reach it), with its output appended to ``DATA_DIR/workers/PROJECT.log``;
``DATA_DIR/workers/PROJECT.pid`` names it (process id, the start time the
kernel recorded for it, agent), so a recycled process id is never taken for
it. A worker found dead is started again by the next ``scsql up``, which
then waits until each new worker recorded its first heartbeat (what
``scsql doctor`` looks for). ``scsql down`` stops them (SIGTERM, SIGKILL
after STOP_SECONDS) before the server. ``scsql up --no-worker`` starts none.
Starts and stops take ``DATA_DIR/workers/.lock``, so two ``scsql up`` never
start two workers for one project.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .config import Settings

PREFERRED_AGENT = "default"
READY_SECONDS = 60.0  # how long scsql up waits for a new worker's first heartbeat
STOP_SECONDS = 10.0  # how long scsql down waits after SIGTERM before SIGKILL
LOG_BYTES = 1 << 20  # a log past this size is moved to PROJECT.log.1 when its worker starts


@dataclass
class Supervised:
    """One background worker: its project, agent, process id and log."""

    project: str
    agent: str
    pid: int
    log: Path
    started: bool = False  # started by this call (not found running)
    process: subprocess.Popen | None = field(default=None, repr=False)  # when started by this call


def workers_dir(data_dir: Path) -> Path:
    return data_dir / "workers"


def log_path(data_dir: Path, project: str) -> Path:
    return workers_dir(data_dir) / f"{project}.log"


def _pid_path(data_dir: Path, project: str) -> Path:
    return workers_dir(data_dir) / f"{project}.pid"


def pick_agent(agents: Iterable[str], has_key: Callable[[str], bool]) -> str | None:
    """The agent a project's background worker acts as: among AGENTS (its
    active agents), ``default`` when its key is here, else the first by name
    whose key is; None when no key of them is here."""
    usable = sorted(a for a in agents if has_key(a))
    if PREFERRED_AGENT in usable:
        return PREFERRED_AGENT
    return usable[0] if usable else None


def _start_time(pid: int) -> str | None:
    """When process PID started, as the kernel counts it (field 22 of
    /proc/PID/stat); "" where there is no /proc; None when PID is not running."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return ""
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 and fields[0] != "Z" else None


def _read(path: Path, project: str, data_dir: Path) -> Supervised | None:
    """The worker PATH names, when that very process still runs."""
    try:
        pid_text, start, agent = path.read_text().split()
        pid = int(pid_text)
    except (OSError, ValueError):
        return None
    if _start_time(pid) != start:
        return None
    return Supervised(project, agent, pid, log_path(data_dir, project))


def running(data_dir: Path) -> dict[str, Supervised]:
    """The background workers of DATA_DIR that run, by project."""
    found = {}
    for path in sorted(workers_dir(data_dir).glob("*.pid")):
        worker = _read(path, path.stem, data_dir)
        if worker is not None:
            found[worker.project] = worker
    return found


@contextlib.contextmanager
def _locked(data_dir: Path) -> Iterator[Path]:
    directory = workers_dir(data_dir)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield directory
    finally:
        os.close(fd)


def _spawn(settings: Settings, project: str, agent: str) -> Supervised:
    """Start ``scsql worker --agent AGENT`` in a session of its own, its output appended to its log."""
    log = log_path(settings.data_dir, project)
    if log.exists() and log.stat().st_size > LOG_BYTES:
        log.replace(log.with_name(log.name + ".1"))
    env = dict(os.environ, SCSQL_DATA_DIR=str(settings.data_dir))
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    with open(fd, "ab") as out:
        stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")
        out.write(f"{stamp} scsql up: starting scsql worker --agent {agent} (project {project})\n".encode())
        out.flush()
        proc = subprocess.Popen([sys.executable, "-m", "scsql", "worker", "--agent", agent], env=env,
                                cwd=settings.data_dir, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True)
    start = _start_time(proc.pid)
    path = _pid_path(settings.data_dir, project)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600), "w") as f:
        f.write(f"{proc.pid} {start if start is not None else '-'} {agent}\n")
    tmp.replace(path)
    return Supervised(project, agent, proc.pid, log, started=True, process=proc)


def start(settings: Settings, wanted: dict[str, str]) -> list[Supervised]:
    """Make sure each project of WANTED (project: agent) has its background
    worker: those running are kept, the others started. Returns them all."""
    out = []
    with _locked(settings.data_dir):
        alive = running(settings.data_dir)
        for project, agent in sorted(wanted.items()):
            out.append(alive.get(project) or _spawn(settings, project, agent))
    return out


def wait_ready(admin: str, workers: list[Supervised], timeout: float = READY_SECONDS) -> dict[str, str]:
    """Wait until each worker started here recorded its first heartbeat (as
    doctor reads them). Returns, by project, why a worker is not ready (it
    exited, or did not beat within TIMEOUT s); empty when all are."""
    import psycopg

    host = socket.gethostname()[:255] or "localhost"
    waiting = {w.pid: w for w in workers if w.started}
    failed: dict[str, str] = {}
    deadline = time.monotonic() + timeout
    with psycopg.connect(admin, autocommit=True) as conn:
        while waiting:
            beat = {pid for (pid,) in conn.execute(
                "select pid from scsql.worker_heartbeats where host = %s and pid = any(%s)",
                (host, list(waiting))).fetchall()}
            for pid in list(waiting):
                status = waiting[pid].process.poll() if waiting[pid].process else None
                if pid in beat:
                    del waiting[pid]
                elif status is not None:
                    w = waiting.pop(pid)
                    failed[w.project] = f"it exited with status {status}: {_last_line(w.log)}"
            if waiting and time.monotonic() > deadline:
                failed.update({w.project: f"no heartbeat within {timeout:g} s" for w in waiting.values()})
                break
            time.sleep(0.1)
    return failed


def _last_line(log: Path) -> str:
    try:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "(no log)"
    return lines[-1] if lines else "(an empty log)"


def stop(data_dir: Path, timeout: float = STOP_SECONDS) -> list[Supervised]:
    """Stop every background worker of DATA_DIR (SIGTERM, then SIGKILL after
    TIMEOUT s); returns those that were running."""
    if not workers_dir(data_dir).is_dir():
        return []
    with _locked(data_dir):
        alive = running(data_dir)
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
            pending = [w for w in alive.values() if _read(_pid_path(data_dir, w.project), w.project, data_dir)]
            for w in pending:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(w.pid, sig)
            deadline = time.monotonic() + wait
            while pending and time.monotonic() < deadline:
                time.sleep(0.05)
                pending = [w for w in pending if _read(_pid_path(data_dir, w.project), w.project, data_dir)]
        for path in workers_dir(data_dir).glob("*.pid"):
            path.unlink(missing_ok=True)
    return list(alive.values())


def keep(settings: Settings, admin: str, has_key: Callable[[str], bool]) -> tuple[list[Supervised], dict[str, str]]:
    """What scsql up does: a background worker for each project with an
    active agent whose key is here (pick_agent), started when not running,
    and waited for. Returns the workers and, by project, why one is not ready."""
    from . import roles

    agents: dict[str, list[str]] = {}
    for a in roles.list_agents(admin):
        if a["revoked_at"] is None:
            agents.setdefault(a["project"], []).append(a["agent"])
    wanted = {project: agent for project, names in agents.items() if (agent := pick_agent(names, has_key))}
    workers = start(settings, wanted)
    return workers, wait_ready(admin, workers)
