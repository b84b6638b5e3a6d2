"""The commands of the foundation: the server (up, down, psql, migrate,
errors), projects and agents. The commands composed of several subsystems
(status, mcp, worker, verify) are in ``scsql/composed.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .. import __version__
from .command import Commands, uri
from .config import APP_ROLE, DATABASE, role_for
from . import errors

if TYPE_CHECKING:
    from .migrate import Report

# Every other import is made by the command that needs it: building the
# parser must not load the database driver.

DEFAULT_PROJECT = "default"
DEFAULT_AGENT = "default"
DEFAULT_TEAM_ROLE = "orchestrator"


def _scsql_command() -> str:
    return shutil.which("scsql") or "scsql"


# -- commands ----------------------------------------------------------------


def default_root(given: str | None) -> str | None:
    """The root directory ``scsql up`` gives the default project: --root DIR
    when given, else the directory ``scsql up`` runs in, or the nearest one
    above it holding .git (the repository it runs in). Never "/" or the home
    directory by default (the index tool would read everything below it):
    then None, and --root must name one."""
    from .errors import ScsqlError

    if given:
        path = Path(given).expanduser()
        if not path.is_absolute():
            path = Path.cwd() / path
        if not path.is_dir():
            raise ScsqlError(errors.INVALID_ARGUMENT, f"--root {given}: not a directory", "name the directory of the project's files")
        return str(path)
    cwd = Path.cwd().resolve()
    root = next((d for d in (cwd, *cwd.parents) if (d / ".git").exists()), cwd)
    if root == Path(root.anchor) or root == Path.home().resolve():
        return None
    return str(root)


_MIGRATION_APPLIED = re.compile(r"applied \d+_[^ ]+\.sql")


def cmd_up(ctx, args: argparse.Namespace) -> int:
    from . import roles

    root = default_root(args.root)  # checked before anything starts
    if ctx.settings.embedded:
        started = ctx.server.start(progress=lambda m: print(f"  {m}", flush=True))  # initdb: seconds
        where = f"embedded PostgreSQL in {ctx.settings.pgdata} ({'started' if started else 'already running'})"
    else:
        where = "the server named by SCSQL_DSN"
    admin = ctx.admin_conninfo()
    said: list[str] = []  # what was applied, said after it in one line each (scsql migrate lists every file)

    def progress(m: str) -> None:
        if not m.startswith("applied "):
            print(f"  {m}", flush=True)
            return
        if _MIGRATION_APPLIED.fullmatch(m) and not any(map(_MIGRATION_APPLIED.fullmatch, said)):
            print("  applying migrations ...", flush=True)  # the first of them: a fresh database takes seconds
        said.append(m)

    report, _done = _migrate(admin, progress=progress, reapply=False)  # up: nothing re-created when nothing changed
    if report.applied:
        span = report.applied[0] + (f" to {report.applied[-1]}" if len(report.applied) > 1 else "")
        print(f"  applied {len(report.applied)} migration(s): {span}")
    for m in said:
        if not _MIGRATION_APPLIED.fullmatch(m):
            print(f"  {m}")
    mode = settle_logins(ctx, admin, None)
    status = roles.status(admin)
    default = next((p for p in status["projects"] if p["name"] == DEFAULT_PROJECT), None)
    if default is None:
        roles.create_project(admin, DEFAULT_PROJECT, root)
    elif root is not None and (args.root or not default["root_path"]):
        root = roles.set_project_root(admin, DEFAULT_PROJECT, root)
    else:
        root = default["root_path"]
    root = roles.real_root(root)
    password = None
    if not any(a["name"] == DEFAULT_AGENT for a in status["agents"]):
        roles.create_agent(admin, ctx.keystore, DEFAULT_AGENT, DEFAULT_PROJECT, DEFAULT_TEAM_ROLE, adopt_key=True)
        print(f"  created agent {DEFAULT_AGENT} ({DEFAULT_TEAM_ROLE}) in project {DEFAULT_PROJECT}")
        if mode == "per_agent" and not ctx.settings.embedded:
            password = roles.issue_password(admin, DEFAULT_AGENT)
    own = mode == "per_agent" and not ctx.settings.agent_dsn
    agent_dsn = ctx.agent_conninfo(DEFAULT_AGENT if own else None)
    workers = _keep_workers(ctx, admin) if ctx.settings.embedded and not args.no_worker else []
    env = {}
    if os.environ.get("SCSQL_DATA_DIR") or args.data_dir:
        env["SCSQL_DATA_DIR"] = str(ctx.settings.data_dir)
    if ctx.settings.dsn:
        env["SCSQL_AGENT_DSN"] = uri(agent_dsn)
    mcp = {"mcpServers": {f"scsql-{DEFAULT_AGENT}": {
        "command": _scsql_command(), "args": ["mcp", "--agent", DEFAULT_AGENT], **({"env": env} if env else {})}}}
    print(f"scsql {__version__} is up on {where}")
    print(f"  schema version  {report.schema}")
    print(f"  admin           {uri(admin)}")
    if own:
        print(f"  agents connect  {uri(agent_dsn)}  (each agent as its own role: scsql agent login NAME prints its DSN)")
        if password:
            print(f"  password        {password}  (of {role_for(DEFAULT_AGENT)}, shown once; ~/.pgpass line: "
                  f"{pgpass_line(agent_dsn, password)})")
    else:
        print(f"  agents connect  {uri(agent_dsn)}  (then SET ROLE {role_for(DEFAULT_AGENT)})")
    print(f"  keys            {ctx.settings.keystore}")
    for line in workers:
        print(line)
    if root:
        print(f"  project root    {root}  (scsql index reads only below it; change it with scsql up --root DIR)")
    else:
        print("  project root    none: scsql index refuses until one is set (scsql up --root DIR)")
    print()
    prefix = f"SCSQL_DATA_DIR={ctx.settings.data_dir} " if "SCSQL_DATA_DIR" in env else ""
    print("psql as the default agent:")
    print(f"  {prefix}scsql psql --agent {DEFAULT_AGENT}")
    print(f"Claude Code, MCP server and hooks (run in the repository): "
          f"{prefix}scsql install claude --agent {DEFAULT_AGENT} --project {DEFAULT_PROJECT}")
    print("MCP client (Claude Code: put this in .mcp.json; one entry per agent):")
    print("  " + json.dumps(mcp, indent=2).replace("\n", "\n  "))
    return 0


def _keep_workers(ctx, admin: str) -> list[str]:
    """scsql up's background workers (core/supervisor.py), started when not
    running; the lines that say so."""
    from . import supervisor

    workers, failed = supervisor.keep(ctx.settings, admin, ctx.keystore.exists)
    lines = []
    for w in workers:
        state = failed.get(w.project) or ("started" if w.started else "running")
        lines.append(f"  worker          project {w.project}: agent {w.agent}, pid {w.pid}, {state} (log {w.log})")
    if workers:
        lines.append("                  (background workers: embeddings, maintenance; scsql down stops them)")
    return lines


def cmd_down(ctx, args: argparse.Namespace) -> int:
    if not ctx.settings.embedded:
        print("scsql: SCSQL_DSN names an external server; there is no embedded server to stop")
        return 0
    from . import supervisor

    for w in supervisor.stop(ctx.settings.data_dir):
        print(f"scsql: stopped the background worker of project {w.project} (pid {w.pid})")
    if ctx.server.stop(hold=args.hold):
        print(f"scsql: stopped the embedded server in {ctx.settings.pgdata}")
    else:
        print(f"scsql: the embedded server in {ctx.settings.pgdata} was not running")
    if args.hold:
        print("scsql: held down: agent processes will not start it until scsql up")
    return 0


def cmd_psql(ctx, args: argparse.Namespace) -> int:
    """psql on the server: as the administrator; as an agent's own login role
    (--agent); or as the administrator with role scsql_auditor (--auditor).
    Every argument scsql does not know is passed on to psql, in order."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from . import roles
    from .config import AUDITOR_ROLE
    from .embedded import bin_path
    from .errors import ScsqlError

    if args.agent:
        known = {a["agent"]: a for a in roles.list_agents(ctx.admin_conninfo())}
        agent = known.get(args.agent)
        if agent is None:
            raise ScsqlError(errors.AGENT_UNKNOWN, f"agent {args.agent!r} is not registered on this server",
                             "scsql agent list shows the agents")
        if agent["revoked_at"] is not None:
            raise ScsqlError(errors.AGENT_REVOKED, f"agent {args.agent!r} was revoked at {agent['revoked_at']} and can no longer act")
    conninfo = ctx.login_conninfo(args.agent) if args.agent else ctx.admin_conninfo()
    if args.auditor:
        parts = conninfo_to_dict(conninfo)
        parts["options"] = " ".join(filter(None, [parts.get("options"), f"-c role={AUDITOR_ROLE}"]))
        conninfo = make_conninfo(**parts)
    psql = bin_path("psql")
    if not os.path.exists(psql):
        psql = shutil.which("psql") or "psql"
    extra = list(args.psql_args)
    if extra[:1] == ["--"]:
        extra = extra[1:]
    argv = [psql, "-X", "-v", "ON_ERROR_STOP=1", conninfo, *extra]
    sys.stdout.flush()
    os.execv(psql, argv)
    return 0  # not reached


def _migrate(admin: str, root: Path | None = None, target: int | None = None,
             progress: Callable[[str], None] = lambda _m: None, citus: bool = False,
             reapply: bool = True) -> tuple[Report, dict | None]:
    """The migration scsql migrate and scsql up run: with CITUS, or on a
    database a migrate --citus sharded, that path every time (citus.migrate,
    which also returns what it distributed); the plain one otherwise (None).
    REAPPLY false (scsql up): sql/ and policies/ only when they changed."""
    from . import citus as cluster
    from .migrate import Migrator, Source

    if citus or cluster.is_distributed(admin):
        return cluster.migrate(admin, root, target, progress)
    return Migrator(admin, Source(root) if root else None).run(target=target, progress=progress,
                                                                reapply=reapply), None


def cmd_migrate(ctx, args: argparse.Namespace) -> int:
    from . import citus
    from .migrate import Migrator, Source

    root = Path(args.source) if args.source else None
    logins = args.logins.replace("-", "_") if args.logins else None
    if args.print:
        source = citus.CitusSource(root) if args.citus else Source(root) if root else None
        sys.stdout.write(Migrator("", source).script() + _logins_script(logins))
        return 0
    admin = ctx.admin_conninfo()
    report, done = _migrate(admin, root, args.to, lambda m: print(f"  {m}"), args.citus)
    print(f"scsql: schema at version {report.schema}; "
          f"{len(report.applied)} migration(s) applied" + (" after waiting for another migrator" if report.waited else ""))
    settle_logins(ctx, admin, logins)
    if done is not None:
        print(f"scsql: citus: {len(done['distributed'])} table(s) distributed by project_id, "
              f"{len(done['reference'])} made reference tables")
    return 0


def settle_logins(ctx, admin: str, requested: str | None) -> str | None:
    """How the agent processes of the database log in, after a migration:
    REQUESTED (per_agent, one_login) when given; else a database on a shared
    server (SCSQL_DSN) that has no agent yet is set up so that each agent logs
    in as its own role, and one whose agents all act through scsql_app is
    warned about. Returns the mode (None before migration 0620)."""
    from . import roles

    settings = roles.login_settings(admin)
    if settings is None:
        return None
    mode = "one_login" if settings["one_login"] else "per_agent"
    if requested is None and ctx.settings.dsn and mode == "one_login":
        if settings["agents"] or _names_app_login(ctx.settings.agent_dsn):
            print("scsql: warning: every agent of this database can act through the one login scsql_app, so "
                  "whoever holds its password can act as any agent; on a shared server give each agent its own "
                  "login: scsql migrate --logins per-agent, then scsql agent login NAME for each (SECURITY.md)")
            return mode
        requested = "per_agent"
    if requested is not None and requested != mode:
        mode = roles.set_login_mode(admin, requested)
        print("scsql: each agent logs in as its own role (scsql agent login NAME prints its DSN); scsql_app acts "
              "as no agent" if mode == "per_agent" else "scsql: every agent may act through the one login scsql_app")
    return mode


def _names_app_login(dsn: str | None) -> bool:
    """Whether DSN (SCSQL_AGENT_DSN) logs in as scsql_app: its user chose the one login for every agent."""
    if not dsn:
        return False
    from psycopg.conninfo import conninfo_to_dict

    return conninfo_to_dict(dsn).get("user") == APP_ROLE


def _logins_script(logins: str | None) -> str:
    """The end of migrate --print: how agents log in (as settle_logins decides for a shared server)."""
    if logins == "one_login":
        call = "select scsql.set_login_mode('one_login');"
    elif logins == "per_agent":
        call = "select scsql.set_login_mode('per_agent');"
    else:
        call = "select scsql.set_login_mode('per_agent') where not exists (select from scsql.agents);"
    return ("\n-- How agent processes log in: a new database on a shared server gets each agent its own login\n"
            "-- (scsql migrate --print --logins one-login|per-agent says otherwise).\n"
            f"set role scsql_owner;\n{call}\nreset role;\n")


def pgpass_line(conninfo: str, password: str) -> str:
    """The ~/.pgpass line that gives CONNINFO's login PASSWORD (a socket's host is localhost there)."""
    from psycopg.conninfo import conninfo_to_dict

    d = conninfo_to_dict(conninfo)
    host = d.get("host") or "localhost"
    fields = ["localhost" if host.startswith("/") else host, d.get("port") or "5432", d.get("dbname") or "*",
              d.get("user") or "*", password]
    return ":".join(f.replace("\\", "\\\\").replace(":", "\\:") for f in fields)


def print_login(ctx, admin: str, name: str, password: str | None) -> None:
    """Say how agent NAME's process logs in as its own role: its DSN, and the
    password just issued (shown this once) or how it logs in without one."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    parts = conninfo_to_dict(admin)
    parts.pop("password", None)
    parts["user"] = role_for(name)
    dsn = make_conninfo(**parts)
    print(f"  SCSQL_AGENT_DSN  {uri(dsn)}")
    if ctx.settings.embedded:
        print("  password         none: the embedded server lets in only its own user")
    elif password:
        from urllib.parse import quote

        print(f"  password         {password}  (shown once; scsql agent login {name} issues a new one)")
        print(f"  ~/.pgpass        {pgpass_line(dsn, password)}")
        user = parts["user"]
        with_password = uri(dsn).replace(f"://{user}@", f"://{user}:{quote(password, safe='')}@", 1)
        print(f"  or, with it      {with_password}")
    else:
        print(f"  password         none: it logs in with a client certificate whose CN is {role_for(name)} "
              "(sslcert, sslkey in the DSN), or as a pg_hba.conf rule allows")


def cmd_project(ctx, args: argparse.Namespace) -> int:
    from . import roles

    if args.action == "create":
        pid = roles.create_project(ctx.admin_conninfo(), args.name, args.root, args.git_remote)
        print(f"scsql: created project {args.name} (id {pid})")
    else:
        print("project\troot\tgit_remote")
        for p in roles.status(ctx.admin_conninfo())["projects"]:
            print(f"{p['name']}\t{p['root_path'] or '-'}\t{p['git_remote'] or '-'}")
    return 0


def cmd_agent(ctx, args: argparse.Namespace) -> int:
    from . import roles

    admin = ctx.admin_conninfo()
    if args.action == "create":
        row = roles.create_agent(admin, ctx.keystore, args.name, args.project, args.role)
        print(f"scsql: created agent {args.name} (role {row['role_name']}, project {args.project}, {args.role})")
        print(f"  private key  {row['key_file']} (mode 0600)")
        print(f"  public key   {row['public_key']}")
        print(f"  MCP          {_scsql_command()} mcp --agent {args.name}")
        if args.connection_limit is not None:
            roles.set_connection_limit(admin, args.connection_limit, args.name)
        settings = roles.login_settings(admin)
        if args.login or (settings is not None and not settings["one_login"]):
            _agent_login(ctx, admin, args.name, args.no_password)
    elif args.action == "login":
        _agent_login(ctx, admin, args.name, args.no_password)
    elif args.action == "connection-limit":
        n = roles.set_connection_limit(admin, args.limit, args.agent)
        print(f"scsql: {args.agent if args.agent else f'{n} agent(s), and agents created from now on,'} "
              f"may hold at most {args.limit} connection(s) each")
    elif args.action == "logins":
        return _print_logins(roles.agent_logins(admin), roles.login_settings(admin))
    elif args.action == "reset-settings":
        n = roles.reset_agent_settings(admin, args.name)
        print(f"scsql: removed {n} setting(s) of {f'agent {args.name}' if args.name else 'every agent'}'s role")
        for r in roles.agent_logins(admin):
            for setting in r["role_settings"] if r["agent"] == args.name or not args.name else []:
                name = setting.split("=", 1)[0]
                where = f" in database {_dbname(admin)}" if setting.endswith("(in this database)") else ""
                print(f"scsql: {r['role_name']} keeps {setting}: no scsql function may change it; "
                      f"a superuser runs: alter role {r['role_name']}{where} reset {name}")
    elif args.action == "list":
        rows = roles.list_agents(admin)
        if args.json:
            print(json.dumps(rows, indent=2, default=str))
        if not args.json:
            print("agent\tproject\tteam_role\tstate\tkey")
        for r in [] if args.json else rows:
            state = f"revoked {r['revoked_at']:%Y-%m-%d %H:%M}" if r["revoked_at"] else "active"
            print(f"{r['agent']}\t{r['project']}\t{r['team_role']}\t{state}\tkey {r['key_id']}")
    elif args.action == "revoke":
        at = roles.revoke_agent(admin, args.name)
        print(f"scsql: agent {args.name} revoked at {at}; its history stays verifiable")
    elif args.action == "rotate-key":
        key_id = roles.rotate_key(admin, ctx.keystore, args.name)
        print(f"scsql: agent {args.name} now signs with key {key_id}; older rows verify with older keys")
    return 0


def _dbname(conninfo: str) -> str:
    from psycopg.conninfo import conninfo_to_dict

    return conninfo_to_dict(conninfo).get("dbname") or DATABASE


def _agent_login(ctx, admin: str, name: str, no_password: bool) -> None:
    """Issue agent NAME's own login (a new password, or none with NO_PASSWORD;
    the embedded server needs none) and print how its process uses it."""
    from . import roles

    password = None
    if not ctx.settings.embedded:
        password = roles.issue_password(admin, name, remove=no_password)
    print(f"scsql: agent {name} logs in as its own role {role_for(name)}:")
    print_login(ctx, admin, name, password)


def _print_logins(rows: list[dict], settings: dict | None) -> int:
    """scsql agent logins: how each agent logs in; 1 when something needs an administrator."""
    if settings is not None:
        print("logins: " + ("one login (scsql_app) acts as every agent" if settings["one_login"]
                            else "each agent logs in as its own role")
              + f"; new agents may hold {settings['agent_connection_limit']} connection(s)")
    print("agent\tlogin\tconnection_limit\tother_logins\trole_settings")
    flagged = False
    for r in rows:
        others = [o for o in r["other_logins"] if not (settings and settings["one_login"] and o == APP_ROLE)]
        flagged = flagged or bool(others or r["role_settings"])
        print(f"{r['agent']}\t{'yes' if r['can_login'] else 'no'}\t{r['connection_limit']}\t"
              f"{','.join(r['other_logins']) or '-'}\t{'; '.join(r['role_settings']) or '-'}")
    if flagged:
        print("scsql: an agent's role has settings (scsql agent reset-settings removes them), or a login "
              "other than scsql's own can act as it (revoke that grant)", file=sys.stderr)
    return 1 if flagged else 0


def cmd_errors(ctx, args: argparse.Namespace) -> int:
    from . import roles

    with roles.admin_connection(ctx.admin_conninfo()) as conn:
        rows = conn.execute("select code, name, raised_by, meaning from scsql.error_codes order by code").fetchall()
    for r in rows:
        print(f"{r['code']}  {r['name']:<24} {r['raised_by']:<8}  {r['meaning']}")
    return 0


# -- parser ------------------------------------------------------------------


def register(commands: Commands) -> None:
    add = commands.add
    p = add("up", cmd_up, "start (or reuse) the server, migrate, create the default project and agent")
    p.add_argument("--root", metavar="DIR",
                   help="the default project's root directory, the only tree scsql index reads (default: the "
                        "repository or directory scsql up runs in; kept on later runs unless given)")
    p.add_argument("--no-worker", action="store_true",
                   help="start no background worker (by default, on the embedded server, one per project "
                        "runs scsql worker until scsql down)")
    p = add("down", cmd_down, "stop the embedded server (agent processes start it again when they need it)")
    p.add_argument("--hold", action="store_true",
                   help="keep it down: agent processes refuse to start it (SC013) until scsql up")
    p = add("psql", cmd_psql, "open psql on the server (as the administrator unless --agent or --auditor is given); "
                               "other arguments are psql's, e.g. -c SQL or -f FILE")
    who = p.add_mutually_exclusive_group()
    who.add_argument("--agent", help="log in as this agent's role")
    who.add_argument("--auditor", action="store_true",
                     help="the administrator's login acting as role scsql_auditor (reads everything, changes nothing)")
    p.set_defaults(psql_args=[], pass_through=True)
    p = add("migrate", cmd_migrate, "apply pending migrations, then sql/ and policies/")
    p.add_argument("--print", action="store_true", help="write the complete SQL for psql instead of applying it")
    p.add_argument("--to", type=int, metavar="VERSION", help="apply migrations up to VERSION only")
    p.add_argument("--source", metavar="DIR", help="read migrations/, sql/, policies/ from DIR (a release checkout)")
    p.add_argument("--citus", action="store_true",
                   help="then shard every table by project_id on Citus (reference tables for the small global ones); "
                        "a database sharded so is migrated this way every time, by scsql up too")
    p.add_argument("--logins", choices=("per-agent", "one-login"),
                   help="how agent processes log in: per-agent (a shared server: each as its own role; the default "
                        "for a new database on SCSQL_DSN) or one-login (scsql_app acts as every agent: one user's "
                        "machine; the embedded server's default)")

    p = add("project", cmd_project, "create or list projects")
    psub = p.add_subparsers(dest="action", required=True)
    c = psub.add_parser("create", help="create a project")
    c.add_argument("name", help="the project's name: lower-case letters, digits, '.', '_' and '-'")
    c.add_argument("--root", help="absolute path of the project's tree, the only one scsql index reads")
    c.add_argument("--git-remote", metavar="URL", help="the repository's remote, recorded with the project")
    psub.add_parser("list", help="list projects")

    _register_agent(add("agent", cmd_agent, "create, list, revoke agents, rotate their keys, issue their logins"))

    add("errors", cmd_errors, "the catalogue of error codes (scsql.error_codes)")


def _register_agent(p: argparse.ArgumentParser) -> None:
    """The subcommands of scsql agent."""
    asub = p.add_subparsers(dest="action", required=True)
    c = asub.add_parser("create", help="create an agent: role, key pair, registration")
    c.add_argument("name", help="the agent's name: 1 to 48 lower-case letters, digits or '_', starting with a letter "
                                        "(its database role is scsql_agent_NAME)")
    c.add_argument("--project", required=True, help="the project the agent works in (scsql project list)")
    c.add_argument("--role", required=True, help="team role: orchestrator, developer, qa, reviewer, researcher, ...")
    c.add_argument("--login", action="store_true",
                   help="also issue its own login (a password, shown once) and print the DSN its process uses; "
                        "done anyway on a database set up for a shared server")
    c.add_argument("--no-password", action="store_true",
                   help="with --login: no password (a client certificate or a pg_hba.conf rule lets it in)")
    c.add_argument("--connection-limit", type=int, metavar="N",
                   help="connections its own login may hold at once (default: the database's, 32)")
    c = asub.add_parser("list", help="list agents")
    c.add_argument("--json", action="store_true", help="print the agents as JSON")
    c = asub.add_parser("revoke", help="revoke an agent; its history stays verifiable")
    c.add_argument("name", help="the agent to revoke")
    c = asub.add_parser("rotate-key", help="give an agent a new key pair")
    c.add_argument("name", help="the agent whose key pair to replace")
    c = asub.add_parser("login", help="issue an agent's own login (a new password, shown once) and print its DSN")
    c.add_argument("name", help="the agent")
    c.add_argument("--no-password", action="store_true",
                   help="remove its password instead (a client certificate or a pg_hba.conf rule lets it in)")
    c = asub.add_parser("connection-limit", help="how many connections agents' own logins may hold")
    c.add_argument("limit", type=int, help="connections (1 to 10000)")
    c.add_argument("--agent", help="only this agent (default: every agent, and those created from now on)")
    asub.add_parser("logins", help="how each agent logs in: connection limit, other logins that can act as it, "
                                   "settings its role gives itself")
    c = asub.add_parser("reset-settings", help="remove the settings agents' roles give themselves (ALTER ROLE ... SET)")
    c.add_argument("name", nargs="?", help="only this agent (default: every agent)")
