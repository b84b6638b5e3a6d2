"""Bounding text that will be stored: one function for every clip site of
the hooks (previews, prompts, summary items, conversation lines).

Redaction (``scsql.redact``, in the database) finds a secret by its whole
shape: a fragment of a key cut off at a length bound is no longer
recognisable and would be stored as it is. So a clip never ends inside a
word: the word the bound falls in is left out whole. A secret (one run of
characters without spaces, quotes or brackets) is then kept whole, where
redaction finds it, or not at all. A PEM private key block spans several
lines; a block cut between its lines still starts with its BEGIN line and
key data, which redaction replaces up to the end of the text.
"""

from __future__ import annotations

# What ends a word: whitespace, quotes, brackets and list separators, none of
# which occurs inside a token, key, JWT or URL with a password.
_SEPARATORS = frozenset(" \t\n\r\f\v\"'`,;()[]{}<>|\u00a0\u2028\u2029")


def cut_point(text: str, n: int) -> int:
    """The largest position <= N where TEXT may be cut without keeping part of
    a word: N itself when a separator is on either side of it."""
    if n >= len(text):
        return len(text)
    if n <= 0:
        return 0
    if text[n] in _SEPARATORS or text[n - 1] in _SEPARATORS:
        return n
    while n > 0 and text[n - 1] not in _SEPARATORS:
        n -= 1
    return n


def clip(text: str | None, limit: int, *, squash: bool = False, ellipsis: bool = False) -> str | None:
    """TEXT in at most LIMIT characters, marked when shortened, never ending in
    part of a word (see the module). ``squash``: runs of whitespace become one
    space first. The mark is " [... N characters cut]", or "…" with
    ``ellipsis`` (short items, where the count would cost more than it says)."""
    if text is None:
        return None
    if squash:
        text = " ".join(text.split())
    if len(text) <= limit:
        return text
    if ellipsis:
        room = limit - 1
        return text[:cut_point(text, room)] + "…"
    mark = " [... {} characters cut]"
    room = max(0, limit - len(mark.format(len(text))))
    at = cut_point(text, room)
    return text[:at] + mark.format(len(text) - at)
