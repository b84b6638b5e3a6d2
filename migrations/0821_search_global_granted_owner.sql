-- 0821 search_global reads a project granted to the acting agent as the
-- owner (scsql_caller.bm25_granted_top, sql/23_search.sql): the grant re-read
-- from the acting role, only the project's published postings, its published
-- chunks' statistics; a policy call per posting had made search_global many
-- times slower than search. The BM25 helpers take p_published (only the
-- postings of published chunks) as a last argument, false by default; with
-- a filter (kinds, trust, since) each project is scored on its own
-- (bm25_filtered_top, the same argument) and the lists merged. The vector
-- branch is read the same way (scsql_caller.search_vector_readable: the
-- readable projects re-read from the acting role, a granted project's
-- published chunks only), through search_vector_hits with p_own, and so
-- are the BM25 scores of its vector hits (bm25_granted_scores). Their
-- old forms are dropped here, once (sql/23_search.sql defines the new ones,
-- policies/20_memory.sql grants them).

drop function if exists scsql_caller.bm25_complete_scores(bigint, bigint[], double precision[], bigint[],
                                                          double precision[], integer[], double precision,
                                                          double precision, double precision);
drop function if exists scsql_caller.bm25_pair_postings(bigint, bigint[], double precision[], double precision,
                                                        double precision, double precision, double precision,
                                                        double precision);
drop function if exists scsql_caller.bm25_term_postings(bigint, bigint, double precision, double precision,
                                                        double precision, double precision, double precision,
                                                        double precision, double precision);
drop function if exists scsql_caller.bm25_term_best(bigint, bigint, double precision, double precision,
                                                    double precision, double precision, integer, boolean,
                                                    double precision, double precision, double precision);
drop function if exists scsql_caller.bm25_tier_gains(bigint, bigint[], double precision[], double precision[], integer,
                                                     double precision, double precision, double precision);
drop function if exists scsql_caller.bm25_pair_top(bigint, bigint[], double precision[], integer[], double precision,
                                                   double precision, integer, double precision, double precision,
                                                   double precision);
drop function if exists scsql_caller.bm25_candidates_top(bigint, bigint[], double precision[], bigint[],
                                                         double precision[], integer[], double precision,
                                                         double precision, integer, double precision, double precision,
                                                         double precision);
drop function if exists scsql_caller.bm25_completed_batch(bigint, bigint[], double precision[], bigint[],
                                                          double precision[], integer, boolean, double precision,
                                                          double precision, double precision);
drop function if exists scsql_caller.bm25_big_term_candidates(bigint, bigint[], double precision[], double precision[],
                                                              double precision[], integer, double precision, integer,
                                                              boolean, double precision, double precision,
                                                              double precision);
drop function if exists scsql_caller.bm25_round_candidates(bigint, bigint[], double precision[], integer[],
                                                           double precision[], double precision[], integer, bigint,
                                                           double precision, integer, integer, double precision,
                                                           double precision, double precision);
drop function if exists scsql_caller.bm25_pair_bound(bigint, bigint[], double precision[], integer[],
                                                     double precision[], double precision[], bigint, integer, integer,
                                                     bigint, integer[], double precision, integer[], integer,
                                                     double precision, double precision, double precision);
drop function if exists scsql_caller.bm25_rounds(bigint, integer, double precision, double precision, double precision,
                                                 bigint, integer, bigint[], double precision[], integer[],
                                                 double precision[], double precision[], double precision[]);
drop function if exists scsql_caller.bm25_tier_chunks(bigint, bigint[], double precision[], integer[],
                                                      double precision[], double precision[], integer[],
                                                      double precision[], integer[], double precision, integer,
                                                      double precision, double precision, double precision);
drop function if exists scsql_caller.bm25_required_top(bigint, bigint[], double precision[], integer[],
                                                       double precision[], integer[], double precision[],
                                                       double precision, integer[], bigint[], double precision[],
                                                       bigint[], integer, double precision, double precision,
                                                       double precision);
drop function if exists scsql_caller.bm25_project_top(bigint, text[], double precision, double precision, integer);
drop function if exists scsql_caller.bm25_filtered_top(bigint[], text[], double precision, double precision, integer, text[],
                                                       text, timestamptz);
drop function if exists scsql_caller.search_vector_hits(bigint[], vector, text, integer, text[], text, timestamptz);
