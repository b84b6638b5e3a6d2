"""``scsql install claude`` and ``scsql uninstall claude``: scsql's MCP server
and hooks in a Claude Code project's configuration.

Install creates the project and the agent (with its key) when they do not
exist, then merges two things into JSON files Claude Code reads:

* the agent's MCP server, ``scsql-<agent>``, into ``<project-dir>/.mcp.json``;
* scsql's hooks (``scsql.hooks.events.settings_hooks``) into the settings
  file of the chosen scope: ``project`` (``.claude/settings.json``),
  ``local`` (``.claude/settings.local.json``) or ``user``
  (``~/.claude/settings.json``).

What is scsql's is known by its exact name: the server named ``scsql-<agent>``
and hook handlers whose command is exactly one scsql would write for this
agent and data directory (a handler of another type: the same handler but
for its timeout and flags). Everything else in the files is the user's and is
kept as it is. A file is written only when its content changes (so a second
install changes no byte), atomically (a temporary file beside it, renamed
over it, with the file's mode), after its previous bytes were copied to
``<file>.scsql-backup-<UTC time>``. A new backup per change, never
overwritten: a single ``.bak`` would be replaced by the next install or
uninstall and lose the user's original. A file that is a symbolic link, not
a regular file, or not JSON of the expected shape is refused and left as it
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
"""

from __future__ import annotations

import argparse
import copy
import errno
import json
import os
import re
import stat
import sys
import tempfile
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..core.errors import (
    CONFIG_NOT_REGULAR,
    CONFIG_UNPARSABLE,
    CONFIG_UNWRITABLE,
    INSTALL_CONFLICT,
    INSTALL_NO_PROJECT_DIR,
    ScsqlError,
)
from .events import settings_hooks
from .hookclient import IDENTITY_FILE as IDENTITY

SCOPES = ("project", "local", "user")
BACKUP_INFIX = ".scsql-backup-"
DEFAULT_TEAM_ROLE = "developer"
PORTABLE_SERVER = "scsql"  # the .mcp.json server of a committed install: the agent is this checkout's (scsql.local.json)

Json = dict[str, Any]


# -- where things go ---------------------------------------------------------


def git_root(start: Path) -> Path | None:
    """The nearest directory at or above START holding .git (a directory, or
    the file of a worktree), or None."""
    start = start.resolve()
    return next((d for d in (start, *start.parents) if (d / ".git").exists()), None)


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


def settings_path(scope: str, directory: Path) -> Path:
    """The Claude Code settings file of SCOPE (user: under $HOME)."""
    if scope == "user":
        return Path.home() / ".claude" / "settings.json"
    return directory / ".claude" / ("settings.local.json" if scope == "local" else "settings.json")


def server_name(agent: str) -> str:
    return f"scsql-{agent}"


def scsql_command() -> list[str]:
    """How Claude Code starts scsql: the console script installed beside this
    interpreter (not a shim on PATH), else this interpreter with -m scsql."""
    script = Path(sys.executable).with_name("scsql")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "scsql"]


def remote_server_entry(server: str, token_env: str, agent: str | None) -> Json:
    """The .mcp.json entry of a team server: its MCP endpoint over HTTP, the
    token read from TOKEN_ENV when Claude Code connects (never written here);
    for one agent (not a committed file), the agent it must be, so a token of
    another is refused (SC285)."""
    headers = {"Authorization": f"Bearer ${{{token_env}}}"}
    if agent is not None:
        headers["X-Scsql-Agent"] = agent
    return {"type": "http", "url": f"{server}/mcp", "headers": headers}


def mcp_server_entry(agent: str | None, env: dict[str, str]) -> Json:
    """The .mcp.json entry that runs ``scsql mcp --agent AGENT``; AGENT None:
    the portable ``scsql mcp`` (the scsql on PATH; the agent is the one
    .claude/scsql.local.json names), for a committed file."""
    if agent is None:
        return {"command": "scsql", "args": ["mcp"]}
    command = scsql_command()
    entry: Json = {"command": command[0], "args": [*command[1:], "mcp", "--agent", agent]}
    if env:
        entry["env"] = dict(env)
    return entry


# -- merging and removing ----------------------------------------------------


_TUNABLE = ("timeout", "async", "statusMessage")


# A command scsql wrote, in any of its forms (an older scsql's too): the hook
# client by path with the agent and data directory, or the portable one.
# A team server's (--server URL --token-env NAME) is the same handler: an
# install for a team server replaces the local one, and uninstall removes either.
_OUR_COMMAND = re.compile(
    r"^(?:\S+ -S -I \S*scsql/hooks/client\.py (?P<sub>[a-z-]+) --agent (?P<agent>\S+) --home (?P<home>.+?)"
    r"(?: --server \S+ --token-env \S+)?|scsql hook (?P<psub>[a-z-]+))(?: \|\| exit 1)?$")


def _identity(handler: Any) -> str | None:
    """What names a handler as scsql's: a command scsql writes by its event,
    agent and data directory (whatever form an older scsql wrote it in);
    another command by its exact text; any other kind by everything but its
    timeout and flags."""
    if not isinstance(handler, dict):
        return None
    if handler.get("type") == "command":
        command = str(handler.get("command"))
        m = _OUR_COMMAND.match(command)
        if m and m["psub"]:
            return f"scsql hook {m['psub']}"
        if m:
            return f"scsql hook {m['sub']} --agent {m['agent'].strip(chr(39))} --home {m['home'].strip(chr(39))}"
        return f"command {command}"
    return json.dumps({k: v for k, v in handler.items() if k not in _TUNABLE}, sort_keys=True)


def _handler_identities(hooks: Json) -> set[str | None]:
    return {_identity(h) for groups in hooks.values() for g in groups for h in g["hooks"]}


def _is_handler(x: Any, identities: set[str | None]) -> bool:
    return isinstance(x, dict) and _identity(x) in identities


def merge_hooks(data: Json, ours: Json) -> Json:
    """DATA (a settings object) with OURS merged into its "hooks": each handler
    of ours replaces the handler with the same command in a group of its event
    with the same matcher, or joins the first such group, or comes in a new
    group at the end. A handler of ours found under another matcher (moved by
    hand, or written by an older scsql) is taken out of there. Nothing else
    changes."""
    data = copy.deepcopy(data)
    hooks = data.setdefault("hooks", {})
    for event, groups in ours.items():
        existing = hooks.setdefault(event, [])
        placed = {(g.get("matcher"), _identity(h)) for g in groups for h in g["hooks"]}
        identities = {i for _, i in placed}
        for g in list(existing):
            stray = [x for x in g["hooks"]
                     if _is_handler(x, identities) and (g.get("matcher"), _identity(x)) not in placed]
            if stray:
                g["hooks"] = [x for x in g["hooks"] if not any(x is y for y in stray)]
                if not g["hooks"]:
                    existing.remove(g)
        for group in groups:
            for handler in group["hooks"]:
                _merge_handler(existing, group, handler)
    return data


def _merge_handler(existing: list, group: Json, handler: Json) -> None:
    same = {_identity(handler)}
    matching = [g for g in existing if g.get("matcher") == group.get("matcher")]
    for g in matching:
        for i, x in enumerate(g["hooks"]):
            if _is_handler(x, same):
                g["hooks"][i] = copy.deepcopy(handler)
                return
    if matching:
        matching[0]["hooks"].append(copy.deepcopy(handler))
        return
    new = {k: copy.deepcopy(v) for k, v in group.items() if k != "hooks"}
    new["hooks"] = [copy.deepcopy(handler)]
    existing.append(new)


def remove_hooks(data: Json, ours: Json) -> Json:
    """DATA without the handlers whose command is one of OURS, and without the
    groups, event lists and "hooks" object that removing them emptied."""
    data = copy.deepcopy(data)
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return data
    commands = _handler_identities(ours)
    removed_events = False
    for event in ours:
        groups = hooks.get(event)
        if not isinstance(groups, list):
            continue
        kept = []
        for g in groups:
            handlers = g.get("hooks") if isinstance(g, dict) else None
            if not isinstance(handlers, list) or not any(_is_handler(x, commands) for x in handlers):
                kept.append(g)
                continue
            g["hooks"] = [x for x in handlers if not _is_handler(x, commands)]
            if g["hooks"]:
                kept.append(g)
        if groups and not kept:
            del hooks[event]
            removed_events = True
        else:
            hooks[event] = kept
    if not hooks and removed_events:
        del data["hooks"]
    return data


def merge_server(data: Json, name: str, entry: Json) -> Json:
    data = copy.deepcopy(data)
    data.setdefault("mcpServers", {})[name] = copy.deepcopy(entry)
    return data


def remove_server(data: Json, name: str) -> Json:
    data = copy.deepcopy(data)
    servers = data.get("mcpServers")
    if isinstance(servers, dict) and name in servers:
        del servers[name]
        if not servers:
            del data["mcpServers"]
    return data


# -- reading and writing one file -------------------------------------------


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> Json:
    seen: Json = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"the key {key!r} appears twice in one object")
        seen[key] = value
    return seen


class ConfigFile:
    """One JSON configuration file: read once (never through a symbolic
    link), written only when its content changes, atomically, after a backup."""

    def __init__(self, path: Path):
        self.path = path
        self.raw: bytes | None = None  # None: the file does not exist
        self.mode: int | None = None
        self.data: Json = {}

    def read(self) -> ConfigFile:
        self.raw, self.mode = _read_plain(self.path)
        if self.raw is None:
            return self
        try:
            text = self.raw.decode("utf-8")
            data = json.loads(text, object_pairs_hook=_refuse_duplicates) if text.strip() else {}
        except (UnicodeDecodeError, ValueError) as exc:
            raise self.unparsable(f"it is not valid JSON ({exc})") from None
        if not isinstance(data, dict):
            raise self.unparsable(f"it holds a JSON {type(data).__name__}, not an object")
        self.data = data
        return self

    def unparsable(self, why: str) -> ScsqlError:
        return ScsqlError(CONFIG_UNPARSABLE, f"{self.path}: {why}; the file was left as it is",
                          "fix the file (or move it away), then run the command again")

    def render(self, data: Json) -> bytes:
        """DATA as JSON, indented like the file (two spaces for a new or one-line file)."""
        indent: int | str = 2
        if self.raw:
            found = re.search(rb"\n([ \t]+)\S", self.raw)
            if found:
                lead = found.group(1).decode()
                indent = lead if "\t" in lead else len(lead)
        return (json.dumps(data, indent=indent, ensure_ascii=False) + "\n").encode("utf-8")

    def backups(self) -> list[Path]:
        """The backups scsql made of this file, newest first."""
        found = self.path.parent.glob(self.path.name + BACKUP_INFIX + "*")
        return sorted((p for p in found if not p.is_symlink() and p.is_file()), reverse=True)

    def write(self, content: bytes | None) -> Path | None:
        """Replace the file with CONTENT (None: delete it); returns the backup made, if any."""
        now, mode = _read_plain(self.path)
        if now != self.raw:
            raise ScsqlError(CONFIG_UNWRITABLE, f"{self.path} changed while scsql was reading it; nothing was written",
                             "run the command again")
        backup = self._backup() if self.raw is not None else None
        try:
            if content is None:
                self.path.unlink()
            else:
                _replace(self.path, content, self.mode)
        except OSError as exc:
            raise ScsqlError(CONFIG_UNWRITABLE, f"{self.path}: cannot be written ({exc.strerror}); "
                                                "it was left as it is", "check the directory's permissions") from None
        return backup

    def _backup(self) -> Path:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        base = self.path.with_name(self.path.name + BACKUP_INFIX + stamp)
        for n in range(1, 1000):
            candidate = base if n == 1 else base.with_name(f"{base.name}-{n}")
            try:
                fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, self.mode or 0o600)
            except FileExistsError:
                continue
            except OSError as exc:
                raise ScsqlError(CONFIG_UNWRITABLE, f"{candidate}: the backup cannot be written ({exc.strerror}); "
                                                    f"{self.path} was left as it is") from None
            with os.fdopen(fd, "wb") as f:
                f.write(self.raw or b"")
                f.flush()
                os.fsync(f.fileno())
            return candidate
        raise ScsqlError(CONFIG_UNWRITABLE, f"too many backups of {self.path} made at {stamp}")


def _read_plain(path: Path) -> tuple[bytes | None, int | None]:
    """The bytes and mode of PATH (None, None when it does not exist); SC051
    for a symbolic link or anything but a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        if exc.errno == errno.ELOOP or path.is_symlink():
            raise ScsqlError(CONFIG_NOT_REGULAR, f"{path} is a symbolic link (to {os.readlink(path)}); scsql does "
                                                 "not write through it and left it as it is",
                             "merge the entries into the file it points to yourself, or replace the link by a file"
                             ) from None
        raise ScsqlError(CONFIG_UNWRITABLE, f"{path}: cannot be read ({exc.strerror})") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ScsqlError(CONFIG_NOT_REGULAR, f"{path} is not a regular file; scsql left it as it is",
                         "move it away, then run the command again")
    with os.fdopen(fd, "rb") as f:
        return f.read(), stat.S_IMODE(st.st_mode)


def _replace(path: Path, content: bytes, mode: int | None) -> None:
    """Write CONTENT to a temporary file beside PATH and rename it over PATH."""
    if mode is None:
        umask = os.umask(0o022)
        os.umask(umask)
        mode = 0o666 & ~umask
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dirfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dirfd)
    finally:
        os.close(dirfd)


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
    n = len(_handler_identities(ours))
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
        raise ScsqlError("SC002", f"agent {agent} was revoked at {found['revoked_at']} and can no longer act",
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

    from ..core.cli import uri
    from .hookclient import agent_env, agent_env_path

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
    _replace(path, (json.dumps(env, indent=2) + "\n").encode(), 0o600)
    return [f"  recorded  {path}  (how agent {agent}'s hooks and MCP server reach its database; 0600)"]


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
    from ..serve import remote

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
        from ..serve import remote

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


def register_install(sub, add) -> None:
    from ..core.cli import command_group

    p = command_group(sub, add, "install", "add scsql to an agent tool's configuration", "TARGET").add_parser(
        "claude", help="Claude Code: create the project and agent if needed, add the MCP server to .mcp.json "
                       "and the hooks to the settings file")
    _options(p)
    p.add_argument("--role", default=DEFAULT_TEAM_ROLE,
                   help=f"team role of an agent created now (default {DEFAULT_TEAM_ROLE})")
    p.add_argument("--token", help="with --server: a token to ask the server which agent it is, now; never written "
                                   "(default: the one in --token-env's variable)")
    p.set_defaults(sub_func=cmd_install_claude)
    p = command_group(sub, add, "uninstall", "remove what scsql install added", "TARGET").add_parser(
        "claude", help="Claude Code: remove scsql's MCP server and hooks of the agent, keep everything else")
    _options(p)
    p.set_defaults(sub_func=cmd_uninstall_claude)
