"""Auditor checkpoints: the auditor's key, signing the verified heads of every
chain (``scsql checkpoint``), quarantining the chains that do not verify,
and the exported checkpoint file that ``scsql verify --checkpoints`` reads.
The payload the auditor signs is ``encoding.checkpoint_payload``; the
database side is sql/13_checkpoints.sql.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import keys
from ..core.errors import ScsqlError
from ..core.registry import to_json
from ..core.roles import admin_connection
from .encoding import checkpoint_payload
from .verify import read_checkpoint_file
from ..core import errors

AUDITOR_KEY = "auditor"  # the auditor's key in the keystore


def init_auditor_key(keystore: keys.Keystore, conninfo: str) -> int:
    """Create the auditor's key pair (keystore auditor.key, 0600) unless it exists, and register it."""
    if keystore.exists(AUDITOR_KEY):
        key = keystore.load(AUDITOR_KEY)
        staged = None
    else:
        key = keys.generate()
        staged = keystore.stage(AUDITOR_KEY, key)
    try:
        with admin_connection(conninfo) as conn:
            key_id = conn.execute("select scsql.register_auditor_key(%s::bytea) as k",
                                  (keys.public_bytes(key),)).fetchone()["k"]
    except BaseException:
        if staged is not None:
            staged.unlink(missing_ok=True)
        raise
    if staged is not None:
        keystore.commit(staged, AUDITOR_KEY)
    return key_id


@dataclass
class CheckpointRun:
    """What one scsql checkpoint did: the checkpoints it recorded (ids), the
    chains it quarantined (quarantine_id, the chain's first break, the seq
    up to which it signed the chain or None), and breaks no chain can carry
    (a checkpoint of no chain, rows of a chain with no head row)."""

    ids: list[int] = field(default_factory=list)
    quarantined: list[tuple[int, Any, int | None]] = field(default_factory=list)
    unattributed: list[Any] = field(default_factory=list)
    acknowledged: list[tuple[int, Any, int | None]] = field(default_factory=list)  # of quarantined: dealt with
    excused: list[Any] = field(default_factory=list)  # rows acknowledged quarantines excuse: verified past, signed

    @property
    def ok(self) -> bool:
        """No break but those of quarantines an administrator acknowledged."""
        return len(self.quarantined) == len(self.acknowledged) and not self.unattributed


def record_checkpoints(conninfo: str, key, *, workers: int | None = None, progress: bool | None = None) -> list[int]:
    """Verify, then sign and record one checkpoint per project with chains; returns their ids
    (see :func:`run_checkpoint`, which also says which chains it quarantined)."""
    return run_checkpoint(conninfo, key, workers=workers, progress=progress).ids


def run_checkpoint(conninfo: str, key, *, workers: int | None = None, progress: bool | None = None) -> CheckpointRun:
    """Verify, then sign and record one checkpoint per project with chains.

    Every row is verified first (links, hashes, and the signatures the
    previous verified checkpoints do not cover); the verification also reads
    each chain's head and the segments of its rows since its previous
    checkpoint (runs of rows in one partition), and only then does the
    auditor sign them, in checkpoint format 3 ("verified up to these heads",
    with each chain's agent and segments; see sql/13_checkpoints.sql).

    A chain that does not verify does not stop the others: the auditor signs
    its rows up to the last one that verifies (when there are new ones), and
    records the chain in scsql.chain_quarantines (scsql.record_quarantine),
    in the same transaction as the checkpoints; retention then keeps its
    rows after that prefix. Breaks that belong to no chain the database
    knows are returned as unattributed. The row an acknowledged quarantine
    names is excused when an agent could have caused its break (see
    verify.EXCUSABLE): the chain is verified past it and signed, and a later
    break of it is a quarantine of its own."""
    from psycopg.types.json import Jsonb

    from .verify import verify

    pub = keys.public_bytes(key).hex()
    run = CheckpointRun()
    with admin_connection(conninfo) as conn:
        conn.execute("set local role scsql_auditor")
        registered = conn.execute("select * from scsql.auditor_keys()").fetchall()
    if not registered or registered[-1]["public_key"] != pub:
        raise ScsqlError(errors.AUDITOR_KEY_MISSING, "the keystore's auditor.key is not the current registered auditor key",
                         "register it: scsql checkpoint --init")
    key_id = registered[-1]["key_id"]
    report = verify(conninfo, workers=workers, progress=progress, collect=True)
    run.excused = report.excused
    first_break: dict[int, Any] = {}
    for b in report.breaks:  # sorted by chain, then seq
        first_break.setdefault(b.chain_id, b)
    by_project: dict[int, list] = {}
    for chain_id, head in report.heads.items():
        if chain_id not in first_break:
            by_project.setdefault(head.project_id, []).append(head)
    for chain_id, head in report.prefixes.items():
        if chain_id in first_break:
            by_project.setdefault(head.project_id, []).append(head)
    with admin_connection(conninfo) as conn:
        conn.execute("set local role scsql_auditor")
        # Read before the checkpoints are recorded: on Citus, record_checkpoint
        # writes the shards as the owner, after which the auditor may not read
        # them in this transaction. A chain it records is in scsql.chains already.
        known = {r["chain_id"] for r in conn.execute(
            "select chain_id from scsql.chains union select chain_id from scsql.checkpoint_heads").fetchall()}
        for project_id, heads in sorted(by_project.items()):
            heads.sort(key=lambda h: h.chain_id)
            at = dt.datetime.now(dt.UTC)
            sig = key.sign(checkpoint_payload(project_id, at, key_id, heads, version=3))
            heads_json = [{"chain_id": h.chain_id, "seq": h.seq, "row_hash": bytes(h.row_hash).hex(),
                           "agent_id": h.agent_id, "from_seq": h.from_seq,
                           "segments": [{"last_seq": last, "row_hash": bytes(row_hash).hex(), "part": part}
                                        for last, row_hash, part in h.segments]} for h in heads]
            run.ids.append(conn.execute(
                "select scsql.record_checkpoint(p_project_id => %s::bigint, p_at => %s::timestamptz, "
                "p_key_id => %s::integer, p_signature => %s::bytea, p_heads => %s::jsonb) as id",
                (project_id, at, key_id, sig, Jsonb(heads_json))).fetchone()["id"])
        for chain_id, b in sorted(first_break.items()):
            if chain_id not in known:
                run.unattributed.append(b)
                continue
            qid = conn.execute("select scsql.record_quarantine(%s::bigint, %s::bigint, %s::text, %s::text) as q",
                               (chain_id, max(b.seq, 0), b.kind, str(b)[:2000])).fetchone()["q"]
            prefix = report.prefixes.get(chain_id)
            run.quarantined.append((qid, b, prefix.seq if prefix is not None else None))
        acknowledged = {r["quarantine_id"] for r in conn.execute(
            "select quarantine_id from scsql.chain_quarantines() where acknowledged_at is not null").fetchall()}
        run.acknowledged = [q for q in run.quarantined if q[0] in acknowledged]
    return run


def export_checkpoints(conninfo: str, path: Path) -> int:
    """Append to the JSONL file the checkpoints it does not hold yet; returns how many."""
    path = Path(path)
    last = last_exported(path)
    with admin_connection(conninfo) as conn:
        conn.execute("set local role scsql_auditor")
        rows = conn.execute("select * from scsql.checkpoints(%s::bigint)", (last,)).fetchall()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as fh:  # created even when there is nothing new, so verify --checkpoints can read it
            for r in rows:
                fh.write(json.dumps(to_json(r), sort_keys=True) + "\n")
    except OSError as exc:
        raise ScsqlError(errors.INVALID_ARGUMENT, f"--export {path}: cannot write: {exc.strerror}",
                         "name a file in a directory you may write to") from None
    return len(rows)


def last_exported(path: Path) -> int:
    """The highest checkpoint id in an export file (0 when it does not exist yet); SC010 when it is not one."""
    last = 0
    if path.exists():
        for n, cp in enumerate(checkpoint_file(path), 1):
            if not isinstance(cp, dict) or not isinstance(cp.get("checkpoint_id"), int):
                raise ScsqlError(errors.INVALID_ARGUMENT, f"{path}:{n} is not an exported checkpoint (it has no checkpoint_id)",
                                 "export to a new file, or to one an earlier scsql checkpoint --export wrote")
            last = max(last, cp["checkpoint_id"])
    return last


def checkpoint_file(path: Path) -> list[Any]:
    """The lines of an exported checkpoint file; SC010 when it is missing, unreadable or not JSON lines."""
    try:
        return read_checkpoint_file(path)
    except FileNotFoundError:
        raise ScsqlError(errors.INVALID_ARGUMENT, f"checkpoint file {path}: no such file",
                         "name a file scsql checkpoint --export FILE wrote") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScsqlError(errors.INVALID_ARGUMENT, f"checkpoint file {path}: cannot read it: {getattr(exc, 'strerror', None) or exc}",
                         "name a file scsql checkpoint --export FILE wrote") from None
