"""What ``scsql install claude --server URL`` asks of a team server: the URL
it is given, as the base the endpoints hang from, and which agent a token is
(``/whoami``), through the hook client's own HTTP request, so install and
hooks reach the server the same way."""

from __future__ import annotations

import sys
from typing import Any

from ..core import errors
from ..core.errors import ScsqlError

TIMEOUT = 10.0


def base_url(url: str) -> str:
    """URL without a trailing / or /mcp (the MCP endpoint is named as often as the server)."""
    url = url.strip().rstrip("/")
    if url.endswith("/mcp"):
        url = url[:-4]
    if not url.startswith(("http://", "https://")) or len(url.split("://", 1)[1]) == 0:
        raise ScsqlError(errors.INVALID_ARGUMENT, f"--server {url!r}: not an http:// or https:// URL",
                         "name the team server as scsql serve printed it, e.g. https://scsql.example.com:8765")
    return url


def whoami(server: str, token: str | None, agent: str | None) -> dict[str, Any] | None:
    """The agent TOKEN acts as on SERVER (None without a token). A refusal is
    raised with its code; an unreachable server is an error unless AGENT is
    named, when the configuration can be written without asking."""
    from . import hookclient

    if not token:
        return None
    try:
        return hookclient.http_post(server, "/whoami", b"{}", token.strip(), agent, TIMEOUT)
    except hookclient.Refused as exc:
        text = str(exc)
        code = text.split(" ", 1)[0] if text.startswith("SC") else errors.TOKEN_UNKNOWN
        raise ScsqlError(code, f"the team server {server} refused the token: {text}",
                         "check the token (scsql agent token list on the server)") from None
    except (OSError, TimeoutError, ValueError) as exc:
        if agent is None:
            raise ScsqlError(errors.SERVER_UNREACHABLE, f"the team server {server} cannot be reached: {exc}",
                             "start it (scsql serve), or name the agent with --agent to configure without asking") from None
        print(f"scsql: warning: the team server {server} cannot be reached ({exc}); configuring agent {agent} "
              "without asking it", file=sys.stderr)
        return None
