-- scsql memory: embeddings. The worker's claim and store, the model of a
-- project, retention and the memory status. Definitions: sql/20_text.sql.

-- ---------------------------------------------------------------------------
-- Embeddings: queue, storage, model changes, retention
-- ---------------------------------------------------------------------------

create or replace function scsql._embed_input(p_project bigint, p_chunk_hash text)
returns text
language sql stable
as $$
  -- The text embedded: the chunk, with its anchor (heading or symbol) above
  -- it when its opening lines do not show it already, so a section cut in
  -- pieces keeps its context; a conversation chunk's context (the end of
  -- what came before it, sql/20_text.sql) below it, so a model that cuts
  -- long inputs drops context before the chunk's own text.
  select concat_ws(E'\n\n',
           case when c.anchor is null or strpos(left(c.content, 400), c.anchor) > 0 then c.content
                else c.anchor || E'\n' || c.content end,
           c.context)
  from scsql.kb_chunks c
  where c.project_id = p_project and c.chunk_hash = p_chunk_hash
  order by c.chunk_id
  limit 1
$$;
comment on function scsql._embed_input(bigint, text) is
  'Private. The text a worker embeds for a chunk hash of a project: the first chunk with that text, preceded by its anchor when its first 400 characters do not contain it, and followed by its context when it is a conversation chunk (kb_chunks.context). NULL when no chunk of the project has that text.';

create or replace function scsql._notify_embed(p_project bigint)
returns void
language plpgsql volatile
as $$
begin
  -- PL/pgSQL: _channel is defined by sql/30_queue.sql, after this file.
  perform pg_catalog.pg_notify(scsql._channel(p_project, 'embed'), 'embed');
end
$$;
comment on function scsql._notify_embed(bigint) is
  'Private. Wakes the embedding workers of a project: NOTIFY its embed channel (scsql_caller.my_channel(''embed''), a name derived from the project''s secret channel key) with the fixed hint "embed". Neither the channel nor the hint says which project, or that a project, is indexing, and no agent of another project can wake its workers.';

create or replace function scsql.embed_claim(p_model text, p_limit integer default 32, p_lease_seconds integer default 600)
returns table (chunk_hash text, content text, claim_token uuid, lease_expires_at timestamptz)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_me scsql.agents := scsql._me();
  v_model smallint;
  v_token uuid := pg_catalog.gen_random_uuid();
  v_until timestamptz;
  v_hashes text[];
  v_take text[];
  v_live text[];
  v_gone bigint;
begin
  perform scsql._check_text('model', p_model, 200, false);
  perform scsql._require(p_limit between 1 and 1000, 'limit must be 1 to 1000');
  perform scsql._require(p_lease_seconds between 10 and 3600, 'lease must be 10 to 3,600 seconds');
  select model_id into v_model from scsql.embed_models where name = p_model;
  if not found then
    return;  -- nothing is ever queued for a model no project uses
  end if;
  v_until := clock_timestamp() + make_interval(secs => p_lease_seconds);
  -- The oldest claimable rows; those whose text is gone (forgotten
  -- meanwhile) are dropped, and more are taken in their place. Only the
  -- rows looked at are checked: a claim costs the same with a million
  -- queued (after a bulk index) as with ten.
  v_hashes := '{}';
  loop
    select array_agg(p.chunk_hash) into v_take
    from (select q.chunk_hash from scsql.kb_embed_queue q
          where q.project_id = v_me.project_id and q.model_id = v_model
            and (q.claim_expires_at is null or q.claim_expires_at <= clock_timestamp())
            and q.chunk_hash <> all(v_hashes)
          order by q.enqueued_at, q.chunk_hash
          limit p_limit - cardinality(v_hashes)
          for update skip locked) p;
    exit when v_take is null;
    with gone as (
      delete from scsql.kb_embed_queue q
      where q.project_id = v_me.project_id and q.model_id = v_model and q.chunk_hash = any(v_take)
        and not exists (select from scsql.kb_chunks c where c.project_id = v_me.project_id and c.chunk_hash = q.chunk_hash)
      returning q.chunk_hash)
    select coalesce(array_agg(t.h) filter (where g.chunk_hash is null), '{}'), count(g.chunk_hash)
      into v_live, v_gone
    from unnest(v_take) t(h) left join gone g on g.chunk_hash = t.h;
    v_hashes := v_hashes || v_live;
    exit when v_gone = 0 or cardinality(v_hashes) >= p_limit;
  end loop;
  with claimed as (
    update scsql.kb_embed_queue q
    set claimed_by = v_me.agent_id, claim_token = v_token, claim_expires_at = v_until
    where q.project_id = v_me.project_id and q.model_id = v_model and q.chunk_hash = any(v_hashes)
    returning q.chunk_hash)
  select array_agg(c.chunk_hash) into v_hashes from claimed c;
  -- The texts are read apart from the UPDATE (on Citus, _embed_input then
  -- runs here, not inside the statement on the project's shard).
  return query
  select c.chunk_hash, scsql._embed_input(v_me.project_id, c.chunk_hash), v_token, v_until
  from unnest(v_hashes) c(chunk_hash)
  order by c.chunk_hash;
end
$$;
comment on function scsql.embed_claim(text, integer, integer) is
  'Background work of scsql worker and the MCP server (not an MCP tool). Claims up to LIMIT (1..1000, default 32) chunk hashes of the acting agent''s project queued for an embedding with MODEL and not under another live claim (concurrent workers take different ones: SKIP LOCKED), for LEASE_SECONDS (10..3600, default 600). Returns each with the text to embed (the chunk text, preceded by its anchor when its opening does not show it), the claim''s token and when the lease ends: embed them with MODEL and pass the token to embed_store before then. Returns nothing for a model no project uses. Raises SC010 for a bad limit or lease, SC200/SC201 for a bad model name.';

create or replace function scsql.embed_store(p_model text, p_claim_token uuid, p_hashes text[], p_embeddings vector[])
returns integer
language plpgsql security definer set search_path = pg_catalog, scsql, public, pg_temp
as $$
declare
  v_me scsql.agents := scsql._me();
  v_model scsql.embed_models;
  v_bad record;
  v_n integer;
begin
  perform scsql._check_text('model', p_model, 200, false);
  select * into v_model from scsql.embed_models where name = p_model;
  if not found then
    raise exception using errcode = 'SC207', message = format('unknown embedding model %L', p_model),
      hint = 'An administrator registers a model with set_embedding_model.';
  end if;
  perform scsql._require(p_claim_token is not null, 'claim_token is required: embed_claim hands it out');
  perform scsql._require(coalesce(array_length(p_hashes, 1), 0) between 1 and 1000, 'give 1 to 1,000 chunk hashes');
  if coalesce(array_length(p_hashes, 1), 0) <> coalesce(array_length(p_embeddings, 1), 0) then
    raise exception using errcode = 'SC207', message = 'one embedding per chunk hash is needed';
  end if;
  perform scsql._require(not exists (select from unnest(p_hashes) h where h is null or h !~ '^[0-9a-f]{64}$'),
                         'every chunk hash must be 64 lower-case hex digits');
  perform scsql._require((select count(distinct h) from unnest(p_hashes) h) = array_length(p_hashes, 1),
                         'each chunk hash may be given once');
  -- pgvector's input already refuses NaN and infinite components; a zero
  -- vector has no direction for cosine distance.
  if exists (select from unnest(p_embeddings) e
             where e is null or vector_dims(e) <> v_model.dims or not (vector_norm(e) > 0)) then
    raise exception using errcode = 'SC207',
      message = format('every embedding of model %s must have %s finite dimensions, not all zero', p_model, v_model.dims);
  end if;
  -- Every hash that is still chunk text of the project needs the caller's
  -- live claim, with this token, for this model. The queue rows are locked
  -- first, so a claim cannot move to another worker while this one stores.
  perform from scsql.kb_embed_queue q
  where q.project_id = v_me.project_id and q.model_id = v_model.model_id and q.chunk_hash = any(p_hashes)
  order by q.chunk_hash
  for update;
  select h, q.claimed_by, q.claim_token, q.claim_expires_at, q.chunk_hash is not null as queued into v_bad
  from unnest(p_hashes) h
  left join scsql.kb_embed_queue q
    on q.project_id = v_me.project_id and q.model_id = v_model.model_id and q.chunk_hash = h
  where exists (select from scsql.kb_chunks c where c.project_id = v_me.project_id and c.chunk_hash = h)
    and not (q.claimed_by is not distinct from v_me.agent_id and q.claim_token is not distinct from p_claim_token
             and q.claim_expires_at > clock_timestamp())
  order by h
  limit 1;
  if found then
    if v_bad.claimed_by = v_me.agent_id and v_bad.claim_token = p_claim_token then
      raise exception using errcode = 'SC226',
        message = format('the claim on chunk %s (model %s) expired at %s; nothing was stored',
                         v_bad.h, p_model, v_bad.claim_expires_at),
        hint = 'Claim again with embed_claim (a longer lease, or fewer chunks) and store before the lease ends.';
    end if;
    raise exception using errcode = 'SC225',
      message = format('agent "%s" holds no claim on chunk %s for model %s%s; nothing was stored', v_me.name, v_bad.h, p_model,
                       case when not v_bad.queued then ' (it is not waiting for an embedding)'
                            when v_bad.claimed_by is null then ' (nobody claimed it)'
                            when v_bad.claimed_by <> v_me.agent_id then ' (another agent claimed it)'
                            else ' (it was claimed with another token)' end),
      hint = 'Embeddings are stored only for chunks claimed with embed_claim, with its token, before the lease ends.';
  end if;
  insert into scsql.kb_embeddings (project_id, model_id, chunk_hash, embedding, stored_by, created_at)
  select v_me.project_id, v_model.model_id, u.h, u.e, v_me.agent_id, now()
  from unnest(p_hashes, p_embeddings) u(h, e)
  where exists (select from scsql.kb_chunks c where c.project_id = v_me.project_id and c.chunk_hash = u.h)
  order by u.h
  on conflict (project_id, model_id, chunk_hash)
  do update set embedding = excluded.embedding, stored_by = excluded.stored_by, created_at = excluded.created_at;
  get diagnostics v_n = row_count;
  delete from scsql.kb_embed_queue q
  where q.project_id = v_me.project_id and q.model_id = v_model.model_id and q.chunk_hash = any(p_hashes)
    and q.claimed_by = v_me.agent_id and q.claim_token = p_claim_token;
  return v_n;
end
$$;
comment on function scsql.embed_store(text, uuid, text[], vector[]) is
  'Background work of scsql worker and the MCP server (not an MCP tool). Stores the embeddings (vectors of MODEL''s dimension, finite, not all zero) of chunk hashes the acting agent claimed with embed_claim, presenting the claim''s token before its lease ends; records the agent (stored_by) and the time, and takes the hashes off the queue. A hash whose text is no longer a chunk of the project is skipped. Returns how many were stored. All or nothing: raises SC225 when any hash is not under the caller''s claim with this token and model (never claimed, claimed by another agent, or not waiting for an embedding), SC226 when the claim''s lease expired, SC207 for an unknown model, a wrong dimension or a zero vector, SC010 for a missing token, a malformed or repeated hash, or more than 1,000.';

create or replace function scsql.embedding_sample(p_n integer default 100)
returns table (project text, model text, chunk_hash text, content text, embedding vector,
               stored_by text, stored_at timestamptz)
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
begin
  perform scsql._require(p_n between 1 and 100000, 'sample size must be 1 to 100,000');
  return query
  select p.name, m.name, e.chunk_hash, scsql._embed_input(e.project_id, e.chunk_hash), e.embedding,
         coalesce(a.name, e.stored_by::text), e.created_at
  from (select * from scsql.kb_embeddings order by random() limit p_n) e
  join scsql.projects p on p.project_id = e.project_id
  join scsql.embed_models m on m.model_id = e.model_id
  left join scsql.agents a on a.agent_id = e.stored_by
  order by p.name, m.name, e.chunk_hash;
end
$$;
comment on function scsql.embedding_sample(integer) is
  'The auditor''s. N (1..100,000, default 100) stored embeddings chosen at random, each with its project, model, chunk_hash, the text a worker embeds for it (content; NULL when no chunk has that text any more), the vector, the agent that stored it (stored_by; NULL before scsql recorded it) and when. scsql verify --embeddings re-embeds the texts with the same model and names the agent of every vector that does not follow from its text. Raises SC010 for a bad N.';

create or replace function scsql.set_embedding_model(p_project text, p_model text, p_dims integer)
returns integer
language plpgsql security definer set search_path = pg_catalog, scsql, public, pg_temp
as $$
declare
  v_project bigint;
  v_model scsql.embed_models;
  v_n integer;
begin
  v_project := scsql._project_id(p_project);
  perform scsql._check_text('model', p_model, 200, false);
  if p_dims is null or p_dims not between 1 and 2000 then
    raise exception using errcode = 'SC207', message = format('dimensions must be 1 to 2,000, got %s', p_dims);
  end if;
  select * into v_model from scsql.embed_models where name = p_model;
  if not found then
    insert into scsql.embed_models (name, dims) values (p_model, p_dims) returning * into v_model;
    execute format('create index if not exists %I on scsql.kb_embeddings using hnsw ((embedding::vector(%s)) vector_cosine_ops) where model_id = %s',
                   'kb_embeddings_hnsw_' || v_model.model_id, v_model.dims, v_model.model_id);
  elsif v_model.dims <> p_dims then
    raise exception using errcode = 'SC207',
      message = format('model %s is registered with %s dimensions, not %s', p_model, v_model.dims, p_dims);
  end if;
  perform scsql._memory_state_lock(v_project);
  update scsql.memory_state set embed_model_id = v_model.model_id, updated_at = now() where project_id = v_project;
  insert into scsql.kb_embed_queue (project_id, model_id, chunk_hash)
  select distinct v_project, v_model.model_id, c.chunk_hash
  from scsql.kb_chunks c
  where c.project_id = v_project
    and not exists (select from scsql.kb_embeddings e
                    where e.project_id = v_project and e.model_id = v_model.model_id and e.chunk_hash = c.chunk_hash)
  on conflict do nothing;
  get diagnostics v_n = row_count;
  if v_n > 0 then
    perform scsql._notify_embed(v_project);
  end if;
  return v_n;
end
$$;
comment on function scsql.set_embedding_model(text, text, integer) is
  'Administrators only. Makes MODEL (with DIMS dimensions; registered, with its own HNSW index, on first use) the embedding model of PROJECT: new chunks are queued for it and every existing chunk text is queued for re-embedding by scsql worker. Search keeps working meanwhile: vectors are kept per model, a query embedded with the new model finds the chunks embedded so far, and BM25 finds the rest. Returns how many chunk texts were queued. Raises SC005 unknown project, SC207 dimension conflict.';

create or replace function scsql.purge_expired()
returns integer
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_project bigint := scsql._my_project();
  v_ttl interval := (scsql._memory_settings(v_project)).external_ttl;
  v_ids bigint[];
  v_n integer;
  v_keys text[];
  v_paths text[];
  v_hashes text[];
  v_reasons text[];
begin
  -- At most 500 sources a call (the worker calls again while there is
  -- work): those whose retention ended, and external sources not indexed
  -- again within the project's external_ttl; never a pinned one.
  select array_agg(x.source_id) into v_ids
  from (select s.source_id from scsql.kb_sources s
        where s.project_id = v_project and s.expires_at is not null and s.expires_at <= now()
          and not s.pinned and s.tier <> 'pinned'
        union
        select s.source_id from scsql.kb_sources s
        where s.project_id = v_project and s.trust = 'external' and not s.pinned and s.tier <> 'pinned'
          and s.updated_at <= now() - v_ttl
        order by 1
        limit 500) x;
  -- Memory history (sql/26_history.sql): one row per source purged.
  -- The rows are read first, then recorded (on Citus a write from inside a
  -- query on a shard is refused).
  select array_agg(s.path order by s.source_id), array_agg(s.content_hash order by s.source_id),
         array_agg(case when s.expires_at is not null and s.expires_at <= now() then format('retention ended %s', s.expires_at)
                        else format('external source not indexed again within %s', v_ttl) end order by s.source_id)
    into v_paths, v_hashes, v_reasons
  from scsql.kb_sources s where s.project_id = v_project and s.source_id = any(v_ids);
  perform scsql._memory_change(v_project, 'purge', 'source', r.path, null, r.content_hash, null, r.reason, null)
  from unnest(v_paths, v_hashes, v_reasons) with ordinality r(path, content_hash, reason, n)
  order by r.n;
  v_n := scsql._forget_sources(v_project, v_ids);
  -- Facts whose TTL ended (remember's p_ttl) leave working memory; they
  -- are not archived.
  if exists (select from scsql.memory_facts f where f.project_id = v_project and f.expires_at <= now()) then
    perform scsql._facts_lock(v_project);
    -- Memory history (sql/26_history.sql): one row per fact purged (the
    -- facts lock keeps the set the same until the delete).
    select array_agg(f.key order by f.key), array_agg(scsql._text_hash(f.value) order by f.key),
           array_agg(format('TTL ended %s', f.expires_at) order by f.key)
      into v_paths, v_hashes, v_reasons
    from scsql.memory_facts f where f.project_id = v_project and f.expires_at <= now();
    perform scsql._memory_change(v_project, 'purge', 'fact', r.key, null, r.value_hash, null, r.reason, null)
    from unnest(v_paths, v_hashes, v_reasons) with ordinality r(key, value_hash, reason, n)
    order by r.n;
    with gone as (
      delete from scsql.memory_facts f
      where f.project_id = v_project and f.expires_at <= now()
      returning f.key)
    select array_agg(g.key) into v_keys from gone g;
    v_n := v_n + coalesce(cardinality(v_keys), 0);
  end if;
  return v_n;
end
$$;
comment on function scsql.purge_expired() is
  'Background work of scsql worker (not an MCP tool). Deletes what expired in the acting agent''s project: sources whose retention ended (session summaries after 365 days), external sources not indexed again within the project''s external_ttl (14 days by default, scsql.set_memory_lifecycle), never a pinned source (scsql.pin, or tier pinned); at most 500 sources a call; and working-memory facts whose TTL ended (remember''s p_ttl). Each source and fact purged is a row of the memory history (op purge, with the reason: retention ended, not indexed again within external_ttl, TTL ended), attributed to the agent the worker runs as. Returns how many sources and facts were deleted.';

create or replace function scsql.memory_status()
returns table (facts integer, capacity integer, sources integer, chunks bigint, file_chunks bigint,
               terms bigint, embedding_model text, embedded bigint, pending_embeddings bigint)
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  with p as (select scsql._my_project() as id),
  st as (select s.* from scsql.memory_state s, p where s.project_id = p.id),
  m as (select coalesce((select embed_model_id from st), 1::smallint) as model_id)
  select (select count(*) from scsql.memory_facts f, p where f.project_id = p.id)::integer,
         scsql._memory_capacity((select id from p)),
         (select count(*) from scsql.kb_sources s, p where s.project_id = p.id)::integer,
         coalesce((select n_chunks from st), 0),
         coalesce((select n_file_chunks from st), 0),
         (select count(*) from scsql.kb_terms t, p where t.project_id = p.id and t.df > 0),
         (select em.name from scsql.embed_models em, m where em.model_id = m.model_id),
         (select count(*) from scsql.kb_embeddings e, p, m where e.project_id = p.id and e.model_id = m.model_id),
         (select count(*) from scsql.kb_embed_queue q, p, m where q.project_id = p.id and q.model_id = m.model_id)
$$;
comment on function scsql.memory_status() is
  'Your project''s memory at a glance: facts and capacity, sources, chunks, embedding model and queue.

Also file chunks (the project''s size) and the BM25 vocabulary size; the queue is of chunk texts embedded with the active model and still queued.';
