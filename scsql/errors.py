"""One error type for everything scsql reports.

The codes and their meanings live in the database table ``scsql.error_codes``
(defined by ``sql/00_core.sql`` and each subsystem's file), so psql users, the
CLI and MCP clients read the same catalogue. Codes the client raises itself
(an unreachable server, an insecure key file) are listed there too, with
``raised_by = 'client'``.
"""

from __future__ import annotations

import psycopg

# Names of the client-side codes. Their meanings are in scsql.error_codes.
SERVER_UNREACHABLE = "SC030"
KEY_FILE_MISSING = "SC031"
KEY_FILE_INSECURE = "SC032"
EMBEDDED_BUSY = "SC033"
EMBEDDED_NOT_RUNNING = "SC034"
AGENT_REQUIRED = "SC035"
AGENT_LOGIN_PRIVILEGED = "SC036"
MIGRATION_CHANGED = "SC022"
MIGRATION_UNKNOWN = "SC023"

# Filled from scsql.error_codes the first time a connection is available, so
# messages can carry the stable name beside the code.
_NAMES: dict[str, str] = {}


class ScsqlError(Exception):
    """An error with a stable code, a message a person can act on, and a hint."""

    def __init__(self, code: str, message: str, hint: str | None = None, name: str | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint
        self.name = name or _NAMES.get(code)

    def __str__(self) -> str:
        head = f"{self.code} {self.name}" if self.name else self.code
        text = f"{head}: {self.message}"
        if self.hint:
            text += f" ({self.hint})"
        return text

    def as_dict(self) -> dict[str, str | None]:
        return {"code": self.code, "name": self.name, "message": self.message, "hint": self.hint}


def learn_names(conn: psycopg.Connection) -> None:
    """Load code names from scsql.error_codes once per process."""
    if _NAMES:
        return
    try:
        with conn.transaction():  # a savepoint: a missing table must not abort the caller
            rows = conn.execute("select code, name from scsql.error_codes").fetchall()
    except psycopg.Error:
        return
    _NAMES.update(dict(rows))


def from_psycopg(exc: psycopg.Error) -> ScsqlError:
    """Turn a database error into a ScsqlError carrying its SQLSTATE."""
    diag = exc.diag
    code = exc.sqlstate or "XX000"
    message = diag.message_primary or str(exc).strip()
    detail = diag.message_detail
    if detail:
        message = f"{message}: {detail}"
    return ScsqlError(code, message, diag.message_hint)
