"""Indexing a project tree into the knowledge base (``scsql index PATH`` and
the MCP tool ``index``).

The walk happens where the files are (the agent's machine); the database
decides what changed:

1. :func:`scan` lists the text files under PATH with the sha256 of each,
   honouring ``.gitignore`` files (every level, plus ``.git/info/exclude``),
   skipping ``.git``, binaries (a NUL byte in the first 8 KiB, or not UTF-8)
   and files over 2 MiB, and refusing symbolic links that lead outside the
   project root and hard links (a file with more than one name: its other
   names may be outside the root, and a hard link cannot be told from the
   file it names).
2. ``scsql.index(prefix, manifest)`` compares the manifest with what is
   indexed in one round trip, unindexes files that are gone, and names the
   files that are new or changed. Unchanged files cost nothing more.
3. Those are indexed in batches of about 4 MiB, each one transaction
   through the bulk path (:mod:`.bulk`: COPY into ``scsql.kb_staging``,
   then ``scsql.index_staged``, which stores what ``scsql.index_text``
   would, set-based; one batch is staged while the one before it is
   stored); a batch the database refuses is indexed again one
   file a transaction with ``scsql.index_text``, so a bad file fails alone.
   Files carry chunk spans for code: Python is split
   by top-level definitions with :mod:`ast` (a class too large for one chunk
   is split into its methods); other code by the heuristic of
   :func:`code_spans`; Markdown and other text are chunked by the database
   (headings, then blank lines).

Paths are stored relative to the project root, the project's ``root_path``.
A project without one indexes nothing (SC216, from ``scsql_caller.index_scope``):
which directory is the project's is an administrator's decision
(``scsql up`` gives the default project the repository it runs in), never
guessed from PATH. (:func:`scan` alone, with no root given, takes the nearest
directory at or above PATH that contains ``.git``, else PATH itself.)

What is never read (:func:`prepare`, before any file is opened):

* anything, in a project without a ``root_path`` (SC216); a directory
  outside the project's ``root_path``, or inside a store of secrets
  (``.ssh``, ``.gnupg``, ``.aws``, ...): refused by ``scsql_caller.index_scope``
  in the database (SC213, SC214);
* a PATH the operating system cannot look up (too long, a NUL byte, a loop
  of links): refused here with SC224, never a traceback;
* the scsql data directory and the keystore (SCSQL_DATA_DIR, SCSQL_KEYSTORE):
  refused here (SC223), and skipped when met below PATH;
* files named like secrets (:data:`SECRET_NAMES`) and stores of secrets met
  below PATH: skipped unread. A file that holds a PEM private key
  (:meth:`Secrets.holds_private_key`, the rule ``scsql.index_text`` enforces
  too) is skipped whatever its name. The stores of secrets and the private
  key pattern are the database's (:class:`Secrets`, read once per run).

The report counts what was skipped, per reason (``skipped_counts``).
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import os
import re
import stat
from collections import Counter
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pathspec
from psycopg.types.json import Jsonb

from ..core.config import Settings
from ..core import errors
from ..core.errors import ScsqlError
from ..core.rules import Rules

INDEX_PATH_PROTECTED = errors.INDEX_PATH_PROTECTED
INDEX_PATH_UNUSABLE = errors.INDEX_PATH_UNUSABLE

# Files never read (file names, lower-cased, as shell patterns).
SECRET_NAMES = (
    ".env*", "*.pem", "*.key", "*.ppk", "*.p12", "*.pfx", "*.jks", "*.keystore",
    "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",
    ".netrc", "_netrc", ".pgpass", ".git-credentials", ".pypirc",
    "credentials", "credentials.json", "credentials.csv", "credentials.yml", "credentials.yaml",
    "credentials.toml", "credentials.ini", "credentials.xml", "*.credentials",
)

SKIP_SECRET_NAME = "secret file name"
SKIP_PRIVATE_KEY = "holds a private key"
SKIP_SECRET_DIR = "secret store directory"
SKIP_PROTECTED = "scsql data directory or keystore"
SKIP_HARD_LINK = "hard link: the file has other names, which may be outside the project root"

# The chunk size is the database's (Rules.chunk_chars, scsql_caller.chunk_chars(),
# read once per connection like the secret directories): a code chunk holds at
# most that many characters, and one under a third of it (min_chunk_chars)
# joins its neighbours.
TEXT_SUFFIXES = {".md", ".markdown", ".rst", ".txt", ".adoc"}
CODE_SUFFIXES = {
    ".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".go", ".rs", ".java", ".kt", ".scala", ".swift",
    ".c", ".h", ".cc", ".cpp", ".hpp", ".cs", ".rb", ".php", ".sql", ".sh", ".bash", ".lua", ".ex", ".exs",
}


@dataclass
class FileEntry:
    rel: str
    path: Path
    sha256: str


@dataclass
class Tree:
    root: Path
    prefix: str
    files: list[FileEntry] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    _counts: Counter[str] = field(default_factory=Counter)
    max_bytes: int = 0  # the largest file indexed (the database's bound; set by scan)

    def manifest(self) -> list[dict[str, str]]:
        return [{"path": f.rel, "content_hash": f.sha256} for f in self.files]

    def skip(self, rel: str, reason: str, category: str | None = None) -> None:
        self.skipped.append({"path": rel, "reason": reason})
        self._counts[category or reason] += 1

    def skipped_counts(self) -> dict[str, int]:
        """How many paths were skipped, per reason, most frequent first."""
        return dict(sorted(self._counts.items(), key=lambda kv: (-kv[1], kv[0])))


# What the database counts as secret and the largest text it indexes, read
# once per run (scsql_caller.rules: the stores of secrets never entered, the
# PEM private key pattern scsql.index_text enforces too, the 2 MiB bound).
Secrets = Rules


def secret_name(name: str) -> bool:
    """True for a file name that looks like a secret (see SECRET_NAMES)."""
    lower = name.lower()
    return any(fnmatchcase(lower, pattern) for pattern in SECRET_NAMES)


def protected_dirs() -> tuple[Path, ...]:
    """The scsql data directory and keystore of this process (resolved)."""
    settings = Settings.load()
    return settings.data_dir, settings.keystore


def _within(path: Path, base: Path) -> bool:
    return path == base or base in path.parents


def project_root(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if (candidate / ".git").exists():
            return candidate
    return path


class _Ignore:
    """.gitignore rules of every directory from the root down; deeper files win."""

    def __init__(self, root: Path):
        self.root = root
        self._specs: dict[str, pathspec.GitIgnoreSpec | None] = {}

    def _spec(self, rel_dir: str) -> pathspec.GitIgnoreSpec | None:
        if rel_dir not in self._specs:
            lines: list[str] = []
            base = self.root / rel_dir if rel_dir else self.root
            if not rel_dir:
                exclude = self.root / ".git" / "info" / "exclude"
                if exclude.is_file():
                    lines += exclude.read_text(errors="replace").splitlines()
            gitignore = base / ".gitignore"
            if gitignore.is_file():
                lines += gitignore.read_text(errors="replace").splitlines()
            self._specs[rel_dir] = pathspec.GitIgnoreSpec.from_lines(lines) if lines else None
        return self._specs[rel_dir]

    def ignored(self, rel: str, is_dir: bool) -> bool:
        parts = rel.split("/")
        if ".git" in parts:
            return True
        verdict = False
        for depth in range(len(parts)):
            spec = self._spec("/".join(parts[:depth]))
            if spec is None:
                continue
            sub = "/".join(parts[depth:]) + ("/" if is_dir else "")
            result = spec.check_file(sub).include
            if result is not None:
                verdict = result
        return verdict


def _is_binary(data: bytes) -> bool:
    if b"\x00" in data[:8192]:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def _shown(path: str | Path, limit: int = 200) -> str:
    """PATH for a message: at most LIMIT characters of it."""
    text = str(path)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _start(path: str | Path) -> Path:
    """The real path of the directory to index. Raises SC224 when the
    operating system cannot look the name up (too long, a NUL byte, a loop of
    symbolic links), SC010 when it is missing or not a directory."""
    try:
        start = Path(path).expanduser()
        if not start.exists():
            raise ScsqlError(errors.INVALID_ARGUMENT, f"{_shown(path)} does not exist")
        start = start.resolve()
        is_dir = start.is_dir()
    except (OSError, ValueError, RuntimeError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        raise ScsqlError(INDEX_PATH_UNUSABLE, f"the directory to index cannot be looked up: {why}: {_shown(path)}",
                         "give the path of an existing directory (each name at most 255 bytes, "
                         "the whole path at most 4096)") from None
    if not is_dir:
        raise ScsqlError(errors.INVALID_ARGUMENT, f"{_shown(path)} is not a directory", "index a directory; index_text takes one text")
    return start


def _refuse_protected(start: Path, protected: tuple[Path, ...]) -> None:
    for base in protected:
        if _within(start, base):
            raise ScsqlError(INDEX_PATH_PROTECTED,
                             f"{start} is the scsql data directory or keystore, or inside it ({base}); "
                             "scsql never indexes it", "index the project's source tree")


def prepare(agent, path: str | Path) -> Tree:
    """Check that PATH may be indexed by the agent, then scan it.

    The database decides (scsql_caller.index_scope) whether the project has a
    root_path, whether the directory is inside it and outside stores of
    secrets, and names the root; this process refuses a path it cannot look
    up (SC224) and its own data directory and keystore (SC223)."""
    start = _start(path)
    protected = protected_dirs()
    _refuse_protected(start, protected)
    with agent.transaction() as conn:
        root = conn.execute("select scsql_caller.index_scope(%s) as root", (str(start),)).fetchone()["root"]
        secrets = Secrets.read(conn)
    return scan(start, secrets, root=Path(root), protected=protected)


def scan(path: str | Path, secrets: Secrets, root: Path | None = None,
         protected: tuple[Path, ...] | None = None) -> Tree:
    """The indexable files under PATH (see the module docstring). SECRETS are
    the database's (Secrets.read); ROOT is the project root (default: found
    from PATH); PROTECTED the directories never read (default: this
    process's data directory and keystore)."""
    start = _start(path)
    protected = protected_dirs() if protected is None else protected
    _refuse_protected(start, protected)
    root = root or project_root(start)
    prefix = "" if start == root else start.relative_to(root).as_posix()
    tree = Tree(root, prefix, max_bytes=secrets.index_max_bytes)
    ignore = _Ignore(root)
    if prefix and any(ignore.ignored("/".join(prefix.split("/")[: i + 1]), True)
                      for i in range(len(prefix.split("/")))):
        return tree
    for dirpath, dirnames, filenames in os.walk(start, followlinks=False):
        here = Path(dirpath)
        rel_dir = here.relative_to(root).as_posix()
        rel_dir = "" if rel_dir == "." else rel_dir
        keep = []
        for d in sorted(dirnames):
            rel = f"{rel_dir}/{d}" if rel_dir else d
            full = here / d
            if full.is_symlink():
                if not _inside(full, root):
                    tree.skip(rel, "symbolic link leaves the project root")
                continue  # directory links are not followed
            if ignore.ignored(rel, True):
                continue
            if secrets.secret_dir(d):
                tree.skip(rel, SKIP_SECRET_DIR)
            elif any(full == base for base in protected):
                tree.skip(rel, SKIP_PROTECTED)
            else:
                keep.append(d)
        dirnames[:] = keep
        for name in sorted(filenames):
            rel = f"{rel_dir}/{name}" if rel_dir else name
            full = here / name
            if ignore.ignored(rel, False):
                continue
            target = full
            if full.is_symlink():
                if not _inside(full, root):
                    tree.skip(rel, "symbolic link leaves the project root")
                    continue
                target = full.resolve()
            if secret_name(name) or secret_name(target.name):
                tree.skip(rel, SKIP_SECRET_NAME)
                continue
            if target != full:
                if any(_within(target, base) for base in protected):
                    tree.skip(rel, SKIP_PROTECTED)
                    continue
                if any(secrets.secret_dir(part) for part in target.relative_to(root).parts):
                    tree.skip(rel, SKIP_SECRET_DIR)
                    continue
            data = _read_file(tree, rel, full)
            if not data:
                continue
            if _is_binary(data):
                tree.skip(rel, "binary")
                continue
            if secrets.holds_private_key(data.decode("utf-8")):
                tree.skip(rel, SKIP_PRIVATE_KEY)
                continue
            tree.files.append(FileEntry(rel, full, hashlib.sha256(data).hexdigest()))
    return tree


GONE = "gone"  # Admission.file: the file no longer exists (or is empty): it leaves the index


class Admission:
    """The rules of :func:`scan`, for single files named after the fact (an
    edit seen by a hook): ROOT is the project root's real path."""

    def __init__(self, root: Path, secrets: Secrets, protected: tuple[Path, ...] | None = None):
        self.root, self.secrets = root, secrets
        self.protected = protected_dirs() if protected is None else protected
        self.ignore = _Ignore(root)

    def file(self, rel: str) -> bytes | str:
        """The bytes to index of the file at REL (relative to the root, links
        resolved), GONE when it is missing or empty, else why it is not indexed."""
        parts = rel.split("/")
        full = self.root / rel
        if ".git" in parts or any(self.ignore.ignored("/".join(parts[: i + 1]), True) for i in range(len(parts) - 1)) \
                or self.ignore.ignored(rel, False):
            return "ignored (.gitignore)"
        if any(self.secrets.secret_dir(p) for p in parts[:-1]):
            return SKIP_SECRET_DIR
        if any(_within(full, base) for base in self.protected):
            return SKIP_PROTECTED
        if secret_name(parts[-1]):
            return SKIP_SECRET_NAME
        if not full.exists():
            return GONE
        try:
            data = read_regular(full, self.secrets.index_max_bytes)
        except Unindexable as exc:
            return exc.reason
        except OSError as exc:
            return f"unreadable: {exc.strerror or exc}"
        if data is None:
            return "not a regular file"
        if not data.strip():
            return GONE
        if _is_binary(data):
            return "binary"
        if self.secrets.holds_private_key(data.decode("utf-8")):
            return SKIP_PRIVATE_KEY
        return data


class Unindexable(Exception):
    """A file that is not indexed: REASON (for the report), counted under CATEGORY."""

    def __init__(self, reason: str, category: str | None = None):
        super().__init__(reason)
        self.reason, self.category = reason, category or reason


def _mib(n: int) -> str:
    return f"{n / 1048576:g} MiB"


def read_regular(full: Path, max_bytes: int) -> bytes | None:
    """The bytes of the regular file at FULL (None when it is not one).
    The checks and the read are of one open file, so the file cannot be
    swapped between them. Raises :class:`Unindexable` for a file over max_bytes
    (the database's bound, Rules.index_max_bytes: 2 MiB)
    and for a file with more than one name (a hard link): its other names
    may be outside the project root, and a hard link cannot be told from
    the file it names; OSError when it cannot be read."""
    if not full.is_file():
        return None
    fd = os.open(full, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO put in its place does not block
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            return None
        if st.st_nlink > 1:
            raise Unindexable(SKIP_HARD_LINK)
        if st.st_size > max_bytes:
            raise Unindexable(f"larger than {_mib(max_bytes)} ({st.st_size} bytes)", f"larger than {_mib(max_bytes)}")
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise Unindexable(f"larger than {_mib(max_bytes)} (more than {max_bytes} bytes)", f"larger than {_mib(max_bytes)}")
    return data


def _read_file(tree: Tree, rel: str, full: Path) -> bytes | None:
    """The bytes of the file at FULL to index, or None: not a regular file,
    empty, or skipped with its reason (:func:`read_regular`)."""
    try:
        data = read_regular(full, tree.max_bytes)
    except Unindexable as exc:
        tree.skip(rel, exc.reason, exc.category)
        return None
    except OSError as exc:
        tree.skip(rel, f"unreadable: {exc.strerror or exc}", "unreadable")
        return None
    return data if data and data.strip() else None


def _inside(link: Path, root: Path) -> bool:
    try:
        link.resolve().relative_to(root)
        return True
    except (ValueError, OSError, RuntimeError):
        return False


# -- chunk spans ---------------------------------------------------------------


def min_chunk_chars(chunk_chars: int) -> int:
    """The size under which a code chunk of at most CHUNK_CHARS joins its neighbours: a third of it."""
    return chunk_chars // 3


def _span(start: int, end: int, anchor: str | None) -> dict[str, Any]:
    return {"start": start, "end": end, "anchor": anchor}


def _leading_comments(lines: list[str], start: int, floor: int, marker: tuple[str, ...]) -> int:
    """Move a 1-based start line up over the comment lines right above it."""
    while start - 1 > floor and lines[start - 2].lstrip().startswith(marker) and lines[start - 2].strip():
        start -= 1
    return start


def _fill(spans: list[dict[str, Any]], lines: list[str]) -> list[dict[str, Any]]:
    """Spans in order, plus spans (anchor None) for the non-blank code between them."""
    out: list[dict[str, Any]] = []
    cursor = 1
    for s in sorted(spans, key=lambda s: s["start"]):
        if s["start"] < cursor:
            continue
        if any(ln.strip() for ln in lines[cursor - 1 : s["start"] - 1]):
            out.append(_span(cursor, s["start"] - 1, None))
        out.append(s)
        cursor = s["end"] + 1
    if any(ln.strip() for ln in lines[cursor - 1 :]):
        out.append(_span(cursor, len(lines), None))
    return [_trim(s, lines) for s in out]


def _trim(s: dict[str, Any], lines: list[str]) -> dict[str, Any]:
    start, end = s["start"], s["end"]
    while start < end and not lines[start - 1].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return _span(start, end, s["anchor"])


class _Lines(list):
    """A text's lines, with the character count of any run of them at once
    (_chars: the spans of a large file ask for thousands)."""

    def __init__(self, lines: list[str]):
        super().__init__(lines)
        self.off = list(itertools.accumulate((len(ln) + 1 for ln in lines), initial=0))


def _chars(lines: list[str], start: int, end: int) -> int:
    """Characters of lines START to END (1-based, inclusive), a newline each."""
    if isinstance(lines, _Lines) and start >= 1:
        end = min(end, len(lines))
        return lines.off[end] - lines.off[start - 1] if end >= start else 0
    return sum(len(ln) + 1 for ln in lines[start - 1 : end])


def _anchor(a: str | None, b: str | None) -> str | None:
    names = [x for x in (a, b) if x]
    joined = ", ".join(dict.fromkeys(", ".join(names).split(", "))) if names else None
    return joined[:200] if joined else None


def _split(s: dict[str, Any], lines: list[str], most: int) -> list[dict[str, Any]]:
    """A span over MOST characters as pieces of about equal size (each under
    the maximum unless one line is), cut at a blank line or a line no deeper
    than the span's first where one is near, so no piece is a fragment."""
    size = _chars(lines, s["start"], s["end"])
    if size <= most or s["end"] == s["start"]:
        return [s]
    target = size / -(-size // most)
    base = _indent(lines[s["start"] - 1]) + 4
    pieces = []
    start, acc, best = s["start"], 0, None  # best: the last good line to end a piece on
    for i in range(s["start"], s["end"] + 1):
        line = lines[i - 1]
        if acc and acc + len(line) + 1 > most:
            cut = best if best is not None else i - 1
            pieces.append(_span(start, cut, s["anchor"]))
            start, acc, best = cut + 1, _chars(lines, cut + 1, i - 1), None
        if i > start and acc >= 0.6 * target and (not line.strip() or _indent(line) <= base):
            best = i - 1
            if acc >= target:
                pieces.append(_span(start, i - 1, s["anchor"]))
                start, acc, best = i, 0, None
        acc += len(line) + 1
    pieces.append(_span(start, s["end"], s["anchor"]))
    return [_trim(p, lines) for p in pieces if any(ln.strip() for ln in lines[p["start"] - 1 : p["end"]])]


def _halves(s: dict[str, Any], lines: list[str]) -> list[dict[str, Any]]:
    """S cut in two at the line boundary nearest its middle character."""
    half = _chars(lines, s["start"], s["end"]) / 2
    acc = 0
    for i in range(s["start"], s["end"]):
        acc += len(lines[i - 1]) + 1
        if acc >= half:
            return [_trim(_span(s["start"], i, s["anchor"]), lines), _trim(_span(i + 1, s["end"], s["anchor"]), lines)]
    return [s]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _pack(spans: list[dict[str, Any]], lines: list[str], most: int) -> list[dict[str, Any]]:
    """Spans no fragment: each over MOST characters split evenly (_split);
    then each under min_chunk_chars(MOST) merged with its neighbour (the one
    before, else the one after) while the two fit in MOST; a merged span
    covers the lines between them and names both anchors."""
    least = min_chunk_chars(most)
    pieces = [p for s in spans for p in _split(s, lines, most)]
    out: list[dict[str, Any]] = []
    for p in pieces:
        if out:
            prev = out[-1]
            small = _chars(lines, p["start"], p["end"]) < least or _chars(lines, prev["start"], prev["end"]) < least
            if small and _chars(lines, prev["start"], p["end"]) <= most:
                out[-1] = _span(prev["start"], p["end"], _anchor(prev["anchor"], p["anchor"]))
                continue
        out.append(p)
    return _rebalance(out, lines, most)


def _rebalance(spans: list[dict[str, Any]], lines: list[str], most: int) -> list[dict[str, Any]]:
    """A piece still under min_chunk_chars(MOST) (both neighbours too large to
    take it) is joined to its smaller neighbour and the two are split again
    evenly (_split), so neither is a fragment."""
    least = min_chunk_chars(most)
    out = list(spans)
    i = 0
    while i < len(out):
        size = _chars(lines, out[i]["start"], out[i]["end"])
        if size >= least or len(out) == 1:
            i += 1
            continue
        sizes = {j: _chars(lines, out[j]["start"], out[j]["end"]) for j in (i - 1, i + 1) if 0 <= j < len(out)}
        j = min(sizes, key=lambda k: sizes[k])
        a, b = sorted((i, j))
        both = _span(out[a]["start"], out[b]["end"], _anchor(out[a]["anchor"], out[b]["anchor"]))
        again = _split(both, lines, most)
        if len(again) < 2 or min(_chars(lines, x["start"], x["end"]) for x in again) < least:
            again = _halves(both, lines)
        if len(again) < 2 or min(_chars(lines, x["start"], x["end"]) for x in again) < least:
            i += 1  # one line longer than a chunk: nothing better to do
            continue
        out[a:b + 1] = again
        i = b + 1
    return out


# A module's outline: its top-level functions and classes as (first line,
# last line, name, methods), a method as (first line, last line, name), lines
# 1-based; a definition's first line is its first decorator's, its last line
# that of its last statement. scsql.code.parse.outline makes the same
# from the tree-sitter parse made anyway for the symbols, so an edited file
# is parsed once.
Outline = list[tuple[int, int, str, list[tuple[int, int, str]]]]


def _first_line(node) -> int:
    return min([node.lineno, *(d.lineno for d in node.decorator_list)])


def python_outline(text: str) -> Outline | None:
    """The outline of a Python module from its ast, None when it does not parse."""
    try:
        module = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    functions = ast.FunctionDef | ast.AsyncFunctionDef
    return [(_first_line(node), node.end_lineno or node.lineno, node.name,
             [(_first_line(m), m.end_lineno or m.lineno, m.name) for m in node.body if isinstance(m, functions)]
             if isinstance(node, ast.ClassDef) else [])
            for node in module.body if isinstance(node, functions | ast.ClassDef)]


def python_spans(text: str, most: int, outline: Outline | None = None) -> list[dict[str, Any]] | None:
    """Top-level definitions of a Python module (a class over MOST characters:
    its methods), from OUTLINE when given, else from the module's ast."""
    if outline is None:
        outline = python_outline(text)
        if outline is None:
            return None
    lines = _Lines(text.split("\n"))
    spans: list[dict[str, Any]] = []
    floor = 0
    for first, end, name, methods in outline:
        start = _leading_comments(lines, first, floor, ("#",))
        floor = end
        if methods and _chars(lines, start, end) > most:
            inner: list[dict[str, Any]] = []
            mfloor = start
            for mfirst, mend, mname in methods:
                mstart = _leading_comments(lines, mfirst, mfloor, ("#",))
                inner.append(_span(mstart, mend, f"{name}.{mname}"))
                mfloor = mend
            head_end = inner[0]["start"] - 1
            spans.append(_span(start, max(head_end, start), name))
            spans.extend(inner)
            tail = inner[-1]["end"] + 1
            if tail <= end and any(ln.strip() for ln in lines[tail - 1 : end]):
                spans.append(_span(tail, end, name))
            continue
        spans.append(_span(start, end, name))
    return _fill(spans, lines) if spans else None


_DEF = re.compile(
    r"^(?:export\s+)?(?:default\s+)?(?:pub(?:\([\w:]+\))?\s+)?(?:async\s+)?(?:static\s+)?(?:abstract\s+)?"
    r"(?:public\s+|private\s+|protected\s+)?"
    r"(?:function\*?|class|interface|type|enum|struct|trait|impl|fn|func|def|module|namespace|const|let|var|"
    r"create\s+(?:or\s+replace\s+)?(?:function|procedure|table|view|index|trigger|type|materialized\s+view))\b",
    re.IGNORECASE,
)
_NAME = re.compile(
    r"(?:function\*?|class|interface|type|enum|struct|trait|impl|fn|func|def|module|namespace|const|let|var|"
    r"procedure|table|view|index|trigger)\s+(?:if\s+not\s+exists\s+)?(?:<[^>]*>\s*)?(?:\([^)]*\)\s*)?"
    r"([A-Za-z_$][\w$.]*)",
    re.IGNORECASE,
)
_COMMENT = ("//", "/*", "*", "#", "--")


def code_spans(text: str) -> list[dict[str, Any]] | None:
    """Heuristic for languages without a parser here: a definition starts at a
    line with no indentation that opens with a definition keyword (function,
    class, interface, type, enum, struct, trait, impl, fn, func, def, module,
    namespace, const, let, var, or SQL's create [or replace] function /
    procedure / table / view / index / trigger / type), optionally after
    export, default, pub, async, static, abstract or a visibility keyword,
    and takes the comment lines right above it; it runs to the line before
    the next definition. Its anchor is the name after the keyword."""
    lines = text.split("\n")
    starts: list[tuple[int, str | None]] = []
    for i, line in enumerate(lines, 1):
        if line[:1].isspace() or not _DEF.match(line):
            continue
        m = _NAME.search(line)
        starts.append((i, m.group(1) if m else None))
    if not starts:
        return None
    spans = []
    floor = 0
    for k, (line_no, name) in enumerate(starts):
        start = _leading_comments(lines, line_no, floor, _COMMENT)
        end = (starts[k + 1][0] - 1) if k + 1 < len(starts) else len(lines)
        if k + 1 < len(starts):
            end = _leading_comments(lines, starts[k + 1][0], line_no, _COMMENT) - 1
        spans.append(_span(start, max(end, start), name))
        floor = end
    return _fill(spans, lines)


def spans_for(rel: str, text: str, chunk_chars: int, outline: Outline | None = None) -> list[dict[str, Any]] | None:
    """Chunk spans for a file, or None to let the database chunk it as text:
    its definitions (python_spans, code_spans) packed into chunks of at most
    CHUNK_CHARS, the database's chunk size (Rules.chunk_chars) (_pack: large
    ones split evenly, small neighbours merged up to CHUNK_CHARS). A Python
    file's OUTLINE, when the caller has it (scsql.code.parse.outline), saves
    parsing it again."""
    if re.search(r"\r(?!\n)", text):
        return None  # lone CR: line numbers would differ between here and the database
    suffix = Path(rel).suffix.lower()
    if suffix in (".py", ".pyi"):
        spans = python_spans(text, chunk_chars, outline)
    elif suffix in CODE_SUFFIXES:
        spans = code_spans(text)
    else:
        return None
    return _pack(spans, _Lines(text.split("\n")), chunk_chars) if spans else None


# -- indexing -------------------------------------------------------------------


def _read_text(agent, entry: FileEntry | None) -> str:
    """The file as it is now (if it changed since the scan: still one name), as text."""
    if entry is None:
        raise ScsqlError(errors.INVALID_ARGUMENT, "not in the scanned tree")
    data = read_regular(entry.path, agent.rules().index_max_bytes)
    if data is None:
        raise ScsqlError(errors.INVALID_ARGUMENT, "no longer a regular file")
    return data.decode("utf-8")


def _file_text(rel: str, text: str, chunk_chars: int):
    from ..core.bulk import Text

    return Text(rel, text, "file", spans=spans_for(rel, text, chunk_chars),
                meta={"language": Path(rel).suffix.lstrip(".") or None})


def _count(report: dict[str, Any], row: dict[str, Any]) -> None:
    # A file holding a secret is stored redacted, so its hash never
    # matches the manifest's: the database finds it unchanged.
    if row["unchanged"]:
        report["unchanged"] += 1
    else:
        report["indexed"] += 1
        report["chunks"] += row["chunks"]


def _index_one(agent, text, report: dict[str, Any]) -> None:
    """One file in its own transaction (index_text): what a batch the database refused falls back to."""
    try:
        with agent.transaction() as conn:
            row = conn.execute(
                "select chunks, unchanged from scsql.index_text(%s, %s, 'file', null, 'standard', %s, %s)",
                (text.path, text.content, Jsonb(text.spans) if text.spans is not None else None, Jsonb(text.meta)),
            ).fetchone()
        _count(report, row)
    except ScsqlError as exc:
        report["failed"].append({"path": text.path, "error": str(exc)})


def index_files(agent, tree: Tree, actions: list[dict[str, Any]], progress: bool | None = None) -> dict[str, Any]:
    """Index the files the database asked for (action index): in batches
    through the bulk path (scsql.index_staged, one transaction a batch of
    about 4 MiB); a batch the database refuses is indexed again one file a
    transaction (index_text), so one bad file fails alone."""
    from tqdm import tqdm

    from ..core.bulk import batches, index_batches

    by_rel = {f.rel: f for f in tree.files}
    todo = [a["path"] for a in actions if a["action"] == "index"]
    removed = sorted(a["path"] for a in actions if a["action"] == "removed")
    report: dict[str, Any] = {
        "root": str(tree.root), "prefix": tree.prefix, "files": len(tree.files), "indexed": 0,
        "unchanged": len(tree.files) - len(todo), "removed": removed, "chunks": 0,
        "skipped": tree.skipped, "skipped_counts": tree.skipped_counts(), "failed": [],
    }
    from ..code.index import SymbolPass  # the symbol graph of the files that changed, after their chunks

    symbols = SymbolPass.start(agent, tree)

    def texts():  # read as the batches need them
        for rel in todo:
            try:
                yield _file_text(rel, _read_text(agent, by_rel.get(rel)), agent.rules().chunk_chars)
            except (ScsqlError, OSError, UnicodeDecodeError, Unindexable) as exc:
                report["failed"].append({"path": rel, "error": str(exc)})
                bar.update(1)

    bar = tqdm(total=len(todo), desc="indexing", unit="file", disable=None if progress is None else not progress)
    for batch, rows in index_batches(agent, batches(texts())):
        if isinstance(rows, ScsqlError):
            for text in batch:
                _index_one(agent, text, report)
        else:
            for row in rows:
                _count(report, row)
        bar.update(len(batch))
    bar.close()
    failed = {f["path"] for f in report["failed"]}
    for rel in sorted(symbols.todo - failed):  # a file whose text failed has no symbols either
        try:
            with agent.transaction() as conn:
                symbols.store(conn, rel, _read_text(agent, by_rel.get(rel)))
        except (ScsqlError, OSError, UnicodeDecodeError, Unindexable) as exc:
            report["failed"].append({"path": rel, "error": str(exc)})
    report["symbols"] = symbols.finish()
    return report


def index_tree(agent, path: str | Path, progress: bool | None = None) -> dict[str, Any]:
    """Index PATH into the agent's project: check it may, scan, compare in one round trip, index what changed."""
    tree = prepare(agent, path)
    with agent.transaction() as conn:
        actions = conn.execute("select path, action from scsql.index(%s, %s)",
                               (tree.prefix, Jsonb(tree.manifest()))).fetchall()
    return index_files(agent, tree, actions, progress)
