-- scsql memory: the knowledge base. Sources and their chunks, postings and
-- statistics kept exact by the write functions, the public functions that
-- index and forget text, files and paths. Definitions: sql/20_text.sql.

-- ---------------------------------------------------------------------------
-- Writing the knowledge base (private; called by the API functions below)
-- ---------------------------------------------------------------------------

create or replace function scsql._memory_state_lock(p_project bigint)
returns scsql.memory_state
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_state scsql.memory_state;
begin
  insert into scsql.memory_state (project_id) values (p_project) on conflict do nothing;
  select * into v_state from scsql.memory_state where project_id = p_project for update;
  return v_state;
end
$$;
comment on function scsql._memory_state_lock(bigint) is
  'Private. Creates the project''s memory_state row if needed and locks it: every writer of the knowledge base holds this lock until commit, so BM25 statistics and document frequencies stay exact under concurrency.';

create or replace function scsql._memory_state_add(p_project bigint, p_chunks bigint, p_len bigint,
                                                   p_file_chunks bigint, p_published_chunks bigint, p_published_len bigint)
returns void
language sql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  -- Caller holds the project's memory_state lock; negative counts remove.
  update scsql.memory_state
     set n_chunks = n_chunks + p_chunks, total_len = total_len + p_len, n_file_chunks = n_file_chunks + p_file_chunks,
         published_chunks = published_chunks + p_published_chunks, published_len = published_len + p_published_len,
         updated_at = now()
   where project_id = p_project;
$$;
comment on function scsql._memory_state_add(bigint, bigint, bigint, bigint, bigint, bigint) is
  'Private. Adds chunks to the project''s BM25 statistics (memory_state): CHUNKS chunks of LEN terms in all, FILE_CHUNKS of them from files, PUBLISHED_CHUNKS and PUBLISHED_LEN published; negative counts for chunks removed.';

create or replace function scsql._unindex_chunks(p_project bigint, p_chunk_ids bigint[])
returns text[]
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
-- Caller holds the project's memory_state lock. Returns the chunk hashes
-- that were removed (for _gc_hashes once new chunks are in place). The
-- postings and terms are reached through their keys (term ids and chunk
-- ids as arrays), never by a join the planner may turn into a scan of the
-- project's postings: the cost follows the chunks removed, not the project.
declare
  v_hashes text[];
  v_n bigint;
  v_len bigint;
  v_files bigint;
  v_pub_n bigint;
  v_pub_len bigint;
  v_ids bigint[];
  v_terms bigint[];
  v_pub_terms bigint[];
begin
  with old as (
    delete from scsql.kb_chunks c
    where c.project_id = p_project and c.chunk_id = any(p_chunk_ids)
    returning c.chunk_id, c.term_ids, c.n_terms, c.chunk_hash, c.source_id, c.published
  )
  select array_agg(distinct o.chunk_hash), count(*), coalesce(sum(o.n_terms), 0),
         count(*) filter (where s.kind = 'file'),
         count(*) filter (where o.published), coalesce(sum(o.n_terms) filter (where o.published), 0),
         array_agg(o.chunk_id),
         array(select u.t from old x, unnest(x.term_ids) u(t)),
         array(select u.t from old x, unnest(x.term_ids) u(t) where x.published)
    into v_hashes, v_n, v_len, v_files, v_pub_n, v_pub_len, v_ids, v_terms, v_pub_terms
  from old o join scsql.kb_sources s on s.project_id = p_project and s.source_id = o.source_id;
  if v_n = 0 then
    return '{}';
  end if;
  -- Every posting of a removed chunk has one of its terms: both keys as arrays.
  delete from scsql.kb_postings p
  where p.project_id = p_project and p.term_id = any(v_terms) and p.chunk_id = any(v_ids);
  update scsql.kb_terms t set df = t.df - d.n, published_df = t.published_df - d.np
  from (select u.term_id, sum(u.n) as n, sum(u.np) as np
        from (select t, 1, 0 from unnest(v_terms) t union all select t, 0, 1 from unnest(v_pub_terms) t) u(term_id, n, np)
        group by u.term_id order by u.term_id) d
  where t.project_id = p_project and t.term_id = any(v_terms) and t.term_id = d.term_id;

  perform scsql._memory_state_add(p_project, -v_n, -v_len, -v_files, -v_pub_n, -v_pub_len);
  return coalesce(v_hashes, '{}');
end
$$;
comment on function scsql._unindex_chunks(bigint, bigint[]) is
  'Private. Removes chunks with their postings, lowering document frequencies (whole and published) and the project''s BM25 statistics. Returns the removed chunk hashes.';

create or replace function scsql._chunks_to_store(p_content text, p_spans jsonb, p_conversation boolean,
                                                  p_chunks jsonb)
returns table (seq integer, anchor text, line_start integer, line_end integer, char_start integer, char_end integer,
               content text, chunk_hash text, context text, context_sources bigint[], context_hashes text[])
language sql immutable
as $$
  -- A session summary is conversation: each part is chunked with the
  -- context before it (sql/20_text.sql), as are spans marked "context".
  -- Where each context came from is recorded once the chunks are stored
  -- (scsql._attach_context_sources).
  select t.*, null::bigint[], null::text[]
  from scsql._chunk_text(p_content, p_spans, scsql_caller.chunk_chars(), p_conversation) t where p_chunks is null
  union all
  -- Chunks already made, stored again with where their contexts came from
  -- (scsql._forget_in_context).
  select * from pg_catalog.jsonb_to_recordset(p_chunks)
    as r(seq integer, anchor text, line_start integer, line_end integer, char_start integer, char_end integer,
         content text, chunk_hash text, context text, context_sources bigint[], context_hashes text[])
  where p_chunks is not null
$$;
comment on function scsql._chunks_to_store(text, jsonb, boolean, jsonb) is
  'Private. The chunks scsql._index_chunks stores: the text chunked (scsql._chunk_text at the chunk size; as conversation when CONVERSATION), or CHUNKS already made (rows of scsql._chunk_text as JSON objects, with where their contexts came from), each with context_sources and context_hashes.';

create or replace function scsql._index_chunks(p_project bigint, p_source_id bigint, p_path text,
                                               p_content text, p_spans jsonb, p_is_file boolean,
                                               p_chunks jsonb default null)
returns table (n_chunks integer, hashes text[])
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
-- Caller holds the project's memory_state lock.
declare
  v_n integer;
  v_len bigint;
  v_hashes text[];
  v_published boolean;
  v_conversation boolean;
  v_context boolean;
begin
  select s.published, s.kind = 'session_summary' into strict v_published, v_conversation from scsql.kb_sources s
  where s.project_id = p_project and s.source_id = p_source_id;
  with x as materialized (
    select * from scsql._chunks_to_store(p_content, p_spans, v_conversation, p_chunks)
  ),
  tt as materialized (
    -- The source path and the anchor count as text of every chunk, so a
    -- file or symbol name finds its chunks; a conversation chunk's context
    -- too, so a short reply is found by what it answers.
    select x.seq, t.term, t.tf
    from x, scsql_caller.terms(concat_ws(E'\n', p_path, x.anchor, x.context, x.content)) t
  ),
  up as (
    insert into scsql.kb_terms (project_id, term, df, max_tf, published_df, tier_min_dl)
    select p_project, tt.term, count(*), max(tt.tf), case when v_published then count(*) else 0 end,
           min(tt.dl) filter (where tt.tf = 1 and tt.dl >= 32)
    from (select tt.*, sum(tt.tf) over (partition by tt.seq) as dl from tt) tt
    group by tt.term order by tt.term
    on conflict (project_id, term) do update
      set df = kb_terms.df + excluded.df, max_tf = greatest(kb_terms.max_tf, excluded.max_tf),
          published_df = kb_terms.published_df + excluded.published_df,
          tier_min_dl = least(kb_terms.tier_min_dl, excluded.tier_min_dl)
    returning kb_terms.term_id, kb_terms.term
  ),
  agg as (
    select tt.seq, array_agg(up.term_id order by up.term_id) as ids, sum(tt.tf)::integer as dl
    from tt join up using (term) group by tt.seq
  ),
  c as (
    insert into scsql.kb_chunks (project_id, source_id, seq, chunk_hash, anchor, line_start, line_end,
                                 char_start, char_end, content, n_terms, term_ids, published, context,
                                 context_sources, context_hashes)
    select p_project, p_source_id, x.seq, x.chunk_hash, x.anchor, x.line_start, x.line_end,
           x.char_start, x.char_end, x.content, coalesce(agg.dl, 0), coalesce(agg.ids, '{}'), v_published, x.context,
           x.context_sources, x.context_hashes
    from x left join agg using (seq)
    returning kb_chunks.chunk_id, kb_chunks.seq, kb_chunks.n_terms, kb_chunks.chunk_hash, kb_chunks.context
  ),
  po as (
    insert into scsql.kb_postings (project_id, term_id, chunk_id, tf, dl, published)
    select p_project, up.term_id, c.chunk_id, tt.tf, c.n_terms, v_published
    from tt join up using (term) join c using (seq)
  )
  select count(*), coalesce(sum(c.n_terms), 0), array_agg(distinct c.chunk_hash), bool_or(c.context is not null)
    into v_n, v_len, v_hashes, v_context
  from c;

  perform scsql._memory_state_add(p_project, v_n, v_len, case when p_is_file then v_n else 0 end,
                                  case when v_published then v_n else 0 end, case when v_published then v_len else 0 end);
  if p_chunks is null and v_context then  -- a file's chunks have no context
    perform scsql._attach_context_sources(p_project, p_source_id);
  end if;
  n_chunks := v_n;
  hashes := coalesce(v_hashes, '{}');
  return next;
end
$$;
comment on function scsql._index_chunks(bigint, bigint, text, text, jsonb, boolean, jsonb) is
  'Private. Chunks a source''s text (or takes P_CHUNKS, rows of scsql._chunk_text as JSON objects, instead) and stores the chunks and their postings (flagged published like their source; a chunk''s terms are those of the source path, the anchor, the context and the text; a session summary, and spans marked "context", are chunked as conversation, each chunk with its context, see scsql._chunk_text), document frequencies (whole and published) and the project''s BM25 statistics (whole and published). Returns the number of chunks and their hashes. A conversation chunk records where its context came from (scsql._attach_context_sources; P_CHUNKS carry it).';

create or replace function scsql._gc_hashes(p_project bigint, p_hashes text[])
returns void
language sql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  delete from scsql.kb_embeddings e
  where e.project_id = p_project and e.chunk_hash = any(p_hashes)
    and not exists (select from scsql.kb_chunks c where c.project_id = p_project and c.chunk_hash = e.chunk_hash);
  delete from scsql.kb_embed_queue q
  where q.project_id = p_project and q.chunk_hash = any(p_hashes)
    and not exists (select from scsql.kb_chunks c where c.project_id = p_project and c.chunk_hash = q.chunk_hash);
$$;
comment on function scsql._gc_hashes(bigint, text[]) is
  'Private. Deletes the embeddings and queued embedding work of chunk hashes no chunk of the project uses any more.';

create or replace function scsql._attach_context_sources(p_project bigint, p_source_id bigint)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
-- Caller holds the project's memory_state lock and has just stored the
-- source's chunks. Where each context came from, by identity (source and
-- chunk hash), so that forgetting a chunk changes only the contexts taken
-- from it: a context made from the chunk before (scsql._chunk_context) came
-- from that chunk; a context the writer gave (a span's context text) from
-- the chunks that hold its lines in the other sources the writer created
-- and last wrote (scsql._chunks_holding_lines), never another agent's.
declare
  v_writer bigint;
  v_chunk record;
  v_sources bigint[];
  v_hashes text[];
begin
  update scsql.kb_chunks c
     set context_sources = array[p.source_id], context_hashes = array[p.chunk_hash]
    from scsql.kb_chunks p
   where c.project_id = p_project and c.source_id = p_source_id and c.context is not null
     and p.project_id = p_project and p.source_id = p_source_id and p.seq = c.seq - 1
     and c.context = scsql._chunk_context('', false, p.anchor, p.content, c.anchor);
  select s.updated_by into v_writer from scsql.kb_sources s where s.project_id = p_project and s.source_id = p_source_id;
  for v_chunk in
    select c.chunk_id, c.context from scsql.kb_chunks c
    where c.project_id = p_project and c.source_id = p_source_id and c.context is not null and c.context_hashes is null
    order by c.seq
  loop
    select coalesce(pg_catalog.array_agg(h.source_id order by h.source_id, h.chunk_hash), '{}'),
           coalesce(pg_catalog.array_agg(h.chunk_hash order by h.source_id, h.chunk_hash), '{}')
      into v_sources, v_hashes
    from scsql._chunks_holding_lines(p_project, v_chunk.context, v_writer, p_source_id) h;
    update scsql.kb_chunks c set context_sources = v_sources, context_hashes = v_hashes
     where c.project_id = p_project and c.chunk_id = v_chunk.chunk_id;
  end loop;
end
$$;
comment on function scsql._attach_context_sources(bigint, bigint) is
  'Private. Records where the context of each conversation chunk of a source just stored came from (kb_chunks.context_sources and context_hashes): the chunk before it in the source, for a context made from it; for a context the writer gave, the chunks that hold one of its lines in the other sources the writer created and last wrote (scsql._chunks_holding_lines). What forget_chunk and forget_source look up.';

create or replace function scsql._chunks_holding_lines(p_project bigint, p_text text, p_writer bigint, p_except bigint)
returns table (source_id bigint, chunk_hash text)
language plpgsql stable
as $$
#variable_conflict use_column
begin
  -- Each non-blank line is looked up by its rarest term (kb_postings),
  -- leaving out its first and last words, which a cut may have split, then
  -- compared whole with the chunks that have that term. PL/pgSQL: Citus
  -- cannot plan a parameterized SQL function's query over its tables.
  return query
  with lines as (
    select distinct l.line from pg_catalog.unnest(pg_catalog.string_to_array(p_text, E'\n')) l(line)
    where pg_catalog.btrim(l.line) <> ''
  ),
  probes as (
    select l.line,
           (select kt.term_id
            from scsql_caller.terms(coalesce(nullif(pg_catalog.regexp_replace(l.line, '^\S*\s*|\s*\S*$', '', 'g'), ''), l.line)) t
            join scsql.kb_terms kt on kt.project_id = p_project and kt.term = t.term
            order by kt.df, kt.term_id limit 1) as term_id
    from lines l
  )
  select distinct c.source_id, c.chunk_hash
  from probes p
  join scsql.kb_postings po on po.project_id = p_project and po.term_id = p.term_id
  join scsql.kb_chunks c on c.project_id = p_project and c.chunk_id = po.chunk_id
  join scsql.kb_sources s on s.project_id = p_project and s.source_id = c.source_id
  where c.source_id <> p_except and s.created_by = p_writer and s.updated_by = p_writer
    and (pg_catalog.strpos(c.content, p.line) > 0 or c.anchor = p.line);
end
$$;
comment on function scsql._chunks_holding_lines(bigint, text, bigint, bigint) is
  'Private. The chunks (source_id, chunk_hash) of project P_PROJECT that hold a non-blank line of P_TEXT in their text, or have it as their anchor, among the sources agent P_WRITER created and last wrote, other than source P_EXCEPT: where a context a writer gave came from (scsql._attach_context_sources).';

create or replace function scsql._forget_in_context(p_project bigint, p_sources bigint[], p_hashes text[],
                                                    p_texts text[], p_anchors text[])
returns integer
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
-- Caller holds the project's memory_state lock and has removed the
-- forgotten chunks, given one entry each: source, chunk hash, text and
-- anchor (NULL for none). A conversation chunk is indexed with a context
-- taken from other chunks (kb_chunks.context, context_sources and
-- context_hashes), so forgotten text can live on there. A chunk whose
-- context came from a forgotten chunk (the same source and chunk hash)
-- loses the lines of it that stand in that chunk's text or are its anchor;
-- it is stored again with what is left (terms and statistics exact) and its
-- embedding redone. A context that merely holds the same text is not
-- touched: no other chunk is stored again or has its embedding redone.
declare
  v_src record;
  v_hashes text[] := '{}';
  v_n integer := 0;
begin
  for v_src in
    with gone as (
      select * from unnest(p_sources, p_hashes, p_texts, p_anchors) g(source_id, chunk_hash, content, anchor)
    ),
    dep as (
      -- The chunks whose context came from a forgotten chunk, with the
      -- texts and anchors of the forgotten chunks it came from.
      select c.*, m.texts, m.anchors
      from scsql.kb_chunks c
      cross join lateral (
        select pg_catalog.array_agg(g.content) as texts,
               coalesce(pg_catalog.array_agg(g.anchor) filter (where g.anchor is not null), '{}') as anchors
        from gone g
        where exists (select from unnest(c.context_sources, c.context_hashes) f(s, h)
                      where f.s = g.source_id and f.h = g.chunk_hash)) m
      where c.project_id = p_project and c.context_hashes && p_hashes and m.texts is not null
    ),
    hit as (
      select d.chunk_id, d.source_id, d.seq, d.anchor, d.line_start, d.line_end, d.char_start, d.char_end,
             d.content, d.chunk_hash, k.context,
             case when k.context is not null then k.sources end as context_sources,
             case when k.context is not null then k.hashes end as context_hashes
      from dep d
      cross join lateral (
        select nullif((select pg_catalog.string_agg(l, E'\n' order by o)
                       from pg_catalog.unnest(pg_catalog.string_to_array(d.context, E'\n')) with ordinality u(l, o)
                       where not scsql._forgotten_line(l, d.texts, d.anchors)), '') as context,
               coalesce(pg_catalog.array_agg(f.s order by f.o), '{}') as sources,
               coalesce(pg_catalog.array_agg(f.h order by f.o), '{}') as hashes
        from unnest(d.context_sources, d.context_hashes) with ordinality f(s, h, o)
        where not exists (select from gone g where g.source_id = f.s and g.chunk_hash = f.h)) k
    )
    select h.source_id, s.path, s.kind, pg_catalog.array_agg(h.chunk_id) as ids,
           pg_catalog.array_agg(distinct h.chunk_hash) as hashes,
           pg_catalog.jsonb_agg(pg_catalog.to_jsonb(h) - 'chunk_id' - 'source_id') as chunks
    from hit h join scsql.kb_sources s on s.project_id = p_project and s.source_id = h.source_id
    group by h.source_id, s.path, s.kind
  loop
    perform scsql._unindex_chunks(p_project, v_src.ids);
    perform scsql._index_chunks(p_project, v_src.source_id, v_src.path, null, null, v_src.kind = 'file', v_src.chunks);
    v_hashes := v_hashes || v_src.hashes;
    v_n := v_n + pg_catalog.array_length(v_src.ids, 1);
  end loop;
  -- Their vectors were made from the old context.
  delete from scsql.kb_embeddings e where e.project_id = p_project and e.chunk_hash = any(v_hashes);
  perform scsql._enqueue_embeddings(p_project, v_hashes);
  return v_n;
end
$$;
comment on function scsql._forget_in_context(bigint, bigint[], text[], text[], text[]) is
  'Private. Takes forgotten chunks (one entry each in P_SOURCES, P_HASHES, P_TEXTS and P_ANCHORS: source, chunk hash, text, anchor) out of the contexts taken from them: each conversation chunk whose context_sources and context_hashes name one of them loses the context lines standing in its text or equal to its anchor; those chunks are stored again (postings, frequencies and statistics exact) and their embeddings queued again. A context that only holds the same text, taken from elsewhere, stays as it is. Returns how many chunks changed.';

create or replace function scsql._forgotten_line(p_line text, p_texts text[], p_anchors text[])
returns boolean
language sql immutable parallel safe
as $$
  select pg_catalog.btrim(p_line) <> ''
     and (p_line = any(p_anchors) or exists (select from pg_catalog.unnest(p_texts) t where pg_catalog.strpos(t, p_line) > 0))
$$;
comment on function scsql._forgotten_line(text, text[], text[]) is
  'Private. True when a line of a chunk''s context is not blank and stands in one of the forgotten texts, or is one of their anchors (scsql._forget_in_context, for the chunks the context came from).';

create or replace function scsql._enqueue_embeddings(p_project bigint, p_hashes text[])
returns integer
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_model smallint;
  v_n integer;
begin
  select embed_model_id into v_model from scsql.memory_state where project_id = p_project;
  insert into scsql.kb_embed_queue (project_id, model_id, chunk_hash)
  select p_project, v_model, h from unnest(p_hashes) h
  where not exists (select from scsql.kb_embeddings e
                    where e.project_id = p_project and e.model_id = v_model and e.chunk_hash = h)
  order by h
  on conflict do nothing;
  get diagnostics v_n = row_count;
  if v_n > 0 then
    perform scsql._notify_embed(p_project);
  end if;
  return v_n;
end
$$;
comment on function scsql._enqueue_embeddings(bigint, text[]) is
  'Private. Queues the chunk hashes that have no embedding for the project''s active model, and wakes the project''s workers (scsql._notify_embed). Returns how many were queued.';

create or replace function scsql._chunks_changed(p_project bigint, p_source_id bigint, p_content text, p_spans jsonb)
returns table (old_ids bigint[], new_chunks jsonb, kept integer, moved jsonb)
language plpgsql stable  -- not SQL: Citus plans no query with an SQL function's parameters
as $$
begin
  -- A stored chunk the new text makes again (the same text, hash and anchor;
  -- no conversation context) is kept with its postings, wherever it now is:
  -- an edit costs the chunks it changed, not the whole file, and lines added
  -- above a chunk only move it (its seq, lines and characters, in MOVED).
  -- Equal chunks pair in order. NULL rows when the text is conversation
  -- (contexts are recorded anew).
  return query
  with x as materialized (
    select t.*, row_number() over (partition by t.chunk_hash, t.anchor, t.content order by t.seq) as i
    from scsql._chunks_to_store(p_content, p_spans, false, null) t
  ), o as materialized (
    select c.chunk_id, c.seq, c.chunk_hash, c.anchor, c.content, c.line_start, c.line_end, c.char_start, c.char_end,
           row_number() over (partition by c.chunk_hash, c.anchor, c.content order by c.seq) as i
    from scsql.kb_chunks c
    where c.project_id = p_project and c.source_id = p_source_id and c.context is null and c.purged_at is null
  ), k as materialized (
    select o.chunk_id, x.seq, x.line_start, x.line_end, x.char_start, x.char_end,
           (o.seq, o.line_start, o.line_end, o.char_start, o.char_end)
             is distinct from (x.seq, x.line_start, x.line_end, x.char_start, x.char_end) as moved
    from x join o on o.chunk_hash = x.chunk_hash and o.anchor is not distinct from x.anchor and o.content = x.content
                 and o.i = x.i
    where x.context is null
  )
  select array(select c.chunk_id from scsql.kb_chunks c where c.project_id = p_project and c.source_id = p_source_id
                 and c.chunk_id not in (select k.chunk_id from k)),
         coalesce((select jsonb_agg(to_jsonb(x) - 'i' order by x.seq) from x where x.seq not in (select k.seq from k)), '[]'),
         (select count(*) from k)::integer,
         coalesce((select jsonb_agg(to_jsonb(k) - 'moved') from k where k.moved), '[]')
  where not exists (select from x where x.context is not null);
end
$$;
comment on function scsql._chunks_changed(bigint, bigint, text, jsonb) is
  'Private. What a new text (CONTENT, SPANS) of source SOURCE_ID changes in its stored chunks: the ids of the chunks to remove, the chunks to store (rows of scsql._chunks_to_store as JSON objects), how many stored chunks it makes again (the same text, hash and anchor, anywhere in it) and are kept, and those of them that moved (chunk_id and their new seq, line_start, line_end, char_start and char_end, for scsql._move_chunks). No row for conversation text (chunks with a context), which is stored anew.';

create or replace function scsql._move_chunks(p_project bigint, p_moved jsonb)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
begin
  -- Kept chunks take their new places (scsql._chunks_changed). Seqs are
  -- unique in a source at every row, so the moved ones pass through
  -- negative seqs: no chunk holds one, and no two moved chunks share one.
  update scsql.kb_chunks c set seq = -m.seq, line_start = m.line_start, line_end = m.line_end,
                               char_start = m.char_start, char_end = m.char_end
  from pg_catalog.jsonb_to_recordset(p_moved)
       as m(chunk_id bigint, seq integer, line_start integer, line_end integer, char_start integer, char_end integer)
  where c.project_id = p_project and c.chunk_id = m.chunk_id;
  update scsql.kb_chunks c set seq = -c.seq
  from pg_catalog.jsonb_to_recordset(p_moved) as m(chunk_id bigint)
  where c.project_id = p_project and c.chunk_id = m.chunk_id;
end
$$;
comment on function scsql._move_chunks(bigint, jsonb) is
  'Private. Moves kept chunks to their places in a source''s new text (P_MOVED: objects of chunk_id, seq, line_start, line_end, char_start, char_end, as scsql._chunks_changed returns them), their postings, terms and embeddings untouched. The caller has removed the chunks the new text does not keep.';

create or replace function scsql._redact_spans(p_spans jsonb)
returns jsonb
language sql immutable
as $$
  -- Spans are read for their anchors and contexts, which the chunks keep.
  -- Most hold nothing redaction would change: judged once as a whole, they
  -- are walked value by value (scsql._redact_jsonb) only when something is.
  select case when scsql._redact(p_spans::text) = p_spans::text then p_spans else scsql._redact_jsonb(p_spans) end
$$;
comment on function scsql._redact_spans(jsonb) is
  'Private. The spans of a text to index, redacted as index_text and the bulk path store them: as given when their JSON text holds nothing redaction would change, else each key and value redacted (scsql._redact_jsonb).';

create or replace function scsql._index_source(
  p_project bigint, p_path text, p_content text, p_kind text, p_trust text, p_tier text,
  p_spans jsonb, p_meta jsonb, p_expires_at timestamptz)
returns table (source_id bigint, chunks integer, unchanged boolean, content_hash text)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_hash text;
  v_spans text;
  v_src scsql.kb_sources;
  v_old_ids bigint[];
  v_old_hashes text[] := '{}';
  v_new record;
  v_found boolean;
  v_made jsonb;
  v_kept integer;
  v_moved jsonb;
  v_agent bigint := scsql._my_agent_id();
begin
  -- Every text of the knowledge base is stored redacted (sql/05_redaction.sql):
  -- the content, the anchors of its spans and its metadata. The content hash
  -- and the chunk hashes are those of the redacted text, so a hash never
  -- stands for a secret, and dedup, citations and embeddings agree with what
  -- is stored. (Redaction keeps line numbers: only a private key block, which
  -- index_text refuses, spans lines.)
  if scsql._jsonb_depth(p_spans) > 64 or scsql._jsonb_depth(p_meta) > 64 then
    raise exception using errcode = 'SC010', message = 'spans and meta may nest at most 64 levels',
      hint = 'Give spans as an array of {start_line, end_line, anchor} objects and meta as a flat object.';
  end if;
  p_content := scsql._redact(p_content);
  p_spans := scsql._redact_spans(p_spans);
  p_meta := scsql._redact_jsonb(p_meta);
  v_hash := encode(sha256(convert_to(p_content, 'UTF8')), 'hex');
  v_spans := md5(p_spans::text);
  perform scsql._memory_state_lock(p_project);
  select * into v_src from scsql.kb_sources s where s.project_id = p_project and s.path = p_path for update;
  if found and v_src.content_hash = v_hash and v_src.kind = p_kind and v_src.trust = p_trust
     and v_src.tier = p_tier and v_src.meta = p_meta and v_src.spans_hash is not distinct from v_spans then
    return query select v_src.source_id, v_src.n_chunks, true, v_hash;
    return;
  end if;
  v_found := found;
  if v_found and v_src.kind = p_kind and v_src.kind <> 'session_summary' then  -- published and conversation unchanged
    select d.old_ids, d.new_chunks, d.kept, d.moved into v_old_ids, v_made, v_kept, v_moved
    from scsql._chunks_changed(p_project, v_src.source_id, p_content, p_spans) d;
  end if;
  if v_found then
    if v_kept is null then
      select array_agg(c.chunk_id) into v_old_ids
      from scsql.kb_chunks c where c.project_id = p_project and c.source_id = v_src.source_id;
    end if;
    if cardinality(v_old_ids) > 0 then
      v_old_hashes := scsql._unindex_chunks(p_project, v_old_ids);
    end if;
    if jsonb_array_length(v_moved) > 0 then
      perform scsql._move_chunks(p_project, v_moved);
    end if;
    update scsql.kb_sources s
       set kind = p_kind, trust = p_trust, tier = p_tier, content_hash = v_hash, spans_hash = v_spans, meta = p_meta,
           n_chars = char_length(p_content), updated_at = now(), updated_by = v_agent, expires_at = p_expires_at
     where s.project_id = p_project and s.source_id = v_src.source_id;
  else
    insert into scsql.kb_sources (project_id, path, kind, trust, tier, content_hash, spans_hash, n_chars, meta,
                                  created_by, updated_by, expires_at)
    values (p_project, p_path, p_kind, p_trust, p_tier, v_hash, v_spans, char_length(p_content), p_meta,
            v_agent, v_agent, p_expires_at)
    returning * into v_src;
  end if;

  select * into v_new from scsql._index_chunks(p_project, v_src.source_id, p_path, p_content, p_spans, p_kind = 'file',
                                               v_made);  -- NULL: the text chunked
  update scsql.kb_sources s set n_chunks = v_new.n_chunks + coalesce(v_kept, 0)
   where s.project_id = p_project and s.source_id = v_src.source_id;
  perform scsql._gc_hashes(p_project, v_old_hashes);
  perform scsql._enqueue_embeddings(p_project, v_new.hashes);
  return query select v_src.source_id, v_new.n_chunks + coalesce(v_kept, 0), false, v_hash;
end
$$;
comment on function scsql._index_source(bigint, text, text, text, text, text, jsonb, jsonb, timestamptz) is
  'Private. Creates or replaces one source and its chunks in the current transaction (so no half-indexed source is ever visible), storing its text, span anchors and metadata redacted (scsql._redact; content_hash and chunk hashes are those of the redacted text), records the acting agent as its last writer (updated_by), keeps embeddings of unchanged chunk text, queues the new text for embedding. A source whose text, kind, trust, tier and metadata are unchanged costs one lookup.';

create or replace function scsql._memory_index_change(p_project bigint, p_path text, p_new_hash text, p_kind text)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_old text;
begin
  -- The old hash is the one the source's last change recorded (NULL after
  -- it was removed, purged or forgotten: the source is added again).
  select m.new_hash into v_old from scsql.memory_changes m
  where m.project_id = p_project and m.target = p_path and m.kind = 'source'
  order by m.change_id desc limit 1;
  perform scsql._memory_change(p_project, 'index', 'source', p_path, null, v_old, p_new_hash,
                               format('%s %s', replace(p_kind, '_', ' '), case when v_old is null then 'added' else 'changed' end),
                               null);
end
$$;
comment on function scsql._memory_index_change(bigint, text, text, text) is
  'Private. Records in the memory history (sql/26_history.sql) that the source at P_PATH of kind P_KIND was indexed with content hash P_NEW_HASH: op index, the old hash the source''s last recorded change left (NULL: added), reason "<kind> added" or "<kind> changed".';

create or replace function scsql._forget_sources(p_project bigint, p_source_ids bigint[])
returns integer
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_ids bigint[];
  v_hashes text[] := '{}';
  v_n integer;
begin
  if coalesce(array_length(p_source_ids, 1), 0) = 0 then
    return 0;
  end if;
  perform scsql._memory_state_lock(p_project);
  select array_agg(c.chunk_id) into v_ids
  from scsql.kb_chunks c where c.project_id = p_project and c.source_id = any(p_source_ids);
  if v_ids is not null then
    v_hashes := scsql._unindex_chunks(p_project, v_ids);
  end if;
  delete from scsql.kb_sources s where s.project_id = p_project and s.source_id = any(p_source_ids);
  get diagnostics v_n = row_count;
  perform scsql._gc_hashes(p_project, v_hashes);
  return v_n;
end
$$;
comment on function scsql._forget_sources(bigint, bigint[]) is
  'Private. Deletes sources with their chunks, postings and no-longer-used embeddings. Returns how many sources were deleted.';

-- ---------------------------------------------------------------------------
-- Public API: the knowledge base
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- The uses of what search and pack return, on Citus at commit
-- ---------------------------------------------------------------------------

create or replace function scsql._note_use_at_commit(p_project bigint, p_paths text[])
returns integer
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
begin
  -- One server: recorded now (scsql._note_use).
  if not exists (select from pg_catalog.pg_extension where extname = 'citus') then
    return scsql._note_use(p_project, p_paths);
  end if;
  -- Citus: the UPDATE would run as the owner on the project's shards, after
  -- which Citus refuses the caller's reads of them in this transaction. The
  -- paths wait on the coordinator (a local table) until commit.
  if p_project is null or coalesce(cardinality(p_paths), 0) = 0
     or current_setting('transaction_read_only') = 'on' then
    return 0;
  end if;
  insert into scsql.kb_use_pending (project_id, paths) values (p_project, p_paths[1:1000]);
  return 0;
end
$$;
comment on function scsql._note_use_at_commit(bigint, text[]) is
  'Private, called by scsql_caller.note_use. Records the use of the items at PATHS of project PROJECT as scsql._note_use does: at once on one server (returns how many rows were updated); on Citus when the transaction commits (scsql.kb_use_pending, returns 0), so the caller may still read the project''s tables in the same transaction (Citus refuses a read of shards the owner modified in it). Nothing is recorded in a read-only transaction.';

create or replace function scsql._apply_pending_use()
returns trigger
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
begin
  perform scsql._note_use(new.project_id, new.paths);
  delete from scsql.kb_use_pending p where p.project_id = new.project_id and p.pending_id = new.pending_id;
  return null;
end
$$;
comment on function scsql._apply_pending_use() is
  'Private trigger (deferred, at commit, on scsql.kb_use_pending): records the uses of a row (scsql._note_use) and deletes it.';

drop trigger if exists apply_at_commit on scsql.kb_use_pending;
create constraint trigger apply_at_commit after insert on scsql.kb_use_pending
  deferrable initially deferred for each row execute function scsql._apply_pending_use();

create or replace function scsql._check_source(p_kind text, p_trust text, p_tier text)
returns void
language plpgsql immutable
as $$
begin
  if p_kind is null or p_kind not in ('file', 'url', 'note', 'session_summary', 'archived_fact', 'learning') then
    raise exception using errcode = 'SC203', message = format('unknown source kind %s', coalesce(quote_literal(p_kind), 'NULL')),
      hint = 'Kinds: file, url, note (learnings, session summaries and archived facts are written by record_outcome, summarize_session and remember).';
  end if;
  if p_trust is null or p_trust not in ('internal', 'external') then
    raise exception using errcode = 'SC203', message = format('unknown trust label %s', coalesce(quote_literal(p_trust), 'NULL')),
      hint = 'Trust is internal or external.';
  end if;
  if p_kind = 'url' and p_trust <> 'external' then
    raise exception using errcode = 'SC203', message = 'a url source is always external',
      hint = 'Omit trust for a url, or pass external.';
  end if;
  if p_tier is null or p_tier not in ('pinned', 'standard', 'session') then
    raise exception using errcode = 'SC203', message = format('unknown retention tier %s', coalesce(quote_literal(p_tier), 'NULL')),
      hint = 'Tiers: pinned (kept until forgotten), standard (kept while the source exists), session (365 days).';
  end if;
end
$$;
comment on function scsql._check_source(text, text, text) is
  'Private. Raises SC203 unless kind, trust and tier are valid (a url is always external).';

create or replace function scsql._date_source(p_project bigint, p_path text, p_occurred_at timestamptz)
returns void
language plpgsql  -- not SQL: Citus plans no query with an SQL function's parameters
as $$
begin
  update scsql.kb_sources s set occurred_at = p_occurred_at
  where p_occurred_at is not null and s.project_id = p_project and s.path = p_path
    and s.occurred_at is distinct from p_occurred_at;
end
$$;
comment on function scsql._date_source(bigint, text, timestamptz) is
  'Private. Records when what source P_PATH of project P_PROJECT holds happened (nothing for a NULL time).';

create or replace function scsql.index_text(
  p_path text, p_content text, p_kind text default 'note', p_trust text default null,
  p_tier text default 'standard', p_spans jsonb default null, p_meta jsonb default null,
  p_occurred_at timestamptz default null)
returns table (path text, kind text, trust text, chunks integer, unchanged boolean, content_hash text)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_project bigint := scsql._my_project();
  v_trust text := coalesce(p_trust, case when p_kind = 'url' then 'external' else 'internal' end);
  v_r record;
begin
  -- The checks and the path as stored: sql/21_knowledge_bulk.sql (the bulk path makes the same).
  p_path := scsql._index_text_path(p_path, p_content, p_kind, v_trust, p_tier, p_meta, p_occurred_at);
  select * into v_r from scsql._index_source(v_project, p_path, p_content, p_kind, v_trust, p_tier, p_spans,
    coalesce(p_meta, '{}'), case when p_tier = 'session' then now() + interval '365 days' end);
  perform scsql._date_source(v_project, p_path, p_occurred_at);
  -- Memory history (sql/26_history.sql): added or changed.
  perform scsql._memory_index_change(v_project, p_path, v_r.content_hash, p_kind) where not v_r.unchanged;
  return query select p_path, p_kind, v_trust, v_r.chunks, v_r.unchanged, v_r.content_hash;
end
$$;
comment on function scsql.index_text(text, text, text, text, text, jsonb, jsonb, timestamptz) is
  'Indexes one text (a note, a URL''s content, a file) into your project''s knowledge base, replacing what was at path. Returns path, kind, trust, chunks, unchanged, content_hash.

p_path: where the text comes from (file path, URL or note name)
p_content: the text, at most 2 MiB
p_kind (file|url|note): source kind
p_trust (internal|external): default external for a url, else internal
p_tier (pinned|standard|session): retention
p_spans (array): chunks as [{start, end, anchor, context}], 1-based inclusive lines; context true marks a conversation turn; default chunks by headings
p_meta (object): extra data kept with the source
p_occurred_at: when what the text holds happened, when that is not now (a past session''s conversation)

The replacement is atomic, and the acting agent is recorded as the source''s last writer. Kind file, url or note (the project''s published knowledge, which readers granted the project may also search); trust internal or external (default: external for a url, else internal); tier pinned, standard or session (365 days). Without spans the text is chunked by Markdown headings and blank lines (about 1,500 characters a chunk); spans [{start, end, anchor}] (1-based inclusive line numbers) chunk code by definitions. A span with "context": true is a turn of a conversation: each of its chunks is also indexed (BM25 terms, embedding input) with the context it needs to be found, the previous chunk''s anchor and last 600 characters (kept beside the chunk, not in its text), so a short reply such as "yes, do that" is found by what it answers; "context": a text (at most 1,000 characters) is the context of the span''s first chunk instead (what came before it in another source). Unchanged text costs one lookup. New chunk text is queued for embedding; BM25 finds it at once. The path, text, span anchors and meta are stored redacted (each secret replaced by [REDACTED:<kind>], see scsql.redact). With OCCURRED_AT the source is dated when what it holds happened (search''s since and the viewer''s time filters use that time). path is as stored; content_hash is the sha256 of the text as stored, redacted. Raises SC010 an occurred_at out of 1970..9000, SC200/SC201 bad path or empty text, SC203 bad kind/trust/tier (also for learning, session_summary and archived_fact, which only scsql writes), SC211 a reserved path (learning:, session:, fact:, memory:, message:), SC204 text over 2 MiB, SC215 text holding a PEM private key block, SC206 bad spans.';


create or replace function scsql_caller.index_scope(p_dir text)
returns text
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
-- p_dir is the real path of the directory (symbolic links resolved by the
-- caller); "." and ".." are resolved here, lexically (_path_parts), before
-- any check.
declare
  v_root text;
  v_parts text[];
  v_root_parts text[];
  v_n integer;
begin
  perform scsql._check_text('directory', p_dir, 4096, false);
  perform scsql._require(left(p_dir, 1) = '/', format('directory %L is not an absolute path', p_dir));
  v_parts := scsql._path_parts(p_dir);
  if v_parts is null then
    raise exception using errcode = 'SC213', message = format('directory %L climbs above "/" through ".."', p_dir),
      hint = 'Give the real path of a directory under the project root.';
  end if;
  if exists (select from unnest(v_parts) x
             where lower(x) = any(scsql_caller.secret_dirs())) then
    raise exception using errcode = 'SC214',
      message = format('%s is a store of secrets (or inside one); scsql does not index it', p_dir),
      hint = 'Index the project''s source tree; keys and credentials never belong in the knowledge base.';
  end if;
  select p.root_path into v_root from scsql.projects p where p.project_id = scsql._my_project();
  v_root_parts := scsql._root_parts(v_root);
  if v_root_parts is null then
    raise exception using errcode = 'SC216',
      message = format('project %s has no root directory%s; scsql indexes only inside a project''s root',
                       (select p.name from scsql.projects p where p.project_id = scsql._my_project()),
                       case when v_root is not null then format(' (its root_path %L names "/")', v_root) else '' end),
      hint = 'An administrator sets it: scsql up --root DIR for the default project, or select scsql.set_project_root(project, ''/abs/dir'').';
  end if;
  v_n := cardinality(v_root_parts);
  if cardinality(v_parts) < v_n or v_parts[1:v_n] is distinct from v_root_parts then
    raise exception using errcode = 'SC213',
      message = format('%s is outside the project''s root %s; scsql indexes only inside it', p_dir, v_root),
      hint = 'Index a directory under the root. The root is compared with the directory''s real path (symbolic links resolved); an administrator sets it with create_project or set_project_root.';
  end if;
  return '/' || array_to_string(v_root_parts, '/');
end
$$;
comment on function scsql_caller.index_scope(text) is
  'For the index tool (scsql index PATH and MCP index) before it reads a file. DIR is the absolute real path of the directory to index. Raises SC214 when it is or lies inside a store of secrets (scsql_caller.secret_dirs: .ssh, .gnupg, .aws, .azure, .kube, .password-store), SC216 when the acting agent''s project has no root_path (or one that names "/"), SC213 when DIR is not inside the root ("." and ".." resolved by _path_parts; both are real paths, compared as the file system spells them) or climbs above "/", SC010 for a relative path, SC200/SC201 for a bad one. Returns the project''s root_path (normalized), which the tool takes as the root that indexed paths are relative to.';

create or replace function scsql.set_project_root(p_project text, p_root_path text)
returns text
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_parts text[];
  v_root text;
  v_project bigint;
begin
  perform scsql._check_text('root_path', p_root_path, 4096, false);
  perform scsql._require(left(p_root_path, 1) = '/', format('root_path must be an absolute path, got %L', p_root_path));
  v_parts := scsql._root_parts(p_root_path);
  perform scsql._require(v_parts is not null,
    format('root_path %L names "/" (or climbs above it); a project''s root is a directory below "/"', p_root_path));
  v_root := '/' || array_to_string(v_parts, '/');
  v_project := scsql._project_id(p_project);
  update scsql.projects set root_path = v_root where project_id = v_project;
  return v_root;
end
$$;
comment on function scsql.set_project_root(text, text) is
  'Administrators only. Sets the root directory of project PROJECT: an absolute path (give its real path, symbolic links resolved; scsql up and roles.set_project_root resolve it), stored with "." and ".." resolved (_root_parts; as the file system spells it: the index tool compares it with real paths). The index tool reads only below it, and exclusive file paths are relative to it. Returns the stored root. Raises SC010 for a relative path or "/", SC200/SC201 for a bad one, SC005 unknown project.';

create or replace function scsql.index(p_path text, p_manifest jsonb)
returns table (path text, action text)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_project bigint := scsql._my_project();
  v_prefix text := coalesce(rtrim(p_path, '/'), '');
  v_ids bigint[];
  v_removed text[];
  v_paths text[];
  v_hashes text[];
begin
  if p_manifest is null or jsonb_typeof(p_manifest) <> 'array' then
    raise exception using errcode = 'SC210', message = 'manifest must be a JSON array of {path, content_hash}';
  end if;
  -- Paths here are keys of sources: relative, spelled as _path_parts reads
  -- them (no ".", "..", or empty part), so one file has one name.
  if array_to_string(scsql._path_parts(v_prefix), '/') is distinct from v_prefix then
    raise exception using errcode = 'SC210', message = format('path %L must be a directory relative to the project root', p_path);
  end if;
  if exists (
    select from jsonb_array_elements(p_manifest) m
    where jsonb_typeof(m) <> 'object'
       or jsonb_typeof(m -> 'path') is distinct from 'string'
       or coalesce(m ->> 'content_hash', '') !~ '^[0-9a-f]{64}$'
       or array_to_string(scsql._path_parts(m ->> 'path'), '/') is distinct from (m ->> 'path') or (m ->> 'path') = ''
       or char_length(m ->> 'path') > 1024
       or (v_prefix <> '' and left(m ->> 'path', char_length(v_prefix) + 1) <> v_prefix || '/')
  ) then
    raise exception using errcode = 'SC210',
      message = 'every manifest entry must be {"path": relative path under the prefix, "content_hash": sha256 hex}';
  end if;

  -- Files under the prefix that are no longer in the tree: unindex them.
  select array_agg(s.source_id), array_agg(s.path order by s.path) into v_ids, v_removed
  from scsql.kb_sources s
  where s.project_id = v_project and s.kind = 'file'
    and (v_prefix = '' or left(s.path, char_length(v_prefix) + 1) = v_prefix || '/')
    and not exists (select from jsonb_array_elements(p_manifest) m where m ->> 'path' = s.path);
  -- Memory history (sql/26_history.sql): one row per file removed; the files
  -- added or changed are recorded by index_text as the tool indexes them.
  -- The rows are read first, then recorded (on Citus a write from inside a
  -- query on a shard is refused).
  select array_agg(s.path order by s.path), array_agg(s.content_hash order by s.path) into v_paths, v_hashes
  from scsql.kb_sources s where s.project_id = v_project and s.source_id = any(v_ids);
  perform scsql._memory_change(v_project, 'remove', 'source', r.path, null, r.content_hash, null,
                               'file no longer in the tree', nullif(v_prefix, ''))
  from unnest(v_paths, v_hashes) with ordinality r(path, content_hash, n)
  order by r.n;
  perform scsql._forget_sources(v_project, v_ids);

  return query
    select r, 'removed'::text from unnest(v_removed) r
    union all
    select m ->> 'path', 'index'
    from jsonb_array_elements(p_manifest) m
    where not exists (select from scsql.kb_sources s
                      where s.project_id = v_project and s.path = m ->> 'path'
                        and s.kind = 'file' and s.content_hash = m ->> 'content_hash')
    order by 2, 1;
end
$$;
comment on function scsql.index(text, jsonb) is
  'Indexes a directory tree of the project into the knowledge base, incrementally (unchanged files cost nothing, deleted files are unindexed); honours .gitignore and never reads secrets. Returns files, indexed, unchanged, removed, chunks, skipped, failed.

p_path: directory to index, on the machine the MCP server runs on, inside the project root

The project is the acting agent''s. The MCP tool (and scsql index PATH) takes PATH, a directory on the machine the MCP server runs on: it walks it (honouring .gitignore, skipping binaries and files over 2 MiB, refusing symbolic links that leave the project root; never reading the scsql data directory and keystore, stores of secrets such as .ssh and .aws, or files named like secrets: .env*, *.pem, *.key, id_rsa*, id_ed25519*, .netrc, .pgpass, credentials files; never indexing a file that holds a private key), then this function compares the files with what is indexed, in one call, and the tool indexes the new and changed files with index_text (Python by top-level definitions, other code by a definition heuristic, Markdown by headings), one atomic transaction per file; unchanged files cost nothing and files no longer present are unindexed; each file indexed (op index, reason file added or file changed) or removed (op remove) is a row of the memory history (memory_history). The tool returns a report: files, indexed, unchanged, removed, chunks, skipped (each path with its reason), skipped_counts (how many per reason), failed. It refuses everything in a project without a root_path (SC216; scsql up gives the default project one, an administrator sets others with set_project_root), a directory outside the root_path (SC213) or inside a store of secrets (SC214), all checked by scsql_caller.index_scope, the scsql data directory or keystore (SC223), and a path the operating system cannot look up, such as one too long (SC224). In SQL, PATH is the directory relative to the project root ('''' for all of it) and MANIFEST the files present [{path, content_hash: sha256 hex}], each path relative and spelled as _path_parts reads it (no ".", ".." or empty part, no leading or trailing "/"; a trailing "/" of PATH is dropped): file sources under PATH missing from it are unindexed (action removed) and files to (re)index are returned (action index). Raises SC210 for a bad manifest.';

create or replace function scsql._check_forgettable(p_project bigint, p_source_ids bigint[])
returns void
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
-- A session summary belongs to the agent that wrote it (created_by), a
-- learning to the author of its outcome (scsql.learnings.author_id, found
-- through meta.learning_id; created_by is whoever drained the queue). Other
-- sources belong to the project.
declare
  v_me bigint := scsql._my_agent_id();
  v_r record;
begin
  select s.path, s.kind, a.name as owner into v_r
  from scsql.kb_sources s
  left join scsql.learnings l
    on s.kind = 'learning' and l.project_id = s.project_id
   and l.learning_id = case when s.meta ->> 'learning_id' ~ '^[0-9]{1,18}$' then (s.meta ->> 'learning_id')::bigint end
  join scsql.agents a
    on a.agent_id = case when s.kind = 'learning' then coalesce(l.author_id, s.created_by) else s.created_by end
  where s.project_id = p_project and s.source_id = any(p_source_ids)
    and s.kind in ('session_summary', 'learning') and a.agent_id <> v_me
  order by s.path
  limit 1;
  if found then
    raise exception using errcode = 'SC212',
      message = format('%s is a %s of agent %s; only that agent may forget it', v_r.path,
                       replace(v_r.kind, '_', ' '), v_r.owner),
      hint = 'Nothing was forgotten. Forget your own sources; a text shared with another agent''s source stays while that source does.';
  end if;
end
$$;
comment on function scsql._check_forgettable(bigint, bigint[]) is
  'Private. Raises SC212 when one of the sources is a session summary another agent wrote, or a learning of another agent''s outcome: only their authors may forget them.';

create or replace function scsql.forget_source(p_path text)
returns boolean
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_project bigint := scsql._my_project();
  v_id bigint;
  v_path text;
  v_hash text;
  v_kind text;
  v_hashes text[];
  v_texts text[];
  v_anchors text[];
begin
  perform scsql._check_text('path', p_path, 1024, false);
  -- Paths are stored redacted: a path given as it was indexed finds its source.
  select source_id into v_id from scsql.kb_sources where project_id = v_project and path = p_path;
  if not found then
    select source_id into v_id from scsql.kb_sources where project_id = v_project and path = scsql._redact(p_path);
  end if;
  if not found then
    return false;
  end if;
  perform scsql._check_forgettable(v_project, array[v_id]);
  -- Memory history (sql/26_history.sql).
  select s.path, s.content_hash, s.kind into v_path, v_hash, v_kind
  from scsql.kb_sources s where s.project_id = v_project and s.source_id = v_id;
  perform scsql._memory_change(v_project, 'forget_source', 'source', v_path, null, v_hash, null, v_kind, null);
  -- Its chunks, by identity: the contexts taken from them lose them (a
  -- transcript part's first turn is given the end of the part before).
  select array_agg(c.chunk_hash order by c.seq), array_agg(c.content order by c.seq), array_agg(c.anchor order by c.seq)
    into v_hashes, v_texts, v_anchors
  from scsql.kb_chunks c where c.project_id = v_project and c.source_id = v_id;
  if scsql._forget_sources(v_project, array[v_id]) = 0 then
    return false;
  end if;
  perform scsql._forget_in_context(v_project, array_fill(v_id, array[coalesce(cardinality(v_hashes), 0)]),
                                   coalesce(v_hashes, '{}'), coalesce(v_texts, '{}'), coalesce(v_anchors, '{}'));
  return true;
end
$$;
comment on function scsql.forget_source(text) is
  'Removes the source at path with all its chunks. Returns true when it existed.

p_path: source_path from a search result

PATH is as indexed, or as stored, redacted, in the acting agent''s project; postings and embeddings go with the chunks. Its text is taken out of the contexts that were taken from its chunks (the next turn is indexed with the end of the one before, a transcript part''s first turn with the end of the part before); a context that only holds the same text, taken from elsewhere, stays. Files, URLs, notes and archived facts are the project''s to forget; a session summary only its author may forget, a learning only the author of its outcome. False when it did not exist. Raises SC200/SC201 for a bad path, SC212 for another agent''s session summary or learning.';

create or replace function scsql.forget_chunk(p_chunk_hash text)
returns integer
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_project bigint := scsql._my_project();
  v_ids bigint[];
  v_sources bigint[];
  v_of bigint[];
  v_hashes text[];
  v_texts text[];
  v_anchors text[];
  v_paths text;
  v_n integer;
begin
  if p_chunk_hash is null or lower(p_chunk_hash) !~ '^[0-9a-f]{64}$' then
    raise exception using errcode = 'SC010', message = format('%L is not a chunk_hash (64 hexadecimal digits)', p_chunk_hash);
  end if;
  perform scsql._memory_state_lock(v_project);
  select array_agg(chunk_id), array_agg(distinct source_id) into v_ids, v_sources from scsql.kb_chunks
  where project_id = v_project and chunk_hash = lower(p_chunk_hash);
  if v_ids is null then
    return 0;
  end if;
  perform scsql._check_forgettable(v_project, v_sources);
  v_n := array_length(v_ids, 1);
  -- The chunks, by identity: the contexts taken from them lose them.
  select array_agg(source_id order by chunk_id), array_agg(content order by chunk_id), array_agg(anchor order by chunk_id)
    into v_of, v_texts, v_anchors
  from scsql.kb_chunks where project_id = v_project and chunk_id = any(v_ids);
  v_hashes := scsql._unindex_chunks(v_project, v_ids);
  perform scsql._forget_in_context(v_project, v_of, array_fill(lower(p_chunk_hash), array[v_n]), v_texts, v_anchors);
  update scsql.kb_sources s
     set n_chunks = (select count(*) from scsql.kb_chunks c where c.project_id = v_project and c.source_id = s.source_id),
         updated_at = now(), updated_by = scsql._my_agent_id()
   where s.project_id = v_project and s.source_id = any(v_sources);
  perform scsql._gc_hashes(v_project, v_hashes);
  -- Memory history (sql/26_history.sql).
  select string_agg(s.path, ', ' order by s.path) into v_paths
  from scsql.kb_sources s where s.project_id = v_project and s.source_id = any(v_sources);
  perform scsql._memory_change(v_project, 'forget_chunk', 'chunk', lower(p_chunk_hash), lower(p_chunk_hash), null, null,
    format('%s chunks removed', v_n), v_paths);
  return v_n;
end
$$;
comment on function scsql.forget_chunk(text) is
  'Removes every chunk of your project with this chunk_hash (sources stay). Returns how many were removed.

p_chunk_hash: chunk_hash from a search result (sha256 hex)

The same text may occur in several sources: each of its chunks goes, with postings and embedding, and its text is taken out of the contexts that were taken from those chunks (the next turn is indexed with the end of the one before): their terms and embeddings are made again without it. A context that only holds the same text, taken from elsewhere (another agent''s chunk, say), stays as it is. Their sources stay, with fewer chunks; re-indexing changed text brings chunks back. 0 when none was removed. Raises SC010 for a malformed hash, SC212 (removing nothing) when the text is also a chunk of another agent''s session summary or learning.';

