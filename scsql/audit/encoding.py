"""The canonical encoding of chained rows.

The encoding is specified in the database, in ``COMMENT ON FUNCTION
scsql._enc`` (``\\df+ scsql._enc``). This module implements it again,
independently, from that text: the verifier must not trust the database to
say what a row's bytes are. A property test cross-checks both on generated
rows.

Standard library only (and ``core/jsonb.py``, jsonb's own text of a JSON
value, which is standard library only too): the signer
(:mod:`scsql.audit.signing`) and the verifier (:mod:`scsql.audit.verify`)
both build their bytes from the functions here, and nothing else, so they
cannot disagree with each other.

A row's bytes (``row_bytes``): chain id, seq, the stamped fields, then the
signed payload (``payload``: format, table, author, key id, time, the signed
fields, then the appended fields). Appended fields are signed columns a table
gained after it had rows: each adds ``enc_int(i)`` and its field (i = its
1-based position in the table's ``appended_fields``) only when it is not
NULL, and nothing when it is NULL (``encode_appended``), so rows written
before a column was appended keep their bytes, hashes and signatures.

Digested fields are signed text columns a row encodes by the sha256 of
their UTF-8 bytes (``enc_digest``, tag ``h``) instead of their text, when
the row carries that digest (every row written since the table's digested
fields were declared): the text may then be purged and the row still
encodes the same (see scsql._enc, DIGESTED FIELDS).

A row's hash (``row_hash``): sha256 of the previous row's hash, the row's
bytes and its signature. What the auditor signs of a checkpoint
(``checkpoint_payload``) is specified in sql/13_checkpoints.sql.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import struct
import uuid
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from operator import itemgetter
from typing import Any, NamedTuple

from ..core.jsonb import JsonValue, as_decimal, jsonb_text

FORMAT = "scsql/1"
GENESIS = bytes(32)
NULL = b"N\x00\x00\x00\x00"
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


# -- the canonical encoding ---------------------------------------------------


def field(tag: bytes, value: bytes | None) -> bytes:
    """One field: tag byte, 4-byte big-endian length, value bytes; NULL is ``N`` + length 0."""
    if value is None:
        return NULL
    return tag + len(value).to_bytes(4, "big") + value


def numeric_text(value: Decimal | int | float) -> str:
    """A numeric in canonical form: plain decimal, trailing fractional zeros removed."""
    d = as_decimal(value)
    if d.is_nan():
        return "NaN"
    if d.is_infinite():
        return "-Infinity" if d < 0 else "Infinity"
    text = format(d, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def micros(value: dt.datetime) -> int:
    """Microseconds since the Unix epoch (UTC) of an aware datetime."""
    if value.tzinfo is None:
        raise ValueError("timestamps of chained rows must carry a time zone")
    d = value - EPOCH
    return (d.days * 86400 + d.seconds) * 1000000 + d.microseconds


_LENGTH = struct.Struct(">I").pack  # the 4-byte big-endian length


def enc_text(v: str) -> bytes:
    b = v.encode("utf-8")
    return b"t" + _LENGTH(len(b)) + b


def enc_int(v: int) -> bytes:
    b = str(int(v)).encode("ascii")
    return b"i" + _LENGTH(len(b)) + b


def enc_numeric(v: Decimal | int | float) -> bytes:
    b = numeric_text(v).encode("ascii")
    return b"n" + _LENGTH(len(b)) + b


def enc_bool(v: bool) -> bytes:
    return b"b\x00\x00\x00\x01t" if v else b"b\x00\x00\x00\x01f"


def enc_ts(v: dt.datetime) -> bytes:
    b = str(micros(v)).encode("ascii")
    return b"T" + _LENGTH(len(b)) + b


def enc_bytea(v: bytes | memoryview) -> bytes:
    b = bytes(v)
    return b"x" + _LENGTH(len(b)) + b


def enc_uuid(v: uuid.UUID | str) -> bytes:
    return b"u\x00\x00\x00\x24" + str(uuid.UUID(str(v))).encode("ascii")


def enc_jsonb(v: Any) -> bytes:
    if isinstance(v, JsonValue):
        if v.text is not None:
            return field(b"j", v.text.encode("utf-8"))
        v = v.value
    return field(b"j", jsonb_text(v).encode("utf-8"))


def enc_digest(v: bytes | memoryview) -> bytes:
    """A digested field by its digest (the sha256 of the text): tag ``h``, length 32."""
    b = bytes(v)
    if len(b) != 32:
        raise ValueError("a digest is 32 bytes")
    return b"h\x00\x00\x00\x20" + b


def text_digest(v: str) -> bytes:
    """The digest of a digested text field: sha256 of its UTF-8 bytes."""
    return hashlib.sha256(v.encode("utf-8")).digest()


def enc_text_digest(v: str) -> bytes:
    """A digested text field of a row written with its digest: ``enc_digest(text_digest(v))``."""
    return enc_digest(text_digest(v))


ENCODERS: dict[str, Callable[[Any], bytes]] = {
    "text": enc_text,
    "int": enc_int,
    "numeric": enc_numeric,
    "bool": enc_bool,
    "ts": enc_ts,
    "bytea": enc_bytea,
    "uuid": enc_uuid,
    "jsonb": enc_jsonb,
    "digest": enc_digest,  # a digested text field by its digest (no column has this kind)
}


def encode(kind: str, value: Any) -> bytes:
    """One canonical field of the given encoding kind."""
    return NULL if value is None else ENCODERS[kind](value)


def payload_head(table: str) -> bytes:
    """The start of every payload of ``table``: the format, then the table."""
    return enc_text(FORMAT) + enc_text(table)


def payload_author(author: str, key_id: int) -> bytes:
    """The author and key id of a payload, after its head."""
    return enc_text(author) + enc_int(key_id)


def encode_fields(kinds: Sequence[str], values: Sequence[Any]) -> bytes:
    """Fields of the given kinds, one after the other."""
    return b"".join([encode(k, v) for k, v in zip(kinds, values, strict=True)])


def appended_prefix(position: int) -> bytes:
    """What precedes the value of the appended field at 1-based ``position``: ``enc_int(position)``."""
    if position < 1:
        raise ValueError("appended fields are numbered from 1")
    return enc_int(position)


def encode_appended(position: int, kind: str, value: Any) -> bytes:
    """An appended field (the 1-based ``position``-th of the table's
    ``appended_fields``): nothing at all when ``value`` is None, else
    ``enc_int(position)`` followed by the field. A row that leaves every
    appended field NULL encodes exactly as before the fields were appended."""
    return b"" if value is None else appended_prefix(position) + ENCODERS[kind](value)


def encode_appended_fields(kinds: Sequence[str], values: Sequence[Any]) -> bytes:
    """The appended fields of the given kinds, in the table's appended order (see :func:`encode_appended`)."""
    return b"".join([encode_appended(i, k, v) for i, (k, v) in enumerate(zip(kinds, values, strict=True), 1)])


def payload(table: str, author: str, key_id: int, at: dt.datetime, kinds: Sequence[str], values: Sequence[Any],
            appended_kinds: Sequence[str] = (), appended_values: Sequence[Any] = ()) -> bytes:
    """The bytes an author signs: format, table, author, key id, time, the
    signed fields, then the appended fields that are not NULL."""
    return (payload_head(table) + payload_author(author, key_id) + enc_ts(at) + encode_fields(kinds, values)
            + encode_appended_fields(appended_kinds, appended_values))


def row_bytes(chain_id: int, seq: int, stamped: bytes, signed_payload: bytes) -> bytes:
    """Canonical row bytes: chain id, seq, the stamped fields (encoded, see
    :func:`encode_fields`), then the signed payload."""
    return enc_int(chain_id) + enc_int(seq) + stamped + signed_payload


def row_hash(prev_hash: bytes, canonical: bytes, signature: bytes) -> bytes:
    """A row's hash: sha256 of the previous row's hash, the row's bytes, its signature."""
    return hashlib.sha256(bytes(prev_hash) + canonical + bytes(signature)).digest()


# -- checkpoints ----------------------------------------------------------------


class CheckpointHead(NamedTuple):
    """One chain in a checkpoint. Formats 1 and 2 sign chain_id, seq and
    row_hash; format 3 also the agent, from_seq and the segments
    ((last_seq, row_hash, part), in seq order) covering from_seq + 1 .. seq."""

    chain_id: int
    seq: int
    row_hash: bytes
    agent_id: int | None = None
    from_seq: int | None = None
    segments: tuple[tuple[int, bytes, str], ...] = ()
    project_id: int | None = None  # not signed per chain: the checkpoint's project


# The auditor signs "scsql/checkpoint/3" (heads with their agents and
# segments) after verifying every row up to the heads; "scsql/checkpoint/2"
# (heads only, verified) and "scsql/checkpoint/1" (heads only) were written
# by earlier versions. See sql/13_checkpoints.sql.
CHECKPOINT_FORMATS = {3: "scsql/checkpoint/3", 2: "scsql/checkpoint/2", 1: "scsql/checkpoint/1"}


def checkpoint_payload(project_id: int, at: dt.datetime, key_id: int,
                       heads: Iterable[CheckpointHead | Sequence[Any]], version: int = 3) -> bytes:
    """What the auditor signs: see sql/13_checkpoints.sql."""
    hs = sorted((h if isinstance(h, CheckpointHead) else CheckpointHead(*h) for h in heads), key=itemgetter(0))
    parts = [enc_text(CHECKPOINT_FORMATS[version]), enc_int(project_id), enc_ts(at),
             enc_int(key_id), enc_int(len(hs))]
    for h in hs:
        if version < 3:
            parts += [enc_int(h.chain_id), enc_int(h.seq), enc_bytea(h.row_hash)]
            continue
        if h.agent_id is None or h.from_seq is None:
            raise ValueError("format 3 names each chain's agent and from_seq")
        parts += [enc_int(h.chain_id), enc_int(h.agent_id), enc_int(h.seq), enc_bytea(h.row_hash),
                  enc_int(h.from_seq), enc_int(len(h.segments))]
        for last_seq, row_hash, part in h.segments:
            parts += [enc_int(last_seq), enc_bytea(row_hash), enc_text(part)]
    return b"".join(parts)
