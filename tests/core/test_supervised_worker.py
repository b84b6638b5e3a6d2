"""The first hour on the embedded default, as a new user has it: ``scsql up``
starts a background worker for each project (core/supervisor.py), so
``scsql doctor`` right after it finds nothing to do; ``scsql down`` stops the
worker, the next ``scsql up`` starts a dead one again; and every command
doctor prints for a broken setup runs when pasted into a shell, with the
``--data-dir`` the setup was made with. Real processes, a real server in a
temporary data directory named by ``--data-dir`` (not SCSQL_DATA_DIR, which
a pasted command would find by itself)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from scsql.core import supervisor
from scsql.core.config import Settings
from scsql.core.embedded import EmbeddedServer

from ..hook_transport_helpers import event
from ..helpers import wait_for

REPO = Path(__file__).resolve().parent.parent.parent


@pytest.fixture(scope="module")
def user(tmp_path_factory):
    """A new user's machine: a home, a git repository to work in, ``scsql`` on
    PATH running this checkout; ``scsql --data-dir DATA up`` run in the
    repository. Yields (run, data, repo): run(line) runs a shell line there."""
    root = tmp_path_factory.mktemp("first-hour")
    home, repo, bin_dir, data = root / "home", root / "repo", root / "bin", root / "data"
    for d in (home, repo / ".git", bin_dir):
        d.mkdir(parents=True)
    (bin_dir / "scsql").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m scsql "$@"\n')
    (bin_dir / "scsql").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCSQL_", "PG"))}
    env.update(HOME=str(home), SCSQL_EMBED="none", PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])))

    def run(line: str, cwd: Path = repo) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", line], env=env, cwd=cwd, capture_output=True, text=True,
                              timeout=600, stdin=subprocess.DEVNULL)

    up = run(f"scsql --data-dir {data} up")
    assert up.returncode == 0, up.stderr
    yield run, data, repo
    run(f"scsql --data-dir {data} down")


def doctor(run, data: Path, repo: Path) -> dict:
    out = run(f"scsql --data-dir {data} doctor --json --project-dir {repo}")
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)


def statuses(report: dict) -> dict[str, str]:
    return {c["check"]: c["status"] for c in report["checks"]}


def admin(data: Path) -> str:
    return EmbeddedServer(Settings.load(data)).conninfo()


def test_doctor_finds_nothing_to_do_right_after_up(user):
    """`scsql doctor` right after `scsql up` failed: no worker had ever run
    (and it said to run one in the foreground, without the --data-dir the
    user had given). scsql up now starts one, and waits for its heartbeat."""
    run, data, repo = user
    report = doctor(run, data, repo)
    assert report["ok"], report
    found = statuses(report)
    assert found.pop("hooks") == "skip", report  # scsql install claude is the next step
    assert set(found.values()) == {"ok"}, report
    workers = supervisor.running(data)
    assert list(workers) == ["default"] and workers["default"].agent == "default"
    assert (data / "workers" / "default.log").read_text().count("scsql worker: acting as default") == 1


def test_down_stops_the_worker_and_up_starts_a_dead_one_again(user):
    run, data, repo = user
    pid = supervisor.running(data)["default"].pid
    again = run(f"scsql --data-dir {data} up")
    assert again.returncode == 0 and f"pid {pid}, running" in again.stdout, again.stdout  # one worker a project
    os.kill(pid, signal.SIGKILL)  # it died
    wait_for(lambda: "default" not in supervisor.running(data), timeout=30)
    up = run(f"scsql --data-dir {data} up")
    assert up.returncode == 0 and "started" in up.stdout, up.stdout
    new = supervisor.running(data)["default"].pid
    assert new != pid
    down = run(f"scsql --data-dir {data} down")
    assert down.returncode == 0 and f"stopped the background worker of project default (pid {new})" in down.stdout
    assert supervisor.running(data) == {} and not list((data / "workers").glob("*.pid"))
    assert supervisor._start_time(new) is None  # gone (or a zombie no one reaped yet: it runs no more)
    assert run(f"scsql --data-dir {data} up").returncode == 0


def pasted(report: dict) -> list[str]:
    """The commands doctor says to run (its other advice is prose for a person)."""
    return [fix for c in report["checks"] if c["status"] == "action" for fix in c["fix"]
            if fix.split()[0] in ("scsql", "chmod", "chown")]


def test_every_command_doctor_suggests_runs_when_pasted(user):
    """A broken setup (its worker killed, a key others can read, hook events
    spooled, partitions dropped, the hooks half removed, then the server
    down): each command doctor prints runs when pasted into a shell, with
    --data-dir where the setup needs it, and doctor is then content."""
    run, data, repo = user
    installed = run(f"scsql --data-dir {data} install claude --agent default")
    assert installed.returncode == 0, installed.stderr
    settings = repo / ".claude" / "settings.json"
    hooks = json.loads(settings.read_text())
    hooks["hooks"].pop("PreToolUse")
    settings.write_text(json.dumps(hooks))
    worker = supervisor.running(data)["default"]
    os.kill(worker.pid, signal.SIGKILL)
    (data / "keys" / "default.key").chmod(0o644)
    spool = data / "spool" / "default"
    spool.mkdir(parents=True, mode=0o700)
    (spool / "1700000000000000000-1-ab.jsonl").write_text(json.dumps(event("SessionStart", source="startup")) + "\n")
    with psycopg.connect(admin(data), autocommit=True) as conn:
        conn.execute("update scsql.worker_heartbeats set seen_at = now() - interval '1 hour'")
        for (part,) in conn.execute("select partition from scsql.partition_status() "
                                    "where parent = 'scsql.outcomes' and lower_bound > now()").fetchall():
            conn.execute(f"drop table {part}")

    report = doctor(run, data, repo)
    broken = {c for c, s in statuses(report).items() if s == "action"}
    assert broken == {"worker", "keys", "spool", "hooks", "partitions"}, report
    commands = pasted(report)
    assert all(f"--data-dir {data} " in c for c in commands if c.startswith("scsql ")), commands
    for line in commands:
        done = run(line)
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
    assert set(statuses(doctor(run, data, repo)).values()) == {"ok"}

    assert run(f"scsql --data-dir {data} down").returncode == 0
    down = doctor(run, data, repo)
    assert statuses(down)["server"] == "action"
    assert pasted(down) == [f"scsql --data-dir {data} up"], down
    assert run(pasted(down)[0]).returncode == 0
    assert set(statuses(doctor(run, data, repo)).values()) == {"ok"}
