"""Making a captured event storable: capture never refuses a real event.

Claude Code runs a tool whatever its input holds, so what the hooks record
must be stored whatever it holds too:

* text PostgreSQL cannot hold is replaced: a NUL, and a lone UTF-16
  surrogate (Claude Code is Node: ``JSON.stringify`` writes ``"\\ud800"``
  for one, and Node writes U+FFFD where a file name or command holds it), each
  by U+FFFD (:func:`clean`), counted per event field;
* every bounded text column is filled by ``scsql.storable``: redacted, then
  clipped where a word ends to the column's bound, which the database reports
  (``scsql.column_bounds``), so redaction never meets part of a secret and the
  stored text never exceeds its bound; a clipped value keeps the length and
  sha256 of what it was cut from (:func:`hookclient.measure`);
* an identifier longer than its column (a tool_use_id, a session id) is
  stored as ``sha256:<hex>`` of itself, the same on every path that sees it.

Each row records what was done in its signed ``altered`` object, field by
field (see migrations/0600_capture_altered.sql). A refusal that none of this
cures is stored as a stub (:func:`stub_marks`) by the spool's replay.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .hookclient import PRECUT_MARGIN, measure, precut, scrub_value

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
ID_CHARS = 190  # an identifier column holds 200; its capture key adds a prefix


def clean(value: Any) -> tuple[Any, dict[str, int]]:
    """VALUE with each NUL and lone surrogate of its strings (object keys
    included) replaced by U+FFFD, and how many of each were replaced."""
    counts: dict[str, int] = {}

    def fix(s: str) -> str:
        if s.isascii() and "\x00" not in s:
            return s

        def one(m: re.Match) -> str:
            kind = "nul" if m.group() == "\x00" else "surrogate"
            counts[kind] = counts.get(kind, 0) + 1
            return "\ufffd"
        return _UNSTORABLE.sub(one, s)

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return fix(v)
        if isinstance(v, dict):
            return {fix(k) if isinstance(k, str) else k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v
    return walk(value), counts


def clean_event(event: dict) -> dict:
    """The event with every field scrubbed (hookclient.scrub: no <private>
    text, no Claude Code wrapper) and cleaned (:func:`clean`); the counts go
    to ``scsql_replaced`` by field. Idempotent: a cleaned event is returned as it is."""
    if "scsql_replaced" in event:
        return event
    out: dict = {}
    replaced: dict[str, dict[str, int]] = {}
    for key, value in event.items():
        fixed, counts = clean(scrub_value(value) if not key.startswith("scsql_") else value)
        key, _ = clean(key)
        out[key] = fixed
        if counts:
            replaced[key] = counts
    out["scsql_replaced"] = replaced
    return out


def storable_id(value: Any, limit: int = ID_CHARS) -> tuple[str | None, bool]:
    """An identifier as a column of LIMIT characters holds it: itself, or
    ``sha256:<hex>`` of itself when longer (then True)."""
    if value is None or value == "":
        return None, False
    text = str(value)
    if len(text) <= limit:
        return text, False
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(), True


def stub_marks(code: str, message: str) -> dict:
    """The altered object of a stub row: the refusal's code and first line."""
    return {"stub": {"code": str(code)[:20], "message": " ".join(str(message).split())[:300]}}


_BOUNDS: dict[str, dict[tuple[str, str], int]] = {}


def column_bounds(conn) -> dict[tuple[str, str], int]:
    """(table, column) -> the most characters it holds, as the database's
    check constraints say (scsql.column_bounds), read once per server."""
    key = conn.info.dsn
    found = _BOUNDS.get(key)
    if found is None:
        rows = conn.execute("select table_name, column_name, max_chars from scsql.column_bounds()").fetchall()
        found = _BOUNDS[key] = {(r["table_name"], r["column_name"]): r["max_chars"] for r in rows}
    return found


@dataclass
class _Value:
    row: dict
    name: str
    limit: int
    original: str
    sizes: dict | None  # bytes and sha256 of what the value came from, when the hook measured it


@dataclass
class Batch:
    """The rows one capture transaction writes, made storable together (one query)."""

    conn: Any
    values: list[_Value] = field(default_factory=list)

    def add(self, table: str, row: dict, sources: dict[str, str], event: dict,
            measured: Iterable[str] = ()) -> dict:
        """Queue ROW (of scsql.TABLE) to be made storable. SOURCES names the
        event field each row field came from (for the counts of what was
        replaced); a field in MEASURED that the hook clipped before sending
        (scsql_sizes) records the hook's measurement of its whole source.
        Returns ROW, completed by :meth:`run`."""
        bounds = column_bounds(self.conn)
        replaced = event.get("scsql_replaced") or {}
        sizes = event.get("scsql_sizes") or {}
        row["altered"] = merge(row.get("altered"), [(name, {"replaced": dict(replaced[source])})
                                                    for name, source in sources.items()
                                                    if replaced.get(source) and row.get(name) is not None])
        for name, value in list(row.items()):
            limit = bounds.get((table.removeprefix("scsql."), name))
            if limit is None or not isinstance(value, str):
                continue
            hook_sizes = sizes.get(sources.get(name, "")) if name in measured else None
            self.values.append(_Value(row, name, limit, value, hook_sizes))
        return row

    def run(self) -> None:
        """Every queued value redacted and bounded by scsql.storable; a
        clipped one records its original's bytes and sha256 in the row's altered."""
        if not self.values:
            return
        texts = [precut(v.original, v.limit + PRECUT_MARGIN) for v in self.values]
        got = self.conn.execute("select * from scsql.storable(%s::text[], %s::int[], %s::int[])",
                                (texts, [v.limit for v in self.values], [len(v.original) for v in self.values])
                                ).fetchone()
        for v, text, clipped in zip(self.values, got["texts"], got["clipped"], strict=True):
            v.row[v.name] = text
            if clipped or v.sizes or len(v.original) > v.limit:
                marks = v.row["altered"] = v.row.get("altered") or {}
                marks.setdefault(v.name, {}).update({"clipped": True, **(v.sizes or measure(v.original))})
        self.values.clear()


def merge(altered: dict | None, more: Iterable[tuple[str, dict]]) -> dict | None:
    """ALTERED with the marks of MORE (field, marks) added."""
    out = dict(altered or {})
    for name, marks in more:
        out.setdefault(name, {}).update(marks)
    return out or None
