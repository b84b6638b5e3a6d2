"""Chained rows: the canonical encoding, and signing of chained writes.

The encoding is specified in the database, in ``COMMENT ON FUNCTION
scsql._enc`` (``\\df+ scsql._enc``). This module implements it again,
independently, from that text: the verifier must not trust the database to
say what a row's bytes are. A property test cross-checks both on generated
rows.

Making a write chained and signed, for any subsystem
------------------------------------------------------

1. In an ``sql/`` file, make the table chained (idempotent)::

       select scsql._make_chained('scsql.broadcasts', array['kind', 'body'], array['broadcast_id']);

2. Write rows through an API function whose arguments include the signed
   columns (``p_kind``, ``p_body``) and, last, ``p_at timestamptz default null,
   p_key_id integer default null, p_signature bytea default null``; it inserts
   them unchanged (the chain trigger does the rest).

3. In Python, declare the write once, in a module listed in
   ``registry.ADAPTER_MODULES``::

       from scsql.chain import SignedField, signed_write

       signed_write("send_broadcast", "scsql.broadcasts", [
           SignedField("kind", "text"),
           SignedField("body", "jsonb"),
       ])

   The fields are the table's ``signed_fields`` in order, each with its
   encoding kind and the default the SQL function applies when the argument
   is omitted. The adapter fills the defaults, stamps ``at``, finds the key id
   of the agent's loaded key, signs the payload with it and passes ``at``,
   ``key_id`` and ``signature``; those three are hidden from the MCP schema.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import struct
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import nacl.bindings

from . import registry
from .db import Agent
from .errors import ScsqlError

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
    d = _decimal(value)
    if d.is_nan():
        return "NaN"
    if d.is_infinite():
        return "-Infinity" if d < 0 else "Infinity"
    text = format(d, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _decimal(value: Decimal | int | float) -> Decimal:
    if isinstance(value, Decimal):
        return value
    if isinstance(value, float):
        return Decimal(repr(value))
    return Decimal(value)


def micros(value: dt.datetime) -> int:
    """Microseconds since the Unix epoch (UTC) of an aware datetime."""
    if value.tzinfo is None:
        raise ValueError("timestamps of chained rows must carry a time zone")
    d = value - EPOCH
    return (d.days * 86400 + d.seconds) * 1000000 + d.microseconds


def _json_number(value: Decimal) -> str:
    """A JSON number as PostgreSQL's jsonb prints it: scale kept, no exponent, no -0."""
    text = format(value, "f")
    return text[1:] if value.is_zero() and text.startswith("-") else text


def _json_string(value: str) -> str:
    """A JSON string as jsonb prints it: \\" \\\\ \\b \\f \\n \\r \\t, other control
    characters as \\u00xx (lower-case hex), everything else as itself. Python's
    encoder with ensure_ascii off writes exactly that."""
    return json.dumps(value, ensure_ascii=False)


def jsonb_text(value: Any) -> str:
    """PostgreSQL's jsonb text output of a JSON value (numbers as Decimal, int or float)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float | Decimal):
        return _json_number(_decimal(value))
    if isinstance(value, list | tuple):
        return "[" + ", ".join(jsonb_text(v) for v in value) + "]"
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: (len(k.encode()), k.encode()))
        return "{" + ", ".join(f"{_json_string(k)}: {jsonb_text(value[k])}" for k in keys) + "}"
    raise TypeError(f"not a JSON value: {value!r}")


_len = struct.Struct(">I").pack  # the 4-byte big-endian length


def _enc_text(v: str) -> bytes:
    b = v.encode("utf-8")
    return b"t" + _len(len(b)) + b


def _enc_int(v: int) -> bytes:
    b = str(int(v)).encode("ascii")
    return b"i" + _len(len(b)) + b


def _enc_numeric(v: Decimal | int | float) -> bytes:
    b = numeric_text(v).encode("ascii")
    return b"n" + _len(len(b)) + b


def _enc_bool(v: bool) -> bytes:
    return b"b\x00\x00\x00\x01t" if v else b"b\x00\x00\x00\x01f"


def _enc_ts(v: dt.datetime) -> bytes:
    b = str(micros(v)).encode("ascii")
    return b"T" + _len(len(b)) + b


def _enc_bytea(v: bytes | memoryview) -> bytes:
    b = bytes(v)
    return b"x" + _len(len(b)) + b


def _enc_uuid(v: uuid.UUID | str) -> bytes:
    return b"u\x00\x00\x00\x24" + str(uuid.UUID(str(v))).encode("ascii")


@dataclass(frozen=True)
class JsonValue:
    """A jsonb value as read or sent; ``JsonValue(None)`` is JSON null, unlike SQL NULL."""

    value: Any
    # PostgreSQL's own text of a value Python cannot hold (nested past Python's
    # recursion limit, an integer past its digit limit). That text is already
    # the canonical encoding, so such a row still encodes, and verifies or
    # breaks on its own: one row can never stop the verification of the rest.
    text: str | None = None

    @classmethod
    def parse(cls, text: str | bytes) -> JsonValue:
        try:
            return cls(json.loads(text, parse_float=Decimal))
        except (RecursionError, ValueError):
            return cls(None, bytes(text).decode("utf-8") if not isinstance(text, str) else text)


def _enc_jsonb(v: Any) -> bytes:
    if isinstance(v, JsonValue):
        if v.text is not None:
            return field(b"j", v.text.encode("utf-8"))
        v = v.value
    return field(b"j", jsonb_text(v).encode("utf-8"))


ENCODERS: dict[str, Callable[[Any], bytes]] = {
    "text": _enc_text,
    "int": _enc_int,
    "numeric": _enc_numeric,
    "bool": _enc_bool,
    "ts": _enc_ts,
    "bytea": _enc_bytea,
    "uuid": _enc_uuid,
    "jsonb": _enc_jsonb,
}


def encode(kind: str, value: Any) -> bytes:
    """One canonical field of the given encoding kind."""
    return NULL if value is None else ENCODERS[kind](value)


def payload(table: str, author: str, key_id: int, at: dt.datetime, kinds: Sequence[str], values: Sequence[Any]) -> bytes:
    """The bytes an author signs: format, table, author, key id, time, then the signed fields."""
    parts = [_enc_text(FORMAT), _enc_text(table), _enc_text(author), _enc_int(key_id), _enc_ts(at)]
    parts += [encode(k, v) for k, v in zip(kinds, values, strict=True)]
    return b"".join(parts)


def row_bytes(chain_id: int, seq: int, stamped_kinds: Sequence[str], stamped: Sequence[Any], signed_payload: bytes) -> bytes:
    """Canonical row bytes: chain id, seq, stamped fields, then the payload."""
    head = _enc_int(chain_id) + _enc_int(seq)
    return head + b"".join(encode(k, v) for k, v in zip(stamped_kinds, stamped, strict=True)) + signed_payload


def row_hash(prev_hash: bytes, canonical: bytes, signature: bytes) -> bytes:
    return hashlib.sha256(bytes(prev_hash) + canonical + bytes(signature)).digest()


# -- signing chained writes ---------------------------------------------------


@dataclass(frozen=True)
class SignedField:
    """One signed column: its name (= the function argument without p_), its
    encoding kind, and the default the SQL function applies when the argument
    is omitted."""

    name: str
    kind: str
    default: Any = None


def _prepare(f: SignedField, value: Any) -> tuple[Any, Any]:
    """(value to send, value to sign) for one field."""
    if f.kind == "jsonb":
        # The registry sends jsonb arguments as jsonb_text(value) (None as JSON
        # null), the text the server stores and prints back: sign the same.
        return value, JsonValue(value)
    if value is None:
        return None, None
    if f.kind == "numeric" and isinstance(value, float | int) and not isinstance(value, bool):
        value = _decimal(value)
    return value, value


def _field_step(f: SignedField) -> Callable[[dict[str, Any]], bytes]:
    """Fill one field of the arguments (its default) and return its
    canonical bytes; the same rules as :func:`_prepare`, resolved once per
    declaration instead of once per row."""
    name, default, kind = f.name, f.default, f.kind
    if kind == "text":

        def text_step(out: dict[str, Any]) -> bytes:
            v = out.get(name, default)
            if v is None:
                out[name] = None
                return NULL
            out[name] = v
            b = v.encode("utf-8")
            return b"t" + _len(len(b)) + b
        return text_step
    if kind == "int":

        def int_step(out: dict[str, Any]) -> bytes:
            v = out.get(name, default)
            out[name] = v
            if v is None:
                return NULL
            b = str(int(v)).encode("ascii")
            return b"i" + _len(len(b)) + b
        return int_step

    def step(out: dict[str, Any]) -> bytes:
        send, signed = _prepare(f, out.get(name, default))
        out[name] = send
        return encode(kind, signed)
    return step


class _Plan:
    """How to fill and encode the signed fields of one chained table."""

    def __init__(self, table: str, fields: Sequence[SignedField]):
        self.table = table
        self.steps = [_field_step(f) for f in fields]
        self.head = _enc_text(FORMAT) + _enc_text(table)


_PLANS: dict[tuple[str, int], tuple[Sequence[SignedField], _Plan]] = {}


def _plan(table: str, fields: Sequence[SignedField]) -> _Plan:
    # Declarations are module-level sequences: keyed by identity (defaults
    # such as {} are not hashable), checked, and kept few.
    entry = _PLANS.get((table, id(fields)))
    if entry is not None and entry[0] is fields:
        return entry[1]
    if len(_PLANS) > 256:
        _PLANS.clear()
    plan = _Plan(table, fields)
    _PLANS[(table, id(fields))] = (fields, plan)
    return plan


class _Signer:
    """One agent's loaded key, ready to sign: its key_id, the libsodium secret
    key (libsodium signs faster than OpenSSL here and releases the GIL, so
    concurrent writers of one process sign in parallel), and the payload
    prefix (format, table, author, key id) per table. Ed25519 is
    deterministic: the signature is the same whichever library makes it."""

    def __init__(self, agent: Agent, kid: int):
        from cryptography.hazmat.primitives import serialization

        self.key = agent.key
        self.name = agent.name
        self.key_id = kid
        seed = agent.key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                       serialization.NoEncryption())
        self.secret = nacl.bindings.crypto_sign_seed_keypair(seed)[1]
        self.author = _enc_text(agent.name) + _enc_int(kid)

    def sign(self, data: bytes) -> bytes:
        return nacl.bindings.crypto_sign(data, self.secret)[:64]


_SIGNERS: dict[int, _Signer] = {}
_LAST_AT: dict[str, dt.datetime] = {}  # per agent name, across its Agent objects in this process
_STAMP_LOCK = threading.Lock()


def _stamp(agent_name: str) -> dt.datetime:
    """Now, but later than every time this process stamped a write of this
    agent before: two writes of one process never sign the same payload, so a
    signature that occurs twice in a chain is a copy (verification reports it
    as a replay). Writes of one agent from two processes would need the same
    content in the same microsecond to collide."""
    at = dt.datetime.now(dt.UTC)
    with _STAMP_LOCK:
        last = _LAST_AT.get(agent_name)
        if last is not None and at <= last:
            at = last + dt.timedelta(microseconds=1)
        _LAST_AT[agent_name] = at
    return at


def _signer(agent: Agent) -> _Signer:
    signer = _SIGNERS.get(id(agent))
    if signer is None or signer.key is not agent.key or signer.name != agent.name:
        signer = _SIGNERS[id(agent)] = _Signer(agent, key_id(agent))
    return signer


_KEY_IDS: dict[tuple[int, int], tuple[Any, int]] = {}


def key_id(agent: Agent) -> int:
    """The key_id of the private key this agent process holds (its current key)."""
    if agent.key is None:
        raise ScsqlError("SC031", f"agent {agent.name!r} has no private key loaded; chained writes are signed")
    cached = _KEY_IDS.get((id(agent), id(agent.key)))
    if cached is not None and cached[0] is agent.key:
        return cached[1]
    from .signing import public_bytes

    pub = public_bytes(agent.key)
    me = agent.whoami()
    if me["public_key"] != pub.hex():
        raise ScsqlError(
            "SC102",
            f"the key loaded for agent {agent.name!r} is not its current key (key {me['key_id']})",
            "the key was rotated: restart the agent process so it loads its new key",
        )
    _KEY_IDS[(id(agent), id(agent.key))] = (agent.key, me["key_id"])
    return me["key_id"]


def sign_row(agent: Agent, table: str, fields: Sequence[SignedField], args: dict[str, Any],
             at: dt.datetime | None = None) -> dict[str, Any]:
    """Fill defaults, stamp ``at``, sign the payload; returns the arguments to send."""
    if agent.key is None:
        key_id(agent)  # raises SC031
    plan = _plan(table, fields)
    signer = _signer(agent)
    out = dict(args)
    at = at or _stamp(agent.name)
    data = b"".join([plan.head, signer.author, _enc_ts(at), *[step(out) for step in plan.steps]])
    out["at"] = at
    out["key_id"] = signer.key_id
    out["signature"] = signer.sign(data)
    return out


def signed_write(function: str, table: str, fields: Sequence[SignedField]) -> None:
    """Register the registry adapter that signs every call of ``function``
    (a writer of chained ``table``): it supplies at, key_id and signature."""
    fields = tuple(fields)

    @registry.adapter(function, supplies=("at", "key_id", "signature"))
    def _sign(agent: Agent, args: dict[str, Any]) -> dict[str, Any]:
        return sign_row(agent, table, fields, args)
