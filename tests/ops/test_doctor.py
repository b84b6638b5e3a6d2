"""scsql doctor: every check passes on a healthy server (the command as a
user runs it, exit 0), and each one fails, once, in a test that breaks what
it checks, naming what to run (exit 1)."""

from __future__ import annotations

import datetime as dt
import json
import os
import shlex
from pathlib import Path

import pytest

from scsql.api import Api
from scsql.audit.checkpoints import run_checkpoint
from scsql.core import worker
from scsql.core.config import Settings
from scsql.ops import doctor

from ..helpers import auditor_key, old_day, scsql, tamper


@pytest.fixture
def healthy(scsql_db, tmp_path):
    """A project with an agent that wrote a chained row, a checkpoint, a live
    worker and the Claude Code hooks installed in its repository."""
    project = scsql_db.project()
    agent = scsql_db.agent("doc", project)
    Api(agent).call("record_tool_call", tool="Bash", model="claude-test")
    worker.drain(agent, [])  # a heartbeat
    run_checkpoint(scsql_db.admin, auditor_key(scsql_db), workers=1, progress=False)
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    env = {"SCSQL_DSN": scsql_db.admin, "SCSQL_AGENT_DSN": scsql_db.app,
           "SCSQL_KEYSTORE": str(scsql_db.keystore.directory), "SCSQL_DATA_DIR": str(tmp_path / "data")}
    install_hooks(repo, agent.name, env["SCSQL_DATA_DIR"])
    return scsql_db, agent, repo, env


def install_hooks(repo: Path, agent: str, home: str) -> None:
    """What scsql install claude writes (tests/hooks/test_install.py runs the command itself)."""
    from scsql.hooks.events import settings_hooks
    from scsql.hooks.settings import mcp_server_entry, merge_hooks, merge_server, server_name

    (repo / ".mcp.json").write_text(json.dumps(merge_server({}, server_name(agent), mcp_server_entry(agent, {}))))
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.json").write_text(json.dumps(merge_hooks({}, settings_hooks(agent, home))))


def probe(db, repo: Path | None, env: dict, **kw) -> doctor.Probe:
    settings = Settings(dsn=env.get("SCSQL_DSN"), agent_dsn=env.get("SCSQL_AGENT_DSN"),
                        data_dir=Path(env["SCSQL_DATA_DIR"]), keystore=Path(env["SCSQL_KEYSTORE"]))
    return doctor.Probe(settings, lambda: env["SCSQL_DSN"], repo, **kw)


def finding(p: doctor.Probe, name: str) -> doctor.Finding:
    """What check NAME finds (after the server check, which connects)."""
    checks = tuple(c for c in doctor.CHECKS if c.name in ("server", name))
    return next(f for f in doctor.run(p, checks) if f.check == name)


def broken(p: doctor.Probe, name: str, fix: str) -> doctor.Finding:
    """What check NAME finds, which must be a failure whose fixes include FIX
    (a scsql command: as written, or with the --data-dir the probe's data
    directory needs; tests/test_doctor_paste.py runs the fixes as written)."""
    f = finding(p, name)
    assert f.status == "action", f
    data_dir = f"--data-dir {shlex.quote(str(p.settings.data_dir))} "
    assert any(fix in x or fix in x.replace(data_dir, "") for x in f.fix), f.fix
    return f


def test_a_healthy_server_passes_every_check(healthy):
    db, agent, repo, env = healthy
    out = scsql("doctor", "--json", "--project-dir", str(repo), env=env)
    report = json.loads(out.stdout)
    assert {c["check"]: c["status"] for c in report["checks"]} == {c.name: "ok" for c in doctor.CHECKS}, out.stdout
    assert report["ok"] and out.returncode == 0
    text = scsql("doctor", "--project-dir", str(repo), env=env)
    assert text.returncode == 0 and text.stdout.rstrip().endswith("everything is fine"), text.stdout


def test_server_unreachable(tmp_path):
    env = {"SCSQL_DSN": "postgresql://nobody@127.0.0.1:1/none", "SCSQL_DATA_DIR": str(tmp_path),
           "SCSQL_KEYSTORE": str(tmp_path / "keys")}
    out = scsql("doctor", "--json", env=env)
    report = json.loads(out.stdout)
    assert out.returncode == 1 and not report["ok"]
    server = report["checks"][0]
    assert server["status"] == "action" and "SCSQL_DSN" in server["fix"][0]
    assert {c["check"]: c["status"] for c in report["checks"]}["chains"] == "skip"


def test_embedded_server_down(tmp_path):
    settings = Settings(dsn=None, agent_dsn=None, data_dir=tmp_path, keystore=tmp_path / "keys")
    from scsql.core.embedded import EmbeddedServer

    f = finding(doctor.Probe(settings, EmbeddedServer(settings).conninfo), "server")
    assert f.status == "action" and f.fix == [f"scsql --data-dir {tmp_path} up"]  # the data directory it looked at


def test_migration_changed_on_disk_or_missing(healthy, empty_db, tmp_path):
    db, agent, repo, env = healthy
    with db.connect() as conn:
        conn.execute("update scsql.schema_migrations set checksum = repeat('0', 64) where version = 1")
    f = broken(probe(db, repo, env), "migrations", "restore the files")
    assert "0001_identity.sql" in f.details[0]
    bare = {**env, "SCSQL_DSN": empty_db}
    broken(probe(db, repo, bare), "migrations", "scsql migrate")


def test_extension_missing(empty_db, tmp_path):
    env = {"SCSQL_DSN": empty_db, "SCSQL_DATA_DIR": str(tmp_path), "SCSQL_KEYSTORE": str(tmp_path / "keys")}
    f = broken(probe(None, None, env), "extensions", "scsql migrate")
    assert "pgvector" in f.summary


def test_partitions_not_created_ahead(healthy):
    db, agent, repo, env = healthy
    with db.connect() as conn:
        ahead = [r["partition"] for r in conn.execute(
            "select partition from scsql.partition_status() where parent = 'scsql.outcomes' "
            "and lower_bound > now()").fetchall()]
        for part in ahead:
            conn.execute(f"drop table {part}")
    f = broken(probe(db, repo, env), "partitions", "scsql partitions maintain")
    assert "scsql.outcomes" in f.details[0]


def test_retention_not_keeping_up(healthy):
    db, agent, repo, env = healthy
    at = old_day(db, 5)
    with db.connect() as conn:
        conn.execute("set role scsql_owner")
        conn.execute("select scsql._create_day_partition('scsql.outcomes', %s)", (at.date(),))
        conn.execute("reset role")
        conn.execute("select scsql.set_partition_retention('scsql.outcomes', '1 day')")
    f = broken(probe(db, repo, env), "partitions", "scsql checkpoint")
    assert "retention" in f.summary and "scsql.outcomes: 1 partition(s)" in f.details[0]


def test_no_live_worker(healthy):
    db, agent, repo, env = healthy
    with db.connect() as conn:
        conn.execute("update scsql.worker_heartbeats set seen_at = now() - interval '1 hour'")
    f = broken(probe(db, repo, env), "worker", f"scsql worker --agent {agent.name}")
    assert "last heartbeat 3600 s ago" in f.details[0] or "last heartbeat 360" in f.details[0]


def test_embedding_backlog_falling_behind(healthy):
    db, agent, repo, env = healthy
    with db.connect() as conn:
        conn.execute("insert into scsql.kb_embed_queue (project_id, model_id, chunk_hash, enqueued_at) "
                     "select a.project_id, 1, repeat('a', 64), now() - interval '1 hour' "
                     "from scsql.agents a where a.name = %s", (agent.name,))
    f = broken(probe(db, repo, env), "embeddings", "scsql worker")
    assert "1 chunk(s) waiting, oldest 60 min" in f.details[0]


def test_checkpoint_too_old(healthy):
    db, agent, repo, env = healthy
    Api(agent).call("record_tool_call", tool="Bash")  # a row after the checkpoint
    tamper(db, "update scsql.checkpoints set at = now() - interval '8 days'")
    broken(probe(db, repo, env), "checkpoints", "scsql checkpoint --export")
    # Retention makes the limit half its period.
    tamper(db, "update scsql.checkpoints set at = now() - interval '13 hours'")
    assert finding(probe(db, repo, env), "checkpoints").status == "ok"
    with db.connect() as conn:
        conn.execute("select scsql.set_partition_retention('scsql.tool_calls', '1 day')")
    f = broken(probe(db, repo, env), "checkpoints", "scsql checkpoint")
    assert "half the retention" in f.summary


def test_a_project_without_a_checkpoint_is_not_said_to_have_one(healthy):
    db, _, repo, env = healthy
    newcomer = db.agent("doc_new", db.project())
    Api(newcomer).call("record_tool_call", tool="Bash")  # chain rows, no checkpoint yet
    f = finding(probe(db, repo, env), "checkpoints")
    assert f.status == "ok" and "none yet for 1 project(s)" in f.summary, f


def test_broken_then_quarantined_chain(healthy):
    db, agent, repo, env = healthy
    Api(agent).call("record_tool_call", tool="Bash", model="after")
    tamper(db, "update scsql.tool_calls set tool = 'rm' where model = 'after'")
    f = broken(probe(db, repo, env), "chains", "scsql verify")
    assert "hash-mismatch" in f.details[0]
    run_checkpoint(db.admin, auditor_key(db), workers=1, progress=False)  # a new auditor key: it quarantines
    f = broken(probe(db, repo, env), "chains", "scsql.acknowledge_quarantine")
    assert any(d.startswith("quarantine ") for d in f.details)


def test_full_finds_a_row_altered_before_the_checkpoint(healthy):
    db, agent, repo, env = healthy
    Api(agent).call("record_tool_call", tool="Bash", model="newer")
    run_checkpoint(db.admin, auditor_key(db), workers=1, progress=False)  # signs both rows, head: the newer one
    tamper(db, "update scsql.tool_calls set tool = 'rm' where model = 'claude-test'")
    assert finding(probe(db, repo, env), "chains").status == "ok"  # the auditor verified these rows when it signed
    f = broken(probe(db, repo, env, full=True), "chains", "scsql verify")
    assert "checkpoint-mismatch" in f.details[0] or "hash-mismatch" in f.details[0]


def test_key_file_readable_by_others(healthy):
    db, agent, repo, env = healthy
    key = Path(env["SCSQL_KEYSTORE"]) / f"{agent.name}.key"
    os.chmod(key, 0o644)
    f = broken(probe(db, repo, env), "keys", f"chmod 600 {key}")
    assert "0644" in f.details[0]


def test_clock_skew(healthy):
    db, agent, repo, env = healthy
    ahead = lambda: dt.datetime.now(dt.UTC) + dt.timedelta(minutes=3)  # noqa: E731 - this machine's clock, wrong
    f = broken(probe(db, repo, env, now=ahead), "clock", "NTP")
    assert "-180" in f.summary or "-179" in f.summary


def test_hooks_removed_from_settings(healthy):
    db, agent, repo, env = healthy
    settings = repo / ".claude" / "settings.json"
    data = json.loads(settings.read_text())
    data["hooks"].pop("PreToolUse")
    settings.write_text(json.dumps(data))
    broken(probe(db, repo, env), "hooks", f"scsql install claude --agent {agent.name}")


def test_unsent_hook_events_in_the_spool(healthy):
    db, agent, repo, env = healthy
    spool = Path(env["SCSQL_DATA_DIR"]) / "spool" / agent.name
    spool.mkdir(parents=True)
    (spool / "1700000000000000000-1-ab.jsonl").write_text('{"event": "x"}\n')
    f = broken(probe(db, repo, env), "spool",
               f"scsql --data-dir {env['SCSQL_DATA_DIR']} worker --agent {agent.name} --job hook-spool --once")
    assert f"{agent.name}: 1 event(s) waiting" in f.details[0]


def test_distillation_without_a_worker_or_over_its_budget(healthy):
    db, agent, repo, env = healthy
    project = agent.whoami()["project"]
    distiller = db.agent("ddoc", project, team_role="distiller")
    with db.connect() as conn:
        conn.execute("select * from scsql.set_distill(%s, %s)", (project, distiller.name))
        conn.execute("insert into scsql.distill_jobs (project_id, session_id, segment, queued_by, queued_at) "
                     "select project_id, 1, 1, agent_id, now() - interval '1 hour' from scsql.agents where name = %s",
                     (agent.name,))
    f = broken(probe(db, repo, env), "distill", f"scsql worker --agent {distiller.name}")
    assert "1 queued" in f.details[0]
    with db.connect() as conn:
        conn.execute("update scsql.distill_jobs set state = 'deferred'")
    broken(probe(db, repo, env), "distill", f"scsql distill enable --project {project} --daily-tokens 400000")


def test_every_check_is_broken_by_a_test():
    """Each check of the table has a test in this file that makes it fail:
    one that calls broken(probe, "<check>", fix) for it (finding(..., "server") for the server's)."""
    import re

    source = Path(__file__).read_text()
    broken_here = set(re.findall(r'(?:broken|finding)\([^"\n]*?,\s*"([a-z_]+)"', source))
    assert {c.name for c in doctor.CHECKS} - broken_here == set()
