"""One error type for everything scsql reports.

The codes and their meanings live in the database table ``scsql.error_codes``
(defined by ``sql/00_core.sql`` and each subsystem's file), so psql users, the
CLI and MCP clients read the same catalogue. Codes the client raises itself
(an unreachable server, an insecure key file) are listed there too, with
``raised_by = 'client'``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where a connection is made: ScsqlError itself must not load the driver
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
INVALID_ARGUMENT = "SC010"
DATABASE_ERROR = "SC037"
TEXT_HAS_NUL = "SC222"
INSTALL_NO_PROJECT_DIR = "SC050"
CONFIG_NOT_REGULAR = "SC051"
CONFIG_UNPARSABLE = "SC052"
CONFIG_UNWRITABLE = "SC053"
INSTALL_CONFLICT = "SC054"
EMBEDDED_HELD = "SC013"
RESTORE_NOT_EMPTY = "SC014"
BACKUP_INVALID = "SC015"
RESTORE_UNVERIFIED = "SC016"
BACKUP_TOOL_FAILED = "SC017"
BACKUP_EXISTS = "SC018"
CITUS_MISSING = "SC042"
NOT_DISTRIBUTABLE = "SC043"

# Named for the modules that raise them (the catalogue's names, upper case).
NOT_AN_AGENT = "SC001"
AGENT_REVOKED = "SC002"
AGENT_UNKNOWN = "SC003"
AGENT_EXISTS = "SC004"
PROJECT_UNKNOWN = "SC005"
MIGRATION_LOCK_TIMEOUT = "SC024"
AGENT_CONNECTION_LIMIT = "SC026"
LOGIN_NOT_THIS_AGENT = "SC027"
AGENT_LOGIN_REFUSED = "SC029"
CITUS_WORKER_SETUP = "SC044"
DOCTOR_ACTION_NEEDED = "SC055"
METRICS_LISTEN_INVALID = "SC056"
OPERATIONS_SCHEMA_MISSING = "SC057"
BACKUP_UNSIGNED = "SC060"
BACKUP_SIGNATURE_INVALID = "SC061"
BACKUP_KEY_MISSING = "SC062"
BACKUP_NOT_ADMIN = "SC063"
SIGNING_KEY_INVALID = "SC102"
NOT_CHAINABLE = "SC105"
AUDITOR_KEY_MISSING = "SC130"
EVENT_TOO_LARGE = "SC151"
INDEX_PATH_OUTSIDE_ROOT = "SC213"
EMBED_MODEL_INVALID = "SC220"
EMBED_UNREACHABLE = "SC221"
INDEX_PATH_PROTECTED = "SC223"
INDEX_PATH_UNUSABLE = "SC224"
PATH_OUTSIDE_PROJECT = "SC321"
DISTILL_SESSION_UNKNOWN = "SC334"
PURGE_KIND_INVALID = "SC360"
PURGE_TARGET_UNKNOWN = "SC361"
PURGE_NOT_ALLOWED = "SC362"
PURGE_ALREADY = "SC363"
PURGE_REASON_INVALID = "SC364"
PURGE_UNSUPPORTED = "SC365"
STAGED_TEXT_ORDER_INVALID = "SC370"
STAGED_PATH_REPEATED = "SC371"
BULK_PATH_UNAVAILABLE = "SC372"
CONFIDENCE_HITS_INVALID = "SC380"
CONFIDENCE_QUERY_INVALID = "SC381"
VIEWER_NOT_FOUND = "SC600"
VIEWER_TOKEN_REQUIRED = "SC601"
VIEWER_PATH_UNKNOWN = "SC602"
REPORT_SIGNATURE_INVALID = "SC603"
TOKEN_REQUIRED = "SC280"
TOKEN_UNKNOWN = "SC281"
TOKEN_REVOKED = "SC282"
TOKEN_EXPIRED = "SC283"
TOKEN_SCOPE = "SC284"
AGENT_NOT_THE_TOKENS = "SC285"
REQUEST_RATE_LIMITED = "SC286"
REQUEST_TOO_LARGE = "SC287"
SERVER_HOLDS_NO_KEY = "SC290"
HOOK_REQUEST_INVALID = "SC291"

# Filled from scsql.error_codes the first time a connection is available, so
# messages can carry the stable name beside the code.
_NAMES: dict[str, str] = {}


class ScsqlError(Exception):
    """An error with a stable code, a message a person can act on, and a hint."""

    def __init__(self, code: str, message: str, hint: str | None = None, name: str | None = None,
                 sqlstate: str | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint
        self.name = name or _NAMES.get(code)
        self.sqlstate = sqlstate or code  # what PostgreSQL (or the driver) said, before mapping

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
    import psycopg

    if _NAMES:
        return
    try:
        with conn.transaction():  # a savepoint: a missing table must not abort the caller
            rows = conn.execute("select code, name from scsql.error_codes").fetchall()
    except psycopg.Error:
        return
    _NAMES.update(dict(rows))


def _is_catalogued(code: str) -> bool:
    return code.startswith("SC") or code == "42501" or code in _NAMES


# SQLSTATE classes that mean the arguments could not be taken as given (a
# value PostgreSQL cannot hold, a string too long for an index or tsvector):
# the caller's input, reported as invalid_argument with the original state.
_ARGUMENT_CLASSES = ("22", "54")


def from_psycopg(exc: psycopg.Error) -> ScsqlError:
    """Turn a database or driver error into a ScsqlError whose code is in
    scsql.error_codes.

    SCnnn codes and 42501 pass through. A data exception (class 22) or an
    exceeded program limit (class 54) becomes SC010 invalid_argument; a
    failure of the driver itself to send an argument (no SQLSTATE) becomes
    SC222 for a NUL byte and SC010 otherwise; anything else becomes SC037
    database_error. The message keeps the original SQLSTATE."""
    diag = exc.diag
    state = exc.sqlstate
    message = (diag.message_primary if state else None) or str(exc).strip() or type(exc).__name__
    detail = diag.message_detail if state else None
    if detail:
        message = f"{message}: {detail}"
    hint = diag.message_hint if state else None
    if state and _is_catalogued(state):
        return ScsqlError(state, message, hint)
    if state is None:
        if "NUL" in message or "\\x00" in message or "0x00" in message:
            return ScsqlError(TEXT_HAS_NUL, f"{message}; nothing was stored", "PostgreSQL text cannot hold NUL bytes: remove them",
                              sqlstate="client")
        return ScsqlError(INVALID_ARGUMENT, f"an argument could not be sent to PostgreSQL: {message}", hint,
                          sqlstate="client")
    if state[:2] in _ARGUMENT_CLASSES:
        return ScsqlError(INVALID_ARGUMENT, f"{message} (SQLSTATE {state})", hint, sqlstate=state)
    return ScsqlError(DATABASE_ERROR, f"{message} (SQLSTATE {state})",
                      hint or "nothing was stored; retry, and report it if it persists", sqlstate=state)


def is_unreachable(exc: BaseException) -> bool:
    """Whether EXC says the database (or the connection to it) is gone, as
    opposed to a refusal of what was sent."""
    from psycopg import OperationalError
    from psycopg_pool import PoolTimeout

    if isinstance(exc, OperationalError | PoolTimeout | ConnectionError):
        return True
    if isinstance(exc, ScsqlError):
        return exc.code in (SERVER_UNREACHABLE, EMBEDDED_BUSY, EMBEDDED_NOT_RUNNING, EMBEDDED_HELD) or \
            (exc.sqlstate or "")[:2] in ("08", "57")  # connection exceptions, operator intervention (shutdown)
    return False
