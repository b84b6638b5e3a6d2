"""scsql ui, its /api/v1 and scsql report, over a real server: the token and
the Host are required, every response carries a strict CSP, row-level
security decides what each identity sees (an agent of project A nothing of
B), stored text is escaped, bad input is a 4xx JSON error with an SC code,
lists page by keyset, an open timeline is woken by NOTIFY, the viewer writes
nothing, and a report's signature catches any edit. The browser tests are in
test_viewer_browser.py."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
import urllib.request

import pytest

from scsql.api import Api
from scsql.core.errors import ScsqlError
from scsql.ui import report
from scsql.ui.source import agent_source, auditor_source

from ..helpers import scsql
from ..viewer_helpers import RunningViewer

XSS = ['<script>alert("x")</script>', '<img src=x onerror=alert(1)>', '[click](javascript:alert(1))']


@pytest.fixture
def world(scsql_db):
    """Projects A and B, an agent in each with a session of prompts, tool calls and an outcome."""
    out = {}
    for side in ("a", "b"):
        project = scsql_db.project()
        agent = scsql_db.agent(f"v{side}", project)
        api = Api(agent)
        sid = api.call("start_session", client="claude-code", model="claude-sonnet-4-5", title=f"session of {side}")["session_id"]
        for text in [f"prompt of {side}", *XSS]:
            api.call("record_prompt", text=text, session_id=sid)
        calls = [api.call("record_tool_call", tool="Bash", status="error" if i % 3 == 0 else "ok", session_id=sid,
                          input_preview=f'{{"command": "make test-{side}-{i}"}}', latency_ms=10 + i)
                 for i in range(6)]
        api.call("record_outcome", kind="failed", signal="hook", summary=f"tests of {side} failed", session_id=sid)
        api.call("remember", key=f"build-{side}", value="make test", importance=4)
        out[side] = {"project": project, "agent": agent, "session": sid, "calls": calls}
    return out


@pytest.fixture
def viewer(scsql_db, world):
    running = RunningViewer(agent_source(scsql_db.app, world["a"]["agent"].name), poll=0.5)
    yield running
    running.stop()


def test_the_token_and_the_host_are_required(viewer):
    for path in ("/sessions", "/api/v1/sessions", "/static/app.js", "/nowhere"):
        reply = viewer.get(path, token=False)
        assert reply.status == 401, path
        assert b"Traceback" not in reply.body
    assert viewer.get("/api/v1/sessions", token=False, headers={"Authorization": "Bearer wrong"}).status == 401
    assert viewer.get("/api/v1/sessions", token=False).json()["error"]["code"] == "SC601"
    assert viewer.get("/sessions", headers={"Host": f"attacker.example:{viewer.port}"}).status == 400
    # The printed URL: ?token= sets a SameSite=Strict, HttpOnly cookie and leaves the address.
    first = viewer.get(f"/sessions?token={viewer.token}&status=failed", token=False)
    assert first.status == 303 and first.headers["location"] == "/sessions?status=failed"
    cookie = first.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert viewer.get("/sessions", token=False, headers={"Cookie": cookie.split(";")[0]}).status == 200


def test_every_response_carries_a_strict_content_security_policy(viewer, world):
    for path in ("/sessions", f"/sessions/{world['a']['session']}", "/api/v1/sessions", "/static/app.js", "/nowhere"):
        reply = viewer.get(path)
        csp = reply.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp and "unsafe-inline" not in csp, path
        assert reply.headers["x-content-type-options"] == "nosniff"
        assert reply.headers["x-frame-options"] == "DENY"


def test_an_agent_sees_its_project_and_nothing_of_another(viewer, world, scsql_db):
    a, b = world["a"], world["b"]
    sessions = viewer.api("sessions")
    assert [s["session_id"] for s in sessions] == [a["session"]] and sessions[0]["project"] == a["project"]
    assert {p["project"] for p in viewer.api("projects")} == {a["project"]}
    assert b["agent"].name not in {x["agent"] for x in viewer.api("agents")}
    for path in (f"/api/v1/timeline?session={b['session']}", f"/api/v1/event?ref=tool:{b['calls'][0]['tool_call_id']}",
                 f"/api/v1/sessions?project={b['project']}", f"/api/v1/facts?project={b['project']}"):
        reply = viewer.get(path)
        assert reply.status == 404 and reply.json()["error"]["code"] in ("SC600", "SC005"), (path, reply.text)
    assert viewer.get(f"/sessions/{b['session']}").status == 404
    text = " ".join(viewer.get(p).text for p in ("/sessions", "/memory", "/cost", "/audit", "/coordination"))
    assert b["project"] not in text and b["agent"].name not in text and "build-b" not in text
    # The auditor reads both.
    auditor = auditor_source(scsql_db.admin)
    try:
        seen = {s["project"] for s in auditor.call("sessions")}
        assert {a["project"], b["project"]} <= seen
        assert "verify" in auditor.views and "verify" not in viewer.source.views
    finally:
        auditor.close()


def test_stored_text_is_escaped(viewer, world):
    page = viewer.get(f"/sessions/{world['a']['session']}").text
    for raw in XSS[:2]:
        assert raw not in page
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "[click](javascript:alert(1))" in page and "href=\"javascript:" not in page.lower()


def test_bad_input_is_a_4xx_json_error_with_a_code(viewer, world):
    cases = {"/api/v1/sessions?since=yesterday-ish": (400, "SC010"),
             "/api/v1/sessions?since=2026-11-02&until=2026-11-01": (400, "SC010"),
             "/api/v1/sessions?limit=0": (400, "SC010"),
             "/api/v1/sessions?status=weird": (400, "SC010"),
             "/api/v1/sessions?before=not-a-cursor": (400, "SC010"),
             "/api/v1/sessions?colour=red": (400, "SC010"),
             "/api/v1/timeline?session=99999999": (404, "SC600"),
             "/api/v1/timeline?session=abc": (400, "SC010"),
             "/api/v1/timeline": (400, "SC010"),
             "/api/v1/event?ref=tool:x": (400, "SC010"),
             "/api/v1/verify": (404, "SC602"),
             "/api/v1/no-such-thing": (404, "SC602")}
    for path, (status, code) in cases.items():
        reply = viewer.get(path)
        assert (reply.status, reply.json()["error"]["code"]) == (status, code), (path, reply.text)
        assert b"Traceback" not in reply.body
    assert "ends" in viewer.get("/api/v1/sessions?since=2026-11-02&until=2026-11-01").json()["error"]["message"]
    page = viewer.get("/sessions?since=2026-11-02&until=2026-11-01")
    assert page.status == 400 and "SC010" in page.text and "Traceback" not in page.text
    assert viewer.get("/sessions/99999999").status == 404


def test_lists_page_by_keyset(scsql_db, world, viewer):
    api = Api(world["a"]["agent"])
    for i in range(7):
        api.call("start_session", client="c", title=f"extra {i}")
    seen, before = [], None
    while True:
        page = viewer.api("sessions", limit=3, **({"before": before} if before else {}))
        seen += [s["session_id"] for s in page]
        if len(page) < 3:
            break
        before = page[-1]["cursor"]
    assert len(seen) == 8 == len(set(seen)) and seen == sorted(seen, reverse=True)
    rows, after = [], None
    while True:
        page = viewer.api("timeline", session=world["a"]["session"], limit=4, **({"after": after} if after else {}))
        rows += page
        if len(page) < 4:
            break
        after = page[-1]["cursor"]
    assert len(rows) == len({r["ref"] for r in rows}) == len(viewer.api("timeline", session=world["a"]["session"]))
    assert [r["happened"] for r in rows] == sorted(r["happened"] for r in rows)


def test_a_timeline_is_in_order_with_its_statuses(viewer, world):
    rows = viewer.api("timeline", session=world["a"]["session"])
    kinds = [r["kind"] for r in rows]
    assert kinds[0] == "session" and kinds.count("prompt") == 4 and kinds.count("tool") == 6
    assert kinds.index("outcome") > max(i for i, k in enumerate(kinds) if k == "tool")
    assert [r["status"] for r in rows if r["kind"] == "tool"] == ["error", "ok", "ok", "error", "ok", "ok"]
    assert [r["id"] for r in rows if r["kind"] == "tool"] == [c["tool_call_id"] for c in world["a"]["calls"]]
    failed = viewer.api("timeline", session=world["a"]["session"], status="error")
    assert [r["kind"] for r in failed] == ["tool", "tool"]
    event = viewer.api("event", ref=rows[1]["ref"])[0]
    assert event["fields"]["text"] == "prompt of a" and len(event["row_hash"]) == 64


def test_an_open_timeline_gets_new_rows_woken_by_notify(viewer, world):
    """The stream is woken by the NOTIFY of the write, not by its poll (5 s)."""
    viewer.state["poll"] = 30.0
    assert viewer.state["listener"].listening.wait(10)
    last = viewer.api("timeline", session=world["a"]["session"])[-1]["cursor"]
    got: list[dict] = []

    def read() -> None:
        req = urllib.request.Request(f"{viewer.base}/api/v1/stream/timeline?session={world['a']['session']}&after={last}",
                                     headers={"Authorization": f"Bearer {viewer.token}"})
        with urllib.request.urlopen(req, timeout=20) as r:
            for line in r:
                if line.startswith(b"data: "):
                    row = json.loads(line[6:])
                    if row["kind"] == "tool" and row["title"] == "LiveTool":
                        got.append(row)
                        return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    time.sleep(1.0)  # the stream has read what there is and waits
    woken = viewer.state["wakeups"].count
    t0 = time.monotonic()
    Api(world["a"]["agent"]).call("record_tool_call", tool="LiveTool", session_id=world["a"]["session"])
    reader.join(20)
    assert got and got[0]["status"] == "ok"
    assert time.monotonic() - t0 < 10 and viewer.state["wakeups"].count > woken


def test_the_viewer_changes_nothing(viewer, scsql_db):
    with pytest.raises(ScsqlError) as err, viewer.source.transaction() as conn:
        conn.execute("select scsql.remember('k', 'v')")
    assert err.value.sqlstate == "25006"  # read-only transaction
    auditor = auditor_source(scsql_db.admin)
    try:
        with pytest.raises(ScsqlError), auditor.transaction() as conn:
            conn.execute("select scsql.record_checkpoint(1, now(), 1, '\\x00', '[]')")
    finally:
        auditor.close()


def test_openapi_describes_what_the_identity_may_read(viewer):
    doc = viewer.api("openapi.json")
    assert doc["openapi"].startswith("3.") and "/api/v1/sessions" in doc["paths"]
    params = {p["name"]: p for p in doc["paths"]["/api/v1/sessions"]["get"]["parameters"]}
    assert params["status"]["schema"]["enum"] == ["failed", "clean"]
    assert params["limit"]["schema"]["maximum"] == 500
    assert "/api/v1/verify" not in doc["paths"] and "/api/v1/channels" not in doc["paths"]


def test_a_report_is_signed_and_an_edit_is_caught(scsql_db, world, tmp_path):
    from scsql.audit.checkpoints import init_auditor_key

    init_auditor_key(scsql_db.keystore, scsql_db.admin)
    env = {"SCSQL_DSN": scsql_db.admin, "SCSQL_KEYSTORE": str(scsql_db.keystore.directory),
           "SCSQL_DATA_DIR": str(tmp_path / "data")}
    since = (dt.datetime.now(dt.UTC) - dt.timedelta(days=1)).isoformat()
    out = tmp_path / "report.json"
    done = scsql("report", "--since", since, "--output", str(out), env=env)
    assert done.returncode == 0, done.stderr
    document = json.loads(out.read_text())
    agents = {a["agent"]: a for a in document["report"]["activity"]}
    a = agents[world["a"]["agent"].name]
    assert a["tool_calls"] == 6 and a["tool_calls_by_status"] == {"ok": 4, "error": 2} and a["prompts"] == 4
    assert all(v["ok"] for v in document["report"]["verification"])
    assert document["signature"]["signer"] == "auditor"
    verified = scsql("report", "verify", str(out), env=env)
    assert verified.returncode == 0 and "signature valid" in verified.stdout, verified.stderr
    # One figure changed: the signature no longer holds.
    out.write_text(out.read_text().replace('"tool_calls": 6', '"tool_calls": 5', 1))
    broken = scsql("report", "verify", str(out), env=env)
    assert broken.returncode == 1 and "SC603" in broken.stderr
    # The HTML report carries the same signed content, shows it escaped, runs no script.
    html = tmp_path / "report.html"
    assert scsql("report", "--since", since, "--format", "html", "--output", str(html), env=env).returncode == 0
    page = html.read_text()
    assert world["a"]["agent"].name in page and "<script src" not in page
    assert page.count("<script") == 1 and '<script type="application/json" id="scsql-report">' in page
    assert scsql("report", "verify", str(html), "--public-key", document["signature"]["public_key"], env=env).returncode == 0
    assert scsql("report", "verify", str(html), "--public-key", "00" * 32, env=env).returncode == 1


def test_report_signature_is_over_the_jsonb_text(scsql_db):
    """A recipient can compute the signed bytes with any PostgreSQL: REPORT::jsonb::text."""
    from scsql.core import keys

    value = {"b": [1, 2.50, "x<y"], "a": {"zz": None, "y": True}, "cost": 0.00370200000000000000}
    with scsql_db.connect() as conn:
        text = conn.execute("select %s::jsonb::text as t", (json.dumps(value),)).fetchone()["t"]
    from scsql.audit.encoding import JsonValue

    parsed = JsonValue.parse(text).value
    assert report.canonical(parsed) == text.encode()
    key = keys.generate()
    document = report.sign(parsed, key, 1, "auditor")
    assert report.check(document)["signer"] == "auditor"
    document["report"]["a"]["y"] = False
    with pytest.raises(ScsqlError) as err:
        report.check(document)
    assert err.value.code == "SC603"
