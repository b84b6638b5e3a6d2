"""The team server's hook endpoints: Claude Code's events from a remote
agent's hook client (``scsql/hooks/hookclient.py`` with ``--server``),
answered as the agent's own hook server answers them over its unix socket.

``POST /hooks/event`` takes ``{"event": {...}, "budget": seconds}`` and
answers ``{"output", "exit", "stderr", "degraded"}`` (the socket protocol);
``POST /hooks/replay`` takes ``{"events": [...]}`` (what the client spooled
while the server was unreachable, in order) and answers ``{"written": n,
"kept": [...]}``: the events not even a stub of could be stored, for the
client to keep. A capture the database refuses is stored as a stub at once
(``handlers.capture_stubs``), as a replay of the local spool would; when
the database is unreachable the answer is 503 (SC030) and the client
spools the event.

An event from another machine names paths of that machine: the server
reads none of them. Its transcript_path (and a ConfigChange's file_path) is
dropped, and the event is marked ``scsql_remote`` (the handlers then ask no
git of its cwd; the client sends the branch and commit it read itself).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio

from ..core import errors
from ..core.errors import ScsqlError
from .app import Identity, Registry, refuse, respond, unexpected

log = logging.getLogger("scsql.serve")

MAX_REPLAY_EVENTS = 1000
# Fields the server sets itself, or that name a file of the agent's machine.
DROPPED = ("transcript_path", "scsql_replaced", "scsql_remote")


def _invalid(message: str) -> ScsqlError:
    return ScsqlError(errors.HOOK_REQUEST_INVALID, message,
                      "the hook client sends {\"event\": {...}} to /hooks/event and "
                      "{\"events\": [...]} to /hooks/replay")


def remote_event(event: dict[str, Any]) -> dict[str, Any]:
    """EVENT as the server handles it: no path of the agent's machine is read."""
    out = {k: v for k, v in event.items() if k not in DROPPED}
    if out.get("hook_event_name") == "ConfigChange":
        out.pop("file_path", None)
    out["scsql_remote"] = True
    return out


def _reply(output: Any = None, exit: int = 0, stderr: str | None = None, degraded: str | None = None) -> dict:
    return {"output": output, "exit": exit, "stderr": stderr, "degraded": degraded}


class HookEndpoints:
    def __init__(self, registry: Registry):
        from ..hooks import daemon

        self.registry = registry
        self.handlers = daemon.load_handlers()
        self.is_down = daemon.is_down

    async def answer(self, path: str, identity: Identity, body: bytes, send) -> None:
        try:
            request = json.loads(body)
            if not isinstance(request, dict):
                raise ValueError("not an object")
        except (ValueError, RecursionError) as exc:
            await refuse(send, 400, _invalid(f"the request is not a JSON object ({exc})"))
            return
        work = self.event if path == "/hooks/event" else self.replay
        try:
            reply = await anyio.to_thread.run_sync(work, identity.agent, request)
        except ScsqlError as err:
            status = 503 if self.is_down(err) else 400 if err.code == errors.HOOK_REQUEST_INVALID else 500
            await refuse(send, status, err)
            return
        except Exception as exc:  # noqa: BLE001 - every request is answered with a code
            await refuse(send, 503 if self.is_down(exc) else 500, unexpected(exc))
            return
        await respond(send, 200, json.dumps(reply, default=str).encode())

    def event(self, name: str, request: dict) -> dict:
        """One live event, answered (in a worker thread)."""
        from ..hooks import events

        event = request.get("event")
        if not isinstance(event, dict) or events.BY_NAME.get(event.get("hook_event_name")) is None:
            raise _invalid("the request holds no event of a known hook (hook_event_name)")
        row = events.BY_NAME[event["hook_event_name"]]
        agent = self.registry.served(name).agent
        event = remote_event(event)
        if row.capture_only:
            self._capture(agent, [event])
            return _reply()
        try:
            result = self.handlers.handle(agent, event)
        except Exception as exc:  # noqa: BLE001
            if self.is_down(exc):
                raise
            log.warning("%s of agent %s: %s", row.name, name, exc)
            return _reply(degraded=f"its {row.name} handler failed: {str(exc).splitlines()[0] if str(exc) else exc!r}")
        if result is None:
            return _reply()
        if getattr(result, "spool", None):
            self._capture(agent, list(result.spool))
        return _reply(result.output, result.exit if result.exit in (0, 2) else 0, result.stderr)

    def replay(self, name: str, request: dict) -> dict:
        """Spooled events, in order: {"written": n, "kept": [events not even stubbed]}."""
        given = request.get("events")
        if not isinstance(given, list) or not all(isinstance(e, dict) for e in given) \
                or len(given) > MAX_REPLAY_EVENTS:
            raise _invalid(f"events must be a list of at most {MAX_REPLAY_EVENTS} event objects")
        agent = self.registry.served(name).agent
        evs = [remote_event(e) for e in given]
        try:
            self.handlers.capture(agent, evs)
            return {"written": len(evs), "kept": []}
        except Exception as exc:  # noqa: BLE001
            if self.is_down(exc):
                raise
        written, kept = 0, []
        for e in evs:  # a refused event in the batch: one by one, a stub at worst
            try:
                self._capture(agent, [e])
                written += 1
            except Exception as exc:  # noqa: BLE001
                if self.is_down(exc):
                    raise
                kept.append({k: v for k, v in e.items() if k != "scsql_remote"})
        return {"written": written, "kept": kept}

    def _capture(self, agent, evs: list[dict]) -> None:
        """Capture EVS; what the database refuses is stored as stubs (raises when even that fails)."""
        try:
            self.handlers.capture(agent, evs)
        except Exception as exc:  # noqa: BLE001
            if self.is_down(exc):
                raise
            log.info("stored %d refused event(s) of agent %s as stubs: %s", len(evs), agent.name, exc)
            self.handlers.capture_stubs(agent, evs, exc)
