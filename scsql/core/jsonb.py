"""JSON as PostgreSQL's jsonb writes and reads it: the text the server
stores and prints back for a value (``jsonb_text``), and a value read from
that text (``JsonValue``, numbers with a fraction or exponent as Decimal).

The catalogue binds every jsonb argument as this text, and the signer signs
the same text (``scsql/audit/encoding.py`` encodes a jsonb field with it), so
what is sent, stored and signed cannot differ. Standard library only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any


def as_decimal(value: Decimal | int | float) -> Decimal:
    if isinstance(value, Decimal):
        return value
    if isinstance(value, float):
        return Decimal(repr(value))
    return Decimal(value)


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
        return _json_number(as_decimal(value))
    if isinstance(value, list | tuple):
        return "[" + ", ".join(jsonb_text(v) for v in value) + "]"
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: (len(k.encode()), k.encode()))
        return "{" + ", ".join(f"{_json_string(k)}: {jsonb_text(value[k])}" for k in keys) + "}"
    raise TypeError(f"not a JSON value: {value!r}")


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
