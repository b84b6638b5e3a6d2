-- Usage: the model's messages of hooked sessions (sql/16_usage.sql). Agents
-- write them only through record_model_call and read their project's.

select scsql._secure_table('scsql.model_calls'::regclass);
select scsql._agent_read(array['scsql.model_calls']::regclass[], 'project_id = (select scsql_caller.project_id())');

grant execute on function
  scsql.record_model_call(text, text, integer, integer, integer, integer, bigint, jsonb, timestamptz, timestamptz,
                          integer, bytea),
  scsql.usage_cursor(bigint),
  scsql.advance_usage_cursor(bigint, bigint)
to scsql_agent;
