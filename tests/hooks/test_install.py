"""scsql install claude / uninstall claude, as a user runs them: against a
real database (the project and the agent are created), in a temporary
repository, with HOME redirected so the user scope is a temporary directory."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from scsql.cli import main
from scsql.core import roles
from scsql.hooks.events import settings_hooks
from scsql.hooks.settings import BACKUP_INFIX, remove_hooks

from ..helpers import SESSION, serial


@dataclass
class Setup:
    repo: Path
    home: Path
    data: Path
    keys: Path
    admin: str
    agent: str
    capsys: pytest.CaptureFixture

    def run(self, *args: str, agent: str | None = None) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main([*args, "--agent", agent or self.agent])
        out, err = self.capsys.readouterr()
        return code, out, err

    def install(self, *extra: str, agent: str | None = None) -> tuple[int, str, str]:
        return self.run("install", "claude", *extra, agent=agent)

    def uninstall(self, *extra: str, agent: str | None = None) -> tuple[int, str, str]:
        return self.run("uninstall", "claude", *extra, agent=agent)

    @property
    def mcp(self) -> Path:
        return self.repo / ".mcp.json"

    @property
    def settings(self) -> Path:
        return self.repo / ".claude" / "settings.json"

    @property
    def identity(self) -> Path:
        return self.repo / ".claude" / "scsql.local.json"

    def ours(self, agent: str | None = None, scope: str = "project") -> dict:
        """scsql's hooks in SCOPE's settings file: the portable ones in the committed file."""
        return settings_hooks(None, None) if scope == "project" else settings_hooks(agent or self.agent, str(self.data))


@pytest.fixture
def setup(scsql_db, tmp_path, monkeypatch, capsys) -> Setup:
    repo, home = tmp_path / "My Repo", tmp_path / "home"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SCSQL_DSN", scsql_db.admin)
    monkeypatch.setenv("SCSQL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SCSQL_KEYSTORE", str(tmp_path / "keys"))
    monkeypatch.delenv("SCSQL_AGENT_DSN", raising=False)
    monkeypatch.chdir(repo / "src")  # the git root above it is the project directory
    return Setup(repo.resolve(), home, (tmp_path / "data").resolve(), tmp_path / "keys", scsql_db.admin,
                 f"{SESSION}_inst_{next(serial)}", capsys)


def snapshot(*paths: Path) -> dict[Path, tuple[bytes, int, int] | None]:
    """Bytes, mode and mtime of each file (None when absent)."""
    out = {}
    for p in paths:
        st = p.lstat() if os.path.lexists(p) else None
        out[p] = None if st is None else (p.read_bytes() if p.is_file() else b"", stat.S_IMODE(st.st_mode),
                                          st.st_mtime_ns)
    return out


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + BACKUP_INFIX + "*"))


def user_handlers(data: dict) -> list[tuple[str, object, dict]]:
    return [(event, g.get("matcher"), h) for event, groups in data.get("hooks", {}).items()
            for g in groups for h in g["hooks"]]


# -- install -------------------------------------------------------------------


def test_fresh_install_creates_the_project_the_agent_and_both_files(setup):
    code, out, err = setup.install()
    assert code == 0, err
    project = {p["name"]: p for p in roles.status(setup.admin)["projects"]}["my-repo"]
    assert project["root_path"] == str(setup.repo)
    agent = next(a for a in roles.list_agents(setup.admin) if a["agent"] == setup.agent)
    assert agent["project"] == "my-repo" and agent["team_role"] == "developer" and agent["revoked_at"] is None
    assert stat.S_IMODE((setup.keys / f"{setup.agent}.key").stat().st_mode) == 0o600

    # What is committed names no agent and no path of this machine: a teammate's checkout uses it as it is.
    committed = setup.mcp.read_text() + setup.settings.read_text()
    assert setup.agent not in committed and str(setup.data) not in committed and sys.executable not in committed
    assert json.loads(setup.mcp.read_text())["mcpServers"] == {"scsql": {"command": "scsql", "args": ["mcp"]}}
    assert json.loads(setup.settings.read_text()) == {"hooks": setup.ours()}
    # Which agent this checkout acts as on this machine is in a local file, 0600, kept out of git.
    mine = json.loads(setup.identity.read_text())
    assert mine == {"agent": setup.agent, "home": str(setup.data)}  # no secret in the project's tree
    assert stat.S_IMODE(setup.identity.stat().st_mode) == 0o600
    # How the agent reaches its (shared) server: in the data directory, 0600.
    reach = setup.data / "hooks" / f"{setup.agent}.env.json"
    assert stat.S_IMODE(reach.stat().st_mode) == 0o600
    assert json.loads(reach.read_text())["SCSQL_KEYSTORE"] == str(setup.keys.resolve())
    assert "/.claude/scsql.local.json" in (setup.repo / ".git" / "info" / "exclude").read_text().splitlines()

    installed = json.loads(setup.settings.read_text())["hooks"]
    env = {**os.environ, "PATH": f"{scsql_on_path(setup)}:{os.environ['PATH']}", "CLAUDE_PROJECT_DIR": str(setup.repo)}
    for command in {h["command"] for groups in installed.values() for g in groups for h in g["hooks"]}:
        ran = subprocess.run(["bash", "-c", command], input="not json", capture_output=True, text=True, timeout=60,
                             env=env, cwd=setup.repo / "src")
        assert ran.returncode == 1 and "not JSON" in ran.stderr and "Traceback" not in ran.stderr, (command, ran)
    version = subprocess.run(["scsql", "--version"], capture_output=True, text=True, timeout=120, env=env)
    assert version.returncode == 0 and version.stdout.startswith("scsql "), version.stderr
    lines = out.splitlines()
    assert f"created project my-repo (root {setup.repo})" in out and f"created agent {setup.agent}" in out
    assert [ln.split()[0] for ln in lines if str(setup.repo) in ln and ".json" in ln] == ["added", "added", "added"]
    assert backups(setup.mcp) == backups(setup.settings) == []  # nothing existed to back up


def scsql_on_path(setup: Setup) -> Path:
    """A directory whose scsql runs this checkout's scsql, as the one a user installed on PATH."""
    bin_dir = setup.home / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "scsql"
    root = Path(__file__).resolve().parents[2]
    script.write_text(f"#!/bin/sh\nPYTHONPATH={root} exec {sys.executable} -m scsql \"$@\"\n")
    script.chmod(0o755)
    return bin_dir


def test_a_second_install_changes_no_byte(setup):
    assert setup.install()[0] == 0
    before = snapshot(setup.mcp, setup.settings, setup.identity)
    code, out, err = setup.install()
    assert code == 0, err
    assert snapshot(setup.mcp, setup.settings, setup.identity) == before  # bytes, mode and mtime
    assert f"agent {setup.agent} exists" in out and "project my-repo exists" in out
    assert [ln.split()[0] for ln in out.splitlines() if str(setup.repo) in ln and ".json" in ln] == ["unchanged", "unchanged", "unchanged"]
    assert backups(setup.mcp) == backups(setup.settings) == []


USER_MCP = ('{\n    "mcpServers": {\n        "github": {"command": "gh-mcp", "args": []}\n    },\n'
            '    "x-note": "mine"\n}\n')
USER_SETTINGS = {
    "permissions": {"allow": ["Bash(git status)"]},
    "hooks": {
        "PostToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "my-logger --post"}]},
                        {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "prettier --write"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "my-guard"}]}],
        "Notification": [{"hooks": [{"type": "command", "command": "notify-send claude"}]}],
    },
}


def write_user_files(setup: Setup) -> None:
    setup.mcp.write_text(USER_MCP)
    setup.settings.parent.mkdir()
    setup.settings.write_text(json.dumps(USER_SETTINGS))  # one line, no indentation
    os.chmod(setup.mcp, 0o600)


def test_the_users_servers_and_hooks_are_kept_and_backed_up(setup):
    write_user_files(setup)
    code, out, err = setup.install()
    assert code == 0, err
    mcp = json.loads(setup.mcp.read_text())
    assert mcp["mcpServers"]["github"] == {"command": "gh-mcp", "args": []} and mcp["x-note"] == "mine"
    assert list(mcp["mcpServers"]) == ["github", "scsql"]
    assert setup.mcp.read_text().startswith('{\n    "mcpServers"')  # the file's own indentation
    assert stat.S_IMODE(setup.mcp.stat().st_mode) == 0o600  # its mode kept by the atomic replace

    settings = json.loads(setup.settings.read_text())
    assert settings["permissions"] == USER_SETTINGS["permissions"]
    for handler in user_handlers(USER_SETTINGS):  # every user hook still there, in its event and matcher group
        assert handler in user_handlers(settings)
    ours = setup.ours()
    for event, groups in ours.items():
        for g in groups:
            for h in g["hooks"]:
                assert (event, g.get("matcher"), h) in user_handlers(settings)
    assert remove_hooks(settings, ours) == USER_SETTINGS
    assert [ln.split()[0] for ln in out.splitlines() if str(setup.repo) in ln and ".json" in ln] == ["added", "added", "added"]

    [mcp_backup], [settings_backup] = backups(setup.mcp), backups(setup.settings)
    assert mcp_backup.read_text() == USER_MCP and settings_backup.read_text() == json.dumps(USER_SETTINGS)
    assert stat.S_IMODE(mcp_backup.stat().st_mode) == 0o600
    assert f"backup {mcp_backup.name}" in out and f"backup {settings_backup.name}" in out


def test_a_changed_entry_of_ours_is_updated_in_place(setup):
    assert setup.install()[0] == 0
    data = json.loads(setup.settings.read_text())
    event = next(iter(data["hooks"]))
    data["hooks"][event][0]["hooks"][0]["timeout"] = 999
    setup.settings.write_text(json.dumps(data, indent=2) + "\n")
    code, out, _ = setup.install()
    assert code == 0
    assert json.loads(setup.settings.read_text()) == {"hooks": setup.ours()}
    assert [ln.split()[0] for ln in out.splitlines() if str(setup.repo) in ln and ".json" in ln] == ["unchanged", "updated", "unchanged"]


# -- refusals --------------------------------------------------------------------


def refused(setup: Setup, code: str, *extra: str) -> str:
    rc, out, err = setup.install(*extra)
    assert rc == 1 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"scsql: error {code}"), err
    return lines[0]


def no_project_was_created(setup: Setup) -> bool:
    return "my-repo" not in {p["name"] for p in roles.status(setup.admin)["projects"]}


def test_a_symlinked_settings_file_is_refused_and_nothing_changes(setup, tmp_path):
    target = tmp_path / "dotfiles" / "settings.json"
    target.parent.mkdir()
    target.write_text('{"hooks": {}}\n')
    setup.settings.parent.mkdir()
    setup.settings.symlink_to(target)
    before = snapshot(setup.settings, target, setup.mcp)
    line = refused(setup, "SC051")
    assert "symbolic link" in line and str(setup.settings) in line
    assert snapshot(setup.settings, target, setup.mcp) == before  # .mcp.json not created either
    assert no_project_was_created(setup)

    setup.settings.unlink()
    setup.mcp.symlink_to(target)  # the same for .mcp.json, even a dangling link
    target.unlink()
    refused(setup, "SC051")
    assert setup.mcp.is_symlink() and not os.path.lexists(setup.settings)


def test_a_directory_in_place_of_the_file_is_refused(setup):
    setup.settings.mkdir(parents=True)
    refused(setup, "SC051")


@pytest.mark.parametrize("content", [
    '{"hooks": {"PostToolUse": [ }',  # not JSON
    '["a", "list"]',  # not an object
    '{"hooks": ["PostToolUse"]}',  # hooks not an object
    '{"hooks": {"PostToolUse": {"matcher": "*"}}}',  # an event not a list of groups
    '{"hooks": {"PostToolUse": [{"matcher": "*"}]}}',  # a group without its hooks
    '{"hooks": {}, "hooks": {}}',  # a duplicate key (json.loads would silently drop one)
    b'{"x": "\xff"}',  # not UTF-8
])
def test_an_unparsable_settings_file_is_refused_and_left_untouched(setup, content):
    setup.settings.parent.mkdir()
    if isinstance(content, bytes):
        setup.settings.write_bytes(content)
    else:
        setup.settings.write_text(content)
    before = snapshot(setup.settings, setup.mcp)
    line = refused(setup, "SC052")
    assert str(setup.settings) in line and "left as it is" in line
    assert snapshot(setup.settings, setup.mcp) == before
    assert backups(setup.settings) == []
    assert no_project_was_created(setup)


def test_an_unparsable_mcp_file_is_refused(setup):
    setup.mcp.write_text('{"mcpServers": []}')
    before = snapshot(setup.mcp, setup.settings)
    refused(setup, "SC052")
    assert snapshot(setup.mcp, setup.settings) == before


def test_no_git_repository_and_no_project_dir_is_refused(setup, tmp_path, monkeypatch):
    outside = tmp_path / "plain"
    outside.mkdir()
    monkeypatch.chdir(outside)
    assert "not inside a git repository" in refused(setup, "SC050")
    assert "not a directory" in refused(setup, "SC050", "--project-dir", str(tmp_path / "missing"))


def test_project_dir_and_project_name_options(setup, tmp_path, monkeypatch):
    other = tmp_path / "elsewhere"
    other.mkdir()
    monkeypatch.chdir(tmp_path)
    code, out, err = setup.install("--project-dir", str(other), "--project", "named")
    assert code == 0, err
    assert (other / ".mcp.json").is_file() and (other / ".claude" / "settings.json").is_file()
    agent = next(a for a in roles.list_agents(setup.admin) if a["agent"] == setup.agent)
    assert agent["project"] == "named"
    refused(setup, "SC054", "--project-dir", str(other), "--project", "another")  # the agent is named's


# -- scopes ------------------------------------------------------------------------


@pytest.mark.parametrize("scope, where", [
    ("project", ".claude/settings.json"), ("local", ".claude/settings.local.json"), ("user", "~/.claude/settings.json"),
])
def test_each_scope_writes_its_settings_file_and_uninstall_removes_it(setup, scope, where):
    path = setup.home / where[2:] if where.startswith("~/") else setup.repo / where
    code, out, err = setup.install("--scope", scope)
    assert code == 0, err
    assert json.loads(path.read_text()) == {"hooks": setup.ours(scope=scope)}
    others = {setup.repo / ".claude" / "settings.json", setup.repo / ".claude" / "settings.local.json",
              setup.home / ".claude" / "settings.json"} - {path}
    assert not any(p.exists() for p in others)
    assert setup.identity.exists() == (scope == "project")
    assert f"added     {path}" in out
    code, out, err = setup.uninstall("--scope", scope)
    assert code == 0, err
    assert not path.exists() and not setup.mcp.exists() and not setup.identity.exists()
    assert not (setup.repo / ".claude").exists()  # made for scsql's files only, and empty now
    assert f"removed   {path}" in out


@pytest.mark.parametrize("kept, removed", [("local", "user"), ("user", "local")])
def test_uninstalling_one_scope_keeps_the_mcp_server_another_scope_uses(setup, kept, removed):
    path = {"project": setup.settings, "local": setup.repo / ".claude" / "settings.local.json",
            "user": setup.home / ".claude" / "settings.json"}
    assert setup.install("--scope", kept)[0] == 0
    assert setup.install("--scope", removed)[0] == 0
    before = snapshot(setup.mcp, path[kept])
    code, out, err = setup.uninstall("--scope", removed)
    assert code == 0, err
    assert snapshot(setup.mcp, path[kept]) == before                     # not a byte, not a backup
    assert backups(setup.mcp) == [] and not path[removed].exists()
    assert f"kept      {setup.mcp}" in out and f"the {kept}-scope hooks in {path[kept]} still use it" in out
    code, out, err = setup.uninstall("--scope", kept)                      # the last install takes the server
    assert code == 0, err
    assert not setup.mcp.exists() and not path[kept].exists()


# -- uninstall ---------------------------------------------------------------------


def test_uninstall_after_install_gives_back_the_exact_bytes(setup):
    write_user_files(setup)
    before = {p: p.read_bytes() for p in (setup.mcp, setup.settings)}
    modes = {p: stat.S_IMODE(p.stat().st_mode) for p in before}
    assert setup.install()[0] == 0
    assert setup.install(agent=f"{setup.agent}_b")[0] == 0  # a second agent in the same files
    code, out, err = setup.uninstall(agent=f"{setup.agent}_b")
    assert code == 0, err
    assert setup.uninstall()[0] == 0
    assert {p: p.read_bytes() for p in before} == before
    assert {p: stat.S_IMODE(p.stat().st_mode) for p in before} == modes
    assert setup.uninstall()[0] == 0  # nothing left to remove: nothing written
    assert {p: p.read_bytes() for p in before} == before


def test_uninstall_of_a_fresh_install_leaves_no_file(setup):
    assert setup.install()[0] == 0
    code, out, err = setup.uninstall()
    assert code == 0, err
    assert not setup.mcp.exists() and not setup.settings.exists()
    assert "deleted" in out
    agent = next(a for a in roles.list_agents(setup.admin) if a["agent"] == setup.agent)
    assert agent["revoked_at"] is None  # the agent and its key stay


def test_uninstall_keeps_what_the_user_added_after_install(setup):
    setup.settings.parent.mkdir()
    setup.settings.write_text(json.dumps(USER_SETTINGS, indent=2) + "\n")
    assert setup.install()[0] == 0
    settings = json.loads(setup.settings.read_text())
    settings["model"] = "opus"
    first_event = next(iter(setup.ours()))
    settings["hooks"][first_event][0]["hooks"].append({"type": "command", "command": "later-hook"})
    setup.settings.write_text(json.dumps(settings, indent=2) + "\n")
    mcp = json.loads(setup.mcp.read_text())
    mcp["mcpServers"]["later"] = {"command": "later-mcp"}
    setup.mcp.write_text(json.dumps(mcp))

    code, out, err = setup.uninstall()
    assert code == 0, err
    assert json.loads(setup.mcp.read_text()) == {"mcpServers": {"later": {"command": "later-mcp"}}}
    after = json.loads(setup.settings.read_text())
    assert after["model"] == "opus" and after["permissions"] == USER_SETTINGS["permissions"]
    assert ("later-hook" in json.dumps(after)) and all(h in user_handlers(after) for h in user_handlers(USER_SETTINGS))
    commands = {h["command"] for groups in setup.ours().values() for g in groups for h in g["hooks"]}
    assert not any(h["command"] in commands for _, _, h in user_handlers(after))
    events_only_ours = set(setup.ours()) - set(USER_SETTINGS["hooks"]) - {first_event}
    assert not events_only_ours & set(after["hooks"])  # the groups and events it emptied are gone
    assert len(backups(setup.settings)) == 2  # one before install, one before uninstall


def test_uninstall_refuses_a_symlink_too(setup, tmp_path):
    assert setup.install()[0] == 0
    real = tmp_path / "real.json"
    setup.settings.rename(real)
    setup.settings.symlink_to(real)
    before = snapshot(setup.mcp, setup.settings, real)
    rc, out, err = setup.uninstall()
    assert rc == 1 and "SC051" in err
    assert snapshot(setup.mcp, setup.settings, real) == before


# -- the command line as Claude Code users run it ---------------------------------------


def test_the_command_line_installs_and_uninstalls(setup):
    env = {k: v for k, v in os.environ.items()}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    run = [sys.executable, "-m", "scsql"]
    proc = subprocess.run([*run, "install", "claude", "--agent", setup.agent, "--scope", "local"],
                          cwd=setup.repo / "src", env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (setup.repo / ".claude" / "settings.local.json").is_file()
    proc = subprocess.run([*run, "uninstall", "claude", "--agent", setup.agent, "--scope", "local"],
                          cwd=setup.repo / "src", env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert not (setup.repo / ".claude" / "settings.local.json").exists() and not setup.mcp.exists()


# -- the merge itself, for any shape of scsql's hooks ----------------------------------


def test_merge_and_remove_know_handlers_of_other_types_and_moved_matchers():
    from scsql.hooks.settings import merge_hooks

    ours = {"PreToolUse": [{"matcher": "Edit|Write", "hooks": [
        {"type": "mcp_tool", "server": "scsql-a", "tool": "check_tool_use", "input": {"tool": "${tool_name}"},
         "timeout": 2}]}],
            "Stop": [{"hooks": [{"type": "command", "command": "scsql-hook stop", "timeout": 5}]}]}
    user = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard"}]}],
                      "Stop": [{"hooks": [{"type": "command", "command": "scsql-hook stop-not-ours"}]}]}}
    merged = merge_hooks(user, ours)
    assert merged["hooks"]["Stop"] == [{"hooks": [{"type": "command", "command": "scsql-hook stop-not-ours"},
                                                  ours["Stop"][0]["hooks"][0]]}]
    assert merged["hooks"]["PreToolUse"] == user["hooks"]["PreToolUse"] + ours["PreToolUse"]
    assert merge_hooks(merged, ours) == merged and remove_hooks(merged, ours) == user

    tuned = json.loads(json.dumps(merged))  # the user changed our timeout and moved us to another matcher
    moved = tuned["hooks"]["PreToolUse"].pop()
    moved["hooks"][0]["timeout"] = 30
    tuned["hooks"]["PreToolUse"][0]["hooks"].append(moved["hooks"][0])
    assert merge_hooks(tuned, ours) == merged  # put back where and as scsql writes it
    assert remove_hooks(tuned, ours) == user


def test_one_command_under_two_matchers_of_one_event():
    from scsql.hooks.settings import merge_hooks

    handler = {"type": "command", "command": "scsql-hook pre", "timeout": 5}
    ours = {"PreToolUse": [{"matcher": "Edit|Write", "hooks": [handler]}, {"matcher": "Bash", "hooks": [handler]}]}
    merged = merge_hooks({}, ours)
    assert merged == {"hooks": ours}
    assert merge_hooks(merged, ours) == merged and remove_hooks(merged, ours) == {}


def test_a_file_changed_between_reading_and_writing_is_not_overwritten(tmp_path):
    from scsql.core.errors import ScsqlError
    from scsql.hooks.install import Edit
    from scsql.hooks.settings import merge_server, remove_server

    path = tmp_path / ".mcp.json"
    path.write_text('{"mcpServers": {}}\n')
    edit = Edit(path, lambda cf: None, lambda d: merge_server(d, "scsql-a", {"command": "x"}),
                lambda d: remove_server(d, "scsql-a"), "MCP server scsql-a")
    status, content = edit.plan_install()
    path.write_text('{"mcpServers": {"mine": {"command": "y"}}}\n')  # an editor saved meanwhile
    with pytest.raises(ScsqlError) as err:
        edit.apply(status, content)
    assert err.value.code == "SC053" and "changed while" in err.value.message
    assert path.read_text() == '{"mcpServers": {"mine": {"command": "y"}}}\n' and backups(path) == []


def test_uninstall_of_what_install_created_leaves_neither_backups_nor_claude_dir(setup):
    assert setup.install()[0] == 0
    data = json.loads(setup.settings.read_text())
    data["hooks"][next(iter(data["hooks"]))][0]["hooks"][0]["timeout"] = 999
    setup.settings.write_text(json.dumps(data))
    assert setup.install()[0] == 0 and len(backups(setup.settings)) == 1  # the changed entry was put back
    code, out, err = setup.uninstall()
    assert code == 0, err
    assert not (setup.repo / ".claude").exists() and not setup.mcp.exists()  # no backup of a file scsql made


def test_the_committed_files_and_a_local_install_of_one_agent_live_side_by_side(setup):
    assert setup.install()[0] == 0
    assert setup.install("--scope", "local")[0] == 0
    servers = json.loads(setup.mcp.read_text())["mcpServers"]
    assert set(servers) == {"scsql", f"scsql-{setup.agent}"}
    assert setup.uninstall("--scope", "local")[0] == 0
    assert set(json.loads(setup.mcp.read_text())["mcpServers"]) == {"scsql"}
    assert json.loads(setup.settings.read_text()) == {"hooks": setup.ours()}


def test_an_older_scsql_command_form_is_ours_and_replaced(setup):
    assert setup.install("--scope", "local")[0] == 0
    local = setup.repo / ".claude" / "settings.local.json"
    data = json.loads(local.read_text())
    for groups in data["hooks"].values():  # as an older scsql wrote them: no fail-open suffix
        for g in groups:
            for h in g["hooks"]:
                h["command"] = h["command"].removesuffix(" || exit 1")
    local.write_text(json.dumps(data))
    assert setup.install("--scope", "local")[0] == 0
    assert json.loads(local.read_text()) == {"hooks": setup.ours(scope="local")}  # replaced, not doubled
