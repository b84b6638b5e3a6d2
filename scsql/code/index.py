"""Keeping the symbol graph with the chunks.

:class:`SymbolPass` is the symbol half of ``scsql index`` (and the MCP tool
``index``): the database names the files whose symbols are missing or stale
(``scsql.code_changes``, which also removes files gone from the tree); each
is parsed (:mod:`.parse`) and stored with ``scsql.index_code``, one
transaction a file, after the chunks of the run (which go through the bulk
path in batches); then references are resolved and files ranked
(``scsql.resolve_code``, ``scsql.rank_code``). Many files are parsed ahead
in worker processes, one per core.

:func:`store` is also what an edit triggers: the hook server indexes an
edited file again, chunks and symbols in one transaction
(``scsql/memory/fresh.py``).

This package stands on core alone: the knowledge base (memory) stores the
symbols with the chunks, and no module here imports it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from psycopg.types.json import Jsonb

from . import parse

PARALLEL_FROM = 64  # files: from this many on, parse in worker processes


class Ahead:
    """Files parsed ahead, in worker processes (``python -m scsql.code.parse``,
    one per core), in the order given; :meth:`take` waits for one."""

    def __init__(self, items: list[tuple[str, str]], workers: int):
        self._got: dict[str, tuple[str, dict[str, Any]] | None] = {}
        self._cond = threading.Condition()
        self._running = workers
        self._procs = []
        for k in range(workers):
            proc = subprocess.Popen([sys.executable, "-m", "scsql.code.parse"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, encoding="utf-8")
            self._procs.append(proc)
            threading.Thread(target=self._feed, args=(proc, items[k::workers]), daemon=True).start()
            threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    @staticmethod
    def _feed(proc, items: list[tuple[str, str]]) -> None:
        try:
            for rel, full in items:
                proc.stdin.write(json.dumps([rel, full]) + "\n")
            proc.stdin.close()
        except OSError:
            pass

    def _read(self, proc) -> None:
        for line in proc.stdout:
            rel, sha, payload = json.loads(line)
            with self._cond:
                self._got[rel] = (sha, payload) if sha else None
                self._cond.notify_all()
        with self._cond:
            self._running -= 1
            self._cond.notify_all()

    def take(self, rel: str) -> tuple[str, dict[str, Any]] | None:
        with self._cond:
            self._cond.wait_for(lambda: rel in self._got or self._running == 0)
            return self._got.pop(rel, None)

    def close(self) -> None:
        for proc in self._procs:
            proc.kill()
            proc.wait()


def store(conn, rel: str, text: str, sha256: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
    """Store the symbols of file REL (TEXT, whose sha256 is SHA256) in the
    transaction of CONN: the payload given (parsed ahead) or parsed now."""
    return send(conn, rel, sha256, payload if payload is not None else parse.parse(rel, text).payload()).fetchone()


def send(conn, rel: str, sha256: str, payload: dict[str, Any]):
    """Send the symbols PAYLOAD of file REL to be stored in CONN's transaction;
    the cursor whose row says what was stored (in a pipeline, the server
    stores them while the caller goes on)."""
    p = payload
    return conn.execute(
        "select * from scsql.index_code(%s, %s, %s, %s, %s, %s, %s, %s)",
        (rel, sha256, p["language"], p["module"], p["status"], p["error_lines"],
         Jsonb(p["definitions"]), Jsonb(p["references"])))


def send_delta(conn, rel: str, base_sha256: str, sha256: str, payload: dict[str, Any], change: dict[str, Any]):
    """Send the symbols PAYLOAD of file REL as CHANGE (:func:`delta`) from
    those stored of content BASE_SHA256; the cursor's row says whether the
    server applied it (when not, nothing was written: send the payload)."""
    c = change
    return conn.execute(
        "select * from scsql.index_code_delta(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (rel, base_sha256, sha256, payload["status"], payload["error_lines"], c["counts"],
         Jsonb(c["definitions"]), c["gone_definitions"], Jsonb(c["references"]), Jsonb(c["gone_references"])))


def _identity(ref: dict[str, Any]) -> tuple:
    return ref["kind"], ref["name"], ref["qualifier"], ref["alias"], ref["from"]


def delta(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any] | None:
    """What changed from payload OLD to payload NEW of one file, as
    scsql.index_code_delta takes it: the definitions added or changed and
    the keys of those gone, the references added or changed and the
    identities of those gone (kind, name, qualifier, alias, from), the
    counts before and after. None when OLD and NEW are not of one language
    and module, or one holds a key or an identity twice (only the whole
    payload says what to store then)."""
    if (old["language"], old["module"]) != (new["language"], new["module"]):
        return None
    od, nd = ({d["key"]: d for d in p["definitions"]} for p in (old, new))
    orefs, nrefs = ({_identity(r): r for r in p["references"]} for p in (old, new))
    if (len(od), len(orefs), len(nd), len(nrefs)) != tuple(
            len(p[part]) for p in (old, new) for part in ("definitions", "references")):
        return None
    change = {
        "counts": [len(od), len(orefs), len(nd), len(nrefs)],
        "definitions": [d for k, d in nd.items() if od.get(k) != d],
        "gone_definitions": [k for k in od if k not in nd],
        "references": [r for k, r in nrefs.items() if orefs.get(k) != r],
        "gone_references": [dict(zip(("kind", "name", "qualifier", "alias", "from"), k)) for k in orefs if k not in nrefs],
    }
    return change


@dataclass
class Base:
    """What is known of a file's content: its sha256, its symbols (the
    payload of index_code) and, when kept, its text and tree-sitter tree
    (the base of an incremental parse)."""

    sha256: str
    payload: dict[str, Any]
    text: str | None = None
    tree: Any = None


class Known:
    """The symbols the hook server last stored or read of each file: by key
    (the project's root and the file's path), a :class:`Base`, the base of
    the next edit's delta and parse. Bounded: at most SIZE files and
    CHARS characters of text (a tree takes about 30 bytes a character: 2
    million characters are about 60 MB), the files least recently used
    going first. Safe across threads; a base taken is the taker's (its tree
    is edited by the next parse), so :meth:`take` removes it."""

    def __init__(self, size: int = 256, chars: int = 2_000_000):
        from collections import OrderedDict

        self._items: OrderedDict[tuple[str, str], Base] = OrderedDict()
        self._size = size
        self._chars = chars
        self._held = 0  # characters of text held
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str] | None) -> Base | None:
        with self._lock:
            got = self._items.get(key) if key is not None else None
            if got is not None:
                self._items.move_to_end(key)
            return got

    def take(self, key: tuple[str, str] | None) -> Base | None:
        with self._lock:
            return self._pop(key) if key is not None else None

    def put(self, key: tuple[str, str], base: Base) -> None:
        with self._lock:
            self._pop(key)
            self._items[key] = base
            self._held += len(base.text or "")
            while len(self._items) > self._size or (self._held > self._chars and len(self._items) > 1):
                self._pop(next(iter(self._items)))

    def drop(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._pop(key)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._held = 0

    def _pop(self, key: tuple[str, str]) -> Base | None:
        got = self._items.pop(key, None)
        if got is not None:
            self._held -= len(got.text or "")
        return got


known = Known()  # the process's: the hook server's re-index thread and its reads


@dataclass
class SymbolPass:
    """The symbols of one ``scsql index`` run (see the module docstring)."""

    agent: Any
    todo: set[str] = field(default_factory=set)
    removed: list[str] = field(default_factory=list)
    stored: int = 0
    partial: list[dict[str, Any]] = field(default_factory=list)
    _ahead: Ahead | None = None

    @classmethod
    def start(cls, agent, tree) -> SymbolPass:
        """Ask the database which files of TREE need their symbols read (one
        round trip; it removes the files gone), and parse them ahead."""
        with agent.transaction() as conn:
            rows = conn.execute("select path, action from scsql.code_changes(%s, %s)",
                                (tree.prefix, Jsonb(tree.manifest()))).fetchall()
        run = cls(agent, {r["path"] for r in rows if r["action"] == "index"},
                  sorted(r["path"] for r in rows if r["action"] == "removed"))
        by_rel = {f.rel: f for f in tree.files}
        if len(run.todo) >= PARALLEL_FROM and (os.cpu_count() or 1) > 1:
            run._ahead = Ahead([(rel, str(by_rel[rel].path)) for rel in sorted(run.todo) if rel in by_rel],
                               min(os.cpu_count() or 1, 8))
        return run

    def wanted(self, rel: str) -> bool:
        return rel in self.todo

    def store(self, conn, rel: str, text: str) -> None:
        """Store the symbols of REL (TEXT as indexed now) in CONN's transaction."""
        sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
        payload = None
        got = self._ahead.take(rel) if self._ahead is not None else None
        if got is not None and got[0] == sha:  # the file did not change since it was parsed
            payload = got[1]
        row = store(conn, rel, text, sha, payload)
        self.stored += 1
        if row["status"] == "partial":
            self.partial.append({"path": rel, "status": "partial"})

    def finish(self) -> dict[str, Any]:
        """Resolve what is pending and rank; the report's symbols part."""
        if self._ahead is not None:
            self._ahead.close()
        with self.agent.transaction() as conn:
            resolved = conn.execute("select scsql.resolve_code() as n").fetchone()["n"]
            if self.stored or self.removed or resolved:
                conn.execute("select scsql.rank_code()")
        return {"files": self.stored, "removed": len(self.removed), "resolved": resolved,
                "partial": [p["path"] for p in self.partial]}
