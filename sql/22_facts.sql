-- scsql memory: working-memory facts (remember, forget), their capacity and
-- their archive in the knowledge base. Definitions: sql/20_text.sql.

-- ---------------------------------------------------------------------------
-- Public API: working memory
-- ---------------------------------------------------------------------------

create or replace function scsql._memory_capacity(p_project bigint)
returns integer
language sql
stable
security definer
set search_path = pg_catalog, scsql, pg_temp
as $$
  select 100 + least(150, coalesce((select s.n_file_chunks from scsql.memory_state s where s.project_id = p_project), 0) / 100)::integer
$$;
comment on function scsql._memory_capacity(bigint) is
  'Private. Working-memory capacity of a project: 100 facts, plus one per 100 indexed file chunks (the project''s size), up to 250 (reached at 15,000 file chunks).';

create or replace function scsql._facts_lock(p_project bigint)
returns void
language sql
as $$ select scsql._project_lock(p_project, 'memory_facts', false) $$;
comment on function scsql._facts_lock(bigint) is
  'Private. Serializes changes to one project''s working memory (its memory_facts row of scsql.project_locks, locked until commit; no other project waits on it), so concurrent remembers never exceed capacity nor lose a fact.';

create or replace function scsql._archive_fact(p_project bigint, p_fact scsql.memory_facts)
returns void
language plpgsql
security definer
set search_path = pg_catalog, scsql, pg_temp
as $$
begin
  perform scsql._index_source(p_project, 'fact:' || p_fact.key, p_fact.key || E'\n' || p_fact.value,
    'archived_fact', 'internal', 'standard', null,
    jsonb_build_object('key', p_fact.key, 'importance', p_fact.importance, 'created_at', p_fact.created_at,
                       'updated_at', p_fact.updated_at, 'archived_at', clock_timestamp()),
    null);
  delete from scsql.memory_facts f where f.project_id = p_project and f.key = p_fact.key;
end
$$;
comment on function scsql._archive_fact(bigint, scsql.memory_facts) is
  'Private. Moves a fact from working memory to the knowledge base as the archived_fact source fact:<key> (searchable, with its importance and times in meta).';

create or replace function scsql.remember(p_key text, p_value text, p_importance integer default 3,
                                          p_ttl interval default null)
returns table (key text, importance integer, stored text, archived text[], facts integer, capacity integer)
language plpgsql
security definer
set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_project bigint := scsql._my_project();
  v_agent bigint := scsql._my_agent_id();
  v_cap integer;
  v_count integer;
  v_fact scsql.memory_facts;
  v_archived text[] := '{}';
  v_old bigint;
  v_key text;
  v_value text;
  v_schema text; v_table text; v_constraint text; v_column text; v_state text; v_message text;
begin
  perform scsql._check_text('key', p_key, 200, false);
  perform scsql._check_text('value', p_value, 4000, true);
  if scsql._holds_private_key(p_value) then
    raise exception using errcode = 'SC215', message = format('the value of %s holds a PEM private key block; nothing was stored', scsql._redact(p_key)),
      hint = 'Private keys never belong in working memory, which every agent of the project reads.';
  end if;
  -- Stored redacted (sql/05_redaction.sql), key and value alike; checked
  -- again, as a marker may be longer than the secret it replaces.
  v_key := scsql._redact(p_key);
  v_value := scsql._redact(p_value);
  perform scsql._check_text('key', v_key, 200, false);
  perform scsql._check_text('value', v_value, 4000, true);
  perform scsql._facts_lock(v_project);

  -- importance is checked by the table's constraint. It is a smallint:
  -- clamped to its range, a value out of it stays out of 1..5, so the
  -- constraint, not the cast, refuses it.
  begin
    insert into scsql.memory_facts as f (project_id, key, value, importance, created_at, updated_at, created_by, updated_by)
    values (v_project, v_key, v_value,
            case when p_importance < -32768 then -32768 when p_importance > 32767 then 32767 else p_importance end,
            clock_timestamp(), clock_timestamp(), v_agent, v_agent)
    on conflict on constraint memory_facts_pkey do update
      set value = excluded.value, importance = excluded.importance,
          updated_at = excluded.updated_at, updated_by = excluded.updated_by;
  exception when check_violation or not_null_violation then
    get stacked diagnostics v_state = returned_sqlstate, v_schema = schema_name, v_table = table_name,
      v_constraint = constraint_name, v_column = column_name, v_message = message_text;
    perform scsql._raise_violation(v_state, v_schema, v_table, v_constraint, v_column, v_message);
  end;

  -- memlife: the fact's TTL (sql/22_lifecycle.sql). A remember without
  -- one clears it; nothing is written when there is none either way.
  if p_ttl is not null and not (p_ttl > interval '0' and p_ttl <= interval '3650 days') then
    raise exception using errcode = 'SC241', message = format('ttl must be a positive interval of at most 3650 days, got %s', p_ttl),
      hint = 'Omit ttl for a fact that does not expire.';
  end if;
  update scsql.memory_facts f set expires_at = clock_timestamp() + p_ttl
  where f.project_id = v_project and f.key = v_key and (p_ttl is not null or f.expires_at is not null);
  -- end memlife

  -- A fresh value supersedes an archived copy of the same key.
  select s.source_id into v_old from scsql.kb_sources s
  where s.project_id = v_project and s.path = 'fact:' || v_key and s.kind = 'archived_fact';
  if found then
    perform scsql._forget_sources(v_project, array[v_old]);
  end if;

  v_cap := scsql._memory_capacity(v_project);
  select count(*) into v_count from scsql.memory_facts f where f.project_id = v_project;
  if v_count > v_cap then
    for v_fact in
      select * from scsql.memory_facts f where f.project_id = v_project
      order by f.importance, f.updated_at, f.key
      limit v_count - v_cap
    loop
      perform scsql._archive_fact(v_project, v_fact);
      v_archived := v_archived || v_fact.key;
    end loop;
    v_count := v_cap;
  end if;

  return query select v_key, p_importance,
    case when v_key = any(v_archived) then 'archived' else 'memory' end,
    v_archived, v_count, v_cap;
end
$$;
comment on function scsql.remember(text, text, integer, interval) is
  'Stores a fact in your project''s working memory, or updates the fact with that key. When memory is full the least important, oldest facts move to the archive (still searchable). Returns key, importance, stored, archived, facts, capacity.

p_key: the fact''s name, one line
p_value: the fact
p_importance (1..5): 5 is kept longest
p_ttl: how long the fact lives (e.g. 7 days); omit to keep it

Stores a fact in the acting agent''s project working memory, or updates the fact with that key: key (1-200 characters, one line), value (1-4,000 characters), importance 1-5 (default 3). Working memory holds 100 facts, plus one per 100 indexed file chunks, up to 250; when it is full the lowest-importance, least recently updated facts move to the knowledge base as archived facts (still found by search; never dropped), so an importance-5 fact is archived only when no lower-importance fact is left. Key and value are stored redacted (each secret replaced by [REDACTED:<kind>], see scsql.redact), so the fact is readable by every agent of the project without its secrets. Returns key (as stored), importance, stored (memory, or archived when this fact itself was the one to go), archived (keys moved out), facts (now in memory), capacity. With TTL (an interval, up to 3,650 days) the fact expires that long after this remember: recall_context and pack no longer return it and the worker deletes it (scsql.purge_expired); remembering the key again without TTL keeps it for good. Raises SC200 too long, SC201 empty or control characters, SC202 importance out of range, SC215 a value holding a PEM private key block, SC241 a TTL that is not positive or over 3,650 days.';

create or replace function scsql.forget(p_key text)
returns boolean
language plpgsql
security definer
set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_project bigint := scsql._my_project();
  v_key text := scsql._redact(p_key);
  v_found boolean;
  v_old bigint;
begin
  perform scsql._check_text('key', p_key, 200, false);
  perform scsql._facts_lock(v_project);
  -- Keys are stored redacted: a key given as it was remembered finds it.
  delete from scsql.memory_facts f where f.project_id = v_project and f.key in (p_key, v_key);
  v_found := found;
  select s.source_id into v_old from scsql.kb_sources s
  where s.project_id = v_project and s.path = 'fact:' || v_key and s.kind = 'archived_fact';
  if found then
    perform scsql._forget_sources(v_project, array[v_old]);
    v_found := true;
  end if;
  return v_found;
end
$$;
comment on function scsql.forget(text) is
  'Forgets the fact with this key, in working memory and archive. Returns true when it existed.

p_key: the fact''s key

Forgets the fact KEY of the acting agent''s project, in working memory and in the archive (KEY as given to remember, or as stored, redacted). Returns true when there was such a fact, false otherwise (so a second forget returns false). Raises SC200/SC201 for a bad key.';

