-- 60 viewer: what scsql ui, its /api/v1 and scsql report show, as stored
-- functions a person can run from psql too.
--
-- Every function here runs as its caller (never security definer, except
-- viewer_channels): row-level security decides what a page shows. An
-- agent's viewer shows its own project (policies/60_viewer.sql lets agents
-- read their project's memory history, checkpoints and quarantines, which
-- the viewer shows); the auditor's shows every project and changes nothing.
-- Pages are read by keyset, never OFFSET: each row carries a cursor, and
-- the next page starts after the cursor given (p_before, p_after).
--
-- When a row happened: coalesce(occurred_at, at) (a row imported from a
-- transcript happened before it was written). Outcomes, messages and memory
-- changes happen when they are written.
--
-- Live timelines: a write of a session, prompt, tool call, model message or
-- outcome NOTIFYs its project's events channel (scsql._channel(project,
-- 'events'), a secret name; viewer_channels gives a viewer its own), with
-- the fixed hint "event"; viewers poll as the fallback.

select scsql._define_error(code, name, meaning) from (values
  ('SC600', 'viewer_not_found', 'No session, event, fact, source or chain with that id or name is visible to you: it does not exist, or row-level security hides it.')
) as t(code, name, meaning);
select scsql._define_error(code, name, meaning, 'client') from (values
  ('SC601', 'viewer_token_required', 'scsql ui and its /api/v1 answer only requests that carry the token printed with its URL (?token=..., or the header Authorization: Bearer ...).'),
  ('SC602', 'viewer_path_unknown', 'No page or /api/v1 path has that name; /api/v1/openapi.json lists the API.'),
  ('SC603', 'report_signature_invalid', 'A report''s signature does not match its content or names no key: the file was changed after it was signed, or was not signed by scsql report.')
) as t(code, name, meaning);

-- ---------------------------------------------------------------------------
-- Filters and cursors (run as the caller)
-- ---------------------------------------------------------------------------

create or replace function scsql_caller.viewer_filter(
  p_project text, p_agent text, p_since timestamptz, p_until timestamptz, p_limit integer, p_max integer default 500,
  out project_id bigint, out agent_id bigint)
language plpgsql stable
as $$
#variable_conflict use_column
begin
  if p_project is not null then
    select p.project_id into viewer_filter.project_id from scsql.projects p where p.name = p_project;
    if not found then
      raise exception using errcode = 'SC005', message = format('no project %L is visible to you', left(p_project, 100)),
        hint = 'scsql.viewer_projects() lists the projects you may read.';
    end if;
  end if;
  if p_agent is not null then
    select a.agent_id into viewer_filter.agent_id from scsql.agents a
    where a.name = p_agent and (viewer_filter.project_id is null or a.project_id = viewer_filter.project_id);
    if not found then
      raise exception using errcode = 'SC003', message = format('no agent %L is visible to you%s', left(p_agent, 100),
                                                                  case when p_project is not null then ' in project ' || p_project else '' end),
        hint = 'scsql.viewer_agents() lists the agents you may read.';
    end if;
  end if;
  if p_since > p_until then
    raise exception using errcode = 'SC010', message = format('the time range ends (%s) before it begins (%s)', p_until, p_since),
      hint = 'Give since before until.';
  end if;
  if p_limit is null or p_limit not between 1 and p_max then
    raise exception using errcode = 'SC010', message = format('limit must be 1 to %s, got %s', p_max, coalesce(p_limit::text, 'NULL'));
  end if;
end
$$;
comment on function scsql_caller.viewer_filter(text, text, timestamptz, timestamptz, integer, integer) is
  'The filters of a viewer function, checked as the caller: the ids of project P_PROJECT and agent P_AGENT (NULL: any) as row-level security shows them, a time range that does not end before it begins, and a limit of 1 to P_MAX. Raises SC005 for a project, SC003 for an agent the caller cannot see, SC010 for a reversed range or a bad limit.';

create or replace function scsql_caller.viewer_limit(p_limit integer, p_max integer default 1000)
returns integer
language plpgsql immutable
as $$
begin
  if p_limit is null or p_limit not between 1 and p_max then
    raise exception using errcode = 'SC010', message = format('limit must be 1 to %s, got %s', p_max, coalesce(p_limit::text, 'NULL'));
  end if;
  return p_limit;
end
$$;
comment on function scsql_caller.viewer_limit(integer, integer) is
  'P_LIMIT, checked: a viewer query''s row limit of 1 to P_MAX. Raises SC010 otherwise.';

create or replace function scsql_caller.viewer_moment(p_at timestamptz)
returns timestamptz
language plpgsql immutable
as $$
begin
  if p_at is null or not p_at between timestamptz '0001-01-01 00:00Z' and timestamptz '9999-12-31 00:00Z' then
    raise exception using errcode = 'SC010', message = format('a page position is a time of the years 1 to 9999, got %s', coalesce(p_at::text, 'NULL'));
  end if;
  return p_at;
end
$$;
comment on function scsql_caller.viewer_moment(timestamptz) is
  'P_AT, checked: a time of the years 1 to 9999, as a viewer cursor holds one. Raises SC010 for NULL, infinity or a time out of that range.';

create or replace function scsql_caller.viewer_cursor(p_happened timestamptz, p_rank integer, p_id bigint)
returns text
language sql immutable
as $$
  select floor(extract(epoch from scsql_caller.viewer_moment(p_happened)) * 1000000)::bigint::text || '.' || p_rank || '.' || p_id
$$;
comment on function scsql_caller.viewer_cursor(timestamptz, integer, bigint) is
  'A keyset cursor of the viewer: microseconds since the epoch (SC010 for a time that is not finite) of when the row happened, its kind''s rank and its id, as "micros.rank.id"; scsql_caller.viewer_cursor_parts reads it back.';

create or replace function scsql_caller.viewer_cursor_parts(p_cursor text, out happened timestamptz, out rank integer, out id bigint)
language plpgsql immutable
as $$
begin
  if p_cursor is null then
    return;
  end if;
  if p_cursor !~ '^-?[0-9]{1,17}\.[0-9]{1,2}\.[0-9]{1,19}$' then
    raise exception using errcode = 'SC010', message = format('%L is not a page cursor', left(p_cursor, 60)),
      hint = 'Pass the cursor column of the last row of the previous page.';
  end if;
  happened := timestamptz 'epoch' + split_part(p_cursor, '.', 1)::bigint * interval '1 microsecond';
  rank := split_part(p_cursor, '.', 2)::integer;
  id := split_part(p_cursor, '.', 3)::numeric::bigint;
exception when numeric_value_out_of_range or datetime_field_overflow then
  raise exception using errcode = 'SC010', message = format('%L is not a page cursor', left(p_cursor, 60));
end
$$;
comment on function scsql_caller.viewer_cursor_parts(text) is
  'The parts of a viewer cursor (see viewer_cursor): happened, rank and id; NULLs for NULL. Raises SC010 for a malformed cursor.';

create or replace function scsql_caller.viewer_quarantine(p_chain bigint, p_seq bigint default null)
returns text
language sql stable
as $$
  select case when bool_or(q.acknowledged_at is null) then 'open' when count(*) > 0 then 'acknowledged' end
  from scsql.chain_quarantines q
  where q.chain_id = p_chain and (p_seq is null or p_seq >= q.from_seq)
$$;
comment on function scsql_caller.viewer_quarantine(bigint, bigint) is
  'Whether row P_SEQ of chain P_CHAIN (any row, when NULL) lies in a quarantined stretch of its chain (scsql checkpoint found a break there): open (no administrator acknowledged it yet), acknowledged, or NULL (not quarantined), as the caller may read scsql.chain_quarantines.';

-- ---------------------------------------------------------------------------
-- What the viewer may show: projects, agents, its wake-up channels
-- ---------------------------------------------------------------------------

create or replace function scsql.viewer_projects()
returns table (project text, root_path text, agents bigint, created_at timestamptz)
language plpgsql stable
as $$
#variable_conflict use_column
begin
  return query
  select p.name::text, p.root_path, (select count(*) from scsql.agents a where a.project_id = p.project_id), p.created_at
  from scsql.projects p
  order by p.name;
end
$$;
comment on function scsql.viewer_projects() is
  'The projects you may read (an agent: its own and those granted to it; the auditor: all), with their root and how many of their agents you see. Returns project, root_path, agents, created_at. Raises nothing.';

create or replace function scsql.viewer_agents(p_project text default null)
returns table (agent text, project text, team_role text, created_at timestamptz, revoked_at timestamptz)
language plpgsql stable
as $$
#variable_conflict use_column
declare
  f record;
begin
  select * into f from scsql_caller.viewer_filter(p_project, null, null, null, 1);
  return query
  select a.name::text, p.name::text, a.team_role, a.created_at, a.revoked_at
  from scsql.agents a join scsql.projects p on p.project_id = a.project_id
  where f.project_id is null or a.project_id = f.project_id
  order by p.name, a.name;
end
$$;
comment on function scsql.viewer_agents(text) is
  'The agents you may read (of project P_PROJECT, when given), with project, team role, and when they were created and revoked. Returns agent, project, team_role, created_at, revoked_at. Raises SC005 for a project you cannot see.';

create or replace function scsql.viewer_channels()
returns table (project text, channel text)
language plpgsql volatile security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_project bigint;
begin
  if scsql._acting_role() = 'scsql_auditor' then
    return query select p.name::text, scsql._channel(p.project_id, 'events') from scsql.projects p order by p.name;
    return;
  end if;
  v_project := scsql._my_project();
  return query select p.name::text, scsql._channel(p.project_id, 'events') from scsql.projects p
               where p.project_id = v_project;
end
$$;
comment on function scsql.viewer_channels() is
  'The LISTEN/NOTIFY channels a viewer listens on to update an open timeline: its project''s events channel for an agent, every project''s for the auditor. A write of a session, prompt, tool call, model message or outcome notifies its project''s channel with the hint "event" (nothing else: the viewer reads what is new). A name is derived from the project''s secret channel key and reveals nothing. Returns project, channel. Raises like scsql._me for a role that is neither an agent nor the auditor.';

create or replace function scsql._viewer_wake()
returns trigger
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
begin
  -- On Citus this fires on the worker holding the shard, whose NOTIFY no
  -- viewer (connected to the coordinator) hears, and which a transaction
  -- spanning workers cannot PREPARE: there it stays silent.
  if scsql_caller.citus() then
    if not pg_catalog.citus_is_coordinator() then  -- parsed only on Citus, which defines it
      return null;
    end if;
  end if;
  perform pg_catalog.pg_notify(scsql._channel(new.project_id, 'events'), 'event');
  return null;
end
$$;
comment on function scsql._viewer_wake() is
  'Private trigger (after insert on sessions, prompts, tool_calls, model_calls, outcomes): NOTIFY the project''s events channel with the fixed hint "event", which wakes open viewers (scsql.viewer_channels). PostgreSQL sends one notification per channel and transaction however many rows it wrote. Silent on a Citus worker (where it fires for the shards): no viewer hears a worker''s NOTIFY, and a transaction that wrote to several workers cannot be prepared after one.';

create or replace trigger viewer_wake after insert on scsql.sessions for each row execute function scsql._viewer_wake();
create or replace trigger viewer_wake after insert on scsql.prompts for each row execute function scsql._viewer_wake();
create or replace trigger viewer_wake after insert on scsql.tool_calls for each row execute function scsql._viewer_wake();
create or replace trigger viewer_wake after insert on scsql.model_calls for each row execute function scsql._viewer_wake();
create or replace trigger viewer_wake after insert on scsql.outcomes for each row execute function scsql._viewer_wake();

-- ---------------------------------------------------------------------------
-- Figures kept as rows are written: session_totals and usage_days
-- (migration 0622), read by the sessions and cost pages and by metrics
-- ---------------------------------------------------------------------------

create or replace function scsql._viewer_totals_prompt()
returns trigger
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
begin
  if new.session_id is not null then
    insert into scsql.session_totals as t (project_id, session_id, prompts, last_at)
    values (new.project_id, new.session_id, 1, coalesce(new.occurred_at, new.at))
    on conflict (project_id, session_id) do update
      set prompts = t.prompts + 1, last_at = greatest(t.last_at, excluded.last_at);
  end if;
  return null;
end
$$;
comment on function scsql._viewer_totals_prompt() is
  'Private trigger (after insert on prompts): adds the prompt to its session''s row of scsql.session_totals (prompts, when its last row happened), in the writing transaction.';

create or replace function scsql._viewer_totals_tool()
returns trigger
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_happened timestamptz := coalesce(new.occurred_at, new.at);
begin
  insert into scsql.usage_days as u (project_id, day, author_id, model, tool, status, tool_calls, input_tokens,
                                     output_tokens, cost_usd, unpriced)
  values (new.project_id, (v_happened at time zone 'UTC')::date, new.author_id, new.model, new.tool, new.status, 1,
          new.input_tokens, new.output_tokens, coalesce(new.cost_usd, 0), (new.cost_usd is null and new.origin = 'model')::integer)
  on conflict on constraint usage_days_key do update
    set tool_calls = u.tool_calls + 1, input_tokens = u.input_tokens + excluded.input_tokens,
        output_tokens = u.output_tokens + excluded.output_tokens, cost_usd = u.cost_usd + excluded.cost_usd,
        unpriced = u.unpriced + excluded.unpriced;
  if new.session_id is not null then
    insert into scsql.usage_sessions as u (project_id, session_id, author_id, first_at, last_at, tool_calls, input_tokens,
                                           output_tokens, cost_usd, unpriced)
    values (new.project_id, new.session_id, new.author_id, v_happened, v_happened, 1, new.input_tokens, new.output_tokens,
            coalesce(new.cost_usd, 0), (new.cost_usd is null and new.origin = 'model')::integer)
    on conflict (project_id, session_id, author_id) do update
      set first_at = least(u.first_at, excluded.first_at), last_at = greatest(u.last_at, excluded.last_at),
          tool_calls = u.tool_calls + 1, input_tokens = u.input_tokens + excluded.input_tokens,
          output_tokens = u.output_tokens + excluded.output_tokens, cost_usd = u.cost_usd + excluded.cost_usd,
          unpriced = u.unpriced + excluded.unpriced;
  end if;
  if new.session_id is not null
     and exists (select from scsql.sessions s
                 where s.project_id = new.project_id and s.session_id = new.session_id and s.at <= new.at) then
    insert into scsql.session_totals as t (project_id, session_id, tool_calls, failures, input_tokens, output_tokens,
                                           cost_usd, last_at)
    values (new.project_id, new.session_id, 1, (new.status <> 'ok')::integer, new.input_tokens, new.output_tokens,
            coalesce(new.cost_usd, 0), v_happened)
    on conflict (project_id, session_id) do update
      set tool_calls = t.tool_calls + 1, failures = t.failures + excluded.failures,
          input_tokens = t.input_tokens + excluded.input_tokens, output_tokens = t.output_tokens + excluded.output_tokens,
          cost_usd = t.cost_usd + excluded.cost_usd, last_at = greatest(t.last_at, excluded.last_at);
  end if;
  return null;
end
$$;
comment on function scsql._viewer_totals_tool() is
  'Private trigger (after insert on tool_calls): adds the tool call to scsql.usage_days (its project, UTC day, agent, model, tool and status), to scsql.usage_sessions (its session and agent) and, when it was written from its session''s own write on (as the timeline counts it), to its session''s row of scsql.session_totals, in the writing transaction. Concurrent writers of one row wait for each other (an upsert), so no addition is lost.';

create or replace function scsql._viewer_totals_model()
returns trigger
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_happened timestamptz := coalesce(new.occurred_at, new.at);
begin
  insert into scsql.usage_days as u (project_id, day, author_id, model, tool, status, model_messages, input_tokens,
                                     output_tokens, cache_write_tokens, cache_read_tokens, cost_usd, unpriced)
  values (new.project_id, (v_happened at time zone 'UTC')::date, new.author_id, new.model, '(model)', null, 1,
          new.input_tokens, new.output_tokens, new.cache_write_tokens, new.cache_read_tokens, coalesce(new.cost_usd, 0),
          (new.cost_usd is null)::integer)
  on conflict on constraint usage_days_key do update
    set model_messages = u.model_messages + 1, input_tokens = u.input_tokens + excluded.input_tokens,
        output_tokens = u.output_tokens + excluded.output_tokens,
        cache_write_tokens = u.cache_write_tokens + excluded.cache_write_tokens,
        cache_read_tokens = u.cache_read_tokens + excluded.cache_read_tokens, cost_usd = u.cost_usd + excluded.cost_usd,
        unpriced = u.unpriced + excluded.unpriced;
  if new.session_id is not null then
    insert into scsql.usage_sessions as u (project_id, session_id, author_id, first_at, last_at, model_messages,
                                           input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, cost_usd,
                                           unpriced)
    values (new.project_id, new.session_id, new.author_id, v_happened, v_happened, 1, new.input_tokens, new.output_tokens,
            new.cache_write_tokens, new.cache_read_tokens, coalesce(new.cost_usd, 0), (new.cost_usd is null)::integer)
    on conflict (project_id, session_id, author_id) do update
      set first_at = least(u.first_at, excluded.first_at), last_at = greatest(u.last_at, excluded.last_at),
          model_messages = u.model_messages + 1, input_tokens = u.input_tokens + excluded.input_tokens,
          output_tokens = u.output_tokens + excluded.output_tokens,
          cache_write_tokens = u.cache_write_tokens + excluded.cache_write_tokens,
          cache_read_tokens = u.cache_read_tokens + excluded.cache_read_tokens, cost_usd = u.cost_usd + excluded.cost_usd,
          unpriced = u.unpriced + excluded.unpriced;
    insert into scsql.session_totals as t (project_id, session_id, model_messages, input_tokens, output_tokens,
                                           cache_tokens, cost_usd, last_at)
    values (new.project_id, new.session_id, 1, new.input_tokens, new.output_tokens,
            new.cache_write_tokens + new.cache_read_tokens, coalesce(new.cost_usd, 0), v_happened)
    on conflict (project_id, session_id) do update
      set model_messages = t.model_messages + 1, input_tokens = t.input_tokens + excluded.input_tokens,
          output_tokens = t.output_tokens + excluded.output_tokens, cache_tokens = t.cache_tokens + excluded.cache_tokens,
          cost_usd = t.cost_usd + excluded.cost_usd, last_at = greatest(t.last_at, excluded.last_at);
  end if;
  return null;
end
$$;
comment on function scsql._viewer_totals_model() is
  'Private trigger (after insert on model_calls): adds the model''s message to scsql.usage_days (tool (model), status NULL), to scsql.usage_sessions and to its session''s row of scsql.session_totals, in the writing transaction.';

create or replace trigger viewer_totals after insert on scsql.prompts for each row execute function scsql._viewer_totals_prompt();
create or replace trigger viewer_totals after insert on scsql.tool_calls for each row execute function scsql._viewer_totals_tool();
create or replace trigger viewer_totals after insert on scsql.model_calls for each row execute function scsql._viewer_totals_model();

create or replace function scsql._viewer_totals_retire(p_partition regclass)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
begin
  if pg_catalog.pg_partition_root(p_partition) is distinct from 'scsql.tool_calls'::regclass then
    return;
  end if;
  -- Writers of prompts and the model's messages wait until the drop commits,
  -- so when each session's last row happened is found again from the rows kept.
  lock table scsql.session_totals, scsql.usage_days, scsql.usage_sessions in exclusive mode;
  execute format($q$
    update scsql.usage_days u
    set tool_calls = u.tool_calls - g.n, input_tokens = u.input_tokens - g.i, output_tokens = u.output_tokens - g.o,
        cost_usd = u.cost_usd - g.c, unpriced = u.unpriced - g.unpriced
    from (select t.project_id, (coalesce(t.occurred_at, t.at) at time zone 'UTC')::date as day, t.author_id, t.model,
                 t.tool, t.status, count(*) as n, sum(t.input_tokens) as i, sum(t.output_tokens) as o,
                 coalesce(sum(t.cost_usd), 0) as c, count(*) filter (where t.cost_usd is null and t.origin = 'model') as unpriced
          from %s t group by 1, 2, 3, 4, 5, 6) g
    where u.project_id = g.project_id and u.day = g.day and u.author_id = g.author_id
      and u.model is not distinct from g.model and u.tool = g.tool and u.status = g.status$q$, p_partition);
  delete from scsql.usage_days u where u.tool_calls = 0 and u.model_messages = 0;
  execute format($q$
    update scsql.usage_sessions u
    set tool_calls = u.tool_calls - g.n, input_tokens = u.input_tokens - g.i, output_tokens = u.output_tokens - g.o,
        cost_usd = u.cost_usd - g.c, unpriced = u.unpriced - g.unpriced
    from (select t.project_id, t.session_id, t.author_id, count(*) as n, sum(t.input_tokens) as i, sum(t.output_tokens) as o,
                 coalesce(sum(t.cost_usd), 0) as c, count(*) filter (where t.cost_usd is null and t.origin = 'model') as unpriced
          from %s t where t.session_id is not null group by 1, 2, 3) g
    where u.project_id = g.project_id and u.session_id = g.session_id and u.author_id = g.author_id$q$, p_partition);
  delete from scsql.usage_sessions u where u.tool_calls = 0 and u.model_messages = 0;
  execute format($q$
    update scsql.session_totals s
    set tool_calls = s.tool_calls - g.n, failures = s.failures - g.failures, input_tokens = s.input_tokens - g.i,
        output_tokens = s.output_tokens - g.o, cost_usd = s.cost_usd - g.c,
        last_at = greatest(
          (select max(coalesce(t.occurred_at, t.at)) from scsql.tool_calls t
           where t.project_id = s.project_id and t.session_id = s.session_id and t.at >= g.written and t.tableoid <> $1),
          (select max(coalesce(r.occurred_at, r.at)) from scsql.prompts r
           where r.project_id = s.project_id and r.session_id = s.session_id),
          (select max(coalesce(m.occurred_at, m.at)) from scsql.model_calls m
           where m.project_id = s.project_id and m.session_id = s.session_id))
    from (select t.project_id, t.session_id, x.at as written, count(*) as n, count(*) filter (where t.status <> 'ok') as failures,
                 sum(t.input_tokens) as i, sum(t.output_tokens) as o, coalesce(sum(t.cost_usd), 0) as c
          from %s t join scsql.sessions x on x.project_id = t.project_id and x.session_id = t.session_id and x.at <= t.at
          group by 1, 2, 3) g
    where s.project_id = g.project_id and s.session_id = g.session_id$q$, p_partition) using p_partition::oid;
end
$$;
comment on function scsql._viewer_totals_retire(regclass) is
  'Private, called by retention (scsql._retire_partition) before it drops a partition: subtracts the partition''s tool calls from scsql.usage_days and scsql.usage_sessions (dropping rows left with nothing; the first and last times of a session stay as they were, a range that still holds its rows) and scsql.session_totals (finding when each session''s last kept row happened), so both sum what retention still keeps. Locks both tables against writers until the drop commits. Does nothing for a partition of another table.';

-- ---------------------------------------------------------------------------
-- Sessions
-- ---------------------------------------------------------------------------

create or replace function scsql_caller.viewer_session_totals(p_project bigint, p_session bigint, p_written timestamptz,
  out prompts bigint, out tool_calls bigint, out failures bigint, out model_messages bigint, out input_tokens bigint,
  out output_tokens bigint, out cache_tokens bigint, out cost_usd numeric, out last_at timestamptz)
language sql stable
as $$
  select p.n, t.n, t.failures, m.n, coalesce(t.input_tokens, 0) + coalesce(m.input_tokens, 0),
         coalesce(t.output_tokens, 0) + coalesce(m.output_tokens, 0), coalesce(m.cache_tokens, 0),
         coalesce(t.cost_usd, 0) + coalesce(m.cost_usd, 0), greatest(p.last_at, t.last_at, m.last_at)
  from (select count(*) as n, max(coalesce(x.occurred_at, x.at)) as last_at from scsql.prompts x
        where x.project_id = p_project and x.session_id = p_session) p,
       (select count(*) as n, count(*) filter (where x.status <> 'ok') as failures, sum(x.input_tokens) as input_tokens,
               sum(x.output_tokens) as output_tokens, sum(x.cost_usd) as cost_usd, max(coalesce(x.occurred_at, x.at)) as last_at
        from scsql.tool_calls x
        where x.project_id = p_project and x.session_id = p_session and x.at >= p_written) t,
       (select count(*) as n, sum(x.input_tokens) as input_tokens, sum(x.output_tokens) as output_tokens,
               sum(x.cache_write_tokens + x.cache_read_tokens) as cache_tokens, sum(x.cost_usd) as cost_usd,
               max(coalesce(x.occurred_at, x.at)) as last_at
        from scsql.model_calls x where x.project_id = p_project and x.session_id = p_session) m
$$;
comment on function scsql_caller.viewer_session_totals(bigint, bigint, timestamptz) is
  'The figures of one session of project P_PROJECT (written at P_WRITTEN, before any of its rows) as the caller may read them: prompts, tool calls, failed tool calls (status other than ok), the model''s messages, input and output tokens (tool calls and the model''s messages), prompt-cache tokens written and read, cost in USD and when its last row happened, summed from the rows (scsql.session_totals keeps the same figures as rows are written; viewer_sessions reads those).';

create or replace function scsql_caller.viewer_session_summary(p_project bigint, p_external_id text)
returns text
language sql stable
as $$
  select coalesce(x.meta #>> '{summary,done,0}', x.meta #>> '{summary,decisions,0}', x.meta #>> '{summary,files,0}',
                  x.meta #>> '{summary,open_tasks,0}')
  from scsql.kb_sources c
  join scsql.kb_sources x on x.project_id = c.project_id and x.kind = 'session_summary' and x.created_at = c.created_at
  where c.project_id = p_project and c.meta ? 'session' and c.meta ->> 'session' = p_external_id
  order by c.created_at desc, x.source_id desc
  limit 1
$$;
comment on function scsql_caller.viewer_session_summary(bigint, text) is
  'The first line of the newest summary of Claude Code session P_EXTERNAL_ID (the hooks write the summary and the conversation text of a session in one transaction), as the caller may read it; NULL when there is none.';

create or replace function scsql.viewer_sessions(
  p_project text default null, p_agent text default null, p_since timestamptz default null,
  p_until timestamptz default null, p_status text default null, p_before text default null,
  p_limit integer default 50, p_session bigint default null)
returns table (session_id bigint, project text, agent text, started_at timestamptz, ended_at timestamptz, client text,
               model text, title text, source text, external_id text, prompts bigint, tool_calls bigint, failures bigint,
               model_messages bigint, input_tokens bigint, output_tokens bigint, cache_tokens bigint, cost_usd numeric,
               summary text, chain_id bigint, seq bigint, quarantine text, cursor text)
language plpgsql stable
as $$
#variable_conflict use_column
declare
  f record;
  c record;
begin
  select * into f from scsql_caller.viewer_filter(p_project, p_agent, p_since, p_until, p_limit, 500);
  if p_status is not null and p_status not in ('failed', 'clean') then
    raise exception using errcode = 'SC010', message = format('status must be failed or clean, got %L', left(p_status, 40));
  end if;
  select * into c from scsql_caller.viewer_cursor_parts(p_before);
  -- Planned for these values each call (a plan for any values could not
  -- start the index scan at the cursor), with one ORDER BY and LIMIT over the
  -- joined rows: the sessions are read newest first by index, from the cursor
  -- on, and the scan stops at the limit.
  return query execute $q$
  select s.session_id, p.name::text, a.name::text, s.started, coalesce(greatest(s.started, t.last_at), s.started),
         s.client, s.model, s.title, s.source, s.external_id, coalesce(t.prompts, 0), coalesce(t.tool_calls, 0),
         coalesce(t.failures, 0), coalesce(t.model_messages, 0), coalesce(t.input_tokens, 0), coalesce(t.output_tokens, 0),
         coalesce(t.cache_tokens, 0), coalesce(t.cost_usd, 0),
         scsql_caller.viewer_session_summary(s.project_id, s.external_id),
         s.chain_id, s.seq, scsql_caller.viewer_quarantine(s.chain_id), scsql_caller.viewer_cursor(s.started, 0, s.session_id)
  from (select x.*, coalesce(x.occurred_at, x.at) as started from scsql.sessions x
        where ($1::bigint is null or x.project_id = $1) and ($2::bigint is null or x.author_id = $2)
          and ($3::bigint is null or x.session_id = $3)
          and ($4::timestamptz is null or coalesce(x.occurred_at, x.at) >= $4)
          and ($5::timestamptz is null or coalesce(x.occurred_at, x.at) < $5)
          and ($6::timestamptz is null or (coalesce(x.occurred_at, x.at), x.session_id) < ($6, $7::bigint))) s
  left join scsql.session_totals t on t.project_id = s.project_id and t.session_id = s.session_id
  join scsql.projects p on p.project_id = s.project_id
  left join scsql.agents a on a.agent_id = s.author_id
  where $8::text is null or ($8 = 'failed') = (coalesce(t.failures, 0) > 0)
  order by s.started desc, s.session_id desc
  limit $9$q$
  using f.project_id, f.agent_id, p_session, p_since, p_until, c.happened, c.id, p_status, p_limit;
end
$$;
comment on function scsql.viewer_sessions(text, text, timestamptz, timestamptz, text, text, integer, bigint) is
  'Sessions you may read, newest first (by when they began), one row each with their figures: the sessions page of scsql ui.

p_project: only this project
p_agent: only this agent''s
p_since: began at or after
p_until: began before
p_status (failed|clean): with or without a failed tool call
p_before: the cursor of the last row of the previous page
p_limit (1..500): rows at most
p_session: only this session

Returns session_id, project, agent, started_at, ended_at (its last row), client, model, title, source, external_id (the client''s id), prompts, tool_calls, failures, model_messages, input_tokens, output_tokens, cache_tokens, cost_usd (tool calls and the model''s messages), summary (the first line of its newest summary), chain_id and seq of its row, quarantine (open, acknowledged or NULL: see viewer_quarantine) and cursor. Raises SC005/SC003 for a project or agent you cannot see, SC010 for a bad status, range, limit or cursor.';

-- ---------------------------------------------------------------------------
-- One session's timeline
-- ---------------------------------------------------------------------------

create or replace function scsql_caller.viewer_capture_events(
  p_project bigint, p_session bigint, p_written timestamptz, p_after timestamptz, p_rank integer, p_id bigint,
  p_limit integer)
returns table (rank integer, id bigint, happened timestamptz, written_at timestamptz, author_id bigint, chain_id bigint,
               seq bigint, status text, title text, body text, duration_ms integer, files text[], input_tokens bigint,
               output_tokens bigint, cost_usd numeric, ref text, altered jsonb)
language sql stable
as $$
  (select 1, x.prompt_id, coalesce(x.occurred_at, x.at), x.at, x.author_id, x.chain_id, x.seq, null::text, 'prompt',
          coalesce(x.text, '[purged]'), null::integer, null::text[], null::bigint, null::bigint, null::numeric, 'prompt:' || x.prompt_id, x.altered
   from scsql.prompts x
   where x.project_id = p_project and x.session_id = p_session and coalesce(x.occurred_at, x.at) >= p_after
     and (coalesce(x.occurred_at, x.at), 1, x.prompt_id) > (p_after, p_rank, p_id)
   order by coalesce(x.occurred_at, x.at), x.prompt_id limit scsql_caller.viewer_limit(p_limit))
  union all
  (select 2, x.model_call_id, coalesce(x.occurred_at, x.at), x.at, x.author_id, x.chain_id, x.seq, null, coalesce(x.model, 'model'),
          format('%s input, %s output, %s cache write, %s cache read tokens; %s tool call(s)', x.input_tokens,
                 x.output_tokens, x.cache_write_tokens, x.cache_read_tokens, coalesce(jsonb_array_length(x.tool_use_ids), 0)),
          null, null, x.input_tokens + x.cache_write_tokens + x.cache_read_tokens, x.output_tokens::bigint, x.cost_usd,
          'model:' || x.model_call_id, null::jsonb
   from scsql.model_calls x
   where x.project_id = p_project and x.session_id = p_session and coalesce(x.occurred_at, x.at) >= p_after
     and (coalesce(x.occurred_at, x.at), 2, x.model_call_id) > (p_after, p_rank, p_id)
   order by coalesce(x.occurred_at, x.at), x.model_call_id limit scsql_caller.viewer_limit(p_limit))
  union all
  (select 3, x.tool_call_id, coalesce(x.occurred_at, x.at), x.at, x.author_id, x.chain_id, x.seq, x.status, x.tool,
          case when x.input_preview is null and x.input_preview_sha256 is not null then '[purged]' else x.input_preview end,
          x.latency_ms, array(select jsonb_array_elements_text(x.files)), x.input_tokens::bigint,
          x.output_tokens::bigint, x.cost_usd, 'tool:' || x.tool_call_id, x.altered
   from scsql.tool_calls x
   where x.project_id = p_project and x.session_id = p_session and x.at >= p_written
     and coalesce(x.occurred_at, x.at) >= p_after
     and (coalesce(x.occurred_at, x.at), 3, x.tool_call_id) > (p_after, p_rank, p_id)
   order by coalesce(x.occurred_at, x.at), x.tool_call_id limit scsql_caller.viewer_limit(p_limit))
  union all
  (select 4, x.outcome_id, x.at, x.at, x.author_id, x.chain_id, x.seq, x.kind, x.signal, coalesce(x.summary, '[purged]'), null, null, null, null,
          null, 'outcome:' || x.outcome_id, null
   from scsql.outcomes x
   where x.project_id = p_project and x.session_id = p_session and x.at >= greatest(p_written, p_after)
     and (x.at, 4, x.outcome_id) > (p_after, p_rank, p_id)
   order by x.at, x.outcome_id limit scsql_caller.viewer_limit(p_limit))
$$;
comment on function scsql_caller.viewer_capture_events(bigint, bigint, timestamptz, timestamptz, integer, bigint, integer) is
  'The prompts (rank 1), model messages (2), tool calls (3) and outcomes (4) of session P_SESSION of project P_PROJECT (written at P_WRITTEN) after the keyset position (P_AFTER, P_RANK, P_ID), at most P_LIMIT (1 to 1,000) of each, as the caller may read them. Used by scsql.viewer_timeline; raises SC010 for another limit.';

create or replace function scsql_caller.viewer_context_events(
  p_project bigint, p_author bigint, p_from timestamptz, p_to timestamptz, p_after timestamptz, p_rank integer,
  p_id bigint, p_limit integer)
returns table (rank integer, id bigint, happened timestamptz, written_at timestamptz, author_id bigint, chain_id bigint,
               seq bigint, status text, title text, body text, duration_ms integer, files text[], input_tokens bigint,
               output_tokens bigint, cost_usd numeric, ref text, altered jsonb)
language sql stable
as $$
  (select 5, x.message_id, x.at, x.at, x.author_id, x.chain_id, x.seq, null::text,
          x.type || case when x.author_id = p_author then ' to ' || coalesce(x.to_agent, 'role ' || x.to_role)
                         else ' from ' || coalesce((select a.name from scsql.agents a where a.agent_id = x.author_id), 'agent ' || x.author_id) end,
          x.payload::text, null::integer, null::text[], null::bigint, null::bigint, null::numeric, 'message:' || x.message_id,
          null::jsonb
   from scsql.messages x
   where x.project_id = p_project and x.at >= greatest(p_from, p_after) and x.at < p_to
     and (x.author_id = p_author or x.to_agent_id = p_author
          or x.to_role = (select a.team_role from scsql.agents a where a.agent_id = p_author))
     and (x.at, 5, x.message_id) > (p_after, p_rank, p_id)
   order by x.at, x.message_id limit scsql_caller.viewer_limit(p_limit))
  union all
  (select 6, x.change_id, x.at, x.at, x.author_id, x.chain_id, x.seq, x.op, x.op || ' ' || x.kind || ' ' || x.target,
          coalesce((select d.title from scsql.decisions d
                    where x.kind = 'decision' and d.project_id = x.project_id and 'decision:' || d.decision_id = x.target),
                   (select l.text from scsql.open_loops l
                    where x.kind = 'loop' and l.project_id = x.project_id and 'loop:' || l.loop_id = x.target),
                   x.reason),
          null, null, null, null, null,
          case when x.chunk_hash is not null then 'chunk:' || x.chunk_hash when x.kind = 'fact' then 'fact:' || x.target
               when x.kind = 'source' then 'source:' || x.target else 'memory:' || x.change_id end, null
   from scsql.memory_changes x
   where x.project_id = p_project and x.author_id = p_author and x.at >= greatest(p_from, p_after) and x.at < p_to
     and (x.at, 6, x.change_id) > (p_after, p_rank, p_id)
   order by x.at, x.change_id limit scsql_caller.viewer_limit(p_limit))
$$;
comment on function scsql_caller.viewer_context_events(bigint, bigint, timestamptz, timestamptz, timestamptz, integer, bigint, integer) is
  'What agent P_AUTHOR of project P_PROJECT did around its session, from P_FROM until P_TO (its next session): the messages it sent and received (rank 5) and its memory changes (6: facts, sources, chunks, learnings, decisions, open loops), after the keyset position (P_AFTER, P_RANK, P_ID), at most P_LIMIT (1 to 1,000) of each, as the caller may read them. Used by scsql.viewer_timeline; raises SC010 for another limit.';

create or replace function scsql.viewer_timeline(
  p_session bigint, p_after text default null, p_limit integer default 100, p_kinds text[] default null,
  p_status text default null)
returns table (cursor text, kind text, id bigint, happened timestamptz, written_at timestamptz, author text,
               chain_id bigint, seq bigint, quarantine text, status text, title text, preview text, more boolean,
               duration_ms integer, files text[], input_tokens bigint, output_tokens bigint, cost_usd numeric, ref text,
               altered jsonb)
language plpgsql stable
as $$
#variable_conflict use_column
declare
  v_kinds constant text[] := array['session', 'prompt', 'model', 'tool', 'outcome', 'message', 'memory'];
  s record;
  c record;
  v_next timestamptz;
begin
  if p_limit is null or p_limit not between 1 and 1000 then
    raise exception using errcode = 'SC010', message = format('limit must be 1 to 1,000, got %s', coalesce(p_limit::text, 'NULL'));
  end if;
  if p_kinds is not null and not p_kinds <@ v_kinds then
    raise exception using errcode = 'SC010', message = format('kinds must be among %s', array_to_string(v_kinds, ', '));
  end if;
  if p_status is not null and char_length(p_status) > 40 then
    raise exception using errcode = 'SC010', message = 'status is at most 40 characters';
  end if;
  select x.*, coalesce(x.occurred_at, x.at) as started into s from scsql.sessions x where x.session_id = p_session;
  if not found then
    raise exception using errcode = 'SC600', message = format('no session %s is visible to you', coalesce(p_session::text, 'NULL')),
      hint = 'scsql.viewer_sessions() lists the sessions you may read.';
  end if;
  select * into c from scsql_caller.viewer_cursor_parts(p_after);
  if c.happened is null then  -- the first page: before every row
    c.happened := '-infinity'; c.rank := -1; c.id := 0;
  end if;
  select min(coalesce(n.occurred_at, n.at)) into v_next from scsql.sessions n
  where n.project_id = s.project_id and n.author_id = s.author_id and coalesce(n.occurred_at, n.at) > s.started;
  return query
  select scsql_caller.viewer_cursor(e.happened, e.rank, e.id), v_kinds[e.rank + 1], e.id, e.happened, e.written_at,
         a.name::text, e.chain_id, e.seq, scsql_caller.viewer_quarantine(e.chain_id, e.seq), e.status, e.title,
         left(e.body, 300), char_length(e.body) > 300, e.duration_ms, e.files, e.input_tokens, e.output_tokens,
         e.cost_usd, e.ref, e.altered
  from (select 0 as rank, s.session_id as id, s.started as happened, s.at as written_at, s.author_id, s.chain_id, s.seq,
               null::text as status, coalesce(s.client, 'session') as title,
               concat_ws(' · ', s.title, s.model, s.cwd, s.git_branch) as body, null::integer as duration_ms,
               null::text[] as files, null::bigint as input_tokens, null::bigint as output_tokens, null::numeric as cost_usd,
               'session:' || s.session_id as ref, s.altered
        where (s.started, 0, s.session_id) > (c.happened, c.rank, c.id)
        union all
        select * from scsql_caller.viewer_capture_events(s.project_id, s.session_id, s.at, c.happened, c.rank, c.id, p_limit)
        union all
        select * from scsql_caller.viewer_context_events(s.project_id, s.author_id, s.started, coalesce(v_next, 'infinity'),
                                                         c.happened, c.rank, c.id, p_limit)) e
  left join scsql.agents a on a.agent_id = e.author_id
  where v_kinds[e.rank + 1] = any (coalesce(p_kinds, v_kinds)) and (p_status is null or e.status = p_status)
  order by e.happened, e.rank, e.id
  limit p_limit;
end
$$;
comment on function scsql.viewer_timeline(bigint, text, integer, text[], text) is
  'One session''s events in the order they happened: the session timeline of scsql ui.

p_session: the session (viewer_sessions lists them)
p_after: the cursor of the last row of the previous page
p_limit (1..1000): rows at most
p_kinds: only these kinds (session, prompt, model, tool, outcome, message, memory)
p_status: only rows of this status (a tool call''s ok, error, timeout, cancelled, denied; an outcome''s kind; a memory change''s op)

The session''s own row, its prompts, the model''s messages (tokens, cost), its tool calls (tool, input preview, status, duration, files touched), its outcomes, and, from its start until the same agent''s next session, the messages the agent sent and received and its memory changes (facts, sources, chunks, learnings, decisions, open loops). Each row: cursor, kind, id, happened, written_at, author, chain_id and seq (its place in its author''s chain), quarantine (open, acknowledged or NULL: see viewer_quarantine), status, title, preview (the first 300 characters), more (the stored text is longer: viewer_event shows it), duration_ms, files, tokens, cost_usd, ref (what viewer_event takes) and altered (how capture changed the text to store it). Raises SC600 for a session you cannot see, SC010 for a bad limit, kind, status or cursor.';

-- ---------------------------------------------------------------------------
-- One row in full: what a timeline row links to
-- ---------------------------------------------------------------------------

create or replace function scsql.viewer_event(p_ref text, p_project text default null)
returns table (kind text, id bigint, project text, session_id bigint, happened timestamptz, written_at timestamptz,
               author text, chain_id bigint, seq bigint, quarantine text, row_hash text, fields jsonb)
language plpgsql stable
as $$
#variable_conflict use_column
declare
  f record;
  v_kind text := split_part(p_ref, ':', 1);
  v_id text := substr(p_ref, char_length(split_part(p_ref, ':', 1)) + 2);
  v_table text;
  v_col text;
  r jsonb;
begin
  select * into f from scsql_caller.viewer_filter(p_project, null, null, null, 1);
  select t.tab, t.col into v_table, v_col
  from (values ('session', 'sessions', 'session_id'), ('prompt', 'prompts', 'prompt_id'),
               ('model', 'model_calls', 'model_call_id'), ('tool', 'tool_calls', 'tool_call_id'),
               ('outcome', 'outcomes', 'outcome_id'), ('message', 'messages', 'message_id'),
               ('memory', 'memory_changes', 'change_id')) t(kind, tab, col)
  where t.kind = v_kind;
  if v_table is null or v_id !~ '^[0-9]{1,18}$' then
    raise exception using errcode = 'SC010', message = format('%L names no row', left(p_ref, 80)),
      hint = 'Give KIND:ID, KIND one of session, prompt, model, tool, outcome, message, memory (a timeline row''s ref).';
  end if;
  execute format('select to_jsonb(x) from scsql.%I x where ($2::bigint is null or x.project_id = $2) and x.%I = $1 limit 1',
                 v_table, v_col)
    into r using v_id::bigint, f.project_id;
  if r is null then
    raise exception using errcode = 'SC600', message = format('no %s %s is visible to you', v_kind, v_id);
  end if;
  return query
  select v_kind, v_id::bigint, (select p.name::text from scsql.projects p where p.project_id = (r ->> 'project_id')::bigint),
         (r ->> 'session_id')::bigint, coalesce((r ->> 'occurred_at')::timestamptz, (r ->> 'at')::timestamptz),
         (r ->> 'at')::timestamptz,
         (select a.name::text from scsql.agents a where a.agent_id = (r ->> 'author_id')::bigint),
         (r ->> 'chain_id')::bigint, (r ->> 'seq')::bigint,
         scsql_caller.viewer_quarantine((r ->> 'chain_id')::bigint, (r ->> 'seq')::bigint),
         ltrim(r ->> 'row_hash', '\x'),
         r - array['project_id', 'author_id', 'chain_id', 'seq', 'prev_hash', 'row_hash', 'key_id', 'at', 'signature'];
end
$$;
comment on function scsql.viewer_event(text, text) is
  'One row of a timeline in full, as stored: the page a timeline row links to.

p_ref: KIND:ID as the timeline''s ref column gives it (session, prompt, model, tool, outcome, message, memory)
p_project: the project it belongs to (finds it faster)

Returns kind, id, project, session_id, happened, written_at, author, chain_id, seq, quarantine, row_hash (hex) and fields (every other stored column, as JSON: a prompt''s whole text, a tool call''s full stored previews). Raises SC010 for a malformed ref, SC600 for a row you cannot see, SC005 for a project you cannot see.';

create or replace function scsql.viewer_source(p_ref text, p_project text default null)
returns table (project text, kind text, path text, seq integer, chunk_hash text, anchor text, line_start integer,
               line_end integer, focus boolean, trust text, content text, written_at timestamptz)
language plpgsql stable
as $$
#variable_conflict use_column
declare
  f record;
begin
  select * into f from scsql_caller.viewer_filter(p_project, null, null, null, 1);
  if p_ref is null or char_length(p_ref) not between 1 and 1030 then
    raise exception using errcode = 'SC010', message = 'give chunk:HASH, source:PATH, fact:KEY or decision:ID';
  end if;
  if p_ref like 'fact:%' then
    return query
    select p.name::text, 'fact'::text, m.key, 1, null::text, m.key, null::integer, null::integer, true, 'internal'::text,
           m.key || ': ' || m.value, m.updated_at
    from scsql.memory_facts m join scsql.projects p on p.project_id = m.project_id
    where (f.project_id is null or m.project_id = f.project_id) and m.key = substr(p_ref, 6)
    order by p.name;
  elsif p_ref ~ '^decision:[0-9]{1,18}$' then
    return query
    select p.name::text, 'decision'::text, p_ref, 1, null::text, d.title, null::integer, null::integer, true, 'internal'::text,
           d.title || E'\n\n' || d.rationale, d.decided_at
    from scsql.decisions d join scsql.projects p on p.project_id = d.project_id
    where (f.project_id is null or d.project_id = f.project_id) and d.decision_id = substr(p_ref, 10)::bigint;
  else
    return query
    select p.name::text, s.kind, s.path, c.seq, c.chunk_hash, c.anchor, c.line_start, c.line_end,
           p_ref like 'chunk:%' and c.chunk_hash = substr(p_ref, 7), s.trust,
           case when c.purged_at is null then c.content else '[purged]' end, c.created_at
    from scsql.kb_sources s
    join scsql.kb_chunks c on c.project_id = s.project_id and c.source_id = s.source_id
    join scsql.projects p on p.project_id = s.project_id
    where (f.project_id is null or s.project_id = f.project_id)
      and ((p_ref like 'source:%' and s.path = substr(p_ref, 8))
           or (p_ref like 'chunk:%' and s.source_id in (select k.source_id from scsql.kb_chunks k
                                                         where k.project_id = s.project_id and k.chunk_hash = substr(p_ref, 7))))
    order by p.name, s.path, c.seq;
  end if;
  if not found then
    raise exception using errcode = 'SC600', message = format('no %s is visible to you', left(p_ref, 100));
  end if;
end
$$;
comment on function scsql.viewer_source(text, text) is
  'A fact, a decision, a source or the source holding a chunk, in full, as row-level security shows it: where a timeline or search row cites it.

p_ref: fact:KEY, decision:ID, source:PATH or chunk:CHUNK_HASH
p_project: only this project

Returns project, kind, path, seq, chunk_hash, anchor, line_start, line_end, focus (the chunk named), trust (external text is data, never instructions), content and written_at, one row per chunk in order. Raises SC010 for a malformed ref, SC600 when nothing you can see has it.';

-- ---------------------------------------------------------------------------
-- Memory: facts and their history, decisions, open loops
-- ---------------------------------------------------------------------------

create or replace function scsql.viewer_facts(p_project text default null, p_query text default null,
                                              p_after text default null, p_limit integer default 100)
returns table (project text, key text, value text, importance smallint, pinned boolean, expires_at timestamptz,
               created_at timestamptz, updated_at timestamptz, updated_by text, use_count integer,
               last_used_at timestamptz, versions bigint, open_conflicts bigint, cursor text)
language plpgsql stable
as $$
#variable_conflict use_column
declare
  f record;
begin
  select * into f from scsql_caller.viewer_filter(p_project, null, null, null, p_limit, 500);
  if char_length(p_query) > 200 then
    raise exception using errcode = 'SC010', message = 'the filter is at most 200 characters';
  end if;
  return query
  select p.name::text, m.key, m.value, m.importance, m.importance = 5, m.expires_at, m.created_at, m.updated_at,
         a.name::text, m.use_count, m.last_used_at,
         (select count(*) from scsql.fact_versions v where v.project_id = m.project_id and v.key = m.key),
         (select count(*) from scsql.fact_conflicts x where x.project_id = m.project_id and x.resolved_at is null
            and (x.key = m.key or x.other_key = m.key)),
         p.name || '/' || m.key
  from scsql.memory_facts m
  join scsql.projects p on p.project_id = m.project_id
  left join scsql.agents a on a.agent_id = m.updated_by
  where (f.project_id is null or m.project_id = f.project_id)
    and (p_query is null or strpos(lower(m.key || ' ' || m.value), lower(p_query)) > 0)
    and (p_after is null or (p.name || '/' || m.key) > p_after)
  order by p.name || '/' || m.key
  limit p_limit;
end
$$;
comment on function scsql.viewer_facts(text, text, text, integer) is
  'Working memory as you may read it, by project and key: the facts of the memory page of scsql ui.

p_project: only this project
p_query: only facts whose key or value holds this text (any case)
p_after: the cursor of the last row of the previous page
p_limit (1..500): rows at most

Returns project, key, value, importance, pinned (importance 5: never evicted), expires_at (its TTL), created_at, updated_at, updated_by, use_count, last_used_at, versions (earlier values kept as history), open_conflicts and cursor. Raises SC005 for a project you cannot see, SC010 for a bad filter or limit.';

create or replace function scsql.viewer_fact_history(p_key text, p_project text default null)
returns table (project text, at timestamptz, what text, agent text, op text, value text, reason text, related text)
language plpgsql stable
as $$
#variable_conflict use_column
declare
  f record;
begin
  select * into f from scsql_caller.viewer_filter(p_project, null, null, null, 1);
  if p_key is null or char_length(p_key) not between 1 and 1024 then
    raise exception using errcode = 'SC010', message = 'give a fact''s key (1 to 1,024 characters)';
  end if;
  return query
  select p.name::text, h.at, h.what, a.name::text, h.op, h.value, h.reason, h.related
  from (select m.project_id, m.at, 'change' as what, m.author_id as agent_id, m.op, null::text as value, m.reason, m.related
        from scsql.memory_changes m
        where (f.project_id is null or m.project_id = f.project_id) and (m.target = p_key or m.related = p_key)
        union all
        select v.project_id, v.superseded_at, 'superseded', v.superseded_by, 'supersede', v.value, v.reason, null
        from scsql.fact_versions v where (f.project_id is null or v.project_id = f.project_id) and v.key = p_key
        union all
        select x.project_id, coalesce(x.resolved_at, x.detected_at), 'conflict', coalesce(x.resolved_by, x.detected_by),
               coalesce(x.resolution, 'open'), null, x.note, case when x.key = p_key then x.other_key else x.key end
        from scsql.fact_conflicts x
        where (f.project_id is null or x.project_id = f.project_id) and (x.key = p_key or x.other_key = p_key)) h
  join scsql.projects p on p.project_id = h.project_id
  left join scsql.agents a on a.agent_id = h.agent_id
  order by h.at desc, h.what
  limit 500;
end
$$;
comment on function scsql.viewer_fact_history(text, text) is
  'The history of a working-memory fact as you may read it, newest first: its changes (remember, supersede, refresh, forget, archive, conflict, resolve, ...), the values it had before (superseded, with why), and its conflicts with other facts (open, or how they were settled).

p_key: the fact''s key
p_project: only this project

Returns project, at, what (change, superseded, conflict), agent, op, value, reason, related (the other key), at most 500 rows. Raises SC010 for a bad key, SC005 for a project you cannot see.';

create or replace function scsql.viewer_decisions(p_project text default null, p_status text default null,
                                                  p_limit integer default 100)
returns table (project text, decision_id bigint, title text, rationale text, status text, supersedes bigint,
               superseded_by bigint, decided_by text, decided_at timestamptz, source_path text)
language plpgsql stable
as $$
#variable_conflict use_column
declare
  f record;
begin
  select * into f from scsql_caller.viewer_filter(p_project, null, null, null, p_limit, 500);
  if p_status is not null and p_status not in ('current', 'superseded') then
    raise exception using errcode = 'SC010', message = format('status must be current or superseded, got %L', left(p_status, 40));
  end if;
  return query
  select p.name::text, d.decision_id, d.title, d.rationale, case when n.decision_id is null then 'current' else 'superseded' end,
         d.supersedes, n.decision_id, a.name::text, d.decided_at, d.source_path
  from scsql.decisions d
  join scsql.projects p on p.project_id = d.project_id
  left join scsql.decisions n on n.project_id = d.project_id and n.supersedes = d.decision_id
  left join scsql.agents a on a.agent_id = d.decided_by
  where (f.project_id is null or d.project_id = f.project_id)
    and (p_status is null or (p_status = 'current') = (n.decision_id is null))
  order by d.decided_at desc, d.decision_id desc
  limit p_limit;
end
$$;
comment on function scsql.viewer_decisions(text, text, integer) is
  'Decisions you may read, newest first, current and superseded (with what superseded them).

p_project: only this project
p_status (current|superseded): only these
p_limit (1..500): rows at most

Returns project, decision_id, title, rationale, status, supersedes, superseded_by, decided_by, decided_at, source_path. Raises SC005 for a project you cannot see, SC010 for a bad status or limit.';

create or replace function scsql.viewer_loops(p_project text default null, p_status text default null,
                                              p_limit integer default 100)
returns table (project text, loop_id bigint, text text, owner text, status text, opened_by text, opened_at timestamptz,
               closed_by text, closed_at timestamptz, resolution text, source_path text)
language plpgsql stable
as $$
#variable_conflict use_column
declare
  f record;
begin
  select * into f from scsql_caller.viewer_filter(p_project, null, null, null, p_limit, 500);
  if p_status is not null and p_status not in ('open', 'closed') then
    raise exception using errcode = 'SC010', message = format('status must be open or closed, got %L', left(p_status, 40));
  end if;
  return query
  select p.name::text, l.loop_id, l.text, l.owner, case when l.closed_at is null then 'open' else 'closed' end,
         o.name::text, l.opened_at, c.name::text, l.closed_at, l.resolution, l.source_path
  from scsql.open_loops l
  join scsql.projects p on p.project_id = l.project_id
  left join scsql.agents o on o.agent_id = l.opened_by
  left join scsql.agents c on c.agent_id = l.closed_by
  where (f.project_id is null or l.project_id = f.project_id)
    and (p_status is null or (p_status = 'open') = (l.closed_at is null))
  order by l.closed_at is not null, l.opened_at desc, l.loop_id desc
  limit p_limit;
end
$$;
comment on function scsql.viewer_loops(text, text, integer) is
  'Open loops you may read, open ones first, newest first: what is still to be done, who owns it, and how closed ones were resolved.

p_project: only this project
p_status (open|closed): only these
p_limit (1..500): rows at most

Returns project, loop_id, text, owner, status, opened_by, opened_at, closed_by, closed_at, resolution, source_path. Raises SC005 for a project you cannot see, SC010 for a bad status or limit.';

-- ---------------------------------------------------------------------------
-- Coordination: the queue, leases, exclusive files, messages
-- ---------------------------------------------------------------------------

create or replace function scsql.viewer_queue(p_project text default null)
returns table (project text, team_role text, state text, tasks bigint, oldest timestamptz, next_expiry timestamptz)
language plpgsql stable
as $$
#variable_conflict use_column
declare
  f record;
begin
  select * into f from scsql_caller.viewer_filter(p_project, null, null, null, 1);
  return query
  select p.name::text, q.team_role, q.state, q.n, q.oldest, q.next_expiry
  from (select t.project_id, t.team_role,
               case when t.state = 'claimed' and t.lease_expires_at < now() then 'expired'
                    when t.state = 'queued' and t.run_after > now() then 'scheduled' else t.state end as state,
               count(*) as n, min(t.created_at) as oldest, min(t.lease_expires_at) as next_expiry
        from scsql.tasks t where f.project_id is null or t.project_id = f.project_id group by 1, 2, 3
        union all
        select t.project_id, t.team_role, t.state, count(*), min(t.finished_at), null
        from scsql.tasks_archive t where f.project_id is null or t.project_id = f.project_id group by 1, 2, 3) q
  join scsql.projects p on p.project_id = q.project_id
  order by p.name, q.team_role, array_position(array['queued', 'scheduled', 'claimed', 'expired', 'done', 'dead',
                                                     'released', 'cancelled'], q.state);
end
$$;
comment on function scsql.viewer_queue(text) is
  'The task queue by project, team role and state: queued, scheduled (queued to run later), claimed, expired (claimed, lease run out), and the finished ones (done, dead, released, cancelled), with the oldest task''s time and the next lease to expire. Returns project, team_role, state, tasks, oldest, next_expiry. Raises SC005 for a project you cannot see.';

create or replace function scsql.viewer_tasks(p_project text default null, p_state text default null,
                                              p_role text default null, p_limit integer default 100)
returns table (project text, task_id bigint, team_role text, state text, priority integer, attempts integer,
               max_attempts integer, holder text, claimed_at timestamptz, lease_expires_at timestamptz,
               exclusive_files text[], last_error text, created_by text, created_at timestamptz, finished_at timestamptz)
language plpgsql stable
as $$
#variable_conflict use_column
declare
  f record;
begin
  select * into f from scsql_caller.viewer_filter(p_project, null, null, null, p_limit, 500);
  if p_state is not null and p_state not in ('queued', 'claimed', 'done', 'dead', 'released', 'cancelled') then
    raise exception using errcode = 'SC010',
      message = format('state must be queued, claimed, done, dead, released or cancelled, got %L', left(p_state, 40));
  end if;
  return query
  select p.name::text, t.task_id, t.team_role, t.state, t.priority, t.attempts, t.max_attempts, h.name::text, t.claimed_at,
         t.lease_expires_at, t.exclusive_files, t.last_error, c.name::text, t.created_at, t.finished_at
  from (select x.project_id, x.task_id, x.team_role, x.state, x.priority, x.attempts, x.max_attempts, x.claimed_by,
               x.claimed_at, x.lease_expires_at, x.exclusive_files, x.last_error, x.created_by, x.created_at,
               null::timestamptz as finished_at
        from scsql.tasks x where coalesce(p_state, 'queued') in ('queued', 'claimed')
        union all
        select x.project_id, x.task_id, x.team_role, x.state, x.priority, x.attempts, x.max_attempts, x.claimed_by,
               null, null, x.exclusive_files, x.last_error, x.created_by, x.created_at, x.finished_at
        from scsql.tasks_archive x where coalesce(p_state, 'done') not in ('queued', 'claimed')) t
  join scsql.projects p on p.project_id = t.project_id
  left join scsql.agents h on h.agent_id = t.claimed_by
  left join scsql.agents c on c.agent_id = t.created_by
  where (f.project_id is null or t.project_id = f.project_id) and (p_state is null or t.state = p_state)
    and (p_role is null or t.team_role = p_role)
  order by t.finished_at is not null, coalesce(t.finished_at, t.created_at) desc, t.task_id desc
  limit p_limit;
end
$$;
comment on function scsql.viewer_tasks(text, text, text, integer) is
  'Tasks you may read: those in the queue first (queued and claimed, with their holder, lease expiry and exclusive files), then finished ones (dead tasks with their last error), newest first.

p_project: only this project
p_state (queued|claimed|done|dead|released|cancelled): only these
p_role: only this team role''s
p_limit (1..500): rows at most

Returns project, task_id, team_role, state, priority, attempts, max_attempts, holder (the claiming agent), claimed_at, lease_expires_at, exclusive_files, last_error, created_by, created_at, finished_at. Raises SC005 for a project you cannot see, SC010 for a bad state or limit.';

create or replace function scsql.viewer_files(p_project text default null)
returns table (project text, path text, task_id bigint, state text, team_role text, holder text,
               lease_expires_at timestamptz)
language plpgsql stable
as $$
#variable_conflict use_column
declare
  f record;
begin
  select * into f from scsql_caller.viewer_filter(p_project, null, null, null, 1);
  return query
  select p.name::text, h.path, t.task_id, t.state, t.team_role, a.name::text, t.lease_expires_at
  from scsql.task_files h
  join scsql.tasks t on t.project_id = h.project_id and t.task_id = h.task_id
  join scsql.projects p on p.project_id = h.project_id
  left join scsql.agents a on a.agent_id = t.claimed_by
  where f.project_id is null or h.project_id = f.project_id
  order by p.name, h.path, t.task_id
  limit 2000;
end
$$;
comment on function scsql.viewer_files(text) is
  'The files queued and claimed tasks own exclusively, and who holds each (the claiming agent; NULL while queued for its team role), at most 2,000. Returns project, path, task_id, state, team_role, holder, lease_expires_at. Raises SC005 for a project you cannot see.';

create or replace function scsql.viewer_messages(p_project text default null, p_before text default null,
                                                 p_limit integer default 50)
returns table (project text, message_id bigint, at timestamptz, type text, sender text, recipient text, task_id bigint,
               payload text, acks bigint, chain_id bigint, seq bigint, cursor text)
language plpgsql stable
as $$
#variable_conflict use_column
declare
  f record;
  c record;
begin
  select * into f from scsql_caller.viewer_filter(p_project, null, null, null, p_limit, 500);
  select * into c from scsql_caller.viewer_cursor_parts(p_before);
  return query
  select p.name::text, m.message_id, m.at, m.type, a.name::text, coalesce(m.to_agent, 'role ' || m.to_role), m.task_id,
         left(m.payload::text, 500),
         (select count(*) from scsql.message_acks k where k.project_id = m.project_id and k.message_id = m.message_id),
         m.chain_id, m.seq, scsql_caller.viewer_cursor(m.at, 5, m.message_id)
  from scsql.messages m
  join scsql.projects p on p.project_id = m.project_id
  left join scsql.agents a on a.agent_id = m.author_id
  where (f.project_id is null or m.project_id = f.project_id)
    and (c.happened is null or (m.at, m.message_id) < (c.happened, c.id))
  order by m.at desc, m.message_id desc
  limit p_limit;
end
$$;
comment on function scsql.viewer_messages(text, text, integer) is
  'Broadcast messages you may read, newest first.

p_project: only this project
p_before: the cursor of the last row of the previous page
p_limit (1..500): rows at most

Returns project, message_id, at, type, sender, recipient (an agent, or role NAME), task_id, payload (its first 500 characters, as JSON text), acks, chain_id, seq, cursor. Raises SC005 for a project you cannot see, SC010 for a bad limit or cursor.';

-- ---------------------------------------------------------------------------
-- Audit: chains, checkpoints, quarantines, verification, redactions
-- ---------------------------------------------------------------------------

create or replace function scsql.viewer_chains(p_project text default null)
returns table (project text, agent text, chain_id bigint, head_seq bigint, horizon_seq bigint, checkpoint_id bigint,
               checkpoint_at timestamptz, checkpointed_seq bigint, rows_since_checkpoint bigint, quarantine text)
language plpgsql stable
as $$
#variable_conflict use_column
declare
  f record;
begin
  select * into f from scsql_caller.viewer_filter(p_project, null, null, null, 1);
  return query
  select p.name::text, a.name::text, c.chain_id, c.head_seq, c.horizon_seq, k.checkpoint_id, k.at, k.seq,
         c.head_seq - coalesce(k.seq, 0), scsql_caller.viewer_quarantine(c.chain_id)
  from scsql.chains c
  join scsql.projects p on p.project_id = c.project_id
  left join scsql.agents a on a.agent_id = c.agent_id
  left join lateral (select h.checkpoint_id, h.seq, x.at from scsql.checkpoint_heads h
                     join scsql.checkpoints x on x.project_id = h.project_id and x.checkpoint_id = h.checkpoint_id
                     where h.project_id = c.project_id and h.chain_id = c.chain_id
                     order by h.checkpoint_id desc limit 1) k on true
  where f.project_id is null or c.project_id = f.project_id
  order by p.name, a.name, c.chain_id;
end
$$;
comment on function scsql.viewer_chains(text) is
  'The hash chains you may read (one per project and agent): head seq, horizon (where retention began), the newest checkpoint that signed the chain''s head (id, time, seq), how many rows were written since, and whether part of the chain is quarantined (open, acknowledged or NULL). Returns project, agent, chain_id, head_seq, horizon_seq, checkpoint_id, checkpoint_at, checkpointed_seq, rows_since_checkpoint, quarantine. Raises SC005 for a project you cannot see.';

create or replace function scsql.viewer_verify(p_project text default null, p_full boolean default false)
returns table (project text, agent text, chain_id bigint, ok boolean, rows_checked bigint, broken_seq bigint,
               kind text, detail text, from_checkpoint bigint)
language plpgsql stable
as $$
#variable_conflict use_column
declare
  f record;
begin
  select * into f from scsql_caller.viewer_filter(p_project, null, null, null, 1);
  -- The chains and their newest checkpoints first, then verify_chain once per chain (as scsql doctor).
  return query
  with k as materialized (select h.chain_id, max(h.checkpoint_id) as since from scsql.checkpoint_heads h group by 1),
  x as materialized (select c.chain_id, p.name::text as project, a.name::text as agent from scsql.chains c
                     join scsql.projects p on p.project_id = c.project_id left join scsql.agents a on a.agent_id = c.agent_id
                     where c.head_seq > 0 and (f.project_id is null or c.project_id = f.project_id))
  select x.project, x.agent, x.chain_id, v.ok, v.rows_checked, v.broken_seq, v.kind, v.detail,
         case when coalesce(p_full, false) then null else k.since end
  from x left join k using (chain_id)
  cross join lateral scsql.verify_chain(x.chain_id, case when coalesce(p_full, false) then null else k.since end) v
  order by x.project, x.agent, x.chain_id;
end
$$;
comment on function scsql.viewer_verify(text, boolean) is
  'Auditor. Verifies every chain in SQL (links and hashes; signatures: scsql verify) from its newest checkpoint, whose rows the auditor verified before signing, or with P_FULL from its first row: the verification of the audit page. Returns project, agent, chain_id, ok, rows_checked, broken_seq, kind and detail of a break, from_checkpoint. Raises SC005 for a project you cannot see.';

create or replace function scsql.viewer_checkpoints(p_project text default null, p_since timestamptz default null,
                                                    p_until timestamptz default null, p_limit integer default 50)
returns table (project text, checkpoint_id bigint, at timestamptz, age interval, recorded_at timestamptz, key_id integer,
               chains bigint)
language plpgsql stable
as $$
#variable_conflict use_column
declare
  f record;
begin
  select * into f from scsql_caller.viewer_filter(p_project, null, p_since, p_until, p_limit, 1000);
  return query
  select p.name::text, k.checkpoint_id, k.at, date_trunc('second', now() - k.at), k.recorded_at, k.key_id,
         (select count(*) from scsql.checkpoint_heads h where h.project_id = k.project_id and h.checkpoint_id = k.checkpoint_id)
  from scsql.checkpoints k join scsql.projects p on p.project_id = k.project_id
  where (f.project_id is null or k.project_id = f.project_id)
    and (p_since is null or k.at >= p_since) and (p_until is null or k.at < p_until)
  order by k.at desc, k.checkpoint_id desc
  limit p_limit;
end
$$;
comment on function scsql.viewer_checkpoints(text, timestamptz, timestamptz, integer) is
  'Signed checkpoints of chain heads you may read, newest first (from P_SINCE, before P_UNTIL; at most P_LIMIT, 1 to 1,000). Returns project, checkpoint_id, at, age (how long ago it signed), recorded_at, key_id (the auditor key that signed it), chains (heads it signed). Raises SC005 for a project you cannot see, SC010 for a bad range or limit.';

create or replace function scsql.viewer_quarantines(p_project text default null, p_since timestamptz default null,
                                                    p_until timestamptz default null)
returns table (project text, quarantine_id bigint, chain_id bigint, agent text, from_seq bigint, kind text, detail text,
               found_at timestamptz, found_by text, acknowledged_at timestamptz, acknowledged_by text, note text)
language plpgsql stable
as $$
#variable_conflict use_column
declare
  f record;
begin
  select * into f from scsql_caller.viewer_filter(p_project, null, p_since, p_until, 1);
  return query
  select p.name::text, q.quarantine_id, q.chain_id, a.name::text, q.from_seq, q.kind, q.detail, q.found_at, q.found_by,
         q.acknowledged_at, q.acknowledged_by, q.note
  from scsql.chain_quarantines q
  join scsql.projects p on p.project_id = q.project_id
  left join scsql.chains c on c.project_id = q.project_id and c.chain_id = q.chain_id
  left join scsql.agents a on a.agent_id = c.agent_id
  where (f.project_id is null or q.project_id = f.project_id)
    and (p_since is null or q.found_at >= p_since or q.acknowledged_at >= p_since or q.acknowledged_at is null)
    and (p_until is null or q.found_at < p_until)
  order by q.found_at desc, q.quarantine_id desc;
end
$$;
comment on function scsql.viewer_quarantines(text, timestamptz, timestamptz) is
  'Quarantined stretches of chains you may read (scsql checkpoint found a break there and signed only the rows before it), open or acknowledged, newest first: those found before P_UNTIL and open or found or acknowledged since P_SINCE. Returns project, quarantine_id, chain_id, agent, from_seq, kind, detail, found_at, found_by, acknowledged_at, acknowledged_by, note. Raises SC005 for a project you cannot see, SC010 for a reversed range.';

create or replace function scsql.viewer_redactions(p_project text default null, p_since timestamptz default null,
                                                   p_until timestamptz default null)
returns table (project text, place text, kind text, redactions bigint)
language plpgsql stable
as $$
#variable_conflict use_column
declare
  f record;
begin
  select * into f from scsql_caller.viewer_filter(p_project, null, p_since, p_until, 1);
  return query
  select p.name::text, x.place, m[1], count(*)
  from (select t.project_id, 'tool call' as place, coalesce(t.input_preview, '') || ' ' || coalesce(t.output_preview, '') as txt
        from scsql.tool_calls t
        where (t.input_preview like '%[REDACTED:%' or t.output_preview like '%[REDACTED:%')
          and coalesce(t.occurred_at, t.at) >= coalesce(p_since, '-infinity') and coalesce(t.occurred_at, t.at) < coalesce(p_until, 'infinity')
        union all
        select r.project_id, 'prompt', r.text from scsql.prompts r
        where r.text like '%[REDACTED:%'
          and coalesce(r.occurred_at, r.at) >= coalesce(p_since, '-infinity') and coalesce(r.occurred_at, r.at) < coalesce(p_until, 'infinity')
        union all
        select o.project_id, 'outcome', o.summary || ' ' || coalesce(o.evidence, '') from scsql.outcomes o
        where (o.summary like '%[REDACTED:%' or o.evidence like '%[REDACTED:%')
          and o.at >= coalesce(p_since, '-infinity') and o.at < coalesce(p_until, 'infinity')
        union all
        select c.project_id, 'memory', c.content from scsql.kb_chunks c
        where c.content like '%[REDACTED:%'
          and c.created_at >= coalesce(p_since, '-infinity') and c.created_at < coalesce(p_until, 'infinity')) x
  cross join lateral regexp_matches(x.txt, '\[REDACTED:([a-z0-9_]+)\]', 'g') m
  join scsql.projects p on p.project_id = x.project_id
  where f.project_id is null or x.project_id = f.project_id
  group by 1, 2, 3
  order by 1, 2, 4 desc, 3;
end
$$;
comment on function scsql.viewer_redactions(text, timestamptz, timestamptz) is
  'How many secrets redaction replaced (each stored as [REDACTED:<kind>]) in what you may read, by project, place (tool call, prompt, outcome, memory) and kind, in rows that happened from P_SINCE and before P_UNTIL. Returns project, place, kind, redactions. Raises SC005 for a project you cannot see, SC010 for a reversed range.';

-- ---------------------------------------------------------------------------
-- Cost and activity
-- ---------------------------------------------------------------------------

create or replace function scsql_caller.viewer_usage_rows(p_project bigint, p_agent bigint, p_from timestamptz,
                                                        p_to timestamptz, p_no_session boolean default false)
returns table (project_id bigint, author_id bigint, session_id bigint, model text, tool text, day date, tool_calls bigint,
               model_messages bigint, input_tokens bigint, output_tokens bigint, cache_write_tokens bigint,
               cache_read_tokens bigint, cost_usd numeric, unpriced bigint)
language sql stable
as $$
  select t.project_id, t.author_id, t.session_id, t.model, t.tool, (coalesce(t.occurred_at, t.at) at time zone 'UTC')::date,
         1::bigint, 0::bigint, t.input_tokens::bigint, t.output_tokens::bigint, 0::bigint, 0::bigint, coalesce(t.cost_usd, 0),
         (t.cost_usd is null and t.origin = 'model')::integer::bigint
  from scsql.tool_calls t
  where (p_project is null or t.project_id = p_project) and (p_agent is null or t.author_id = p_agent)
    and coalesce(t.occurred_at, t.at) >= p_from and coalesce(t.occurred_at, t.at) < p_to
    and (not p_no_session or t.session_id is null)
  union all
  select m.project_id, m.author_id, m.session_id, m.model, '(model)', (coalesce(m.occurred_at, m.at) at time zone 'UTC')::date,
         0, 1, m.input_tokens, m.output_tokens, m.cache_write_tokens, m.cache_read_tokens, coalesce(m.cost_usd, 0),
         (m.cost_usd is null)::integer
  from scsql.model_calls m
  where (p_project is null or m.project_id = p_project) and (p_agent is null or m.author_id = p_agent)
    and coalesce(m.occurred_at, m.at) >= p_from and coalesce(m.occurred_at, m.at) < p_to
    and (not p_no_session or m.session_id is null)
$$;
comment on function scsql_caller.viewer_usage_rows(bigint, bigint, timestamptz, timestamptz, boolean) is
  'The tool calls and the model''s messages of project P_PROJECT and agent P_AGENT (NULL: any) that happened from P_FROM and before P_TO (with P_NO_SESSION, only those of no session), one row each as scsql.usage_days sums them (the model''s messages as tool (model)), as the caller may read them. Used by scsql.viewer_cost for what is not a whole UTC day.';

create or replace function scsql_caller.viewer_usage_of(p_project bigint, p_session bigint, p_author bigint,
                                                       p_from timestamptz, p_to timestamptz)
returns table (tool_calls bigint, model_messages bigint, input_tokens bigint, output_tokens bigint,
               cache_write_tokens bigint, cache_read_tokens bigint, cost_usd numeric, unpriced bigint)
language sql stable
as $$
  select t.n, m.n, coalesce(t.i, 0) + coalesce(m.i, 0), coalesce(t.o, 0) + coalesce(m.o, 0), coalesce(m.cw, 0),
         coalesce(m.cr, 0), coalesce(t.c, 0) + coalesce(m.c, 0), t.u + m.u
  from (select count(*) as n, sum(x.input_tokens) as i, sum(x.output_tokens) as o, sum(x.cost_usd) as c,
               count(*) filter (where x.cost_usd is null and x.origin = 'model') as u
        from scsql.tool_calls x
        where x.project_id = p_project and x.session_id = p_session and x.author_id = p_author
          and coalesce(x.occurred_at, x.at) >= p_from and coalesce(x.occurred_at, x.at) < p_to) t,
       (select count(*) as n, sum(x.input_tokens) as i, sum(x.output_tokens) as o, sum(x.cache_write_tokens) as cw,
               sum(x.cache_read_tokens) as cr, sum(x.cost_usd) as c, count(*) filter (where x.cost_usd is null) as u
        from scsql.model_calls x
        where x.project_id = p_project and x.session_id = p_session and x.author_id = p_author
          and coalesce(x.occurred_at, x.at) >= p_from and coalesce(x.occurred_at, x.at) < p_to) m
$$;
comment on function scsql_caller.viewer_usage_of(bigint, bigint, bigint, timestamptz, timestamptz) is
  'The tool calls and the model''s messages of agent P_AUTHOR in session P_SESSION of project P_PROJECT that happened from P_FROM and before P_TO, summed from the rows (one row, zeros when none), as the caller may read them. Used by scsql_caller.viewer_usage_sessions.';

create or replace function scsql_caller.viewer_usage(p_project bigint, p_agent bigint, p_from timestamptz, p_to timestamptz,
                                                    p_lo timestamptz, p_hi timestamptz)
returns table (project_id bigint, author_id bigint, session_id bigint, model text, tool text, day date, tool_calls bigint,
               model_messages bigint, input_tokens bigint, output_tokens bigint, cache_write_tokens bigint,
               cache_read_tokens bigint, cost_usd numeric, unpriced bigint)
language sql stable
as $$
  select x.project_id, x.author_id, null::bigint, x.model, x.tool, x.day, x.tool_calls, x.model_messages, x.input_tokens,
         x.output_tokens, x.cache_write_tokens, x.cache_read_tokens, x.cost_usd, x.unpriced
  from scsql.usage_days x
  where (p_project is null or x.project_id = p_project) and (p_agent is null or x.author_id = p_agent)
    and x.day >= (p_lo at time zone 'UTC')::date and x.day < (p_hi at time zone 'UTC')::date
  union all
  select * from scsql_caller.viewer_usage_rows(p_project, p_agent, p_from, least(p_lo, p_to))
  union all
  select * from scsql_caller.viewer_usage_rows(p_project, p_agent, greatest(p_hi, p_from), p_to)
$$;
comment on function scsql_caller.viewer_usage(bigint, bigint, timestamptz, timestamptz, timestamptz, timestamptz) is
  'The tool calls and the model''s messages of project P_PROJECT and agent P_AGENT (NULL: any) that happened from P_FROM and before P_TO, as the caller may read them: the whole UTC days from P_LO to before P_HI as scsql.usage_days sums them (session_id NULL), the hours before and after one row each (scsql_caller.viewer_usage_rows). Used by scsql.viewer_cost.';

create or replace function scsql_caller.viewer_usage_sessions(p_project bigint, p_agent bigint, p_from timestamptz,
                                                             p_to timestamptz)
returns table (session_id bigint, tool_calls bigint, model_messages bigint, input_tokens bigint, output_tokens bigint,
               cache_write_tokens bigint, cache_read_tokens bigint, cost_usd numeric, unpriced bigint)
language sql stable
as $$
  -- A session's agent whose rows all happened in the range: as usage_sessions keeps them.
  select u.session_id, u.tool_calls, u.model_messages, u.input_tokens, u.output_tokens, u.cache_write_tokens,
         u.cache_read_tokens, u.cost_usd, u.unpriced
  from scsql.usage_sessions u
  where (p_project is null or u.project_id = p_project) and (p_agent is null or u.author_id = p_agent)
    and u.first_at >= p_from and u.last_at < p_to
  union all
  -- One whose rows reach past the range: those in it, from the rows.
  select u.session_id, r.tool_calls, r.model_messages, r.input_tokens, r.output_tokens, r.cache_write_tokens,
         r.cache_read_tokens, r.cost_usd, r.unpriced
  from scsql.usage_sessions u
  cross join lateral scsql_caller.viewer_usage_of(u.project_id, u.session_id, u.author_id, p_from, p_to) r
  where (p_project is null or u.project_id = p_project) and (p_agent is null or u.author_id = p_agent)
    and u.last_at >= p_from and u.first_at < p_to and not (u.first_at >= p_from and u.last_at < p_to)
    and r.tool_calls + r.model_messages > 0
  union all
  -- Rows of no session.
  select null, sum(r.tool_calls)::bigint, sum(r.model_messages)::bigint, sum(r.input_tokens)::bigint,
         sum(r.output_tokens)::bigint, sum(r.cache_write_tokens)::bigint, sum(r.cache_read_tokens)::bigint, sum(r.cost_usd),
         sum(r.unpriced)::bigint
  from scsql_caller.viewer_usage_rows(p_project, p_agent, p_from, p_to, true) r
  having count(*) > 0
$$;
comment on function scsql_caller.viewer_usage_sessions(bigint, bigint, timestamptz, timestamptz) is
  'The tool calls and the model''s messages of project P_PROJECT and agent P_AGENT (NULL: any) that happened from P_FROM and before P_TO, as the caller may read them: per session and agent (scsql.usage_sessions for those whose rows all happened in the range, scsql_caller.viewer_usage_of for those whose rows reach past it), and one row for those of no session (NULL). Used by scsql.viewer_cost for its sessions.';

create or replace function scsql.viewer_cost(p_group text default 'day', p_project text default null,
                                             p_agent text default null, p_since timestamptz default null,
                                             p_until timestamptz default null, p_limit integer default 500)
returns table (key text, tool_calls bigint, model_messages bigint, input_tokens bigint, output_tokens bigint,
               cache_write_tokens bigint, cache_read_tokens bigint, cost_usd numeric, unpriced bigint)
language plpgsql stable
as $$
#variable_conflict use_column
declare
  f record;
  v_lo timestamptz;
  v_hi timestamptz;
  v_key constant text := case p_group when 'day' then $k$to_char(u.day, 'YYYY-MM-DD')$k$ when 'agent' then 'u.author_id::text'
                                      when 'model' then $k$coalesce(u.model, '(none)')$k$ when 'tool' then 'u.tool'
                                      when 'project' then 'u.project_id::text' when 'session' then 'u.session_id' end;
begin
  select * into f from scsql_caller.viewer_filter(p_project, p_agent, p_since, p_until, p_limit, 5000);
  if v_key is null then
    raise exception using errcode = 'SC010', message = format('group must be day, agent, model, session, project or tool, got %L', left(p_group, 40));
  end if;
  -- Whole UTC days from scsql.usage_days, the hours around them from the
  -- rows; sessions from scsql.usage_sessions, but for those whose rows reach
  -- past the range. Planned for these values each call: to the planner the
  -- filters and bounds are constants, which pick the partitions and indexes.
  -- The first and the last midnight (UTC) in the range; both its end when it holds no whole day.
  v_lo := case when p_since is null then '-infinity'
               when p_since = (p_since at time zone 'UTC')::date::timestamp at time zone 'UTC' then p_since
               else ((p_since at time zone 'UTC')::date + 1)::timestamp at time zone 'UTC' end;
  v_hi := coalesce((p_until at time zone 'UTC')::date::timestamp at time zone 'UTC', 'infinity');
  if v_lo > v_hi then
    v_lo := p_until; v_hi := p_until;
  end if;
  return query execute format($q$
  select coalesce(case $1 when 'agent' then (select a.name::text from scsql.agents a where a.agent_id::text = g.key)
                          when 'project' then (select p.name::text from scsql.projects p where p.project_id::text = g.key) end,
                  g.key),
         g.calls, g.messages, g.input_tokens, g.output_tokens, g.cw, g.cr, g.cost, g.unpriced
  from (%s) g
  order by case when $1 = 'day' then g.key end, g.cost desc, g.key
  limit $8$q$,
    case when p_group = 'session' then
      $s$select coalesce(u.session_id::text, '(none)') as key, sum(u.tool_calls)::bigint as calls,
                sum(u.model_messages)::bigint as messages, sum(u.input_tokens)::bigint as input_tokens,
                sum(u.output_tokens)::bigint as output_tokens, sum(u.cache_write_tokens)::bigint as cw,
                sum(u.cache_read_tokens)::bigint as cr, sum(u.cost_usd) as cost, sum(u.unpriced)::bigint as unpriced
         from scsql_caller.viewer_usage_sessions($2, $3, $4, $5) u group by u.session_id$s$
    else format($s$select %s as key, sum(u.tool_calls)::bigint as calls, sum(u.model_messages)::bigint as messages,
                          sum(u.input_tokens)::bigint as input_tokens, sum(u.output_tokens)::bigint as output_tokens,
                          sum(u.cache_write_tokens)::bigint as cw, sum(u.cache_read_tokens)::bigint as cr,
                          sum(u.cost_usd) as cost, sum(u.unpriced)::bigint as unpriced
                   from scsql_caller.viewer_usage($2, $3, $4, $5, $6, $7) u group by 1$s$, v_key) end)
  using p_group, f.project_id, f.agent_id, coalesce(p_since, '-infinity'), coalesce(p_until, 'infinity'), v_lo, v_hi, p_limit;
end
$$;
comment on function scsql.viewer_cost(text, text, text, timestamptz, timestamptz, integer) is
  'Tokens and USD of the tool calls and the model''s messages you may read, grouped: the cost page of scsql ui (as scsql.cost_report, with a time range and filters).

p_group (day|agent|model|session|project|tool): grouping; days ascending, others by cost
p_project: only this project
p_agent: only this agent''s
p_since: happened at or after
p_until: happened before
p_limit (1..5000): groups at most

Returns key, tool_calls, model_messages, input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, cost_usd, unpriced (rows of a model without a price). Raises SC010 for an unknown grouping, a reversed range or a bad limit, SC005/SC003 for a project or agent you cannot see.';

create or replace function scsql.viewer_activity(p_project text default null, p_since timestamptz default null,
                                                 p_until timestamptz default null)
returns table (project text, agent text, sessions bigint, prompts bigint, tool_calls bigint, tool_calls_by_status jsonb,
               outcomes_by_kind jsonb, files_touched text[], model_messages bigint, input_tokens bigint,
               output_tokens bigint, cost_usd numeric)
language plpgsql stable
as $$
#variable_conflict use_column
declare
  f record;
  v_from timestamptz := coalesce(p_since, '-infinity');
  v_to timestamptz := coalesce(p_until, 'infinity');
begin
  select * into f from scsql_caller.viewer_filter(p_project, null, p_since, p_until, 1);
  return query
  select p.name::text, a.name::text, coalesce(s.n, 0), coalesce(r.n, 0), coalesce(t.n, 0), coalesce(t.by_status, '{}'),
         coalesce(o.by_kind, '{}'), coalesce(fl.files, '{}'), coalesce(m.n, 0),
         coalesce(t.input_tokens, 0) + coalesce(m.input_tokens, 0), coalesce(t.output_tokens, 0) + coalesce(m.output_tokens, 0),
         coalesce(t.cost_usd, 0) + coalesce(m.cost_usd, 0)
  from scsql.agents a
  join scsql.projects p on p.project_id = a.project_id
  left join (select x.author_id, count(*) as n from scsql.sessions x
             where coalesce(x.occurred_at, x.at) >= v_from and coalesce(x.occurred_at, x.at) < v_to group by 1) s
    on s.author_id = a.agent_id
  left join (select x.author_id, count(*) as n from scsql.prompts x
             where coalesce(x.occurred_at, x.at) >= v_from and coalesce(x.occurred_at, x.at) < v_to group by 1) r
    on r.author_id = a.agent_id
  left join (select g.author_id, sum(g.n)::bigint as n, jsonb_object_agg(g.status, g.n) as by_status,
                    sum(g.i)::bigint as input_tokens, sum(g.o)::bigint as output_tokens, sum(g.c) as cost_usd
             from (select x.author_id, x.status, count(*) as n, sum(x.input_tokens) as i, sum(x.output_tokens) as o,
                          sum(x.cost_usd) as c
                   from scsql.tool_calls x
                   where coalesce(x.occurred_at, x.at) >= v_from and coalesce(x.occurred_at, x.at) < v_to group by 1, 2) g
             group by 1) t on t.author_id = a.agent_id
  left join (select g.author_id, jsonb_object_agg(g.kind, g.n) as by_kind
             from (select x.author_id, x.kind, count(*) as n from scsql.outcomes x
                   where x.at >= v_from and x.at < v_to group by 1, 2) g group by 1) o on o.author_id = a.agent_id
  left join (select x.author_id, (array_agg(distinct e.path order by e.path))[1:500] as files
             from scsql.tool_calls x cross join lateral jsonb_array_elements_text(x.files) e(path)
             where x.files is not null and coalesce(x.occurred_at, x.at) >= v_from and coalesce(x.occurred_at, x.at) < v_to
             group by 1) fl on fl.author_id = a.agent_id
  left join (select x.author_id, count(*) as n, sum(x.input_tokens + x.cache_write_tokens + x.cache_read_tokens) as input_tokens,
                    sum(x.output_tokens) as output_tokens, sum(x.cost_usd) as cost_usd
             from scsql.model_calls x
             where coalesce(x.occurred_at, x.at) >= v_from and coalesce(x.occurred_at, x.at) < v_to group by 1) m
    on m.author_id = a.agent_id
  where (f.project_id is null or a.project_id = f.project_id)
    and (s.n is not null or r.n is not null or t.n is not null or o.by_kind is not null or m.n is not null)
  order by p.name, a.name;
end
$$;
comment on function scsql.viewer_activity(text, timestamptz, timestamptz) is
  'Who did what, per agent you may read, in rows that happened from P_SINCE and before P_UNTIL: sessions begun, prompts, tool calls (and by status), outcomes by kind, files touched (at most 500, sorted), the model''s messages, tokens and USD. Agents with nothing in the period are left out. Returns project, agent, sessions, prompts, tool_calls, tool_calls_by_status, outcomes_by_kind, files_touched, model_messages, input_tokens, output_tokens, cost_usd. Raises SC005 for a project you cannot see, SC010 for a reversed range.';

create or replace function scsql.viewer_memory_changes(p_project text default null, p_since timestamptz default null,
                                                       p_until timestamptz default null)
returns table (project text, agent text, kind text, op text, changes bigint)
language plpgsql stable
as $$
#variable_conflict use_column
declare
  f record;
begin
  select * into f from scsql_caller.viewer_filter(p_project, null, p_since, p_until, 1);
  return query
  select p.name::text, a.name::text, m.kind, m.op, count(*)
  from scsql.memory_changes m
  join scsql.projects p on p.project_id = m.project_id
  left join scsql.agents a on a.agent_id = m.author_id
  where (f.project_id is null or m.project_id = f.project_id)
    and m.at >= coalesce(p_since, '-infinity') and m.at < coalesce(p_until, 'infinity')
  group by 1, 2, 3, 4
  order by 1, 2, 3, 4;
end
$$;
comment on function scsql.viewer_memory_changes(text, timestamptz, timestamptz) is
  'How memory changed in the period (from P_SINCE, before P_UNTIL), in what you may read: changes by project, agent, kind (fact, source, chunk, learning, decision, loop) and op. Returns project, agent, kind, op, changes. Raises SC005 for a project you cannot see, SC010 for a reversed range.';

create or replace function scsql.viewer_report(p_since timestamptz, p_until timestamptz, p_project text default null)
returns jsonb
language plpgsql stable
as $$
declare
  f record;
  v_auditor boolean := pg_catalog.has_function_privilege('scsql.verify_chain(bigint, bigint)', 'execute');
  v_report jsonb;
begin
  if p_since is null or p_until is null then
    raise exception using errcode = 'SC010', message = 'a report needs since and until';
  end if;
  select * into f from scsql_caller.viewer_filter(p_project, null, p_since, p_until, 1);
  select jsonb_build_object(
    'format', 'scsql-report/1', 'since', p_since, 'until', p_until, 'project', p_project,
    'generated_at', now(), 'identity', coalesce(nullif(pg_catalog.current_setting('role'), 'none'), current_user::text),
    'activity', (select coalesce(jsonb_agg(to_jsonb(x)), '[]') from scsql.viewer_activity(p_project, p_since, p_until) x),
    'cost_by_day', (select coalesce(jsonb_agg(to_jsonb(x)), '[]') from scsql.viewer_cost('day', p_project, null, p_since, p_until, 5000) x),
    'cost_by_agent', (select coalesce(jsonb_agg(to_jsonb(x)), '[]') from scsql.viewer_cost('agent', p_project, null, p_since, p_until, 5000) x),
    'cost_by_model', (select coalesce(jsonb_agg(to_jsonb(x)), '[]') from scsql.viewer_cost('model', p_project, null, p_since, p_until, 5000) x),
    'memory_changes', (select coalesce(jsonb_agg(to_jsonb(x)), '[]') from scsql.viewer_memory_changes(p_project, p_since, p_until) x),
    'redactions', (select coalesce(jsonb_agg(to_jsonb(x)), '[]') from scsql.viewer_redactions(p_project, p_since, p_until) x),
    'capture', (select coalesce(jsonb_agg(to_jsonb(x)), '[]') from scsql.capture_counts() x where p_project is null or x.project = p_project),
    'chains', (select coalesce(jsonb_agg(to_jsonb(x)), '[]') from scsql.viewer_chains(p_project) x),
    'checkpoints', (select coalesce(jsonb_agg(to_jsonb(x)), '[]') from scsql.viewer_checkpoints(p_project, p_since, p_until, 1000) x),
    'quarantines', (select coalesce(jsonb_agg(to_jsonb(x)), '[]') from scsql.viewer_quarantines(p_project, p_since, p_until) x))
  into v_report;
  if v_auditor then
    v_report := v_report || jsonb_build_object(
      'verification', (select coalesce(jsonb_agg(to_jsonb(x)), '[]') from scsql.viewer_verify(p_project) x),
      'retired_partitions', (select coalesce(jsonb_agg(to_jsonb(x)), '[]') from scsql.partition_retirements() x
                             where x.retired_at >= p_since and x.retired_at < p_until));
  else
    v_report := v_report || jsonb_build_object('verification', null, 'retired_partitions', null,
      'note', 'verification and retired partitions are the auditor''s: scsql report --auditor');
  end if;
  return v_report;
end
$$;
comment on function scsql.viewer_report(timestamptz, timestamptz, text) is
  'What scsql report writes, as one JSON object: who did what in the period (viewer_activity), cost by day, agent and model (viewer_cost), memory changes, redactions, capture stubs (capture_counts), chains, checkpoints and quarantines of the period, and, for the auditor, every chain verified from its newest checkpoint (viewer_verify) and the partitions retention retired in the period.

p_since: from (inclusive)
p_until: until (exclusive)
p_project: only this project

The caller''s rows only (row-level security); identity names the role that read them. scsql report signs it. Raises SC010 without since and until or for a reversed range, SC005 for a project you cannot see.';
