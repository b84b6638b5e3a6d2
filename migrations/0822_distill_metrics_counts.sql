-- 0822 scsql.metrics() reads the distillation figures in its one pass
-- (scsql._metric_counts, part distill), where they were a second query over
-- every shard on Citus; scsql._distill_metrics takes them as an argument
-- (sql/65_distill.sql defines it) and its earlier form is dropped.

drop function if exists scsql._distill_metrics(bigint);
