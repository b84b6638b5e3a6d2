-- The viewer (sql/60_viewer.sql): scsql ui, its /api/v1 and scsql report.
--
-- Its functions run as the caller, so row-level security decides what a page
-- shows. They are granted to scsql_worker, which agents inherit (callable,
-- never an MCP tool), and to the auditor, who reads everything and changes
-- nothing. An agent reads what its project's pages show: its project's memory
-- history (which memory_history already showed it), and its project's
-- checkpoints and quarantines, so its viewer marks quarantined rows.

-- The figures kept as rows are written (migration 0622): read by project, as the rows they sum.
select scsql._secure_table(t) from unnest(array['scsql.session_totals', 'scsql.usage_days', 'scsql.usage_sessions']::regclass[]) t;
select scsql._agent_read(array['scsql.session_totals', 'scsql.usage_days', 'scsql.usage_sessions']::regclass[],
                         'project_id = (select scsql_caller.project_id())');

select scsql._agent_read(array['scsql.memory_changes', 'scsql.fact_versions', 'scsql.fact_conflicts',
                               'scsql.checkpoints', 'scsql.checkpoint_heads', 'scsql.chain_quarantines']::regclass[],
                         'project_id = (select scsql_caller.project_id())');

grant execute on function
  scsql_caller.viewer_filter(text, text, timestamptz, timestamptz, integer, integer),
  scsql_caller.viewer_limit(integer, integer),
  scsql_caller.viewer_moment(timestamptz),
  scsql_caller.viewer_cursor(timestamptz, integer, bigint),
  scsql_caller.viewer_cursor_parts(text),
  scsql_caller.viewer_quarantine(bigint, bigint),
  scsql_caller.viewer_session_totals(bigint, bigint, timestamptz),
  scsql_caller.viewer_session_summary(bigint, text),
  scsql_caller.viewer_capture_events(bigint, bigint, timestamptz, timestamptz, integer, bigint, integer),
  scsql_caller.viewer_context_events(bigint, bigint, timestamptz, timestamptz, timestamptz, integer, bigint, integer),
  scsql_caller.viewer_usage_rows(bigint, bigint, timestamptz, timestamptz, boolean),
  scsql_caller.viewer_usage_of(bigint, bigint, bigint, timestamptz, timestamptz),
  scsql_caller.viewer_usage(bigint, bigint, timestamptz, timestamptz, timestamptz, timestamptz),
  scsql_caller.viewer_usage_sessions(bigint, bigint, timestamptz, timestamptz)
to scsql_agent, scsql_auditor;

grant execute on function
  scsql.viewer_projects(), scsql.viewer_agents(text), scsql.viewer_channels(),
  scsql.viewer_sessions(text, text, timestamptz, timestamptz, text, text, integer, bigint),
  scsql.viewer_timeline(bigint, text, integer, text[], text),
  scsql.viewer_event(text, text), scsql.viewer_source(text, text),
  scsql.viewer_facts(text, text, text, integer), scsql.viewer_fact_history(text, text),
  scsql.viewer_decisions(text, text, integer), scsql.viewer_loops(text, text, integer),
  scsql.viewer_queue(text), scsql.viewer_tasks(text, text, text, integer), scsql.viewer_files(text),
  scsql.viewer_messages(text, text, integer),
  scsql.viewer_chains(text), scsql.viewer_checkpoints(text, timestamptz, timestamptz, integer),
  scsql.viewer_quarantines(text, timestamptz, timestamptz), scsql.viewer_redactions(text, timestamptz, timestamptz),
  scsql.viewer_cost(text, text, text, timestamptz, timestamptz, integer),
  scsql.viewer_activity(text, timestamptz, timestamptz), scsql.viewer_memory_changes(text, timestamptz, timestamptz),
  scsql.viewer_report(timestamptz, timestamptz, text)
to scsql_worker, scsql_auditor;

-- Verification reads every chain (scsql.verify_chain): the auditor's.
grant execute on function scsql.viewer_verify(text, boolean) to scsql_auditor;
