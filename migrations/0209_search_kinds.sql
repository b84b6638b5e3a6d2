-- 0209 search finds working-memory facts, and names each result's kind,
-- author and time.
--
-- memory_facts.terms: the BM25 terms of a fact (key and value), kept by the
-- table itself (a stored generated column), so search scores facts beside
-- chunks without tokenizing them per query. scsql_caller.term_array is
-- defined here because the column needs it; sql/20_text.sql defines it
-- again, identically.
--
-- search, search_global and search_projects return more columns (kind
-- label, author, written_at) and take the fusion and relevance-floor
-- parameters: the old definitions are dropped once; sql/ creates the new.

-- PL/pgSQL: on a fresh install scsql_caller.terms comes later (sql/), before any fact.
create or replace function scsql_caller.term_array(p_text text)
returns text[]
language plpgsql
immutable strict parallel safe
as $$ begin return (select coalesce(pg_catalog.array_agg(t.term order by t.term), '{}') from scsql_caller.terms(p_text) t); end $$;

alter table scsql.memory_facts
  add column terms text[] generated always as (scsql_caller.term_array(key || ' ' || value)) stored;

drop function if exists scsql.search(text, integer, text[], text, timestamptz, text, double precision,
                                     double precision, double precision, double precision, double precision,
                                     integer, vector, text);
drop function if exists scsql.search_global(text, integer, text[], text, timestamptz, text, double precision,
                                            double precision, double precision, double precision, double precision,
                                            integer, vector, text);
drop function if exists scsql_caller.search_projects(bigint[], text, integer, text[], text, timestamptz, text, vector,
                                                     text, double precision, double precision, double precision,
                                                     double precision, double precision, integer);
