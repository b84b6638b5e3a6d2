-- 0823 Whether the database is a Citus cluster is one function every caller
-- may ask, scsql_caller.citus() (sql/00_core.sql): the owner's functions, the
-- agents' (filtered BM25) and the Python layer (the bulk path's fallback)
-- read the same answer. The owner's private form is dropped.

drop function if exists scsql._citus();
