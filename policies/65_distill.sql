-- Distillation (sql/65_distill.sql): agents read their project's settings,
-- jobs, signed items and citations; they write only through the functions.
-- The distiller's functions, queue_distill (the hooks call it) and the
-- reading and undo functions are granted to scsql_worker, which agents
-- inherit: callable, not MCP tools. Settings are the administrators'.

select scsql._secure_table(t) from unnest(array[
  'scsql.distill_settings', 'scsql.distill_jobs', 'scsql.distill_items', 'scsql.distill_citations',
  'scsql.distill_withdrawn'
]::regclass[]) t;
select scsql._agent_read(array['scsql.distill_settings', 'scsql.distill_jobs', 'scsql.distill_items',
                               'scsql.distill_citations', 'scsql.distill_withdrawn']::regclass[],
                         'project_id = (select scsql_caller.project_id())');

grant execute on function
  scsql.queue_distill(bigint),
  scsql.distill_input(bigint),
  scsql.distill_start(bigint, bigint, integer),
  scsql.distill_write(bigint, text, jsonb, jsonb, timestamptz, integer, bytea),
  scsql.distill_finish(bigint, bigint, text, integer, integer, text, jsonb, text),
  scsql.distill_undo(text),
  scsql.distill_status(),
  scsql.distilled(text, integer),
  scsql.distillations(integer)
to scsql_worker;

grant execute on function scsql.set_distill(text, text, boolean, text, integer, text[], integer),
  scsql.distill_overview()
to scsql_admin;
grant execute on function scsql.distill_overview() to scsql_auditor;
