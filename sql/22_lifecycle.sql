-- scsql memory lifecycle: use and decay. What recall_context, pack and
-- search return records its use (last_used_at, use_count on facts and
-- sources); they rank with importance, recency and use; facts may carry a
-- TTL; external sources expire unless pinned; the worker purges what
-- expired (scsql.purge_expired, sql/25_embeddings.sql). Decisions and open
-- loops: sql/27_decisions.sql. Definitions: sql/20_text.sql.
--
-- The lifecycle score of an item (scsql_caller.lifecycle), with weights
-- wi, wr, wu >= 0 and a half-life h in days:
--
--   L = wi * (importance - 1) / 4 + wr * R + wu * U
--   R = 0.5 ^ (days since the item was last written / h)      (recency)
--   U = uses / (uses + 3) * 0.5 ^ (days since last returned / h)  (use)
--
-- An importance-5 fact and a pinned source never decay: R = 1 and U is not
-- halved. Sources have importance 3 (an archived fact keeps its own).
-- recall_context orders facts by L; pack and search multiply each item's
-- fused score by exp(L), so a change of L shared by every item never
-- reorders them.

select scsql._define_error(code, name, meaning) from (values
  ('SC235', 'decision_invalid', 'A decision''s title must be one line of 1 to 200 characters and its rationale 1 to 4,000 characters, without a PEM private key block.'),
  ('SC236', 'decision_unknown', 'No decision of the acting agent''s project has that id (the decision a new one supersedes must exist).'),
  ('SC237', 'decision_superseded', 'The decision named as superseded was already superseded by another; supersede the current one instead (decisions(p_include_superseded => true) shows the history).'),
  ('SC238', 'open_loop_invalid', 'An open loop''s text must be 1 to 2,000 characters, its owner one line of 1 to 200 characters, a resolution 1 to 4,000 characters.'),
  ('SC239', 'open_loop_unknown', 'No open loop of the acting agent''s project has that id.'),
  ('SC240', 'open_loop_closed', 'The open loop was already closed; its resolution stays as it was.'),
  ('SC241', 'fact_ttl_invalid', 'A fact''s TTL must be a positive interval of at most 3,650 days (or null: the fact does not expire).'),
  ('SC242', 'source_unknown', 'No source of the acting agent''s project has that path (pin takes the path as indexed).'),
  ('SC243', 'lifecycle_weight_invalid', 'A ranking weight (importance, recency, use) must be 0 or a finite number from 1e-6 to 100, and the half-life 0.01 to 36,500 days.'),
  ('SC244', 'lifecycle_setting_invalid', 'external_ttl must be 1 hour to 3,650 days, use_granularity 0 to 1 day.')
) as t(code, name, meaning);

-- ---------------------------------------------------------------------------
-- Ranking: the lifecycle score
-- ---------------------------------------------------------------------------

create or replace function scsql_caller.lifecycle(
  p_importance integer, p_written_at timestamptz, p_last_used_at timestamptz, p_use_count integer,
  p_never_decays boolean, p_importance_weight double precision, p_recency_weight double precision,
  p_use_weight double precision, p_half_life_days double precision)
returns double precision
language sql stable parallel safe
as $$
  -- One expression (no FROM), so the planner inlines it into the queries
  -- that call it. Inputs are clamped to the ranges check_lifecycle allows
  -- (weights 0 or 1e-6..100, half-life 0.01..36500 days, importance 1..5,
  -- uses >= 0), so a direct call raises nothing either; exponents are
  -- capped at 1000 halvings: 0.5 ^ 1000 is still a normal double, so
  -- nothing underflows.
  select case when p_importance_weight >= 1e-6 then least(p_importance_weight, 100) else 0 end
           * (least(greatest(coalesce(p_importance, 3), 1), 5) - 1) / 4.0
       + case when p_recency_weight >= 1e-6 then least(p_recency_weight, 100) else 0 end
           * case when p_never_decays then 1 else
               pg_catalog.power(0.5::double precision, least(1000, greatest(0,
                 extract(epoch from (now() - coalesce(p_written_at, now())))::double precision / 86400
                 / least(greatest(coalesce(p_half_life_days, 30), 0.01), 36500)))) end
       + case when p_use_weight >= 1e-6 then least(p_use_weight, 100) else 0 end
           * greatest(coalesce(p_use_count, 0), 0) / (greatest(coalesce(p_use_count, 0), 0) + 3.0)::double precision
           * case when p_never_decays or p_last_used_at is null then 1 else
               pg_catalog.power(0.5::double precision, least(1000, greatest(0,
                 extract(epoch from (now() - p_last_used_at))::double precision / 86400
                 / least(greatest(coalesce(p_half_life_days, 30), 0.01), 36500)))) end
$$;
comment on function scsql_caller.lifecycle(integer, timestamptz, timestamptz, integer, boolean, double precision,
                                            double precision, double precision, double precision) is
  'The lifecycle score L of a fact or source (the definition: sql/22_lifecycle.sql): importance_weight * (importance - 1) / 4 + recency_weight * 0.5 ^ (days since written / half_life) + use_weight * uses / (uses + 3) * 0.5 ^ (days since last returned / half_life); with NEVER_DECAYS (importance 5, pinned) both halvings are 1. NULL importance counts as 3. Inputs are clamped to the ranges check_lifecycle allows (weights below 1e-6 count as 0), so it raises nothing.';

create or replace function scsql_caller.check_lifecycle(
  p_importance_weight double precision, p_recency_weight double precision, p_use_weight double precision,
  p_half_life_days double precision)
returns boolean
language plpgsql immutable
as $$
begin
  if p_importance_weight is null or p_recency_weight is null or p_use_weight is null or p_half_life_days is null
     or 'NaN'::double precision in (p_importance_weight, p_recency_weight, p_use_weight, p_half_life_days)
     or not (p_importance_weight between 0 and 100 and p_recency_weight between 0 and 100
             and p_use_weight between 0 and 100 and p_half_life_days between 0.01 and 36500)
     -- Below 1e-6 a weighted term underflows double precision.
     or (p_importance_weight > 0 and p_importance_weight < 1e-6) or (p_recency_weight > 0 and p_recency_weight < 1e-6)
     or (p_use_weight > 0 and p_use_weight < 1e-6) then
    raise exception using errcode = 'SC243',
      message = format('ranking weights out of range (importance %s, recency %s, use %s, half-life %s days)',
                       p_importance_weight, p_recency_weight, p_use_weight, p_half_life_days),
      hint = 'Weights 0, or 1e-6 to 100 (0 turns a term off); half-life 0.01 to 36,500 days.';
  end if;
  return p_importance_weight > 0 or p_recency_weight > 0 or p_use_weight > 0;
end
$$;
comment on function scsql_caller.check_lifecycle(double precision, double precision, double precision, double precision) is
  'Checks the ranking weights of recall_context, pack and search: each weight 0 or 1e-6 to 100, the half-life 0.01 to 36,500 days. Returns true when any weight is above 0 (the lifecycle changes the ranking). Raises SC243 otherwise.';

create or replace function scsql_caller.items_lifecycle(
  p_paths text[], p_importance_weight double precision, p_recency_weight double precision,
  p_use_weight double precision, p_half_life_days double precision)
returns table (source_path text, life double precision)
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  -- The caller's own project, fixed once (its facts and sources are all of
  -- those row-level security shows it there), read as the owner.
  v_project bigint := scsql_caller.project_id();
  v_keys text[];
begin
  if p_paths is null then
    return;
  end if;
  select array_agg(substr(p, 8)) into v_keys from unnest(p_paths) p where p like 'memory:%';
  -- One query of the project's facts and sources for every item (on Citus
  -- one statement of the project's shard, not one per item).
  return query
  select u.p, coalesce(
           case when f.key is not null then
             scsql_caller.lifecycle(f.importance, f.updated_at, f.last_used_at, f.use_count, f.importance = 5,
                                    p_importance_weight, p_recency_weight, p_use_weight, p_half_life_days) end,
           case when s.path is not null then
             scsql_caller.lifecycle(case when s.kind = 'archived_fact' and s.meta ->> 'importance' ~ '^[1-5]$'
                                         then (s.meta ->> 'importance')::integer end,
                                    s.updated_at, s.last_used_at, s.use_count,
                                    s.pinned or s.tier = 'pinned' or s.meta ->> 'importance' = '5',
                                    p_importance_weight, p_recency_weight, p_use_weight, p_half_life_days) end,
           scsql_caller.lifecycle(null, now(), null, 0, true, p_importance_weight, p_recency_weight,
                                  p_use_weight, p_half_life_days))
  from (select distinct p from unnest(p_paths) p) u
  left join (select x.key, x.importance, x.updated_at, x.last_used_at, x.use_count from scsql.memory_facts x
             where x.project_id = v_project and x.key = any(v_keys)) f
    on u.p like 'memory:%' and f.key = substr(u.p, 8)
  left join (select x.path, x.kind, x.meta, x.updated_at, x.last_used_at, x.use_count, x.pinned, x.tier
             from scsql.kb_sources x where x.project_id = v_project and x.path = any(p_paths)) s
    on s.path = u.p;
end
$$;
comment on function scsql_caller.items_lifecycle(text[], double precision, double precision, double precision, double precision) is
  'The lifecycle score (scsql_caller.lifecycle) of each item at the SOURCE_PATHS of the caller''s project, one row per distinct path (none when SOURCE_PATHS is NULL): memory:<key> is a working-memory fact, any other path a source (importance 3, an archived fact its own; pinned sources and importance 5 never decay). An item it does not find (another project''s, a decision) scores as a new, unused importance-3 item. Read as the owner, the project fixed from the acting role, in one query: what row-level security shows the caller of its own project. Raises SC001 / SC002 like scsql_caller.project_id.';

-- ---------------------------------------------------------------------------
-- Use: recorded by what returns an item
-- ---------------------------------------------------------------------------

create or replace function scsql._memory_settings_default(p_project bigint)
returns scsql.memory_settings
language sql immutable
as $$ select row(p_project, interval '14 days', interval '1 minute', null, interval '30 days')::scsql.memory_settings $$;
comment on function scsql._memory_settings_default(bigint) is
  'Private. The memory lifecycle settings of a project that has no row in scsql.memory_settings: external_ttl 14 days, use_granularity 1 minute, loop_stale_after 30 days.';

create or replace function scsql._memory_settings(p_project bigint)
returns scsql.memory_settings
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_settings scsql.memory_settings;
begin
  -- Columns into a row here (on Citus a whole-row reference in the query
  -- would be of the shard's row type).
  select * into v_settings from scsql.memory_settings s where s.project_id = p_project;
  if not found then
    v_settings := scsql._memory_settings_default(p_project);
  end if;
  return v_settings;
end
$$;
comment on function scsql._memory_settings(bigint) is
  'Private. The memory lifecycle settings of a project (scsql.memory_settings), the defaults when it has no row (scsql._memory_settings_default).';

create or replace function scsql._note_use(p_project bigint, p_paths text[])
returns integer
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
-- One statement, an UPDATE per table over the returned items at once (on
-- Citus one round trip to the project's shard). A row is counted at most
-- once per use_granularity, so most calls write nothing; rows another
-- transaction holds (a writer, or a concurrent reader recording the same
-- use) are skipped, never waited for, so no reader waits on another and no
-- two readers deadlock. In a read-only transaction (a standby) nothing is
-- recorded.
declare
  -- The project's use_granularity is read in the statement; this is the
  -- default, when the project has no row.
  v_gran interval := (scsql._memory_settings_default(p_project)).use_granularity;
  v_n integer;
begin
  if p_project is null or coalesce(cardinality(p_paths), 0) = 0
     or current_setting('transaction_read_only') = 'on' then
    return 0;
  end if;
  p_paths := p_paths[1:1000];
  with facts as (
    update scsql.memory_facts f set last_used_at = now(), use_count = least(f.use_count, 2147483646) + 1
    from (select x.key from scsql.memory_facts x
          left join scsql.memory_settings st on st.project_id = x.project_id and st.project_id = p_project
          where x.project_id = p_project
            and x.key in (select substr(p, 8) from unnest(p_paths) p where p like 'memory:%')
            and (x.last_used_at is null or x.last_used_at <= now() - coalesce(st.use_granularity, v_gran))
          order by x.key
          for no key update of x skip locked) u
    where f.project_id = p_project and f.key = u.key
    returning 1
  ),
  sources as (
    update scsql.kb_sources s set last_used_at = now(), use_count = least(s.use_count, 2147483646) + 1
    from (select x.source_id from scsql.kb_sources x
          left join scsql.memory_settings st on st.project_id = x.project_id and st.project_id = p_project
          where x.project_id = p_project and x.path = any(p_paths)
            and (x.last_used_at is null or x.last_used_at <= now() - coalesce(st.use_granularity, v_gran))
          order by x.source_id
          for no key update of x skip locked) u
    where s.project_id = p_project and s.source_id = u.source_id
    returning 1
  )
  select (select count(*) from facts) + (select count(*) from sources) into v_n;
  return v_n;
end
$$;
comment on function scsql._note_use(bigint, text[]) is
  'Private. Records that the items at PATHS (memory:<key> for a fact, else a source path) of the project were returned: last_used_at = now(), use_count + 1, for each row whose last use is older than the project''s use_granularity. Rows another transaction has locked are skipped (SKIP LOCKED), never waited for; nothing is written in a read-only transaction. Returns how many rows were updated.';

create or replace function scsql_caller.note_use(p_paths text[])
returns integer
language sql volatile security definer set search_path = pg_catalog, scsql, pg_temp
as $$ select scsql._note_use_at_commit(scsql._my_project(), p_paths) $$;
comment on function scsql_caller.note_use(text[]) is
  'What search and pack (which run as the caller) call on the items they return: records their use in the acting agent''s own project only (scsql._note_use; on Citus when the transaction commits, see scsql._note_use_at_commit). An agent calling it directly can only raise the use counts of its own project''s items, as searching would. Returns how many rows were updated (0 on Citus).';

-- ---------------------------------------------------------------------------
-- Pins and settings
-- ---------------------------------------------------------------------------

create or replace function scsql.pin(p_path text, p_pinned boolean default true)
returns table (path text, kind text, trust text, pinned boolean)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_project bigint := scsql._my_project();
  v_src scsql.kb_sources;
  v_was boolean;
begin
  perform scsql._check_text('path', p_path, 1024, false);
  if p_pinned is null then
    raise exception using errcode = 'SC010', message = 'pinned must be true or false';
  end if;
  select s.pinned into v_was from scsql.kb_sources s
  where s.project_id = v_project and s.path in (p_path, scsql._redact(p_path))
  order by s.path = p_path desc limit 1
  for no key update;
  update scsql.kb_sources s set pinned = p_pinned
  where s.project_id = v_project and s.path in (p_path, scsql._redact(p_path))
  returning * into v_src;
  if not found then
    raise exception using errcode = 'SC242', message = format('no source of this project has the path %L', p_path),
      hint = 'Give the path as index_text or index stored it (search shows it as source_path). Working-memory facts are not pinned: importance 5 keeps them.';
  end if;
  -- Memory history (sql/26_history.sql), when the pin changed.
  perform scsql._memory_change(v_project, case when p_pinned then 'pin' else 'unpin' end, 'source', v_src.path, null,
                               v_src.content_hash, v_src.content_hash,
                               case when p_pinned then 'pinned: never purged, never decays' else 'unpinned' end, null)
  where v_was is distinct from p_pinned;
  return query select v_src.path, v_src.kind, v_src.trust, v_src.pinned;
end
$$;
comment on function scsql.pin(text, boolean) is
  'Pins a source of your project (or unpins it): a pinned source never expires and never decays in ranking. Returns path, kind, trust, pinned.

p_path: the source''s path, as search shows it
p_pinned: false unpins

PINNED false unpins. Unpinned, external sources expire external_ttl after they were last indexed (14 days by default) and session summaries after 365 days; the ranking that a pin exempts from decay is that of recall_context, pack and search. The pin survives re-indexing. A change of the pin is a row of the memory history (op pin or unpin). Raises SC242 when the project has no source at PATH, SC200/SC201 for a bad path.';

create or replace function scsql.set_memory_lifecycle(p_project text, p_external_ttl interval default null,
                                                      p_use_granularity interval default null,
                                                      p_loop_stale_after interval default null)
returns table (project text, external_ttl interval, use_granularity interval, loop_stale_after interval)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_project bigint := scsql._project_id(p_project);
  v_old scsql.memory_settings := scsql._memory_settings(v_project);
  v_ttl interval := coalesce(p_external_ttl, v_old.external_ttl);
  v_gran interval := coalesce(p_use_granularity, v_old.use_granularity);
  v_stale interval := coalesce(p_loop_stale_after, v_old.loop_stale_after);
  v_now timestamptz := now();
begin
  if not (v_ttl between interval '1 hour' and interval '3650 days')
     or not (v_gran between interval '0' and interval '1 day')
     or not (v_stale between interval '1 hour' and interval '3650 days') then
    raise exception using errcode = 'SC244',
      message = format('external_ttl %s, use_granularity %s or loop_stale_after %s is out of range', v_ttl, v_gran, v_stale),
      hint = 'external_ttl and loop_stale_after 1 hour to 3650 days, use_granularity 0 to 1 day.';
  end if;
  insert into scsql.memory_settings as s (project_id, external_ttl, use_granularity, loop_stale_after)
  values (v_project, v_ttl, v_gran, v_stale)
  on conflict (project_id) do update
    -- The time as a value: Citus refuses now() in the DO UPDATE of a distributed table.
    set external_ttl = excluded.external_ttl, use_granularity = excluded.use_granularity,
        loop_stale_after = excluded.loop_stale_after, updated_at = v_now;
  return query select p_project, v_ttl, v_gran, v_stale;
end
$$;
comment on function scsql.set_memory_lifecycle(text, interval, interval, interval) is
  'Administrators only. Sets the memory lifecycle of PROJECT: EXTERNAL_TTL, how long after it was last indexed an external source that is not pinned is kept before the worker purges it (default 14 days; 1 hour to 3,650 days); USE_GRANULARITY, how often at most a fact or source records a use (default 1 minute; 0 to 1 day); LOOP_STALE_AFTER, how long an open loop nobody touched stays in recall_context unless pinned (default 30 days; 1 hour to 3,650 days). A NULL argument keeps the current value. Returns project, external_ttl, use_granularity, loop_stale_after. Raises SC005 unknown project, SC244 out of range.';
