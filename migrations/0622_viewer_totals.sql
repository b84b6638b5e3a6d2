-- 0622 viewer: the figures its sessions and cost pages show, kept as rows
-- are written instead of summed over every row on each page.
--
-- session_totals: one row per session with prompts, tool calls, failures,
-- the model's messages, tokens, cost and when its last row happened (what
-- scsql_caller.viewer_session_totals sums). usage_days: per project, UTC day
-- (of when a row happened), agent, model, tool and status, the tool calls
-- and the model's messages with their tokens and cost (what viewer_cost and
-- metrics sum). usage_sessions: the same per session and agent, with when
-- the first and the last of them happened (what the cost page sums per
-- session, for the sessions wholly inside its time range). All three are kept
-- by AFTER INSERT triggers on prompts,
-- tool_calls and model_calls in the writing transaction (an upsert: exact
-- under concurrent writers, who wait on the row they both add to), and
-- retention subtracts the rows of a partition it drops. Row-level security
-- reads them by project, as the rows they sum. Tool calls of no session
-- are found by a partial index.
--
-- sql/60_viewer.sql defines the trigger functions; they are defined here too
-- and the triggers created before the tables are filled, so that no row
-- written between this migration and sql/'s re-application is missed
-- (CREATE TRIGGER locks each table against writes until this commits).

create table scsql.session_totals (
  project_id     bigint not null,
  session_id     bigint not null,
  prompts        bigint not null default 0,
  tool_calls     bigint not null default 0,
  failures       bigint not null default 0,
  model_messages bigint not null default 0,
  input_tokens   bigint not null default 0,
  output_tokens  bigint not null default 0,
  cache_tokens   bigint not null default 0,
  cost_usd       numeric not null default 0,
  last_at        timestamptz,
  primary key (project_id, session_id)
);
comment on table scsql.session_totals is
  'The figures of each session, kept by triggers as its rows are written: prompts, tool calls (those written from the session''s own write on, as its timeline shows them), failed tool calls, the model''s messages, input and output tokens (tool calls and messages), prompt-cache tokens, cost in USD (NULL costs count 0) and when its last row happened. Retention subtracts the tool calls it drops.';

create table scsql.usage_days (
  project_id         bigint not null,
  day                date not null,
  author_id          bigint not null,
  model              text,
  tool               text not null,
  status             text,
  tool_calls         bigint not null default 0,
  model_messages     bigint not null default 0,
  input_tokens       bigint not null default 0,
  output_tokens      bigint not null default 0,
  cache_write_tokens bigint not null default 0,
  cache_read_tokens  bigint not null default 0,
  cost_usd           numeric not null default 0,
  unpriced           bigint not null default 0,
  constraint usage_days_key unique nulls not distinct (project_id, day, author_id, model, tool, status)
);
comment on table scsql.usage_days is
  'Tool calls and the model''s messages summed per project, UTC day of when they happened, agent, model, tool ((model) for the model''s messages) and status (a tool call''s; NULL for a message), kept by triggers as rows are written: counts, tokens, cost in USD (NULL costs count 0) and unpriced rows (no price for a model-generated row). Retention subtracts the tool calls it drops.';

create table scsql.usage_sessions (
  project_id         bigint not null,
  session_id         bigint not null,
  author_id          bigint not null,
  first_at           timestamptz not null,
  last_at            timestamptz not null,
  tool_calls         bigint not null default 0,
  model_messages     bigint not null default 0,
  input_tokens       bigint not null default 0,
  output_tokens      bigint not null default 0,
  cache_write_tokens bigint not null default 0,
  cache_read_tokens  bigint not null default 0,
  cost_usd           numeric not null default 0,
  unpriced           bigint not null default 0,
  primary key (project_id, session_id, author_id)
);
create index usage_sessions_last_idx on scsql.usage_sessions (project_id, last_at);
comment on table scsql.usage_sessions is
  'Tool calls and the model''s messages summed per session and agent, kept by triggers as rows are written: when the first and the last of them happened (retention leaves these as they were: the range only ever holds the rows), counts, tokens, cost in USD (NULL costs count 0) and unpriced rows. Retention subtracts the tool calls it drops.';

create index tool_calls_no_session_idx on scsql.tool_calls (project_id, (coalesce(occurred_at, at))) where session_id is null;

create function scsql._viewer_totals_prompt()
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

create function scsql._viewer_totals_tool()
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

create function scsql._viewer_totals_model()
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

-- The triggers first: each CREATE TRIGGER holds its table against writes
-- until this migration commits, so the sums below miss nothing.
create trigger viewer_totals after insert on scsql.prompts for each row execute function scsql._viewer_totals_prompt();
create trigger viewer_totals after insert on scsql.tool_calls for each row execute function scsql._viewer_totals_tool();

insert into scsql.usage_days (project_id, day, author_id, model, tool, status, tool_calls, input_tokens, output_tokens,
                              cost_usd, unpriced)
select t.project_id, (coalesce(t.occurred_at, t.at) at time zone 'UTC')::date, t.author_id, t.model, t.tool, t.status,
       count(*), sum(t.input_tokens), sum(t.output_tokens), coalesce(sum(t.cost_usd), 0),
       count(*) filter (where t.cost_usd is null and t.origin = 'model')
from scsql.tool_calls t
group by 1, 2, 3, 4, 5, 6;

insert into scsql.usage_sessions (project_id, session_id, author_id, first_at, last_at, tool_calls, input_tokens,
                                  output_tokens, cost_usd, unpriced)
select t.project_id, t.session_id, t.author_id, min(coalesce(t.occurred_at, t.at)), max(coalesce(t.occurred_at, t.at)),
       count(*), sum(t.input_tokens), sum(t.output_tokens), coalesce(sum(t.cost_usd), 0),
       count(*) filter (where t.cost_usd is null and t.origin = 'model')
from scsql.tool_calls t
where t.session_id is not null
group by 1, 2, 3;

insert into scsql.session_totals (project_id, session_id, prompts, tool_calls, failures, input_tokens, output_tokens,
                                  cost_usd, last_at)
select x.project_id, x.session_id, sum(x.prompts), sum(x.calls), sum(x.failures), sum(x.i), sum(x.o), sum(x.cost),
       max(x.happened)
from (select r.project_id, r.session_id, 1 as prompts, 0 as calls, 0 as failures, 0 as i, 0 as o, 0::numeric as cost,
             coalesce(r.occurred_at, r.at) as happened
      from scsql.prompts r where r.session_id is not null
      union all
      select t.project_id, t.session_id, 0, 1, (t.status <> 'ok')::integer, t.input_tokens, t.output_tokens,
             coalesce(t.cost_usd, 0), coalesce(t.occurred_at, t.at)
      from scsql.tool_calls t
      join scsql.sessions s on s.project_id = t.project_id and s.session_id = t.session_id and s.at <= t.at) x
group by 1, 2;

-- The model's messages: their table comes with migration 0740, which a
-- database may not have yet (sql/60_viewer.sql then creates this trigger).
do $$
begin
  if pg_catalog.to_regclass('scsql.model_calls') is null then
    return;
  end if;
  create trigger viewer_totals after insert on scsql.model_calls for each row execute function scsql._viewer_totals_model();
  insert into scsql.usage_sessions as u (project_id, session_id, author_id, first_at, last_at, model_messages, input_tokens,
                                         output_tokens, cache_write_tokens, cache_read_tokens, cost_usd, unpriced)
  select m.project_id, m.session_id, m.author_id, min(coalesce(m.occurred_at, m.at)), max(coalesce(m.occurred_at, m.at)),
         count(*), sum(m.input_tokens), sum(m.output_tokens), sum(m.cache_write_tokens), sum(m.cache_read_tokens),
         coalesce(sum(m.cost_usd), 0), count(*) filter (where m.cost_usd is null)
  from scsql.model_calls m where m.session_id is not null
  group by 1, 2, 3
  on conflict (project_id, session_id, author_id) do update
    set first_at = least(u.first_at, excluded.first_at), last_at = greatest(u.last_at, excluded.last_at),
        model_messages = excluded.model_messages, input_tokens = u.input_tokens + excluded.input_tokens,
        output_tokens = u.output_tokens + excluded.output_tokens, cache_write_tokens = excluded.cache_write_tokens,
        cache_read_tokens = excluded.cache_read_tokens, cost_usd = u.cost_usd + excluded.cost_usd,
        unpriced = u.unpriced + excluded.unpriced;
  insert into scsql.usage_days (project_id, day, author_id, model, tool, status, model_messages, input_tokens,
                                output_tokens, cache_write_tokens, cache_read_tokens, cost_usd, unpriced)
  select m.project_id, (coalesce(m.occurred_at, m.at) at time zone 'UTC')::date, m.author_id, m.model, '(model)', null,
         count(*), sum(m.input_tokens), sum(m.output_tokens), sum(m.cache_write_tokens), sum(m.cache_read_tokens),
         coalesce(sum(m.cost_usd), 0), count(*) filter (where m.cost_usd is null)
  from scsql.model_calls m
  group by 1, 2, 3, 4;
  insert into scsql.session_totals as t (project_id, session_id, model_messages, input_tokens, output_tokens,
                                         cache_tokens, cost_usd, last_at)
  select m.project_id, m.session_id, count(*), sum(m.input_tokens), sum(m.output_tokens),
         sum(m.cache_write_tokens + m.cache_read_tokens), coalesce(sum(m.cost_usd), 0), max(coalesce(m.occurred_at, m.at))
  from scsql.model_calls m where m.session_id is not null
  group by 1, 2
  on conflict (project_id, session_id) do update
    set model_messages = excluded.model_messages, input_tokens = t.input_tokens + excluded.input_tokens,
        output_tokens = t.output_tokens + excluded.output_tokens, cache_tokens = excluded.cache_tokens,
        cost_usd = t.cost_usd + excluded.cost_usd, last_at = greatest(t.last_at, excluded.last_at);
end
$$;
