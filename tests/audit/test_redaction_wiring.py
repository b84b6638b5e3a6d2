"""Redaction applied by every write path, in the database, so a write made
with psql is redacted as much as one made through scsql: unsigned text
(facts, knowledge-base text, session summaries, task payloads, results,
errors and reasons) is stored redacted; signed text (session titles,
tool-call previews, outcome summaries and evidence, broadcast payloads) is
signed redacted by the scsql client and refused with SC040 when it arrives
holding a secret, since the database never changes what was signed."""

from __future__ import annotations

import hashlib
import subprocess
import time

import psycopg
import pytest
from psycopg.types.json import Jsonb

from scsql.api import Api
from scsql.audit import telemetry
from scsql.audit.signing import SignedField, SignedTable, key_id, sign_row
from scsql.coordination.client import BROADCAST_FIELDS, BROADCAST_TABLE, BROADCASTS
from scsql.core.errors import ScsqlError

from ..helpers import VERIFIERS, admin_rows, claim, login, one

GH = "ghp_5bDOkSWPJ42J2A0VepElDtJpJP8it5yTDrm7"  # fake, like the corpus
AWS = "AKIA42CFSUOSG0WP8I8Z"  # fake
SECRET = f"deploy with {GH}, then rotate {AWS}"
REDACTED = "deploy with [REDACTED:github_token], then rotate [REDACTED:aws_access_key]"
PW_URL = "postgres://app:Xk9mPq2vL7@db.internal:5432/app"
PW_URL_REDACTED = "postgres://app:[REDACTED:url_password]@db.internal:5432/app"


def clean(text) -> bool:
    """No secret of this module in TEXT (any value, as text)."""
    text = str(text)
    return GH not in text and AWS not in text and "Xk9mPq2vL7" not in text


def unredacted(fields):
    """The same signed fields without redaction: what a psql user who signs by hand signs."""
    return tuple(SignedField(f.name, f.kind, f.default) for f in fields)


def psql(db, name: str, command: str) -> subprocess.CompletedProcess:
    """COMMAND run by the psql program, logged in as agent NAME's own role."""
    return subprocess.run([db.server.bin("psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", db.login(name),
                           "-c", command], capture_output=True, text=True, timeout=60)


def ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def data_dump(db) -> str:
    """Every row of schema scsql, as pg_dump writes it."""
    return subprocess.run([db.server.bin("pg_dump"), "--data-only", "--schema=scsql", "-d", db.admin],
                          check=True, capture_output=True, text=True).stdout


@pytest.fixture
def team(scsql_db):
    project = scsql_db.project()
    orch = scsql_db.agent("orch", project, "orchestrator")
    dev = scsql_db.agent("dev", project, "developer")
    return scsql_db, orch, dev


# -- unsigned write paths ----------------------------------------------------------------

def _check_unsigned(db, orch_name: str) -> None:
    facts = admin_rows(db, "select key, value from scsql.memory_facts")
    assert facts == [{"key": "token [REDACTED:github_token]", "value": REDACTED}]
    note = admin_rows(db, "select s.path, s.meta, s.content_hash, c.content from scsql.kb_sources s "
                          "join scsql.kb_chunks c using (project_id, source_id) where s.kind = 'note'")
    assert [(r["path"], r["meta"], r["content"]) for r in note] == [
        (f"notes/{PW_URL_REDACTED}", {"why": REDACTED}, f"# Deploy\n\n{REDACTED}")]
    [summary] = admin_rows(db, "select s.meta, c.content from scsql.kb_sources s "
                               "join scsql.kb_chunks c using (project_id, source_id) "
                               "where s.kind = 'session_summary' and c.anchor = 'Done'")
    assert summary["meta"]["summary"] == {"done": [REDACTED]} and REDACTED in summary["content"]
    tasks = admin_rows(db, "select payload, acceptance_criteria, result, last_error, state from scsql.tasks_archive "
                           "order by task_id")
    assert [t["state"] for t in tasks] == ["done", "dead", "cancelled"]
    assert tasks[0]["payload"] == {"do": REDACTED, "api_key": "[REDACTED:assigned_secret]", "n": 1}
    assert tasks[0]["acceptance_criteria"] == REDACTED
    assert tasks[0]["result"] == {"log": PW_URL_REDACTED}
    assert tasks[1]["last_error"] == f"failed: {PW_URL_REDACTED}"
    assert tasks[2]["last_error"] == f"cancelled: {REDACTED}"
    dump = data_dump(db)
    assert REDACTED in dump and clean(dump)


def test_unsigned_writes_through_the_api_are_stored_redacted(team):
    db, orch, dev = team
    api, dev_api = Api(orch), Api(dev)
    assert api.call("remember", key=f"token {GH}", value=SECRET)[0]["key"] == "token [REDACTED:github_token]"
    [r] = api.call("index_text", path=f"notes/{PW_URL}", content=f"# Deploy\n\n{SECRET}", meta={"why": SECRET})
    assert r["path"] == f"notes/{PW_URL_REDACTED}"
    api.call("summarize_session", summary={"done": [SECRET]})
    for i, (payload, criteria) in enumerate([({"do": SECRET, "api_key": "Zx81kQm2Pq9LrT5vWb3NcD7f", "n": 1}, SECRET),
                                             ({"n": 2}, ""), ({"n": 3}, "")]):
        api.call("enqueue_task", role="developer", payload=payload, acceptance_criteria=criteria, max_attempts=1)
    [t1] = dev_api.call("claim_task")
    dev_api.call("complete_task", task=t1["task_id"], token=t1["lease_token"], result={"log": PW_URL})
    [t2] = dev_api.call("claim_task")
    dev_api.call("fail_task", task=t2["task_id"], token=t2["lease_token"], error=f"failed: {PW_URL}")
    [t3] = admin_rows(db, "select task_id from scsql.tasks")
    api.call("cancel_task", task=t3["task_id"], reason=f"cancelled: {SECRET}")
    # What agents read back is what is stored.
    assert [r["content"] for r in api.call("recall_context") if r["section"] == "fact"] == [
        f"token [REDACTED:github_token]: {REDACTED}"]
    _check_unsigned(db, orch.name)


def test_unsigned_writes_through_psql_are_stored_redacted(team):
    db, orch, dev = team
    s = f"$s${SECRET}$s$"
    ok(psql(db, orch.name, f"select scsql.remember($k$token {GH}$k$, {s})"))
    ok(psql(db, orch.name, f"select scsql.index_text($p$notes/{PW_URL}$p$, $c$# Deploy\n\n{SECRET}$c$, "
                           f"p_meta => jsonb_build_object('why', {s}::text))"))
    ok(psql(db, orch.name, f"select scsql.summarize_session(jsonb_build_object('done', {s}::text))"))
    ok(psql(db, orch.name, f"select scsql.enqueue_task('developer', jsonb_build_object('do', {s}::text, "
                           f"'api_key', 'Zx81kQm2Pq9LrT5vWb3NcD7f', 'n', 1), p_acceptance_criteria => {s}, "
                           f"p_max_attempts => 1)"))
    for n in (2, 3):
        ok(psql(db, orch.name, f"select scsql.enqueue_task('developer', '{{\"n\": {n}}}', p_max_attempts => 1)"))
    [t1] = claim(dev)
    ok(psql(db, dev.name, f"select scsql.complete_task({t1['task_id']}, {t1['lease_token']}, "
                          f"jsonb_build_object('log', $u${PW_URL}$u$::text))"))
    [t2] = claim(dev)
    ok(psql(db, dev.name, f"select scsql.fail_task({t2['task_id']}, {t2['lease_token']}, $e$failed: {PW_URL}$e$)"))
    [t3] = admin_rows(db, "select task_id from scsql.tasks")
    ok(psql(db, orch.name, f"select scsql.cancel_task({t3['task_id']}, $r$cancelled: {SECRET}$r$)"))
    _check_unsigned(db, orch.name)


def test_knowledge_base_hashes_are_those_of_the_redacted_text(team):
    """chunk_hash and content_hash stand for the stored (redacted) text: dedup,
    citations and the embedding queue agree with what search returns."""
    db, orch, dev = team
    text = f"# Rotation\n\nThe rotation script printed {SECRET} before the fix."
    stored = text.replace(SECRET, REDACTED)
    ok(psql(db, orch.name, f"select scsql.index_text('notes/a.md', $t${text}$t$)"))
    ok(psql(db, orch.name, f"select scsql.index_text('notes/b.md', $t${stored}$t$)"))  # the same text, already redacted
    chunks = admin_rows(db, "select s.path, s.content_hash, c.chunk_hash, c.content, scsql._chunk_hash(c.content) as h "
                            "from scsql.kb_sources s join scsql.kb_chunks c using (project_id, source_id) order by 1")
    assert [c["content"] for c in chunks] == [stored, stored]
    assert all(c["chunk_hash"] == c["h"] for c in chunks)
    assert chunks[0]["chunk_hash"] == chunks[1]["chunk_hash"]  # one text, one hash: deduplicated
    assert chunks[0]["content_hash"] == chunks[1]["content_hash"] == hashlib.sha256(stored.encode()).hexdigest()
    queued = admin_rows(db, "select chunk_hash from scsql.kb_embed_queue")
    assert [q["chunk_hash"] for q in queued] == [chunks[0]["chunk_hash"]]
    with dev.transaction() as conn:
        hits = conn.execute("select * from scsql.search('rotation script printed', p_mode => 'bm25')").fetchall()
    assert {(h["chunk_hash"], h["content"]) for h in hits} == {(chunks[0]["chunk_hash"], stored)}
    # Indexing the secret-holding text again changes nothing: found unchanged.
    again = one(orch, "select unchanged, content_hash from scsql.index_text('notes/a.md', %s)", text)
    assert again == {"unchanged": True, "content_hash": chunks[0]["content_hash"]}


# -- signed write paths ----------------------------------------------------------------------

def test_signed_writes_through_python_are_signed_redacted_and_verify(team):
    db, orch, dev = team
    api = Api(orch)
    s = api.call("start_session", client="cli", title=f"session {GH}")
    call = api.call("record_tool_call", tool="Bash", session_id=s["session_id"], input_preview=f"curl -H 'x: {GH}'",
                    output_preview=SECRET)
    api.call("record_outcome", kind="failed", summary=SECRET, evidence=PW_URL, tool_call_id=call["tool_call_id"])
    api.call("broadcast", type="STATUS", to_role="developer", payload={"note": SECRET, "password": "hunter2!x"})
    assert admin_rows(db, "select title from scsql.sessions") == [{"title": "session [REDACTED:github_token]"}]
    assert admin_rows(db, "select input_preview, output_preview from scsql.tool_calls") == [
        {"input_preview": "curl -H 'x: [REDACTED:github_token]'", "output_preview": REDACTED}]
    assert admin_rows(db, "select summary, evidence from scsql.outcomes") == [
        {"summary": REDACTED, "evidence": PW_URL_REDACTED}]
    assert admin_rows(db, "select summary, evidence from scsql.learnings") == [
        {"summary": REDACTED, "evidence": PW_URL_REDACTED}]
    assert admin_rows(db, "select payload from scsql.messages") == [
        {"payload": {"note": REDACTED, "password": "[REDACTED:password]"}}]
    assert clean(data_dump(db))
    verdict = VERIFIERS["python"].run(db, full=True)
    # and the memory history of the failure learning: added, then indexed
    assert verdict.ok and verdict.rows == 4 + 2, verdict.findings


def test_sign_many_redacts_every_row_in_one_query(team):
    db, orch, dev = team
    key_id(orch)  # the key id is looked up once per process; not part of what is counted
    opened = []
    transaction = orch.transaction

    def counting():
        opened.append(1)
        return transaction()

    rows = [{"tool": f"t{i}", "input_preview": f"{SECRET} {i}", "output_preview": "nothing secret"} for i in range(5)]
    rows.append({"tool": "plain"})
    orch.rules()  # read once per agent (scsql_caller.rules), before the batches counted here
    orch.transaction = counting
    try:
        signed = telemetry.TOOL_CALLS.sign_many(orch, rows)
    finally:
        del orch.transaction
    assert len(opened) == 1
    assert [r["input_preview"] for r in signed] == [f"{REDACTED} {i}" for i in range(5)] + [None]
    assert len({r["at"] for r in signed}) == 6
    with orch.transaction() as conn:
        for r in signed:
            conn.execute("select * from scsql.record_tool_call(p_tool => %(tool)s, p_input_preview => %(input_preview)s, "
                         "p_output_preview => %(output_preview)s, p_at => %(at)s, p_key_id => %(key_id)s, "
                         "p_signature => %(signature)s)", r)
    verdict = VERIFIERS["python"].run(db, full=True)
    assert verdict.ok and verdict.rows == 6, verdict.findings
    # Nothing redaction could change: no query at all.
    orch.transaction = counting
    try:
        telemetry.TOOL_CALLS.sign_many(orch, [{"tool": "x"}, {"tool": "y", "input_preview": ""},
                                              {"tool": "z", "input_preview": "build 42 ok", "output_preview": "src/a.py"}])
        BROADCASTS.sign(orch, {"type": "STATUS", "to_role": "developer", "payload": {"n": [1, 2.5, None, "done"]}})
    finally:
        del orch.transaction
    assert len(opened) == 1


def test_the_client_asks_the_database_whenever_redaction_could_change_a_text(team):
    """The client skips the round trip for text without any of the words that
    scsql._redact tests first; the list is one, the database's, which the
    client reads (scsql_caller.rules)."""
    db, orch, dev = team
    [definition] = admin_rows(db, "select pg_get_functiondef('scsql._redact(text)'::regprocedure) as d")
    assert "!~* scsql_caller.redaction_prefilter()" in definition["d"]
    [prefilter] = admin_rows(db, "select scsql_caller.redaction_prefilter() as p")
    assert dev.rules().redaction_prefilter.pattern == prefilter["p"]


SIGNED_SENDS = {
    "title": ("scsql.sessions", telemetry.SESSION_FIELDS, {"title": f"about {GH}"},
              "select * from scsql.start_session(p_title => %(title)s, p_at => %(at)s, p_key_id => %(key_id)s, "
              "p_signature => %(signature)s)"),
    "input_preview": ("scsql.tool_calls", telemetry.TOOL_CALL_FIELDS, {"tool": "Bash", "input_preview": f"echo {AWS}"},
                      "select * from scsql.record_tool_call(p_tool => %(tool)s, p_input_preview => %(input_preview)s, "
                      "p_at => %(at)s, p_key_id => %(key_id)s, p_signature => %(signature)s)"),
    "output_preview": ("scsql.tool_calls", telemetry.TOOL_CALL_FIELDS, {"tool": "Bash", "output_preview": SECRET},
                       "select * from scsql.record_tool_call(p_tool => %(tool)s, p_output_preview => %(output_preview)s, "
                       "p_at => %(at)s, p_key_id => %(key_id)s, p_signature => %(signature)s)"),
    "summary": ("scsql.outcomes", telemetry.OUTCOME_FIELDS, {"kind": "failed", "summary": SECRET, "task_ref": "T-1"},
                "select * from scsql.record_outcome(p_kind => %(kind)s, p_summary => %(summary)s, p_task_ref => %(task_ref)s, "
                "p_at => %(at)s, p_key_id => %(key_id)s, p_signature => %(signature)s)"),
    "evidence": ("scsql.outcomes", telemetry.OUTCOME_FIELDS,
                 {"kind": "failed", "summary": "s", "task_ref": "T-1", "evidence": PW_URL},
                 "select * from scsql.record_outcome(p_kind => %(kind)s, p_summary => %(summary)s, "
                 "p_task_ref => %(task_ref)s, p_evidence => %(evidence)s, p_at => %(at)s, p_key_id => %(key_id)s, "
                 "p_signature => %(signature)s)"),
    "payload": (BROADCAST_TABLE, BROADCAST_FIELDS, {"type": "STATUS", "to_role": "developer", "payload": {"x": SECRET}},
                "select * from scsql.broadcast(p_type => %(type)s, p_to_role => %(to_role)s, p_payload => %(payload)s, "
                "p_at => %(at)s, p_key_id => %(key_id)s, p_signature => %(signature)s)"),
}
KINDS = {"title": "github_token", "input_preview": "aws_access_key", "output_preview": "aws_access_key, github_token",
         "summary": "aws_access_key, github_token", "evidence": "url_password", "payload": "aws_access_key, github_token"}


def _counts(db) -> dict:
    return admin_rows(db, "select (select count(*) from scsql.sessions) s, (select count(*) from scsql.tool_calls) t, "
                          "(select count(*) from scsql.outcomes) o, (select count(*) from scsql.learnings) l, "
                          "(select count(*) from scsql.messages) m, (select coalesce(sum(head_seq), 0) from scsql.chains) h")[0]


@pytest.mark.parametrize("field", list(SIGNED_SENDS))
def test_a_signed_write_holding_a_secret_is_refused_and_leaves_nothing(team, field):
    """Signed by hand without redaction and sent as the agent's own login (as
    from psql): SC040 names the field and the kind, never the secret; no row,
    no learning, no chain link. The same row signed redacted is accepted."""
    db, orch, dev = team
    table, fields, args, query = SIGNED_SENDS[field]
    before = _counts(db)
    out = sign_row(orch, table, unredacted(fields), args)
    if "payload" in out:
        out["payload"] = Jsonb(out["payload"])
    with login(db, orch.name) as conn, pytest.raises(psycopg.Error) as err:
        conn.execute(query, out)
    assert err.value.sqlstate == "SC040"
    message = err.value.diag.message_primary
    assert message.startswith(f"{field} holds a secret ({KINDS[field]})"), message
    assert clean(message) and clean(err.value.diag.message_hint)
    assert _counts(db) == before
    # Signed redacted (as scsql's client signs), the same write goes in and verifies.
    out = sign_row(orch, table, fields, args)
    if "payload" in out:
        out["payload"] = Jsonb(out["payload"])
    with login(db, orch.name) as conn:
        conn.execute(query, out)
    assert _counts(db) != before
    assert clean(data_dump(db))
    verdict = VERIFIERS["python"].run(db, full=True)
    assert verdict.ok, verdict.findings


def test_a_psql_signed_write_refused_through_psql_itself(team):
    """The psql program, as the agent: SC040 on its stderr, nothing stored."""
    db, orch, dev = team
    out = sign_row(orch, "scsql.tool_calls", unredacted(telemetry.TOOL_CALL_FIELDS), {"tool": "Bash", "input_preview": SECRET})
    proc = psql(db, orch.name, f"select * from scsql.record_tool_call(p_tool => 'Bash', p_input_preview => $s${SECRET}$s$, "
                               f"p_at => '{out['at'].isoformat()}', p_key_id => {out['key_id']}, "
                               f"p_signature => '\\x{out['signature'].hex()}')")
    assert proc.returncode != 0 and "input_preview holds a secret (aws_access_key, github_token)" in proc.stderr
    assert clean(proc.stderr)
    assert admin_rows(db, "select count(*) as n from scsql.tool_calls") == [{"n": 0}]


# -- idempotence -------------------------------------------------------------------------------

def test_redacting_what_is_stored_changes_nothing(team):
    db, orch, dev = team
    api = Api(orch)
    first = api.call("remember", key="k", value=SECRET)
    second = api.call("remember", key="k", value=REDACTED)
    assert first[0]["key"] == second[0]["key"] and admin_rows(db, "select value from scsql.memory_facts") == [{"value": REDACTED}]
    assert one(orch, "select scsql.redact(scsql.redact(%s)) = scsql.redact(%s) as same, scsql.redact(%s) as r",
               SECRET, SECRET, SECRET) == {"same": True, "r": REDACTED}
    # Already-redacted text passes the signed paths' check, through psql too.
    out = sign_row(orch, "scsql.tool_calls", unredacted(telemetry.TOOL_CALL_FIELDS), {"tool": "Bash", "input_preview": REDACTED})
    with login(db, orch.name) as conn:
        conn.execute("select * from scsql.record_tool_call(p_tool => 'Bash', p_input_preview => %(input_preview)s, "
                     "p_at => %(at)s, p_key_id => %(key_id)s, p_signature => %(signature)s)", out)
    assert admin_rows(db, "select input_preview from scsql.tool_calls") == [{"input_preview": REDACTED}]
    # A forget with the key as it was remembered finds the stored (redacted) key.
    api.call("remember", key=f"token {GH}", value="v")
    assert api.call("forget", key=f"token {GH}") is True
    assert api.call("forget", key=f"token {GH}") is False


# -- the public functions -------------------------------------------------------------------------

def test_redact_is_callable_by_agents_and_the_auditor_but_no_tool(team):
    db, orch, dev = team
    assert "redact" not in Api(dev).functions and "redact_jsonb" not in Api(dev).functions
    assert one(dev, "select scsql.redact(%s) as t, scsql.redact_jsonb(%s) as j, scsql.redact(null) as n",
               SECRET, Jsonb({"token": SECRET})) == {"t": REDACTED, "j": {"token": REDACTED}, "n": None}
    with db.connect() as conn:
        conn.execute("set role scsql_auditor")
        assert conn.execute("select scsql.redact(%s) as t", (SECRET,)).fetchone() == {"t": REDACTED}
    with pytest.raises(ScsqlError) as err:
        one(dev, "select scsql.redact(%s)", "x" * 2_097_153)
    assert err.value.code == "SC041"
    with pytest.raises(ScsqlError) as err:
        one(dev, "select scsql.redact_jsonb(%s)", Jsonb({"x": "y" * 2_097_153}))
    assert err.value.code == "SC041"
    deep: object = "x"
    for _ in range(70):
        deep = [deep]
    with pytest.raises(ScsqlError) as err:
        one(dev, "select scsql.redact_jsonb(%s::jsonb)", Jsonb(deep))
    assert err.value.code == "SC010"


def test_cost_of_redaction_per_row_is_reported(team):
    """Measured, not asserted: 10,000 previews of 4,000 characters through
    scsql._redact, against a no-op over the same input in the same run, for
    previews without secret words and with a secret in each."""
    db, orch, dev = team
    line = "src/scsql/audit/signing.py:120: def sign(self, agent, args): return out  # build 42 ok\n"
    plain = (line * (4000 // len(line) + 1))[:4000]
    secret = (plain[:3000] + " " + SECRET + " " + plain)[:4000]
    with db.connect() as conn:
        conn.execute("set role scsql_owner")

        def timed(expr: str, text: str) -> float:
            start = time.perf_counter()
            conn.execute(f"select count({expr}) from (select %s || g::text as t from generate_series(1, 10000) g) s",
                         (text,)).fetchone()
            return (time.perf_counter() - start) * 1000

        timed("scsql._redact(t)", secret)  # warm the caches
        report = []
        for what, text in (("no secret words", plain), ("a secret in each", secret)):
            base = timed("length(t)", text)
            ms = timed("scsql._redact(t)", text)
            check = timed("scsql._require_redacted('p', t)", text.replace(SECRET, REDACTED))
            report.append((what, base, ms, check))
    print()
    for what, base, ms, check in report:
        print(f"redaction cost, 10,000 previews of 4,000 chars, {what}: _redact {ms:.0f} ms "
              f"({(ms - base) / 10:.1f} us/row over a no-op of {base:.0f} ms); "
              f"_require_redacted of redacted previews {check:.0f} ms ({(check - base) / 10:.1f} us/row)")
    assert report
