-- 0213 pack's citations name their author and time (author, written_at), as
-- search's do: pack returns two more columns. The old definition is dropped
-- once; sql/24_context.sql creates the new.

drop function if exists scsql.pack(text, integer, vector, text, double precision, double precision, double precision,
                                   double precision);
