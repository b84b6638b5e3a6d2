-- 0212 remember compares a new fact only with the facts that could be a
-- duplicate of it or in conflict with it: those sharing one of its rarest
-- terms, found through an inverted index of the facts' terms, instead of
-- every fact of the project.
--
-- memory_facts.index_terms holds each fact's terms (scsql._fact_terms of key
-- and value, the key_terms and value_terms columns) as '<project>:k:<term>'
-- and '<project>:v:<term>', kept by the table itself (a stored generated
-- column), and a GIN index on it finds the facts of one project that have a
-- term in their key or in their value. scsql._fact_index_terms is defined
-- here because the column needs it; sql/26_history.sql defines it again,
-- identically. No fast update: remember reads the index on every call, and
-- a pending list would be read in full each time.

create or replace function scsql._fact_index_terms(p_project bigint, p_key_terms text[], p_value_terms text[])
returns text[]
language sql
immutable parallel safe
as $$
  select array(select p_project::text || ':k:' || t from unnest(p_key_terms) t
               union all
               select p_project::text || ':v:' || t from unnest(p_value_terms) t)
$$;

-- Facts remembered before key_terms and value_terms were kept (0207) get them
-- now: every fact is in the index. (On a fresh install there are no facts,
-- and scsql._fact_terms comes later, with sql/.)
do $$
begin
  if to_regprocedure('scsql._fact_terms(text)') is not null then
    update scsql.memory_facts
       set key_terms = coalesce(key_terms, scsql._fact_terms(key)), value_terms = coalesce(value_terms, scsql._fact_terms(value))
     where key_terms is null or value_terms is null;
  end if;
end
$$;

alter table scsql.memory_facts
  add column index_terms text[] generated always as (scsql._fact_index_terms(project_id, key_terms, value_terms)) stored;
comment on column scsql.memory_facts.index_terms is
  'The fact''s terms as entries of memory_facts_terms_idx: <project>:k:<term> for each of key_terms, <project>:v:<term> for each of value_terms. remember finds the facts it compares a new one with through it.';
create index memory_facts_terms_idx on scsql.memory_facts using gin (index_terms) with (fastupdate = off);
