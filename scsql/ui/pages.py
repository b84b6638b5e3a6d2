"""The viewer's pages: each one or a few stored functions (through
``Source.call``), rendered by a Jinja2 template with every value escaped.

Filters come from the query string (project, agent, since, until, status)
and are passed to the functions as given; the database checks them, and a
bad one gets the error page with its code (400, or 404 for what cannot be
seen), never a traceback. Lists are paged by keyset: a "next" link carries
the cursor of the last row shown.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from typing import Any
from urllib.parse import urlencode

from ..core.errors import ScsqlError
from .http import HERE, http_status
from ..core import errors

log = logging.getLogger("scsql.ui")
FILTERS = ("project", "agent", "since", "until", "status")
PAGE = 50
TIMELINE_PAGE = 200


def _env():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["when"] = _when
    env.filters["usd"] = lambda v: "-" if v is None else f"${float(v):,.4f}"
    env.filters["num"] = lambda v: "-" if v is None else f"{v:,}"
    env.globals["link"] = _link
    return env


def _when(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


def _link(path: str, **query: Any) -> str:
    """PATH with QUERY (empty values left out), every value URL-encoded."""
    q = urlencode([(k, v) for k, v in query.items() if v is not None and v != ""])
    return path + (f"?{q}" if q else "")


class Pages:
    """The page handlers of one viewer."""

    def __init__(self, state: dict):
        self.state = state
        self.source = state["source"]
        self.env = _env()
        self._doctor: tuple[float, Any] | None = None
        self._doctor_lock = threading.Lock()

    def render(self, request, template: str, status: int = 200, **values: Any):
        from starlette.responses import HTMLResponse

        filters = {k: request.query_params.get(k, "") for k in FILTERS}
        html = self.env.get_template(template).render(
            who=self.source, path=request.url.path, filters=filters, **values)
        return HTMLResponse(html, status_code=status)

    def error(self, request, exc: ScsqlError):
        return self.render(request, "error.html", status=http_status(exc), error=exc)

    def call(self, name: str, **args: Any) -> Any:
        return self.source.call(name, args)

    def gather(self, request=None, **calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
        """Each of CALLS (key=(view, args)) in one transaction and one round
        trip, with the filter lists (projects, agents) when REQUEST is given."""
        if request is not None:
            calls = {**calls, **self.filter_calls(request)}
        return self.source.call_many(calls)

    def has(self, name: str) -> bool:
        return name in self.source.views

    def filter_calls(self, request) -> dict[str, tuple[str, dict[str, Any]]]:
        """The lists of the filter form: projects, and agents (of the project chosen)."""
        return {"projects": ("projects", {}), "agents": ("agents", {"project": request.query_params.get("project")})}

    # -- pages ------------------------------------------------------------------

    def sessions(self, request):
        q = request.query_params
        got = self.gather(request, rows=("sessions", {
            "project": q.get("project"), "agent": q.get("agent"), "since": q.get("since"), "until": q.get("until"),
            "status": q.get("status"), "before": q.get("before"), "limit": PAGE}))
        rows = got.pop("rows")
        nxt = rows[-1]["cursor"] if len(rows) == PAGE else None
        return self.render(request, "sessions.html", rows=rows, next=nxt, **got)

    def timeline(self, request):
        q = request.query_params
        sid = request.path_params["session"]
        kinds = [k for k in q.getlist("kind") if k] or None
        got = self.gather(head=("sessions", {"session": sid, "limit": 1}), rows=("timeline", {
            "session": sid, "after": q.get("after"), "limit": TIMELINE_PAGE, "kinds": kinds, "status": q.get("status")}))
        head, rows = got["head"], got["rows"]
        if not head:
            raise ScsqlError(errors.VIEWER_NOT_FOUND, f"no session {sid} is visible to you")
        nxt = rows[-1]["cursor"] if len(rows) == TIMELINE_PAGE else None
        live = None
        if nxt is None:  # the last page: new rows appear as they are written
            live = _link("/api/v1/stream/timeline", session=sid, after=rows[-1]["cursor"] if rows else None,
                         status=q.get("status"), kinds=",".join(kinds or []))
        return self.render(request, "timeline.html", s=head[0], rows=rows, next=nxt, live=live, kinds=kinds or [])

    def event(self, request):
        q = request.query_params
        rows = self.call("event", ref=q.get("ref"), project=q.get("project"))
        return self.render(request, "event.html", e=rows[0] if rows else None)

    def source_page(self, request):
        q = request.query_params
        rows = self.call("source", ref=q.get("ref"), project=q.get("project"))
        return self.render(request, "source.html", rows=rows, ref=q.get("ref"))

    def memory(self, request):
        q = request.query_params
        project = q.get("project")
        hits = None
        if q.get("search") and self.has("search"):
            hits = self.call("search", query=q.get("search"), k=20)
        got = self.gather(request, facts=("facts", {"project": project, "query": q.get("facts"), "after": q.get("after"),
                                                    "limit": PAGE}),
                          decisions=("decisions", {"project": project, "limit": 100}),
                          loops=("loops", {"project": project, "limit": 100}))
        facts = got["facts"]
        return self.render(request, "memory.html", next=facts[-1]["cursor"] if len(facts) == PAGE else None, hits=hits,
                           can_search=self.has("search"), request_search=q.get("search") or "", **got)

    def fact(self, request):
        q = request.query_params
        history = self.call("fact_history", key=q.get("key"), project=q.get("project"))
        current = self.call("source", ref=f"fact:{q.get('key')}", project=q.get("project")) if history else []
        return self.render(request, "fact.html", key=q.get("key"), history=history, current=current)

    def coordination(self, request):
        q = request.query_params
        project = q.get("project")
        got = self.gather(request, messages=("messages", {"project": project, "before": q.get("before"), "limit": PAGE}),
                          queue=("queue", {"project": project}),
                          tasks=("tasks", {"project": project, "state": q.get("state"), "role": q.get("role"), "limit": 100}),
                          files=("files", {"project": project}))
        messages = got["messages"]
        return self.render(request, "coordination.html", next=messages[-1]["cursor"] if len(messages) == PAGE else None,
                           **got)

    def audit(self, request):
        q = request.query_params
        project, since, until = q.get("project"), q.get("since"), q.get("until")
        calls = {"chains": ("chains", {"project": project}),
                 "checkpoints": ("checkpoints", {"project": project, "since": since, "until": until, "limit": 20}),
                 "quarantines": ("quarantines", {"project": project, "since": since, "until": until}),
                 "capture": ("capture_counts", {}),
                 "redactions": ("redactions", {"project": project, "since": since or _ago(7), "until": until})}
        for key, view in (("partitions", "partition_status"), ("retirements", "partition_retirements")):
            if self.has(view):
                calls[key] = (view, {})
        if q.get("verify") and self.has("verify"):
            calls["verified"] = ("verify", {"project": project})
        got = {"partitions": None, "retirements": None, "verified": None, **self.gather(request, **calls)}
        return self.render(request, "audit.html", can_verify=self.has("verify"), **got)

    def cost(self, request):
        q = request.query_params
        f = {"project": q.get("project"), "agent": q.get("agent"), "since": q.get("since") or _ago(30),
             "until": q.get("until")}
        got = self.gather(request, **{g: ("cost", {"group": g, "limit": 50 if g == "session" else 500, **f})
                                      for g in ("day", "agent", "model", "session")})
        tables = {g: got.pop(g) for g in ("day", "agent", "model", "session")}
        return self.render(request, "cost.html", tables=tables, chart=_link("/api/v1/cost", group="day", **f), **got)

    def health(self, request):
        calls = {"metrics": ("metrics", {}), "st": ("status", {}), "capture": ("capture_counts", {})}
        if self.has("memory_status"):
            calls["memory"] = ("memory_status", {})
        got = {"memory": None, **self.gather(**calls)}
        return self.render(request, "health.html", doctor=self.doctor(), **got)

    def doctor(self) -> Any:
        """scsql doctor's findings, for the auditor's viewer (it holds the
        administrator's login), computed at most once a minute; None for an agent's."""
        if self.source.admin_conninfo is None:
            return None
        with self._doctor_lock:
            if self._doctor is None or time.monotonic() - self._doctor[0] > 60:
                from ..core.config import Settings
                from ..ops import doctor

                settings = self.state.get("settings") or Settings.load(None)
                probe = doctor.Probe(settings, lambda: self.source.admin_conninfo, None)
                try:
                    self._doctor = (time.monotonic(), doctor.run(probe))
                finally:
                    probe.close()
            return self._doctor[1]


def unexpected(exc: Exception) -> ScsqlError:
    """What a person is told of a failure scsql did not foresee (the log has the traceback)."""
    from ..core import errors

    return ScsqlError(errors.DATABASE_ERROR, f"the viewer failed: {type(exc).__name__}",
                      "the viewer's log has the details; report it if it persists")


def _ago(days: int) -> str:
    return (dt.datetime.now(dt.UTC) - dt.timedelta(days=days)).strftime("%Y-%m-%dT00:00:00Z")


async def not_found(request, exc):
    from starlette.responses import Response

    err = ScsqlError(errors.VIEWER_PATH_UNKNOWN, f"no page or API path {request.url.path}", "/api/v1/openapi.json lists the API")
    if request.url.path.startswith("/api/"):
        import json

        return Response(json.dumps({"error": err.as_dict()}), status_code=404, media_type="application/json")
    return request.app.state.viewer["pages"].error(request, err)


def routes(state: dict) -> list:
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import RedirectResponse
    from starlette.routing import Route

    pages = state["pages"] = Pages(state)

    def page(method):
        async def handler(request):
            try:
                return await run_in_threadpool(method, request)
            except ScsqlError as exc:
                return pages.error(request, exc)
            except Exception as exc:  # a page never shows a traceback: the log has it
                log.exception("page %s failed", request.url.path)
                return pages.error(request, unexpected(exc))
        return handler

    async def home(request):
        return RedirectResponse("/sessions", status_code=303)

    return [Route("/", home), Route("/sessions", page(pages.sessions)),
            Route("/sessions/{session:int}", page(pages.timeline)), Route("/event", page(pages.event)),
            Route("/source", page(pages.source_page)), Route("/memory", page(pages.memory)),
            Route("/memory/fact", page(pages.fact)), Route("/coordination", page(pages.coordination)),
            Route("/audit", page(pages.audit)), Route("/cost", page(pages.cost)), Route("/health", page(pages.health))]
