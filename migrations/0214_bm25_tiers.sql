-- 0214 BM25 tiers: most postings of a term have tf 1 in a chunk of ordinary
-- length, and add little to its score; search (scsql_caller.bm25) bounds
-- them together and reads the others apart, through a partial index of the
-- postings with tf above 1 or in a chunk of fewer than 32 terms (a sixth of
-- them or so). The bound of the others needs the length of the shortest
-- chunk of 32 terms or more holding the term once: kb_terms.tier_min_dl,
-- never raised (a chunk that goes leaves it a lower bound of the rest, which
-- is all a bound needs).

alter table scsql.kb_terms add column tier_min_dl integer check (tier_min_dl >= 32);
comment on column scsql.kb_terms.tier_min_dl is
  'A lower bound of the length (n_terms) of the chunks of 32 terms or more in which the term occurs once, the postings outside kb_postings_tier_idx: the shortest it was indexed in, never raised when chunks go; NULL when there has been none. Search bounds those postings'' scores by it.';

update scsql.kb_terms t
   set tier_min_dl = m.min_dl
  from (select p.project_id, p.term_id, min(p.dl) as min_dl
        from scsql.kb_postings p where p.tf = 1 and p.dl >= 32
        group by p.project_id, p.term_id) m
 where m.project_id = t.project_id and m.term_id = t.term_id;

create index kb_postings_tier_idx on scsql.kb_postings (project_id, term_id, chunk_id) include (tf, dl, published)
  where tf > 1 or dl < 32;
comment on index scsql.kb_postings_tier_idx is
  'The postings search reads apart from the others (scsql_caller.bm25, tiers): tf above 1, or a chunk of fewer than 32 terms. Every other posting adds at most the term''s score at tf 1 in a chunk of kb_terms.tier_min_dl terms.';
