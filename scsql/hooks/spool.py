"""The spool: events a hook could not deliver, kept on local disk until the
hook server (or ``scsql worker``) writes them.

``<home>/spool/<agent>/`` (0700) holds one file per delivery attempt (0600),
named ``<nanoseconds>-<pid>-<random>.jsonl`` so names sort in arrival order,
one event a line. Writers (``client.spool_write``) write a file in ``tmp/``,
fsync it and rename it into place, so a spool file is always whole.

Replay takes the directory's replay lock (one replayer at a time), claims
files by renaming them into ``claimed/`` (a claimed file left by a replayer
that died is taken first: its events are older), writes their events in
order, and deletes each file once the transaction that wrote its events has
committed. An event is therefore sent again only when the replayer dies
between that commit and the unlink; the handlers are idempotent by event
key, so that adds nothing. A file whose events the handlers refuse (not a
lost database: a bad event) moves to ``failed/`` and stops nothing else.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from .client import private_dir, spool_dir, spool_write  # noqa: F401 - the writer is the client's

__all__ = ["failed", "pending", "replay", "spool_dir", "spool_write"]

STALE_TMP_SECONDS = 3600.0


def failed(home: str | Path, agent: str) -> list[Path]:
    """Spool files that not even a stub could store (kept for a person to look at)."""
    d = Path(spool_dir(str(home), agent)) / "failed"
    return sorted(d.glob("*.jsonl")) if d.is_dir() else []


def pending(home: str | Path, agent: str) -> list[Path]:
    """Spool files waiting to be written (claimed ones first), in order."""
    d = Path(spool_dir(str(home), agent))
    found = [p for sub in (d / "claimed", d) if sub.is_dir() for p in sub.glob("*.jsonl")]
    return sorted(found, key=lambda p: p.name)


def has_pending(home: str | Path, agent: str) -> bool:
    d = spool_dir(str(home), agent)
    try:
        with os.scandir(d) as it:
            if any(e.name.endswith(".jsonl") for e in it):
                return True
        with os.scandir(os.path.join(d, "claimed")) as it:
            return any(e.name.endswith(".jsonl") for e in it)
    except FileNotFoundError:
        return False


def _read(path: Path) -> list[dict]:
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            event = json.loads(line)
            if not isinstance(event, dict):
                raise ValueError("a spool line is not a JSON object")
            events.append(event)
    return events


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replay(home: str | Path, agent: str, write: Callable[[list[dict]], None], *,
           is_down: Callable[[BaseException], bool] = lambda exc: False, batch: int = 200,
           on_failed: Callable[[Path, BaseException], None] = lambda p, e: None,
           stub: Callable[[list[dict], BaseException], None] | None = None) -> int:
    """Write the agent's spooled events with ``write(events)`` (one call, one
    transaction, per batch of whole files), in order, each file deleted once
    its batch committed. Returns the events written. A failure ``is_down``
    recognises (the database is gone) stops the replay and is raised; the
    files stay for the next one. An event ``write`` refuses alone is handed
    to ``stub(events, refusal)``. Another replayer at work: returns 0."""
    d = Path(private_dir(spool_dir(str(home), agent)))
    claimed = Path(private_dir(str(d / "claimed")))
    lock = os.open(d / ".replay.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0
        _clean_tmp(d / "tmp")
        written = 0
        done: set = set()  # event ids written in this replay
        while True:
            files = pending(home, agent)
            if not files:
                return written
            for i, p in enumerate(files):
                if p.parent != claimed:
                    target = claimed / p.name
                    os.rename(p, target)
                    files[i] = target
            _fsync_dir(claimed)
            group: list[tuple[Path, list[dict]]] = []
            size = 0
            for p in files:
                try:
                    events = _read(p)
                except (ValueError, UnicodeDecodeError) as exc:
                    _fail(d, p, exc, on_failed)
                    continue
                group.append((p, events))
                size += len(events)
                if size >= batch:
                    written += _write_group(d, group, write, is_down, on_failed, done, stub)
                    group, size = [], 0
            if group:
                written += _write_group(d, group, write, is_down, on_failed, done, stub)
    finally:
        os.close(lock)


def _write_group(d: Path, group, write, is_down, on_failed, done: set, stub=None) -> int:
    seen = set(done)
    events = []
    for _, evs in group:
        for e in evs:
            key = e.get("scsql_event_id")
            if key in seen:  # spooled twice (by a hook that gave up waiting, and by the server)
                continue
            seen.add(key)
            events.append(e)
    try:
        if events:
            write(events)
    except BaseException as exc:
        if is_down(exc) or not isinstance(exc, Exception):
            raise
        if len(group) > 1:  # a bad event in the batch: file by file
            return sum(_write_group(d, [g], write, is_down, on_failed, done, stub) for g in group)
        return _write_one_by_one(d, group[0][0], events, write, is_down, on_failed, done, stub, exc)
    done.update(e.get("scsql_event_id") for e in events)
    for p, _ in group:
        p.unlink()
    _fsync_dir(d / "claimed")
    return len(events)


def _write_one_by_one(d: Path, path: Path, events: list[dict], write, is_down, on_failed, done: set, stub,
                      refusal: BaseException) -> int:
    """The events of one refused file, each in a transaction of its own; one
    refused again goes to STUB; what even that cannot store is kept in failed/."""
    written, kept = 0, []
    for e in events:
        try:
            if len(events) > 1:
                write([e])
            else:
                raise refusal
        except Exception as exc:  # noqa: BLE001 - a refused event, or the database gone
            if is_down(exc):
                raise
            try:
                if stub is None:
                    raise exc
                stub([e], exc)
            except Exception as why:  # noqa: BLE001
                if is_down(why):
                    raise
                kept.append((e, why))
                continue
        done.add(e.get("scsql_event_id"))
        written += 1
    if kept:
        failed = Path(private_dir(str(d / "failed")))
        name = path.name
        (failed / name).write_text("".join(json.dumps(e) + "\n" for e, _ in kept))
        (failed / (name + ".error")).write_text("".join(f"{type(w).__name__}: {w}\n" for _, w in kept))
        on_failed(path, kept[0][1])
    path.unlink()
    _fsync_dir(d / "claimed")
    return written


def _fail(d: Path, p: Path, exc: BaseException, on_failed) -> None:
    failed = Path(private_dir(str(d / "failed")))
    os.rename(p, failed / p.name)
    (failed / (p.name + ".error")).write_text(f"{type(exc).__name__}: {exc}\n")
    on_failed(p, exc)


def _clean_tmp(tmp: Path) -> None:
    """Half-written files of hooks that died before acknowledging their event."""
    if not tmp.is_dir():
        return
    now = time.time()
    for p in tmp.iterdir():
        try:
            if now - p.stat().st_mtime > STALE_TMP_SECONDS:
                p.unlink()
        except FileNotFoundError:
            pass
