"""The rules the client applies as the database does, read from it.

Before it asks the database, the client decides a few things itself: whether
a text could hold a secret (and so must go through ``scsql.redact`` before
it is signed), whether a text holds a private key, how long a search query
may be, the relevance floor an answer from memory must reach. The database
defines each of these once (``sql/01_rules.sql``,
``scsql_caller.rules()``); the client reads them once per connection (an
:class:`~scsql.core.db.Agent` keeps them: ``agent.rules()``) and writes none
of them again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any


@cache
def _compiled(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, flags)


@dataclass(frozen=True)
class Rules:
    redaction_prefilter: re.Pattern[str]  # a text that does not match it holds nothing scsql.redact changes
    private_key: re.Pattern[str]          # a PEM private key block
    secret_dirs: frozenset[str]           # directory names that are stores of secrets (lower case)
    query_max_chars: int                  # the longest search query
    index_max_bytes: int                  # the largest text indexed as one source
    chunk_chars: int                      # about how much text a chunk holds
    confidence_levels: dict[str, float]   # low (the relevance floor), medium, high: an answer's confidence levels

    @classmethod
    def read(cls, conn: Any) -> Rules:
        """The rules of the database CONN is connected to."""
        row = conn.execute("select scsql_caller.rules() as r").fetchone()
        r = row["r"] if isinstance(row, dict) else row[0]
        return cls(redaction_prefilter=_compiled(r["redaction_prefilter"], re.IGNORECASE),
                   private_key=_compiled(r["private_key_pattern"]),
                   secret_dirs=frozenset(r["secret_dirs"]),
                   query_max_chars=int(r["query_max_chars"]),
                   index_max_bytes=int(r["index_max_bytes"]),
                   chunk_chars=int(r["chunk_chars"]),
                   confidence_levels={k: float(v) for k, v in r["confidence_levels"].items()})

    @property
    def relevance_floor(self) -> float:
        """The confidence (0 to 1) a hit or an answer from memory must reach to count as relevant."""
        return self.confidence_levels["low"]

    def may_hold_secret(self, value: Any) -> bool:
        """Whether redaction could change a text or JSON value: some string of
        it (object keys included) matches the redaction prefilter."""
        if isinstance(value, str):
            return self.redaction_prefilter.search(value) is not None
        if isinstance(value, dict):
            return any(self.may_hold_secret(k) or self.may_hold_secret(v) for k, v in value.items())
        if isinstance(value, list | tuple):
            return any(map(self.may_hold_secret, value))
        return False

    def holds_private_key(self, text: str) -> bool:
        """True when TEXT holds a PEM private key block (the marker alone is not one)."""
        return self.private_key.search(text) is not None

    def secret_dir(self, name: str) -> bool:
        """True for a directory name that is a store of secrets (compared in lower case)."""
        return name.lower() in self.secret_dirs
