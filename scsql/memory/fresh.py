"""Keeping the index (chunks and symbols) fresh as agents edit, in the hook server.

The hook server hands :class:`Fresh` what it has written or answered: each
captured PostToolUse of Edit, Write, MultiEdit or NotebookEdit names a file
to index again; each Stop names a work tree whose changed files (``git
status``, and the files of commits made since the last Stop) are indexed
again, so files changed by shell commands are picked up too. Each Read
names a file whose symbols are parsed then (:func:`read`), so the edit that
follows sends only what it changed (``scsql.index_code_delta``). One thread does
the work (:func:`reindex`: chunks and symbols of a file stored together;
a deleted file leaves the index), never the hook's: a hook is answered as
soon as its event is written. Once edits settle (no new one for
SETTLE_SECONDS) the project is ranked again (``scsql.rank_code``).

The hook server knows it as one of its watchers (``Subsystem.watchers``,
core/app.py): made with the server's agent and log, started once the server
serves, told of what was captured (``edited``) and of each Stop (``stopped``).

:func:`reindex` indexes the files at the paths given again, admitted by the
same rules as ``scsql index`` (inside the project root, not ignored, not a
secret, text), chunks and symbols stored together (on two connections at
once when the agent has a pool, see _store_apart); a file that is gone
leaves the index. It ranks nothing: the caller ranks once edits settle.
"""

from __future__ import annotations

import hashlib
import os
import queue
import subprocess
import threading
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..code.index import Base, known
from ..core import errors
from ..core.errors import ScsqlError

EDIT_TOOLS = ("Edit", "Write", "MultiEdit", "NotebookEdit")
SETTLE_SECONDS = 2.0
MAX_CHANGED = 500  # files a Stop re-indexes at most (a generated tree is left to scsql index)


def _tool_path(event: dict, tools, key) -> str | None:
    """The absolute path a PostToolUse event of one of TOOLS names in KEY(tool)
    of its input (None for any other event, or no usable path)."""
    tool = event.get("tool_name")
    if event.get("hook_event_name") != "PostToolUse" or tool not in tools:
        return None
    tool_input = event.get("tool_input")
    path = tool_input.get(key(tool)) if isinstance(tool_input, dict) else None
    if not isinstance(path, str) or not path or "\x00" in path:
        return None
    cwd = event.get("cwd")
    return path if os.path.isabs(path) or not isinstance(cwd, str) else os.path.join(cwd, path)


def edited_path(event: dict) -> str | None:
    """The file a captured edit changed, absolute (None for any other event)."""
    return _tool_path(event, EDIT_TOOLS, lambda tool: "notebook_path" if tool == "NotebookEdit" else "file_path")


def read_path(event: dict) -> str | None:
    """The file a captured Read read, absolute (None for any other event)."""
    return _tool_path(event, ("Read",), lambda tool: "file_path")


def _git(cwd: str, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", cwd, *args], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.decode("utf-8", "surrogateescape") if done.returncode == 0 else None


WARM_PATH = "scsql-warm/warm.py"
WARM_TEXT = "def warm():\n    return 1\n"


def warm(agent=None) -> bool:
    """Load the indexer and a grammar, and open the two connections an edit
    is stored on (AGENT's, when it has a pool: _store_apart), each having
    stored an edit once and rolled it back (the server's functions compiled
    and planned there), so the first edit does not wait for any of them."""
    try:
        from ..code import parse
        from . import indexer  # noqa: F401

        parse.parse("warm.py", "x = 1\n")
        if agent is not None and agent.db.pool is not None:
            edit = _Edit(WARM_PATH, WARM_TEXT, hashlib.sha256(WARM_TEXT.encode()).hexdigest(),
                         indexer.spans_for(WARM_PATH, WARM_TEXT, agent.rules().chunk_chars),
                         lambda: parse.parse(WARM_PATH, WARM_TEXT).payload())
            with agent.transaction() as one, agent.transaction() as two:
                for conn in (one, two):
                    conn.execute("savepoint warm")
                    _store_on(conn, edit)
                    conn.execute("rollback to savepoint warm")  # nothing of it stays
    except Exception:  # noqa: BLE001 - the first edit will say what is wrong
        pass
    return True


def changed_files(cwd: str, since: str | None) -> tuple[list[str], str | None]:
    """The files of CWD's work tree that differ from HEAD or are new
    (untracked, not ignored), deleted ones included, and those of the commits
    made since commit SINCE; absolute. With the HEAD now."""
    top = (_git(cwd, "rev-parse", "--show-toplevel") or "").strip()
    head = (_git(cwd, "rev-parse", "HEAD") or "").strip() or None
    if not top:
        return [], head
    entries = (_git(top, "status", "--porcelain=v1", "-z", "--untracked-files=all") or "").split("\x00")
    out: list[str] = []
    skip = False
    for entry in entries:
        if skip:  # the original path of a rename or copy: it is gone
            out.append(entry)
            skip = False
            continue
        if len(entry) > 3:
            out.append(entry[3:])
            skip = entry[0] in "RC"
    if since and head and since != head:
        out += (_git(top, "diff", "--name-only", "-z", since, head) or "").split("\x00")
    paths = [os.path.join(top, p) for p in dict.fromkeys(p for p in out if p)]
    return paths[:MAX_CHANGED], head


class Fresh:
    """The re-index thread of one hook server (see the module docstring).
    AGENT() gives the server's agent, or None while the database is down."""

    def __init__(self, agent: Callable[[], Any], log: Callable[[str], None]):
        self._agent = agent
        self.log = log
        self._queue: queue.Queue[tuple[str, str]] = queue.Queue()
        self._heads: dict[str, str | None] = {}
        self._seen: dict[str, str | None] = {}  # path -> sha256 when this thread last indexed it (None: gone)
        self._dirty = False
        self.done = threading.Event()  # set each time the queue has been worked off (for tests)

    def start(self) -> Fresh:
        threading.Thread(target=self._run, name="code-fresh", daemon=True).start()
        return self

    def edited(self, events: list[dict]) -> None:
        """After capture: the files these events edited are indexed again."""
        for ev in events:
            path = edited_path(ev) if isinstance(ev, dict) else None
            if path:
                self.done.clear()
                self._queue.put(("file", path))
            path = read_path(ev) if isinstance(ev, dict) else None
            if path:  # its symbols kept: the base of the edit that follows
                self.done.clear()
                self._queue.put(("read", path))

    def stopped(self, event: dict) -> None:
        """At Stop: the work tree's changed files are indexed again."""
        cwd = event.get("cwd")
        if isinstance(cwd, str) and os.path.isdir(cwd):
            self.done.clear()
            self._queue.put(("tree", cwd))

    def _run(self) -> None:
        warmed = False
        while True:
            try:
                items = [self._queue.get(timeout=SETTLE_SECONDS)]
            except queue.Empty:
                if not warmed:  # while nothing happens (not as the server starts): what the first edit loads
                    warmed = warm(self._agent())
                self._settle()
                continue
            while True:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                self._work(items)
            except Exception as exc:  # noqa: BLE001 - the thread lives on; the next edit tries again
                self.log(f"re-indexing edited files: {exc}")
            if self._queue.empty():
                self.done.set()

    def _work(self, items: list[tuple[str, str]]) -> None:
        paths = [p for kind, p in items if kind == "file"]
        for cwd in dict.fromkeys(p for kind, p in items if kind == "tree"):
            found, self._heads[cwd] = changed_files(cwd, self._heads.get(cwd))
            # and the files this thread indexed that are gone (an untracked file deleted is in no git status)
            paths += found + [p for p, sha in self._seen.items() if sha is not None and not os.path.exists(p)]
        agent = self._agent()
        if agent is None:
            return
        reads = [p for kind, p in items if kind == "read" and p not in paths]
        if reads:
            read(agent, reads)
        paths = [p for p in dict.fromkeys(paths) if self._changed(p)]
        if not paths:
            return
        out = reindex(agent, paths)
        for skipped in out.skipped:
            self._seen.pop(skipped["path"], None)
        if out.indexed or out.removed:
            self._dirty = True

    def _changed(self, path: str) -> bool:
        """Whether the file at PATH differs from when this thread last indexed it (or is gone since)."""
        try:
            with open(path, "rb") as fh:
                sha: str | None = hashlib.sha256(fh.read()).hexdigest()
        except OSError:
            sha = None
        if path in self._seen and self._seen[path] == sha:
            return False
        self._seen[path] = sha
        return True

    def _settle(self) -> None:
        agent = self._agent()
        if not self._dirty or agent is None:
            return
        try:
            with agent.transaction() as conn:
                conn.execute("select scsql.rank_code()")
            self._dirty = False
        except Exception as exc:  # noqa: BLE001
            self.log(f"ranking the code after edits: {exc}")


# -- one file at a time: what an edit triggers ----------------------------------------


@dataclass
class Reindexed:
    indexed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)  # of indexed: symbols stored as a change of those known


def _admission(agent):
    """The agent's project root as stored, and what admits a file under it
    (the rules of scsql index); None for the latter when the root is not a
    directory on this machine."""
    from ..core.paths import real_root
    from . import indexer

    with agent.transaction() as conn:
        root = conn.execute("select root_path from scsql.projects where project_id = scsql_caller.project_id()"
                            ).fetchone()["root_path"]
        secrets = indexer.Secrets.read(conn)
    top = real_root(root)
    return root, (indexer.Admission(Path(top), secrets) if top is not None else None)


def reindex(agent, paths: list[str]) -> Reindexed:
    """Index again the files at PATHS (absolute, or relative to the project
    root): chunks and symbols, stored together, references resolved; a
    file that no longer exists leaves the index. A path outside the root,
    ignored, secret, binary or too large is skipped with its reason."""
    from ..core.paths import resolve_in_root

    out = Reindexed()
    root, admit = _admission(agent)
    if admit is None:
        out.skipped = [{"path": p, "reason": "the project has no root directory on this machine"} for p in paths]
        return out
    for given in dict.fromkeys(paths):
        try:
            rel = resolve_in_root(root, given)
            if rel == "." or rel.startswith("../"):
                raise ScsqlError(errors.INDEX_PATH_OUTSIDE_ROOT, f"{given} is outside the project root")
            verdict = admit.file(rel)
        except ScsqlError as exc:
            out.skipped.append({"path": given, "reason": exc.message})
            continue
        try:
            _one(agent, root, rel, verdict, out)
        except ScsqlError as exc:
            out.skipped.append({"path": rel, "reason": str(exc)})
    return out


def _one(agent, root: str, rel: str, verdict, out: Reindexed) -> None:
    from ..code import parse
    from . import indexer

    if verdict == indexer.GONE:
        with agent.transaction() as conn:
            conn.execute("select scsql.forget_code(%s)", ([rel],))  # the graph's lock first
            gone = conn.execute("select scsql.forget_source(%s) as gone", (rel,)).fetchone()["gone"]
            conn.execute("select scsql.resolve_code()")
        if gone:
            out.removed.append(rel)
        return
    if isinstance(verdict, str):
        out.skipped.append({"path": rel, "reason": verdict})
        return
    text = verdict.decode("utf-8")
    sha = hashlib.sha256(verdict).hexdigest()
    base = known.take((root, rel))  # what was stored or read of the file: its tree is edited by this parse
    if base is not None and base.tree is not None and base.sha256 == sha:
        tree = base.tree  # the file as it was read
    else:  # parsed once, for the chunk spans and the symbols: again from the tree read, when there is one
        tree = parse.tree_of(rel, text, (base.text, base.tree) if base is not None and base.tree is not None else None)
    spans = indexer.spans_for(rel, text, agent.rules().chunk_chars, parse.outline(rel, text, tree))
    edit = _Edit(rel, text, sha, spans, lambda: parse.parse(rel, text, tree).payload(), (root, rel), base, tree)
    unchanged = _store_apart(agent, edit) if agent.db.pool is not None else _store_together(agent, edit)
    (out.unchanged if unchanged else out.indexed).append(rel)
    if edit.applied:
        out.changed.append(rel)


def read(agent, paths: list[str]) -> int:
    """Files the agent read (PostToolUse of Read): their symbols parsed now,
    off any edit's path, and kept as the base of the next edit's delta
    (an edit in Claude Code follows a read of the file). Admitted by the
    same rules as :func:`reindex`; nothing is written. Returns how many
    were kept."""
    from ..code import parse
    from ..core.paths import resolve_in_root

    root, admit = _admission(agent)
    if admit is None:
        return 0
    kept = 0
    for given in dict.fromkeys(paths):
        try:
            rel = resolve_in_root(root, given)
            verdict = admit.file(rel) if rel != "." and not rel.startswith("../") else None
        except ScsqlError:
            continue
        if not isinstance(verdict, bytes) or parse.language_of(rel) in (None, "manifest"):
            continue
        sha = hashlib.sha256(verdict).hexdigest()
        held = known.get((root, rel))
        if held is None or held.sha256 != sha or held.tree is None:  # what is held of this content is kept
            text = verdict.decode("utf-8")
            tree = parse.tree_of(rel, text)
            known.put((root, rel), Base(sha, parse.parse(rel, text, tree).payload(), text, tree))
        kept += 1
    return kept


@dataclass
class _Edit:
    rel: str
    text: str
    sha256: str
    spans: list | None
    symbols: Callable[[], dict]  # the payload of index_code, made when asked
    key: tuple[str, str] | None = None  # in `known`: the project's root and the path (None: not kept)
    base: Base | None = None  # what was known of the file before the edit
    tree: Any = None  # the parse of TEXT
    payload: dict | None = None  # the symbols, once sent
    applied: bool = False  # whether they were stored as a change of those known (index_code_delta)

    def index_text(self, conn):
        from psycopg.types.json import Jsonb

        return conn.execute(
            "select unchanged from scsql.index_text(%s, %s, 'file', null, 'standard', %s, %s)",
            (self.rel, self.text, Jsonb(self.spans) if self.spans is not None else None,
             Jsonb({"language": Path(self.rel).suffix.lstrip(".") or None})))

    def send_symbols(self, conn):
        """Send the symbols: as a change of those last stored or read of the
        file (index_code_delta) when they are known and it is smaller, else
        whole. The cursor, and the payload to send should the change not
        apply (None when it was sent whole)."""
        from ..code.index import delta, send, send_delta

        payload = self.payload = self.symbols()
        base = self.base
        change = delta(base.payload, payload) if base is not None and base.sha256 != self.sha256 else None
        if change is None:
            return send(conn, self.rel, self.sha256, payload), None
        return send_delta(conn, self.rel, base.sha256, self.sha256, payload, change), payload

    def symbols_sent(self, conn, cur, whole) -> None:
        """After send_symbols, once its CUR may be read: a change the server
        did not apply (what it stores is not its base) is sent whole; what is
        stored now is kept as the next edit's base."""
        from ..code.index import send

        self.applied = whole is not None and cur.fetchone()["applied"]
        if whole is not None and not self.applied:
            send(conn, self.rel, self.sha256, whole)
            conn.execute("select scsql.resolve_code()")
        if self.key is not None:
            known.put(self.key, Base(self.sha256, self.payload, self.text, self.tree))


def _store_apart(agent, edit: _Edit) -> bool:
    """The text and the symbols of an edit in two transactions on two
    connections, so that the server chunks the text while the symbols are
    read here, and stores them while the text commits. An edit whose text
    the database refuses (a private key, say) stores neither; should the
    symbols then fail, the text is new and the symbols are those of before
    until the next edit.

    The text commits before anything here waits for the symbols. Each
    transaction takes one lock (the knowledge base's, the graph's), and a
    transaction that takes both (a deleted file: forget_code, then
    forget_source) takes the graph's first: it may wait for the text, and
    the symbols for it, but the text never waits for the symbols, so the
    three cannot wait on each other in a circle the server would not see."""
    with ExitStack() as symbols:  # closed after the text's transaction
        with agent.transaction() as text_conn:
            with text_conn.pipeline():
                cur = edit.index_text(text_conn)
                code_conn = symbols.enter_context(agent.transaction())
                symbols.enter_context(code_conn.pipeline())
                code, whole = edit.send_symbols(code_conn)  # parsed while the server chunks
                resolved = code_conn.execute("select scsql.resolve_code()")
                unchanged = cur.fetchone()["unchanged"]
        edit.symbols_sent(code_conn, code, whole)  # the text has committed
        resolved.fetchone()
        return unchanged


def _store_together(agent, edit: _Edit) -> bool:
    """The text and the symbols of an edit in one transaction (an agent of
    one connection), the graph's lock first, as scsql index takes them."""
    with agent.transaction() as conn:
        return _store_on(conn, edit)


def _store_on(conn, edit: _Edit) -> bool:
    with conn.pipeline():  # the server stores the symbols while the text is sent
        code, whole = edit.send_symbols(conn)
        cur = edit.index_text(conn)
        conn.execute("select scsql.resolve_code()")
        edit.symbols_sent(conn, code, whole)
    return cur.fetchone()["unchanged"]
