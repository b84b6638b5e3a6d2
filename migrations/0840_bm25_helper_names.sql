-- 0840 the BM25 helpers renamed for what they return (sql/23_search.sql
-- defines the new names; policies/20_memory.sql grants them): a term's
-- postings (bm25_term_postings), the postings of a pair of terms
-- (bm25_pair_postings), a term's best chunks (bm25_term_best), the best of
-- candidates (bm25_candidates_top), the best of a pair (bm25_pair_top), the
-- tiers' gains (bm25_tier_gains), complete scores (bm25_complete_scores) and
-- the required terms (bm25_required_terms). The old names are dropped here,
-- once.

drop function if exists scsql_caller.bm25_one(bigint, bigint, double precision, double precision, double precision,
                                              double precision, double precision, double precision, double precision);
drop function if exists scsql_caller.bm25_both(bigint, bigint[], double precision[], double precision, double precision,
                                               double precision, double precision, double precision);
drop function if exists scsql_caller.bm25_best(bigint, bigint, double precision, double precision, double precision,
                                               double precision, integer, boolean, double precision, double precision,
                                               double precision);
drop function if exists scsql_caller.bm25_top(bigint, bigint[], double precision[], bigint[], double precision[], integer[],
                                              double precision, double precision, integer, double precision, double precision,
                                              double precision);
drop function if exists scsql_caller.bm25_pair(bigint, bigint[], double precision[], integer[], double precision,
                                               double precision, integer, double precision, double precision, double precision);
drop function if exists scsql_caller.bm25_tiered(bigint, bigint[], double precision[], double precision[], integer,
                                                 double precision, double precision, double precision);
drop function if exists scsql_caller.bm25_complete(bigint, bigint[], double precision[], bigint[], double precision[],
                                                   integer[], double precision, double precision, double precision);
drop function if exists scsql_caller.bm25_required(double precision[], double precision);
