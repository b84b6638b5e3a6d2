-- scsql memory: working-memory facts (remember, forget), their capacity and
-- their archive in the knowledge base. Definitions: sql/20_text.sql.

-- ---------------------------------------------------------------------------
-- Public API: working memory
-- ---------------------------------------------------------------------------

create or replace function scsql._memory_capacity_of(p_file_chunks bigint)
returns integer
language sql immutable
as $$ select 100 + least(150, coalesce(p_file_chunks, 0) / 100)::integer $$;
comment on function scsql._memory_capacity_of(bigint) is
  'Private. Working-memory capacity of a project of FILE_CHUNKS indexed file chunks (NULL: none): 100 facts, plus one per 100 file chunks (the project''s size), up to 250 (reached at 15,000 file chunks). One expression, which the planner inlines.';

create or replace function scsql._memory_capacity(p_project bigint)
returns integer
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  select scsql._memory_capacity_of((select s.n_file_chunks from scsql.memory_state s where s.project_id = p_project))
$$;
comment on function scsql._memory_capacity(bigint) is
  'Private. Working-memory capacity of a project (scsql._memory_capacity_of its indexed file chunks).';

create or replace function scsql._facts_lock(p_project bigint)
returns void
language sql
as $$ select scsql._project_lock(p_project, 'memory_facts', false) $$;
comment on function scsql._facts_lock(bigint) is
  'Private. Serializes changes to one project''s working memory (its memory_facts row of scsql.project_locks, locked until commit; no other project waits on it), so concurrent remembers never exceed capacity nor lose a fact.';

create or replace function scsql._archive_fact(p_project bigint, p_fact scsql.memory_facts)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
begin
  perform scsql._index_source(p_project, 'fact:' || p_fact.key, p_fact.key || E'\n' || p_fact.value,
    'archived_fact', 'internal', 'standard', null,
    jsonb_build_object('key', p_fact.key, 'importance', p_fact.importance, 'created_at', p_fact.created_at,
                       'updated_at', p_fact.updated_at, 'archived_at', clock_timestamp()),
    null);
  delete from scsql.memory_facts f where f.project_id = p_project and f.key = p_fact.key;
  perform scsql._memory_change(p_project, 'archive', 'fact', p_fact.key, null, scsql._text_hash(p_fact.value), null,
                               'working memory was full', 'fact:' || p_fact.key);
end
$$;
comment on function scsql._archive_fact(bigint, scsql.memory_facts) is
  'Private. Moves a fact from working memory to the knowledge base as the archived_fact source fact:<key> (searchable, with its importance and times in meta).';

create or replace function scsql._fact_as_stored(p_project bigint, p_agent bigint, p_key text, p_value text,
                                                 p_importance integer, p_ttl interval)
returns table (key text, value text, importance smallint)
language plpgsql
as $$
declare
  v_key text;
  v_value text;
  v_importance smallint;
  v_err scsql.violation;
begin
  perform scsql._check_text('key', p_key, 200, false);
  perform scsql._check_text('value', p_value, 4000, true);
  if p_ttl is not null and not (p_ttl > interval '0' and p_ttl <= interval '3650 days') then
    raise exception using errcode = 'SC241', message = format('ttl must be a positive interval of at most 3650 days, got %s', p_ttl),
      hint = 'Omit ttl for a fact that does not expire.';
  end if;
  if scsql._holds_private_key(p_value) then
    raise exception using errcode = 'SC215', message = format('the value of %s holds a PEM private key block; nothing was stored', scsql._redact(p_key)),
      hint = 'Private keys never belong in working memory, which every agent of the project reads.';
  end if;
  -- Stored redacted (sql/05_redaction.sql), key and value alike; checked
  -- again, as a marker may be longer than the secret it replaces.
  v_key := scsql._redact(p_key);
  v_value := scsql._redact(p_value);
  perform scsql._check_text('key, once redacted,', v_key, 200, false);
  perform scsql._check_text('value, once redacted,', v_value, 4000, true);
  -- importance is checked by the table's constraint. It is a smallint:
  -- clamped to its range, a value out of it stays out of 1..5, so the
  -- constraint, not the cast, refuses it.
  v_importance := case when p_importance < -32768 then -32768 when p_importance > 32767 then 32767 else p_importance end;
  if v_importance is null or v_importance not between 1 and 5 then
    begin
      insert into scsql.memory_facts as f (project_id, key, value, importance, created_by, updated_by)
      values (p_project, v_key, v_value, v_importance, p_agent, p_agent);
    exception when check_violation or not_null_violation then
      get stacked diagnostics v_err.returned_sqlstate = returned_sqlstate, v_err.schema_name = schema_name,
        v_err.table_name = table_name, v_err.constraint_name = constraint_name, v_err.column_name = column_name, v_err.message_text = message_text;
      perform scsql._raise_violation(v_err);
    end;
  end if;
  return query select v_key, v_value, v_importance;
end
$$;
comment on function scsql._fact_as_stored(bigint, bigint, text, text, integer, interval) is
  'Private, for scsql.remember. The key and value of a fact as they are stored, redacted, and its importance as a smallint, once KEY, VALUE, IMPORTANCE and TTL are checked. Raises SC200, SC201, SC202 (through the table''s constraint), SC215, SC241.';

create or replace function scsql._duplicate_fact(p_project bigint, p_kt text[], p_vt text[])
returns scsql.memory_facts
language plpgsql
as $$
declare
  v_cands text[];
  v_fact scsql.memory_facts;
begin
  -- The candidates are a value (on Citus, the query runs on the project's
  -- node, where the lookup of candidates could not).
  v_cands := scsql._fact_candidates(p_project, p_kt, p_vt, 'duplicate');
  select * into v_fact from scsql.memory_facts f
  where f.project_id = p_project
    and f.key = any (v_cands)
    -- What every kind of duplicate has (scsql._fact_relation_terms): the
    -- same terms in all, or value term sets of about one size that meet.
    and ((coalesce(f.key_terms, scsql._fact_terms(f.key)) || coalesce(f.value_terms, scsql._fact_terms(f.value))) @> (p_kt || p_vt)
         or (abs(cardinality(coalesce(f.value_terms, scsql._fact_terms(f.value))) - cardinality(p_vt)) <= 1
             and coalesce(f.value_terms, scsql._fact_terms(f.value)) && p_vt))
    and scsql._fact_relation_terms(p_kt, p_vt, coalesce(f.key_terms, scsql._fact_terms(f.key)),
                                   coalesce(f.value_terms, scsql._fact_terms(f.value))) = 'duplicate'
  order by f.updated_at desc, f.key limit 1;
  return v_fact;
end
$$;
comment on function scsql._duplicate_fact(bigint, text[], text[]) is
  'Private, for scsql.remember. The most recently updated fact of the project that says the same as a fact with key terms KT and value terms VT (scsql._fact_relation_terms: duplicate), or a row of NULLs when there is none.';

create or replace function scsql._store_fact(p_project bigint, p_agent bigint, p_key text, p_value text, p_importance smallint,
                                             p_kt text[], p_vt text[], p_now timestamptz)
returns table (key text, stored text)
language plpgsql
as $$
declare
  v_old scsql.memory_facts;
  v_hash text := scsql._text_hash(p_value);
begin
  select * into v_old from scsql.memory_facts f where f.project_id = p_project and f.key = p_key;
  if not found then
    -- A fact saying the same under another key is refreshed, taking no new slot.
    v_old := scsql._duplicate_fact(p_project, p_kt, p_vt);
    if v_old.key is not null then
      update scsql.memory_facts f set updated_at = p_now, updated_by = p_agent,
             importance = greatest(f.importance, p_importance)
       where f.project_id = p_project and f.key = v_old.key;
      perform scsql._memory_change(p_project, 'refresh', 'fact', v_old.key, null, scsql._text_hash(v_old.value),
                                   scsql._text_hash(v_old.value), 'the same fact remembered as ' || p_key, p_key);
      return query select v_old.key, 'refreshed'::text;
      return;
    end if;
    insert into scsql.memory_facts as f (project_id, key, value, importance, created_at, updated_at, created_by, updated_by,
                                         key_terms, value_terms)
    values (p_project, p_key, p_value, p_importance, clock_timestamp(), clock_timestamp(), p_agent, p_agent, p_kt, p_vt);
    perform scsql._memory_change(p_project, 'remember', 'fact', p_key, null, null, v_hash, null, null);
  elsif v_old.value = p_value then
    update scsql.memory_facts f set updated_at = p_now, updated_by = p_agent, importance = p_importance
     where f.project_id = p_project and f.key = p_key;
    perform scsql._memory_change(p_project, 'refresh', 'fact', p_key, null, v_hash, v_hash, 'remembered again', null);
    return query select p_key, 'refreshed'::text;
    return;
  else
    -- Supersession: the value the key had is kept as history.
    insert into scsql.fact_versions (project_id, key, value, value_hash, importance, created_at, created_by, superseded_by, reason)
    values (p_project, v_old.key, v_old.value, scsql._text_hash(v_old.value), v_old.importance,
            v_old.updated_at, v_old.updated_by, p_agent, 'superseded by a new value');
    update scsql.memory_facts f set value = p_value, importance = p_importance,
           updated_at = p_now, updated_by = p_agent, key_terms = p_kt, value_terms = p_vt
     where f.project_id = p_project and f.key = p_key;
    perform scsql._memory_change(p_project, 'supersede', 'fact', p_key, null, scsql._text_hash(v_old.value), v_hash,
                                 'a new value was remembered', null);
  end if;
  return query select p_key, 'memory'::text;
end
$$;
comment on function scsql._store_fact(bigint, bigint, text, text, smallint, text[], text[], timestamptz) is
  'Private, for scsql.remember, under the project''s facts lock. Stores the fact KEY = VALUE (terms KT, VT; time NOW): a new key is inserted, the same value refreshes the fact, a new value supersedes the old (kept in fact_versions), and a new key saying what another fact says refreshes that fact instead (scsql._duplicate_fact). Returns the key of the fact stored or refreshed and stored: memory or refreshed.';

create or replace function scsql._record_fact_conflicts(p_project bigint, p_agent bigint, p_key text, p_hash text,
                                                        p_kt text[], p_vt text[])
returns void
language plpgsql
as $$
declare
  v_n integer := 0;
  v_cands text[];
  v_fact scsql.memory_facts;
  v_conflict bigint;
begin
  -- The three facts most alike: a project whose keys and values share
  -- common words does not record a conflict with every fact it holds.
  -- Only the candidates (scsql._fact_candidates) can be in conflict; they
  -- are taken most alike first (Jaccard similarity of keys plus of values,
  -- as scsql._jaccard computes it: terms are distinct), and each is
  -- compared (scsql._fact_relation_terms) only until three are found.
  v_cands := scsql._fact_candidates(p_project, p_kt, p_vt, 'conflict');
  for v_fact in
    select f.* from scsql.memory_facts f
    cross join lateral (
      select (select count(*) from unnest(f.key_terms) t where t = any (p_kt)) as sk,
             (select count(*) from unnest(f.value_terms) t where t = any (p_vt)) as sv) s
    where f.project_id = p_project and f.key <> p_key
      and f.key = any (v_cands)
      -- What a conflict needs (scsql._fact_relation_terms), counted: keys
      -- with Jaccard >= 0.5 (3 shared >= both sizes), or a shared key term
      -- and at least two shared value terms with Jaccard >= 0.4.
      and (3 * s.sk >= cardinality(p_kt) + cardinality(f.key_terms)
           or (s.sk >= 1 and s.sv >= 2 and 7 * s.sv >= 2 * (cardinality(p_vt) + cardinality(f.value_terms))))
      -- A conflict still open between the two is not recorded twice.
      and f.key <> all (array(select case when c.key = p_key then c.other_key else c.key end
                              from scsql.fact_conflicts c
                              where c.project_id = p_project and c.resolved_at is null
                                and (c.key = p_key or c.other_key = p_key)))
    order by case when cardinality(f.key_terms) + cardinality(p_kt) = 0 then 0
                  else s.sk::double precision / (cardinality(f.key_terms) + cardinality(p_kt) - s.sk) end
             + case when cardinality(f.value_terms) + cardinality(p_vt) = 0 then 0
                    else s.sv::double precision / (cardinality(f.value_terms) + cardinality(p_vt) - s.sv) end desc,
             f.key
  loop
    continue when scsql._fact_relation_terms(p_kt, p_vt, v_fact.key_terms, v_fact.value_terms) <> 'conflict';
    v_n := v_n + 1;
    insert into scsql.fact_conflicts (project_id, key, value_hash, other_key, other_hash, detected_by)
    values (p_project, p_key, p_hash, v_fact.key, scsql._text_hash(v_fact.value), p_agent)
    returning conflict_id into v_conflict;
    perform scsql._memory_change(p_project, 'conflict', 'fact', p_key, null, scsql._text_hash(v_fact.value), p_hash,
                                 format('conflict %s: another claim about the subject of %s', v_conflict, v_fact.key),
                                 v_fact.key);
    exit when v_n = 3;
  end loop;
end
$$;
comment on function scsql._record_fact_conflicts(bigint, bigint, text, text, text[], text[]) is
  'Private, for scsql.remember. Records the conflicts of the new fact KEY (value hash HASH, terms KT and VT) with the at most three facts most alike that make another claim about its subject (scsql._fact_relation_terms: conflict) and are not in open conflict with it already, each in fact_conflicts and the memory history.';

create or replace function scsql._open_conflict_keys(p_project bigint, p_key text)
returns text[]
language plpgsql stable
as $$
begin
  return array(select case when c.key = p_key then c.other_key else c.key end k
               from scsql.fact_conflicts c
               where c.project_id = p_project and c.resolved_at is null and (c.key = p_key or c.other_key = p_key)
                 and exists (select from scsql.memory_facts f where f.project_id = p_project
                             and f.key = case when c.key = p_key then c.other_key else c.key end)
               order by 1);
end
$$;
comment on function scsql._open_conflict_keys(bigint, text) is
  'Private, for scsql.remember. The keys, sorted, of the facts in working memory that the fact KEY is in open (unresolved) conflict with.';

create or replace function scsql._archive_beyond_capacity(p_project bigint, p_count integer, p_cap integer)
returns table (archived text[], facts integer, capacity integer)
language plpgsql
as $$
declare
  v_cap integer := p_cap;
  v_count integer := p_count;
  v_fact scsql.memory_facts;
  v_archived text[] := '{}';
begin
  if v_count > v_cap then
    for v_fact in
      select * from scsql.memory_facts f where f.project_id = p_project
      order by f.importance, f.updated_at, f.key
      limit v_count - v_cap
    loop
      perform scsql._archive_fact(p_project, v_fact);
      v_archived := v_archived || v_fact.key;
    end loop;
    v_count := v_cap;
  end if;
  return query select v_archived, v_count, v_cap;
end
$$;
comment on function scsql._archive_beyond_capacity(bigint, integer, integer) is
  'Private, for scsql.remember, under the project''s facts lock. Given the project''s COUNT facts and its working-memory CAPACITY (scsql._memory_capacity_of), moves the least important, least recently updated facts beyond it to the archive (scsql._archive_fact). Returns the keys archived, the facts now in memory and the capacity.';

create or replace function scsql.remember(p_key text, p_value text, p_importance integer default 3,
                                          p_ttl interval default null)
returns table (key text, importance integer, stored text, archived text[], facts integer, capacity integer,
               conflicts_with text[])
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_project bigint := scsql._my_project();
  v_agent bigint := scsql._my_agent_id();
  v_key text;
  v_value text;
  v_importance smallint;
  v_hash text;
  v_kt text[];
  v_vt text[];
  v_now timestamptz;
  v_stored text;
  v_conflicts text[] := '{}';
  v_source bigint;
  v_count integer;
  v_cap integer;
  v_room record;
begin
  select s.key, s.value, s.importance into v_key, v_value, v_importance
  from scsql._fact_as_stored(v_project, v_agent, p_key, p_value, p_importance, p_ttl) s;
  v_hash := scsql._text_hash(v_value);
  perform scsql._facts_lock(v_project);
  -- The time of this change, a value: Citus refuses volatile functions in an UPDATE.
  v_now := clock_timestamp();
  v_kt := scsql._fact_terms(v_key);
  v_vt := scsql._fact_terms(v_value);
  select s.key, s.stored into v_key, v_stored
  from scsql._store_fact(v_project, v_agent, v_key, v_value, v_importance, v_kt, v_vt, v_now) s;
  if v_stored = 'memory' then
    -- Another claim about the subject of an existing fact: both stay, the
    -- conflict is recorded until resolve_conflict settles it. The facts it
    -- is in open conflict with: found now, or before and not settled.
    perform scsql._record_fact_conflicts(v_project, v_agent, v_key, v_hash, v_kt, v_vt);
    v_conflicts := scsql._open_conflict_keys(v_project, v_key);
  end if;

  -- The fact's TTL (sql/22_lifecycle.sql, checked above). A remember
  -- without one clears it; nothing is written when there is none either way.
  update scsql.memory_facts f set expires_at = v_now + p_ttl
  where f.project_id = v_project and f.key = v_key and (p_ttl is not null or f.expires_at is not null);

  -- A fresh value supersedes an archived copy of the same key. Read with
  -- the facts in memory and the capacity, in one statement (on Citus one
  -- round trip to the project's shard): forgetting that copy changes neither.
  select (select s.source_id from scsql.kb_sources s
          where s.project_id = v_project and s.path = 'fact:' || v_key and s.kind = 'archived_fact'),
         count(*)::integer,
         scsql._memory_capacity_of((select st.n_file_chunks from scsql.memory_state st where st.project_id = v_project))
    into v_source, v_count, v_cap
  from scsql.memory_facts f where f.project_id = v_project;
  if v_source is not null then
    perform scsql._forget_sources(v_project, array[v_source]);
    perform scsql._memory_change(v_project, 'unarchive', 'fact', v_key, null, null, v_hash,
                                 'remembered again: the archived copy is replaced', 'fact:' || v_key);
  end if;

  select * into v_room from scsql._archive_beyond_capacity(v_project, v_count, v_cap);
  return query select v_key, p_importance,
    case when v_key = any(v_room.archived) then 'archived' else v_stored end,
    v_room.archived, v_room.facts, v_room.capacity, v_conflicts;
end
$$;
comment on function scsql.remember(text, text, integer, interval) is
  'Stores a fact in your project''s working memory, or supersedes the fact with that key (history kept). A duplicate refreshes the fact; facts it contradicts come back in conflicts_with. When memory is full the least important, oldest facts move to the archive (still searchable). Returns key, importance, stored, archived, facts, capacity, conflicts_with.

p_key: the fact''s name, one line
p_value: the fact
p_importance (1..5): 5 is kept longest
p_ttl: how long the fact lives (e.g. 7 days); omit to keep it

Key: 1-200 characters, one line; value: 1-4,000 characters; importance 1-5 (default 3). Remembering a key that exists supersedes its value: the old value stays in the fact''s history (memory_history), never overwritten. A new key whose fact says the same as a fact in memory (scsql._fact_relation: the same terms) refreshes that fact (its time, and the higher importance) instead of taking a slot: key then names the fact refreshed and stored is refreshed. A fact that makes another claim about the subject of facts in memory is stored, and the keys of the (at most 3) most alike of them are returned in conflicts_with, with any conflict of this key still open; both stay, shown as possibly stale by recall_context until resolve_conflict settles them. Working memory holds 100 facts, plus one per 100 indexed file chunks, up to 250; when it is full the lowest-importance, least recently updated facts move to the knowledge base as archived facts (still found by search; never dropped), so an importance-5 fact is archived only when no lower-importance fact is left. Key and value are stored redacted (each secret replaced by [REDACTED:<kind>], see scsql.redact), so the fact is readable by every agent of the project without its secrets. Every change is recorded in the memory history (scsql.memory_history). Returns key (as stored), importance, stored (memory; refreshed for a duplicate; archived when this fact itself was the one to go), archived (keys moved out), facts (now in memory), capacity, conflicts_with (keys of facts this one conflicts with). With TTL (an interval, up to 3,650 days) the fact expires that long after this remember: recall_context and pack no longer return it and the worker deletes it (scsql.purge_expired); remembering the key again without TTL keeps it for good. Raises SC200 too long, SC201 empty or control characters, SC202 importance out of range, SC215 a value holding a PEM private key block, SC241 a TTL that is not positive or over 3,650 days.';

create or replace function scsql.forget(p_key text)
returns boolean
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_project bigint := scsql._my_project();
  v_key text := scsql._redact(p_key);
  v_found boolean;
  v_old bigint;
  v_gone scsql.memory_facts;
begin
  perform scsql._check_text('key', p_key, 200, false);
  perform scsql._facts_lock(v_project);
  -- Keys are stored redacted: a key given as it was remembered finds it.
  delete from scsql.memory_facts f where f.project_id = v_project and f.key in (p_key, v_key) returning * into v_gone;
  v_found := found;
  if v_found then
    perform scsql._memory_change(v_project, 'forget', 'fact', v_gone.key, null, scsql._text_hash(v_gone.value), null,
                                 'forget', null);
  end if;
  select s.source_id into v_old from scsql.kb_sources s
  where s.project_id = v_project and s.path = 'fact:' || v_key and s.kind = 'archived_fact';
  if found then
    perform scsql._forget_sources(v_project, array[v_old]);
    perform scsql._memory_change(v_project, 'forget', 'fact', v_key, null, null, null, 'forget: the archived copy',
                                 'fact:' || v_key);
    v_found := true;
  end if;
  return v_found;
end
$$;
comment on function scsql.forget(text) is
  'Forgets the fact with this key, in working memory and archive. Returns true when it existed.

p_key: the fact''s key

KEY is as given to remember, or as stored, redacted; the fact is the acting agent''s project''s. False when there was no such fact, so a second forget returns false. The forget is recorded in the memory history (who, when, the hash of the value), the value itself is not kept. Raises SC200/SC201 for a bad key.';

