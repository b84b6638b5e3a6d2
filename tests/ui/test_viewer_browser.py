"""scsql ui in a real browser (Debian's chromium, driven by Playwright), over
a real server holding a recorded Claude Code session replayed through the
hook commands ``scsql install claude`` wrote (its transcript carries the
model's token usage), a prompt holding script, an image with onerror and a
javascript: link, many sessions, and another project's session.

Checked as a person would see it: every page renders with no console error
(a CSP violation is one); the timeline shows the session's events in order
with their status; filters and pagination work; the search box returns cited
hits; the agent of project A sees nothing of project B; the XSS cases are
text; a browser without the token is refused; an open timeline shows a row
written after it opened. Screenshots of each page are kept in the test's
temporary directory. One browser serves the module.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scsql.api import Api
from scsql.core.keys import Keystore
from scsql.ui.source import agent_source

from ..conftest import SESSION, ScsqlDb
from ..helpers import rows, serial, wait_for
from ..hook_transport_helpers import HookEnv
from ..recorded_session import record
from ..viewer_helpers import RunningViewer

CHROMIUM = os.environ.get("SCSQL_TEST_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
ROOT = Path(__file__).resolve().parents[2]
XSS_PROMPT = 'look at <script>window.__xss = 1</script> and <img src=x onerror="window.__xss = 2"> and <a href="javascript:window.__xss=3">this</a>'

try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - CI installs it (.ci/run)
    sync_playwright = None

MISSING = ("Playwright for Python is not installed (pip install playwright)" if sync_playwright is None
           else f"no chromium at {CHROMIUM} (apt-get install chromium)" if not os.path.exists(CHROMIUM) else None)
if MISSING and os.environ.get("SCSQL_REQUIRE_BROWSER"):  # CI (.ci/run) installs both: there a skip is a failure
    raise RuntimeError(f"SCSQL_REQUIRE_BROWSER is set, but {MISSING}")
pytestmark = [pytest.mark.browser, pytest.mark.skipif(MISSING is not None, reason=MISSING or "")]


@pytest.fixture(scope="module")
def mdb(server, template, tmp_path_factory):
    name = f"{SESSION}_{next(serial)}"
    janitor = server.clone(name, template)
    db = ScsqlDb(server, name, Keystore(tmp_path_factory.mktemp("keys")))
    yield db
    db.close()
    janitor.drop()


def _with_usage(transcript: Path, model: str) -> None:
    """The recorded transcript as Claude Code writes it while the session is replayed now: each assistant
    message with its id, model and usage."""
    import datetime as dt

    start = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=3)
    lines = [json.loads(x) for x in transcript.read_text().splitlines()]
    for n, line in enumerate(lines):
        line["timestamp"] = (start + dt.timedelta(milliseconds=100 * n)).isoformat().replace("+00:00", "Z")
        if line["type"] == "assistant":
            line["message"].update(id=f"msg_{n:04d}", model=model, usage={
                "input_tokens": 40 + n, "output_tokens": 120, "cache_creation_input_tokens": 300,
                "cache_read_input_tokens": 2000})
    transcript.write_text("".join(json.dumps(x) + "\n" for x in lines))


@pytest.fixture(scope="module")
def world(mdb, tmp_path_factory):
    """Project A: a recorded session through the installed hooks (and 55 more sessions); project B: one session."""
    tmp = tmp_path_factory.mktemp("hooked")
    repo, home, user = tmp / "repo", tmp / "data", tmp / "user"
    (repo / "src").mkdir(parents=True)
    user.mkdir()
    project = mdb.project()
    name = f"{SESSION}_ui{next(serial)}"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(user), "PYTHONPATH": str(ROOT),
           "SCSQL_DSN": mdb.admin, "SCSQL_AGENT_DSN": mdb.app, "SCSQL_KEYSTORE": str(mdb.keystore.directory),
           "SCSQL_DATA_DIR": str(home)}
    done = subprocess.run([sys.executable, "-m", "scsql", "install", "claude", "--agent", name, "--project", project,
                           "--project-dir", str(repo), "--scope", "local"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    hooks = json.loads((repo / ".claude" / "settings.local.json").read_text())["hooks"]
    rec = record(tmp, repo / "src" / "owned.py")
    _with_usage(rec.transcript, "claude-sonnet-4-5")
    end = rec.events.pop()  # SessionEnd, after the XSS prompt
    rec.events += [{**rec.events[1], "prompt": XSS_PROMPT}, end]
    fire = Firing(hooks, env)
    for event in rec.events:
        fire(event)
    agent = mdb.agent("uia", project)  # another agent of A: many sessions
    api = Api(agent)
    for i in range(55):
        api.call("start_session", client="script", title=f"batch session {i}")
    other = mdb.project()
    b = mdb.agent("uib", other)
    bapi = Api(b)
    bsid = bapi.call("start_session", client="claude-code", title="SECRET-OF-B session")["session_id"]
    bapi.call("record_tool_call", tool="Bash", session_id=bsid, input_preview="SECRET-OF-B command")
    reader = mdb.agent("uir", project)
    wait_for(lambda: rows(reader, "select 1 from scsql.prompts where text like 'look at%%'"), 30)
    wait_for(lambda: rows(reader, "select 1 from scsql.model_calls"), 30)
    sid = rows(reader, "select session_id from scsql.sessions where author_id = "
                       "(select agent_id from scsql.agents where name = %s)", name)[0]["session_id"]
    try:
        yield {"project": project, "agent": name, "session": sid, "rec": rec, "fire": fire, "other": other,
               "b_session": bsid, "b_agent": b.name, "reader": reader}
    finally:
        HookEnv(str(home), name, env, mdb.admin, None).stop_server()


class Firing:
    """Runs an event through every installed command that matches it, as Claude Code does."""

    def __init__(self, hooks: dict, env: dict):
        self.hooks, self.env = hooks, env

    def __call__(self, event: dict) -> None:
        subject = event.get("tool_name") or event.get("source") or ""
        for group in self.hooks.get(event["hook_event_name"], []):
            matcher = group.get("matcher") or "*"
            if matcher != "*" and not re.fullmatch(matcher, subject):
                continue
            for h in group["hooks"]:
                done = subprocess.run(h["command"], shell=True, input=json.dumps(event), capture_output=True, text=True,
                                      env={**self.env, "CLAUDE_PROJECT_DIR": event["cwd"]}, timeout=60)
                assert done.returncode == 0, (event["hook_event_name"], done.stderr)


@pytest.fixture(scope="module")
def viewer(mdb, world):
    running = RunningViewer(agent_source(mdb.app, world["agent"]), poll=5.0)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def screens(tmp_path_factory):
    return tmp_path_factory.mktemp("screenshots")


class Page:
    """A browser tab that opened the viewer's printed URL, recording console errors and dialogs."""

    def __init__(self, browser, viewer, screens: Path):
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.viewer, self.screens = viewer, screens
        response = self.page.goto(f"{viewer.base}/?token={viewer.token}")
        assert response.ok and self.page.url.endswith("/sessions"), self.page.url  # the token left the address

    def open(self, path: str, shot: str | None = None):
        response = self.page.goto(self.viewer.base + path)
        self.page.wait_for_load_state("networkidle") if "/sessions/" not in path else self.page.wait_for_load_state("load")
        if shot:
            self.page.screenshot(path=str(self.screens / f"{shot}.png"), full_page=True)
        return response

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def tab(browser, viewer, screens):
    t = Page(browser, viewer, screens)
    yield t
    t.close()


def test_every_page_renders_without_a_console_error(tab, world):
    pages = {"sessions": "/sessions", "timeline": f"/sessions/{world['session']}", "memory": "/memory",
             "memory-search": "/memory?search=exponential+backoff", "coordination": "/coordination",
             "audit": "/audit", "cost": "/cost", "health": "/health",
             "event": f"/event?ref=prompt:1&project={world['project']}", "fact-history": "/memory/fact?key=none"}
    for shot, path in pages.items():
        response = tab.open(path, shot)
        assert response.status == 200, (path, response.status)
        assert tab.page.locator("main h1").count() >= 1, path
        if shot == "cost":
            tab.page.wait_for_selector("#chart-cost[data-drawn='1']", state="attached", timeout=10000)  # uPlot drew it
    assert tab.errors == [] and tab.dialogs == []
    print(f"screenshots: {tab.screens}")


def test_the_timeline_shows_the_session_in_order_with_statuses(tab, world):
    tab.open(f"/sessions/{world['session']}")
    rows_ = tab.page.locator("#timeline tbody tr")
    cursors = [tuple(int(x) for x in c.split(".")) for c in rows_.evaluate_all("rs => rs.map(r => r.dataset.cursor)")]
    assert cursors == sorted(cursors) and len(cursors) > 50
    kinds = rows_.evaluate_all("rs => rs.map(r => r.children[1].textContent)")
    assert kinds[0] == "session" and kinds.count("prompt") == 6 and kinds.count("tool") == 45
    assert kinds.count("model") > 0  # the model's messages, from the transcript's usage
    failed = tab.page.locator("#timeline tr.k-tool.failed")
    assert failed.count() == len(world["rec"].failures)
    assert set(failed.locator("td.status").all_text_contents()) == {"error"}
    assert "$" in tab.page.locator("#session-head").inner_text()  # priced
    # A row links to its source: the prompt's whole text.
    tab.page.locator("#timeline tr.k-prompt a", has_text="source").first.click()
    tab.page.wait_for_selector("#fields")
    assert "Add retry with exponential backoff" in tab.page.locator("#fields").inner_text()


def test_filters_and_pagination(tab, world):
    tab.open("/sessions")
    first = tab.page.locator("#sessions tbody tr").evaluate_all("rs => rs.map(r => r.dataset.session)")
    assert len(first) == 50
    tab.page.click("#next")
    tab.page.wait_for_load_state("load")
    second = tab.page.locator("#sessions tbody tr").evaluate_all("rs => rs.map(r => r.dataset.session)")
    assert second and not set(first) & set(second) and len(first) + len(second) == 56
    tab.open("/sessions")
    tab.page.select_option("select[name=status]", "failed")
    tab.page.click("form.filters button")
    tab.page.wait_for_load_state("load")
    assert "status=failed" in tab.page.url
    assert tab.page.locator("#sessions tbody tr").evaluate_all("rs => rs.map(r => r.dataset.session)") == [str(world["session"])]
    tab.open(f"/sessions/{world['session']}?status=error")
    assert tab.page.locator("#timeline tbody tr").count() == len(world["rec"].failures)


def test_the_search_box_returns_cited_hits(tab):
    tab.open("/memory")
    tab.page.fill("input[name=search]", "exponential backoff rate-limits")
    tab.page.press("input[name=search]", "Enter")
    tab.page.wait_for_selector("#hits tbody tr")
    hits = tab.page.locator("#hits tbody tr")
    assert all("bm25" in t for t in hits.all_inner_texts())
    cited = hits.locator("td.cite a").all_inner_texts()
    assert any(c.startswith(("claude/sessions/", "session:")) for c in cited), cited  # the conversation, the summary
    hits.first.locator("td.cite a").click()
    tab.page.wait_for_selector("#source")
    assert "exponential backoff" in tab.page.locator("#source").inner_text()


def test_an_agent_of_project_a_sees_nothing_of_b(tab, viewer, world):
    for path in ("/sessions", "/memory", "/coordination", "/audit", "/cost", "/health"):
        tab.open(path)
        text = tab.page.locator("body").inner_text()
        assert "SECRET-OF-B" not in text and world["b_agent"] not in text and world["other"] not in text, path
    response = tab.open(f"/sessions/{world['b_session']}")
    assert response.status == 404 and "SC600" in tab.page.locator("#error").inner_text()
    reply = viewer.get(f"/api/v1/timeline?session={world['b_session']}")
    assert reply.status == 404 and reply.json()["error"]["code"] == "SC600"
    assert "SECRET-OF-B" not in viewer.get("/api/v1/sessions?limit=500").text


def test_stored_script_renders_as_text(tab, world):
    tab.open(f"/sessions/{world['session']}", "xss")
    cell = tab.page.locator("#timeline tr.k-prompt", has_text="look at").first
    assert "<script>window.__xss = 1</script>" in cell.inner_text()
    assert cell.locator("script, img, a[href^='javascript']").count() == 0
    cell.locator("a", has_text="source").click()
    tab.page.wait_for_selector("#fields")
    assert 'onerror="window.__xss = 2"' in tab.page.locator("#fields").inner_text()
    assert tab.page.evaluate("() => window.__xss") is None and tab.dialogs == [] and tab.errors == []


def test_a_browser_without_the_token_is_refused(browser, viewer):
    context = browser.new_context()
    try:
        page = context.new_page()
        for path in ("/sessions", "/api/v1/sessions", f"/?token=not-{viewer.token}"):
            assert page.goto(viewer.base + path).status == 401, path
        assert "SC601" in page.content()
    finally:
        context.close()


def test_the_open_timeline_shows_a_new_event(tab, world, viewer):
    tab.open(f"/sessions/{world['session']}")
    tab.page.wait_for_function("() => document.getElementById('timeline').dataset.live")
    time.sleep(1.0)  # the stream is open and waits
    ev = {**world["rec"].events[1], "hook_event_name": "PostToolUse", "tool_name": "Grep",
          "tool_input": {"pattern": "written-after-the-page-opened"}, "tool_response": {"numFiles": 0},
          "tool_use_id": "toolu_live_0001", "duration_ms": 5}
    ev.pop("prompt", None)
    world["fire"](ev)
    row = tab.page.wait_for_selector("#timeline tr.fresh.k-tool", timeout=20000)
    assert "written-after-the-page-opened" in row.inner_text()
    assert tab.page.locator("#timeline tr.k-tool").count() == 46
    tab.page.screenshot(path=str(tab.screens / "timeline-live.png"), full_page=False)
    assert tab.errors == []
