"""The tables' check constraints are the limits of what a write may store.

Each constraint that an argument reaches is mapped, in sql/90_constraints.sql
only, to the SC code, message and hint its violation raises; the write
functions report a violation through scsql._raise_violation. These tests
hold that together: every check constraint is mapped or listed below with a
reason; bad input through each public function raises the mapped code and
message and stores nothing; the same violation made by a direct INSERT is
PostgreSQL's own error until a function reports it; nothing is truncated on
the way; and a name that names nothing raises the code its look-up raises.
"""

from __future__ import annotations

import psycopg
import pytest

from scsql.api import Api
from scsql.core.errors import ScsqlError

from ..helpers import one_server_only

# Check constraints that no caller's argument reaches: the database computes
# or keeps these values itself, so a violation is a bug and is raised as
# PostgreSQL reports it, not as a bad argument.
UNMAPPED = {
    "model_calls_cost_usd_check": "the cost is computed from scsql.model_prices",
    "applied_definitions_one": "scsql migrate writes the one row",
    "applied_definitions_checksum": "scsql migrate writes the checksum it computed",
    "error_codes_code_check": "the catalogue is written by sql/ files only",
    "error_codes_name_check": "the catalogue is written by sql/ files only",
    "error_codes_raised_by_check": "the catalogue is written by sql/ files only",
    "chain_break_kinds_kind_check": "the catalogue is written by sql/ files only",
    "chain_break_kinds_found_by_check": "the catalogue is written by sql/ files only",
    "agent_keys_key_id_check": "register_agent and rotate_agent_key number the keys",
    "project_locks_name_check": "lock purposes are named by scsql's own functions",
    "purges_target_kind_check": "scsql.purge checks the kind first (SC360)",
    "purges_reason_check": "scsql.purge checks the reason first (SC364)",
    "purges_digests_object": "scsql.purge builds the digests from the row it purges",
    "chains_head_hash_check": "chain heads are advanced by the chain trigger",
    "chains_head_seq_check": "chain heads are advanced by the chain trigger",
    "chains_horizon_hash_check": "the horizon is set by retention",
    "chains_horizon_seq_check": "the horizon is set by retention",
    "tool_calls_cost_usd_check": "the cost is computed from scsql.model_prices",
    "learnings_classification_check": "a learning takes its outcome's classification",
    "learnings_kind_check": "a learning's kind is derived from its outcome's",
    "learnings_summary_kept": "a learning takes its outcome's summary; only scsql.purge removes it, keeping its sha256",
    "checkpoints_signature_check": "record_checkpoint checks the signature first (SC131/SC132)",
    "checkpoint_heads_from_seq_check": "heads are read from the chains by record_checkpoint",
    "checkpoint_heads_row_hash_check": "heads are read from the chains by record_checkpoint",
    "checkpoint_heads_seq_check": "heads are read from the chains by record_checkpoint",
    "checkpoint_segments_first_seq_check": "segments are computed by record_checkpoint",
    "checkpoint_segments_part_check": "segments are computed by record_checkpoint",
    "checkpoint_segments_row_hash_check": "segments are computed by record_checkpoint",
    "checkpoint_segments_seq_order": "segments are computed by record_checkpoint",
    "chain_quarantines_anchored_seq_check": "the anchor is computed by record_quarantine",
    "chain_quarantines_acknowledged_by": "acknowledge_quarantine sets both columns together",
    "partition_retirements_bounds": "bounds are read from the partition that retention drops",
    "partition_retirements_part_check": "the partition name comes from the catalog",
    "chain_settings_singleton_check": "the settings table holds one row",
    "embed_models_name_check": "set_embedding_model checks the model name first (_check_text: SC200/SC201)",
    "memory_facts_key_check": "remember checks the key first (_check_text: SC200 too long, SC201 empty)",
    "memory_facts_value_check": "remember checks the value first (_check_text: SC200 too long, SC201 empty)",
    "memory_state_n_chunks_check": "a counter kept by the indexing functions",
    "memory_state_n_file_chunks_check": "a counter kept by the indexing functions",
    "memory_state_published_chunks_check": "a counter kept by the indexing functions",
    "memory_state_published_len_check": "a counter kept by the indexing functions",
    "memory_state_total_len_check": "a counter kept by the indexing functions",
    "kb_sources_content_hash_check": "the hash is computed by the indexing functions",
    "kb_sources_path_check": "the indexing functions check paths first (_check_text: SC200/SC201)",
    "kb_chunks_chunk_hash_check": "the hash is computed by _chunk_hash",
    "kb_terms_df_check": "a statistic kept by the indexing functions",
    "kb_terms_published_df_check": "a statistic kept by the indexing functions",
    "kb_terms_tier_min_dl_check": "a statistic kept by the indexing functions",
    "kb_postings_dl_check": "a statistic kept by the indexing functions",
    "kb_postings_tf_check": "a statistic kept by the indexing functions",
    "kb_embed_queue_claim_check": "claims are set by embed_claim as a whole",
    "tasks_attempts_check": "attempts are counted by claim_task",
    "tasks_fence_check": "the fence is counted by claim_task",
    "tasks_state_check": "the state is set by the queue functions",
    "tasks_claimed_has_lease": "claims and leases are set by the queue functions together",
    "tasks_archive_state_check": "the final state is set by the queue functions",
    "messages_to_agent_named": "broadcast stores the recipient's name with its id",
    "channel_keys_key_check": "channel keys are generated by the database",
    "code_files_status_check": "index_code checks the status first (SC261)",
    "code_definitions_kind_check": "index_code checks each definition's kind first (SC261)",
    "code_references_kind_check": "index_code checks each reference's kind first (SC261)",
    "code_references_resolution_check": "resolution is set by the resolving functions",
    "agent_tokens_token_hash_check": "create_agent_token checks the hash first (SC010)",
    "agent_tokens_scope_check": "create_agent_token checks the scope first (SC010)",
    "agent_tokens_note_check": "create_agent_token checks the note first (SC010)",
    "agent_tokens_expiry": "create_agent_token checks the expiry first (SC010)",
    "distill_jobs_state_check": "a job's state is set by the distillation functions",
    "distill_citations_cited_check": "distill_write parses citations first (SC331)",
}

CHECKS = """
    select c.conname, c.conrelid::regclass::text as tbl, pg_catalog.obj_description(c.oid, 'pg_constraint') as note
    from pg_catalog.pg_constraint c join pg_catalog.pg_class t on t.oid = c.conrelid
    where c.contype = 'c' and t.relnamespace::regnamespace::text in ('scsql', 'scsql_caller') and not t.relispartition
    order by 2, 1
"""


def _mapped(db) -> dict[str, tuple[str, str, str | None]]:
    """constraint name -> (code, message, hint) from the constraints' comments."""
    out = {}
    with db.connect() as conn:
        for r in conn.execute(CHECKS).fetchall():
            if r["note"] and r["note"].startswith("SC"):
                head, _, hint = r["note"].partition("\nhint: ")
                code, _, message = head.partition(": ")
                out[r["conname"]] = (code, message, hint or None)
    return out


def test_every_check_constraint_is_mapped_to_a_code_or_listed_with_a_reason(scsql_db):
    with scsql_db.connect() as conn:
        rows = conn.execute(CHECKS).fetchall()
        codes = {r["code"] for r in conn.execute("select code from scsql.error_codes").fetchall()}
    assert rows
    names = [r["conname"] for r in rows]
    assert len(names) == len(set(names)), "constraint names must be unique: the mapping is by name"
    unmapped, bad_notes = [], []
    for r in rows:
        if r["note"] is None:
            if r["conname"] not in UNMAPPED:
                unmapped.append(f"{r['tbl']}.{r['conname']}")
            continue
        code = r["note"].split(":", 1)[0]
        if code not in codes or not r["note"].startswith(code + ": ") or r["conname"] in UNMAPPED:
            bad_notes.append((r["conname"], r["note"]))
    assert unmapped == [], "map these in sql/90_constraints.sql, or list them in UNMAPPED with the reason"
    assert bad_notes == []
    assert set(UNMAPPED) <= set(names), "UNMAPPED names constraints that do not exist"
    # No constraint keeps PostgreSQL's default name for a table-wide check.
    assert [n for n in names if n.endswith("_check") and n[:-6] in {r["tbl"].split(".")[-1] for r in rows}] == []


def test_every_mapped_constraint_raises_its_code_message_and_hint(scsql_db):
    mapped = _mapped(scsql_db)
    assert len(mapped) >= 40
    with scsql_db.connect() as conn:
        for name, (code, message, hint) in mapped.items():
            table = conn.execute("select conrelid::regclass::text as t from pg_constraint where conname = %s",
                                 (name,)).fetchone()["t"]
            schema, _, rel = table.rpartition(".")
            with pytest.raises(psycopg.Error) as err:
                conn.execute("select scsql._raise_violation(row('23514', %s, %s, %s, null, 'x'))", (schema, rel, name))
            conn.rollback()
            assert err.value.sqlstate == code, name
            assert err.value.diag.message_primary == message, name
            assert (err.value.diag.message_hint or None) == hint, name
            assert err.value.diag.constraint_name == name and err.value.diag.table_name == rel


@pytest.fixture
def team(scsql_db):
    project = scsql_db.project()
    orch = scsql_db.agent("orch", project, team_role="orchestrator")
    dev = scsql_db.agent("dev", project)
    return scsql_db, project, orch, dev


def _count(db, table: str) -> int:
    with db.connect() as conn:
        return conn.execute(f"select count(*) as n from {table}").fetchone()["n"]


# (function, arguments, the constraint whose rule they break)
AGENT_CASES = [
    ("start_session", {"client": "c" * 101}, "sessions_client_check"),
    ("start_session", {"model": "m" * 201}, "sessions_model_check"),
    ("start_session", {"title": "t" * 501}, "sessions_title_check"),
    ("record_tool_call", {"tool": ""}, "tool_calls_tool_check"),
    ("record_tool_call", {"tool": "t" * 201}, "tool_calls_tool_check"),
    ("record_tool_call", {"tool": "Read", "status": "fine"}, "tool_calls_status_check"),
    ("record_tool_call", {"tool": "Read", "origin": "human"}, "tool_calls_origin_check"),
    ("record_tool_call", {"tool": "Read", "input_tokens": -1}, "tool_calls_input_tokens_check"),
    ("record_tool_call", {"tool": "Read", "output_tokens": -1}, "tool_calls_output_tokens_check"),
    ("record_tool_call", {"tool": "Read", "latency_ms": -1}, "tool_calls_latency_ms_check"),
    ("record_tool_call", {"tool": "Read", "model": "m" * 201}, "tool_calls_model_check"),
    ("record_tool_call", {"tool": "Read", "input_preview": "x" * 4001}, "tool_calls_input_preview_check"),
    ("record_tool_call", {"tool": "Read", "output_preview": "x" * 4001}, "tool_calls_output_preview_check"),
    ("record_outcome", {"kind": "great", "summary": "s", "task_ref": "T"}, "outcomes_kind_check"),
    ("record_outcome", {"kind": "failed", "summary": "", "task_ref": "T"}, "outcomes_summary_check"),
    ("record_outcome", {"kind": "failed", "summary": "s" * 1001, "task_ref": "T"}, "outcomes_summary_check"),
    ("record_outcome", {"kind": "failed", "summary": "s", "task_ref": "T", "signal": "CI"}, "outcomes_signal_check"),
    ("record_outcome", {"kind": "failed", "summary": "s", "task_ref": "T", "confidence": 2}, "outcomes_confidence_check"),
    ("record_outcome", {"kind": "failed", "summary": "s", "task_ref": "T", "evidence": "e" * 8001},
     "outcomes_evidence_check"),
    ("record_outcome", {"kind": "failed", "summary": "s", "task_ref": "T" * 201}, "outcomes_task_ref_check"),
    ("record_outcome", {"kind": "failed", "summary": "s"}, "outcomes_names_subject"),
    ("record_outcome", {"kind": "failed", "summary": "s", "task_ref": "T", "classification": "secret"},
     "outcomes_classification_check"),
    ("remember", {"key": "k", "value": "v", "importance": 0}, "memory_facts_importance_check"),
    ("remember", {"key": "k", "value": "v", "importance": 6}, "memory_facts_importance_check"),
    ("remember", {"key": "k", "value": "v", "importance": -2**31}, "memory_facts_importance_check"),  # smallint column
    ("enqueue_task", {"role": "developer", "complexity": 6}, "tasks_complexity_check"),
    ("enqueue_task", {"role": "developer", "complexity": 2**31 - 1}, "tasks_complexity_check"),  # smallint column
    ("enqueue_task", {"role": "developer", "max_attempts": 0}, "tasks_max_attempts_check"),
    ("enqueue_task", {"role": "developer", "max_attempts": 101}, "tasks_max_attempts_check"),
]
TABLES = ("scsql.sessions", "scsql.tool_calls", "scsql.outcomes", "scsql.learnings", "scsql.memory_facts",
          "scsql.tasks", "scsql.task_files")


@pytest.mark.parametrize(("function", "args", "constraint"), AGENT_CASES,
                         ids=[f"{f}-{c}-{i}" for i, (f, _, c) in enumerate(AGENT_CASES)])
def test_bad_input_through_the_api_raises_the_mapped_code_and_stores_nothing(team, function, args, constraint):
    db, _, orch, _ = team
    code, message, hint = _mapped(db)[constraint]
    with pytest.raises(ScsqlError) as err:
        Api(orch).call(function, **args)
    assert (err.value.code, err.value.message) == (code, message), err.value
    assert err.value.hint == hint
    assert [t for t in TABLES if _count(db, t)] == []


def _admin_error(db, statement: str, *params):
    with db.connect() as conn, pytest.raises(psycopg.Error) as err:
        conn.execute("set role scsql_admin")
        conn.execute(statement, params)
    return err.value


@pytest.mark.parametrize(("statement", "constraint"), [
    ("select scsql.create_project('Bad Name')", "projects_name_check"),
    ("select scsql.create_project(null)", "projects_name_check"),
    ("select scsql.create_project('relative', 'src/here')", "projects_root_path_check"),
    ("select scsql.define_team_role('Bad-Role')", "team_roles_name_check"),
    ("select scsql.define_team_role(null)", "team_roles_name_check"),
    ("select scsql.set_model_price('', 1, 1)", "model_prices_model_check"),
    ("select scsql.set_model_price(null, 1, 1)", "model_prices_model_check"),
    ("select scsql.set_clock_skew('0 seconds')", "chain_settings_clock_skew_check"),
    ("select scsql.set_clock_skew('31 days')", "chain_settings_clock_skew_check"),
    ("select scsql.set_partition_retention('scsql.tool_calls', '1 hour')", "partition_settings_retention_check"),
    ("select scsql.set_partition_retention('scsql.tool_calls', null, 91)", "partition_settings_premake_check"),
])
def test_bad_input_through_an_administrator_function_raises_the_mapped_code(scsql_db, statement, constraint):
    code, message, hint = _mapped(scsql_db)[constraint]
    prices = _count(scsql_db, "scsql.model_prices")  # the shipped list
    err = _admin_error(scsql_db, statement)
    assert (err.sqlstate, err.diag.message_primary) == (code, message)
    assert _count(scsql_db, "scsql.projects") == 0 and _count(scsql_db, "scsql.model_prices") == prices


def test_bad_keys_and_limits_raise_the_mapped_code(team):
    db, project, orch, _ = team
    mapped = _mapped(db)
    err = _admin_error(db, "select scsql.rotate_agent_key(%s, %s)", orch.name, b"k" * 31)
    assert (err.sqlstate, err.diag.message_primary) == mapped["agent_keys_public_key_check"][:2]
    for key in (b"k" * 33, None):
        err = _admin_error(db, "select scsql.register_auditor_key(%s)", key)
        assert (err.sqlstate, err.diag.message_primary) == mapped["auditor_keys_public_key_check"][:2]
    for args in ((project, 10001), (project, -1)):
        err = _admin_error(db, "select scsql.set_broadcast_limit(%s, %s)", *args)
        assert (err.sqlstate, err.diag.message_primary) == mapped["coordination_settings_broadcasts_per_minute_check"][:2]
    err = _admin_error(db, "select scsql.set_broadcast_limit(%s, %s, %s)", project, 10001, orch.name)
    assert (err.sqlstate, err.diag.message_primary) == mapped["broadcast_senders_per_minute_check"][:2]
    with db.connect() as conn:
        assert conn.execute("select count(*) as n from scsql.agent_keys").fetchone()["n"] == 2
        assert conn.execute("select count(*) as n from scsql.auditor_keys").fetchone()["n"] == 0
        assert conn.execute("select count(*) as n from scsql.coordination_settings where broadcasts_per_minute > 10000"
                            ).fetchone()["n"] == 0


def test_a_bad_argument_is_reported_before_missing_signing_fields(team):
    """PostgreSQL checks constraints after BEFORE triggers; the chain trigger
    checks them first when the signing fields are wrong, so a psql caller who
    signs nothing hears about the bad argument, as before."""
    db, _, orch, _ = team
    mapped = _mapped(db)
    cases = [
        ("select * from scsql.record_tool_call('')", "tool_calls_tool_check"),
        ("select * from scsql.record_tool_call(null)", "tool_calls_tool_check"),
        ("select * from scsql.record_tool_call('Read', p_input_preview => repeat('x', 4001))",
         "tool_calls_input_preview_check"),
        ("select * from scsql.record_outcome('failed', 'x', p_task_ref => 'T', p_classification => null)",
         "outcomes_classification_check"),
        ("select * from scsql.start_session(repeat('c', 101))", "sessions_client_check"),
    ]
    for statement, constraint in cases:
        with pytest.raises(ScsqlError) as err, orch.transaction() as conn:
            conn.execute(statement)
        assert (err.value.code, err.value.message) == mapped[constraint][:2], statement
    with pytest.raises(ScsqlError) as err, orch.transaction() as conn:
        conn.execute("select * from scsql.record_tool_call('Read')")
    assert err.value.code == "SC101"
    assert [t for t in TABLES if _count(db, t)] == []


@one_server_only("Citus runs an INSERT ... SELECT through the coordinator and returns XX000; "
                 "tests/core/test_citus_errors.py checks its mapping of a shard's constraint")
def test_a_direct_insert_gets_postgresql_s_error_and_a_function_maps_it(team):
    """The constraint is the limit: an owner's direct INSERT breaks it with
    PostgreSQL's check_violation naming it; the same INSERT inside a
    function that reports through _raise_violation gives the mapped code."""
    db, _, orch, _ = team
    code, message, _ = _mapped(db)["tasks_max_attempts_check"]
    insert = """insert into scsql.tasks (project_id, team_role, max_attempts, created_by)
                select a.project_id, 'developer', 0, a.agent_id from scsql.agents a where a.name = %s"""
    with db.connect() as conn, pytest.raises(psycopg.Error) as err:
        conn.execute(insert, (orch.name,))
    assert err.value.sqlstate == "23514" and err.value.diag.constraint_name == "tasks_max_attempts_check"
    with db.connect() as conn, pytest.raises(psycopg.Error) as err:
        conn.execute(f"""
            create function pg_temp.write_task(p_agent text) returns void language plpgsql as $$
            declare v_err scsql.violation;
            begin
              {insert.replace('%s', 'p_agent')};
            exception when check_violation or not_null_violation then
              get stacked diagnostics v_err.returned_sqlstate = returned_sqlstate, v_err.schema_name = schema_name,
                v_err.table_name = table_name, v_err.constraint_name = constraint_name,
                v_err.column_name = column_name, v_err.message_text = message_text;
              perform scsql._raise_violation(v_err);
            end $$""")
        conn.execute("select pg_temp.write_task(%s)", (orch.name,))
    assert (err.value.sqlstate, err.value.diag.message_primary) == (code, message)
    # An invariant the database keeps is not mapped: its violation stays PostgreSQL's.
    with db.connect() as conn, pytest.raises(psycopg.Error) as err:
        conn.execute("select scsql._raise_violation(row('23514', 'scsql', 'tasks', 'tasks_fence_check', null, 'as it was'))")
    assert err.value.sqlstate == "23514" and err.value.diag.message_primary == "as it was"


def test_previews_and_evidence_are_never_truncated(team):
    """The client signed a 4,000-character prefix ending in an ellipsis and
    stored that; now the value is sent whole and the database refuses it."""
    from scsql.audit.signing import sign_row
    from scsql.audit.telemetry import OUTCOME_FIELDS, TOOL_CALL_FIELDS

    db, _, orch, _ = team
    signed = sign_row(orch, "scsql.tool_calls", TOOL_CALL_FIELDS, {"tool": "Read", "input_preview": "x" * 5000})
    assert signed["input_preview"] == "x" * 5000
    signed = sign_row(orch, "scsql.outcomes", OUTCOME_FIELDS,
                            {"kind": "failed", "summary": "s", "task_ref": "T", "evidence": "e" * 9000})
    assert signed["evidence"] == "e" * 9000
    api = Api(orch)
    for function, args in (("record_tool_call", {"tool": "Read", "output_preview": "y" * 4001}),
                           ("record_outcome", {"kind": "failed", "summary": "s", "task_ref": "T", "evidence": "e" * 8001})):
        with pytest.raises(ScsqlError) as err:
            api.call(function, **args)
        assert err.value.code == "SC010" and "nothing was stored" in err.value.message
    assert _count(db, "scsql.tool_calls") == 0 and _count(db, "scsql.outcomes") == 0
    # At the limit, the whole value is stored as given.
    api.call("record_tool_call", tool="Read", input_preview="é" * 4000)
    with db.connect() as conn:
        assert conn.execute("select input_preview from scsql.tool_calls").fetchone()["input_preview"] == "é" * 4000


@pytest.mark.parametrize(("statement", "code"), [
    ("select * from scsql.register_agent('newone', 'no_such_project', 'developer', %(key)s)", "SC005"),
    ("select scsql.grant_project_read('no_such_project', %(agent)s)", "SC005"),
    ("select scsql.set_embedding_model('no_such_project', 'm', 8)", "SC005"),
    ("select scsql.set_project_root('no_such_project', '/srv/x')", "SC005"),
    ("select scsql.set_broadcast_limit('no_such_project', 5)", "SC005"),
    ("select scsql.revoke_agent('no_such_agent')", "SC003"),
    ("select scsql.rotate_agent_key('no_such_agent', %(key)s)", "SC003"),
    ("select scsql.grant_project_read(%(project)s, 'no_such_agent')", "SC003"),
    ("select scsql.grant_confidential('no_such_agent', 'developer')", "SC003"),
    ("select scsql.set_broadcast_limit(%(project)s, 5, 'no_such_agent')", "SC003"),
    ("select * from scsql.register_agent('newone', %(project)s, 'astronaut', %(key)s)", "SC008"),
    ("select scsql.grant_confidential(%(agent)s, 'astronaut')", "SC008"),
])
def test_a_name_that_names_nothing_raises_its_code(team, statement, code):
    db, project, orch, _ = team
    with db.connect() as conn, pytest.raises(psycopg.Error) as err:
        conn.execute("set role scsql_admin")
        conn.execute(statement, {"key": b"n" * 32, "agent": orch.name, "project": project})
    assert err.value.sqlstate == code, err.value
    assert "does not exist" in err.value.diag.message_primary or "is not in project" in err.value.diag.message_primary


def test_an_agent_s_unknown_names_raise_their_codes(team):
    db, _, orch, dev = team
    api = Api(orch)
    for function, args, code in (("enqueue_task", {"role": "astronaut"}, "SC008"),
                                 ("broadcast", {"type": "STATUS", "to_role": "astronaut"}, "SC008"),
                                 ("ack_message", {"message": 424242}, "SC344"),
                                 ("explain_message", {"message": 424242}, "SC344")):
        with pytest.raises(ScsqlError) as err:
            api.call(function, **args)
        assert err.value.code == code, (function, err.value)
    with pytest.raises(ScsqlError) as err:
        Api(dev).call("enqueue_task", role="developer")
    assert err.value.code == "SC300"
    assert _count(db, "scsql.tasks") == 0 and _count(db, "scsql.messages") == 0


def test_json_nested_too_deep_and_infinite_times_are_bad_arguments(team):
    """Every JSON a write path stores is redacted level by level; a value
    nested deeper than the write paths allow is SC010 wherever it comes in
    (it used to exhaust the stack, 54001, where no earlier check caught it),
    and a stored time (a task's run_after, a capture's occurred_at) is one
    every client can read back: 1970 to 9000, never infinite."""
    db, _, orch, dev = team
    deep = "[" * 5000 + "1" + "]" * 5000
    calls = [(dev, "select * from scsql.capture_tool_call('Edit', 'ok', p_files => %s::jsonb)", deep),
             (orch, "select * from scsql.enqueue_task('developer', %s::jsonb)", deep),
             (orch, "select * from scsql.enqueue_task('developer', '{}', p_run_after => %s::timestamptz)", "-infinity"),
             (orch, "select * from scsql.enqueue_task('developer', '{}', p_run_after => %s::timestamptz)", "infinity"),
             # A time no client could read back (Python's datetime ends at 9999).
             (orch, "select * from scsql.enqueue_task('developer', '{}', p_run_after => %s::timestamptz)", "200000-01-01"),
             (dev, "select * from scsql.capture_tool_call('Edit', 'ok', p_occurred_at => %s::timestamptz)", "20000-01-01"),
             (dev, "select * from scsql.record_prompt('hi', p_occurred_at => %s::timestamptz)", "infinity"),
             (dev, "select * from scsql.open_session('s-far', p_occurred_at => %s::timestamptz)", "12000-06-01")]
    before = _count(db, "scsql.tool_calls"), _count(db, "scsql.tasks")
    for agent, statement, value in calls:
        with pytest.raises(ScsqlError) as err, agent.transaction() as conn:
            conn.execute(statement, (value,))
        assert err.value.code == "SC010", (statement, err.value)
    assert (_count(db, "scsql.tool_calls"), _count(db, "scsql.tasks")) == before
    assert _count(db, "scsql.prompts") == 0 and _count(db, "scsql.sessions") == 0
