-- Where subsystems meet (sql/40_integration.sql).

-- The learning queue is private: written by a trigger, drained by
-- _index_learnings, both security definer.
select scsql._secure_table('scsql.kb_learning_queue');

grant execute on function scsql._index_learnings(integer) to scsql_agent;
