"""Independent verification of every chain: links, hashes and signatures.

The verifier reads rows, public keys and checkpoints, and recomputes
everything itself with the canonical encoding of :mod:`scsql.audit.encoding` (written
from the specification in ``COMMENT ON FUNCTION scsql._enc``, not by asking
the database to encode; only which columns a table has, in which part --
stamped, signed or appended -- comes from ``scsql._chain_fields``; an
appended field enters a row's payload only when not NULL, preceded by its
position). It
checks every row still present in every chain
(or those after a checkpoint, with ``from_checkpoint``, and the row it names,
which only retention may have taken):

* seq runs on without repeat (``fork``), and without gap (``seq-gap``) except
  where checkpoint segments say the missing rows lay in a dated partition
  that no longer exists and that retention retired (a record in
  scsql.partition_retirements that holds up against the settings log), and a
  run of missing rows ends at the end of such a segment (or at the horizon of
  earlier versions); rows missing from a partition dropped otherwise are a
  ``partition-dropped`` break at the first of them, whose detail names the
  seqs the checkpoints placed there and the partition;
* no row is present where a segment says its partition no longer exists
  (``retired-row-present``: the row was moved or put back);
* prev_hash is the previous row's row_hash, or after retired rows the hash a
  checkpoint signed for the last of them (``prev-mismatch``; checkpoints
  that signed different hashes for it are a ``checkpoint-mismatch``);
* row_hash = sha256(prev_hash || canonical row bytes || signature)
  (``hash-mismatch``), compared in constant time;
* the row's author and project are its chain's (``wrong-author``,
  ``wrong-project``), and its signature verifies with the author's public key
  valid at the row's time (``signature``, ``wrong-key``);
* no signature occurs twice in a chain (``replay``: a signed write stored
  again, links and hashes recomputed around it). Ed25519 signatures are
  deterministic and the client stamps every write an agent makes from one
  process with a later time than the one before, so equal signatures mean a
  copy (two processes of one agent would have to write the same content in
  the same microsecond). A copy of a row whose partition retention dropped
  is not caught: the original is gone. The check keeps
  a 64-bit hash of every signature of the chain being read (roughly 70 bytes
  a row), and confirms a match with the database; rows before a starting
  checkpoint (``starts``) are not read, so copies of them go unnoticed there;
* every row a checkpoint signed (heads and segment ends) still has the signed
  hash (``checkpoint-mismatch``), the chain ends at its recorded head
  (``head-mismatch``) and at or past every checkpointed head;
* the chain's project and agent are those of its agent and of every
  checkpoint that names it (``chain-identity``), every chain a checkpoint
  names still exists (``chain-missing``), and a horizon left by retention of
  earlier versions is a checkpointed head (``horizon-unanchored``).

The report also lists the quarantined chains (scsql.chain_quarantines):
``scsql checkpoint`` signs a chain that does not verify only up to its last
verified row (``collect`` gives those prefixes) and records it there. The row
an acknowledged quarantine names (its chain and from_seq) is excused when its
break is one an agent can cause through the API (``EXCUSABLE``: a signature
that does not verify, a key not valid at the row's time, a replayed
signature): the break is reported among ``Report.excused``, not
``Report.breaks``, and the chain is verified past it, so the rows after it
still count. Every other break stays a break whatever is acknowledged: only
someone with the owner's rights can cause it, and they could also write an
acknowledgement. ``excuse_open`` (scsql restore) excuses the rows of open
quarantines too: they were recorded before the backup was signed.

With ``memory`` (``full`` by default) the report also compares every memory
table with its chained history (``scsql.verify_memory()``, see the end of
sql/26_history.sql): facts, knowledge-base sources and their chunks,
decisions, open loops and learnings; each row that differs is a
``MemoryBreak``.

Checkpoints count only when their auditor signature verifies with a
registered auditor key; a database checkpoint that differs from its exported
copy counts for nothing and is reported under the chains it differs in.

Incremental by default: ``scsql checkpoint`` verifies every row before the
auditor signs the heads (checkpoint formats 2 and 3: "verified up to these
heads"). Verification then recomputes every hash and link, but checks
signatures only of rows after the newest verified checkpoint of their chain:
the rows up to it are the very rows the auditor verified, since their hashes
lead to hashes the auditor signed. ``full=True`` (``scsql verify --full``)
checks every signature again, for instance after public keys might have
changed; checking against given keys (``key_override``) is always full.

Speed: Ed25519 verification dominates. libsodium (PyNaCl) verifies about
twice as fast as OpenSSL through ``cryptography``, so PyNaCl is used; chains
are split between processes in ranges of chain_id balanced by row count (each
process reads its range in index order with server-side cursors in large
batches), so both cores work.
"""

from __future__ import annotations

import bisect
import datetime as dt
import heapq
import hmac
import json
import multiprocessing as mp
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any, NamedTuple

import nacl.bindings
import nacl.exceptions
import psycopg
from psycopg import sql
from psycopg.types.json import set_json_loads

from . import encoding as enc
from .encoding import CHECKPOINT_FORMATS, CheckpointHead, checkpoint_payload
from ..core.config import AUDITOR_ROLE
from ..core.errors import ScsqlError
from ..core import errors

BATCH = 20000

# Chained tables whose rows the database writes itself, unsigned (see the head
# of sql/26_history.sql and sql/28_purge.sql): their signature field is a marker, 32 zero bytes then
# 32 random ones, checked instead of an Ed25519 signature. Links, hashes,
# authors, keys and replays are checked as for every other row.
UNSIGNED_TABLES = frozenset({"scsql.memory_changes", "scsql.purges"})
_UNSIGNED_MARK = bytes(32)

# Breaks an agent can cause through the API (it chooses a row's signature, key
# id and time, nothing else): the only ones an acknowledged quarantine excuses.
EXCUSABLE = frozenset({"signature", "wrong-key", "replay"})

# Every kind of break this verifier reports: the catalogue scsql.chain_break_kinds
# (sql/19_break_kinds.sql) lists the same, and which of them scsql.verify_chain
# finds too (tests/audit/test_break_kinds.py). The verifier keeps its own copy
# rather than reading the database it checks.
KINDS = frozenset({
    "seq-gap", "prev-mismatch", "hash-mismatch", "content-mismatch", "purge-unrecorded", "wrong-author",
    "wrong-project", "chain-identity", "chain-missing", "checkpoint-mismatch", "head-mismatch", "horizon-unanchored", "partition-dropped", "retired-row-present",
    "signature", "wrong-key", "replay", "fork", "chain-unknown", "checkpoint-signature",
})


@dataclass(frozen=True)
class Break:
    chain_id: int
    seq: int
    kind: str
    detail: str
    table: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:  # a kind outside the catalogue is this verifier's bug
            raise ValueError(f"break kind {self.kind!r} is not in scsql.chain_break_kinds")

    def __str__(self) -> str:
        where = f" ({self.table})" if self.table else ""
        return f"chain {self.chain_id} seq {self.seq}{where}: {self.kind}: {self.detail}"


@dataclass(frozen=True)
class MemoryBreak:
    """A row of memory that is not what its chained history last recorded (scsql.verify_memory())."""

    project: str
    kind: str
    target: str
    problem: str
    expected: str | None
    found: str | None
    detail: str
    before_history: bool = False

    def __str__(self) -> str:
        return (f"memory {self.kind} {self.target!r} of project {self.project}: {self.problem}: {self.detail}"
                f" (expected {self.expected or 'none'}, found {self.found or 'none'})")


@dataclass
class Report:
    rows: int = 0
    chains: int = 0
    breaks: list[Break] = field(default_factory=list)
    excused: list[Break] = field(default_factory=list)  # rows quarantines excuse (reported, not breaks)
    memory: list[MemoryBreak] = field(default_factory=list)  # memory rows that differ from their history
    memory_checked: bool = False
    memory_unrecorded: list[MemoryBreak] = field(default_factory=list)  # rows older than the memory history
    checkpoints: int = 0
    seconds: float = 0.0
    signatures: int = 0  # rows whose signature was checked (all of them when full)
    full: bool = False
    heads: dict[int, CheckpointHead] = field(default_factory=dict)  # with collect=True: what a checkpoint signs
    # With collect=True, for chains that do not verify: their rows up to the last one that does.
    prefixes: dict[int, CheckpointHead] = field(default_factory=dict)
    quarantines: list[dict[str, Any]] = field(default_factory=list)  # scsql.chain_quarantines(), oldest first

    @property
    def ok(self) -> bool:
        """No break of a chain (but excused rows) and no memory row other than its history says."""
        return not self.breaks and not self.memory

    @property
    def rate(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0


# -- what valid checkpoints say about each chain ---------------------------------


@dataclass
class ChainFacts:
    """What the checkpoints whose signatures verified say about one chain."""

    expected: dict[int, list[tuple[bytes, str]]] = field(default_factory=dict)  # seq -> [(row_hash, source)]
    segments: list[tuple[int, int, str, bytes]] = field(default_factory=list)  # (first, last, part, last row_hash)
    anchors: set[tuple[int, bytes]] = field(default_factory=set)  # signed heads (seq, row_hash)
    identity: list[tuple[int, int | None, str]] = field(default_factory=list)  # (project_id, agent_id, source)
    excused: dict[int, str] = field(default_factory=dict)  # seq -> the quarantine that excuses its row
    verified: int = 0  # newest head of a checkpoint that vouches for verified rows (formats 2, 3)
    covered: int = 0  # newest head of a format-3 checkpoint: its segments reach it
    newest: tuple[int, str] | None = None  # (seq, source) of the newest signed head

    def expect(self, seq: int, row_hash: bytes, source: str) -> None:
        self.expected.setdefault(seq, []).append((row_hash, source))


_NO_FACTS = ChainFacts()


def _dated(part: str) -> bool:
    """A dated partition (retention may drop it): ``<table>@<lower bound>``."""
    return "@" in part and not part.endswith("@default")


class _Gaps:
    """Which missing seqs of one chain were retired: those in segments whose
    dated partition is gone, or (retention of earlier versions) those in no
    segment at or below an anchored horizon. No row may be present in a
    retired segment, and every run of missing rows must end where the row
    after it links to a signed hash: the end of a retired segment, or the
    horizon."""

    def __init__(self, facts: ChainFacts, existing: set[str], legacy: int, legacy_hash: bytes | None,
                 retirements: dict[str, str | None] | None = None, chain_id: int = 0):
        # retirements: part -> None when retention's record of its drop holds up, else why not.
        retirements = retirements or {}
        merged: list[list] = []
        # A segment is retired (True) when its dated partition is gone and retention retired it,
        # present (False) when the partition exists, dropped (None) when it is gone otherwise.
        rank = {False: 0, None: 1, True: 2}
        self.dropped: dict[str, tuple[int, int]] = {}
        for first, last, part, _h in sorted(facts.segments):
            gone = _dated(part) and part not in existing
            retired: bool | None = False
            if gone:
                retired = True if part in retirements and retirements[part] is None else None
            if retired is None:
                lo, hi = self.dropped.get(part, (first, last))
                self.dropped[part] = (min(lo, first), max(hi, last))
            if merged and first <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], last)
                merged[-1][2] = min(merged[-1][2], retired, key=rank.__getitem__)
            else:
                merged.append([first, last, retired])
        self.segments = sorted(facts.segments)
        self.retirements = retirements
        self.chain_id = chain_id
        self.firsts = [m[0] for m in merged]
        self.pieces = merged
        # Seqs any segment of a gone partition covers (merged): rows there must be gone.
        gone: list[list[int]] = []
        for first, last, part, _h in sorted(facts.segments):
            if _dated(part) and part not in existing:
                if gone and first <= gone[-1][1] + 1:
                    gone[-1][1] = max(gone[-1][1], last)
                else:
                    gone.append([first, last])
        self.gone_firsts = [g[0] for g in gone]
        self.gone_lasts = [g[1] for g in gone]
        self.ends: dict[int, bytes | None] = {}
        for _first, last, _part, h in facts.segments:
            self.ends[last] = h if self.ends.get(last, h) == h else None  # None: checkpoints disagree
        self.legacy = legacy
        self.legacy_hash = legacy_hash

    def dropped_detail(self, seq: int) -> str | None:
        """When a segment puts seq in a partition that is gone though retention
        did not retire it: a detail naming the rows placed there and the partition."""
        for first, last, part, _h in self.segments:
            if first <= seq <= last and part in self.dropped:
                lo, hi = self.dropped[part]
                why = self.retirements.get(part, "")
                reason = (f"its retirement record does not hold up ({why})" if part in self.retirements
                          else "there is no retirement record")
                return (f"seq {lo} to {hi} of chain {self.chain_id} lay in partition {part} "
                        f"(from {part.split('@', 1)[1]}, one day), which is gone but was not retired by retention: "
                        f"{reason}")
        return None

    def retired(self, seq: int) -> bool:
        """Whether a segment of a gone partition covers seq (its row must be gone)."""
        i = bisect.bisect_right(self.gone_firsts, seq) - 1
        return i >= 0 and self.gone_lasts[i] >= seq

    def gap(self, x: int, y: int) -> tuple[tuple[str, str] | None, bytes | None, bool]:
        """Whether seqs x..y may be missing: (None, the hash the row after y
        must link to, whether the horizon was needed), or ((kind, detail), None,
        False) when they may not. The hash is None only for rows below the
        horizon of earlier versions, which left nothing signed to link to."""
        s, legacy_used, in_segment = x, False, False
        while s <= y:
            i = bisect.bisect_right(self.firsts, s) - 1
            if i >= 0 and self.pieces[i][1] >= s:
                if self.pieces[i][2] is None:
                    detail = self.dropped_detail(s)
                    if detail is not None:
                        return ("partition-dropped", detail, s), None, False
                    return ("seq-gap", f"seq {s} was not retired: its partition was dropped, but not by retention"), \
                        None, False
                if not self.pieces[i][2]:
                    return ("seq-gap", f"seq {s} was not retired: its partition still exists"), None, False
                s = self.pieces[i][1] + 1
                in_segment = True
            elif s <= self.legacy:
                legacy_used, in_segment = True, False
                nxt = self.firsts[i + 1] if i + 1 < len(self.firsts) else self.legacy + 1
                s = min(nxt, self.legacy + 1)
            else:
                return ("seq-gap", f"seq {s} was not retired: no checkpoint segment holds it"), None, False
        if y in self.ends:
            prev = self.ends[y]
            if prev is None:
                return ("checkpoint-mismatch", f"checkpoints signed different hashes for seq {y}"), None, False
            return None, prev, legacy_used
        if in_segment:
            return ("seq-gap", f"the missing rows end at seq {y}, inside a retired segment, not at a signed end"), None, False
        return None, (self.legacy_hash if y == self.legacy else None), legacy_used


# -- reading ----------------------------------------------------------------


def _connect(conninfo: str, role: str | None) -> psycopg.Connection:
    conn = psycopg.connect(conninfo, autocommit=False, application_name="scsql:verify")
    set_json_loads(enc.JsonValue.parse, conn)  # keeps JSON null apart from SQL NULL
    conn.execute("begin isolation level repeatable read read only")
    # The scans are index-ordered streams read by this process: parallel
    # workers and JIT compilation only take CPU from the verifiers.
    conn.execute("set local max_parallel_workers_per_gather = 0")
    conn.execute("set local jit = off")
    if role:
        conn.execute(sql.SQL("set local role {}").format(sql.Identifier(role)))
    return conn


@dataclass
class _Keys:
    """Public keys by (agent_id, key_id) with their validity windows."""

    keys: dict[tuple[int, int], tuple[bytes, dt.datetime, dt.datetime | None]]

    @classmethod
    def load(cls, conn: psycopg.Connection, override: dict[str, bytes] | None = None,
             names: dict[int, str] | None = None) -> _Keys:
        rows = conn.execute(
            "select agent_id, key_id, public_key, valid_from from scsql.agent_keys order by agent_id, valid_from"
        ).fetchall()
        keys: dict[tuple[int, int], tuple[bytes, dt.datetime, dt.datetime | None]] = {}
        for i, (agent_id, key_id, pub, valid_from) in enumerate(rows):
            nxt = rows[i + 1] if i + 1 < len(rows) and rows[i + 1][0] == agent_id else None
            keys[(agent_id, key_id)] = (bytes(pub), valid_from, nxt[3] if nxt else None)
        if override and names:
            # Verify as if these were the registered keys (for checking exported data against known keys).
            by_name = {v: k for k, v in names.items()}
            for name, pub in override.items():
                agent_id = by_name.get(name)
                for (a, k), (_, vf, vu) in list(keys.items()):
                    if a == agent_id:
                        keys[(a, k)] = (bytes(pub), vf, vu)
        return cls(keys)


MIN_ID, MAX_ID = -(2**63), 2**63 - 1


class _Row(NamedTuple):
    """One chained row as the scan reads it (scsql._chain_scan_sql): its chain
    columns, then its stamped and signed fields in the table's order."""

    chain_id: int
    seq: int
    at: dt.datetime
    key_id: int
    author_id: int
    prev_hash: bytes
    row_hash: bytes
    signature: bytes
    project_id: int
    partition: int
    fields: tuple


def _scan(conn: psycopg.Connection, table: str, ti: int, lo: int, hi: int) -> Iterator[tuple[int, int, int, _Row]]:
    query = conn.execute("select scsql._chain_scan_sql(%s)", (table,)).fetchone()[0]
    cur = conn.cursor(name=f"scan_{ti}", binary=True)
    cur.itersize = BATCH
    cur.execute(query, (lo, hi))
    while True:
        rows = cur.fetchmany(BATCH)
        if not rows:
            break
        for r in rows:
            yield (r[0], r[1], ti, _Row(*r[:10], r[10:]))
    cur.close()


# -- checking one part of the chains ------------------------------------------


_progress_queue: Any = None


def _init_worker(queue: Any) -> None:
    global _progress_queue
    _progress_queue = queue


def _report_progress(n: int) -> None:
    if _progress_queue is not None and n:
        _progress_queue.put(n)


class _Chain:
    """Verification state of one chain."""

    __slots__ = ("next", "prev", "broken", "start", "start_hash", "start_pending", "sig_to", "legacy",
                 "agent", "project", "exp", "gaps", "legacy_gap_end", "covered", "seg", "segs", "signed")

    def __init__(self) -> None:
        self.next, self.prev, self.broken = 1, enc.GENESIS, False
        self.start, self.start_hash, self.start_pending = 0, b"", False
        self.sig_to, self.legacy = 0, 0
        self.agent = self.project = None
        self.exp: dict[int, list[tuple[bytes, str]]] | None = None
        self.gaps: _Gaps | None = None
        self.legacy_gap_end = 0
        self.covered = -1  # collecting segments of rows after this seq (-1: not collecting)
        self.seg: list | None = None
        self.segs: list[tuple[int, int, bytes, str]] = []
        self.signed: set[int] | None = set()  # hash() of each signature seen (None once the chain is done)


@dataclass
class _PartResult:
    rows: int
    chains: int
    breaks: list[Break]
    signatures: int
    heads: dict[int, CheckpointHead]
    prefixes: dict[int, CheckpointHead] = field(default_factory=dict)
    excused: list[Break] = field(default_factory=list)


class _ChainRow(NamedTuple):
    """A row of scsql.chains as verification reads it."""

    chain_id: int
    agent_id: int
    head_seq: int
    head_hash: bytes
    horizon_seq: int
    horizon_hash: bytes
    project_id: int


class _TableSpec(NamedTuple):
    """How to encode the rows of one chained table: its stamped, signed and
    appended fields (an appended field: its position's prefix and encoder)."""

    ti: int
    table: str
    stamped: list[Callable[[Any], bytes]]
    signed: list[Callable[[Any], bytes]]
    n_stamped: int
    appended: list[tuple[bytes, Callable[[Any], bytes]]]
    n_plain: int  # stamped + signed: the appended fields follow them in the row
    # Digested fields (see encoding.enc_digest): (field name, index of the text
    # in the row's fields, index of its digest), and the purge kind of the
    # table; the digests and the row's id follow the appended fields.
    digests: tuple[tuple[str, int, int], ...] = ()
    purge_kind: str | None = None


class _Digested(NamedTuple):
    """A digested field's value in a row that carries its digest: encoded by the digest."""

    digest: bytes


def _digested_values(spec: _TableSpec, fields: tuple) -> list:
    """The row's encoded fields (its digests and id, which follow them, left
    out), each digested text whose digest the row carries replaced by it."""
    values = list(fields[:len(fields) - len(spec.digests) - 1])
    for _name, ti, di in spec.digests:
        if fields[di] is not None:
            values[ti] = _Digested(bytes(fields[di]))
    return values


def _digested(plain: Callable[[Any], bytes]) -> Callable[[Any], bytes]:
    return lambda v: enc.enc_digest(v.digest) if type(v) is _Digested else plain(v)


# Bound once: the row checks run for every row of every chain.
_compare, _join = hmac.compare_digest, b"".join
_enc_ts, _NULL, _row_bytes, _row_hash = enc.enc_ts, enc.NULL, enc.row_bytes, enc.row_hash
_sign_open = nacl.bindings.crypto_sign_open


class _PartVerifier:
    """Verifies the chains with lo <= chain_id <= hi over one connection: the
    catalogue read once, then the rows chain by chain (one method a check),
    then each chain's end against its head and its checkpoints."""

    def __init__(self, conn: psycopg.Connection, lo: int, hi: int, facts: dict[int, ChainFacts],
                 key_override: dict[str, bytes] | None, starts: dict[int, tuple[int, bytes]],
                 full: bool, collect: bool) -> None:
        self.conn, self.lo, self.hi = conn, lo, hi
        self.facts, self.starts, self.full, self.collect = facts, starts, full, collect
        self.breaks: list[Break] = []
        self.excused: list[Break] = []
        self.heads: dict[int, CheckpointHead] = {}
        self.state: dict[int, _Chain] = {}
        self.rows = self.signatures = 0
        self.prefix_cache: dict[tuple[int, int, int], bytes] = {}
        self.agents = {a: (name, project) for a, name, project in
                       conn.execute("select agent_id, name, project_id from scsql.agents").fetchall()}
        self.names = {a: v[0] for a, v in self.agents.items()}
        self.keys = _Keys.load(conn, key_override, self.names).keys
        self.chains = {r.chain_id: r for r in map(_ChainRow._make, conn.execute(
            "select chain_id, agent_id, head_seq, head_hash, horizon_seq, horizon_hash, project_id "
            "from scsql.chains where chain_id between %s and %s", (lo, hi)).fetchall())}
        self.parts = dict(conn.execute("select relid, part from scsql._chain_partitions()").fetchall())
        self.existing = set(self.parts.values())
        # Partitions retention retired: part -> None when its record holds up, else why it does not.
        self.retirements: dict[str, str | None] = {}
        for part, ok, why in conn.execute("select part, ok, detail from scsql.partition_retirements()").fetchall():
            if ok or part not in self.retirements:
                self.retirements[part] = None if ok else why
        fields: dict[str, dict[str, list[str]]] = {}
        columns: dict[str, dict[str, list[str]]] = {}
        for table, part_name, _ord, col, kind in conn.execute("select * from scsql._chain_fields()").fetchall():
            parts = fields.setdefault(table, {"stamped": [], "signed": [], "appended": []})
            if part_name not in parts:
                raise ScsqlError(errors.NOT_CHAINABLE, f"scsql._chain_fields names part {part_name!r} of {table}, which this "
                                 "verifier does not know", "upgrade scsql")
            parts[part_name].append(kind)
            columns.setdefault(table, {"stamped": [], "signed": [], "appended": []})[part_name].append(col)
        digests: dict[str, list[tuple[str, str]]] = {}
        for table, col, kind in conn.execute(
                "select table_name, column_name, target_kind from scsql._chain_digests()").fetchall():
            digests.setdefault(table, []).append((col, kind))
        self.tables = sorted(fields)
        self.specs = [self._spec(ti, t, fields[t], columns[t], digests.get(t, []))
                      for ti, t in enumerate(self.tables)]
        # What purges removed: (kind, row id, field, sha256 hex).
        self.purged = {(k, i, f, h) for k, i, f, h in conn.execute(
            "select p.target_kind, p.target_id, d.key, d.value from scsql.purges p, jsonb_each_text(p.digests) d")}

    @staticmethod
    def _spec(ti: int, table: str, f: dict[str, list[str]], cols: dict[str, list[str]],
              digests: list[tuple[str, str]]) -> _TableSpec:
        """The encoders of one table's fields; a digested field's encodes its digest when the row has one."""
        names = cols["stamped"] + cols["signed"] + cols["appended"]
        digested = {c for c, _ in digests}
        encoders = [(_digested if c in digested else (lambda e: e))(enc.ENCODERS[k])
                    for c, k in zip(names, f["stamped"] + f["signed"] + f["appended"], strict=True)]
        ns, n_plain = len(f["stamped"]), len(f["stamped"]) + len(f["signed"])
        return _TableSpec(ti, table, encoders[:ns], encoders[ns:n_plain], ns,
                          [(enc.appended_prefix(i), e) for i, e in enumerate(encoders[n_plain:], 1)], n_plain,
                          tuple((c, names.index(c), len(names) + j) for j, (c, _) in enumerate(digests)),
                          digests[0][1] if digests else None)

    def fail(self, st: _Chain, chain_id: int, seq: int, kind: str, detail: str, table: str | None = None) -> bool:
        _fail(self.breaks, st, chain_id, seq, kind, detail, table)
        return False

    def excuse(self, st: _Chain, chain_id: int, seq: int, kind: str, detail: str, table: str | None) -> bool:
        """True when a quarantine excuses this row's break (an agent's kind of break, at the
        row the quarantine names): it is reported as excused and the chain goes on; else fail."""
        label = self.facts.get(chain_id, _NO_FACTS).excused.get(seq)
        if label is None or kind not in EXCUSABLE:
            return self.fail(st, chain_id, seq, kind, detail, table)
        self.excused.append(Break(chain_id, seq, kind, f"{detail} ({label})", table))
        return True

    # -- a chain's own checks ------------------------------------------------

    def _identity_problem(self, c: _ChainRow, f: ChainFacts) -> tuple[int, str, str] | None:
        agent = self.agents.get(c.agent_id)
        if agent is None or agent[1] != c.project_id:
            return (0, "chain-identity", f"the chain is in project {c.project_id} but its agent "
                    f"{self.names.get(c.agent_id, c.agent_id)} "
                    + ("does not exist" if agent is None else f"belongs to project {agent[1]}"))
        for project_id, agent_id, source in f.identity:
            if project_id != c.project_id or (agent_id is not None and agent_id != c.agent_id):
                return (0, "chain-identity", f"{source} recorded the chain in project {project_id} for "
                        f"agent {agent_id if agent_id is not None else '?'}; it is now in project {c.project_id} "
                        f"for agent {c.agent_id}")
        return None

    def open_chain(self, chain_id: int) -> _Chain:
        """The state of a chain known to scsql.chains, after its chain-level checks."""
        c, f = self.chains[chain_id], self.facts.get(chain_id, _NO_FACTS)
        st = _Chain()
        st.agent, st.project = c.agent_id, c.project_id
        st.sig_to = 0 if self.full else f.verified
        st.exp = f.expected or None
        legacy, legacy_hash = 0, None
        problem = self._identity_problem(c, f)
        if problem is None and c.horizon_seq > 0:
            # A horizon left by retention of earlier versions: trusted only at a signed head.
            if (c.horizon_seq, bytes(c.horizon_hash)) in f.anchors:
                legacy, legacy_hash = c.horizon_seq, bytes(c.horizon_hash)
            else:
                problem = (c.horizon_seq, "horizon-unanchored",
                           f"the chain's horizon (seq {c.horizon_seq}) is not the head of any valid checkpoint")
        st.legacy = legacy
        st.gaps = _Gaps(f, self.existing, legacy, legacy_hash, self.retirements, chain_id)
        start = self.starts.get(chain_id)
        if start is not None:
            st.start, st.start_hash, st.start_pending = start[0], start[1], True
            st.next, st.prev = start[0] + 1, start[1]
        if self.collect:
            st.covered = f.covered
        if problem is not None:
            self.fail(st, chain_id, *problem)
        return st

    # -- the rows ----------------------------------------------------------------

    def scan(self) -> None:
        unreported = 0
        last: _Chain | None = None
        streams = [_scan(self.conn, t, ti, self.lo, self.hi) for ti, t in enumerate(self.tables)]
        rows = heapq.merge(*streams, key=itemgetter(0, 1))
        ahead = next(rows, None)
        while ahead is not None:
            chain_id, seq, ti, r = ahead
            ahead = next(rows, None)
            # Another row with this seq follows: a fork, whichever of them comes first.
            twin = ahead is not None and ahead[1] == seq and ahead[0] == chain_id
            self.rows += 1
            unreported += 1
            if unreported >= 5000:
                _report_progress(unreported)
                unreported = 0
            st = self.state.get(chain_id)
            if st is None:
                if last is not None:
                    last.signed = None  # rows come chain by chain: the previous chain is done
                st = self.state[chain_id] = self._first_row_of(chain_id, seq)
                last = st
            if not st.broken:
                self.row(st, chain_id, seq, self.specs[ti], r, twin)
        _report_progress(unreported)

    def _first_row_of(self, chain_id: int, seq: int) -> _Chain:
        if chain_id in self.chains:
            return self.open_chain(chain_id)
        st = _Chain()
        self.fail(st, chain_id, seq, "chain-unknown", "rows name a chain with no head row")
        return st

    def row(self, st: _Chain, chain_id: int, seq: int, spec: _TableSpec, r: _Row, twin: bool = False) -> None:
        """One row, check by check; twin: another row of the chain with this seq follows."""
        at_start = self.place(st, chain_id, seq, spec.table, r, twin)
        if at_start is None:
            return
        if not at_start and st.prev is not None and not _compare(r.prev_hash, st.prev):
            self.fail(st, chain_id, seq, "prev-mismatch", "prev_hash is not the previous row's row_hash", spec.table)
            return
        if not self.content(st, chain_id, seq, spec, r):
            return
        if at_start:
            st.start_pending = False
            return
        if st.exp is not None and not self.as_checkpointed(st, chain_id, seq, spec.table, r.row_hash):
            return
        st.next, st.prev = seq + 1, r.row_hash
        if seq > st.covered >= 0:
            self.extend_segment(st, seq, r.row_hash, self.parts.get(r.partition, ""))

    def place(self, st: _Chain, chain_id: int, seq: int, table: str, r: _Row, twin: bool = False) -> bool | None:
        """Where the row stands in its chain: None when it is skipped or broke the
        chain, True when it is the row the starting checkpoint names, else False."""
        gaps = st.gaps
        if gaps.gone_firsts and seq >= st.start and gaps.retired(seq):
            # Retention dropped this row's partition, a checkpoint says: a row here was put back or moved.
            return self.fail(st, chain_id, seq, "retired-row-present",
                             "a checkpoint segment places this row in a partition that no longer exists", table) or None
        if twin and seq >= st.start:
            return self.fail(st, chain_id, seq, "fork", f"two rows have seq {seq}", table) or None
        if st.start_pending and seq > st.start:
            st.start_pending = False
            problem = self.start_missing(st, seq, "seq-gap")
            if problem is not None:
                return self.fail(st, chain_id, *problem, table) or None
        if seq == st.next:
            return False
        if seq < st.next:
            if seq < st.start:
                return None  # before the starting checkpoint
            if not (seq == st.start and st.start_pending):
                return self.fail(st, chain_id, seq, "fork", f"two rows have seq {seq}", table) or None
            # The row the start point names: it must be that row, unaltered.
            if not hmac.compare_digest(r.row_hash, st.start_hash):
                return self.fail(st, chain_id, seq, "checkpoint-mismatch",
                                 "the row differs from the one the starting checkpoint signed", table) or None
            return True
        problem, prev, legacy_used = gaps.gap(st.next, seq - 1)
        if problem is not None:
            if problem[0] == "partition-dropped":
                return self.fail(st, chain_id, problem[2], problem[0], problem[1]) or None
            return self.fail(st, chain_id, seq, problem[0],
                             f"expected seq {st.next}, found {seq}: rows are missing ({problem[1]})", table) or None
        st.prev = prev  # None: the horizon of earlier versions left nothing to link to
        if legacy_used:
            st.legacy_gap_end = seq - 1
        return False

    @staticmethod
    def start_missing(st: _Chain, seq: int, kind: str) -> tuple[int, str, str] | None:
        """The row the starting checkpoint names is missing: None when retention
        took it, else the break (seq, kind, detail) to report at SEQ."""
        detail = st.gaps.dropped_detail(st.start)
        if detail is not None:
            return st.start, "partition-dropped", detail
        if st.gaps.retired(st.start) or st.start <= st.legacy:
            return None
        return seq, kind, f"seq {st.start}, the row the starting checkpoint names, is missing"

    def content(self, st: _Chain, chain_id: int, seq: int, spec: _TableSpec, r: _Row) -> bool:
        """The row's hash, author, project, key, signature, and that it is no replay."""
        at, key_id, author_id, prev_hash, row_hash, signature = r.at, r.key_id, r.author_id, r.prev_hash, r.row_hash, r.signature
        # Author and project first, as scsql.verify_chain: a row given another author is a wrong-author
        # there (it hashes the chain's agent's name), not a hash-mismatch.
        if author_id != st.agent:
            return self.fail(st, chain_id, seq, "wrong-author", f"row names author {self.name(author_id)} in the "
                             f"chain of {self.name(st.agent)}", spec.table)
        if r.project_id != st.project:
            return self.fail(st, chain_id, seq, "wrong-project",
                             f"the row is in project {r.project_id}, its chain in project {st.project}", spec.table)
        n, null = spec.n_stamped, _NULL
        values = r.fields if not spec.digests else _digested_values(spec, r.fields)
        signed_payload = self.payload(spec, r, values)
        stamped = _join([null if v is None else f(v) for f, v in zip(spec.stamped, values[:n])])
        digest = _row_hash(prev_hash, _row_bytes(chain_id, seq, stamped, signed_payload), signature)
        if not _compare(digest, row_hash):
            return self.fail(st, chain_id, seq, "hash-mismatch", "row_hash does not match the row's content",
                             spec.table)
        if spec.digests:
            problem = self.digest_problem(spec, r.fields)
            if problem is not None:
                return self.fail(st, chain_id, seq, *problem, spec.table)
        k = self.keys.get((author_id, key_id))
        if k is None or at < k[1] or (k[2] is not None and at >= k[2]):
            if not self.excuse(st, chain_id, seq, "wrong-key",
                               f"key {key_id} of {self.name(author_id)} was not valid at {at.isoformat()}", spec.table):
                return False
        elif spec.table in UNSIGNED_TABLES:
            if len(signature) != 64 or signature[:32] != _UNSIGNED_MARK:
                return self.fail(st, chain_id, seq, "signature", "the row of a table written unsigned does not carry "
                                 "the unsigned marker", spec.table)
        elif seq > st.sig_to or seq <= st.legacy:
            self.signatures += 1
            try:
                _sign_open(signature + signed_payload, k[0])
            except (nacl.exceptions.BadSignatureError, ValueError):
                if not self.signed_over_text(spec, r, k[0]) and not self.excuse(st, chain_id, seq, "signature",
                                   f"signature does not verify with key {key_id} of {self.name(author_id)}", spec.table):
                    return False
        # A signature seen before in this chain is the same signed write stored twice.
        sig_hash = hash(signature)
        if sig_hash in st.signed:
            orig = _replayed(self.conn, spec.table, chain_id, seq, signature)
            if orig is not None and not self.excuse(st, chain_id, seq, "replay", f"the row repeats seq {orig}: "
                                                    "the same signed write, stored twice", spec.table):
                return False
        st.signed.add(sig_hash)
        return True

    def payload(self, spec: _TableSpec, r: _Row, values: Sequence[Any]) -> bytes:
        """The signed payload of row R of SPEC's table, from VALUES (its fields, digested or not)."""
        null = _NULL
        signed_payload = self._prefix(spec.ti, spec.table, r.author_id, r.key_id) + _enc_ts(r.at) + _join(
            [null if v is None else f(v) for f, v in zip(spec.signed, values[spec.n_stamped:spec.n_plain])])
        if spec.appended:  # each only when not NULL (see encoding.encode_appended)
            signed_payload += _join([b"" if v is None else p + f(v)
                                     for (p, f), v in zip(spec.appended, values[spec.n_plain:], strict=True)])
        return signed_payload

    def signed_over_text(self, spec: _TableSpec, r: _Row, public_key: bytes) -> bool:
        """Whether the author of a row with digests signed its texts themselves,
        as a process started before the digests existed does when it writes
        after the upgrade (the row's hash covers the digests, which match the
        texts: digest_problem). A purged row has no text left to check it over."""
        if not spec.digests or any(r.fields[ti] is None and r.fields[di] is not None for _n, ti, di in spec.digests):
            return False
        try:
            _sign_open(r.signature + self.payload(spec, r, r.fields[:len(r.fields) - len(spec.digests) - 1]), public_key)
        except (nacl.exceptions.BadSignatureError, ValueError):
            return False
        return True

    def digest_problem(self, spec: _TableSpec, fields: tuple) -> tuple[str, str] | None:
        """(kind, detail) when a digested text present is not the one its digest
        was made of, or one gone was removed by no recorded purge; else None."""
        row_id = fields[-1]
        for name, ti, di in spec.digests:
            digest, text = fields[di], fields[ti]
            if digest is None:
                continue
            digest = bytes(digest)
            if text is not None and not _compare(enc.text_digest(text), digest):
                return "content-mismatch", f"{name} is not the text its digest was made of"
            if text is None and (spec.purge_kind, row_id, name, digest.hex()) not in self.purged:
                return "purge-unrecorded", f"{name} is gone, and no purge recorded in scsql.purges removed it"
        return None

    def name(self, agent_id: int) -> Any:
        return self.names.get(agent_id, agent_id)

    def _prefix(self, ti: int, table: str, author_id: int, key_id: int) -> bytes:
        key = (ti, author_id, key_id)
        prefix = self.prefix_cache.get(key)
        if prefix is None:
            prefix = self.prefix_cache[key] = (enc.payload_head(table)
                                               + enc.payload_author(self.names.get(author_id, ""), key_id))
        return prefix

    def as_checkpointed(self, st: _Chain, chain_id: int, seq: int, table: str, row_hash: bytes) -> bool:
        exp = st.exp.get(seq)
        bad = next((source for h, source in exp if not hmac.compare_digest(row_hash, h)), None) if exp else None
        if bad is not None:
            return self.fail(st, chain_id, seq, "checkpoint-mismatch",
                             f"row_hash differs from the one signed in {bad}", table)
        return True

    @staticmethod
    def extend_segment(st: _Chain, seq: int, row_hash: bytes, part: str) -> None:
        sg = st.seg
        if sg is not None and sg[3] == part and sg[1] == seq - 1:
            sg[1], sg[2] = seq, row_hash
            return
        if sg is not None:
            st.segs.append(tuple(sg))
        st.seg = [seq, seq, row_hash, part]

    # -- the ends ----------------------------------------------------------------

    def finish(self) -> None:
        """Chain ends: the recorded head (possibly among retired rows), and every checkpointed head."""
        for chain_id, c in self.chains.items():
            st = self.state.get(chain_id)
            if st is None:
                st = self.state[chain_id] = self.open_chain(chain_id)
            if not st.broken:
                self.end(st, chain_id, c)

    def end(self, st: _Chain, chain_id: int, c: _ChainRow) -> None:
        head_seq, head_hash = c.head_seq, bytes(c.head_hash)
        if st.start_pending:  # no row from the starting checkpoint's on
            problem = self.start_missing(st, st.start, "checkpoint-mismatch")
            if problem is not None:
                self.fail(st, chain_id, *problem)
                return
        end, end_hash = st.next - 1, st.prev
        if end < head_seq:
            problem, h, legacy_used = st.gaps.gap(end + 1, head_seq)
            if problem is None:
                end, end_hash = head_seq, h
                if legacy_used:
                    # Retention of earlier versions retired the newest rows: nothing is
                    # left to describe up to the head, the next segments start after it.
                    st.legacy_gap_end = head_seq
            elif problem[0] == "checkpoint-mismatch":
                self.fail(st, chain_id, end + 1, *problem)
                return
            elif problem[0] == "partition-dropped":
                self.fail(st, chain_id, problem[2], problem[0], problem[1])
                return
        newest = self.facts.get(chain_id, _NO_FACTS).newest
        if newest is not None and newest[0] > end and newest[0] > st.start:
            self.fail(st, chain_id, end + 1, "checkpoint-mismatch",
                      f"{newest[1]} covers seq {newest[0]} but the chain ends at seq {end}")
            return
        if end != head_seq or end_hash is None or not hmac.compare_digest(end_hash, head_hash):
            self.fail(st, chain_id, end + 1, "head-mismatch",
                      f"the chain's head is seq {head_seq} but its rows end at seq {end}")
            return
        if self.collect and head_seq > 0:
            if st.seg is not None:
                st.segs.append(tuple(st.seg))
            from_seq = max(st.covered, st.legacy_gap_end)
            segments = tuple((last, h, part) for first, last, h, part in st.segs if first > from_seq)
            self.heads[chain_id] = CheckpointHead(chain_id, head_seq, head_hash, c.agent_id, from_seq, segments,
                                                  c.project_id)

    def result(self) -> _PartResult:
        prefixes: dict[int, CheckpointHead] = {}
        if self.collect:
            for chain_id, st in self.state.items():
                if st.broken and chain_id in self.chains:
                    prefix = _verified_prefix(st, chain_id, self.chains[chain_id])
                    if prefix is not None:
                        prefixes[chain_id] = prefix
        return _PartResult(self.rows, len(self.state), self.breaks, self.signatures, self.heads, prefixes,
                           self.excused)


def verify_part(conninfo: str, role: str | None, lo: int = MIN_ID, hi: int = MAX_ID,
                facts: dict[int, ChainFacts] | None = None,
                key_override: dict[str, bytes] | None = None,
                starts: dict[int, tuple[int, bytes]] | None = None,
                full: bool = False, collect: bool = False) -> _PartResult:
    """Verify the chains with lo <= chain_id <= hi.

    ``facts``: what valid checkpoints say about each chain. ``starts`` maps
    chain_id to the (seq, row_hash) of a checkpoint to start from (rows before
    it are not checked). ``full``: check every signature. ``collect``: also
    return, per chain, the head and the segments after its newest format-3
    checkpoint (what the next checkpoint signs)."""
    with _connect(conninfo, role) as conn:
        v = _PartVerifier(conn, lo, hi, facts or {}, key_override, starts or {}, full, collect)
        v.scan()
        v.finish()
        conn.rollback()
    return v.result()


def _verified_prefix(st: _Chain, chain_id: int, c: _ChainRow) -> CheckpointHead | None:
    """What a checkpoint of a broken chain signs: its rows up to the last one
    that verified (every check passed for it and every row before it), with
    their segments; None when no row after the chain's newest format-3
    checkpoint verified."""
    last, row_hash = st.next - 1, st.prev
    from_seq = max(st.covered, st.legacy_gap_end)
    if st.covered < 0 or st.start or row_hash is None or last <= from_seq:
        return None
    segs = [*st.segs, *([tuple(st.seg)] if st.seg is not None else [])]
    segments = tuple((end, h, part) for first, end, h, part in segs if first > from_seq)
    if not segments or segments[-1][0] != last:
        return None
    return CheckpointHead(chain_id, last, row_hash, c.agent_id, from_seq, segments, c.project_id)


def _replayed(conn: psycopg.Connection, table: str, chain_id: int, seq: int, signature: bytes) -> int | None:
    """The earlier seq of chain_id in table whose row has this signature (the
    in-memory check keeps 64-bit hashes of signatures; this confirms a match)."""
    row = conn.execute(sql.SQL("select min(seq) from {} where chain_id = %s and seq < %s and signature = %s")
                       .format(sql.Identifier(*table.split("."))), (chain_id, seq, signature)).fetchone()
    return row[0] if row else None


def _fail(breaks: list[Break], st: _Chain, chain_id: int, seq: int, kind: str, detail: str,
          table: str | None = None) -> None:
    breaks.append(Break(chain_id, seq, kind, detail, table))
    st.broken = True


# -- checkpoints ----------------------------------------------------------------


def _heads_of(cp: dict[str, Any]) -> list[CheckpointHead]:
    """The heads of a checkpoint as read from the database or an exported line."""
    out = []
    for h in cp.get("heads") or []:
        segments = tuple((g["last_seq"], bytes.fromhex(g["row_hash"]), g["part"]) for g in h.get("segments") or ())
        out.append(CheckpointHead(h["chain_id"], h["seq"], bytes.fromhex(h["row_hash"]), h.get("agent_id"),
                                  h.get("from_seq"), segments, cp["project_id"]))
    return out


def _at(cp: dict[str, Any]) -> dt.datetime:
    return cp["at"] if isinstance(cp["at"], dt.datetime) else dt.datetime.fromisoformat(cp["at"])


def _checkpoint_version(cp: dict[str, Any]) -> int | None:
    """The format whose payload the checkpoint's signature verifies, or None."""
    try:
        heads = _heads_of(cp)
        signature, public_key = bytes.fromhex(cp["signature"]), bytes.fromhex(cp["public_key"])
        at = _at(cp)
    except (KeyError, TypeError, ValueError):
        return None
    for version in CHECKPOINT_FORMATS:
        if version == 3 and any(h.agent_id is None or h.from_seq is None for h in heads):
            continue
        data = checkpoint_payload(cp["project_id"], at, cp["key_id"], heads, version)
        try:
            nacl.bindings.crypto_sign_open(signature + data, public_key)
        except (nacl.exceptions.BadSignatureError, ValueError):
            continue
        return version
    return None


def read_checkpoint_file(path: Path) -> list[dict[str, Any]]:
    out = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ScsqlError(errors.INVALID_ARGUMENT, f"{path}:{n} is not a JSON line: {exc}") from None
    return out


def _content(cp: dict[str, Any]) -> tuple:
    """What a checkpoint says, comparable between its database row and its exported line."""
    return (cp.get("project_id"), _at(cp), cp.get("key_id"), cp.get("signature"),
            tuple(sorted(_heads_of(cp), key=itemgetter(0))))


def _differing_chains(mine: dict[str, Any], theirs: dict[str, Any]) -> list[tuple[int, int]]:
    """(chain_id, seq) of the chains whose heads differ between two copies of a checkpoint."""
    a = {h.chain_id: h for h in _heads_of(mine)}
    b = {h.chain_id: h for h in _heads_of(theirs)}
    return sorted((c, (b.get(c) or a[c]).seq) for c in set(a) | set(b) if a.get(c) != b.get(c))


@dataclass
class _Book:
    facts: dict[int, ChainFacts]
    count: int
    valid_db: dict[int, dict[str, Any]]


def _load_checkpoints(conn: psycopg.Connection, files: list[Path], chain_rows: list[tuple],
                      breaks: list[Break]) -> _Book:
    """Read the checkpoints of the database and of exported files, keep those
    whose auditor signatures verify (a database checkpoint also only when it
    agrees with its exported copy), report the others under the chains they
    concern, and gather what the valid ones say about each chain."""
    registered = {bytes(k).hex() for (k,) in conn.execute("select public_key from scsql.auditor_keys").fetchall()}
    cols = ["checkpoint_id", "project_id", "project", "at", "key_id", "public_key", "signature", "heads"]
    db_cps = []
    for row in conn.execute("select * from scsql.checkpoints()").fetchall():
        cp = dict(zip(cols, row, strict=True))
        cp["heads"] = cp["heads"].value if isinstance(cp["heads"], enc.JsonValue) else cp["heads"]
        db_cps.append(cp)
    file_cps = [(cp, f"exported checkpoint {cp.get('checkpoint_id')} ({path.name})")
                for path in files for cp in read_checkpoint_file(path)]

    def version_of(cp: dict[str, Any]) -> int | None:
        return _checkpoint_version(cp) if cp.get("public_key") in registered else None

    valid: list[tuple[dict[str, Any], int, str]] = []
    exported: dict[tuple[Any, Any], tuple[dict[str, Any], str]] = {}
    for cp, source in file_cps:
        version = version_of(cp)
        if version is None:
            try:
                heads = _heads_of(cp)
            except (KeyError, TypeError, ValueError, AttributeError):
                heads = []
            for h in heads or [CheckpointHead(0, 0, b"")]:
                breaks.append(Break(h.chain_id, h.seq, "checkpoint-signature",
                                    f"{source} is not signed by a registered auditor key"))
            continue
        valid.append((cp, version, source))
        exported[(cp.get("checkpoint_id"), cp.get("project_id"))] = (cp, source)
    valid_db: dict[int, dict[str, Any]] = {}
    for cp in db_cps:
        source = f"database checkpoint {cp['checkpoint_id']}"
        copy = exported.get((cp["checkpoint_id"], cp["project_id"]))
        version = version_of(cp)
        if version is None:
            breaks += _blame(cp, copy, chain_rows, source)
            continue
        if copy is not None and _content(copy[0]) != _content(cp):
            for chain_id, seq in _differing_chains(cp, copy[0]) or [(h.chain_id, h.seq) for h in _heads_of(cp)]:
                breaks.append(Break(chain_id, seq, "checkpoint-mismatch", f"{source} differs from {copy[1]}"))
            continue
        valid.append((cp, version, source))
        valid_db[cp["checkpoint_id"]] = cp

    facts: dict[int, ChainFacts] = {}
    seen = set()
    for cp, version, source in valid:
        ident = (cp.get("checkpoint_id"), cp["project_id"], cp["signature"])
        if ident in seen:
            continue  # the same checkpoint from the database and a file
        seen.add(ident)
        for h in _heads_of(cp):
            f = facts.setdefault(h.chain_id, ChainFacts())
            f.expect(h.seq, h.row_hash, source)
            f.anchors.add((h.seq, h.row_hash))
            f.identity.append((cp["project_id"], h.agent_id if version == 3 else None, source))
            if f.newest is None or h.seq > f.newest[0]:
                f.newest = (h.seq, source)
            if version >= 2:
                f.verified = max(f.verified, h.seq)
            if version == 3:
                f.covered = max(f.covered, h.seq)
                first = h.from_seq + 1
                for last_seq, row_hash, part in h.segments:
                    f.segments.append((first, last_seq, part, row_hash))
                    f.expect(last_seq, row_hash, source)
                    first = last_seq + 1
    return _Book(facts, len(db_cps) + len(file_cps), valid_db)


def _blame(cp: dict[str, Any], copy: tuple[dict[str, Any], str] | None, chain_rows: list[tuple],
           source: str) -> list[Break]:
    """Breaks naming the chains a database checkpoint whose signature fails is about."""
    detail = f"{source} is not signed by a registered auditor key"
    if copy is not None:
        differing = _differing_chains(cp, copy[0])
        if differing:
            return [Break(c, seq, "checkpoint-signature", f"{detail}; it differs from {copy[1]} for this chain")
                    for c, seq in differing]
    heads = {h.chain_id: h for h in _heads_of(cp)}
    at = _at(cp)
    # Chains of the project that existed when it was signed, but that it no longer names.
    missing = [c for c, _head, project, created in chain_rows
               if project == cp["project_id"] and c not in heads and created <= at]
    if missing:
        return [Break(c, 0, "checkpoint-signature", f"{detail}; it no longer names this chain, which existed then")
                for c in missing]
    return [Break(h.chain_id, h.seq, "checkpoint-signature", detail) for h in heads.values()] or \
        [Break(0, 0, "checkpoint-signature", f"{detail} (project {cp['project_id']})")]


# -- the whole database ---------------------------------------------------------


def _ranges(sizes: list[tuple[int, int]], parts: int) -> list[tuple[int, int]]:
    """Split the bigint line into at most ``parts`` ranges of chain_id, each
    holding about the same number of rows (sizes: (chain_id, rows) by chain_id).
    The ranges cover every chain_id, so rows of unknown chains are read too."""
    total = sum(n for _, n in sizes)
    bounds: list[int] = []
    acc = 0
    for i, (_chain, n) in enumerate(sizes[:-1]):
        acc += n
        if acc >= total * (len(bounds) + 1) / parts and len(bounds) < parts - 1:
            bounds.append(sizes[i + 1][0])
    edges = [MIN_ID, *bounds, MAX_ID + 1]
    return [(edges[i], edges[i + 1] - 1) for i in range(len(edges) - 1)]


def _missing_chains(book: Any, known: set[int]) -> list[Break]:
    """Chains a valid checkpoint covers that no longer exist."""
    return [Break(chain_id, f.newest[0], "chain-missing",
                  f"{f.newest[1]} covers the chain up to seq {f.newest[0]}, but the chain no longer exists")
            for chain_id, f in sorted(book.facts.items()) if chain_id not in known and f.newest is not None]


def _start_points(conn: psycopg.Connection, book: Any, from_checkpoint: int | None) -> dict[int, tuple[int, bytes]]:
    """chain_id -> (seq, row_hash) of the checkpoint verification starts from (none: from the first row)."""
    if from_checkpoint is None:
        return {}
    cp = book.valid_db.get(from_checkpoint)
    if cp is None:
        exists = conn.execute("select count(*) from scsql.checkpoints where checkpoint_id = %s",
                              (from_checkpoint,)).fetchone()[0]
        raise ScsqlError(errors.INVALID_ARGUMENT, f"checkpoint {from_checkpoint} does not exist" if not exists else
                         f"checkpoint {from_checkpoint} is not signed by a registered auditor key "
                         "(or differs from its export): verification cannot start from it")
    return {h.chain_id: (h.seq, h.row_hash) for h in _heads_of(cp)}


def _run_parts(conninfo: str, role: str | None, ranges: list[tuple[int, int]], bar: Any,
               facts: dict[int, ChainFacts], key_override: dict[str, bytes] | None,
               starts: dict[int, tuple[int, bytes]], full: bool, collect: bool) -> list[_PartResult]:
    """verify_part over each range of chain ids: in this process for one range, else one process a range."""
    if len(ranges) == 1:
        _init_worker(_BarQueue(bar))
        try:
            return [verify_part(conninfo, role, MIN_ID, MAX_ID, facts, key_override, starts, full, collect)]
        finally:
            _init_worker(None)

    def share(d: dict, lo: int, hi: int) -> dict:
        return {c: v for c, v in d.items() if lo <= c <= hi}

    # fork starts workers in milliseconds; nothing (no connection, no
    # thread) is open in this process at that point.
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    queue = ctx.Queue()
    with ProcessPoolExecutor(len(ranges), mp_context=ctx, initializer=_init_worker, initargs=(queue,)) as pool:
        futures = [pool.submit(verify_part, conninfo, role, lo, hi, share(facts, lo, hi), key_override,
                               share(starts, lo, hi), full, collect)
                   for lo, hi in ranges]
        while not all(f.done() for f in futures):
            _drain(queue, bar, 0.1)
        _drain(queue, bar, 0)
        return [f.result() for f in futures]


def verify(conninfo: str, *, role: str | None = AUDITOR_ROLE, workers: int | None = None,
           checkpoint_files: Iterable[Path] = (), progress: bool | None = None,
           key_override: dict[str, bytes] | None = None, from_checkpoint: int | None = None,
           full: bool = False, collect: bool = False, memory: bool | None = None,
           excuse_open: bool = False) -> Report:
    """Verify every chain: every row still present (or those after
    ``from_checkpoint``), and the signatures of rows after each chain's newest
    verified checkpoint, or of every row with ``full`` (or ``key_override``).
    ``workers``: processes (default: one per core when there is enough to
    do). ``progress``: a bar on stderr (None: only on a terminal).
    ``collect``: fill ``Report.heads`` with what a checkpoint of the verified
    chains signs (their heads and new segments). ``memory`` (default: as
    ``full``): compare every memory table with its chained history.
    ``excuse_open``: excuse the rows of open quarantines too, not only of
    acknowledged ones."""
    from tqdm import tqdm

    started = time.perf_counter()
    report = Report(full=full or bool(key_override))
    with _connect(conninfo, role) as conn:
        chain_rows = conn.execute(
            "select chain_id, head_seq, project_id, created_at from scsql.chains order by chain_id").fetchall()
        sizes = [(c, n) for c, n, _p, _t in chain_rows]
        total = sum(n for _, n in sizes)
        book = _load_checkpoints(conn, [Path(p) for p in checkpoint_files], chain_rows, report.breaks)
        report.checkpoints = book.count
        cols = ["quarantine_id", "project", "chain_id", "agent", "from_seq", "anchored_seq", "checkpoint_id", "kind",
                "detail", "found_at", "found_by", "acknowledged_at", "acknowledged_by", "note"]
        report.quarantines = [dict(zip(cols, r, strict=True))
                              for r in conn.execute("select * from scsql.chain_quarantines()").fetchall()]
        report.breaks += _missing_chains(book, {c for c, _ in sizes})
        _excuse(book.facts, report.quarantines, excuse_open)
        starts = _start_points(conn, book, from_checkpoint)
        conn.rollback()
    if workers is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        workers = max(1, min(cores, total // 20000 + 1))
    ranges = _ranges(sizes, workers) if sizes else [(MIN_ID, MAX_ID)]
    bar = tqdm(total=total, unit="row", desc="verify", disable=(None if progress is None else not progress),
               dynamic_ncols=True, leave=False)
    try:
        results = _run_parts(conninfo, role, ranges, bar, book.facts, key_override, starts, report.full, collect)
        for part in results:
            report.rows += part.rows
            report.chains += part.chains
            report.breaks += part.breaks
            report.excused += part.excused
            report.signatures += part.signatures
            report.heads.update(part.heads)
            report.prefixes.update(part.prefixes)
    finally:
        bar.close()
    report.breaks.sort(key=lambda b: (b.chain_id, b.seq))
    report.excused.sort(key=lambda b: (b.chain_id, b.seq))
    if (full if memory is None else memory):
        _compare_memory(conninfo, role, report)
    report.seconds = time.perf_counter() - started
    return report


def _excuse(facts: dict[int, ChainFacts], quarantines: list[dict[str, Any]], open_too: bool) -> None:
    """Mark, in each chain's facts, the row each acknowledged quarantine (or, with
    OPEN_TOO, each quarantine) names: its break, if an agent's kind, is excused."""
    for q in quarantines:
        if q["from_seq"] > 0 and (open_too or q["acknowledged_at"] is not None):
            state = (f"acknowledged {q['acknowledged_at']:%Y-%m-%d %H:%M} by {q['acknowledged_by']}: {q['note']}"
                     if q["acknowledged_at"] is not None else "open")
            facts.setdefault(q["chain_id"], ChainFacts()).excused.setdefault(
                q["from_seq"], f"quarantine {q['quarantine_id']}, {state}")


def _compare_memory(conninfo: str, role: str | None, report: Report) -> None:
    """Every memory row that is not what its chained history last recorded (scsql.verify_memory())."""
    with _connect(conninfo, role) as conn:
        rows = conn.execute("select * from scsql.verify_memory()").fetchall()
        conn.rollback()
    found = [MemoryBreak(*r) for r in rows]
    report.memory = [m for m in found if not m.before_history]
    report.memory_unrecorded = [m for m in found if m.before_history]
    report.memory_checked = True


class _BarQueue:
    def __init__(self, bar: Any):
        self.bar = bar

    def put(self, n: int) -> None:
        self.bar.update(n)


def _drain(queue: Any, bar: Any, timeout: float) -> None:
    import queue as q

    try:
        n = queue.get(timeout=timeout) if timeout else queue.get_nowait()
        bar.update(n)
        while True:
            bar.update(queue.get_nowait())
    except q.Empty:
        pass
