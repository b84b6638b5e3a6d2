-- Where subsystems meet (sql/40_integration.sql).

-- The learning queue is private: written by a trigger, drained by
-- index_learnings, both security definer.
select scsql._secure_table('scsql.kb_learning_queue');

-- Background work of scsql worker and the MCP server (never an MCP tool).
grant execute on function scsql.index_learnings(integer) to scsql_worker;
