-- 90 constraints: the error each check constraint's violation raises.
--
-- The limits of what a write may store are the tables' constraints
-- (migrations/); this file is the one place that says which SC code,
-- message and hint a violation of each raises. scsql._map_constraint writes
-- them as the constraint's comment ('SCnnn: message', a second line
-- 'hint: ...'); a write function catches check_violation and
-- not_null_violation and calls scsql._raise_violation, which reads it (a
-- NULL in a NOT NULL column is reported with the check constraint on that
-- column). Chained tables are also checked this way before wrong signing
-- fields are reported (scsql._check_row), so a bad argument is reported as
-- one whether the write was signed or not.
--
-- Constraints that no caller's argument reaches (counters, hashes and
-- states the database computes) are not mapped: their violation is a bug
-- and is raised as PostgreSQL reports it. tests/system/test_validation.py lists
-- them, each with its reason, and fails on a check constraint that is in
-- neither list.

select scsql._map_constraint(t::regclass, c, code, message, hint) from (values
  -- identity
  ('scsql.projects', 'projects_name_check', 'SC007',
   'invalid project name: a project name is 1 to 63 lower-case letters, digits, dots, dashes or underscores, starting with a letter or digit', null),
  ('scsql.projects', 'projects_root_path_check', 'SC010', 'root_path must be an absolute path', null),
  ('scsql.team_roles', 'team_roles_name_check', 'SC007',
   'invalid team role name: a team role name is 1 to 32 lower-case letters, digits or underscores, starting with a letter', null),
  ('scsql.agents', 'agents_name_check', 'SC007',
   'invalid agent name: an agent name is 1 to 48 lower-case letters, digits or underscores, starting with a letter', null),
  ('scsql.agent_keys', 'agent_keys_public_key_check', 'SC009', 'public key must be 32 bytes (raw Ed25519)',
   'scsql agent create and scsql agent rotate-key generate the key pair and register the public key.'),

  -- audit
  ('scsql.sessions', 'sessions_client_check', 'SC010', 'client must be at most 100 characters', null),
  ('scsql.sessions', 'sessions_model_check', 'SC010', 'model must be at most 200 characters', null),
  ('scsql.sessions', 'sessions_title_check', 'SC010', 'title must be at most 500 characters', null),
  ('scsql.tool_calls', 'tool_calls_tool_check', 'SC010', 'tool must be 1 to 200 characters', null),
  ('scsql.tool_calls', 'tool_calls_altered_object', 'SC150', 'altered must be a JSON object', null),
  ('scsql.sessions', 'sessions_altered_object', 'SC150', 'altered must be a JSON object', null),
  ('scsql.prompts', 'prompts_altered_object', 'SC150', 'altered must be a JSON object', null),
  ('scsql.tool_calls', 'tool_calls_status_check', 'SC010', 'status must be ok, error, timeout, cancelled or denied', null),
  ('scsql.tool_calls', 'tool_calls_origin_check', 'SC010',
   'origin must be model (the model generated the call) or database (it only assembled database content)', null),
  ('scsql.tool_calls', 'tool_calls_input_tokens_check', 'SC010', 'token counts must be >= 0 (input_tokens)', null),
  ('scsql.tool_calls', 'tool_calls_output_tokens_check', 'SC010', 'token counts must be >= 0 (output_tokens)', null),
  ('scsql.tool_calls', 'tool_calls_latency_ms_check', 'SC010', 'latency_ms must be >= 0', null),
  ('scsql.tool_calls', 'tool_calls_model_check', 'SC010', 'model must be at most 200 characters', null),
  ('scsql.tool_calls', 'tool_calls_input_preview_check', 'SC010', 'input_preview must be at most 4000 characters; nothing was stored',
   'Shorten the preview before recording it: scsql truncates nothing.'),
  ('scsql.tool_calls', 'tool_calls_output_preview_check', 'SC010', 'output_preview must be at most 4000 characters; nothing was stored',
   'Shorten the preview before recording it: scsql truncates nothing.'),
  ('scsql.sessions', 'sessions_external_id_check', 'SC010', 'external_id (the client''s session id) must be 1 to 200 characters', null),
  ('scsql.sessions', 'sessions_cwd_check', 'SC010', 'cwd must be at most 1024 characters', null),
  ('scsql.sessions', 'sessions_git_branch_check', 'SC010', 'git_branch must be at most 256 characters', null),
  ('scsql.sessions', 'sessions_git_commit_check', 'SC010', 'git_commit must be at most 64 characters', null),
  ('scsql.sessions', 'sessions_source_check', 'SC010', 'source must be startup, resume, clear, compact, import or hook', null),
  ('scsql.tool_calls', 'tool_calls_tool_use_id_check', 'SC010', 'tool_use_id must be 1 to 200 characters', null),
  ('scsql.tool_calls', 'tool_calls_files_check', 'SC010', 'files must be a JSON array of paths', null),
  ('scsql.tool_calls', 'tool_calls_input_key_check', 'SC010', 'input_key must be at most 4000 characters; nothing was stored',
   'Shorten it before recording it: scsql truncates nothing.'),
  ('scsql.prompts', 'prompts_text_kept', 'SC010', 'a prompt needs its text; nothing was stored', null),
  ('scsql.prompts', 'prompts_text_check', 'SC010', 'a prompt must be at most 20,000 characters; nothing was stored',
   'The hooks keep the first 20,000 characters and mark the cut; scsql itself truncates nothing.'),
  ('scsql.capture_events', 'capture_events_event_key_check', 'SC140', 'event key must be 1 to 200 characters', null),
  ('scsql.learnings', 'learnings_pattern_check', 'SC143', 'pattern must be at most 1000 characters', null),
  ('scsql.outcomes', 'outcomes_kind_check', 'SC010',
   'kind must be shipped, accepted, rejected, failed, insufficient, errored or reverted', null),
  ('scsql.outcomes', 'outcomes_summary_check', 'SC010', 'summary must be 1 to 1000 characters', null),
  ('scsql.outcomes', 'outcomes_summary_kept', 'SC010', 'summary must be 1 to 1000 characters', null),
  ('scsql.outcomes', 'outcomes_signal_check', 'SC010',
   'signal must name the source in lower case (test, ci, human, review, agent, ...): a letter, then up to 31 letters, digits, _ . or -', null),
  ('scsql.outcomes', 'outcomes_confidence_check', 'SC010', 'confidence must be between 0 and 1', null),
  ('scsql.outcomes', 'outcomes_evidence_check', 'SC010', 'evidence must be at most 8000 characters; nothing was stored',
   'Shorten the evidence before recording it: scsql truncates nothing.'),
  ('scsql.outcomes', 'outcomes_task_ref_check', 'SC010', 'task_ref must be at most 200 characters', null),
  ('scsql.outcomes', 'outcomes_names_subject', 'SC010',
   'an outcome refers to a tool call, a session or a task: give tool_call_id, session_id or task_ref', null),
  ('scsql.outcomes', 'outcomes_classification_check', 'SC110',
   'classification must be public, internal, confidential or restricted', null),
  ('scsql.model_prices', 'model_prices_model_check', 'SC010', 'model must be 1 to 200 characters', null),
  ('scsql.model_prices', 'model_prices_cache_write_usd_per_mtok_check', 'SC112',
   'prices must be finite and >= 0 USD per million tokens (cache_write_usd_per_mtok)', null),
  ('scsql.model_prices', 'model_prices_cache_read_usd_per_mtok_check', 'SC112',
   'prices must be finite and >= 0 USD per million tokens (cache_read_usd_per_mtok)', null),
  ('scsql.model_calls', 'model_calls_message_id_check', 'SC010', 'message_id must be 1 to 200 characters', null),
  ('scsql.model_calls', 'model_calls_model_check', 'SC010', 'model must be 1 to 200 characters', null),
  ('scsql.model_calls', 'model_calls_input_tokens_check', 'SC010', 'token counts must be >= 0 (input_tokens)', null),
  ('scsql.model_calls', 'model_calls_output_tokens_check', 'SC010', 'token counts must be >= 0 (output_tokens)', null),
  ('scsql.model_calls', 'model_calls_cache_write_tokens_check', 'SC010',
   'token counts must be >= 0 (cache_write_tokens)', null),
  ('scsql.model_calls', 'model_calls_cache_read_tokens_check', 'SC010', 'token counts must be >= 0 (cache_read_tokens)', null),
  ('scsql.model_calls', 'model_calls_tool_use_ids_array', 'SC010', 'tool_use_ids must be a JSON array', null),
  ('scsql.transcript_cursors', 'transcript_cursors_usage_offset_check', 'SC152',
   'a transcript''s usage offset must be a byte count >= 0', null),
  ('scsql.model_prices', 'model_prices_input_usd_per_mtok_check', 'SC112',
   'prices must be finite and >= 0 USD per million tokens (input)', null),
  ('scsql.model_prices', 'model_prices_output_usd_per_mtok_check', 'SC112',
   'prices must be finite and >= 0 USD per million tokens (output)', null),
  ('scsql.chain_settings', 'chain_settings_clock_skew_check', 'SC010', 'clock_skew must be between 1 second and 30 days', null),
  ('scsql.partition_settings', 'partition_settings_retention_check', 'SC010',
   'retention must be at least 1 day (or NULL: keep forever)', null),
  ('scsql.partition_settings', 'partition_settings_premake_check', 'SC010', 'premake must be 1 to 90 days', null),
  ('scsql.auditor_keys', 'auditor_keys_public_key_check', 'SC009', 'the auditor''s public key must be 32 bytes (raw Ed25519)', null),
  ('scsql.chain_quarantines', 'chain_quarantines_from_seq_check', 'SC010', 'from_seq must be 0 or more', null),
  ('scsql.chain_quarantines', 'chain_quarantines_kind_check', 'SC010', 'kind must be 1 to 100 characters', null),
  ('scsql.chain_quarantines', 'chain_quarantines_detail_check', 'SC010', 'detail must be at most 2000 characters', null),
  ('scsql.chain_quarantines', 'chain_quarantines_note_check', 'SC010',
   'note must say, in 1 to 2000 characters, what was done about the chain', null),

  -- memory
  ('scsql.memory_facts', 'memory_facts_importance_check', 'SC202', 'importance must be 1 to 5',
   '5 = must survive, 1 = first to be archived.'),
  ('scsql.embed_models', 'embed_models_dims_check', 'SC207', 'dimensions must be 1 to 2,000', null),
  ('scsql.kb_sources', 'kb_sources_kind_check', 'SC203',
   'source kind must be file, url, note, session_summary, archived_fact or learning', null),
  ('scsql.kb_sources', 'kb_sources_trust_check', 'SC203', 'trust must be internal or external', null),
  ('scsql.kb_sources', 'kb_sources_tier_check', 'SC203', 'tier must be pinned, standard or session', null),
  ('scsql.kb_sources', 'kb_sources_url_external', 'SC203', 'a url source is always external', null),

  -- coordination
  ('scsql.tasks', 'tasks_complexity_check', 'SC010', 'complexity must be 1 (trivial) to 5 (very large)', null),
  ('scsql.tasks', 'tasks_max_attempts_check', 'SC010', 'max_attempts must be 1 to 100', null),
  ('scsql.coordination_settings', 'coordination_settings_broadcasts_per_minute_check', 'SC010',
   'per_minute must be 0 to 10000 (null clears an agent''s override)', null),
  ('scsql.broadcast_senders', 'broadcast_senders_per_minute_check', 'SC010',
   'per_minute must be 0 to 10000 (null clears an agent''s override)', null),
  ('scsql.messages', 'messages_type_check', 'SC340',
   'unknown message type: ASSIGN, STATUS, MERGE, DEPENDENCY, PROPOSED, REJECT, REVISE, LAUNCH_ROLE or RETIRE_ROLE', null),
  ('scsql.messages', 'messages_one_recipient', 'SC010', 'name exactly one recipient: to_role or to_agent', null)
) as m(t, c, code, message, hint);

-- memory lifecycle, decisions and open loops (migrations/0208): the
-- functions check these first (sql/22_lifecycle.sql, sql/27_decisions.sql).
select scsql._map_constraint(t::regclass, c, code, message, hint) from (values
  ('scsql.memory_facts', 'memory_facts_use_count_check', 'SC010', 'use_count must be >= 0', null),
  ('scsql.kb_sources', 'kb_sources_use_count_check', 'SC010', 'use_count must be >= 0', null),
  ('scsql.memory_settings', 'memory_settings_external_ttl_check', 'SC244', 'external_ttl must be 1 hour to 3650 days', null),
  ('scsql.memory_settings', 'memory_settings_use_granularity_check', 'SC244', 'use_granularity must be 0 to 1 day', null),
  ('scsql.memory_settings', 'memory_settings_loop_stale_after_check', 'SC244', 'loop_stale_after must be 1 hour to 3650 days', null),
  ('scsql.decisions', 'decisions_title_check', 'SC235', 'a decision title must be 1 to 200 characters', null),
  ('scsql.decisions', 'decisions_rationale_check', 'SC235', 'a decision rationale must be 1 to 4,000 characters', null),
  ('scsql.open_loops', 'open_loops_text_check', 'SC238', 'an open loop''s text must be 1 to 2,000 characters', null),
  ('scsql.open_loops', 'open_loops_owner_check', 'SC238', 'an open loop''s owner must be 1 to 200 characters', null),
  ('scsql.open_loops', 'open_loops_resolution_check', 'SC238', 'a resolution must be 1 to 4,000 characters', null),
  ('scsql.open_loops', 'open_loops_closed_check', 'SC238',
   'a closed loop has closed_at, closed_by and a resolution, an open one none of them', null)
) as m(t, c, code, message, hint);

-- memory history (sql/26_history.sql): resolve_conflict checks keep itself
-- (SC229) before it is stored; the constraint states the same choice.
select scsql._map_constraint('scsql.fact_conflicts'::regclass, 'fact_conflicts_resolution_check', 'SC229',
  'keep must be this, others or both', null);

-- operations (migrations/0500) and transcript cursors (migrations/0118):
-- written by the worker, the MCP server and the hook server, whose
-- arguments these bound.
select scsql._map_constraint(t::regclass, c, code, message, hint) from (values
  ('scsql.worker_heartbeats', 'worker_heartbeats_host_check', 'SC010', 'host must be 1 to 255 characters', null),
  ('scsql.worker_heartbeats', 'worker_heartbeats_pid_check', 'SC010', 'pid must be positive', null),
  ('scsql.worker_heartbeats', 'worker_heartbeats_poll_seconds_check', 'SC010', 'poll_seconds must be above 0 and at most 3,600', null),
  ('scsql.worker_heartbeats', 'worker_heartbeats_units_check', 'SC010', 'units must be >= 0', null),
  ('scsql.search_latency', 'search_latency_sum_seconds_check', 'SC010', 'search latencies must be >= 0 seconds', null),
  ('scsql.transcript_cursors', 'transcript_cursors_cursor_check', 'SC010', 'a transcript cursor is a message uuid of 1 to 200 characters', null),
  ('scsql.transcript_cursors', 'transcript_cursors_messages_check', 'SC010', 'messages read must be >= 0', null),
  ('scsql.transcript_cursors', 'transcript_cursors_parts_check', 'SC010', 'parts written must be >= 0', null)
) as m(t, c, code, message, hint);

-- distillation settings (migrations/0780): what set_distill stores.
select scsql._map_constraint(t::regclass, c, code, message, hint) from (values
  ('scsql.distill_settings', 'distill_settings_command_check', 'SC335', 'a distillation command is 1 to 64 words',
   'Give the program and its arguments as words; {} resets it to claude -p.'),
  ('scsql.distill_settings', 'distill_settings_model_check', 'SC335',
   'a model name is 1 to 100 letters, digits and ._:@/- starting with a letter or digit', null),
  ('scsql.distill_settings', 'distill_settings_daily_tokens_check', 'SC010',
   'daily_tokens must be 1,000 to 100,000,000', null),
  ('scsql.distill_settings', 'distill_settings_max_input_chars_check', 'SC010',
   'max_input_chars must be 2,000 to 1,000,000', null)
) as m(t, c, code, message, hint);
