-- Operations (sql/50_operations.sql): heartbeats and search latency are
-- written only through their functions (security definer) and read through
-- scsql.metrics(), which limits an agent to its own project.

select scsql._secure_table(t) from unnest(array['scsql.worker_heartbeats', 'scsql.search_latency']::regclass[]) t;

-- Background work of scsql worker and of the MCP server: callable, never an MCP tool.
grant execute on function
  scsql.worker_heartbeat(text, integer, text[], double precision, bigint),
  scsql.record_search_latency(double precision[])
to scsql_worker;

-- The figures: agents (through scsql_worker, so not a tool) see their project's; operators all.
grant execute on function scsql.metrics() to scsql_worker, scsql_admin, scsql_auditor;
