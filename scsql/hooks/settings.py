"""Claude Code's configuration files as scsql edits them: where each
scope's settings file is (``settings_path``), scsql's MCP server entry
(``mcp_server_entry``), merging scsql's hooks and server into a file's
object and removing them (``merge_hooks``, ``remove_hooks``,
``merge_server``, ``remove_server``; a team server's entry:
``remote_server_entry``), and reading and writing one file
safely (``ConfigFile``). ``install.py`` runs ``scsql install claude`` and
``uninstall`` with them; ``scsql doctor`` reads the same files with them.

What is scsql's is known by its exact name: the server named
``scsql-<agent>`` and hook handlers whose command is exactly one scsql would
write for this agent and data directory (a handler of another type: the
same handler but for its timeout and flags). Everything else in the files
is the user's and is kept as it is. A file is written only when its content
changes, atomically (a temporary file beside it, renamed over it, with the
file's mode), after its previous bytes were copied to
``<file>.scsql-backup-<UTC time>``. A file that is a symbolic link, not a
regular file, or not JSON of the expected shape is refused and left as it
is.
"""

from __future__ import annotations

import copy
import errno
import json
import os
import re
import stat
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..core.errors import CONFIG_NOT_REGULAR, CONFIG_UNPARSABLE, CONFIG_UNWRITABLE, ScsqlError

SCOPES = ("project", "local", "user")
PORTABLE_SERVER = "scsql"  # the .mcp.json server of a committed install: the agent is this checkout's (scsql.local.json)
BACKUP_INFIX = ".scsql-backup-"

Json = dict[str, Any]


# -- where things go ---------------------------------------------------------


def git_root(start: Path) -> Path | None:
    """The nearest directory at or above START holding .git (a directory, or
    the file of a worktree), or None."""
    start = start.resolve()
    return next((d for d in (start, *start.parents) if (d / ".git").exists()), None)


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


def handler_identities(hooks: Json) -> set[str | None]:
    """What names each handler of HOOKS as scsql's (see ``_identity``)."""
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
    commands = handler_identities(ours)
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
                replace_file(self.path, content, self.mode)
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


def replace_file(path: Path, content: bytes, mode: int | None) -> None:
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
