"""``scsql doctor``: everything a user would otherwise debug by hand, checked
in one run, each problem with what to run about it.

The checks are one table (CHECKS): a name, what it checks, and a function of
the :class:`Probe` (the settings, the administrator's connection, the
project directory, the client's clock) returning a :class:`Finding`: ``ok``,
``action`` (something needs doing: ``fix`` says what to run) or ``skip``
(nothing to check here, or the server is unreachable). The database's
figures come from ``scsql.metrics()`` (sql/50_operations.sql), the same rows
``scsql metrics`` exports, so doctor and the graphs agree.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shlex
import stat
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..core.config import Settings
from ..core.errors import ScsqlError
from ..core import errors

MIN_SERVER_VERSION = 150000
BACKLOG_LIMIT = dt.timedelta(minutes=15)  # the oldest chunk waiting for an embedding
CHECKPOINT_LIMIT = dt.timedelta(days=7)  # without retention: the newest checkpoint's greatest age
CLOCK_LIMIT = dt.timedelta(seconds=30)
PARTITIONS_AHEAD_DAYS = 1.0


@dataclass
class Finding:
    status: str  # ok, action, skip
    summary: str
    fix: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    check: str = ""


def ok(summary: str, details: list[str] | None = None) -> Finding:
    return Finding("ok", summary, details=details or [])


def action(summary: str, fix: list[str], details: list[str] | None = None) -> Finding:
    return Finding("action", summary, fix, details or [])


def skip(summary: str) -> Finding:
    return Finding("skip", summary)


@dataclass
class Probe:
    """What the checks look at. ``admin`` gives the administrator's conninfo
    (raising when there is none, e.g. the embedded server is down)."""

    settings: Settings
    admin: Callable[[], str]
    project_dir: Path | None = None
    full: bool = False  # chains: every row, not only those after the newest checkpoint
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)
    conn: Any = None
    _metrics: list[dict] | None = None

    def query(self, sql: str, params: tuple = (), role: str | None = None) -> list[dict]:
        with self.conn.transaction():
            if role is not None:
                self.conn.execute(f"set local role {role}")
            return self.conn.execute(sql, params).fetchall()

    def metrics(self, name: str) -> dict[str, float]:
        """scsql.metrics() series of metric NAME, by their project (or table) label."""
        if self._metrics is None:
            from .metrics import fetch

            self._metrics = fetch(self.conn)
        return {(r["labels"].get("project") or r["labels"].get("table")): r["value"]
                for r in self._metrics if r["metric"] == name}

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


# -- the checks --------------------------------------------------------------


def check_server(p: Probe) -> Finding:
    import psycopg
    from psycopg.rows import dict_row

    try:
        conninfo = p.admin()
        p.conn = psycopg.connect(conninfo, autocommit=True, row_factory=dict_row, connect_timeout=5)
    except ScsqlError as exc:
        return action(f"the server is not reachable: {exc.message}",
                      [scsql_cmd(p, "up") if exc.code == errors.EMBEDDED_NOT_RUNNING else exc.hint or scsql_cmd(p, "status")])
    except psycopg.OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        where = "SCSQL_DSN" if p.settings.dsn else "the embedded server"
        return action(f"cannot connect to {where}: {first}",
                      [scsql_cmd(p, "up") if p.settings.embedded
                       else "check SCSQL_DSN and that the server accepts connections"])
    row = p.query("select current_setting('server_version') as v, current_setting('server_version_num')::int as n")[0]
    if row["n"] < MIN_SERVER_VERSION:
        return action(f"PostgreSQL {row['v']} is older than scsql supports (15)", ["upgrade the server to PostgreSQL 15 or newer"])
    return ok(f"PostgreSQL {row['v']}")


def check_migrations(p: Probe) -> Finding:
    from ..core.migrate import Source

    sequence = Source().migrations()
    files = {m.version: m for m in sequence}
    if not p.query("select from pg_catalog.pg_tables where schemaname = 'scsql' and tablename = 'schema_migrations'"):
        return action("the database has no scsql schema", [scsql_cmd(p, "migrate")])
    applied = {r["version"]: r["checksum"] for r in p.query("select version, checksum from scsql.schema_migrations")}
    changed = [f"{files[v].name}: applied {c[:12]}, file {files[v].checksum[:12]}"
               for v, c in sorted(applied.items()) if v in files and files[v].checksum != c]
    unknown = [f"{v:04d}" for v in sorted(applied) if v not in files]
    pending = [m.name for m in sequence if m.version not in applied]
    if changed:
        return action(f"{len(changed)} applied migration(s) differ from their files", [
            "restore the files as they were applied (applied migrations are immutable; "
            "a change is a new migration), or reinstall this scsql version"], changed)
    if unknown:
        return action(f"the database has migration(s) {', '.join(unknown)} this scsql does not know",
                      ["upgrade scsql to the version that migrated this database"])
    if pending:
        return action(f"{len(pending)} migration(s) not applied", [scsql_cmd(p, "migrate")], pending)
    head = [m.name for m in sequence if m.version in applied][-1:] or ["none"]
    return ok(f"schema version {len(applied)} ({head[0].removesuffix('.sql')}), checksums match")


def check_extensions(p: Probe) -> Finding:
    found = {r["extname"]: r["extversion"] for r in p.query("select extname, extversion from pg_catalog.pg_extension")}
    if "vector" not in found:
        available = p.query("select from pg_catalog.pg_available_extensions where name = 'vector'")
        return action("pgvector (extension vector) is not installed in this database", [
            scsql_cmd(p, "migrate") + "   # creates the extension" if available else
            "install pgvector on the server (e.g. apt install postgresql-NN-pgvector), then scsql migrate"])
    partman = f", pg_partman {found['pg_partman']}" if "pg_partman" in found else ", pg_partman absent (built-in maintenance)"
    return ok(f"vector {found['vector']}{partman}")


def check_partitions(p: Probe) -> Finding:
    ahead = p.metrics("scsql_partition_days_ahead")
    late = p.metrics("scsql_partitions_past_retention")
    short = [f"{t}: partitions end {days:.1f} day(s) ahead" for t, days in sorted(ahead.items())
             if days < PARTITIONS_AHEAD_DAYS]
    behind = [f"{t}: {int(n)} partition(s) kept past their retention" for t, n in sorted(late.items()) if n]
    if short:
        return action("partitions are not created ahead", [
            scsql_cmd(p, "partitions maintain") + "   # and keep a worker running: it maintains them"],
            short + behind)
    if behind:
        return action("retention is not keeping up", [
            scsql_cmd(p, "checkpoint") + "   # retention drops only checkpointed rows",
            scsql_cmd(p, "partitions maintain") + "   # lists what it refused and why"], behind)
    days = min(ahead.values(), default=0)
    return ok(f"{len(ahead)} partitioned table(s), partitions at least {days:.0f} day(s) ahead, retention on time")


def check_worker(p: Probe) -> Finding:
    from ..core import supervisor

    alive = p.metrics("scsql_workers_alive")
    active = {r["project"]: r["agents"] for r in p.query(
        "select p.name as project, array_agg(a.name order by a.name) as agents from scsql.agents a "
        "join scsql.projects p using (project_id) where a.revoked_at is null group by p.name")}
    if not active:
        return skip("no project has an active agent")
    age = p.metrics("scsql_worker_heartbeat_age_seconds")
    dead = sorted(proj for proj in active if not alive.get(proj))
    if not dead:
        return ok(f"{int(sum(alive.values()))} worker(s) alive for {len(active)} project(s)")
    details = [f"{proj}: " + (f"last heartbeat {age[proj]:.0f} s ago" if proj in age else "no worker ever ran")
               for proj in dead]
    keys = p.settings.keystore
    keyed = {proj: supervisor.pick_agent(active[proj], lambda a: (keys / f"{a}.key").is_file()) for proj in dead}
    fix = []
    if p.settings.embedded and any(keyed.values()):  # scsql up starts their background workers
        fix.append(scsql_cmd(p, "up") + "   # starts a background worker for each project (scsql down stops them)")
        for proj in (x for x in dead if keyed[x] and supervisor.log_path(p.settings.data_dir, x).is_file()):
            details.append(f"{proj}: its background worker's log: {supervisor.log_path(p.settings.data_dir, proj)}")
    for proj in dead if not p.settings.embedded else [x for x in dead if not keyed[x]]:
        agent = keyed[proj] or active[proj][0]
        fix.append(scsql_cmd(p, f"worker --agent {agent}") + f"   # project {proj}; runs until Ctrl-C"
                   + ("" if keyed[proj] else f" (with {agent}'s key: this keystore has none of the project's)"))
    return action(f"no live scsql worker for {len(dead)} project(s)", fix, details)


def _checkpoint_fix(p: Probe) -> list[str]:
    """What to run when chain rows wait for a checkpoint: the auditor's key first, when it is not made yet."""
    init = [] if (p.settings.keystore / "auditor.key").is_file() else [
        scsql_cmd(p, "checkpoint --init") + "   # once: creates and registers the auditor's key"]
    return init + [scsql_cmd(p, "checkpoint --export scsql-checkpoints.jsonl")
                   + "   # signs the chain heads; keep the file away from the server"]


def check_backlog(p: Probe) -> Finding:
    backlog = p.metrics("scsql_embedding_backlog")
    oldest = p.metrics("scsql_embedding_backlog_oldest_seconds")
    late = sorted(proj for proj, s in oldest.items() if s > BACKLOG_LIMIT.total_seconds())
    if late:
        return action("embeddings are falling behind", [
            "keep scsql worker running for these projects (scsql doctor's worker check names the command); "
            "start a second worker to drain faster"],
            [f"{proj}: {int(backlog[proj])} chunk(s) waiting, oldest {oldest[proj] / 60:.0f} min" for proj in late])
    return ok(f"{int(sum(backlog.values()))} chunk(s) waiting for an embedding")


def check_checkpoints(p: Probe) -> Finding:
    age = p.metrics("scsql_checkpoint_age_seconds")
    unverified = p.metrics("scsql_chain_rows_unverified")
    retention = [r["retention"] for r in p.query(
        "select retention from scsql.partition_settings where retention is not null")]
    limit = min([r / 2 for r in retention] + [CHECKPOINT_LIMIT])
    stale = sorted(proj for proj, s in age.items() if unverified.get(proj) and s > limit.total_seconds())
    if stale:
        return action(f"chain rows wait for a checkpoint longer than {_span(limit)}"
                      + (" (half the retention)" if limit < CHECKPOINT_LIMIT else ""),
                      _checkpoint_fix(p),
                      [f"{proj}: {int(unverified[proj])} row(s) unverified, checkpoint age {_span(dt.timedelta(seconds=age[proj]))}"
                       for proj in stale])
    if not age:
        return ok("no chain rows yet")
    never = sorted(proj for proj in age if proj not in p.metrics("scsql_last_verification_timestamp_seconds"))
    return ok(f"newest checkpoint within {_span(limit)} for {len(age) - len(never)} project(s)"
              + (f"; none yet for {len(never)} project(s), whose chain rows began less than {_span(limit)} ago"
                 if never else ""))


def check_chains(p: Probe) -> Finding:
    """Open quarantines, and every chain re-computed in SQL (links and hashes)
    from its newest checkpoint (whose rows the auditor verified before signing)
    or, with ``full``, from its first row. Signatures: scsql verify."""
    since = "null::bigint" if p.full else "k.since"
    open_q = p.query("select * from scsql.chain_quarantines(true)", role="scsql_auditor")
    # The chains and their newest checkpoints are read first (on Citus each is
    # a query of the shards), then verify_chain runs once per chain (on the
    # coordinator: it reads the shards itself).
    broken = p.query(
        "with k as materialized (select h.chain_id, max(h.checkpoint_id) as since from scsql.checkpoint_heads h "
        "group by 1), "
        "x as materialized (select c.chain_id, p.name as project from scsql.chains c "
        "join scsql.projects p using (project_id) where c.head_seq > 0) "
        "select x.chain_id, x.project, v.broken_seq, v.kind, v.detail from x left join k using (chain_id) "
        f"cross join lateral scsql.verify_chain(x.chain_id, {since}) v "
        "where not v.ok order by x.chain_id", role="scsql_auditor")
    if not open_q and not broken:
        return ok(f"every chain verifies {'from its first row' if p.full else 'since its newest checkpoint'} "
                  "(links and hashes); no open quarantine")
    details = [f"chain {b['chain_id']} ({b['project']}) broken at seq {b['broken_seq']}: {b['kind']}: {b['detail']}"
               for b in broken]
    details += [f"quarantine {q['quarantine_id']}: chain {q['chain_id']} ({q['project']}/{q['agent']}) from seq "
                f"{q['from_seq']}: {q['kind']}" for q in open_q]
    fix = [scsql_cmd(p, "verify") + "   # names every break and checks signatures"]
    if broken:
        fix.append(scsql_cmd(p, "checkpoint") + "   # quarantines a broken chain and signs the others")
    if open_q:
        fix.append(f"once dealt with: select scsql.acknowledge_quarantine(ID, 'what was done') in {scsql_cmd(p, 'psql')}")
    return action(f"{len(broken)} broken chain(s), {len(open_q)} open quarantine(s)", fix, details)


def check_keys(p: Probe) -> Finding:
    store = p.settings.keystore
    if not store.is_dir():
        return skip(f"no keystore at {store}")
    bad = []
    mode = stat.S_IMODE(store.stat().st_mode)
    if mode & 0o077:
        bad.append((f"{store} has mode {mode:04o}", f"chmod 700 {shlex.quote(str(store))}"))
    keys = sorted(store.glob("*.key"))
    for key in keys:
        st = key.stat()
        if stat.S_IMODE(st.st_mode) & 0o077:
            bad.append((f"{key} has mode {stat.S_IMODE(st.st_mode):04o}", f"chmod 600 {shlex.quote(str(key))}"))
        if st.st_uid != os.geteuid():
            bad.append((f"{key} belongs to uid {st.st_uid}", f"chown {os.geteuid()} {shlex.quote(str(key))}"))
    if bad:
        return action(f"{len(bad)} key file permission problem(s): group or others can read private keys",
                      [fix for _, fix in bad], [what for what, _ in bad])
    return ok(f"{len(keys)} key file(s) in {store}, readable by their owner only")


def check_clock(p: Probe) -> Finding:
    before = p.now()
    server = p.query("select clock_timestamp() as t")[0]["t"]
    after = p.now()
    skew = server - (before + (after - before) / 2)
    if abs(skew) > CLOCK_LIMIT:
        return action(f"the server's clock is {skew.total_seconds():+.1f} s from this machine's", [
            "synchronise both clocks (NTP: timedatectl set-ntp true, or chrony); signed writes more than the "
            "allowed skew (scsql.set_clock_skew, default 5 minutes) from the server clock are refused"])
    return ok(f"clock skew {skew.total_seconds():+.3f} s")


def check_hooks(p: Probe) -> Finding:
    """The hooks of each agent the project's .mcp.json serves: a server
    scsql-NAME (an install of scope local or user) or the portable scsql (the
    project scope's: its agent is the one .claude/scsql.local.json names)."""
    from ..hooks.events import settings_hooks
    from ..hooks.hookclient import IDENTITY_FILE, project_identity
    from ..hooks.settings import PORTABLE_SERVER, SCOPES, merge_hooks, settings_path

    if p.project_dir is None:
        return skip("not in a git repository (give --project-dir DIR to check its hooks)")
    servers = _json(p.project_dir / ".mcp.json").get("mcpServers") or {}
    wanted = {n.removeprefix("scsql-"): settings_hooks(n.removeprefix("scsql-"), str(p.settings.data_dir))
              for n in servers if isinstance(n, str) and n.startswith("scsql-")}
    unnamed = PORTABLE_SERVER in servers and (project_identity(str(p.project_dir)) or {}).get("agent") is None
    if PORTABLE_SERVER in servers and not unnamed:
        wanted[project_identity(str(p.project_dir))["agent"]] = settings_hooks(None, None)
    if not wanted and not unnamed:
        return skip(f"scsql is not installed in {p.project_dir}")
    files = [settings_path(s, p.project_dir) for s in SCOPES]
    missing = sorted(a for a, ours in wanted.items()
                     if not any(merge_hooks(d, ours) == d for d in (_json(f) for f in files) if d))
    where = shlex.quote(str(p.project_dir))
    if missing or unnamed:
        return action(f"hooks missing or out of date for agent(s) {', '.join(missing)} in {p.project_dir}" if missing
                      else f"{p.project_dir / IDENTITY_FILE} does not name the agent its hooks act as",
                      [scsql_cmd(p, f"install claude --agent {a} --project-dir {where}") for a in missing]
                      + ([scsql_cmd(p, "agent list") + f"   # then: {scsql_cmd(p, 'install claude')} --agent NAME "
                          f"--project-dir {where}, NAME the agent this checkout acts as"] if unnamed else []))
    return ok(f"MCP server and hooks installed for {', '.join(sorted(wanted))} in {p.project_dir}")


DISTILL_WAIT = dt.timedelta(minutes=15)  # a distillation job waiting longer has no worker running it


def check_distill(p: Probe) -> Finding:
    """Each project that distils: its budget today (UTC), jobs waiting for it
    or for a worker, and jobs that failed today (sql/65_distill.sql)."""
    rows = [r for r in p.query("select * from scsql.distill_overview()") if r["enabled"]]
    if not rows:
        return ok("no project distils its sessions with a model (scsql install claude --distill turns it on)")
    details = [f"{r['project']}: {r['used_today']:,} of {r['daily_tokens']:,} tokens used today (UTC); "
               f"{r['queued']} queued, {r['deferred']} waiting for the budget, {r['failed_today']} failed today"
               for r in rows]
    fix = []
    for r in rows:
        waited = r["oldest_queued_at"] is not None and p.now() - r["oldest_queued_at"] > DISTILL_WAIT
        if r["deferred"]:
            fix.append(f"scsql distill enable --project {r['project']} --daily-tokens {2 * r['daily_tokens']}"
                       "   # or let the jobs wait for the next UTC day")
        elif r["queued"] and waited:
            fix.append(f"scsql worker --agent {r['distiller']}   # runs project {r['project']}'s distillation")
        if r["failed_today"]:
            fix.append(f"scsql distill jobs --agent {r['distiller']}   # says why {r['failed_today']} job(s) failed")
    if fix:
        return action("distillation needs attention", fix, details)
    return ok(f"{len(rows)} project(s) distil their sessions within their budgets", details)


def scsql_cmd(p: Probe, rest: str) -> str:
    """A scsql command line to paste: with --data-dir when doctor looked at
    another data directory than the one scsql finds by itself."""
    from ..core.config import find_data_dir

    if p.settings.data_dir == find_data_dir():
        return f"scsql {rest}"
    return f"scsql --data-dir {shlex.quote(str(p.settings.data_dir))} {rest}"


def _count_stubs(lines: list[str]) -> int:
    return sum(int(ln.split(": ", 1)[1].split(" ", 1)[0]) for ln in lines)


def check_spool(p: Probe) -> Finding:
    from ..hooks.client import check_private, misconfigured, spool_totals

    root = p.settings.data_dir / "spool"
    unsafe = []
    for d in (p.settings.data_dir / "hooks", root):
        try:
            check_private(str(d))
        except FileNotFoundError:
            pass
        except PermissionError as exc:
            unsafe.append((d, str(exc)))
    if unsafe:
        return action(f"{len(unsafe)} hook directory(ies) another user could change: hooks neither spool nor "
                      "talk to their server there", [f"chmod 700 {shlex.quote(str(d))}   # and chmod go-w every directory above it, "
                                                     "or set SCSQL_DATA_DIR to a directory of your own" for d, _ in unsafe],
                      [why for _, why in unsafe])
    hooks = p.settings.data_dir / "hooks"
    wrong = {m.name.removesuffix(".misconfigured"): misconfigured(str(p.settings.data_dir), m.name.removesuffix(".misconfigured"))
             for m in (hooks.glob("*.misconfigured") if hooks.is_dir() else [])}
    if wrong:
        return action(f"the hooks of {len(wrong)} agent(s) cannot act: they record nothing",
                      [scsql_cmd(p, f"install claude --agent {a}") + "   # in the project, as before" for a in wrong],
                      [f"{a}: {why}" for a, why in wrong.items()])
    waiting, failed = [], []
    for d in sorted(x for x in root.iterdir() if x.is_dir()) if root.is_dir() else []:
        events, unstorable = spool_totals(str(p.settings.data_dir), only=d.name)
        if events:
            waiting.append((d.name, events))
        if unstorable:
            failed.append((d.name, unstorable))
    stubs = _stubs(p)
    if not waiting and not failed:
        return ok("no hook events waiting" + (f"; {_count_stubs(stubs)} stored as stubs" if stubs else ""), stubs)
    fix = [scsql_cmd(p, f"worker --agent {a} --job hook-spool --once") + "   # writes the spooled events"
           for a, _ in waiting]
    if failed:
        fix.append(f"read the .error file beside each file in {root}/*/failed/: not even a stub of these events "
                   "could be stored; move a file back into its agent's spool directory to try again")
    details = [f"{a}: {n} event(s) waiting" for a, n in waiting] + [f"{a}: {n} event(s) not storable" for a, n in failed]
    details += stubs
    return action(f"{sum(n for _, n in waiting)} hook event(s) waiting to be written, "
                  f"{sum(n for _, n in failed)} not storable", fix, details)


def _stubs(p: Probe) -> list[str]:
    """Captured events stored as stubs or with text made storable, by project (when the server answers)."""
    if getattr(p, "conn", None) is None:
        return []
    try:
        rows = p.query("select * from scsql.capture_counts()")
    except Exception:  # noqa: BLE001 - an older schema: nothing to say
        return []
    return [f"{r['project']}: {r['stubs']} event(s) stored as stubs (the database refused their content; "
            f"each names the refusal in altered), {r['replaced']} with text replaced, {r['clipped']} clipped"
            for r in rows]


@dataclass(frozen=True)
class Check:
    name: str
    what: str
    run: Callable[[Probe], Finding]
    needs_server: bool = True


CHECKS: tuple[Check, ...] = (
    Check("server", "server reachable and its version", check_server, needs_server=False),
    Check("migrations", "migrations applied and unmodified", check_migrations),
    Check("extensions", "extensions present", check_extensions),
    Check("partitions", "partitions created ahead, retention keeping up", check_partitions),
    Check("worker", "a worker alive (heartbeat)", check_worker),
    Check("embeddings", "embedding backlog", check_backlog),
    Check("checkpoints", "age of the last checkpoint against the retention period", check_checkpoints),
    Check("chains", "broken or quarantined chains", check_chains),
    Check("keys", "key files' permissions", check_keys, needs_server=False),
    Check("clock", "clock skew between this machine and the server", check_clock),
    Check("hooks", "hooks installed in the project", check_hooks, needs_server=False),
    Check("spool", "local spool of unsent hook events, and events stored as stubs", check_spool, needs_server=False),
    Check("distill", "distillation: daily token budget, jobs waiting or failed", check_distill),
)
# Checks that read scsql's schema: skipped while migrations say it is absent.
_NEEDS_SCHEMA = {"partitions", "worker", "embeddings", "checkpoints", "chains", "distill"}


def run(probe: Probe, checks: tuple[Check, ...] = CHECKS) -> list[Finding]:
    """Every check's finding, in order; a check that raises is a finding too."""
    import psycopg

    findings: list[Finding] = []
    no_schema = False
    try:
        for c in checks:
            if c.needs_server and probe.conn is None:
                f = skip("the server is not reachable")
            elif c.name in _NEEDS_SCHEMA and no_schema:
                f = skip("scsql's schema is not current (see migrations)")
            else:
                try:
                    f = c.run(probe)
                except (ScsqlError, psycopg.Error, OSError) as exc:
                    f = action(f"the check failed: {str(exc).strip().splitlines()[0]}",
                               [scsql_cmd(probe, "migrate") if errors.OPERATIONS_SCHEMA_MISSING in str(exc)
                                else f"{scsql_cmd(probe, 'status')}; {scsql_cmd(probe, 'migrate')}"])
            if c.name == "migrations" and f.status == "action" and scsql_cmd(probe, "migrate") in f.fix:
                no_schema = True
            f.check = c.name
            findings.append(f)
    finally:
        probe.close()
    return findings


def needs_action(findings: list[Finding]) -> bool:
    return any(f.status == "action" for f in findings)


def as_json(findings: list[Finding]) -> str:
    code = {"code": errors.DOCTOR_ACTION_NEEDED} if needs_action(findings) else {}
    return json.dumps({"ok": not needs_action(findings), **code, "checks": [{"check": f.check, **asdict(f)} for f in findings]}, indent=2)


def as_text(findings: list[Finding]) -> str:
    marks = {"ok": "ok  ", "action": "FAIL", "skip": "skip"}
    lines = []
    for f in findings:
        lines.append(f"{marks[f.status]}  {f.check:<12} {f.summary}")
        lines += [f"{'':18}  {d}" for d in f.details]
        lines += [f"{'':18}  run: {x}" for x in f.fix]
    n = sum(f.status == "action" for f in findings)
    lines.append(f"scsql doctor: {n} problem(s) need action (SC055)" if n else "scsql doctor: everything is fine")
    return "\n".join(lines)


def _json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _span(d: dt.timedelta) -> str:
    s = d.total_seconds()
    return f"{s / 86400:.1f} days" if s >= 86400 else f"{s / 3600:.1f} h" if s >= 3600 else f"{s / 60:.0f} min"
