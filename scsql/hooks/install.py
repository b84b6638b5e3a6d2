"""``scsql install claude`` and ``scsql uninstall claude``: scsql's MCP server
and hooks in a Claude Code project's configuration.

Install creates the project and the agent (with its key) when they do not
exist, then merges two things into JSON files Claude Code reads:

* the agent's MCP server, ``scsql-<agent>``, into ``<project-dir>/.mcp.json``;
* scsql's hooks (``scsql.hooks.events.settings_hooks``) into the settings
  file of the chosen scope: ``project`` (``.claude/settings.json``),
  ``local`` (``.claude/settings.local.json``) or ``user``
  (``~/.claude/settings.json``).

What is scsql's in those files, and how a file is read and written (only
when its content changes, so a second install changes no byte; atomically;
after a backup, a new one per change, never overwritten: a single ``.bak``
would be replaced by the next install or uninstall and lose the user's
original) is ``settings.py``'s. A file that is a symbolic link, not a
regular file, or not JSON of the expected shape is refused and left as it
is.

With ``--server URL`` the agent's MCP server and hooks are those of a team
server (``scsql serve``) on another machine, and nothing is done to a
database here: the agent and its token were made on the server. The MCP
entry is ``{"type": "http", "url": "URL/mcp", "headers": {"Authorization":
"Bearer ${NAME}"}}``, NAME the environment variable that holds the token
(``--token-env``, default SCSQL_TOKEN), which Claude Code expands when it
connects; the hooks are the same hook client with ``--server URL
--token-env NAME`` (a committed install keeps both in
.claude/scsql.local.json), which posts each event to the server and
spools it here when the server cannot be reached. The token itself is never
written to a file: ``--token`` (or the variable) is used only to ask the
server now which agent it is.

Uninstall removes exactly those entries, and the groups, events and objects
that became empty by removing them. The MCP server in ``.mcp.json`` is
shared by the installs of every scope: uninstalling one scope while another
scope's settings file still holds the agent's hooks leaves ``.mcp.json`` as
it is. When nothing else changed since install,
it restores the bytes the file had before (from install's backup), or deletes
the file install created. It does not revoke the agent: its key and history
stay, and install can add the entries again.

``install claude --distill`` also makes the project distil its sessions
(``enable_distill``, which ``scsql distill enable`` runs too): its distiller
agent, created with its key, and ``scsql.set_distill``. The distillation
itself, which stands above the hooks, is ``scsql/distill``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Callable
from pathlib import Path

from ..core.command import Commands
from ..core.errors import INSTALL_CONFLICT, INSTALL_NO_PROJECT_DIR, ScsqlError
from .events import settings_hooks
from .hookclient import IDENTITY_FILE as IDENTITY
from .settings import (
    PORTABLE_SERVER,
    SCOPES,
    ConfigFile,
    Json,
    git_root,
    handler_identities,
    mcp_server_entry,
    merge_hooks,
    merge_server,
    remove_hooks,
    remote_server_entry,
    remove_server,
    replace_file,
    server_name,
    settings_path,
)
from ..core import errors

DEFAULT_TEAM_ROLE = "developer"


# -- where things go ---------------------------------------------------------


def project_dir(given: str | None) -> Path:
    """--project-dir DIR as an absolute real path, else the git root of the
    current directory; SC050 when neither names a directory."""
    if given:
        path = Path(given).expanduser()
        if not path.is_dir():
            raise ScsqlError(INSTALL_NO_PROJECT_DIR, f"--project-dir {given}: not a directory",
                             "name the root directory of the project Claude Code works in")
        return path.resolve()
    root = git_root(Path.cwd())
    if root is None:
        raise ScsqlError(INSTALL_NO_PROJECT_DIR, f"{Path.cwd()} is not inside a git repository",
                         "run it in the project's repository, or name the directory with --project-dir DIR")
    return root


def project_name(directory: Path) -> str:
    """A project name made from a directory's name: lower case, characters a
    project name may not hold replaced by '-' (SC050 when nothing is left)."""
    name = re.sub(r"[^a-z0-9._-]+", "-", directory.name.lower())
    name = re.sub(r"^[^a-z0-9]+", "", name)[:63]
    if not name:
        raise ScsqlError(INSTALL_NO_PROJECT_DIR, f"no project name can be made from the directory {directory}",
                         "name the project with --project NAME")
    return name


def rooted_project(ctx, directory: Path, agent: str) -> str | None:
    """The project whose root is DIRECTORY (as ``scsql up`` makes the default
    project's), so install in the repository up ran in joins that project:
    AGENT's own when several have that root; None when none (or several, and
    AGENT is in none of them) has it."""
    from ..core import roles

    admin = ctx.admin_conninfo()
    rooted = [p["name"] for p in roles.status(admin)["projects"]
              if p["root_path"] and Path(p["root_path"]) == directory]
    if len(rooted) > 1:
        rooted = [a["project"] for a in roles.list_agents(admin) if a["agent"] == agent and a["project"] in rooted]
    return rooted[0] if len(rooted) == 1 else None


# -- install and uninstall, file by file --------------------------------------


def _check_settings(cf: ConfigFile, ours: Json) -> None:
    hooks = cf.data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise cf.unparsable('its "hooks" is not an object')
    for event in ours:
        groups = hooks.get(event, [])
        if not isinstance(groups, list):
            raise cf.unparsable(f'its "hooks"."{event}" is not a list of matcher groups')
        for i, g in enumerate(groups):
            if not isinstance(g, dict) or not isinstance(g.get("hooks"), list):
                raise cf.unparsable(f'its "hooks"."{event}"[{i}] is not a matcher group with a "hooks" list')


def _check_mcp(cf: ConfigFile) -> None:
    if not isinstance(cf.data.get("mcpServers", {}), dict):
        raise cf.unparsable('its "mcpServers" is not an object')


class Edit:
    """What install or uninstall does to one file: read and checked at once,
    written by :meth:`apply` after the database work succeeded."""

    def __init__(self, path: Path, check: Callable[[ConfigFile], None],
                 merge: Callable[[Json], Json], remove: Callable[[Json], Json], what: str, mode: int | None = None):
        self.file = ConfigFile(path).read()
        check(self.file)
        self.merge, self.remove, self.what = merge, remove, what
        if mode is not None and self.file.mode is None:
            self.file.mode = mode  # a file this edit creates

    def plan_install(self) -> tuple[str, bytes | None]:
        data = self.file.data
        new = self.merge(data)
        if self.file.raw is not None and new == data:
            return "unchanged", None
        return ("added" if self.remove(data) == data else "updated"), self.file.render(new)

    def plan_uninstall(self) -> tuple[str, bytes | None]:
        data = self.file.data
        if self.file.raw is None or self.remove(data) == data:
            return "unchanged", self.file.raw
        for backup in self.file.backups():  # nothing changed since install: its backup's bytes again
            try:
                before = ConfigFile(backup).read()
            except ScsqlError:
                continue
            if self.merge(before.data) == data and self.remove(before.data) == before.data:
                return "removed", before.raw
        if data == self.merge({}):  # install created the file and nothing else was added
            return "removed", None
        return "removed", self.file.render(self.remove(data))

    def apply(self, status: str, content: bytes | None) -> str:
        backup = None
        if status != "unchanged":
            backup = self.file.write(content)
        line = f"  {status:<9} {self.file.path}  ({self.what}"
        if content is None and status == "removed":
            line += "; the file held nothing else and was deleted"
            for old in self.file.backups():  # copies of a file scsql made, gone with it
                old.unlink(missing_ok=True)
            backup = None
        if backup is not None:
            line += f"; backup {backup.name}"
        return line + ")"


def _edits(ctx, args: argparse.Namespace, mcp: bool = True) -> tuple[Path, str, list[Edit]]:
    """The edits of .mcp.json (when MCP) and of the scope's settings file.
    Project scope writes what a teammate can commit and use: commands and an
    MCP server that name no agent and no path of this machine; which agent
    this checkout acts as, and where its data is, go to the local
    .claude/scsql.local.json (never committed)."""
    directory = project_dir(args.project_dir)
    project = args.project or project_name(directory)
    agent, home = args.agent, str(ctx.settings.data_dir)
    env = {"SCSQL_DATA_DIR": home}  # the rest (login, keys) is in the data directory: record_agent_env
    portable = args.scope == "project"
    remote = (args.server, args.token_env) if getattr(args, "server", None) else None
    name = PORTABLE_SERVER if portable else server_name(agent)
    if remote is not None:
        entry = remote_server_entry(*remote, None if portable else agent)
    else:
        entry = mcp_server_entry(None if portable else agent, env)
    ours = settings_hooks(None, None) if portable else settings_hooks(agent, home, remote)
    n = len(handler_identities(ours))
    edits = [
        Edit(directory / ".mcp.json", _check_mcp, lambda d: merge_server(d, name, entry),
             lambda d: remove_server(d, name), f"MCP server {name}"),
    ] if mcp else []
    edits.append(Edit(settings_path(args.scope, directory), lambda cf: _check_settings(cf, ours),
                      lambda d: merge_hooks(d, ours), lambda d: remove_hooks(d, ours),
                      f"{n} hook(s), for the agent {IDENTITY} names" if portable else f"{n} hook(s) of agent {agent}"))
    if portable:
        mine = {"agent": agent, "home": home, **({"server": remote[0], "token_env": remote[1]} if remote else {})}
        gone = {"agent", "home", "server", "token_env"}  # a local install drops a team server's, and the reverse
        edits.append(Edit(directory / IDENTITY, lambda cf: None,
                          lambda d: {**{k: v for k, v in d.items() if k not in gone}, **mine},
                          lambda d: {k: v for k, v in d.items() if k not in gone},
                          f"agent {agent} of this checkout on this machine"
                          + (f", its team server {remote[0]}" if remote else ""), mode=0o600))
    return directory, project, edits


def installed_in_other_scopes(ctx, args: argparse.Namespace, directory: Path) -> list[tuple[str, Path]]:
    """The scopes other than ARGS.scope whose settings file holds the agent's
    hooks: installs that still use the project's .mcp.json server. A file
    that cannot be read or parsed holds none (Claude Code cannot use it either)."""
    found = []
    if args.scope == "project":  # its MCP server (scsql) is its own
        return found
    ours = settings_hooks(args.agent, str(ctx.settings.data_dir))
    for scope in SCOPES:
        path = settings_path(scope, directory)
        if scope in (args.scope, "project") or path == settings_path(args.scope, directory):
            continue
        cf = ConfigFile(path)
        try:
            raw = path.read_bytes()  # only read: a symbolic link is followed
            cf.data = json.loads(raw.decode("utf-8")) if raw.strip() else {}
            if not isinstance(cf.data, dict):
                continue
            _check_settings(cf, ours)
        except (OSError, UnicodeDecodeError, ValueError, ScsqlError):
            continue
        if remove_hooks(cf.data, ours) != cf.data:
            found.append((scope, path))
    return found


def ensure_project_and_agent(ctx, project: str, agent: str, team_role: str,
                             directory: Path) -> tuple[list[str], str | None]:
    """Create PROJECT (rooted at DIRECTORY) and AGENT with its key when they
    do not exist, with the functions ``scsql project`` and ``scsql agent`` use;
    on a shared server whose agents log in as themselves, a new agent's
    password too. Returns what it did and that password (None when none was made)."""
    from ..core import roles

    admin = ctx.admin_conninfo()
    said = []
    found = next((a for a in roles.list_agents(admin) if a["agent"] == agent), None)
    if found is not None and found["project"] != project:  # refused before anything is created
        raise ScsqlError(INSTALL_CONFLICT, f"agent {agent} belongs to project {found['project']}, not {project}",
                         f"install it with --project {found['project']}, or choose another --agent")
    if found is not None and found["revoked_at"] is not None:
        raise ScsqlError(errors.AGENT_REVOKED, f"agent {agent} was revoked at {found['revoked_at']} and can no longer act",
                         "choose another --agent")
    if found is not None:
        ctx.keystore.load(agent)  # its key is here and safe, or SC031/SC032 now
    projects = {p["name"]: p for p in roles.status(admin)["projects"]}
    if project not in projects:
        roles.create_project(admin, project, str(directory))
        said.append(f"scsql: created project {project} (root {directory})")
    elif not projects[project]["root_path"]:
        roles.set_project_root(admin, project, str(directory))
        said.append(f"scsql: project {project} exists; its root is now {directory}")
    else:
        said.append(f"scsql: project {project} exists (root {projects[project]['root_path']})")
    if found is None:
        row = roles.create_agent(admin, ctx.keystore, agent, project, team_role)
        said.append(f"scsql: created agent {agent} ({team_role}) in project {project}, key {row['key_file']}")
        return said, _new_login(ctx, admin, agent)
    said.append(f"scsql: agent {agent} exists in project {project}")
    return said, None


def _new_login(ctx, admin: str, agent: str) -> str | None:
    """A password for a new agent's own login, on a shared server whose agents log in as themselves."""
    from ..core import roles

    if ctx.settings.embedded or ctx.settings.agent_dsn:
        return None
    mode = roles.login_settings(admin)
    if mode is None or mode["one_login"]:
        return None
    return roles.issue_password(admin, agent)


def record_agent_env(ctx, agent: str, password: str | None) -> list[str]:
    """Record how AGENT's processes (its hooks, its MCP server) reach its
    database in the data directory (hooks/<agent>.env.json, 0600: it may hold
    the agent's password), when that is not the embedded default; never in
    a file of the project."""
    from urllib.parse import quote

    from ..core.command import uri
    from ..core.config import agent_env, agent_env_path

    home = str(ctx.settings.data_dir)
    env = dict(agent_env(home, agent))
    if os.environ.get("SCSQL_KEYSTORE"):
        env["SCSQL_KEYSTORE"] = str(ctx.settings.keystore)
    if ctx.settings.dsn or ctx.settings.agent_dsn:
        dsn = uri(ctx.agent_conninfo(agent))
        if password:
            user = dsn.split("://", 1)[1].split("@", 1)[0]
            dsn = dsn.replace(f"://{user}@", f"://{user}:{quote(password, safe='')}@", 1)
        if password or "SCSQL_AGENT_DSN" not in env or ctx.settings.agent_dsn:
            env["SCSQL_AGENT_DSN"] = dsn
    if not env or env == agent_env(home, agent):
        return []
    path = Path(agent_env_path(home, agent))
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    replace_file(path, (json.dumps(env, indent=2) + "\n").encode(), 0o600)
    return [f"  recorded  {path}  (how agent {agent}'s hooks and MCP server reach its database; 0600)"]


DISTILL_DAILY_TOKENS = 200_000  # scsql.set_distill's default, said in the help


def default_distiller(basis: str) -> str:
    """A distiller's agent name made from an agent's or project's name: lower
    case, characters an agent name may not hold as '_', '_distiller' after it."""
    stem = re.sub(r"[^a-z0-9_]+", "_", basis.lower()).strip("_")[:38] or "project"
    return (stem if stem[0].isalpha() else "d" + stem[:37]) + "_distiller"


def enable_distill(ctx, project: str, distiller: str | None = None, *, model: str | None = None,
                   daily_tokens: int | None = None, command: list[str] | None = None,
                   max_input_chars: int | None = None, fallback: str | None = None) -> list[str]:
    """Make PROJECT distil its sessions: its distiller agent (DISTILLER, else
    the one it has, else FALLBACK, else one named after the project) created
    with its key when it does not exist, then scsql.set_distill. Returns what
    was done (``scsql install claude --distill`` and ``scsql distill enable``)."""
    from ..core import roles

    admin = ctx.admin_conninfo()
    said = []
    with roles.admin_connection(admin) as conn:
        current = conn.execute("select distiller from scsql.distill_overview() where project = %s",
                               (project,)).fetchone()
    name = distiller or (current["distiller"] if current else fallback or default_distiller(project))
    found = next((a for a in roles.list_agents(admin) if a["agent"] == name), None)
    if found is None:
        row = roles.create_agent(admin, ctx.keystore, name, project, "distiller")
        said.append(f"scsql: created distiller agent {name} in project {project}, key {row['key_file']}")
    with roles.admin_connection(admin) as conn:
        s = conn.execute("select * from scsql.set_distill(%s, %s, true, %s, %s, %s, %s)",
                         (project, name, model, daily_tokens, command, max_input_chars)).fetchone()
    how = " ".join(s["command"]) if s["command"] else f"claude -p --model {s['model']}"
    said.append(f"scsql: project {project} distils its sessions with {how}, as agent {name}, "
                f"at most {s['daily_tokens']:,} tokens a day (UTC)")
    said.append(f"scsql: the jobs run in: scsql worker --agent {name}")
    return said


def cmd_install_claude(ctx, args: argparse.Namespace) -> int:
    if args.server:
        return _install_remote(ctx, args)
    _require_agent(args)
    directory, project, edits = _edits(ctx, args)  # every file read and checked before anything changes
    project = args.project or rooted_project(ctx, directory, args.agent) or project
    plans = [e.plan_install() for e in edits]
    said, password = ensure_project_and_agent(ctx, project, args.agent, args.role, directory)
    for line in said:
        print(line)
    for edit, (status, content) in zip(edits, plans):
        print(edit.apply(status, content))
    for line in record_agent_env(ctx, args.agent, password):
        print(line)
    if args.distill:
        for line in enable_distill(ctx, project, args.distiller, model=args.distill_model,
                           daily_tokens=args.distill_daily_tokens, fallback=default_distiller(args.agent)):
            print(line)
    if args.scope == "project":
        _exclude_from_git(directory, IDENTITY)
    marker = Path(ctx.settings.data_dir) / "hooks" / f"{args.agent}.misconfigured"
    marker.unlink(missing_ok=True)  # the agent acts again: its hooks spool what they cannot deliver
    return 0


def _require_agent(args: argparse.Namespace) -> None:
    from ..core.errors import AGENT_REQUIRED

    if not args.agent:
        raise ScsqlError(AGENT_REQUIRED, "name the agent with --agent NAME",
                         "with --server and a token, the team server says which agent the token is")


def _install_remote(ctx, args: argparse.Namespace) -> int:
    """install claude --server: the configuration of a team server's agent;
    nothing is done to a database here."""
    from . import remote

    args.server = remote.base_url(args.server)
    found = remote.whoami(args.server, args.token or os.environ.get(args.token_env), args.agent)
    if found is not None:
        args.agent = found["agent"]
        print(f"scsql: {args.server} acts as agent {found['agent']} (project {found['project']}) for this token "
              f"(token {found['token_id']}, scope {found['scope']})")
    else:
        _require_agent(args)
        print(f"scsql: no token given (--token, or ${args.token_env}): the team server was not asked; "
              f"the configuration is for agent {args.agent}")
    directory, _, edits = _edits(ctx, args)
    for edit, (status, content) in zip(edits, [e.plan_install() for e in edits]):
        print(edit.apply(status, content))
    if args.scope == "project":
        _exclude_from_git(directory, IDENTITY)
    print(f"scsql: no file holds the token: set {args.token_env} to it in the environment Claude Code starts in "
          f"(the MCP entry sends Bearer ${{{args.token_env}}}; the hooks read it too, and spool events in "
          f"{ctx.settings.data_dir / 'spool' / args.agent} when the server cannot be reached)")
    return 0


def _exclude_from_git(directory: Path, relative: str) -> None:
    """Keep RELATIVE out of git in this clone only (.git/info/exclude), never
    in a file that is committed."""
    info = directory / ".git" / "info"
    if not (directory / ".git").is_dir():
        return
    exclude = info / "exclude"
    line = "/" + relative
    try:
        have = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
        if line not in have.splitlines():
            info.mkdir(parents=True, exist_ok=True)
            with exclude.open("a", encoding="utf-8") as f:
                f.write(("" if have.endswith("\n") or not have else "\n") + line + "\n")
    except OSError:
        pass


def cmd_uninstall_claude(ctx, args: argparse.Namespace) -> int:
    _require_agent(args)
    if args.server:
        from . import remote

        args.server = remote.base_url(args.server)
    # The .mcp.json server is shared by the installs of every scope: it goes
    # with the last of them, and is not read while another still uses it.
    users = installed_in_other_scopes(ctx, args, project_dir(args.project_dir))
    directory, _, edits = _edits(ctx, args, mcp=not users)
    plans = [e.plan_uninstall() for e in edits]
    if users:
        where = ", ".join(f"the {scope}-scope hooks in {path}" for scope, path in users)
        print(f"  kept      {directory / '.mcp.json'}  (MCP server {server_name(args.agent)}; {where} still use it)")
    for edit, (status, content) in zip(edits, plans):
        print(edit.apply(status, content))
    claude = directory / ".claude"
    if claude.is_dir() and not claude.is_symlink() and not any(claude.iterdir()):
        claude.rmdir()  # nothing but scsql's files was in it
        print(f"  removed   {claude}  (empty)")
    print(f"scsql: agent {args.agent} keeps its key and history (scsql agent revoke {args.agent} retires it)")
    return 0


# -- the command line --------------------------------------------------------


def _options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--agent", help="the agent the MCP server and the hooks act as (required, but with --server and "
                                   "a token: the team server says which agent the token is)")
    p.add_argument("--project-dir", metavar="DIR",
                   help="the project's root directory (default: the git repository of the current directory)")
    p.add_argument("--project", metavar="NAME",
                   help="the scsql project (default: the project whose root is the directory, "
                        "as scsql up makes the default project's; else the directory's name, lower case)")
    p.add_argument("--scope", choices=SCOPES, default="project",
                   help="settings file for the hooks: project .claude/settings.json (default; commands that name "
                        "no agent and no path of this machine, to commit and share; the agent is this checkout's, "
                        "in .claude/scsql.local.json), local .claude/settings.local.json, user ~/.claude/settings.json")
    p.add_argument("--server", metavar="URL",
                   help="a team server (scsql serve) at URL instead of a database here: an HTTP MCP entry and "
                        "hooks that post to it (spooling here when it cannot be reached)")
    p.add_argument("--token-env", metavar="NAME", default="SCSQL_TOKEN",
                   help="with --server: the environment variable that holds the agent's token; the files name it, "
                        "never the token")


def register_install(commands: Commands) -> None:
    p = commands.group("install", "add scsql to an agent tool's configuration", "TARGET").add_parser(
        "claude", help="Claude Code: create the project and agent if needed, add the MCP server to .mcp.json "
                       "and the hooks to the settings file")
    _options(p)
    p.add_argument("--role", default=DEFAULT_TEAM_ROLE,
                   help=f"team role of an agent created now (default {DEFAULT_TEAM_ROLE})")
    p.add_argument("--token", help="with --server: a token to ask the server which agent it is, now; never written "
                                   "(default: the one in --token-env's variable)")
    p.add_argument("--distill", action="store_true",
                   help="also distil the project's sessions into facts, decisions and open loops with a model "
                        "(claude -p by default; docs/distill.md): creates its distiller agent")
    p.add_argument("--distiller", metavar="NAME",
                   help="with --distill: the distiller agent (default: the project's, else <agent>_distiller)")
    p.add_argument("--distill-model", metavar="MODEL", help="with --distill: the model claude -p runs (default haiku)")
    p.add_argument("--distill-daily-tokens", type=int, metavar="N",
                   help="with --distill: tokens the project's distillation may use per UTC day "
                        f"(default {DISTILL_DAILY_TOKENS:,})")
    p.set_defaults(sub_func=cmd_install_claude)
    p = commands.group("uninstall", "remove what scsql install added", "TARGET").add_parser(
        "claude", help="Claude Code: remove scsql's MCP server and hooks of the agent, keep everything else")
    _options(p)
    p.set_defaults(sub_func=cmd_uninstall_claude)
