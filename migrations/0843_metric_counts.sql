-- 0843 scsql.metrics() reads every project's figures in one pass
-- (scsql._metric_counts) and its parts take them as an argument: their
-- earlier forms, which each read their tables, are dropped.

drop function if exists scsql._tool_call_metrics(bigint);
drop function if exists scsql._queue_metrics(bigint, timestamptz);
drop function if exists scsql._chain_metrics(bigint, timestamptz);
drop function if exists scsql._worker_metrics(bigint, timestamptz);
