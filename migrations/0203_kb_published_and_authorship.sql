-- 0203 knowledge base: what another project's readers see, and who last
-- wrote a source.
--
-- An agent granted read access to a project (grant_project_read) sees only
-- its published knowledge: sources of kind file, url and note, with their
-- chunks, postings, vocabulary and embeddings; never session summaries,
-- archived facts or learnings. kb_sources.published says which sources
-- those are (derived from kind, so it cannot disagree with it); kb_chunks
-- carries the same flag, held equal by the foreign key, so row-level
-- security decides on a chunk without looking up its source; kb_postings
-- carries it too, inside its primary key's leaf (so BM25 still reads
-- postings from the index alone, and a posting of another project is
-- judged without looking up its chunk). kb_terms and
-- memory_state count the published part of the corpus beside the whole, so
-- BM25 over another project scores its published knowledge alone.

alter table scsql.kb_sources add column updated_by bigint references scsql.agents;
update scsql.kb_sources set updated_by = created_by;
alter table scsql.kb_sources alter column updated_by set not null;
comment on column scsql.kb_sources.updated_by is 'The agent that last wrote this source (created_by wrote it first).';

alter table scsql.kb_sources
  add column published boolean not null generated always as (kind in ('file', 'url', 'note')) stored;
alter table scsql.kb_sources add constraint kb_sources_published_key unique (project_id, source_id, published);
comment on column scsql.kb_sources.published is
  'True for kinds file, url and note: the project''s published knowledge, which readers granted the project may see. Session summaries, archived facts and learnings stay within the project.';

alter table scsql.kb_chunks add column published boolean;
update scsql.kb_chunks c set published = s.published
  from scsql.kb_sources s where s.project_id = c.project_id and s.source_id = c.source_id;
alter table scsql.kb_chunks alter column published set not null;
alter table scsql.kb_chunks drop constraint kb_chunks_project_id_source_id_fkey;
alter table scsql.kb_chunks add constraint kb_chunks_source_fkey
  foreign key (project_id, source_id, published) references scsql.kb_sources (project_id, source_id, published);
comment on column scsql.kb_chunks.published is 'Its source''s published flag (held equal by the foreign key).';

alter table scsql.kb_postings add column published boolean not null default false;
update scsql.kb_postings p set published = true
  from scsql.kb_chunks c
 where c.project_id = p.project_id and c.chunk_id = p.chunk_id and c.published;
alter table scsql.kb_postings alter column published drop default;
alter table scsql.kb_postings drop constraint kb_postings_pkey;
alter table scsql.kb_postings add primary key (project_id, term_id, chunk_id) include (tf, dl, published);
comment on column scsql.kb_postings.published is 'Its chunk''s published flag, written with it.';

alter table scsql.kb_terms add column published_df integer not null default 0 check (published_df >= 0);
update scsql.kb_terms t set published_df = x.n
  from (select p.project_id, p.term_id, count(*) as n
        from scsql.kb_postings p
        join scsql.kb_chunks c on c.project_id = p.project_id and c.chunk_id = p.chunk_id
        where c.published
        group by p.project_id, p.term_id) x
 where t.project_id = x.project_id and t.term_id = x.term_id;
comment on column scsql.kb_terms.published_df is 'The number of published chunks (see kb_sources.published) that contain the term.';

alter table scsql.memory_state
  add column published_chunks bigint not null default 0 check (published_chunks >= 0),
  add column published_len bigint not null default 0 check (published_len >= 0);
update scsql.memory_state s set published_chunks = x.n, published_len = x.len
  from (select project_id, count(*) as n, sum(n_terms) as len
        from scsql.kb_chunks where published group by project_id) x
 where s.project_id = x.project_id;
comment on column scsql.memory_state.published_chunks is 'BM25 documents of the published part of the corpus (see kb_sources.published).';
comment on column scsql.memory_state.published_len is 'Sum of the lengths in terms of the published chunks.';
