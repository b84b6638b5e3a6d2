-- 0630 a conversation chunk's context names the chunks it was taken from.
--
-- kb_chunks.context_sources and kb_chunks.context_hashes, two arrays of the
-- same length: for a chunk with a context (0217), the chunks its context
-- lines were taken from, as pairs (source_id, chunk_hash), recorded when the
-- context is attached (scsql._attach_context_sources, sql/21_knowledge.sql):
-- the chunk before it in its own source, or, for a context its writer gave,
-- the chunks of the other sources the writer created and last wrote that
-- hold its lines.
-- forget_chunk and forget_source take forgotten text out of a context only
-- where one of the forgotten chunks is among these, never by comparing text
-- with every context of the project; no other chunk is stored again or has
-- its embedding redone. NULL for a chunk without context.
--
-- scsql._forget_in_context takes the forgotten chunks themselves (their
-- sources, hashes, texts and anchors): the three-argument form goes, sql/
-- creates the new one.

alter table scsql.kb_chunks
  add column context_sources bigint[],
  add column context_hashes text[];
comment on column scsql.kb_chunks.context_sources is
  'Conversation only: the sources of the chunks the context was taken from (pairs with context_hashes, by position). NULL without context; empty when none is known.';
comment on column scsql.kb_chunks.context_hashes is
  'Conversation only: the chunk hashes of the chunks the context was taken from (pairs with context_sources, by position), what forgetting one of them looks up. NULL without context; empty when none is known.';
create index kb_chunks_context_hashes_idx on scsql.kb_chunks using gin (context_hashes) where context_hashes is not null;

-- Chunks indexed before: a context every line of which stands in the chunk
-- before it (or is that chunk's anchor) was taken from it ...
update scsql.kb_chunks c
   set context_sources = array[p.source_id], context_hashes = array[p.chunk_hash]
  from scsql.kb_chunks p
 where c.context is not null
   and p.project_id = c.project_id and p.source_id = c.source_id and p.seq = c.seq - 1
   and not exists (select from unnest(string_to_array(c.context, E'\n')) l
                   where btrim(l) <> '' and l is distinct from p.anchor and strpos(p.content, l) = 0);

-- ... any other from the last two chunks of the other sources its writer
-- created and last wrote that hold one of its lines (where a transcript part's first turn took the end
-- of the part before).
update scsql.kb_chunks c
   set context_sources = g.sources, context_hashes = g.hashes
  from (select c.project_id, c.chunk_id,
               coalesce(array_agg(o.source_id order by o.source_id, o.chunk_hash) filter (where o.source_id is not null), '{}') as sources,
               coalesce(array_agg(o.chunk_hash order by o.source_id, o.chunk_hash) filter (where o.source_id is not null), '{}') as hashes
        from scsql.kb_chunks c
        join scsql.kb_sources s on s.project_id = c.project_id and s.source_id = c.source_id
        left join (select o.project_id, o.source_id, o.chunk_hash, o.content, o.anchor, os.updated_by
                   from (select o.*, row_number() over (partition by o.project_id, o.source_id order by o.seq desc) as n
                         from scsql.kb_chunks o) o
                   join scsql.kb_sources os on os.project_id = o.project_id and os.source_id = o.source_id
                   where o.n <= 2 and os.created_by = os.updated_by) o
          on o.project_id = c.project_id and o.updated_by = s.updated_by and o.source_id <> c.source_id
         and exists (select from unnest(string_to_array(c.context, E'\n')) l
                     where btrim(l) <> '' and (strpos(o.content, l) > 0 or l = o.anchor))
        where c.context is not null and c.context_hashes is null
        group by c.project_id, c.chunk_id) g
 where c.project_id = g.project_id and c.chunk_id = g.chunk_id;

drop function if exists scsql._forget_in_context(bigint, text[], text[]);
