"""Independent verification of every chain: links, hashes and signatures.

The verifier reads rows, public keys and checkpoints, and recomputes
everything itself with the canonical encoding of :mod:`scsql.chain` (written
from the specification in ``COMMENT ON FUNCTION scsql._enc``, not by asking
the database to encode). It checks, per chain, from its horizon (where
retention left it) or from a checkpoint:

* seq runs on without gap or repeat (``seq-gap``, ``fork``);
* prev_hash is the previous row's row_hash (``prev-mismatch``);
* row_hash = sha256(prev_hash || canonical row bytes || signature)
  (``hash-mismatch``), compared in constant time;
* the row's author is the chain's agent and its signature verifies with the
  author's public key valid at the row's time (``signature``, ``wrong-key``);
* the chain ends at its recorded head (``head-mismatch``) and contains every
  checkpointed head, from the database and from exported checkpoint files
  (``checkpoint-mismatch``), whose auditor signatures must verify too.

Incremental by default: ``scsql checkpoint`` verifies every row before the
auditor signs the heads (checkpoint format ``scsql/checkpoint/2``: "verified
up to these heads"). Verification then recomputes every hash and link from
each chain's horizon, but checks signatures only of rows after the newest
verified checkpoint of their chain: the rows up to it are the very rows the
auditor verified, since their hashes lead to the head the auditor signed.
``full=True`` (``scsql verify --full``) checks every signature again, for
instance after public keys might have changed; checking against given keys
(``key_override``) is always full.

Speed: Ed25519 verification dominates. libsodium (PyNaCl) verifies about
twice as fast as OpenSSL through ``cryptography``, so PyNaCl is used; chains
are split between processes in ranges of chain_id balanced by row count (each
process reads its range in index order with server-side cursors in large
batches), so both cores work.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import heapq
import hmac
import json
import multiprocessing as mp
import os
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

import nacl.bindings
import nacl.exceptions
import psycopg
from psycopg import sql
from psycopg.types.json import set_json_loads

from . import chain as enc
from .errors import ScsqlError

BATCH = 20000
AUDITOR_ROLE = "scsql_auditor"


@dataclass(frozen=True)
class Break:
    chain_id: int
    seq: int
    kind: str
    detail: str
    table: str | None = None

    def __str__(self) -> str:
        where = f" ({self.table})" if self.table else ""
        return f"chain {self.chain_id} seq {self.seq}{where}: {self.kind}: {self.detail}"


@dataclass
class Report:
    rows: int = 0
    chains: int = 0
    breaks: list[Break] = field(default_factory=list)
    checkpoints: int = 0
    seconds: float = 0.0
    signatures: int = 0  # rows whose signature was checked (all of them when full)
    full: bool = False

    @property
    def ok(self) -> bool:
        return not self.breaks

    @property
    def rate(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0


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


def _scan(conn: psycopg.Connection, table: str, ti: int, lo: int, hi: int) -> Iterator[tuple]:
    query = conn.execute("select scsql._chain_scan_sql(%s)", (table,)).fetchone()[0]
    cur = conn.cursor(name=f"scan_{ti}", binary=True)
    cur.itersize = BATCH
    cur.execute(query, (lo, hi))
    while True:
        rows = cur.fetchmany(BATCH)
        if not rows:
            break
        for r in rows:
            yield (r[0], r[1], ti, r)
    cur.close()


# -- checking one part of the chains ------------------------------------------


_progress_queue: Any = None


def _init_worker(queue: Any) -> None:
    global _progress_queue
    _progress_queue = queue


def _report_progress(n: int) -> None:
    if _progress_queue is not None and n:
        _progress_queue.put(n)


def verify_part(conninfo: str, role: str | None, lo: int = MIN_ID, hi: int = MAX_ID,
                expected: dict[int, list[tuple[int, bytes, str]]] | None = None,
                key_override: dict[str, bytes] | None = None,
                starts: dict[int, tuple[int, bytes]] | None = None,
                signed_up_to: dict[int, int] | None = None) -> tuple[int, int, list[Break], int]:
    """Verify the chains with lo <= chain_id <= hi. Returns (rows, chains, breaks, signatures checked).

    ``expected`` maps chain_id to (seq, row_hash, source) pairs the chain must
    contain (checkpointed heads). ``starts`` maps chain_id to the (seq,
    row_hash) of a checkpoint to start from instead of the chain's horizon.
    ``signed_up_to`` maps chain_id to the head seq of its newest verified
    checkpoint: rows up to it get every check but the signature's."""
    expected = expected or {}
    starts = starts or {}
    signed_up_to = signed_up_to or {}

    def initial(c: tuple) -> list:
        # [next seq, prev hash, broken, last seq, floor: rows up to it are not checked,
        #  encoded chain_id, seq up to which signatures were verified by a checkpoint]
        floor, floor_hash = c[4], bytes(c[5])
        start = starts.get(c[0])
        if start is not None and start[0] > floor:
            floor, floor_hash = start
        return [floor + 1, floor_hash, False, floor, floor, enc._enc_int(c[0]), signed_up_to.get(c[0], 0)]

    breaks: list[Break] = []
    rows_done = signatures = 0
    with _connect(conninfo, role) as conn:
        names = dict(conn.execute("select agent_id, name from scsql.agents").fetchall())
        keys = _Keys.load(conn, key_override, names).keys
        chains = {
            r[0]: r for r in conn.execute(
                "select chain_id, agent_id, head_seq, head_hash, horizon_seq, horizon_hash from scsql.chains "
                "where chain_id between %s and %s", (lo, hi)).fetchall()
        }
        fields: dict[str, tuple[list[str], list[str]]] = {}
        for table, part_name, _ord, _col, kind in conn.execute("select * from scsql._chain_fields()").fetchall():
            stamped, signed = fields.setdefault(table, ([], []))
            (stamped if part_name == "stamped" else signed).append(kind)
        tables = sorted(fields)
        specs = []
        for t in tables:
            stamped, signed = fields[t]
            specs.append((t, [enc.ENCODERS[k] for k in stamped], [enc.ENCODERS[k] for k in signed], len(stamped)))

        prefix_cache: dict[tuple[int, int, int], bytes] = {}
        enc_ts, enc_int, join, NULL, compare = enc._enc_ts, enc._enc_int, b"".join, enc.NULL, hmac.compare_digest
        sha256, sign_open = hashlib.sha256, nacl.bindings.crypto_sign_open
        state: dict[int, list] = {}
        unreported = 0
        streams = [_scan(conn, t, ti, lo, hi) for ti, t in enumerate(tables)]
        for chain_id, seq, ti, r in heapq.merge(*streams, key=itemgetter(0, 1)):
            rows_done += 1
            unreported += 1
            if unreported >= 5000:
                _report_progress(unreported)
                unreported = 0
            st = state.get(chain_id)
            if st is None:
                c = chains.get(chain_id)
                if c is None:
                    breaks.append(Break(chain_id, seq, "chain-unknown", "rows name a chain with no head row"))
                    state[chain_id] = st = [0, b"", True, 0, 0, b"", 0]
                else:
                    state[chain_id] = st = initial(c)
            if st[2]:
                continue
            at_floor = False
            if seq < st[0]:
                if seq < st[4]:
                    continue  # below the horizon or the starting checkpoint
                if seq == st[4] and st[3] == st[4]:
                    # The row the start point names: it must be that row, unaltered.
                    if not compare(r[6], st[1]):
                        _fail(breaks, st, chain_id, seq, "checkpoint-mismatch",
                              "the row differs from the one the starting checkpoint signed", tables[ti])
                        continue
                    at_floor = True
                else:
                    _fail(breaks, st, chain_id, seq, "fork", f"two rows have seq {seq}", tables[ti])
                    continue
            table, stamped_enc, signed_enc, n_stamped = specs[ti]
            # r: chain_id, seq, at, key_id, author_id, prev_hash, row_hash, signature, stamped..., signed...
            at, key_id, author_id, prev_hash, row_hash, signature = r[2], r[3], r[4], r[5], r[6], r[7]
            if not at_floor:
                if seq != st[0]:
                    _fail(breaks, st, chain_id, seq, "seq-gap", f"expected seq {st[0]}, found {seq}: rows are missing", table)
                    continue
                if not compare(prev_hash, st[1]):
                    _fail(breaks, st, chain_id, seq, "prev-mismatch", "prev_hash is not the previous row's row_hash", table)
                    continue
            key = (ti, author_id, key_id)
            prefix = prefix_cache.get(key)
            if prefix is None:
                prefix = (enc._enc_text(enc.FORMAT) + enc._enc_text(table)
                          + enc._enc_text(names.get(author_id, "")) + enc._enc_int(key_id))
                prefix_cache[key] = prefix
            signed_payload = prefix + enc_ts(at) + join([NULL if v is None else f(v)
                                                        for f, v in zip(signed_enc, r[8 + n_stamped:])])
            stamped_bytes = join([NULL if v is None else f(v) for f, v in zip(stamped_enc, r[8:8 + n_stamped])])
            digest = sha256(prev_hash)
            digest.update(st[5])
            digest.update(enc_int(seq))
            digest.update(stamped_bytes)
            digest.update(signed_payload)
            digest.update(signature)
            if not compare(digest.digest(), row_hash):
                _fail(breaks, st, chain_id, seq, "hash-mismatch", "row_hash does not match the row's content", table)
                continue
            c = chains.get(chain_id)
            if c is not None and author_id != c[1]:
                _fail(breaks, st, chain_id, seq, "wrong-author",
                      f"row names author {names.get(author_id, author_id)} in the chain of {names.get(c[1], c[1])}", table)
                continue
            k = keys.get((author_id, key_id))
            if k is None or at < k[1] or (k[2] is not None and at >= k[2]):
                _fail(breaks, st, chain_id, seq, "wrong-key",
                      f"key {key_id} of {names.get(author_id, author_id)} was not valid at {at.isoformat()}", table)
                continue
            if seq > st[6]:
                signatures += 1
                try:
                    sign_open(signature + signed_payload, k[0])
                except (nacl.exceptions.BadSignatureError, ValueError):
                    _fail(breaks, st, chain_id, seq, "signature",
                          f"signature does not verify with key {key_id} of {names.get(author_id, author_id)}", table)
                    continue
            if at_floor:
                continue
            st[0] = seq + 1
            st[1] = row_hash
            st[3] = seq
            st[4] = -1
            exp = expected.get(chain_id)
            if exp is not None:
                for exp_seq, exp_hash, source in exp:
                    if exp_seq == seq and not hmac.compare_digest(row_hash, exp_hash):
                        _fail(breaks, st, chain_id, seq, "checkpoint-mismatch",
                              f"row_hash differs from the one signed in {source}", table)
                        break
        _report_progress(unreported)

        # Chain ends: the recorded head, and every checkpointed head.
        for chain_id, c in chains.items():
            st = state.get(chain_id)
            if st is None:
                st = state[chain_id] = initial(c)
            if st[2]:
                continue
            last = st[0] - 1
            for exp_seq, _h, source in expected.get(chain_id, ()):
                if exp_seq > last and exp_seq > st[4]:
                    _fail(breaks, st, chain_id, last + 1, "checkpoint-mismatch",
                          f"{source} covers seq {exp_seq} but the chain ends at seq {last}")
                    break
            if st[2]:
                continue
            if last != c[2] or not hmac.compare_digest(st[1], bytes(c[3])):
                _fail(breaks, st, chain_id, last + 1, "head-mismatch",
                      f"the chain's head is seq {c[2]} but its rows end at seq {last}")
        conn.rollback()
    return rows_done, len(state), breaks, signatures


def _fail(breaks: list[Break], st: list, chain_id: int, seq: int, kind: str, detail: str, table: str | None = None) -> None:
    breaks.append(Break(chain_id, seq, kind, detail, table))
    st[2] = True


# -- checkpoints ----------------------------------------------------------------


# The auditor signs "scsql/checkpoint/2" after verifying every row up to the
# heads; "scsql/checkpoint/1" (written by earlier versions) only vouches for
# the heads. See sql/13_checkpoints.sql.
CHECKPOINT_FORMATS = {2: "scsql/checkpoint/2", 1: "scsql/checkpoint/1"}


def checkpoint_payload(project_id: int, at: dt.datetime, key_id: int, heads: Iterable[tuple[int, int, bytes]],
                       version: int = 2) -> bytes:
    """What the auditor signs: see sql/13_checkpoints.sql."""
    heads = sorted(heads)
    parts = [enc._enc_text(CHECKPOINT_FORMATS[version]), enc._enc_int(project_id), enc._enc_ts(at),
             enc._enc_int(key_id), enc._enc_int(len(heads))]
    for chain_id, seq, row_hash in heads:
        parts += [enc._enc_int(chain_id), enc._enc_int(seq), enc._enc_bytea(row_hash)]
    return b"".join(parts)


def _checkpoint_version(cp: dict[str, Any]) -> int | None:
    """The format whose payload the checkpoint's signature verifies (2: verified rows), or None."""
    at = cp["at"] if isinstance(cp["at"], dt.datetime) else dt.datetime.fromisoformat(cp["at"])
    heads = [(h["chain_id"], h["seq"], bytes.fromhex(h["row_hash"])) for h in cp["heads"]]
    for version in CHECKPOINT_FORMATS:
        data = checkpoint_payload(cp["project_id"], at, cp["key_id"], heads, version)
        try:
            nacl.bindings.crypto_sign_open(bytes.fromhex(cp["signature"]) + data, bytes.fromhex(cp["public_key"]))
        except (nacl.exceptions.BadSignatureError, ValueError):
            continue
        return version
    return None


def _checkpoint_ok(cp: dict[str, Any]) -> bool:
    return _checkpoint_version(cp) is not None


def read_checkpoint_file(path: Path) -> list[dict[str, Any]]:
    out = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ScsqlError("SC010", f"{path}:{n} is not a JSON line: {exc}") from None
    return out


def _expected_heads(conn: psycopg.Connection, files: list[Path], breaks: list[Break]) -> tuple[dict, int, dict]:
    """Checkpointed heads every chain must still contain, after checking the
    auditor's signatures; and per chain the newest head of a verified
    (format 2) checkpoint."""
    registered = {r[0] for r in conn.execute("select public_key from scsql.auditor_keys").fetchall()}
    registered = {bytes(k).hex() for k in registered}
    cps: list[tuple[dict, str]] = []
    cols = ["checkpoint_id", "project_id", "project", "at", "key_id", "public_key", "signature", "heads"]
    for row in conn.execute("select * from scsql.checkpoints()").fetchall():
        cp = dict(zip(cols, row, strict=True))
        cp["heads"] = cp["heads"].value if isinstance(cp["heads"], enc.JsonValue) else cp["heads"]
        cps.append((cp, "database checkpoint"))
    for path in files:
        for cp in read_checkpoint_file(path):
            cps.append((cp, f"exported checkpoint {cp.get('checkpoint_id')} ({path.name})"))
    expected: dict[int, list[tuple[int, bytes, str]]] = {}
    verified: dict[int, int] = {}
    for cp, source in cps:
        version = _checkpoint_version(cp) if cp["public_key"] in registered else None
        if version is None:
            first = min(cp["heads"], key=lambda h: h["chain_id"]) if cp["heads"] else {"chain_id": 0, "seq": 0}
            breaks.append(Break(first["chain_id"], first["seq"], "checkpoint-signature",
                                f"{source} is not signed by a registered auditor key"))
            continue
        label = f"{source} {cp['checkpoint_id']}" if source == "database checkpoint" else source
        for h in cp["heads"]:
            expected.setdefault(h["chain_id"], []).append((h["seq"], bytes.fromhex(h["row_hash"]), label))
            if version == 2:
                verified[h["chain_id"]] = max(verified.get(h["chain_id"], 0), h["seq"])
    return expected, len(cps), verified


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


def verify(conninfo: str, *, role: str | None = AUDITOR_ROLE, workers: int | None = None,
           checkpoint_files: Iterable[Path] = (), progress: bool | None = None,
           key_override: dict[str, bytes] | None = None, from_checkpoint: int | None = None,
           full: bool = False) -> Report:
    """Verify every chain: every link and hash from the horizon (or
    ``from_checkpoint``), and the signatures of rows after each chain's newest
    verified checkpoint, or of every row with ``full`` (or ``key_override``).
    ``workers``: processes (default: one per core when there is enough to
    do). ``progress``: a bar on stderr (None: only on a terminal)."""
    from tqdm import tqdm

    started = time.perf_counter()
    report = Report(full=full or bool(key_override))
    with _connect(conninfo, role) as conn:
        sizes = [(c, n) for c, n in conn.execute(
            "select chain_id, head_seq - horizon_seq from scsql.chains order by chain_id").fetchall()]
        total = sum(n for _, n in sizes)
        expected, report.checkpoints, verified = _expected_heads(conn, [Path(p) for p in checkpoint_files],
                                                                 report.breaks)
        signed_up_to = {} if report.full else verified
        starts: dict[int, tuple[int, bytes]] = {}
        if from_checkpoint is not None:
            rows = conn.execute("select chain_id, seq, row_hash from scsql.checkpoint_heads where checkpoint_id = %s",
                                (from_checkpoint,)).fetchall()
            if not rows:
                raise ScsqlError("SC010", f"checkpoint {from_checkpoint} does not exist")
            starts = {c: (s_, bytes(h)) for c, s_, h in rows}
        conn.rollback()
    if workers is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        workers = max(1, min(cores, total // 20000 + 1))
    ranges = _ranges(sizes, workers) if sizes else [(MIN_ID, MAX_ID)]
    bar = tqdm(total=total, unit="row", desc="verify", disable=(None if progress is None else not progress),
               dynamic_ncols=True, leave=False)

    def share(d: dict, lo: int, hi: int) -> dict:
        return {c: v for c, v in d.items() if lo <= c <= hi}

    try:
        if len(ranges) == 1:
            _init_worker(_BarQueue(bar))
            try:
                results = [verify_part(conninfo, role, MIN_ID, MAX_ID, expected, key_override, starts, signed_up_to)]
            finally:
                _init_worker(None)
        else:
            # fork starts workers in milliseconds; nothing (no connection, no
            # thread) is open in this process at that point.
            ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
            queue = ctx.Queue()
            with ProcessPoolExecutor(len(ranges), mp_context=ctx, initializer=_init_worker, initargs=(queue,)) as pool:
                futures = [pool.submit(verify_part, conninfo, role, lo, hi, share(expected, lo, hi), key_override,
                                       share(starts, lo, hi), share(signed_up_to, lo, hi))
                           for lo, hi in ranges]
                while not all(f.done() for f in futures):
                    _drain(queue, bar, 0.1)
                _drain(queue, bar, 0)
                results = [f.result() for f in futures]
        for rows, chains, breaks, signatures in results:
            report.rows += rows
            report.chains += chains
            report.breaks += breaks
            report.signatures += signatures
    finally:
        bar.close()
    report.breaks.sort(key=lambda b: (b.chain_id, b.seq))
    report.seconds = time.perf_counter() - started
    return report


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
