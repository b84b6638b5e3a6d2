"""Bearer tokens of the team server.

A token is ``scsql.<agent>.<secret>``: the agent it acts as, and 32 random
bytes as unpadded base64url (43 characters). The client makes it and shows
it once; the database stores its sha256 only (scsql.create_agent_token).
The agent in the text says which role the server checks the token as; the
database confirms the hash belongs to that agent (scsql_caller.use_token),
so a token edited to name another agent is no token of that agent.

Why sha256 and not a slow password hash: a slow hash (bcrypt, scrypt,
argon2) makes each guess of a low-entropy password expensive. A token has
256 random bits; no rate of guessing reaches it, slow hash or not, while a
slow hash would cost every request milliseconds of CPU and, salted, could
not be found by an index. A leaked table of hashes gives nothing to replay.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import re
import secrets
from typing import Any

from ..core import errors
from ..core.errors import ScsqlError

PREFIX = "scsql"
SECRET_BYTES = 32
SCOPES = ("agent", "tools", "hooks")
DEFAULT_EXPIRES = "90d"
_TOKEN = re.compile(r"scsql\.([a-z][a-z0-9_]{0,47})\.([A-Za-z0-9_-]{43})")
_SPAN = re.compile(r"(\d+)\s*([mhdw])")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def make(agent: str) -> str:
    """A new token of AGENT (never stored: only its digest is)."""
    secret = base64.urlsafe_b64encode(secrets.token_bytes(SECRET_BYTES)).rstrip(b"=").decode()
    return f"{PREFIX}.{agent}.{secret}"


def digest(token: str) -> bytes:
    """What the database keeps of a token: the sha256 of its text."""
    return hashlib.sha256(token.encode("utf-8")).digest()


def agent_of(token: str) -> str:
    """The agent TOKEN names; SC280 when it is not a token's text."""
    m = _TOKEN.fullmatch(token.strip())
    if m is None:
        raise ScsqlError(errors.TOKEN_REQUIRED, "the bearer token is not a scsql token (scsql.<agent>.<secret>)",
                         "use the token scsql agent token create printed, whole")
    return m.group(1)


def expires_at(text: str | None, now: dt.datetime | None = None) -> dt.datetime | None:
    """--expires: ``never``, a span (``90d``, ``12h``, ``30m``, ``2w``) from
    now, or an ISO date or time (a date means its midnight, UTC)."""
    text = (text or DEFAULT_EXPIRES).strip()
    now = now or dt.datetime.now(dt.UTC)
    if text == "never":
        return None
    m = _SPAN.fullmatch(text)
    if m:
        return now + dt.timedelta(**{_UNITS[m.group(2)]: int(m.group(1))})
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ScsqlError(errors.INVALID_ARGUMENT,
                         f"--expires {text}: not never, a span like 90d, 12h, 30m or 2w, or an ISO time",
                         "for example --expires 30d, or --expires 2030-01-31") from None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def create(admin: str, agent: str, scope: str = "agent", expires: dt.datetime | None = None,
           note: str | None = None) -> tuple[str, dict[str, Any]]:
    """A new token of AGENT registered (its digest) by scsql.create_agent_token:
    (the token, its row)."""
    from ..core.roles import admin_connection

    token = make(agent)
    with admin_connection(admin) as conn:
        row = conn.execute("select * from scsql.create_agent_token(%s::text, %s::bytea, %s::text, "
                           "%s::timestamptz, %s::text)", (agent, digest(token), scope, expires, note)).fetchone()
    return token, row


def listed(admin: str, agent: str | None = None) -> list[dict[str, Any]]:
    from ..core.roles import admin_connection

    with admin_connection(admin) as conn:
        return conn.execute("select * from scsql.list_agent_tokens(%s::text)", (agent,)).fetchall()


def revoke(admin: str, token_id: int) -> dt.datetime:
    from ..core.roles import admin_connection

    with admin_connection(admin) as conn:
        return conn.execute("select scsql.revoke_agent_token(%s::bigint) as at", (token_id,)).fetchone()["at"]
