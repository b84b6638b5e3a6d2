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

from .hookclient import cut_point  # the one definition of where a word ends (the hook client's, standard library)

__all__ = ["clip", "cut_point"]


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
