-- 0003 functions of the core that earlier versions had and this one does not.
--
-- sql/ and policies/ define each function once, with CREATE OR REPLACE, on
-- every migrate; a function they no longer define (renamed, moved to
-- scsql_caller, or with other arguments) is dropped here, once.
--
-- _readable_projects was called by row-level security policies, which go
-- with it (cascade); policies/ recreates them, calling
-- scsql_caller.readable_projects, when this migrate applies it.

drop function if exists scsql._readable_projects() cascade;  -- now scsql_caller.readable_projects()
drop function if exists scsql._api();                        -- now scsql_caller.api()
