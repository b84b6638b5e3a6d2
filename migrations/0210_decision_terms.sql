-- 0210 search finds decisions.
--
-- decisions.terms: the BM25 terms of a decision (title and rationale), kept
-- by the table itself like memory_facts.terms (0209), so search scores the
-- current decisions beside facts and chunks without tokenizing them per
-- query.

alter table scsql.decisions
  add column terms text[] generated always as (scsql_caller.term_array(title || ' ' || rationale)) stored;
