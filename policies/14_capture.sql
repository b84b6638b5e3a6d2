-- Capture: prompts and event keys (sql/14_capture.sql). Agents write through
-- the API functions only and read the prompts of their project.

select scsql._secure_table(t) from unnest(array['scsql.prompts', 'scsql.capture_events', 'scsql.transcript_cursors']::regclass[]) t;

grant select on scsql.prompts to scsql_agent;
create policy agent_read on scsql.prompts for select to scsql_agent
  using (project_id = (select scsql_caller.project_id()));

grant execute on function
  scsql.capture_event(text),
  scsql.session_for(text),
  scsql.open_session(text, text, text, text, text, text, text, text, timestamptz, jsonb, timestamptz, integer, bytea),
  scsql.record_prompt(text, bigint, boolean, timestamptz, jsonb, text, timestamptz, integer, bytea),
  scsql.capture_tool_call(text, text, bigint, text, text, integer, integer, integer, text, text, text, jsonb, boolean,
                          boolean, text, timestamptz, jsonb, text, timestamptz, integer, bytea),
  scsql.column_bounds(),
  scsql.clip(text, integer, integer),
  scsql.storable(text[], integer[], integer[]),
  scsql.mark_learning_rule(bigint, boolean, text),
  scsql.check_tool_use(text, jsonb),
  scsql.others_exclusive_files(),
  scsql.transcript_cursor(bigint),
  scsql.advance_transcript_cursor(bigint, text, integer, bigint)
to scsql_agent;

grant execute on function scsql.capture_counts() to scsql_agent, scsql_auditor;
