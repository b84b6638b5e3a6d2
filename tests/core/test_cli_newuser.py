"""The command line as a new user meets it, walking the README top to bottom:
each test is a rough edge found that way (a traceback, a README command
that failed, help that said nothing), kept from coming back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scsql.api import Api
from scsql.cli import main
from scsql.core import roles

from ..helpers import SESSION, one_error_line, scsql, serial


def test_search_prints_facts_and_decisions_beside_chunks(scsql_db):
    """`scsql search` printed a traceback (TypeError on the chunk hash) as soon
    as a working-memory fact or a decision was among the results."""
    project = scsql_db.project()
    agent = scsql_db.agent("srch", project)
    api = Api(agent)
    api.call("remember", key="deploy.target", value="production runs on the kestrel cluster", importance=4)
    api.call("decide", title="Deploy to kestrel", rationale="the kestrel cluster has the capacity")
    api.call("index_text", path="docs/ops.md", content="# Ops\n\nThe kestrel cluster is in Frankfurt.\n")
    env = {"SCSQL_DSN": scsql_db.admin, "SCSQL_EMBED": "none"}
    found = scsql("search", "kestrel", "--agent", agent.name, "--mode", "bm25", env=env)
    assert found.returncode == 0, found.stderr
    lines = found.stdout.splitlines()
    assert len(lines) == 3, found.stdout
    assert any(line.endswith(f"{project}:memory:deploy.target  bm25  fact") for line in lines), found.stdout
    assert any(f"{project}:decision:" in line and line.endswith("  bm25  decision") for line in lines), found.stdout
    chunk = next(line for line in lines if f"{project}:docs/ops.md:" in line)
    assert "[Ops]" in chunk and chunk.split()[-1] != "file"  # a chunk is named by its hash
    content = scsql("search", "kestrel", "--agent", agent.name, "--mode", "bm25", "--content", env=env)
    assert content.returncode == 0 and "    deploy.target: production runs on the kestrel cluster" in content.stdout

    none = scsql("search", "zyzzyvaqq", "--agent", agent.name, "--mode", "bm25", env=env)
    assert none.returncode == 0 and none.stdout == ""
    assert "nothing found for 'zyzzyvaqq'" in none.stderr and "scsql index PATH" in none.stderr


@pytest.fixture
def repo(scsql_db, tmp_path, monkeypatch) -> Path:
    """A git repository to run `scsql install claude` in, HOME and the data
    directory in tmp_path, the database scsql_db's."""
    repo = tmp_path / "shop"
    (repo / ".git").mkdir(parents=True)
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SCSQL_DSN", scsql_db.admin)
    monkeypatch.setenv("SCSQL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SCSQL_KEYSTORE", str(tmp_path / "keys"))
    monkeypatch.delenv("SCSQL_AGENT_DSN", raising=False)
    monkeypatch.chdir(repo)
    return repo.resolve()


def test_install_claude_in_the_repository_scsql_up_ran_in_joins_its_project(scsql_db, repo, capsys):
    """The README's flow: `scsql up` in the repository roots the default
    project there, `scsql agent create alice --project default`, then
    `scsql install claude --agent alice` in the same repository. Install
    named the project after the directory and refused alice with SC054."""
    rooted = f"p{next(serial)}"
    roles.create_project(scsql_db.admin, rooted, str(repo))
    alice = f"{SESSION}_nu_{next(serial)}"
    assert main(["agent", "create", alice, "--project", rooted, "--role", "developer"]) == 0
    capsys.readouterr()
    assert main(["install", "claude", "--agent", alice]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert f"agent {alice} exists in project {rooted}" in out
    assert "scsql" in json.loads((repo / ".mcp.json").read_text())["mcpServers"]
    assert json.loads((repo / ".claude" / "scsql.local.json").read_text())["agent"] == alice

    bob = f"{SESSION}_nu_{next(serial)}"  # an agent install creates joins that project too
    assert main(["install", "claude", "--agent", bob, "--scope", "local"]) == 0, capsys.readouterr().err
    assert next(a for a in roles.list_agents(scsql_db.admin) if a["agent"] == bob)["project"] == rooted
    assert not any(p["name"] == "shop" for p in roles.status(scsql_db.admin)["projects"])


def test_install_claude_elsewhere_still_names_the_project_after_the_directory(scsql_db, repo, capsys):
    agent = f"{SESSION}_nu_{next(serial)}"
    assert main(["install", "claude", "--agent", agent]) == 0, capsys.readouterr().err
    project = next(a for a in roles.list_agents(scsql_db.admin) if a["agent"] == agent)["project"]
    assert project == "shop"


def _commands():
    """(command words, parser) for scsql and every subcommand below it."""
    import argparse

    from scsql.cli import build_parser

    todo = [((), build_parser()[0])]
    while todo:
        words, parser = todo.pop()
        parser.format_help()  # adds the arguments of a command that adds them when used
        yield words, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo += [((*words, name), sub) for name, sub in action.choices.items()]


def test_every_command_and_argument_says_what_it_is_in_its_help():
    """`scsql search --help` showed a bare `query`, `-k K` and `--json`, and
    `scsql agent create --help` a bare `name` and `--project`. Every command
    and every argument now has a help text, and an option's default is shown
    (the benchmarks' tuning knobs are left to docs/benchmarks.md)."""
    import argparse

    bare, seen = [], 0
    for words, parser in _commands():
        if words[:1] == ("bench",) and len(words) > 1:
            continue
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
                continue
            if isinstance(action, argparse._SubParsersAction):
                helps = {a.dest: a.help for a in action._choices_actions}
                bare += [f"scsql {' '.join((*words, name))}" for name in action.choices if not helps.get(name)]
                continue
            seen += 1
            if not (action.help or "").strip():
                bare.append(f"scsql {' '.join(words)} {'/'.join(action.option_strings) or action.dest}")
    assert seen > 100 and not bare, bare
    worker = next(p for w, p in _commands() if w == ("worker",)).format_help()
    assert "(default 5.0)" in " ".join(worker.split())  # --poll had no word of its default


def test_worker_refuses_a_job_that_does_not_exist(tmp_path):
    """`scsql worker --job nosuch --once` said "no background jobs are
    defined" and exited 0, having done nothing."""
    from scsql import subsystems

    names = [j.name for j in subsystems.jobs()]  # named once, where each job is defined
    assert {"embed", "hook-spool", "partitions"} <= set(names)
    proc = scsql("worker", "--agent", "someone", "--once", "--job", "nosuch", "--job", "embed",
                 env={"SCSQL_DATA_DIR": str(tmp_path / "data")})
    line = one_error_line(proc, "SC010")
    assert "--job nosuch: no such background job" in line and f"the jobs are {', '.join(names)}" in line
    worker = " ".join(next(p for w, p in _commands() if w == ("worker",)).format_help().split())
    assert f"run only this background job (repeatable): {', '.join(names)}" in worker


def test_first_up_says_what_it_migrated_in_one_line(tmp_path):
    """The first `scsql up` printed one line per migration file (44 of them
    before the connection string a new user looks for); it now says how many
    and which, in one line, and `scsql migrate` still lists each. It was
    silent while the server was initialised (seconds): it now says so."""
    env = {"SCSQL_DATA_DIR": str(tmp_path / "data")}
    try:
        up = scsql("up", env=env)
        assert up.returncode == 0, up.stderr
        lines = up.stdout.splitlines()
        applied = [line for line in lines if line.startswith("  applied ")]
        assert len(applied) == 2, up.stdout
        assert applied[0].startswith("  applied ") and " migration(s): 0001_" in applied[0]
        assert applied[1].endswith("files of sql/ and policies/")
        assert lines.index(applied[0]) < lines.index(next(x for x in lines if " is up on " in x))
        assert len(lines) < 40, up.stdout  # was over 60
        # and the slow steps of a first up (initdb, the migrations) are announced as they begin
        assert lines[0].startswith("  starting the embedded server in ") and lines[1] == "  applying migrations ..."
    finally:
        scsql("down", env=env)


def test_empty_reports_say_they_are_empty(scsql_db):
    """`scsql cost` on a server with no tool calls printed a bare header, and
    `scsql learnings search` with no match printed nothing: both now say so,
    on stderr (stdout stays empty, or the header-less rows a script reads)."""
    agent = scsql_db.agent("empty", scsql_db.project())
    env = {"SCSQL_DSN": scsql_db.admin}
    cost = scsql("cost", "--days", "1", env=env)
    assert cost.returncode == 0 and cost.stdout == "", cost.stdout
    assert "no tool calls since" in cost.stderr and "in any project" in cost.stderr
    learned = scsql("learnings", "search", "parser", "--agent", agent.name, env=env)
    assert learned.returncode == 0 and learned.stdout == ""
    assert "none whose text contains every word of 'parser'" in learned.stderr


def test_worker_draws_its_progress_bar_before_the_first_batch(scsql_db, capsys):
    """`scsql worker --once` on a terminal showed nothing for the first minute
    of a large embed queue: its bar was drawn only once the first batch (and
    the model's loading) was done. It is now drawn, with the total, before."""
    from scsql.core.worker import Job, drain

    agent = scsql_db.agent("bar", scsql_db.project())
    left, seen = [5], []

    def run(_agent) -> int:
        seen.append(capsys.readouterr().err)  # what stderr showed before this batch
        done, left[0] = left[0], 0
        return done

    assert drain(agent, [Job("fake", run, pending=lambda _a: left[0], unit="thing")], show=True) == 5
    assert "0/5" in seen[0], seen
    after = capsys.readouterr().err
    assert "5/5" in after and "scsql: fake queue drained: 5 done" in after


def test_install_claude_refused_for_an_agent_of_another_project_creates_nothing(scsql_db, repo, capsys):
    """A refused install (SC054: the agent is another project's) had already
    created the project named after the directory, which then made a second
    project rooted at the repository."""
    elsewhere = f"p{next(serial)}"
    roles.create_project(scsql_db.admin, elsewhere)
    agent = f"{SESSION}_nu_{next(serial)}"
    assert main(["agent", "create", agent, "--project", elsewhere, "--role", "developer"]) == 0
    capsys.readouterr()
    assert main(["install", "claude", "--agent", agent]) == 1
    assert "SC054" in capsys.readouterr().err
    assert not any(p["name"] == "shop" for p in roles.status(scsql_db.admin)["projects"])
    assert not (repo / ".mcp.json").exists()


def test_install_claude_picks_the_agents_project_among_several_rooted_at_the_repository(scsql_db, repo, capsys):
    first, second = f"p{next(serial)}", f"p{next(serial)}"
    roles.create_project(scsql_db.admin, first, str(repo))
    roles.create_project(scsql_db.admin, second, str(repo))
    agent = f"{SESSION}_nu_{next(serial)}"
    assert main(["agent", "create", agent, "--project", second, "--role", "developer"]) == 0
    assert main(["install", "claude", "--agent", agent]) == 0, capsys.readouterr().err
    assert f"agent {agent} exists in project {second}" in capsys.readouterr().out


def test_lists_name_their_columns(scsql_db):
    """`scsql agent list` printed `alice default developer active key 1` with
    nothing to say which column is which; project and price lists the same."""
    agent = scsql_db.agent("cols", scsql_db.project())
    env = {"SCSQL_DSN": scsql_db.admin}
    listed = scsql("agent", "list", env=env)
    assert listed.returncode == 0 and listed.stdout.splitlines()[0] == "agent\tproject\tteam_role\tstate\tkey"
    assert any(line.startswith(f"{agent.name}\t") for line in listed.stdout.splitlines()[1:])
    assert scsql("project", "list", env=env).stdout.splitlines()[0] == "project\troot\tgit_remote"
    prices = scsql("price", "list", env=env).stdout.splitlines()
    assert prices[0] == "model\teffective_from\tinput_usd_per_mtok\toutput_usd_per_mtok"


def test_a_drained_line_divides_by_the_jobs_own_time(scsql_db, capsys):
    """After a long embed drain, `scsql worker --once` said "learnings queue
    drained: 3 done in 488.6 s (0.0/s)": every job was timed from the start
    of the drain, so a quick job took the time of the slow one beside it."""
    import time

    from scsql.core.worker import Job, drain

    agent = scsql_db.agent("rate", scsql_db.project())
    slow_left, quick_left = [2], [3]

    def slow(_agent) -> int:
        if not slow_left[0]:
            return 0
        time.sleep(0.5)  # the work itself: half a second a unit
        slow_left[0] -= 1
        return 1

    def quick(_agent) -> int:
        done, quick_left[0] = quick_left[0], 0
        return done

    assert drain(agent, [Job("slow", slow), Job("quick", quick)], show=False) == 5
    err = capsys.readouterr().err
    slow_s = float(err.split("slow queue drained: 2 done in ")[1].split(" s")[0])
    quick_s = float(err.split("quick queue drained: 3 done in ")[1].split(" s")[0])
    assert slow_s >= 1.0 and quick_s < 0.5, err


def test_a_serving_worker_says_it_is_up_and_waiting(scsql_db):
    """`scsql worker --agent NAME` (no --once) printed nothing at all while it
    waited for work: a new user could not tell a running worker from a hung
    one. It now says, once, whom it acts as, its jobs and how it waits."""
    import os
    import select
    import signal
    import subprocess
    import sys

    project = scsql_db.project()
    agent = scsql_db.agent("serve", project)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCSQL_")}
    env.update(SCSQL_DSN=scsql_db.admin, SCSQL_KEYSTORE=str(scsql_db.keystore.directory), SCSQL_EMBED="none")
    proc = subprocess.Popen([sys.executable, "-m", "scsql", "worker", "--agent", agent.name, "--poll", "2"],
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        said = select.select([proc.stderr], [], [], 60)[0]  # the worker's first words, or a minute of silence
        assert said, "the serving worker said nothing in 60 s"
        line = proc.stderr.readline()
        assert f"scsql worker: acting as {agent.name} in project {project}; jobs embed," in line, line
        assert "polling every 2 s" in line and "Ctrl-C stops it" in line
        assert proc.poll() is None  # and it is still serving
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
    assert proc.returncode == 130, err


@pytest.mark.parametrize("command, said", [
    (["worker", "--agent", "{agent}", "--poll", "2"], "Ctrl-C stops it"),
    (["metrics", "--listen", "127.0.0.1:0"], "(Ctrl-C stops)"),
])
def test_ctrl_c_stops_a_serving_command_whose_parent_ignored_it(scsql_db, command, said):
    """A command that runs until stopped, started by a parent that ignores
    SIGINT (a shell's `&` without job control, some CI runners: the README's
    test command run so), inherited the ignored SIGINT and ran on through
    Ctrl-C: it says Ctrl-C stops it, and now it does (exit 130)."""
    import os
    import select
    import signal
    import subprocess
    import sys

    agent = scsql_db.agent("sigint", scsql_db.project())
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCSQL_")}
    env.update(SCSQL_DSN=scsql_db.admin, SCSQL_KEYSTORE=str(scsql_db.keystore.directory), SCSQL_EMBED="none")
    argv = [a.format(agent=agent.name) for a in command]
    proc = subprocess.Popen([sys.executable, "-m", "scsql", *argv], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        assert select.select([proc.stdout], [], [], 60)[0], f"scsql {' '.join(argv)} said nothing in 60 s"
        line = proc.stdout.readline()
        assert said in line, line
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, out


def test_an_error_from_the_shell_says_what_to_run_in_the_shell(scsql_db):
    """`scsql agent create carol --project nosuch` answered "Create it first:
    select scsql.create_project(name)", a psql user's hint, to a shell user."""
    env = {"SCSQL_DSN": scsql_db.admin, "SCSQL_KEYSTORE": str(scsql_db.keystore.directory)}
    line = one_error_line(scsql("agent", "create", f"{SESSION}_nu_{next(serial)}", "--project", "nosuch",
                                "--role", "developer", env=env), "SC005")
    assert "scsql project create NAME" in line and "scsql project list" in line


def test_mcp_started_on_a_terminal_says_it_is_for_a_client(scsql_db):
    """`scsql mcp --agent NAME` typed at a terminal sat silent, waiting for
    JSON-RPC: it now says what it is and how a client starts it (only on a
    terminal: an MCP client's pipe gets nothing but the protocol)."""
    import os
    import pty
    import select
    import signal
    import subprocess
    import sys

    agent = scsql_db.agent("tty", scsql_db.project())
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCSQL_")}
    env.update(SCSQL_DSN=scsql_db.admin, SCSQL_KEYSTORE=str(scsql_db.keystore.directory), SCSQL_EMBED="none")
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "scsql", "mcp", "--agent", agent.name], env=env,
                            stdin=follower, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    os.close(follower)
    try:
        said = select.select([proc.stderr], [], [], 60)[0]
        assert said, "scsql mcp said nothing on a terminal in 60 s"
        line = proc.stderr.readline()
        assert f"serving agent {agent.name}'s tools over MCP" in line and "scsql install claude" in line, line
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        os.close(leader)


def test_a_command_without_its_subcommand_or_misspelled_says_what_to_type(tmp_path):
    """`scsql agent` said "the following arguments are required: action", and
    `scsql serach` listed 29 commands without noticing the typo."""
    env = {"SCSQL_DATA_DIR": str(tmp_path / "data")}
    bare = scsql("agent", env=env)
    assert bare.returncode == 2
    assert "create an agent: role, key pair, registration" in bare.stderr  # its help, with each subcommand's
    assert bare.stderr.splitlines()[-1] == ("scsql agent: error: name one of its commands: create, list, revoke, "
                                            "rotate-key, login, connection-limit, logins, reset-settings, token")
    nothing = scsql(env=env)
    assert nothing.returncode == 2 and "search" in nothing.stderr and "name one of its commands: up, down," in nothing.stderr
    typo = scsql("serach", "kestrel", env=env)
    assert typo.returncode == 2 and typo.stderr.rstrip().endswith("did you mean 'search'?"), typo.stderr
    sub = scsql("agent", "lst", env=env)
    assert sub.returncode == 2 and sub.stderr.rstrip().endswith("did you mean 'list'?"), sub.stderr
    choice = scsql("search", "x", "--mode", "bm2", env=env)
    assert choice.returncode == 2 and choice.stderr.rstrip().endswith("did you mean 'bm25'?"), choice.stderr
    none_near = scsql("search", "x", "--mode", "zzz", env=env)
    assert none_near.returncode == 2 and "did you mean" not in none_near.stderr


def test_a_data_directory_scsql_up_never_made_is_named_as_such(tmp_path):
    """With SCSQL_DATA_DIR pointing where `scsql up` never ran (a typo, another
    shell's setting), every command said "the embedded server in DIR is not
    running (start it with: scsql up)", as if a server had been there."""
    env = {"SCSQL_DATA_DIR": str(tmp_path / "typo")}
    for argv in (["status"], ["search", "x", "--agent", "alice"]):
        line = one_error_line(scsql(*argv, env=env), "SC034")
        assert f"there is no embedded server in {tmp_path / 'typo' / 'pg'}" in line, line
        assert "SCSQL_DATA_DIR" in line and "scsql up" in line


def test_a_task_command_that_cannot_run_is_refused_before_a_claim_and_fails_the_task(scsql_db, tmp_path):
    """`scsql worker --agent alice --once -- ./run-task.sh`, with no such file,
    claimed a task, printed a FileNotFoundError traceback and left the task
    claimed by nobody until its lease ran out."""
    from scsql.coordination import client

    from ..helpers import enqueue

    project = scsql_db.project()
    orch, dev = scsql_db.agent("orch", project, "orchestrator"), scsql_db.agent("dev", project)
    task = enqueue(orch, payload={"do": "fix parser"})
    env = {"SCSQL_DSN": scsql_db.admin, "SCSQL_KEYSTORE": str(scsql_db.keystore.directory), "SCSQL_EMBED": "none"}
    for argv in (["worker", "--agent", dev.name, "--once", "--", str(tmp_path / "run-task.sh")],
                 ["queue", "run", "--agent", dev.name, "--", str(tmp_path / "run-task.sh")]):
        line = one_error_line(scsql(*argv, env=env), "SC010")
        assert "run-task.sh: no such command, or not executable" in line and "Traceback" not in line
    with orch.transaction() as conn:
        assert conn.execute("select state from scsql.tasks where task_id = %s", (task,)).fetchone()["state"] == "queued"

    claimed = client.claim_once(dev, 1, 60)  # a program that is gone by the time the task runs
    assert client.run_task(dev, claimed[0], [str(tmp_path / "gone")], 60) is False
    with orch.transaction() as conn:
        row = conn.execute("select state, last_error from scsql.tasks where task_id = %s", (task,)).fetchone()
    assert row["state"] != "claimed" and row["last_error"].startswith(f"scsql could not run {tmp_path / 'gone'}")


def test_a_bad_path_or_time_is_one_error_line_not_a_traceback(scsql_db, tmp_path):
    """`scsql learnings export FILE` (a file, not a directory), `scsql backup
    FILE/x` and `scsql cost --since yesterday` printed tracebacks; `scsql
    learnings export` of a directory that does not exist created it, and every
    missing directory above it."""
    agent = scsql_db.agent("paths", scsql_db.project())
    env = {"SCSQL_DSN": scsql_db.admin}
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    line = one_error_line(scsql("learnings", "export", str(a_file), "--agent", agent.name, env=env), "SC010")
    assert f"{a_file}: not a directory" in line
    missing = tmp_path / "typo" / "repo"
    line = one_error_line(scsql("learnings", "export", str(missing), "--agent", agent.name, env=env), "SC010")
    assert f"{missing}: no such directory" in line and not (tmp_path / "typo").exists()
    line = one_error_line(scsql("backup", str(a_file / "scsql.backup"), env=env), "SC010")
    assert "Not a directory" in line and "Traceback" not in line
    since = scsql("cost", "--since", "yesterday", env=env)
    assert since.returncode == 2 and "Traceback" not in since.stderr
    assert "argument --since: not an ISO 8601 date or time: 'yesterday'" in since.stderr


def test_a_poll_interval_of_zero_or_less_is_refused(tmp_path):
    """`scsql worker --poll 0` polled the database in a busy loop, and a
    negative interval failed in select() with a traceback."""
    env = {"SCSQL_DATA_DIR": str(tmp_path / "data")}
    for argv in (["worker", "--agent", "alice", "--poll", "0"], ["worker", "--agent", "alice", "--poll", "-1"],
                 ["queue", "run", "--agent", "alice", "--poll", "0", "--", "true"]):
        proc = scsql(*argv, env=env)
        assert proc.returncode == 2 and "argument --poll: must be above 0" in proc.stderr, proc.stderr
