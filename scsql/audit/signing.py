"""Signing chained writes with the acting agent's key.

Making a write chained and signed, for any subsystem
------------------------------------------------------

1. In an ``sql/`` file, make the table chained (idempotent)::

       select scsql._make_chained('scsql.broadcasts', array['kind', 'body'], array['broadcast_id']);

2. Write rows through an API function whose arguments include the signed
   columns (``p_kind``, ``p_body``) and, last, ``p_at timestamptz default null,
   p_key_id integer default null, p_signature bytea default null``; it inserts
   them unchanged (the chain trigger does the rest).

3. In Python, declare the table's signed fields once, in the subsystem's
   module, and give its adapter to the function in the subsystem's
   ``ADAPTERS`` (which ``scsql/subsystems.py`` lists)::

       BROADCASTS = SignedTable("scsql.broadcasts", [
           SignedField("kind", "text"),
           SignedField("body", "jsonb"),
       ])
       ADAPTERS = {"send_broadcast": BROADCASTS.adapter()}

   The fields are the table's ``signed_fields`` in order, each with its
   encoding kind and the default the SQL function applies when the argument
   is omitted, then its ``appended_fields`` in order, declared
   ``SignedField(name, kind, default, appended=True)``: a signed column added
   to a table that already has rows (``p_appended`` of ``scsql._make_chained``)
   is signed only when not NULL, so earlier rows keep their signatures; its
   argument of the writing function defaults to NULL, and a field that is None
   is left out of the call (so a jsonb field is SQL NULL, not JSON null).
   The adapter fills the defaults, stamps ``at``, finds the key id of the
   agent's loaded key, signs the payload (see :mod:`.encoding`) and
   passes ``at``, ``key_id`` and ``signature``; those three are hidden from
   the MCP schema.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import json
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import nacl.bindings
from cryptography.hazmat.primitives import serialization
from psycopg.types.json import Jsonb

from ..core.db import Agent
from ..core.errors import ScsqlError
from ..core.jsonb import JsonValue, as_decimal, jsonb_text
from ..core.keys import public_bytes
from ..core.registry import Adapter
from . import encoding
from ..core import errors

SUPPLIED = ("at", "key_id", "signature")  # the arguments a signed write's adapter adds


@dataclass(frozen=True)
class SignedField:
    """One signed column: its name (= the function argument without p_), its
    encoding kind, and the default the SQL function applies when the argument
    is omitted. ``appended=True``: a column of the table's ``appended_fields``
    (a signed column added after rows existed), signed only when not None;
    appended fields follow the plain ones, in ``appended_fields`` order.
    ``redact``: free text (kind text or jsonb) that is signed as
    ``scsql.redact`` / ``scsql.redact_jsonb`` return it, since the database
    refuses signed text that still holds a secret (SC040). ``digested``: a
    column of the table's ``digested_fields`` (kind text), signed by the
    sha256 of its text (see :func:`.encoding.enc_text_digest`), so it may be
    purged later."""

    name: str
    kind: str
    default: Any = None
    appended: bool = False
    redact: bool = False
    digested: bool = False


def _send_and_sign(kind: str, value: Any) -> tuple[Any, Any]:
    """(value to send, value to sign) of one field."""
    if kind == "jsonb":
        # The registry sends jsonb arguments as jsonb_text(value) (None as JSON
        # null), the text the server stores and prints back: sign the same.
        return value, JsonValue(value)
    if kind == "numeric" and isinstance(value, float | int) and not isinstance(value, bool):
        value = as_decimal(value)
    return value, value


def _field_step(f: SignedField, position: int = 0) -> Callable[[dict[str, Any]], bytes]:
    """Fill one field of the arguments (its default when omitted) and return
    its canonical bytes; resolved once per declaration, not once per row.
    ``position``: the 1-based position of an appended field."""
    name, default, kind = f.name, f.default, f.kind
    if f.digested:
        if kind != "text":
            raise ValueError(f"{name}: only text fields are digested")
        digest = encoding.enc_text_digest
        prefix = encoding.appended_prefix(position) if f.appended else None

        def digested_step(out: dict[str, Any]) -> bytes:
            value = out.get(name, default)
            if prefix is None:
                out[name] = value
                return encoding.NULL if value is None else digest(value)
            if value is None:
                out.pop(name, None)
                return b""
            out[name] = value
            return prefix + digest(value)
        return digested_step
    if f.appended:
        prefix = encoding.appended_prefix(position)

        def appended_step(out: dict[str, Any]) -> bytes:
            value = out.get(name, default)
            if value is None:
                # Left out, so the argument's default applies: SQL NULL, even
                # for jsonb (which would otherwise be sent as JSON null).
                out.pop(name, None)
                return b""
            send, signed = _send_and_sign(kind, value)
            out[name] = send
            return prefix + encoding.encode(kind, signed)
        return appended_step
    if kind in ("text", "int"):  # the common kinds: sent and signed as given
        enc = encoding.ENCODERS[kind]

        def plain_step(out: dict[str, Any]) -> bytes:
            v = out[name] = out.get(name, default)
            return encoding.NULL if v is None else enc(v)
        return plain_step

    def step(out: dict[str, Any]) -> bytes:
        send, signed = _send_and_sign(kind, out.get(name, default))
        out[name] = send
        return encoding.encode(kind, signed)
    return step


class _Signer:
    """One agent's loaded key, ready to sign: its key_id, the libsodium secret
    key (libsodium signs faster than OpenSSL here and releases the GIL, so
    concurrent writers of one process sign in parallel), and the payload's
    author bytes. Ed25519 is deterministic: the signature is the same
    whichever library makes it."""

    def __init__(self, agent: Agent, kid: int):
        self.key = agent.key
        self.name = agent.name
        self.key_id = kid
        seed = agent.key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                       serialization.NoEncryption())
        self.secret = nacl.bindings.crypto_sign_seed_keypair(seed)[1]
        self.author = encoding.payload_author(agent.name, kid)

    def sign(self, data: bytes) -> bytes:
        return nacl.bindings.crypto_sign(data, self.secret)[:64]


# One signer per Agent object, dropped with it; remade when its key changes.
_SIGNERS: weakref.WeakKeyDictionary[Agent, _Signer] = weakref.WeakKeyDictionary()
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
    signer = _SIGNERS.get(agent)
    if signer is None or signer.key is not agent.key or signer.name != agent.name:
        signer = _SIGNERS[agent] = _Signer(agent, _current_key_id(agent))
    return signer


def _current_key_id(agent: Agent) -> int:
    if agent.key is None:
        raise ScsqlError(errors.KEY_FILE_MISSING, f"agent {agent.name!r} has no private key loaded; chained writes are signed")
    me = agent.whoami()
    if me["public_key"] != public_bytes(agent.key).hex():
        raise ScsqlError(
            errors.SIGNING_KEY_INVALID,
            f"the key loaded for agent {agent.name!r} is not its current key (key {me['key_id']})",
            "the key was rotated: restart the agent process so it loads its new key",
        )
    return me["key_id"]


def key_id(agent: Agent) -> int:
    """The key_id of the private key this agent process holds (its current key)."""
    return _signer(agent).key_id


class SignedTable:
    """The signed fields of one chained table, resolved once: how to fill,
    encode and sign a write of it."""

    def __init__(self, table: str, fields: Sequence[SignedField]):
        self.table = table
        self.fields = tuple(fields)
        plain = [f for f in self.fields if not f.appended]
        if self.fields[:len(plain)] != tuple(plain):
            raise ValueError(f"{table}: appended fields must follow the plain signed fields")
        self._head = encoding.payload_head(table)
        self._steps = [_field_step(f, i - len(plain)) for i, f in enumerate(self.fields, 1)]
        self._redacted = tuple(f for f in self.fields if f.redact)

    def sign(self, agent: Agent, args: dict[str, Any], at: dt.datetime | None = None) -> dict[str, Any]:
        """Redact the ``redact`` fields (one query, none when they hold
        nothing redaction could change), fill defaults, stamp ``at``, sign the payload; returns the
        arguments to send."""
        out = dict(args)
        self._redact(agent, [out])
        return self._sign(agent, out, at)

    def sign_many(self, agent: Agent, rows: Sequence[dict[str, Any]], *, conn: Any = None,
                  redacted: Sequence[str] = ()) -> list[dict[str, Any]]:
        """:meth:`sign` for several writes, with ONE query redacting all of
        them: on CONN (the caller's transaction) when given, else in a
        transaction of its own. ``redacted``: fields the caller already took
        through scsql.redact (the database refuses them otherwise, SC040)."""
        outs = [dict(r) for r in rows]
        self._redact(agent, outs, conn, frozenset(redacted))
        return [self._sign(agent, out, None) for out in outs]

    def _redact(self, agent: Agent, outs: list[dict[str, Any]], conn: Any = None,
                skip: frozenset[str] = frozenset()) -> None:
        """Replace the ``redact`` fields of each row by their redacted values,
        in one call of scsql.redact / scsql.redact_jsonb for all rows (none
        when no field holds a word a secret could be found by)."""
        texts: list[tuple[dict[str, Any], str, str]] = []
        docs: list[tuple[dict[str, Any], str, Any]] = []
        rules = agent.rules(conn)  # the database's prefilter (sql/01_rules.sql): a text without its words is signed as given
        for out in outs:
            for f in self._redacted:
                if f.name in skip:
                    continue
                v = out.get(f.name, f.default)
                if rules.may_hold_secret(v):
                    (docs if f.kind == "jsonb" else texts).append((out, f.name, v))
        if not texts and not docs:
            return
        with contextlib.nullcontext(conn) if conn is not None else agent.transaction() as conn:
            row = conn.execute(
                "select array(select scsql.redact(t) from unnest(%s::text[]) with ordinality u(t, n) order by n) as t, "
                "(select coalesce(jsonb_agg(scsql.redact_jsonb(j) order by n), '[]')::text "
                " from jsonb_array_elements(%s::jsonb) with ordinality u(j, n)) as j",
                ([v for _, _, v in texts], Jsonb([v for _, _, v in docs], dumps=jsonb_text)),
            ).fetchone()
        for (out, name, v), red in zip(texts, row["t"], strict=True):
            if red != v:
                out[name] = red
        # Numbers exactly as the server holds them (Decimal), as jsonb_text writes them.
        for (out, name, v), red in zip(docs, json.loads(row["j"], parse_float=decimal.Decimal), strict=True):
            if red != v:  # else the value as given, exactly (the numbers' Python types included)
                out[name] = red

    def _sign(self, agent: Agent, out: dict[str, Any], at: dt.datetime | None) -> dict[str, Any]:
        signer = _signer(agent)
        at = at or _stamp(agent.name)
        data = b"".join([self._head, signer.author, encoding.enc_ts(at), *[step(out) for step in self._steps]])
        out["at"] = at
        out["key_id"] = signer.key_id
        out["signature"] = signer.sign(data)
        return out

    def adapter(self) -> Adapter:
        """The registry adapter that signs every call of a writer of this table."""
        return Adapter(frozenset(SUPPLIED), lambda agent, args, call: call(self.sign(agent, args)))


def sign_row(agent: Agent, table: str, fields: Sequence[SignedField], args: dict[str, Any],
             at: dt.datetime | None = None) -> dict[str, Any]:
    """One write of ``table`` signed (see :meth:`SignedTable.sign`)."""
    return SignedTable(table, fields).sign(agent, args, at)
