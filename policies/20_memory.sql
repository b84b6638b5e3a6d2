-- Memory and retrieval: row-level security and grants.
--
-- Agents write only through the functions of sql/20_memory.sql (security
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
  using (project_id = (select scsql._my_project()));
create policy agent_read on scsql.memory_state for select to scsql_agent
  using (project_id = (select scsql._my_project())
         or project_id = any ((select scsql._readable_projects())::bigint[]));
create policy agent_read on scsql.kb_sources for select to scsql_agent
  using (project_id = (select scsql._my_project())
         or (published and project_id = any ((select scsql._readable_projects())::bigint[])));
create policy agent_read on scsql.kb_chunks for select to scsql_agent
  using (project_id = (select scsql._my_project())
         or (published and project_id = any ((select scsql._readable_projects())::bigint[])));
create policy agent_read on scsql.kb_terms for select to scsql_agent
  using (project_id = (select scsql._my_project())
         or (published_df > 0 and project_id = any ((select scsql._readable_projects())::bigint[])));
create policy agent_read on scsql.kb_postings for select to scsql_agent
  using (project_id = (select scsql._my_project())
         or (published and project_id = any ((select scsql._readable_projects())::bigint[])));
create policy agent_read on scsql.kb_embeddings for select to scsql_agent
  using (project_id = (select scsql._my_project())
         or (project_id = any ((select scsql._readable_projects())::bigint[])
             and scsql._published_text(project_id, chunk_hash)));

-- Helpers the API evaluates as the caller.
grant execute on function
  scsql._normalize(text), scsql._chunk_hash(text), scsql._terms(text),
  scsql._check_text(text, text, integer, boolean), scsql._tokens(text),
  scsql._chunk_text(text, jsonb, integer), scsql._check_source(text, text, text),
  scsql._search(bigint[], text, integer, text[], text, timestamptz, text, vector, text, double precision,
                double precision, double precision, double precision, double precision, integer),
  scsql._bm25(bigint[], text[], double precision, double precision, integer, text[], text, timestamptz),
  scsql._recall_broadcasts(bigint, integer), scsql._published_text(bigint, text)
to scsql_agent;

-- The index tool asks, before it reads a file, whether it may read the directory.
grant execute on function scsql._index_scope(text) to scsql_agent;

-- Background work done by scsql worker and the MCP server, as an agent:
-- granted to scsql_worker, which agents inherit, so it is never an MCP tool.
grant execute on function
  scsql.embed_claim(text, integer, integer), scsql.embed_store(text, uuid, text[], vector[]), scsql.purge_expired()
to scsql_worker;

-- The auditor samples stored vectors to re-embed them (scsql verify --embeddings).
grant execute on function scsql.embedding_sample(integer), scsql._embed_input(bigint, text) to scsql_auditor;

-- The API: these are the agents' memory tools.
grant execute on function
  scsql.remember(text, text, integer), scsql.forget(text),
  scsql.index_text(text, text, text, text, text, jsonb, jsonb), scsql.index(text, jsonb),
  scsql.forget_source(text), scsql.forget_chunk(text),
  scsql.search(text, integer, text[], text, timestamptz, text, double precision, double precision,
               double precision, double precision, double precision, integer, vector, text),
  scsql.search_global(text, integer, text[], text, timestamptz, text, double precision, double precision,
                      double precision, double precision, double precision, integer, vector, text),
  scsql.summarize_session(jsonb), scsql.recall_context(integer), scsql.pack(text, integer, vector, text),
  scsql.memory_status()
to scsql_agent;

grant execute on function scsql.set_embedding_model(text, text, integer) to scsql_admin;
