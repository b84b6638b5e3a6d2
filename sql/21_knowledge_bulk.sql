-- scsql memory: bulk indexing. An agent stages many texts with COPY (or
-- INSERT) into the view scsql.kb_staging; each row is checked as index_text
-- checks it, redacted, chunked and split into terms as it arrives
-- (scsql._stage_text); then scsql.index_staged, in the same transaction,
-- writes every staged text into the knowledge base set-based: the same
-- sources, chunks, terms, postings, statistics, embedding queue and memory
-- history as index_text called once per row in ORD order. Tables:
-- migrations/0810_bulk_index.sql.

select scsql._define_error(code, name, meaning) from (values
  ('SC370', 'staged_text_order_invalid', 'A text staged for bulk indexing (scsql.kb_staging) has no ord, an ord under 1, or the ord of a text staged before it in the same transaction; nothing of the batch was indexed.'),
  ('SC371', 'staged_path_repeated', 'Two texts staged for bulk indexing in one transaction have the same path (as stored, redacted); nothing of the batch was indexed. Index each path once a batch.'),
  ('SC372', 'bulk_path_unavailable', 'The bulk path (scsql.kb_staging, scsql.index_staged) does not run on Citus, whose shards cannot run its set-based statements; index each text with scsql.index_text (scsql index and the hooks do so on a cluster).')
) as t(code, name, meaning);

create or replace function scsql._bulk_path_available()
returns void
language plpgsql stable
as $$
begin
  if scsql_caller.citus() then
    raise exception using errcode = 'SC372', message = 'the bulk path (scsql.kb_staging, index_staged) does not run on Citus',
      hint = 'Index each text with scsql.index_text; scsql index and the hooks do so on a cluster.';
  end if;
end
$$;
comment on function scsql._bulk_path_available() is
  'Private. Raises SC372 on Citus, where the bulk path''s set-based statements cannot run on the shards.';

create or replace function scsql._index_text_path(p_path text, p_content text, p_kind text, p_trust text, p_tier text,
                                                  p_meta jsonb, p_occurred_at timestamptz)
returns text
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
begin
  perform scsql._check_text('path', p_path, 1024, false);
  -- A path (a URL with a password, say) is stored redacted too.
  p_path := scsql._redact(p_path);
  perform scsql._check_text('path', p_path, 1024, false);
  perform scsql._check_source(p_kind, p_trust, p_tier);
  if p_kind in ('session_summary', 'archived_fact', 'learning') then
    raise exception using errcode = 'SC203', message = format('index_text does not write %s sources', p_kind),
      hint = 'Learnings come from record_outcome, session summaries from summarize_session, archived facts from remember; index_text writes file, url and note sources.';
  end if;
  if scsql._reserved_path(p_path) then
    raise exception using errcode = 'SC211', message = format('path %L is reserved for sources scsql writes itself', p_path),
      hint = 'Paths starting with learning:, session:, fact:, memory: or message: name learnings, session summaries, archived facts, working memory and broadcasts. Choose another path, such as notes/<name>.';
  end if;
  if p_content is not null and octet_length(p_content) > scsql_caller.index_max_bytes() then
    raise exception using errcode = 'SC204',
      message = format('text of %s is %s bytes; at most 2 MiB (2,097,152 bytes) can be indexed as one source',
                       p_path, octet_length(p_content)),
      hint = 'Nothing was indexed. Split the text into several sources.';
  end if;
  -- Empty as scsql._normalize sees it (whitespace and zero-width characters
  -- only), without normalizing the whole text.
  if p_content is null
     or pg_catalog.btrim(scsql._without_zero_width(p_content), E' \t\r\n') = '' then
    raise exception using errcode = 'SC201', message = format('text of %s is empty', p_path),
      hint = 'To remove a source use forget_source.';
  end if;
  if scsql._holds_private_key(p_content) then
    raise exception using errcode = 'SC215', message = format('text of %s holds a PEM private key block; nothing was indexed', p_path),
      hint = 'Private keys never belong in the knowledge base, which every agent of the project can search. Remove the key (a public key or the marker alone is fine).';
  end if;
  if p_meta is not null and (jsonb_typeof(p_meta) <> 'object' or octet_length(p_meta::text) > 10000
                             or scsql._jsonb_depth(p_meta) > 64) then
    raise exception using errcode = 'SC010', message = 'meta must be a JSON object of at most 10,000 bytes, nested at most 64 levels';
  end if;
  perform scsql._require_time('occurred_at', p_occurred_at);
  return p_path;
end
$$;
comment on function scsql._index_text_path(text, text, text, text, text, jsonb, timestamptz) is
  'Private. Checks one text to index as index_text and the bulk path (scsql._stage_text) take it, and returns its path as stored (redacted). Raises SC200/SC201 a bad path or an empty text, SC203 a bad kind, trust or tier (also learning, session_summary and archived_fact), SC211 a reserved path, SC204 a text over 2 MiB, SC215 a text holding a PEM private key block, SC010 bad meta or an occurred_at out of 1970..9000.';

-- ---------------------------------------------------------------------------
-- Staging: one row of scsql.kb_staging
-- ---------------------------------------------------------------------------

create or replace function scsql._staged_chunks(p_project bigint, p_agent bigint, p_xact xid8, p_ord bigint,
                                                p_path text, p_content text, p_spans jsonb)
returns scsql.kb_staged_chunks[]
language sql stable
as $$
  -- As scsql._index_chunks makes them: a chunk's terms are those of the
  -- source path, the anchor, the context and the text.
  select coalesce(array_agg(row(p_project, p_agent, p_xact, p_ord, x.seq, x.anchor, x.line_start, x.line_end,
                                x.char_start, x.char_end, x.content, x.chunk_hash, x.context, t.n, t.terms, t.tfs
                               )::scsql.kb_staged_chunks order by x.seq), '{}')
  from scsql._chunk_text(p_content, p_spans, scsql_caller.chunk_chars(), false) x
  cross join lateral (
    select coalesce(sum(tt.tf), 0)::integer as n, coalesce(array_agg(tt.term order by tt.term), '{}') as terms,
           coalesce(array_agg(tt.tf order by tt.term), '{}') as tfs
    from scsql_caller.terms(concat_ws(E'\n', p_path, x.anchor, x.context, x.content)) tt) t
$$;
comment on function scsql._staged_chunks(bigint, bigint, xid8, bigint, text, text, jsonb) is
  'Private. The chunks of one staged text (already redacted) as rows of scsql.kb_staged_chunks: scsql._chunk_text''s chunks, each with its BM25 terms and frequencies sorted by term (scsql_caller.terms of path, anchor, context and text) and its length. Raises SC206 for bad spans.';

create or replace function scsql._stage_text()
returns trigger
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
-- INSTEAD OF INSERT on scsql.kb_staging. The project and agent are the
-- acting agent's, never the row's. Checks, redaction, chunking and terms
-- run in a block that writes nothing (no subtransaction id is spent), so
-- an error names the row; the writes follow it.
declare
  v_src scsql.kb_staged_sources;
  v_chunks scsql.kb_staged_chunks[];
  v_spans jsonb;
  v_content text;
  v_state text;
  v_msg text;
  v_hint text;
begin
  perform scsql._bulk_path_available();
  v_src.project_id := scsql._my_project();
  v_src.agent_id := scsql._my_agent_id();
  v_src.xact := pg_catalog.pg_current_xact_id();
  v_src.ord := new.ord;
  v_src.kind := coalesce(new.kind, 'note');
  v_src.trust := coalesce(new.trust, case when v_src.kind = 'url' then 'external' else 'internal' end);
  v_src.tier := coalesce(new.tier, 'standard');
  begin
    v_src.path := scsql._index_text_path(new.path, new.content, v_src.kind, v_src.trust, v_src.tier, new.meta,
                                         new.occurred_at);
    -- As scsql._index_source stores a text: redacted, hashed as stored.
    if scsql._jsonb_depth(new.spans) > 64 then
      raise exception using errcode = 'SC010', message = 'spans and meta may nest at most 64 levels',
        hint = 'Give spans as an array of {start_line, end_line, anchor} objects and meta as a flat object.';
    end if;
    v_content := scsql._redact(new.content);
    v_spans := scsql._redact_spans(new.spans);
    v_src.meta := scsql._redact_jsonb(coalesce(new.meta, '{}'));
    v_src.content_hash := encode(sha256(convert_to(v_content, 'UTF8')), 'hex');
    v_src.spans_hash := md5(v_spans::text);
    v_src.n_chars := char_length(v_content);
    v_src.occurred_at := new.occurred_at;
    v_chunks := scsql._staged_chunks(v_src.project_id, v_src.agent_id, v_src.xact, v_src.ord, v_src.path,
                                     v_content, v_spans);
  exception when others then
    get stacked diagnostics v_state = returned_sqlstate, v_msg = message_text, v_hint = pg_exception_hint;
    raise exception using errcode = v_state,
      message = format('staged text %s (%s): %s', coalesce(new.ord::text, 'without ord'),
                       coalesce(left(scsql._redact(new.path), 200), 'no path'), v_msg),
      hint = concat_ws(' ', nullif(v_hint, ''), 'Nothing of the batch was indexed.');
  end;
  perform scsql._check_staged(v_src);
  insert into scsql.kb_staged_sources select v_src.*;
  insert into scsql.kb_staged_chunks select * from unnest(v_chunks);
  return new;
end
$$;
comment on function scsql._stage_text() is
  'Private trigger (INSTEAD OF INSERT on scsql.kb_staging). Stages one text for scsql.index_staged as the acting agent, in its project and transaction: checked as index_text checks it (scsql._index_text_path; an error names the row by ord and redacted path, keeps its code, and leaves nothing of the batch), redacted (text, span anchors, meta), hashed as stored, chunked and split into terms (scsql._staged_chunks). Raises SC370 for a missing, non-positive or repeated ord, SC371 for a path staged twice, SC372 on Citus (no bulk path there).';

create or replace function scsql._check_staged(p_src scsql.kb_staged_sources)
returns void
language plpgsql stable
as $$
declare
  v_other bigint;
begin
  if p_src.ord is null or p_src.ord < 1 then
    raise exception using errcode = 'SC370',
      message = format('staged text %s has no ord 1 or more (its position in the batch)', left(p_src.path, 200)),
      hint = 'Number the texts of a batch 1, 2, 3, ... in the order index_text would take them. Nothing of the batch was indexed.';
  end if;
  if exists (select from scsql.kb_staged_sources s
             where s.project_id = p_src.project_id and s.agent_id = p_src.agent_id and s.xact = p_src.xact
               and s.ord = p_src.ord) then
    raise exception using errcode = 'SC370',
      message = format('staged text %s (%s) repeats the ord of a text staged before it', p_src.ord, left(p_src.path, 200)),
      hint = 'Give each text of a batch its own ord. Nothing of the batch was indexed.';
  end if;
  select s.ord into v_other from scsql.kb_staged_sources s
  where s.project_id = p_src.project_id and s.agent_id = p_src.agent_id and s.xact = p_src.xact and s.path = p_src.path;
  if found then
    raise exception using errcode = 'SC371',
      message = format('staged texts %s and %s have the same path %s', v_other, p_src.ord, left(p_src.path, 200)),
      hint = 'Stage each path once a batch (the later text would replace the earlier). Nothing of the batch was indexed.';
  end if;
end
$$;
comment on function scsql._check_staged(scsql.kb_staged_sources) is
  'Private. Raises SC370 unless the staged text has an ord of 1 or more that no text staged before it in the transaction has, SC371 when one of them has its path.';

drop trigger if exists stage_text on scsql.kb_staging;
create trigger stage_text instead of insert on scsql.kb_staging
  for each row execute function scsql._stage_text();

-- ---------------------------------------------------------------------------
-- Indexing what is staged
-- ---------------------------------------------------------------------------

create or replace function scsql._staged_replace(p_project bigint, p_agent bigint, p_xact xid8)
returns text[]
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
-- Caller holds the project's memory_state lock. As scsql._index_source for
-- each staged text: a source whose text, kind, trust, tier, meta and spans
-- are unchanged stays as it is; a changed one loses its chunks and takes the
-- new attributes; a new one is created (source ids in ord order). Returns
-- the chunk hashes removed.
declare
  v_ids bigint[];
  v_old text[] := '{}';
  -- A value, not a call, in the CASEs below: Citus sends the statements to
  -- the project's shard and refuses a function that is not immutable there.
  v_session_expiry timestamptz := now() + interval '365 days';
begin
  perform from scsql.kb_sources s
  where s.project_id = p_project
    and s.path in (select st.path from scsql.kb_staged_sources st
                   where st.project_id = p_project and st.agent_id = p_agent and st.xact = p_xact)
  order by s.source_id for update;
  update scsql.kb_staged_sources st
     set source_id = s.source_id,
         unchanged = s.content_hash = st.content_hash and s.kind = st.kind and s.trust = st.trust and s.tier = st.tier
                     and s.meta = st.meta and s.spans_hash is not distinct from st.spans_hash
    from scsql.kb_sources s
   where st.project_id = p_project and st.agent_id = p_agent and st.xact = p_xact
     and s.project_id = p_project and s.path = st.path;
  select array_agg(c.chunk_id) into v_ids
  from scsql.kb_staged_sources st
  join scsql.kb_chunks c on c.project_id = p_project and c.source_id = st.source_id
  where st.project_id = p_project and st.agent_id = p_agent and st.xact = p_xact and not st.unchanged;
  if v_ids is not null then
    v_old := scsql._unindex_chunks(p_project, v_ids);
  end if;
  update scsql.kb_sources s
     set kind = st.kind, trust = st.trust, tier = st.tier, content_hash = st.content_hash, spans_hash = st.spans_hash,
         meta = st.meta, n_chars = st.n_chars, updated_at = now(), updated_by = p_agent,
         expires_at = case when st.tier = 'session' then v_session_expiry end
    from scsql.kb_staged_sources st
   where st.project_id = p_project and st.agent_id = p_agent and st.xact = p_xact and not st.unchanged
     and s.project_id = p_project and s.source_id = st.source_id;
  with ins as (
    insert into scsql.kb_sources (project_id, path, kind, trust, tier, content_hash, spans_hash, n_chars, meta,
                                  created_by, updated_by, expires_at)
    select p_project, st.path, st.kind, st.trust, st.tier, st.content_hash, st.spans_hash, st.n_chars, st.meta,
           p_agent, p_agent, case when st.tier = 'session' then v_session_expiry end
    from scsql.kb_staged_sources st
    where st.project_id = p_project and st.agent_id = p_agent and st.xact = p_xact and st.source_id is null
    order by st.ord
    returning kb_sources.source_id, kb_sources.path
  )
  update scsql.kb_staged_sources st set source_id = ins.source_id, unchanged = false
    from ins
   where st.project_id = p_project and st.agent_id = p_agent and st.xact = p_xact and st.path = ins.path;
  return v_old;
end
$$;
comment on function scsql._staged_replace(bigint, bigint, xid8) is
  'Private, for scsql.index_staged (caller holds the memory_state lock). Finds and locks the sources at the staged paths, marks the unchanged ones (text, kind, trust, tier, meta and spans as stored), unindexes the chunks of the changed ones and gives them the new attributes (the acting agent as last writer), creates the new ones in ord order, and records each staged text''s source_id. Returns the chunk hashes removed.';

create or replace function scsql._staged_store(p_project bigint, p_agent bigint, p_xact xid8)
returns text[]
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
-- Every join here is of whole batches: the planner, which cannot know how
-- many rows a CTE returns, must not loop over one for each row of another;
-- the sorts of a batch's postings fit in memory.
set enable_nestloop = off set work_mem = '128MB'
as $$
-- Caller holds the project's memory_state lock. As scsql._index_chunks,
-- for every changed staged text at once: terms (new ones numbered by the
-- first text that has them, then by term, as one call a text would number
-- them), chunks (in ord, seq order), postings (in term order) and the
-- statistics.
declare
  v_r record;
begin
  with tt as materialized (
    select st.source_id, st.ord, c.seq, u.term, u.tf, c.n_terms as dl, s.published
    from scsql.kb_staged_sources st
    join scsql.kb_sources s on s.project_id = p_project and s.source_id = st.source_id
    join scsql.kb_staged_chunks c
      on c.project_id = p_project and c.agent_id = p_agent and c.xact = p_xact and c.ord = st.ord
    cross join lateral unnest(c.terms, c.tfs) u(term, tf)
    where st.project_id = p_project and st.agent_id = p_agent and st.xact = p_xact and not st.unchanged
  ),
  up as (
    insert into scsql.kb_terms (project_id, term, df, max_tf, published_df, tier_min_dl)
    select p_project, tt.term, count(*), max(tt.tf), count(*) filter (where tt.published),
           min(tt.dl) filter (where tt.tf = 1 and tt.dl >= 32)
    from tt group by tt.term order by min(tt.ord), tt.term
    on conflict (project_id, term) do update
      set df = kb_terms.df + excluded.df, max_tf = greatest(kb_terms.max_tf, excluded.max_tf),
          published_df = kb_terms.published_df + excluded.published_df,
          tier_min_dl = least(kb_terms.tier_min_dl, excluded.tier_min_dl)
    returning kb_terms.term_id, kb_terms.term
  ),
  tp as materialized (  -- each posting with its term's id, for the chunks' term ids and the postings
    select tt.source_id, tt.seq, tt.tf, up.term_id from tt join up using (term)
  ),
  ids as (
    select tp.source_id, tp.seq, array_agg(tp.term_id order by tp.term_id) as ids
    from tp group by tp.source_id, tp.seq
  ),
  c as (
    insert into scsql.kb_chunks (project_id, source_id, seq, chunk_hash, anchor, line_start, line_end,
                                 char_start, char_end, content, n_terms, term_ids, published, context)
    select p_project, st.source_id, c.seq, c.chunk_hash, c.anchor, c.line_start, c.line_end,
           c.char_start, c.char_end, c.content, c.n_terms, coalesce(ids.ids, '{}'), s.published, c.context
    from scsql.kb_staged_sources st
    join scsql.kb_sources s on s.project_id = p_project and s.source_id = st.source_id
    join scsql.kb_staged_chunks c
      on c.project_id = p_project and c.agent_id = p_agent and c.xact = p_xact and c.ord = st.ord
    left join ids on ids.source_id = st.source_id and ids.seq = c.seq
    where st.project_id = p_project and st.agent_id = p_agent and st.xact = p_xact and not st.unchanged
    order by st.ord, c.seq
    returning kb_chunks.chunk_id, kb_chunks.source_id, kb_chunks.seq, kb_chunks.n_terms, kb_chunks.chunk_hash,
              kb_chunks.published
  ),
  po as (
    insert into scsql.kb_postings (project_id, term_id, chunk_id, tf, dl, published)
    select p_project, tp.term_id, c.chunk_id, tp.tf, c.n_terms, c.published
    from tp join c on c.source_id = tp.source_id and c.seq = tp.seq
    order by tp.term_id, c.chunk_id
  )
  select count(*) as n, coalesce(sum(c.n_terms), 0) as len,
         count(*) filter (where s.kind = 'file') as files,
         count(*) filter (where c.published) as pub_n, coalesce(sum(c.n_terms) filter (where c.published), 0) as pub_len,
         coalesce(array_agg(distinct c.chunk_hash), '{}') as hashes
    into v_r
  from c join scsql.kb_sources s on s.project_id = p_project and s.source_id = c.source_id;

  update scsql.memory_state
     set n_chunks = n_chunks + v_r.n, total_len = total_len + v_r.len, n_file_chunks = n_file_chunks + v_r.files,
         published_chunks = published_chunks + v_r.pub_n, published_len = published_len + v_r.pub_len,
         updated_at = now()
   where project_id = p_project;
  return v_r.hashes;
end
$$;
comment on function scsql._staged_store(bigint, bigint, xid8) is
  'Private, for scsql.index_staged (caller holds the memory_state lock). Stores the chunks of every changed staged text with their postings, document frequencies (whole and published; new terms numbered in the order one index_text call a text would number them) and the project''s BM25 statistics, set-based. Returns the stored chunk hashes.';

create or replace function scsql._staged_contexts(p_project bigint, p_agent bigint, p_xact xid8)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
-- As scsql._attach_context_sources after each text, in ord order: a
-- context the writer gave is looked up among the sources as they were when
-- index_text would have stored that text, so texts later in the batch do
-- not count.
declare
  v_chunk record;
  v_sources bigint[];
  v_hashes text[];
begin
  -- Files have no context: nothing to look for.
  if not exists (select from scsql.kb_staged_chunks c
                 where c.project_id = p_project and c.agent_id = p_agent and c.xact = p_xact
                   and c.context is not null) then
    return;
  end if;
  update scsql.kb_chunks c
     set context_sources = array[p.source_id], context_hashes = array[p.chunk_hash]
    from scsql.kb_staged_sources st, scsql.kb_chunks p
   where st.project_id = p_project and st.agent_id = p_agent and st.xact = p_xact and not st.unchanged
     and c.project_id = p_project and c.source_id = st.source_id and c.context is not null
     and p.project_id = p_project and p.source_id = st.source_id and p.seq = c.seq - 1
     and c.context = scsql._chunk_context('', false, p.anchor, p.content, c.anchor);
  for v_chunk in
    select c.chunk_id, c.context, c.source_id, st.ord
    from scsql.kb_staged_sources st
    join scsql.kb_chunks c on c.project_id = p_project and c.source_id = st.source_id
    where st.project_id = p_project and st.agent_id = p_agent and st.xact = p_xact and not st.unchanged
      and c.context is not null and c.context_hashes is null
    order by st.ord, c.seq
  loop
    select coalesce(pg_catalog.array_agg(h.source_id order by h.source_id, h.chunk_hash), '{}'),
           coalesce(pg_catalog.array_agg(h.chunk_hash order by h.source_id, h.chunk_hash), '{}')
      into v_sources, v_hashes
    from scsql._chunks_holding_lines(p_project, v_chunk.context, p_agent, v_chunk.source_id) h
    where not exists (select from scsql.kb_staged_sources l
                      where l.project_id = p_project and l.agent_id = p_agent and l.xact = p_xact
                        and l.source_id = h.source_id and l.ord > v_chunk.ord and not l.unchanged);
    update scsql.kb_chunks c set context_sources = v_sources, context_hashes = v_hashes
     where c.project_id = p_project and c.chunk_id = v_chunk.chunk_id;
  end loop;
end
$$;
comment on function scsql._staged_contexts(bigint, bigint, xid8) is
  'Private, for scsql.index_staged. Records where the context of each conversation chunk of the changed staged texts came from, as scsql._attach_context_sources does after each text: the chunk before it, for a context made from it; for a context the writer gave, the chunks holding one of its lines in the other sources the agent created and last wrote, leaving out the texts staged after it (index_text would not have stored them yet).';

create or replace function scsql.index_staged()
returns table (ord bigint, path text, kind text, trust text, chunks integer, unchanged boolean, content_hash text)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_project bigint := scsql._my_project();
  v_agent bigint := scsql._my_agent_id();
  v_xact xid8 := pg_catalog.pg_current_xact_id();
  v_old text[];
  v_new text[];
begin
  perform scsql._bulk_path_available();
  perform scsql._memory_state_lock(v_project);
  -- Texts an earlier transaction of the agent staged and never indexed.
  delete from scsql.kb_staged_chunks c where c.project_id = v_project and c.agent_id = v_agent and c.xact <> v_xact;
  delete from scsql.kb_staged_sources s where s.project_id = v_project and s.agent_id = v_agent and s.xact <> v_xact;
  v_old := scsql._staged_replace(v_project, v_agent, v_xact);
  v_new := scsql._staged_store(v_project, v_agent, v_xact);
  update scsql.kb_sources s
     set n_chunks = (select count(*) from scsql.kb_staged_chunks c
                     where c.project_id = v_project and c.agent_id = v_agent and c.xact = v_xact and c.ord = st.ord)
    from scsql.kb_staged_sources st
   where st.project_id = v_project and st.agent_id = v_agent and st.xact = v_xact and not st.unchanged
     and s.project_id = v_project and s.source_id = st.source_id;
  perform scsql._staged_contexts(v_project, v_agent, v_xact);
  perform scsql._gc_hashes(v_project, v_old);
  perform scsql._enqueue_embeddings(v_project, v_new);
  -- Dated (unchanged texts too, as index_text dates them), then the memory
  -- history: one row per text added or changed, in ord order.
  update scsql.kb_sources s set occurred_at = st.occurred_at
    from scsql.kb_staged_sources st
   where st.project_id = v_project and st.agent_id = v_agent and st.xact = v_xact and st.occurred_at is not null
     and s.project_id = v_project and s.source_id = st.source_id and s.occurred_at is distinct from st.occurred_at;
  perform scsql._memory_index_change(v_project, st.path, st.content_hash, st.kind)
  from scsql.kb_staged_sources st
  where st.project_id = v_project and st.agent_id = v_agent and st.xact = v_xact and not st.unchanged
  order by st.ord;
  return query
    select st.ord, st.path, st.kind, st.trust, s.n_chunks, st.unchanged, st.content_hash
    from scsql.kb_staged_sources st join scsql.kb_sources s on s.project_id = v_project and s.source_id = st.source_id
    where st.project_id = v_project and st.agent_id = v_agent and st.xact = v_xact
    order by st.ord;
  delete from scsql.kb_staged_chunks c where c.project_id = v_project and c.agent_id = v_agent and c.xact = v_xact;
  delete from scsql.kb_staged_sources s where s.project_id = v_project and s.agent_id = v_agent and s.xact = v_xact;
end
$$;
comment on function scsql.index_staged() is
  'Indexes every text the acting agent staged in this transaction (rows inserted or copied into scsql.kb_staging), set-based, as index_text called once per text in ord order would: the same sources, chunks, terms, postings, document frequencies, BM25 statistics, redaction, embedding queue and memory history (one index row per text added or changed). Returns ord, path (as stored), kind, trust, chunks, unchanged, content_hash per text, in ord order. The texts were checked as they were staged (an error there names the row and, like any error, leaves nothing of the batch once the transaction rolls back); a batch holds each path once. One difference from separate calls: a vector of chunk text that leaves one staged text and comes back in another is kept, not dropped and queued again. Texts staged by an earlier transaction that did not call it are discarded. Raises SC372 on Citus, where the bulk path does not run (index_text each text there).';
