"""The team server's HTTP application: the MCP tools over the SDK's
streamable HTTP transport at ``/mcp``, Claude Code's hook events at
``/hooks/event`` and ``/hooks/replay``, ``/whoami``, and ``/healthz``.

Every request but ``/healthz`` passes the gate first (:class:`Gate`), in
this order: the size its Content-Length declares (SC287), the failures its
address had (SC286), its bearer token (SC280), an agent it names itself
(the X-Scsql-Agent header: SC285 unless it is the token's), the token's
rate (SC286), then the database's word on the token, asked as the agent the
token names (scsql_caller.use_token: SC281 unknown, SC282 revoked, SC283
expired), then the token's scope (SC284) and the body, read whole up to the
limit (SC287). A refusal is a JSON-RPC error whose message starts with the
SC code and whose data is the error (code, name, message, hint). Nothing a
request carries but its token decides the agent: the token's agent is put
in the request's scope, where the tools and hook handlers find it.

Each agent the server acts as is one :class:`~scsql.core.db.Agent` with its
private key loaded from the server's keystore (its rows are signed here),
its tools those of ``scsql mcp`` (:class:`scsql.mcp_server.Tools`, from the
agent's own grants). Its calls run on a pool shared by every agent that
logs in the same way (scsql_app on one user's machine; each agent's own
login on a shared server), each transaction under SET LOCAL ROLE of the
agent, so row-level security holds as over stdio.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types

from .. import __version__
from ..core import errors
from ..core.db import Agent, Database
from ..core.errors import ScsqlError
from . import limits, tokens

if TYPE_CHECKING:
    from ..core.registry import Catalogue

log = logging.getLogger("scsql.serve")

AGENT_HEADER = "x-scsql-agent"
JSONRPC_REFUSED = -32001  # the JSON-RPC error code of every refusal; its SC code is in message and data
SCOPES = {"/mcp": ("agent", "tools"), "/hooks/event": ("agent", "hooks"), "/hooks/replay": ("agent", "hooks"),
          "/whoami": ("agent", "tools", "hooks")}
# What a failed token check says to the client: its own code when it is about
# the token; the same SC281 whether the agent is unknown, revoked as a login or
# not served here (the server's log says which), so no agent name is confirmed.
TOKEN_CODES = {errors.TOKEN_UNKNOWN, errors.TOKEN_REVOKED, errors.TOKEN_EXPIRED, errors.AGENT_REVOKED}
UNAVAILABLE = {errors.SERVER_UNREACHABLE, errors.AGENT_CONNECTION_LIMIT, errors.EMBEDDED_HELD, errors.EMBEDDED_BUSY,
               errors.EMBEDDED_NOT_RUNNING}
NO_SUCH_TOKEN = errors.TOKEN_UNKNOWN


@dataclass(frozen=True)
class Limits:
    rate: float = 20.0                      # requests a second per token, on average
    burst: float = 100.0                    # requests at once per token
    fail_rate: float = 1.0                  # authentication failures a second per address, on average
    fail_burst: float = 20.0
    max_request_bytes: int = 10 * 1024 * 1024  # hook events reach 8 MiB (hookclient.MAX_EVENT_BYTES)


@dataclass(frozen=True)
class Identity:
    """Who a request acts as: decided by its token, and nothing else."""
    agent: str
    token_id: int
    scope: str


class Served:
    """One agent the server acts as: its Agent (key loaded) and its tools
    (those of its catalogue, ``ctx.api(agent)``)."""

    def __init__(self, agent: Agent, api: Callable[[Agent], Catalogue], all_tools: bool):
        from ..mcp_server import Tools

        self.agent = agent
        self.tools = Tools(api(agent), all_tools)


class Registry:
    """The agents the server acts as, each made when its first token is
    checked, on pools shared by the agents that log in the same way."""

    def __init__(self, conninfo_of: Callable[[str], str], keystore, api: Callable[[Agent], Catalogue], *,
                 pool_size: int = 16, all_tools: bool = False):
        self.conninfo_of = conninfo_of  # agent -> the conninfo its processes use
        self.keystore = keystore
        self.api = api  # agent -> the functions it may call (ctx.api)
        self.pool_size = pool_size
        self.all_tools = all_tools
        self._lock = threading.Lock()
        self._dbs: dict[str, Database] = {}
        self._checkers: dict[str, Agent] = {}
        self._served: dict[str, Served] = {}
        self._making: dict[str, threading.Lock] = {}

    def _database(self, conninfo: str) -> Database:
        with self._lock:
            db = self._dbs.get(conninfo)
        if db is not None:
            return db
        shared = conninfo == self.conninfo_of("")
        made = Database(conninfo, max_size=self.pool_size if shared else max(2, self.pool_size // 4),
                        application_name="scsql:serve").open()
        made.refuse_privileged_login()
        with self._lock:
            db = self._dbs.setdefault(conninfo, made)
        if db is not made:
            made.close()
        return db

    def checker(self, name: str) -> Agent:
        """AGENT without its key: what a token is checked as."""
        with self._lock:
            agent = self._checkers.get(name)
        if agent is None:
            agent = Agent(self._database(self.conninfo_of(name)), name)
            with self._lock:
                agent = self._checkers.setdefault(name, agent)
        return agent

    def check(self, token: str) -> Identity:
        """The token's identity, as the database says (SC281/SC282/SC283)."""
        name = tokens.agent_of(token)
        if not self.keystore.exists(name):
            log.warning("refused a token of agent %s: this server holds no key of it (SC290)", name)
            raise ScsqlError(NO_SUCH_TOKEN, "the bearer token is not valid on this server")
        with self.checker(name).transaction() as conn:
            row = conn.execute("select * from scsql_caller.use_token(%s::bytea)", (tokens.digest(token),)).fetchone()
        return Identity(name, row["token_id"], row["scope"])

    def served(self, name: str) -> Served:
        with self._lock:
            found = self._served.get(name)
            making = found or self._making.setdefault(name, threading.Lock())
        if isinstance(found, Served):
            return found
        with making:  # one agent made once; other agents are made meanwhile
            with self._lock:
                found = self._served.get(name)
            if found is None:
                agent = Agent(self.checker(name).db, name, self.keystore.load(name))
                found = Served(agent, self.api, self.all_tools)
                with self._lock:
                    self._served[name] = found
        return found

    def close(self) -> None:
        with self._lock:
            dbs, self._dbs = list(self._dbs.values()), {}
        for db in dbs:
            db.close()


# -- answers ----------------------------------------------------------------------


def refusal_body(err: ScsqlError, rid: Any = None) -> bytes:
    """A refusal as a JSON-RPC error: the SC code leads the message; data is the error."""
    return json.dumps({"jsonrpc": "2.0", "id": rid, "error": {
        "code": JSONRPC_REFUSED, "message": str(err), "data": err.as_dict()}}).encode()


async def respond(send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] = ()) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


async def refuse(send, status: int, err: ScsqlError, headers: list[tuple[bytes, bytes]] = ()) -> None:
    log.info("refused (%s): %s", status, err)
    await respond(send, status, refusal_body(err), list(headers))


def _header(scope: dict, name: bytes) -> str | None:
    for k, v in scope.get("headers", ()):
        if k == name:
            return v.decode("latin-1")
    return None


# -- the gate ---------------------------------------------------------------------


class Gate:
    """The ASGI application: every request checked (see the module's
    docstring), then handed to the MCP transport or the hook endpoints."""

    def __init__(self, registry: Registry, mcp_app, hooks, limits_: Limits = Limits(), threads: int = 32):
        self.registry = registry
        self.mcp_app = mcp_app
        self.hooks = hooks
        self.limits = limits_
        self.threads = threads
        self.per_token = limits.Buckets(limits_.rate, limits_.burst)
        self.failures = limits.Buckets(limits_.fail_rate, limits_.fail_burst)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            anyio.to_thread.current_default_thread_limiter().total_tokens = self.threads
            await self.mcp_app(scope, receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope["path"].rstrip("/") or "/"
        if path == "/healthz":
            await respond(send, 200, b'{"ok": true}')
            return
        if path not in SCOPES:
            await refuse(send, 404, ScsqlError(errors.INVALID_ARGUMENT, f"no endpoint {path}",
                                               "the MCP endpoint is /mcp"))
            return
        admitted = await self._admit(scope, send, path)
        if admitted is None:
            return
        identity, body_limit = admitted
        try:
            body = await limits.read_body(receive, body_limit)
        except limits.TooLarge:
            await refuse(send, 413, _too_large(body_limit))
            return
        scope["scsql.identity"] = identity
        _mark_user(scope, identity)
        if path == "/mcp":
            await self.mcp_app(scope, limits.replaying(body, receive), send)
        elif path == "/whoami":
            await self._whoami(identity, send)
        else:
            await self.hooks.answer(path, identity, body, send)

    async def _whoami(self, identity: Identity, send) -> None:
        """The token's agent as the database knows it, and the token's id and scope."""
        def read() -> dict:
            from ..core import keys

            agent = self.registry.served(identity.agent).agent
            row = agent.whoami()
            return {**row, "token_id": identity.token_id, "scope": identity.scope,
                    "key_matches": keys.public_bytes(agent.key).hex() == row["public_key"]}
        try:
            found = await anyio.to_thread.run_sync(read)
        except Exception as exc:  # noqa: BLE001 - every refusal carries a code
            err = unexpected(exc)
            await refuse(send, 503 if err.code in UNAVAILABLE else 500, err)
            return
        await respond(send, 200, json.dumps(found, default=str).encode())

    async def _admit(self, scope, send, path: str) -> tuple[Identity, int] | None:
        """The request's identity, or None once it was refused."""
        size = _header(scope, b"content-length")
        limit = self.limits.max_request_bytes
        if size is not None and size.isdigit() and int(size) > limit:
            await refuse(send, 413, _too_large(limit))
            return None
        address = (scope.get("client") or ("?",))[0]
        wait = self.failures.wait(address)
        if wait:
            await self._limited(send, wait, f"address {address} failed to authenticate too often")
            return None
        token = _bearer(scope)
        if token is None:
            self.failures.take(address)
            await refuse(send, 401, ScsqlError(errors.TOKEN_REQUIRED, "the request carries no bearer token",
                                               "send Authorization: Bearer <token>, a token scsql agent token "
                                               "create printed"), [(b"www-authenticate", b'Bearer realm="scsql"')])
            return None
        try:
            named = tokens.agent_of(token)
        except ScsqlError as err:
            self.failures.take(address)
            await refuse(send, 401, err, [(b"www-authenticate", b'Bearer error="invalid_token"')])
            return None
        claimed = _header(scope, AGENT_HEADER.encode())
        if claimed is not None and claimed != named:
            await refuse(send, 403, ScsqlError(errors.AGENT_NOT_THE_TOKENS,
                                               f"the request names agent {claimed!r}, but its token is "
                                               f"agent {named!r}'s",
                                               "the token alone decides the agent"))
            return None
        wait = self.per_token.take(tokens.digest(token))
        if wait:
            await self._limited(send, wait, f"agent {named}'s token made more requests than its rate allows")
            return None
        identity = await self._checked(token, address, send)
        if identity is None:
            return None
        if identity.scope not in SCOPES[path]:
            await refuse(send, 403, ScsqlError(errors.TOKEN_SCOPE, f"a {identity.scope} token does not reach {path}",
                                               "an agent token reaches the tools and the hooks"))
            return None
        return identity, limit

    async def _checked(self, token: str, address: str, send) -> Identity | None:
        try:
            return await anyio.to_thread.run_sync(self.registry.check, token)
        except Exception as exc:  # noqa: BLE001 - every refusal carries a code
            err = unexpected(exc)
            if err is not exc:
                await refuse(send, 500, err)
                return None
            if err.code in UNAVAILABLE:
                await refuse(send, 503, err)
                return None
            if err.code not in TOKEN_CODES:
                log.warning("refused a token: %s", err)
                err = ScsqlError(NO_SUCH_TOKEN, "the bearer token is not valid on this server",
                                 "an administrator makes one with scsql agent token create NAME")
            self.failures.take(address)
            await refuse(send, 401, err, [(b"www-authenticate", b'Bearer error="invalid_token"')])
            return None

    async def _limited(self, send, wait: float, why: str) -> None:
        seconds = max(1, int(wait + 0.999))
        await refuse(send, 429, ScsqlError(errors.REQUEST_RATE_LIMITED, why, f"retry after {seconds} s"),
                     [(b"retry-after", str(seconds).encode())])


def _too_large(limit: int) -> ScsqlError:
    return ScsqlError(errors.REQUEST_TOO_LARGE, f"the request body is larger than {limit} bytes",
                      "send less at a time (the server's --max-request-bytes)")


def _bearer(scope) -> str | None:
    value = _header(scope, b"authorization")
    if not value or not value[:7].lower() == "bearer ":
        return None
    return value[7:].strip() or None


def _mark_user(scope, identity: Identity) -> None:
    """The SDK's notion of the caller: an MCP session opened with one token
    answers only requests with that token."""
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken

    scope["user"] = AuthenticatedUser(AccessToken(token=f"token {identity.token_id}", client_id=identity.agent,
                                                  scopes=[identity.scope], subject=str(identity.token_id)))


# -- the MCP side -------------------------------------------------------------------


INSTRUCTIONS_SUFFIX = "\nThis server is shared by a team; your bearer token decides which agent you are."


def mcp_server(registry: Registry):
    """The SDK's low-level server whose tools are those of the request's agent."""
    from mcp.server.lowlevel import Server

    from ..mcp_server import INSTRUCTIONS

    def served(ctx) -> Served:
        identity = getattr(ctx.request, "scope", {}).get("scsql.identity") if ctx.request is not None else None
        if identity is None:  # not through the gate: never reached over HTTP
            raise ScsqlError(errors.TOKEN_REQUIRED, "the request carries no checked bearer token")
        return registry.served(identity.agent)

    async def list_tools(ctx, params) -> types.ListToolsResult:
        found = await anyio.to_thread.run_sync(served, ctx)
        return await found.tools.list_tools(ctx, params)

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            found = await anyio.to_thread.run_sync(served, ctx)
        except ScsqlError as err:
            return types.CallToolResult(content=[types.TextContent(type="text", text=str(err))], is_error=True)
        return await found.tools.call_tool(ctx, params)

    return Server("scsql", version=__version__, instructions=INSTRUCTIONS + INSTRUCTIONS_SUFFIX,
                  on_list_tools=list_tools, on_call_tool=call_tool)


def build(registry: Registry, hooks: Any, limits_: Limits = Limits(), host: str = "127.0.0.1",
          threads: int = 32) -> Gate:
    """The whole application: the MCP tools of REGISTRY's agents and HOOKS,
    the hook endpoints (``hooks.HookEndpoints``), behind the gate."""
    server = mcp_server(registry)
    mcp_app = server.streamable_http_app(json_response=True, host=host,
                                         max_request_body_size=limits_.max_request_bytes + 1)
    return Gate(registry, mcp_app, hooks, limits_, threads)


def unexpected(exc: BaseException) -> ScsqlError:
    if isinstance(exc, ScsqlError):
        return exc
    log.exception("request failed unexpectedly")
    return ScsqlError(errors.DATABASE_ERROR, f"the request failed unexpectedly ({type(exc).__name__})",
                      "nothing was stored; retry, and report it if it persists")
