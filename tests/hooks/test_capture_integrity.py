"""Nothing an agent does escapes the record: every executed tool call, prompt
and session leaves exactly one row, whatever its input holds, sent through
the hook commands exactly as ``scsql install claude`` wrote them, and read
back from a real server.

The classes of input an agent (the model writing the tool input) controls:
text PostgreSQL cannot hold (a lone UTF-16 surrogate, a NUL), an event over
the hook's 8 MiB transport bound, a secret where a bound cuts a value, an
identifier longer than its column, and a refusal nothing cures (stored as a
stub that names it). And ``scsql migrate`` re-creating every policy while
hook events stream in loses none of them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from scsql.core.db import Agent, Database
from scsql.hooks import events as hook_events
from scsql.hooks.client import check_private

from ..conftest import SESSION
from ..helpers import enqueue, rows, scsql, serial, wait_for

ROOT = Path(__file__).resolve().parents[2]


def as_text(value) -> str:
    """A value as a tool-call preview shows it whole: JSON, as written by Python's json."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


@dataclass
class Installed:
    repo: Path
    home: Path
    env: dict
    hooks: dict
    agent: Agent
    db: object

    def fire(self, event: dict, *, input_text: str | None = None) -> list[dict | None]:
        """Run EVENT through every installed command that matches it, as Claude Code runs them (a shell,
        the project directory in CLAUDE_PROJECT_DIR); a command never exits 2."""
        answers = []
        subject = event.get("tool_name") or event.get("source") or ""
        for group in self.hooks.get(event["hook_event_name"], []):
            matcher = group.get("matcher") or "*"
            if matcher != "*" and not re.fullmatch(matcher, subject):
                continue
            for h in group["hooks"]:
                done = subprocess.run(h["command"], shell=True, input=input_text or json.dumps(event),
                                      env={**self.env, "CLAUDE_PROJECT_DIR": str(self.repo)},
                                      capture_output=True, text=True, timeout=60)
                assert done.returncode == 0, (event["hook_event_name"], done.returncode, done.stderr)
                answers.append(json.loads(done.stdout) if done.stdout.strip() else None)
        assert answers, f"no hook installed for {event['hook_event_name']}"
        return answers

    def calls(self, use_id: str) -> list[dict]:
        return rows(self.agent, "select * from scsql.tool_calls where tool_use_id = %s", use_id)

    def one_call(self, use_id: str) -> dict:
        """The one row of the call (waiting for the hook server's write): exactly one."""
        wait_for(lambda: self.calls(use_id), 30)
        time.sleep(0.2)
        found = self.calls(use_id)
        assert len(found) == 1, found
        return found[0]


def _env(scsql_db, home: Path, user: Path) -> dict:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(user), "PYTHONPATH": str(ROOT),
            "SCSQL_DSN": scsql_db.admin, "SCSQL_AGENT_DSN": scsql_db.app,
            "SCSQL_KEYSTORE": str(scsql_db.keystore.directory), "SCSQL_DATA_DIR": str(home)}


def _install(env: dict, repo: Path, agent: str, project: str, python: str = sys.executable) -> dict:
    done = subprocess.run([python, "-m", "scsql", "install", "claude", "--agent", agent, "--project", project,
                           "--project-dir", str(repo), "--scope", "local"],
                          env=env, capture_output=True, text=True, timeout=120, cwd=repo)
    assert done.returncode == 0, done.stderr
    return json.loads((repo / ".claude" / "settings.local.json").read_text())["hooks"]


@pytest.fixture
def installed(scsql_db, tmp_path):
    # The hook server refuses a home inside a directory another user may change (the hooks then
    # answer degraded and capture nothing): a run whose test directories are in one stops here.
    check_private(str(tmp_path))
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "owned.py").write_text("x = 1\n")
    home, user = tmp_path / "data", tmp_path / "user"
    user.mkdir()
    project = scsql_db.project()
    name = f"{SESSION}_ci{next(serial)}"
    env = _env(scsql_db, home, user)
    hooks = _install(env, repo, name, project)
    db = Database(scsql_db.app, max_size=2).open()
    scsql_db._pools.append(db)
    setup = Installed(repo, home, env, hooks, Agent(db, name, scsql_db.keystore.load(name)), scsql_db)
    setup.project = project
    try:
        yield setup
    finally:
        _stop_server(home, name)


def _stop_server(home: Path, agent: str) -> None:
    import fcntl

    try:
        pid = int((home / "hooks" / f"{agent}.lock").read_text().strip() or 0)
        fd = os.open(home / "hooks" / f"{agent}.lock", os.O_RDWR)
    except (OSError, ValueError):
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return  # nobody holds it
    except OSError:
        pass
    finally:
        os.close(fd)
    try:
        os.kill(pid, 15)
    except ProcessLookupError:
        pass


def _event(name: str, sid: str, cwd: Path, **fields) -> dict:
    return {"session_id": sid, "transcript_path": "", "cwd": str(cwd), "permission_mode": "default",
            "hook_event_name": name, **fields}


def _tool(sid: str, cwd: Path, tool: str, tool_input: dict, response=None, *, failed: bool = False, **fields) -> dict:
    use = fields.pop("tool_use_id", None) or f"toolu_{uuid.uuid4().hex}"
    extra = {"error": response} if failed else {"tool_response": response if response is not None else {"ok": True}}
    return _event("PostToolUseFailure" if failed else "PostToolUse", sid, cwd, tool_name=tool, tool_input=tool_input,
                  tool_use_id=use, **extra, **fields)


def _redacted(db, text: str) -> str:
    with psycopg.connect(db.admin) as conn:
        return conn.execute("select scsql.redact(%s)", (text,)).fetchone()[0]


# -- every class of input an agent controls: exactly one row ----------------------

SECRET = "s3cr3tPassw0rdXq9"
LONG = "x" * 3990


def _cases():
    # (name, tool, tool_input, response, failed, what the row's altered must say)
    yield "lone surrogate in the command", "Bash", {"command": "echo \ud800 done"}, None, False, \
        {"input_preview": "surrogate", "input_key": "surrogate"}
    yield "NUL in the command", "Bash", {"command": "printf 'a\x00b'"}, None, False, \
        {"input_preview": "nul", "input_key": "nul"}
    yield "NUL in the file path", "Write", {"file_path": "/tmp/a\x00b.txt", "content": "hi"}, None, False, \
        {"input_preview": "nul", "files": "nul"}
    yield "lone surrogate in the output", "Read", {"file_path": "/tmp/r.txt"}, {"content": "a\udfffb"}, False, \
        {"output_preview": "surrogate"}
    yield "lone surrogate in a failure's error", "Bash", {"command": "false"}, "boom \udc80", True, \
        {"output_preview": "surrogate"}
    yield "a secret where the preview is cut", "Bash", {"command": LONG + f" PGPASSWORD={SECRET} psql -h db"}, \
        None, False, {"input_preview": "clipped"}
    yield "secrets that redaction lengthens past the key's bound", "Bash", \
        {"command": "echo " + " ".join(f"password={SECRET[:6]}{i:03d}" for i in range(300))}, None, False, \
        {"input_key": "clipped"}


CASES = list(_cases())


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_every_executed_call_leaves_exactly_one_row(installed, case):
    name, tool, tool_input, response, failed, marks = case
    sid = uuid.uuid4().hex
    installed.fire(_event("SessionStart", sid, installed.repo, source="startup"))
    ev = _tool(sid, installed.repo, tool, tool_input, response, failed=failed)
    installed.fire(ev)
    row = installed.one_call(ev["tool_use_id"])
    for field, mark in marks.items():
        got = (row["altered"] or {}).get(field) or {}
        assert mark in got or mark in (got.get("replaced") or {}), (field, row["altered"])
    for text in (row["input_preview"], row["output_preview"], row["input_key"]):
        assert text is None or ("\x00" not in text and SECRET not in text and SECRET[:10] not in text)
    assert row["input_preview"] is None or len(row["input_preview"]) <= 4000
    assert row["input_key"] is None or len(row["input_key"]) <= 4000
    if failed:  # the failed outcome and its learning, too
        wait_for(lambda: rows(installed.agent, "select 1 from scsql.outcomes where tool_call_id = %s",
                              row["tool_call_id"]), 10)
    verified = scsql("verify", "--full", env=installed.env)
    assert verified.returncode == 0, verified.stderr + verified.stdout


def test_an_event_over_eight_mebibytes_is_recorded_clipped_with_its_size_and_hash(installed):
    sid = uuid.uuid4().hex
    content = "lorem ipsum dolor " * 600_000  # about 10.8 MB of text: a Write of a large file
    tool_input = {"file_path": str(installed.repo / "big.txt"), "content": content}
    ev = _tool(sid, installed.repo, "Write", tool_input)
    text = json.dumps(ev)
    assert len(text.encode()) > 8 * 1024 * 1024
    installed.fire(ev, input_text=text)
    row = installed.one_call(ev["tool_use_id"])
    mark = row["altered"]["input_preview"]
    whole = as_text(tool_input).encode()
    assert mark["clipped"] and mark["bytes"] == len(whole) and mark["sha256"] == hashlib.sha256(whole).hexdigest()
    assert len(row["input_preview"]) <= 4000 and row["files"] == [str(installed.repo / "big.txt")]


def test_a_prompt_and_a_session_with_unstorable_text_are_recorded(installed):
    sid = "sess-\ud83d-" + uuid.uuid4().hex  # a lone surrogate in the session id itself
    installed.fire(_event("SessionStart", sid, installed.repo / "a\x00b", source="startup"))
    installed.fire(_event("UserPromptSubmit", sid, installed.repo, prompt="why \x00 does \udead this fail?"))
    prompts = wait_for(lambda: rows(installed.agent, "select * from scsql.prompts"), 30)
    assert len(prompts) == 1 and prompts[0]["altered"]["text"]["replaced"] == {"nul": 1, "surrogate": 1}
    [session] = rows(installed.agent, "select * from scsql.sessions")
    assert session["altered"]["external_id"]["replaced"] == {"surrogate": 1}
    assert session["altered"]["cwd"]["replaced"] == {"nul": 1}


def test_an_identifier_longer_than_its_column_is_stored_as_its_hash(installed):
    sid = uuid.uuid4().hex
    use = "toolu_" + "z" * 300
    ev = _tool(sid, installed.repo, "Bash", {"command": "true"}, tool_use_id=use)
    installed.fire(ev)
    stored = "sha256:" + hashlib.sha256(use.encode()).hexdigest()
    row = installed.one_call(stored)
    assert row["altered"]["tool_use_id"] == {"hashed": True}
    installed.fire(ev)  # the same call again (a replay, an import): still one row
    assert len(installed.calls(stored)) == 1


# -- a refusal nothing cures: a stub on the chain -----------------------------------


def test_a_refusal_nothing_cures_becomes_a_stub_and_doctor_and_verify_count_it(installed):
    refuse = ("create function scsql._test_refuse() returns trigger language plpgsql as $$ begin "
              "if new.input_preview like '%REFUSE-ME%' then raise exception using errcode = 'SC010', "
              "message = 'refused by the test'; end if; return new; end $$; "
              "create trigger test_refuse before insert on scsql.tool_calls for each row "
              "execute function scsql._test_refuse()")
    with psycopg.connect(installed.db.admin, autocommit=True) as conn:
        conn.execute(refuse)
    try:
        sid = uuid.uuid4().hex
        ok = _tool(sid, installed.repo, "Bash", {"command": "echo fine"})
        bad = _tool(sid, installed.repo, "Bash", {"command": "echo REFUSE-ME"}, "it failed", failed=True)
        installed.fire(ok)
        installed.fire(bad)
        row = installed.one_call(bad["tool_use_id"])
        installed.one_call(ok["tool_use_id"])
    finally:
        with psycopg.connect(installed.db.admin, autocommit=True) as conn:
            conn.execute("drop trigger test_refuse on scsql.tool_calls; drop function scsql._test_refuse()")
    assert row["altered"]["stub"]["code"] == "SC010" and "refused by the test" in row["altered"]["stub"]["message"]
    assert row["input_preview"] is None and row["status"] == "error" and row["tool"] == "Bash"
    wait_for(lambda: rows(installed.agent, "select 1 from scsql.outcomes where tool_call_id = %s and kind = 'failed'",
                          row["tool_call_id"]), 10)
    verified = scsql("verify", "--full", env=installed.env)
    assert verified.returncode == 0, verified.stderr
    assert "1 call(s) stored as stubs of refused events" in verified.stdout
    assert "0 event(s) waiting" in verified.stdout
    doctor = scsql("doctor", "--json", env=installed.env)
    found = {f["check"]: f for f in json.loads(doctor.stdout)["checks"]}
    assert "1 stored as stubs" in found["spool"]["summary"], found["spool"]


# -- scsql migrate while hook events stream in: none lost --------------------------


def test_migrate_during_a_stream_of_hook_events_loses_none(installed):
    sid = uuid.uuid4().hex
    installed.fire(_event("SessionStart", sid, installed.repo, source="startup"))
    events = [_tool(sid, installed.repo, "Bash", {"command": f"echo {i}"}) for i in range(150)]
    sent: list[float] = []
    migrations: list[tuple[float, float, int]] = []

    def stream(part: list[dict]) -> None:
        for ev in part:
            installed.fire(ev)
            sent.append(time.monotonic())

    def migrate() -> None:
        for _ in range(3):
            started = time.monotonic()
            done = scsql("migrate", env=installed.env, timeout=600)
            migrations.append((started, time.monotonic(), done.returncode))

    threads = [threading.Thread(target=stream, args=(events[i::3],)) for i in range(3)]
    for t in threads:
        t.start()
    wait_for(lambda: len(sent) >= 5, 60)
    m = threading.Thread(target=migrate)
    m.start()
    for t in threads:
        t.join(600)
    m.join(600)
    assert [rc for _, _, rc in migrations] == [0, 0, 0]
    # The race happened: hook events were sent while each migrate re-created every policy.
    for start, end, _ in migrations[:1]:
        assert any(start <= t <= end for t in sent), (start, end)
    ids = [e["tool_use_id"] for e in events]

    def stored() -> dict[str, int]:
        got = rows(installed.agent, "select tool_use_id, count(*) as n from scsql.tool_calls "
                                    "where tool_use_id = any(%s) group by 1", ids)
        return {r["tool_use_id"]: r["n"] for r in got}
    wait_for(lambda: len(stored()) == len(ids), 120)
    assert set(stored().values()) == {1}


# -- the hook command fails open at the process level -------------------------------


def _copy_checkout(dest: Path) -> Path:
    import shutil

    for part in ("scsql", "sql", "migrations", "policies"):
        shutil.copytree(ROOT / part, dest / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


def test_a_moved_checkout_or_a_missing_interpreter_never_blocks(scsql_db, tmp_path):
    checkout = _copy_checkout(tmp_path / "checkout")
    bindir = tmp_path / "venv" / "bin"
    bindir.mkdir(parents=True)
    python = bindir / "python3"
    python.symlink_to(sys.executable)
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    home, user = tmp_path / "data", tmp_path / "user"
    user.mkdir()
    env = {**_env(scsql_db, home, user), "PYTHONPATH": str(checkout)}
    name = f"{SESSION}_mv{next(serial)}"
    hooks = _install(env, repo, name, scsql_db.project(), python=str(python))
    commands = {e: [h["command"] for g in groups for h in g["hooks"]] for e, groups in hooks.items()}
    assert all(str(checkout) in c and str(python) in c for cs in commands.values() for c in cs)
    try:
        for broken in ("client", "interpreter"):
            if broken == "client":
                (checkout / "scsql" / "hooks" / "client.py").unlink()
            else:
                python.unlink()
            for event_name, cs in commands.items():
                ev = _event(event_name, "s1", repo, tool_name="Bash", tool_input={"command": "ls"},
                            tool_use_id="t1", source="startup", prompt="hi", stop_hook_active=False)
                for c in cs:
                    done = subprocess.run(c, shell=True, input=json.dumps(ev), capture_output=True, text=True,
                                          env={**env, "CLAUDE_PROJECT_DIR": str(repo)}, timeout=60)
                    assert done.returncode == 1, (broken, event_name, done.returncode, done.stderr)
                    assert "decision" not in done.stdout and "deny" not in done.stdout
    finally:
        _stop_server(home, name)


def test_a_decision_is_json_with_exit_zero(installed, scsql_db):
    orch = scsql_db.agent("orch", installed.project, team_role="orchestrator")
    with orch.transaction() as conn:
        conn.execute("select * from scsql.enqueue_task('developer', '{}')")
    [answer] = installed.fire(_event("Stop", uuid.uuid4().hex, installed.repo, stop_hook_active=False))
    assert answer["decision"] == "block" and "claimable" in answer["reason"]


def test_the_first_pre_tool_use_enforces_with_no_server_running(installed, scsql_db):
    orch = scsql_db.agent("orch", installed.project, team_role="orchestrator")
    enqueue(orch, "developer", files=["src/owned.py"])
    _stop_server(installed.home, installed.agent.name)
    wait_for(lambda: not (installed.home / "hooks" / f"{installed.agent.name}.sock").exists(), 30)
    ev = _event("PreToolUse", uuid.uuid4().hex, installed.repo, tool_name="Edit", tool_use_id="t1",
                tool_input={"file_path": str(installed.repo / "src" / "owned.py"), "old_string": "1",
                            "new_string": "2"})
    [answer] = installed.fire(ev)
    assert answer["hookSpecificOutput"]["permissionDecision"] == "deny", answer


def test_a_hook_of_an_agent_that_does_not_exist_says_so_and_spools_nothing(installed):
    ghost = f"{SESSION}_ghost{next(serial)}"
    home = installed.home
    command = {e.name: hook_events.hook_command(e.subcommand, ghost, home) for e in hook_events.EVENTS}
    env = {**installed.env, "CLAUDE_PROJECT_DIR": str(installed.repo)}
    sid = uuid.uuid4().hex

    def run(name: str, **fields) -> subprocess.CompletedProcess:
        ev = _event(name, sid, installed.repo, **fields)
        return subprocess.run(command[name], shell=True, input=json.dumps(ev), capture_output=True, text=True,
                              env=env, timeout=60)
    try:
        start = run("SessionStart", source="startup")
        assert start.returncode == 0
        said = json.loads(start.stdout)["systemMessage"]
        assert "not registered" in said and "scsql install claude" in said and "unreachable" not in said, said
        for i in range(3):
            assert run("PostToolUse", tool_name="Bash", tool_input={"command": "ls"}, tool_use_id=f"g{i}",
                       tool_response={}).returncode == 0
        time.sleep(0.5)
        assert not list((home / "spool" / ghost).rglob("*.jsonl")) if (home / "spool" / ghost).exists() else True
        doctor = scsql("doctor", "--json", env=installed.env)
        spool = {f["check"]: f for f in json.loads(doctor.stdout)["checks"]}["spool"]
        assert spool["status"] == "action" and any(f"install claude --agent {ghost}" in f for f in spool["fix"])
    finally:
        _stop_server(home, ghost)
