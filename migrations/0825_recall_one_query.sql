-- 0825 recall_context reads its items in one query, scsql._recall_items, the
-- acting agent given as values (sql/24_context.sql): on Citus one round trip
-- to the project's node. The functions that read them in three queries, the
-- broadcasts first and with the caller inside, are dropped.

drop function if exists scsql._recall_memory_items(bigint, interval, double precision, double precision, double precision,
                                                    double precision);
drop function if exists scsql._recall_session_items(bigint, text[], text[], timestamptz[]);
drop function if exists scsql._recall_broadcasts(bigint, integer);
