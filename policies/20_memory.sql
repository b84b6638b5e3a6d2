-- Memory and retrieval: row-level security and grants.
--
-- Agents write only through the functions of sql/20_text.sql to 25_embeddings.sql (security
-- definer). They read, as themselves, what search, recall_context and pack
-- need: working memory of their own project only; all of their own
-- project's knowledge base; and of a project granted to them with
-- grant_project_read only its published knowledge: sources of kind file,
-- url and note (kb_sources.published, copied to their chunks and
-- postings), their chunks, postings and embeddings, the terms that occur in
-- them (published_df > 0), and the statistics row. Never another project's
-- session summaries, archived facts or learnings. The embedding queue is
-- private.
--
-- Each policy tests the own project first: its rows pass on that
-- comparison, and the test for another project's rows (for embeddings, a
-- lookup of a published chunk with that text) runs only for rows of other
-- projects.

select scsql._secure_table(t) from unnest(array[
  'scsql.embed_models', 'scsql.memory_state', 'scsql.memory_facts', 'scsql.kb_sources',
  'scsql.kb_chunks', 'scsql.kb_terms', 'scsql.kb_postings', 'scsql.kb_embeddings', 'scsql.kb_embed_queue'
]::regclass[]) t;

grant select on scsql.embed_models, scsql.memory_state, scsql.memory_facts, scsql.kb_sources,
  scsql.kb_chunks, scsql.kb_terms, scsql.kb_postings, scsql.kb_embeddings
to scsql_agent;

create policy agent_read on scsql.embed_models for select to scsql_agent using (true);
create policy agent_read on scsql.memory_facts for select to scsql_agent
  using (project_id = (select scsql_caller.project_id()));
create policy agent_read on scsql.memory_state for select to scsql_agent
  using (project_id = (select scsql_caller.project_id())
         or project_id = any ((select scsql_caller.readable_projects())::bigint[]));
create policy agent_read on scsql.kb_sources for select to scsql_agent
  using (project_id = (select scsql_caller.project_id())
         or (published and project_id = any ((select scsql_caller.readable_projects())::bigint[])));
create policy agent_read on scsql.kb_chunks for select to scsql_agent
  using (project_id = (select scsql_caller.project_id())
         or (published and project_id = any ((select scsql_caller.readable_projects())::bigint[])));
create policy agent_read on scsql.kb_terms for select to scsql_agent
  using (project_id = (select scsql_caller.project_id())
         or (published_df > 0 and project_id = any ((select scsql_caller.readable_projects())::bigint[])));
create policy agent_read on scsql.kb_postings for select to scsql_agent
  using (project_id = (select scsql_caller.project_id())
         or (published and project_id = any ((select scsql_caller.readable_projects())::bigint[])));
create policy agent_read on scsql.kb_embeddings for select to scsql_agent
  using (project_id = (select scsql_caller.project_id())
         or (project_id = any ((select scsql_caller.readable_projects())::bigint[])
             and scsql_caller.published_text(project_id, chunk_hash)));

-- What search, search_global, pack and the kb_embeddings policy evaluate as
-- the caller.
grant execute on function
  scsql_caller.terms(text), scsql_caller.tokens(text), scsql_caller.published_text(bigint, text),
  scsql_caller.search_projects(bigint[], text, integer, text[], text, timestamptz, text, vector, text,
                               double precision, double precision, double precision, double precision,
                               double precision, integer, text, double precision),
  scsql_caller.search_own(text, integer, text[], text, timestamptz, text, vector, text, double precision, double precision,
                          double precision, double precision, double precision, integer, text, double precision),
  scsql_caller.term_array(text), scsql_caller.agent_names(bigint[]), scsql_caller.fact_source(bigint, text),
  scsql_caller.search_check(text, integer, integer, text, double precision, double precision, double precision, double precision, double precision, text, double precision, text[],
                             text),
  scsql_caller.search_memory_items(bigint[], text[], boolean, boolean, timestamptz, double precision, double precision, integer),
  scsql_caller.search_vector_hits(bigint[], vector, text, integer, text[], text, timestamptz, bigint),
  scsql_caller.search_vector_readable(bigint[], vector, text, integer, text[], text, timestamptz),
  scsql_caller.search_vector_bm25(bigint[], text[], double precision, double precision, bigint[], bigint[], double precision[], bigint[], bigint[],
                                  double precision),
  scsql_caller.fusable(double precision),
  scsql_caller.search_fused(bigint[], bigint[], double precision[], bigint[], text[], double precision[], bigint[], bigint[], double precision[],
                            bigint[], bigint[], double precision[], text, text, double precision, double precision, double precision, double precision,
                            integer, integer),
  scsql_caller.search_citations(bigint[], bigint[], text[], double precision[], integer[], integer[], double precision[]),
  scsql_caller.pack_facts(bigint, text[]), scsql_caller.pack_hits(bigint, text, vector, text),
  scsql_caller.bm25(bigint[], text[], double precision, double precision, integer, text[], text, timestamptz),
  scsql_caller.bm25_idf(bigint, bigint), scsql_caller.bm25_stats(bigint[], text[]),
  scsql_caller.bm25_scores(bigint[], text[], double precision, double precision, bigint[], bigint[]),
  scsql_caller.bm25_chunk_scores(bigint, text[], double precision, double precision, bigint[], boolean),
  scsql_caller.bm25_granted_scores(bigint, text[], double precision, double precision, bigint[]),
  scsql_caller.bm25_check(integer, double precision, double precision, double precision, double precision,
                          double precision),
  scsql_caller.bm25_pair_postings(bigint, bigint[], double precision[], double precision, double precision, double precision,
                         double precision, double precision, boolean),
  scsql_caller.bm25_complete_scores(bigint, bigint[], double precision[], bigint[], double precision[], integer[],
                             double precision, double precision, double precision, boolean),
  scsql_caller.bm25_term_best(bigint, bigint, double precision, double precision, double precision, double precision, integer,
                         boolean, double precision, double precision, double precision, boolean),
  scsql_caller.bm25_costs(bigint, integer[], integer[], integer),
  scsql_caller.bm25_term_postings(bigint, bigint, double precision, double precision, double precision, double precision,
                        double precision, double precision, double precision, boolean),
  scsql_caller.bm25_tier_gains(bigint, bigint[], double precision[], double precision[], integer, double precision,
                           double precision, double precision, boolean),
  scsql_caller.bm25_pair_top(bigint, bigint[], double precision[], integer[], double precision, double precision, integer,
                         double precision, double precision, double precision, boolean),
  scsql_caller.bm25_required_terms(double precision[], double precision),
  scsql_caller.bm25_candidates_top(bigint, bigint[], double precision[], bigint[], double precision[], integer[], double precision,
                        double precision, integer, double precision, double precision, double precision, boolean),
  scsql_caller.bm25_term(double precision, double precision, double precision, double precision, double precision,
                         double precision),
  scsql_caller.bm25_params_valid(double precision, double precision), scsql_caller.bm25_avgdl(bigint, bigint),
  scsql_caller.bm25_filtered_top(bigint[], text[], double precision, double precision, integer, text[], text, timestamptz,
                                 boolean),
  scsql_caller.bm25_project_top(bigint, text[], double precision, double precision, integer, boolean),
  scsql_caller.bm25_own_top(text[], double precision, double precision, integer),
  scsql_caller.bm25_granted_top(bigint, text[], double precision, double precision, integer, text[], text, timestamptz),
  scsql_caller.bm25_rounds(bigint, integer, double precision, double precision, double precision, bigint, integer, bigint[],
                           double precision[], integer[], double precision[], double precision[], double precision[], boolean),
  scsql_caller.bm25_round_candidates(bigint, bigint[], double precision[], integer[], double precision[], double precision[],
                                     integer, bigint, double precision, integer, integer, double precision,
                                     double precision, double precision, boolean),
  scsql_caller.bm25_big_term_candidates(bigint, bigint[], double precision[], double precision[], double precision[], integer,
                                        double precision, integer, boolean, double precision, double precision,
                                        double precision, boolean),
  scsql_caller.bm25_completed_batch(bigint, bigint[], double precision[], bigint[], double precision[], integer, boolean,
                                    double precision, double precision, double precision, boolean),
  scsql_caller.bm25_essential_top(bigint, bigint[], double precision[], double precision[], double precision, integer,
                                  double precision, double precision, double precision, boolean),
  scsql_caller.bm25_round_complete(bigint, integer, double precision, double precision, double precision, bigint[],
                                   double precision[], integer, bigint, bigint[], double precision[], integer, bigint,
                                   double precision, double precision, double precision, bigint[], double precision[],
                                   integer, integer, boolean),
  scsql_caller.bm25_pair_bound(bigint, bigint[], double precision[], integer[], double precision[], double precision[],
                               bigint, integer, integer, bigint, integer[], double precision, integer[], integer,
                               double precision, double precision, double precision, boolean),
  scsql_caller.bm25_round_end(bigint, bigint[], double precision[], integer[], double precision[], double precision[],
                              bigint, integer, integer, bigint, double precision, integer[], boolean, integer,
                              double precision, double precision, double precision, boolean),
  scsql_caller.bm25_tier_chunks(bigint, bigint[], double precision[], integer[], double precision[], double precision[],
                                integer[], double precision[], integer[], double precision, integer, double precision,
                                double precision, double precision, boolean),
  scsql_caller.bm25_required_top(bigint, bigint[], double precision[], integer[], double precision[], integer[],
                                 double precision[], double precision, integer[], bigint[], double precision[], bigint[],
                                 integer, double precision, double precision, double precision, boolean)
to scsql_agent;

-- The index tool asks, before it reads a file, whether it may read the
-- directory, and reads what counts as a secret.
grant execute on function scsql_caller.index_scope(text), scsql_caller.secret_dirs(),
  scsql_caller.private_key_pattern()
to scsql_agent;

-- Background work done by scsql worker and the MCP server, as an agent:
-- granted to scsql_worker, which agents inherit, so it is never an MCP tool.
grant execute on function
  scsql.embed_claim(text, integer, integer), scsql.embed_store(text, uuid, text[], vector[]), scsql.purge_expired()
to scsql_worker;

-- Bulk indexing (sql/21_knowledge_bulk.sql), what scsql index and the
-- transcript import use: texts are staged through the view kb_staging,
-- whose trigger takes the project and agent from the acting role; the
-- staged rows themselves are the owner's only. Not an MCP tool.
select scsql._secure_table(t) from unnest(array['scsql.kb_staged_sources', 'scsql.kb_staged_chunks']::regclass[]) t;
grant insert on scsql.kb_staging to scsql_worker;
grant execute on function scsql.index_staged() to scsql_worker;

-- The auditor samples stored vectors to re-embed them (scsql verify --embeddings).
grant execute on function scsql.embedding_sample(integer) to scsql_auditor;

-- The API: these are the agents' memory tools.
grant execute on function
  scsql.remember(text, text, integer, interval), scsql.forget(text),
  scsql.index_text(text, text, text, text, text, jsonb, jsonb, timestamptz), scsql.index(text, jsonb),
  scsql.forget_source(text), scsql.forget_chunk(text),
  scsql.search(text, integer, text[], text, timestamptz, text, double precision, double precision,
               double precision, double precision, double precision, integer, vector, text, text, double precision,
               double precision, double precision, double precision, double precision),
  scsql.search_global(text, integer, text[], text, timestamptz, text, double precision, double precision,
                      double precision, double precision, double precision, integer, vector, text, text,
                      double precision),
  scsql.get_source(text, integer),
  scsql.summarize_session(jsonb, timestamptz),
  scsql.recall_context(integer, double precision, double precision, double precision, double precision),
  scsql.pack(text, integer, vector, text, double precision, double precision, double precision, double precision),
  scsql.memory_status()
to scsql_agent;

grant execute on function scsql.set_embedding_model(text, text, integer) to scsql_admin;
-- Where a project's files live: the index tool reads only below it.
grant execute on function scsql.set_project_root(text, text) to scsql_admin;

-- Memory lifecycle, decisions and open loops (sql/22_lifecycle.sql,
-- sql/27_decisions.sql): settings are read through functions only;
-- agents read their own project's decisions and open loops.
select scsql._secure_table(t) from unnest(array[
  'scsql.memory_settings', 'scsql.decisions', 'scsql.open_loops', 'scsql.kb_use_pending'
]::regclass[]) t;

select scsql._agent_read(array['scsql.decisions', 'scsql.open_loops']::regclass[],
                         'project_id = (select scsql_caller.project_id())');

-- What search and pack evaluate as the caller.
grant execute on function
  scsql_caller.lifecycle(integer, timestamptz, timestamptz, integer, boolean, double precision, double precision,
                         double precision, double precision),
  scsql_caller.check_lifecycle(double precision, double precision, double precision, double precision),
  scsql_caller.items_lifecycle(text[], double precision, double precision, double precision, double precision),
  scsql_caller.note_use(text[])
to scsql_agent;

grant execute on function
  scsql.pin(text, boolean), scsql.decide(text, text, bigint), scsql.decisions(text, boolean, integer),
  scsql.open_loop(text, text), scsql.close_loop(bigint, text), scsql.open_loops(text), scsql.close_loops_done(text[], text),
  scsql.pin_loop(bigint, boolean)
to scsql_agent;

grant execute on function scsql.set_memory_lifecycle(text, interval, interval, interval) to scsql_admin;

-- Memory history (sql/26_history.sql): private tables, read and written
-- through memory_history, remember, forget and resolve_conflict.
select scsql._secure_table(t) from unnest(array[
  'scsql.memory_changes', 'scsql.fact_versions', 'scsql.fact_conflicts'
]::regclass[]) t;
grant execute on function scsql.memory_history(text, integer), scsql.resolve_conflict(text, text, text)
to scsql_agent;

-- Recall by time (sql/28_recall_time.sql): when the sources of search hits
-- happened. In scsql_caller: no MCP tool.
grant execute on function scsql_caller.source_times(text[]) to scsql_agent;

-- The confidence of an answer from memory (sql/29_confidence.sql): a tool
-- hidden from models (the search, pack and recall_context tools carry it), and what it and
-- the tools evaluate as the caller.
grant execute on function
  scsql.search_confidence(text, integer, text[], text, timestamptz, text, vector, text),
  scsql_caller.answer_confidence(text, text[], double precision[], integer[], integer[]),
  scsql_caller.hit_coverage(text, text[]), scsql_caller.context_confidence(text[]),
  scsql_caller.check_confidence_query(text)
to scsql_agent;
