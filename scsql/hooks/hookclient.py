"""The hook process Claude Code runs for every event: standard library only,
one file, started as ``python -S -I <this file> <subcommand> --agent NAME
--home DIR`` so it costs little more than the interpreter's own start.

It reads the event JSON on stdin, checks it, stamps it with
``scsql_event_id`` and ``scsql_received_at``, and hands it to the agent's
hook server over the unix socket ``<home>/hooks/<agent>.sock`` within the
event's budget. Socket and spool are used only in directories no other user
controls (``check_private``), and only a server of this user is talked to.
Protocol, one JSON line each way::

    request  {"event": {...}, "budget": seconds}
    reply    {"output": {...} | null, "exit": 0 | 2, "stderr": "..." | null, "degraded": "..." | null}

When the server cannot be reached, is slow, or fails, the hook fails open:
it answers at once with no decision (the call goes through Claude Code's own
permission rules), says once per Claude session that scsql is degraded (a
``systemMessage``), appends the event to the spool (``<home>/spool/<agent>/``,
files 0600 in a 0700 directory, written then fsynced then renamed into place,
so a spool file is always whole) and starts the server, detached, without
waiting for it. A malformed event gets one line on stderr and exit status 1
(non-blocking), never a traceback.

With ``--server URL --token-env NAME`` (what ``scsql install claude
--server`` writes; a committed install reads both from
.claude/scsql.local.json) the agent's hook server is a team server
(``scsql serve``) on another machine: the event is POSTed to
``URL/hooks/event`` with the bearer token the environment variable NAME
holds (never a file), and everything else stays as above: no answer within
the budget, or a refusal, fails open with the same notice, and the event is
spooled here. The spool goes to ``URL/hooks/replay``, oldest first, by the
hooks Claude Code does not wait for (PostToolUse, PostToolUseFailure) and by
capture-only events, which join the spool when it is not empty so they are
written after it. Claude Code's own ``"type": "http"`` hooks would post
events to the server too, but what they cannot deliver is lost: they keep
no spool.

Imports are the bulk of a small Python program's start, so this file uses the
C halves of ``json`` and ``socket`` directly when it can (HTTP too: one
request over ``_socket``, ssl imported only for an https server).
"""

import os
import sys
import time

# -- the events ----------------------------------------------------------------
# event, subcommand, matcher (None: no matcher), timeout (s, Claude Code's hard limit),
# capture-only (the answer is always empty: batched, may be async), spooled when
# it cannot be delivered, budget (s the hook waits for the server), async.
EVENTS = (
    ("SessionStart", "session-start", None, 30, False, True, 5.0, False),
    ("UserPromptSubmit", "user-prompt-submit", None, 15, False, True, 2.0, False),
    ("PreToolUse", "pre-tool-use", "*", 10, False, False, 0.2, False),
    ("PostToolUse", "post-tool-use", "*", 30, True, True, 5.0, True),
    ("PostToolUseFailure", "post-tool-use-failure", "*", 30, True, True, 5.0, True),
    ("PreCompact", "pre-compact", None, 60, True, True, 30.0, False),
    ("SessionEnd", "session-end", None, 60, True, True, 30.0, False),
    ("Stop", "stop", None, 15, False, False, 5.0, False),
    ("SubagentStop", "subagent-stop", None, 15, False, False, 5.0, False),
    ("TeammateIdle", "teammate-idle", None, 15, False, False, 5.0, False),
    ("TaskCompleted", "task-completed", None, 15, False, False, 5.0, False),
    ("ConfigChange", "config-change", None, 15, False, False, 2.0, False),
)
BY_SUBCOMMAND = {row[1]: row for row in EVENTS}
TOOL_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure")

MAX_EVENT_BYTES = 8 * 1024 * 1024  # what the hook sends and spools at most: a larger event is shrunk (shrink)
MAX_READ_BYTES = 256 * 1024 * 1024  # what the hook parses at most: a larger event is recorded as a stub (stub_event)
LONG_STRING = 256 * 1024  # a string of a shrunk event keeps this many characters at most
PRECUT_MARGIN = 8192  # characters kept past a column's bound for redaction to see whole (longer than any secret but a key block)
MAX_REPLY_BYTES = 16 * 1024 * 1024
COLD_BUDGET = 8.0  # s a PreToolUse hook waits for a hook server it had to start (Claude Code allows it 10)
AGENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")
BOOT = ("import sys; sys.path.insert(0, sys.argv.pop(1)); from scsql.hook_server import main; "
        "sys.exit(main(sys.argv[1:]))")

# -- JSON without importing json (re, enum and friends cost ~10 ms) ------------

try:
    import _json

    class _Ctx:
        strict = True
        object_hook = None
        object_pairs_hook = None
        parse_float = float
        parse_int = int
        memo: dict = {}

        @staticmethod
        def parse_constant(name):
            raise ValueError(f"{name} is not JSON")

    _SCAN = _json.make_scanner(_Ctx)
    _ENCODE = _json.make_encoder(None, lambda o: str(o), _json.encode_basestring_ascii, None, ": ", ", ",
                                 False, False, False)

    def loads(text):
        i, n = 0, len(text)
        while i < n and text[i] in " \t\r\n":
            i += 1
        try:
            obj, end = _SCAN(text, i)
        except StopIteration:
            raise ValueError("not JSON") from None
        finally:
            _Ctx.memo.clear()
        while end < n and text[end] in " \t\r\n":
            end += 1
        if end != n:
            raise ValueError(f"extra data at character {end}")
        return obj

    def dumps(obj):
        return "".join(_ENCODE(obj, 0))

    def quote(s):
        return _json.encode_basestring_ascii(s)
except ImportError:  # another Python: the plain module
    import json as _fallback

    def loads(text):
        return _fallback.loads(text)

    def dumps(obj):
        return _fallback.dumps(obj, default=str)

    def quote(s):
        return _fallback.dumps(s)

try:
    import _socket as _sock
except ImportError:  # pragma: no cover
    import socket as _sock


SPAWN_ENV = {}  # what a hook server this hook starts is given besides the environment


class Malformed(Exception):
    """The event cannot be taken: exit 1 with this message."""


# -- bounding what is sent and stored ------------------------------------------
# What ends a word: whitespace, quotes, brackets and list separators, none of
# which occurs inside a token, key, JWT or URL with a password (the same set
# as scsql._word_break in sql/14_capture.sql).
SEPARATORS = frozenset(" \t\n\r\f\v\"'`,;()[]{}<>|\u00a0\u2028\u2029")


# -- what is never stored ----------------------------------------------------------
# Text inside <private>...</private> (the user's own marker) is never stored:
# not in a row, the spool, a log or a summary. Claude Code's own wrappers
# (system reminders, persisted output, command tags) are taken out so they
# never come back as memory: a reminder holds context Claude Code injected,
# recall's among it.
SCRUB_MARKERS = ("<private", "<system-reminder", "<persisted-output", "<local-command-", "<command-", "<bash-")
PRIVATE_MARK = "[private]"
_SCRUB = None


def _scrub_patterns():
    global _SCRUB
    if _SCRUB is None:
        import re

        _SCRUB = (
            (re.compile(r"<private\b[^>]*>.*?(?:</private\s*>|\Z)", re.I | re.S), PRIVATE_MARK),
            (re.compile(r"<(system-reminder|persisted-output)\b[^>]*>.*?(?:</\1\s*>|\Z)", re.I | re.S), ""),
            (re.compile(r"</?(?:local-command-stdout|local-command-stderr|local-command-caveat|command-name|"
                        r"command-message|command-args|command-contents|bash-input|bash-stdout|bash-stderr)\s*>",
                        re.I), ""),
        )
    return _SCRUB


def scrub(text):
    """TEXT without what is never stored: each <private> block (one left open
    runs to the end) is [private]; Claude Code's reminders and persisted output
    are gone; its command tags are taken off what they wrap."""
    if "<" not in text:
        return text
    low = text.lower()
    if not any(m in low for m in SCRUB_MARKERS):
        return text
    for pattern, by in _scrub_patterns():
        text = pattern.sub(by, text)
    return text


def scrub_private(text):
    """scrub, but Claude Code's command tags stay (the transcript reader tells
    typed requests from command output by them; what it stores is scrubbed whole)."""
    if "<" not in text or not needs_scrub(text):
        return text
    for pattern, by in _scrub_patterns()[:2]:
        text = pattern.sub(by, text)
    return text


def scrub_value(value):
    """VALUE with every string (object keys too) scrubbed."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub(k) if isinstance(k, str) else k: scrub_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_value(v) for v in value]
    return value


def needs_scrub(text):
    """Whether a JSON text may hold something scrub takes out (a cheap test on the raw event)."""
    low = text.lower()
    return any(m in low for m in SCRUB_MARKERS)


def cut_point(text, n):
    """The largest position <= N where TEXT may be cut without keeping part of
    a word: N itself when a separator is on either side of it."""
    if n >= len(text):
        return len(text)
    if n <= 0:
        return 0
    if text[n] in SEPARATORS or text[n - 1] in SEPARATORS:
        return n
    while n > 0 and text[n - 1] not in SEPARATORS:
        n -= 1
    return n


def precut(text, n):
    """TEXT cut where a word ends to at most N characters (no mark: what is
    stored is clipped again, and marked, by scsql.storable)."""
    return text if len(text) <= n else text[:cut_point(text, n)]


def as_text(value):
    """A value as a preview shows it: a string as it is, anything else as JSON."""
    if value is None or isinstance(value, str):
        return value
    import json

    return json.dumps(value, ensure_ascii=False, default=str)


def measure(text):
    """The UTF-8 length and sha256 of TEXT (lone surrogates as they would be encoded, unpaired)."""
    import hashlib

    data = text.encode("utf-8", "surrogatepass")
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


# -- paths ---------------------------------------------------------------------


def default_home():
    """The scsql data directory when --home is not given (as Settings.load finds it)."""
    given = os.environ.get("SCSQL_DATA_DIR")
    if given:
        return os.path.abspath(os.path.expanduser(given))
    if sys.platform == "darwin":
        return os.path.expanduser("~/Library/Application Support/scsql")
    base = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    return os.path.join(base, "scsql")


IDENTITY_FILE = os.path.join(".claude", "scsql.local.json")


def project_identity(project_dir=None):
    """Who this checkout's hooks and MCP server act as on this machine: the
    object .claude/scsql.local.json of the project directory holds (GIVEN,
    else $CLAUDE_PROJECT_DIR, else the current directory), which ``scsql
    install claude`` writes: agent and home (the data directory, where
    ``core.config.agent_env`` finds how the agent reaches its database). None
    when there is none. It is this machine's file, never committed: the settings that name
    no agent are; it holds no secret."""
    d = project_dir or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    try:
        with open(os.path.join(d, IDENTITY_FILE), encoding="utf-8") as f:
            data = loads(f.read(65536))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("agent"), str):
        return None
    return data


def socket_path(home, agent):
    return os.path.join(home, "hooks", agent + ".sock")


def spool_dir(home, agent):
    return os.path.join(home, "spool", agent)


def private_dir(path):
    """``path`` (and its missing parents) as a directory only its owner may enter.
    Raises PermissionError (changing nothing) when another local user could
    read or plant files there: see ``check_private``."""
    try:
        os.mkdir(path, 0o700)
    except FileNotFoundError:
        private_dir(os.path.dirname(path))
        return private_dir(path)
    except FileExistsError:
        pass
    st = check_private(path)
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def check_private(path):
    """The stat of directory ``path`` when it is this user's and no other user
    can change what it holds; PermissionError otherwise (FileNotFoundError when
    it is missing). It must be a directory of this user, and every directory
    above it (as written and as resolved) this user's or root's and writable
    by no one else unless sticky (as /tmp is): another user who may rename or
    create entries there could put a directory, socket or spool file of theirs
    in its place, read the events written there and plant events or answers."""
    uid = os.getuid()
    st = os.stat(path)
    if (st.st_mode & 0o170000) != 0o040000 or st.st_uid != uid:
        raise PermissionError(f"{path} is not a directory of user {uid}: scsql keeps hook sockets and spooled "
                              "events only in directories no other user controls")
    seen = set()
    for start in (os.path.abspath(path), os.path.realpath(path)):
        d = start
        while True:
            up = os.path.dirname(d)
            if up == d:
                break
            d = up
            if d in seen:
                continue
            seen.add(d)
            a = os.stat(d)
            if a.st_uid not in (uid, 0) or (a.st_mode & 0o022 and not a.st_mode & 0o1000):
                raise PermissionError(f"{path} is inside {d}, which another user may change (owner uid {a.st_uid}, "
                                      f"mode {a.st_mode & 0o7777:o}): scsql keeps hook sockets and spooled events "
                                      "only in directories no other user controls (chmod go-w, or choose another "
                                      "--home / SCSQL_DATA_DIR)")
    return st


def peer_uid(sock):
    """The user id of the process at the other end of a connected unix socket (None where the platform does not say)."""
    opt = getattr(_sock, "SO_PEERCRED", None)
    if opt is None:
        return None
    creds = sock.getsockopt(_sock.SOL_SOCKET, opt, 12)  # struct ucred: pid, uid, gid
    return int.from_bytes(creds[4:8], sys.byteorder)


def unix_address(path):
    """A unix socket address for ``path``; a path longer than sun_path allows
    goes through /proc/self/fd of its directory (Linux)."""
    if len(os.fsencode(path)) < 100:
        return path, None
    fd = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    return f"/proc/self/fd/{fd}/{os.path.basename(path)}", fd


# -- the spool -----------------------------------------------------------------


def spool_name():
    return f"{time.time_ns():020d}-{os.getpid()}-{os.urandom(4).hex()}.jsonl"


def spool_totals(home, only=None):
    """Events in every agent's spool under HOME (or agent ONLY's): (waiting to
    be written, kept in failed/ because not even a stub of them could be stored)."""
    waiting = failed = 0
    root = os.path.join(home, "spool")
    try:
        agents = [only] if only else os.listdir(root)
    except OSError:
        return 0, 0
    for agent in agents:
        for sub, is_failed in (("", False), ("claimed", False), ("failed", True)):
            d = os.path.join(root, agent, sub)
            try:
                names = [n for n in os.listdir(d) if n.endswith(".jsonl")]
            except OSError:
                continue
            for n in names:
                try:
                    with open(os.path.join(d, n), "rb") as f:
                        count = sum(1 for line in f if line.strip())
                except OSError:
                    continue
                if is_failed:
                    failed += count
                else:
                    waiting += count
    return waiting, failed


def spool_write(home, agent, lines, *, name=None):
    """Write ``lines`` (JSON texts, one event each) as one spool file: created
    0600 with O_EXCL in tmp/, appended, fsynced, then renamed into the spool
    directory. Returns its path."""
    d = private_dir(spool_dir(home, agent))
    tmp_dir = private_dir(os.path.join(d, "tmp"))
    name = name or spool_name()
    tmp = os.path.join(tmp_dir, name)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        data = "".join(line + "\n" for line in lines).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    final = os.path.join(d, name)
    os.rename(tmp, final)
    _fsync_dir(d)
    return final


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- talking to the server -----------------------------------------------------


class Unreachable(Exception):
    """No server listens (start one)."""


def exchange(home, agent, request, budget):
    """Send one request line, return the parsed reply; OSError/TimeoutError/ValueError on failure."""
    deadline = time.monotonic() + budget
    try:
        path, dir_fd = unix_address(socket_path(home, agent))
    except FileNotFoundError as exc:  # a long path's directory is made by the first server
        raise Unreachable(str(exc)) from None
    s = _sock.socket(_sock.AF_UNIX, _sock.SOCK_STREAM)
    try:
        s.settimeout(budget)
        try:
            check_private(os.path.join(home, "hooks"))
            s.connect(path)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise Unreachable(str(exc)) from None
        finally:
            if dir_fd is not None:
                os.close(dir_fd)
        peer = peer_uid(s)
        if peer is not None and peer != os.getuid():
            raise PermissionError(f"the hook server at {path} runs as user {peer}, not {os.getuid()}: not talking to it")
        s.sendall(request)
        chunks, size = [], 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer within {budget:g} s")
            s.settimeout(left)
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_REPLY_BYTES:
                raise ValueError("reply too large")
            if chunk.endswith(b"\n"):
                break
    finally:
        s.close()
    reply = loads(b"".join(chunks).decode())
    if not isinstance(reply, dict):
        raise ValueError("the reply is not a JSON object")
    return reply


def server_starting(home, agent):
    """True when a server holds the agent's lock (running, or still starting)."""
    import fcntl

    try:
        fd = os.open(os.path.join(home, "hooks", agent + ".lock"), os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def spawn_server(home, agent):
    """Start the agent's hook server in a session of its own, not waiting for it."""
    if server_starting(home, agent):
        return
    hooks = private_dir(os.path.join(home, "hooks"))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    argv = [sys.executable, "-c", BOOT, root, "serve", "--agent", agent, "--home", home, "--detached"]
    log = os.path.join(hooks, agent + ".log")
    actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
               (os.POSIX_SPAWN_OPEN, 1, log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600),
               (os.POSIX_SPAWN_DUP2, 1, 2)]
    os.posix_spawn(sys.executable, argv, {**os.environ, **SPAWN_ENV}, file_actions=actions, setsid=True)


def first_notice(home, agent, session_id):
    """True the first time scsql's degraded state is reported in this Claude session."""
    state = private_dir(os.path.join(home, "hooks", agent + ".notified"))
    name = session_id.encode("utf-8", "replace").hex()[:200] or "unknown"
    try:
        os.close(os.open(os.path.join(state, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    except FileExistsError:
        return False
    return True


# -- a team server over HTTP ----------------------------------------------------

REMOTE_MIN_BUDGET = 1.0  # s a decision event waits at least for a server across a network
REPLAY_BUDGET = 20.0  # s a hook spends at most sending the spool
REPLAY_BATCH = 500  # events sent in one request at most (the server takes 1000)
ENV_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


class Refused(Exception):
    """The server answered with a refusal (its JSON-RPC error's message)."""


def remote_of(server, token_env):
    """(server URL, token variable) of a team server, or None; Malformed when one comes without the other."""
    if server is None and token_env is None:
        return None
    if not server or not token_env:
        raise Malformed("--server URL and --token-env NAME go together")
    if not server.startswith(("http://", "https://")):
        raise Malformed(f"--server must be an http:// or https:// URL, got {server!r}")
    if not set(token_env) <= ENV_NAME_CHARS or token_env[0].isdigit():
        raise Malformed(f"--token-env must name an environment variable (A-Z, 0-9, _), got {token_env!r}")
    return server.rstrip("/"), token_env


def _split_url(url):
    scheme, _, rest = url.partition("://")
    hostport, slash, path = rest.partition("/")
    host, port = hostport, 443 if scheme == "https" else 80
    if hostport.startswith("["):  # an IPv6 address
        host, _, tail = hostport[1:].partition("]")
        port = int(tail[1:]) if tail.startswith(":") else port
    elif ":" in hostport:
        host, _, p = hostport.rpartition(":")
        port = int(p)
    return scheme, host, port, hostport, ("/" + path if slash else "")


def _read_reply(sock, deadline):
    data = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no answer in time")
        sock.settimeout(left)
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_REPLY_BYTES:
            raise ValueError("reply too large")
    head, _, body = bytes(data).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    if headers.get("transfer-encoding", "").lower() == "chunked":
        out, rest = bytearray(), body
        while rest:
            size, _, rest = rest.partition(b"\r\n")
            n = int(size.split(b";")[0], 16)
            if n == 0:
                break
            out += rest[:n]
            rest = rest[n + 2:]
        body = bytes(out)
    return status, body


def http_post(server, path, body, token, agent, budget):
    """POST BODY (JSON bytes) to SERVER + PATH with TOKEN (saying it is
    AGENT's, when given: the server refuses another agent's token), one
    request, within BUDGET seconds: the reply's JSON object; Refused (with
    the server's message) for any other status; OSError/TimeoutError/ValueError."""
    deadline = time.monotonic() + budget
    scheme, host, port, hostport, base = _split_url(server)
    info = _sock.getaddrinfo(host, port, 0, _sock.SOCK_STREAM)[0]
    sock = _sock.socket(info[0], info[1], info[2])
    try:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        sock.connect(info[4])
        if scheme == "https":
            import ssl  # only here: its import costs more than the rest of the hook

            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
        named = f"X-Scsql-Agent: {agent}\r\n" if agent else ""
        head = (f"POST {base}{path} HTTP/1.1\r\nHost: {hostport}\r\nAuthorization: Bearer {token}\r\n{named}"
                f"Content-Type: application/json\r\nAccept: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
        sock.sendall(head.encode("latin-1") + body)
        status, data = _read_reply(sock, deadline)
    finally:
        sock.close()
    try:
        reply = loads(data.decode("utf-8"))
    except ValueError:
        reply = None
    if status != 200:
        error = reply.get("error") if isinstance(reply, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        raise Refused(str(message) if message else f"HTTP {status}")
    if not isinstance(reply, dict):
        raise ValueError("the reply is not a JSON object")
    return reply


def local_git(cwd):
    """(branch, commit) checked out in CWD on this machine, as the team server cannot see it."""
    if not isinstance(cwd, str) or not os.path.isdir(cwd):
        return None, None
    import subprocess

    try:
        out = subprocess.run(["git", "-C", cwd, "rev-parse", "--abbrev-ref", "HEAD", "HEAD"], capture_output=True,
                             text=True, timeout=2, stdin=subprocess.DEVNULL).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None, None
    return (out[0], out[1]) if len(out) == 2 else (None, None)


def deliver_remote(row, agent, home, remote, line, event):
    """The event POSTed to the team server: (its reply or None, why there is
    none, whether the event is in the spool already)."""
    server, token_env = remote
    token = os.environ.get(token_env, "").strip()
    if not token:
        return None, f"the environment variable {token_env} holds no token of agent {agent}", False
    budget = max(row[6], REMOTE_MIN_BUDGET)
    if row[4] and spool_waiting(home, agent):  # capture-only: written after what waits in the spool
        spool_write(home, agent, [line])
        try:
            replay_remote(home, agent, server, token, time.monotonic() + max(budget, REPLAY_BUDGET))
        except Exception as exc:  # noqa: BLE001
            return None, f"the team server {server} did not take the spool: {exc}", True
        return {}, None, True
    try:
        reply = http_post(server, "/hooks/event", f'{{"event": {line}, "budget": {budget}}}'.encode(), token,
                          agent, budget)
    except Refused as exc:
        return None, f"the team server {server} refused the event: {exc}", False
    except TimeoutError:
        return None, f"the team server {server} did not answer within {budget:g} s", False
    except Exception as exc:  # noqa: BLE001
        return None, f"the team server {server} cannot be reached: {exc}", False
    if row[7] and spool_waiting(home, agent):  # Claude Code does not wait for this hook: send the spool
        try:
            replay_remote(home, agent, server, token, time.monotonic() + REPLAY_BUDGET)
        except Exception:  # noqa: BLE001 - it stays spooled for the next hook
            pass
    return reply, None, False


def spool_waiting(home, agent):
    d = spool_dir(home, agent)
    for sub in (d, os.path.join(d, "claimed")):
        try:
            if any(n.endswith(".jsonl") for n in os.listdir(sub)):
                return True
        except OSError:
            pass
    return False


def replay_remote(home, agent, server, token, deadline):
    """Send the agent's spool to the team server, oldest first, each file
    deleted once the server took it (what it could not even stub goes to
    failed/); one replayer at a time (the spool's replay lock). Stops at the
    deadline or the first failure, which it raises: the rest stays spooled.
    Returns the events sent."""
    import fcntl

    d = private_dir(spool_dir(home, agent))
    claimed = private_dir(os.path.join(d, "claimed"))
    lock = os.open(os.path.join(d, ".replay.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    sent = 0
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return 0
        while time.monotonic() < deadline:
            names = sorted([(n, claimed) for n in os.listdir(claimed) if n.endswith(".jsonl")]
                           + [(n, d) for n in os.listdir(d) if n.endswith(".jsonl")])
            if not names:
                break
            for name, where in names:
                if time.monotonic() >= deadline:
                    break
                path = os.path.join(claimed, name)
                if where == d:
                    os.rename(os.path.join(d, name), path)
                sent += _replay_file(home, agent, server, token, path, deadline)
    finally:
        os.close(lock)
    return sent


def _replay_file(home, agent, server, token, path, deadline):
    with open(path, encoding="utf-8") as f:
        lines = [ln.strip() for ln in f if ln.strip()]
    kept = []
    for i in range(0, len(lines), REPLAY_BATCH):
        body = ('{"events": [' + ", ".join(lines[i:i + REPLAY_BATCH]) + "]}").encode()
        try:
            reply = http_post(server, "/hooks/replay", body, token, agent,
                              max(0.5, min(30.0, deadline - time.monotonic())))
        except Refused as exc:
            from ..core import errors  # only here: a refusal

            if errors.HOOK_REQUEST_INVALID not in str(exc):
                raise
            kept.extend(lines[i:i + REPLAY_BATCH])  # not events the server can read: kept for a person
            continue
        kept.extend(dumps(e) for e in reply.get("kept") or [])
    if kept:
        failed = private_dir(os.path.join(spool_dir(home, agent), "failed"))
        name = os.path.basename(path)
        with open(os.open(os.path.join(failed, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.write("".join(k + "\n" for k in kept))
    os.unlink(path)
    return len(lines) - len(kept)


# -- the hook ------------------------------------------------------------------


def parse_args(argv):
    if not argv or argv[0] not in BY_SUBCOMMAND:
        known = ", ".join(BY_SUBCOMMAND)
        raise Malformed(f"unknown hook event {argv[0] if argv else '(none)'!r}; known: {known}")
    opts = {"--agent": None, "--home": None, "--server": None, "--token-env": None}
    rest = argv[1:]
    i = 0
    while i < len(rest):
        arg = rest[i]
        key, eq, val = arg.partition("=")
        if key not in opts:
            raise Malformed(f"unknown argument {arg!r} (usage: {argv[0]} --agent NAME [--home DIR] "
                            "[--server URL --token-env NAME])")
        if not eq:
            i += 1
            if i >= len(rest):
                raise Malformed(f"{key} needs a value")
            val = rest[i]
        opts[key] = val
        i += 1
    agent, home = opts["--agent"], opts["--home"]
    server, token_env = opts["--server"], opts["--token-env"]
    if agent is None:
        found = project_identity()
        if found is None:
            where = os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
            raise Malformed(f"no agent named, and {os.path.join(where, IDENTITY_FILE)} does not say which: run "
                            "`scsql install claude --agent NAME` in this project")
        agent, home = found["agent"], home or found.get("home")
        server, token_env = server or found.get("server"), token_env or found.get("token_env")
    if not agent or not set(agent) <= AGENT_CHARS or agent[0] == "." or len(agent) > 100:
        raise Malformed(f"--agent must name the agent (letters, digits, _ - .), got {agent!r}")
    home = os.path.abspath(home or default_home())
    SPAWN_ENV["SCSQL_DATA_DIR"] = home
    return BY_SUBCOMMAND[argv[0]], agent, home, remote_of(server, token_env)


def read_event(stdin_fd, row):
    """The event on stdin as (JSON text, object). An event over MAX_EVENT_BYTES
    is shrunk (its long strings clipped, their fields measured); one over
    MAX_READ_BYTES is not parsed but recorded as a stub: a real event is never
    refused for its size."""
    chunks, size, digest = [], 0, None
    while True:
        chunk = os.read(stdin_fd, 1 << 20)
        if not chunk:
            break
        size += len(chunk)
        if digest is None and size > MAX_READ_BYTES:
            import hashlib

            digest = hashlib.sha256()
            for c in chunks:
                digest.update(c)
            chunks = [b"".join(chunks)[:1 << 20]]
        if digest is not None:
            digest.update(chunk)
        else:
            chunks.append(chunk)
    if digest is not None:
        event = checked(stub_event(chunks[0], size, digest.hexdigest(), row), row)
        return dumps(event), event
    data = b"".join(chunks)
    try:
        text, bad = data.decode("utf-8"), None
    except UnicodeDecodeError as exc:  # bytes that are not UTF-8 inside a string become U+FFFD
        text, bad = data.decode("utf-8", "replace"), f"the event is not UTF-8 ({exc.reason} at byte {exc.start})"
    if not text.strip():
        raise Malformed("no event on stdin (expected the hook's JSON object)")
    try:
        event = loads(text)
    except (ValueError, RecursionError) as exc:
        raise Malformed(bad or f"the event is not JSON ({exc})") from None
    if not isinstance(event, dict):
        raise Malformed("the event is not a JSON object")
    if needs_scrub(text):  # before anything is spooled or sent: private text never leaves this process
        event = scrub_value(event)
        text = dumps(event)
    if size > MAX_EVENT_BYTES:
        event = shrink(event, size, row)
        text = dumps(event)
    checked(event, row)
    return text.strip(), event


def checked(event, row):
    """EVENT when it is one of this hook's events; Malformed otherwise."""
    name = event.get("hook_event_name")
    if name != row[0]:
        raise Malformed(f"hook_event_name is {name!r}, but this is the {row[1]} hook ({row[0]})")
    sid = event.get("session_id")
    if not isinstance(sid, str) or not sid:
        raise Malformed("the event has no session_id")
    if row[0] in TOOL_EVENTS and not isinstance(event.get("tool_name"), str):
        raise Malformed("the event has no tool_name")
    return event


def shrink(event, size, row):
    """EVENT within MAX_EVENT_BYTES: each string longer than a bound cut where
    a word ends (the bound shrinks until the event fits), and the UTF-8 length
    and sha256 of each field it cut, as a preview would show the whole field,
    in scsql_sizes. A stub when no bound makes it fit."""
    import json

    sizes = {}
    limit = LONG_STRING
    while limit >= 1024:
        cut = set()

        def walk(v, top):
            if isinstance(v, str) and len(v) > limit:
                cut.add(top)
                return precut(v, limit)
            if isinstance(v, dict):
                return {k: walk(x, top) for k, x in v.items()}
            if isinstance(v, list):
                return [walk(x, top) for x in v]
            return v
        out = {k: walk(v, k) for k, v in event.items()}
        if len(json.dumps(out)) <= MAX_EVENT_BYTES - 4096:
            for k in cut:
                sizes[k] = measure(as_text(event[k]))
            out["scsql_sizes"] = sizes
            return out
        limit //= 4
    head = json.dumps({k: event.get(k) for k in ("hook_event_name", "session_id", "tool_name", "tool_use_id")})
    import hashlib

    return stub_event(head.encode(), size, hashlib.sha256(json.dumps(event).encode()).hexdigest(), row)


def stub_event(head, size, sha256, row):
    """An event too large to parse or to shrink, as a stub: its names, read
    from the start of its text, and its size and sha256."""
    import re

    text = head.decode("utf-8", "replace")
    event = {"hook_event_name": row[0]}
    for key in ("session_id", "tool_name", "tool_use_id", "cwd"):
        m = re.search(r'"%s"\s*:\s*"((?:[^"\\]|\\.){1,1000})"' % key, text)
        if m:
            try:
                event[key] = loads('"' + m.group(1) + '"')
            except ValueError:
                pass
    event.setdefault("session_id", "unknown")
    if row[0] in TOOL_EVENTS:
        event.setdefault("tool_name", "unknown")
    from ..core import errors  # only here: an event's path imports nothing of the package

    event["scsql_stub"] = {"code": errors.EVENT_TOO_LARGE, "message": f"the event was {size} bytes, too large to record whole"}
    event["scsql_sizes"] = {"event": {"bytes": size, "sha256": sha256}}
    return event


def stamp(text, event):
    """The event's JSON text with scsql_event_id and scsql_received_at appended."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # a version 4 UUID
    raw[8] = (raw[8] & 0x3F) | 0x80
    event_id = raw.hex()
    now = time.time()
    at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"
    extra = f'"scsql_event_id": "{event_id}", "scsql_received_at": "{at}"'
    body = text[:-1].rstrip()
    return body + (", " if event else "") + extra + "}", event_id


def as_decision(event_name, reason):
    """A block given as exit status 2 (by an older hook server), as the JSON decision of EVENT_NAME."""
    if event_name == "PreToolUse":
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                       "permissionDecisionReason": reason}}
    return {"decision": "block", "reason": reason}


def misconfigured(home, agent):
    """What the hook server found wrong with the agent (its marker file), or
    None. Events of an agent that cannot act here are not spooled."""
    try:
        with open(os.path.join(home, "hooks", agent + ".misconfigured"), encoding="utf-8") as f:
            return f.read(2000).strip() or "the agent cannot act here"
    except OSError:
        return None


def degraded_message(home, agent, reason, remote=None):
    back = f"the team server {remote[0]} answers again" if remote else "the hook server and database are back"
    return (f"scsql is degraded ({reason}): hooks allow every call and add no context; events are kept in "
            f"{spool_dir(home, agent)} and written when {back}")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if os.environ.get("SCSQL_DISTILLING"):  # the distiller's own model run (scsql/distill/model.py): not captured
        try:
            while os.read(sys.stdin.fileno(), 65536):
                pass
        except OSError:
            pass
        return 0
    try:
        row, agent, home, remote = parse_args(argv)
        text, event = read_event(sys.stdin.fileno(), row)
    except Malformed as exc:
        sys.stderr.write(f"scsql hook: {exc}\n")
        return 1
    except Exception as exc:  # noqa: BLE001 - a hook never shows a traceback
        sys.stderr.write(f"scsql hook: cannot read the event: {exc!r}\n")
        return 1
    line, _ = stamp(text, event)
    if remote is not None and row[0] == "SessionStart":  # the server runs no git in a directory of this machine
        branch, commit = local_git(event.get("cwd"))
        if branch:
            line = line[:-1] + f', "scsql_git_branch": {quote(branch)}, "scsql_git_commit": {quote(commit)}}}'
    if remote is not None:
        reply, reason, spooled = deliver_remote(row, agent, home, remote, line, event)
    else:
        (reply, reason), spooled = deliver_local(row, agent, home, line), False
    return answer(row, agent, home, event, line, reply, reason, spooled, remote)


def deliver_local(row, agent, home, line):
    """The event handed to the agent's hook server on this machine (started
    when it is not running): (its reply or None, why there is none)."""
    budget = row[6]
    reason = None
    reply = None
    request = f'{{"event": {line}, "budget": {budget}}}\n'.encode()
    deadline = time.monotonic() + budget
    try:
        try:
            reply = exchange(home, agent, request, budget)
        except Unreachable:
            reason = "its hook server is not running"
            try:
                spawn_server(home, agent)
            except Exception as exc:  # noqa: BLE001
                reason += f" and could not be started: {exc}"
                raise Unreachable(reason) from None
            if row[0] == "PreToolUse":
                # A deny check never depends on a warm server: the first call enforces too.
                budget = COLD_BUDGET
                deadline = time.monotonic() + budget
            elif row[4] or budget < 1.0:
                raise
            # An event that answers (context, a block) and may wait: wait for the server within the budget.
            while reply is None:
                time.sleep(0.05)
                try:
                    reply = exchange(home, agent, request, max(0.05, deadline - time.monotonic()))
                except Unreachable:
                    if time.monotonic() + 0.05 >= deadline:
                        raise
    except Unreachable:
        pass
    except TimeoutError:
        reason = f"its hook server did not answer within {budget:g} s"
    except Exception as exc:  # noqa: BLE001
        reason = f"its hook server failed: {exc}"
    return reply, reason


def answer(row, agent, home, event, line, reply, reason, spooled=False, remote=None):
    """What the hook prints and its exit status, from the server's REPLY (or
    REASON there is none): the event spooled when it recorded something and
    was not delivered (unless SPOOLED already), and the degraded state told
    once per Claude session."""
    output = None
    code = 0
    wrong = None
    if reply is not None:
        reason = None
        output = reply.get("output") if isinstance(reply.get("output"), dict) else None
        if reply.get("exit") == 2:  # a decision given as an exit status: as JSON, exit 0
            output = as_decision(row[0], reply.get("stderr") or "scsql")
        elif isinstance(reply.get("stderr"), str):
            sys.stderr.write(reply["stderr"].rstrip("\n") + "\n")
        if isinstance(reply.get("degraded"), str):
            reason = reply["degraded"]
            wrong = reason if reply.get("spooled") is False else None
    elif row[5] and (wrong := misconfigured(home, agent)) is not None:
        reason = wrong
    elif row[5] and not spooled:
        try:
            spool_write(home, agent, [line])
        except Exception as exc:  # noqa: BLE001 - still never block the session
            sys.stderr.write(f"scsql hook: the event could not be spooled: {exc}\n")
            reason += f"; the event could not be spooled ({exc})"
    if reason and not row[7]:
        try:
            tell = first_notice(home, agent, event["session_id"])
        except Exception:  # noqa: BLE001
            tell = True
        if tell:
            output = dict(output or {})
            output.setdefault("systemMessage", f"scsql cannot act as agent {agent}: {wrong}" if wrong
                              else degraded_message(home, agent, reason, remote))
    if output is not None:
        try:
            sys.stdout.write(dumps(output) + "\n")
            sys.stdout.flush()
        except OSError:  # Claude Code stopped reading (it gave up on the hook)
            pass
    return code


if __name__ == "__main__":
    sys.exit(main())
