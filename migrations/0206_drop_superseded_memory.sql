-- 0206 functions of text, the knowledge base and search that earlier
-- versions had and this one does not.
--
-- sql/ and policies/ define each function once, with CREATE OR REPLACE, on
-- every migrate; a function they no longer define (renamed, moved to
-- scsql_caller, or with other arguments) is dropped here, once.
--
-- _published_text was called by a row-level security policy, which goes
-- with it (cascade); policies/ recreates it, calling
-- scsql_caller.published_text, when this migrate applies it.

drop function if exists scsql._terms(text);                   -- now scsql_caller.terms(text)
drop function if exists scsql._tokens(text);                  -- now scsql_caller.tokens(text)
drop function if exists scsql._published_text(bigint, text) cascade;  -- now scsql_caller.published_text
drop function if exists scsql._index_scope(text);             -- now scsql_caller.index_scope(text)
drop function if exists scsql._bm25(bigint[], text[], double precision, double precision, integer, text[], text,
                                    timestamptz);             -- now scsql_caller.bm25
drop function if exists scsql._search(bigint[], text, integer, text[], text, timestamptz, text, vector, text,
                                      double precision, double precision, double precision, double precision,
                                      double precision, integer);  -- now scsql_caller.search_projects
