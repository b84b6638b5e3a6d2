"""``/api/v1``: the JSON behind every page, one path per stored function the
identity may call (``catalogue.py``), described by ``/api/v1/openapi.json``.

``GET /api/v1/NAME?arg=value...`` calls scsql.viewer_NAME (or status,
metrics, capture_counts, partition_status, partition_retirements,
memory_status, model_prices, search) with those arguments, cast by the
database to the function's types; an array argument is given repeated or
comma-separated. It answers the rows as a JSON array (an object for a
function of one value), or ``{"error": {code, name, message, hint}}`` with a
4xx status: 400 for a bad argument, 401 without the token, 403 for what the
identity may not do, 404 for what it cannot see or a path that does not
exist; never a traceback. ``GET /api/v1/stream/timeline?session=ID`` streams
a session's new rows as server-sent events.
"""

from __future__ import annotations

import json
from typing import Any

from .. import __version__
from ..core.errors import ScsqlError
from .http import http_status, json_body

API = "/api/v1"


def error_response(exc: ScsqlError):
    from starlette.responses import Response

    return Response(json.dumps({"error": exc.as_dict()}), status_code=http_status(exc), media_type="application/json")


def call_args(request, view) -> dict[str, Any]:
    """The query string as a view's arguments (the token left out; arrays from repeated or comma-separated values)."""
    args: dict[str, Any] = {}
    for key in request.query_params:
        if key == "token":
            continue
        values = request.query_params.getlist(key)
        p = view.param(key) if view is not None else None
        if p is not None and p.pg_type.endswith("[]"):
            args[key] = [x for v in values for x in v.split(",") if x]
        else:
            args[key] = values[-1]
    return args


def routes(state: dict) -> list:
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    source = state["source"]

    async def view(request):
        name = request.path_params["name"]
        try:
            result = await run_in_threadpool(source.call, name, call_args(request, source.views.get(name)))
        except ScsqlError as exc:
            return error_response(exc)
        except Exception as exc:  # never a traceback: the log has it
            from .pages import log, unexpected

            log.exception("API %s failed", request.url.path)
            return error_response(unexpected(exc))
        return Response(json_body(result), media_type="application/json")

    async def openapi(request):
        return Response(json_body(describe(source)), media_type="application/json")

    async def stream(request):
        try:
            args = call_args(request, source.views.get("timeline"))
            first = await run_in_threadpool(source.call, "timeline", {**args, "limit": 1})  # a visible session?
        except ScsqlError as exc:
            return error_response(exc)
        return StreamingResponse(live(request, state, args, bool(first)), media_type="text/event-stream",
                                 headers={"x-accel-buffering": "no"})

    return [Route(f"{API}/openapi.json", openapi), Route(f"{API}/stream/timeline", stream),
            Route(API + "/{name}", view)]


async def live(request, state: dict, args: dict, _any: bool):
    """New rows of a session's timeline as server-sent events ("row", JSON),
    after the cursor given (``after``), woken by NOTIFY, polling every
    ``poll`` seconds. Each round reads on from the newest row sent, then
    again from two minutes before it (a row may be written after a later one
    happened); each row is sent once."""
    from starlette.concurrency import run_in_threadpool

    source, wakeups, poll = state["source"], state["wakeups"], state["poll"]
    seen: set[str] = set()
    newest = args.get("after")

    def fetch(after: str | None) -> list:
        return source.call("timeline", {**args, "after": after, "limit": 500})

    yield "retry: 2000\n\n"
    while not await request.is_disconnected():
        try:
            batch, after = [], newest
            while True:
                rows = await run_in_threadpool(fetch, after)
                batch += rows
                if len(rows) < 500:
                    break
                after = rows[-1]["cursor"]
            if newest is not None:
                batch += await run_in_threadpool(fetch, _lookback(newest))
        except ScsqlError as exc:
            yield f"event: failure\ndata: {json.dumps(exc.as_dict())}\n\n"
            return
        for r in batch:
            if r["ref"] in seen:
                continue
            seen.add(r["ref"])
            if newest is None or _key(r["cursor"]) > _key(newest):
                newest = r["cursor"]
            yield f"id: {r['cursor']}\nevent: row\ndata: {json_body(r).decode()}\n\n"
        woken = await wakeups.wait(poll)
        yield f": {'notified' if woken else 'polled'}\n\n"


def _key(cursor: str) -> tuple[int, int, int]:
    a, b, c = cursor.split(".")
    return int(a), int(b), int(c)


def _lookback(cursor: str | None) -> str | None:
    if cursor is None:
        return None
    micros, _, _ = _key(cursor)
    return f"{micros - 120_000_000}.0.0"


def describe(source) -> dict:
    """The OpenAPI 3.1 description of what this identity may read."""
    error = {"type": "object", "properties": {"error": {"type": "object", "properties": {
        "code": {"type": "string", "description": "SCnnn (scsql errors lists them) or a SQLSTATE"},
        "name": {"type": ["string", "null"]}, "message": {"type": "string"}, "hint": {"type": ["string", "null"]}}}}}
    paths = {f"{API}/{name}": v.schema() for name, v in sorted(source.views.items())}
    paths[f"{API}/stream/timeline"] = {"get": {
        "operationId": "stream_timeline", "summary": "A session's new timeline rows as server-sent events (event: row, data: a timeline row).",
        "parameters": [{"name": "session", "in": "query", "required": True, "schema": {"type": "integer"}},
                       {"name": "after", "in": "query", "required": False, "schema": {"type": "string"}}],
        "responses": {"200": {"description": "text/event-stream"}}}}
    return {"openapi": "3.1.0",
            "info": {"title": "scsql viewer API", "version": f"v1 (scsql {__version__})",
                     "description": f"Read-only, as {source.kind} {source.name}: row-level security decides every row."},
            "servers": [{"url": "/"}],
            "components": {"securitySchemes": {"token": {"type": "http", "scheme": "bearer"}},
                           "responses": {"Error": {"description": "an error with a stable code",
                                                   "content": {"application/json": {"schema": error}}}}},
            "security": [{"token": []}], "paths": paths}
