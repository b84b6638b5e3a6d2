-- 0114 scsql.record_checkpoint takes its heads as one JSON array of objects
-- (the shape scsql.checkpoints() returns) instead of ten parallel arrays.
--
-- sql/13_checkpoints.sql creates the new signature; the old one goes here so
-- that it is no overload of the new.

drop function if exists scsql.record_checkpoint(bigint, timestamptz, integer, bigint[], bigint[], bytea[], bytea,
                                                bigint[], bigint[], bigint[], bigint[], bytea[], text[]);
