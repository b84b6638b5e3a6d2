-- 50 operations: what an operator graphs and what scsql doctor checks.
--
-- scsql.metrics() is the one place the figures come from: tool calls and
-- cost per project and model, queue depth, claim latency, finished and dead
-- tasks, the embedding backlog, chain rows and their last verification,
-- checkpoint age, open quarantines, live workers and search latency.
-- `scsql metrics` prints them in the Prometheus text format and serves them
-- for scraping; scsql doctor reads the same rows. An agent sees only its own
-- project's figures; administrators and the auditor see every project and
-- the server-wide figures (partitions).
--
-- Two things are recorded for it (migrations/0500_operations.sql): each
-- scsql worker's heartbeat (scsql.worker_heartbeat, every round of its loop),
-- and search latency as a cumulative histogram per project. A search writes
-- nothing itself: the client times its searches and sends them in batches
-- (scsql.record_search_latency, at most every few seconds per process).

select scsql._define_error(code, name, meaning, 'client') from (values
  ('SC055', 'doctor_action_needed', 'scsql doctor found something that needs action; each problem it lists names the command that fixes it (scsql doctor --json for machines).'),
  ('SC056', 'metrics_listen_invalid', 'scsql metrics --listen ADDRESS: the address is not [HOST]:PORT, or it cannot be bound (in use, or not an address of this machine).'),
  ('SC057', 'operations_schema_missing', 'The database predates scsql''s operations schema (scsql.metrics, worker heartbeats): run scsql migrate.')
) as t(code, name, meaning);

create or replace function scsql._search_latency_bounds()
returns double precision[]
language sql immutable
as $$ select array[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]::double precision[] $$;
comment on function scsql._search_latency_bounds() is
  'Private. The upper bounds, in seconds, of the buckets of scsql.search_latency (Prometheus le labels); a last, unbounded bucket follows them.';

create or replace function scsql.worker_heartbeat(
  p_host text, p_pid integer, p_jobs text[], p_poll_seconds double precision, p_units bigint default 0)
returns timestamptz
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_me scsql.agents := scsql._me();
  v_at timestamptz := now();
begin
  perform scsql._require(p_host is not null and char_length(p_host) between 1 and 255, 'host must be 1 to 255 characters');
  perform scsql._require(p_pid is not null and p_pid > 0, 'pid must be a positive process id');
  perform scsql._require(p_jobs is not null and cardinality(p_jobs) <= 100
                         and not exists (select from unnest(p_jobs) j where j is null or char_length(j) not between 1 and 100),
                         'jobs must be at most 100 names of 1 to 100 characters');
  perform scsql._require(p_poll_seconds > 0 and p_poll_seconds <= 3600, 'poll_seconds must be more than 0 and at most 3600');
  perform scsql._require(p_units is not null and p_units >= 0, 'units must be 0 or more');
  -- The backend and login are the server's own word, not the client's.
  insert into scsql.worker_heartbeats as h (project_id, agent_id, host, pid, jobs, poll_seconds, units, started_at, seen_at,
                                            backend_pid, login)
  values (v_me.project_id, v_me.agent_id, p_host, p_pid, p_jobs, p_poll_seconds, p_units, v_at, v_at,
          pg_backend_pid(), session_user)
  on conflict (project_id, agent_id, host, pid) do update
    set jobs = excluded.jobs, poll_seconds = excluded.poll_seconds, units = excluded.units, seen_at = excluded.seen_at,
        backend_pid = excluded.backend_pid, login = excluded.login;
  delete from scsql.worker_heartbeats h
  where h.project_id = v_me.project_id and h.seen_at < v_at - interval '7 days';
  return v_at;
end
$$;
comment on function scsql.worker_heartbeat(text, integer, text[], double precision, bigint) is
  'Background work of scsql worker (not an MCP tool). Records that the acting agent''s worker process P_PID on P_HOST (as the client reports them) is alive, with the server process and login of the connection that sent the heartbeat (pg_backend_pid(), session_user: a session of pg_stat_activity, whatever application_name the client gave): its jobs, its poll interval in seconds and the units of work it did so far; scsql doctor and scsql.metrics() call a worker alive while it was seen within three poll intervals (at least a minute). Heartbeats of the project''s workers unseen for 7 days are deleted. Returns the time recorded. Raises SC001/SC002 when not acting as an active agent, SC010 for a bad host, pid, job name, poll interval or unit count.';

create or replace function scsql._add_counts(p_a bigint[], p_b bigint[])
returns bigint[]
language sql immutable
as $$
  select array_agg(coalesce(o, 0) + coalesce(a, 0) order by i)
  from unnest(p_a, p_b) with ordinality u(o, a, i)
$$;
comment on function scsql._add_counts(bigint[], bigint[]) is
  'Private. Two histograms'' bucket counts added position by position (a missing count is 0): the longer array''s length; NULL when both are empty.';

create or replace function scsql.record_search_latency(p_seconds double precision[])
returns integer
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_project bigint := scsql._my_project();
  v_bounds double precision[] := scsql._search_latency_bounds();
  v_add bigint[];
  v_sum double precision;
  v_now timestamptz := now();
begin
  perform scsql._require(p_seconds is not null and cardinality(p_seconds) between 1 and 100000,
                         'seconds must be an array of 1 to 100000 durations');
  perform scsql._require(not exists (select from unnest(p_seconds) s
                                     where s is null or s < 0 or s > 86400 or s = 'NaN'::double precision),
                         'every duration must be a number of seconds from 0 to 86400');
  select array_agg(coalesce(n, 0) order by b) into v_add
  from generate_series(1, cardinality(v_bounds) + 1) b
  left join (select (select count(*) from unnest(v_bounds) x where x < s) + 1 as bucket, count(*) as n
             from unnest(p_seconds) s group by 1) c on c.bucket = b;
  -- Values and an immutable function, no subquery or now(): Citus refuses
  -- those in the VALUES and the DO UPDATE of a distributed table.
  select sum(s) into v_sum from unnest(p_seconds) s;
  insert into scsql.search_latency as l (project_id, counts, sum_seconds)
  values (v_project, v_add, v_sum)
  on conflict (project_id) do update
    set counts = scsql._add_counts(l.counts, excluded.counts),
        sum_seconds = l.sum_seconds + excluded.sum_seconds,
        updated_at = v_now;
  return cardinality(p_seconds);
end
$$;
comment on function scsql.record_search_latency(double precision[]) is
  'Background work of the scsql client (not an MCP tool). Adds searches the acting agent''s process timed (P_SECONDS: durations in seconds, as its searches took end to end) to its project''s search latency histogram (buckets of scsql._search_latency_bounds()). Returns how many were added. Raises SC001/SC002 when not acting as an active agent, SC010 for an empty or over-long array or a duration that is not 0 to 86400 seconds.';

create or replace function scsql._metric_help()
returns table (metric text, kind text, help text)
language sql immutable
as $$
  values
    ('scsql_tool_calls_total', 'counter', 'Tool calls recorded (rows still retained), by project, model and status.'),
    ('scsql_tool_call_cost_usd_total', 'counter', 'Cost in USD of the recorded tool calls, by project and model.'),
    ('scsql_tool_call_tokens_total', 'counter', 'Tokens of the recorded tool calls, by project, model and direction (input, output).'),
    ('scsql_queue_depth', 'gauge', 'Tasks in the hot queue by project, team role and state (queued: claimable now; scheduled: waiting for run_after; claimed; expired: lease ran out).'),
    ('scsql_queue_oldest_wait_seconds', 'gauge', 'How long the oldest claimable task has waited, by project and team role.'),
    ('scsql_claim_latency_seconds', 'gauge', 'Seconds from a task becoming claimable to its claim, over the tasks claimed now (stat avg or max), by project and team role.'),
    ('scsql_tasks_finished_total', 'counter', 'Finished tasks by project, team role and state (done, dead, released, cancelled).'),
    ('scsql_embedding_backlog', 'gauge', 'Chunks waiting for an embedding, by project.'),
    ('scsql_embedding_backlog_oldest_seconds', 'gauge', 'Age of the oldest chunk waiting for an embedding, by project (0 when none waits).'),
    ('scsql_chain_rows_total', 'counter', 'Rows ever appended to the project''s hash chains.'),
    ('scsql_chain_rows_unverified', 'gauge', 'Chain rows after the heads of the newest checkpoint (not yet verified and signed by the auditor), by project.'),
    ('scsql_last_verification_timestamp_seconds', 'gauge', 'When the auditor last verified and signed the project''s chain heads (its newest checkpoint), Unix time.'),
    ('scsql_checkpoint_age_seconds', 'gauge', 'Seconds since the project''s newest checkpoint; with no checkpoint, since its first chain was created. Only projects with chain rows.'),
    ('scsql_chain_quarantines_open', 'gauge', 'Chains that did not verify and that no administrator acknowledged, by project.'),
    ('scsql_workers_alive', 'gauge', 'scsql worker processes seen within three poll intervals (at least a minute), by project.'),
    ('scsql_worker_heartbeat_age_seconds', 'gauge', 'Seconds since the project''s newest worker heartbeat.'),
    ('scsql_search_latency_seconds', 'histogram', 'End-to-end latency of searches timed by scsql clients (MCP search and search_global), by project.'),
    ('scsql_partition_days_ahead', 'gauge', 'Days from now to the end of the newest partition of a time-partitioned table (administrators only).'),
    ('scsql_partitions_past_retention', 'gauge', 'Dated partitions still present although their range expired under the table''s retention (administrators only).'),
    ('scsql_distill_daily_tokens', 'gauge', 'Tokens the project''s distillation may use per UTC day.'),
    ('scsql_distill_tokens_today', 'gauge', 'Tokens the project''s distillation used (or reserved) this UTC day.'),
    ('scsql_distill_jobs', 'gauge', 'Distillation jobs waiting, by state (queued, deferred: waiting for the day''s budget, running).')
$$;
comment on function scsql._metric_help() is
  'Private. Every metric of scsql.metrics(): its name, Prometheus type and help text.';

create or replace function scsql._metric_scope()
returns bigint
language sql stable
as $$
  select case when exists (select from scsql.agents a where a.role_name = scsql._acting_role())
              then (scsql._me()).project_id end
$$;
comment on function scsql._metric_scope() is
  'Private. The project whose figures the caller may see: the acting agent''s (raising SC002 when it was revoked); NULL for administrators and the auditor, who see every project.';

create or replace function scsql._latency_buckets(p_counts bigint[])
returns jsonb
language sql immutable
as $$
  select jsonb_agg(jsonb_build_array(coalesce(b.le::text, '+Inf'), b.cum) order by b.i)
  from (select u.i, u.le, sum(u.n) over (order by u.i) as cum
        from unnest(scsql._search_latency_bounds() || array[null::float8], p_counts) with ordinality u(le, n, i)) b
$$;
comment on function scsql._latency_buckets(bigint[]) is
  'Private, for scsql.metrics(). The buckets of a search latency histogram (P_COUNTS, one count per bucket of scsql._search_latency_bounds() and a last, unbounded one) as Prometheus cumulates them: [[le, cumulative count], ..., ["+Inf", count]].';

-- The per-project figures of scsql.metrics(), read in one pass: one query
-- whose parts are each grouped by project, so Citus runs it as one task per
-- shard (a query over every shard per part cost a task per shard again per
-- part). Each part of the metrics then reads its rows of it. Reference
-- tables (chain_quarantines) are read where they are used: on Citus a copy
-- is on the coordinator, and one in the union would make Citus plan each
-- part on its own.
-- Columns are named in the first arm: Citus loses a CTE's column list when
-- it sends the query to one node.

create or replace function scsql._metric_counts(p_only bigint, p_now timestamptz)
returns jsonb
language plpgsql stable  -- not SQL: Citus plans no query with an SQL function's parameters
as $$
declare
  v_counts jsonb;
  v_day timestamptz := date_trunc('day', p_now at time zone 'UTC') at time zone 'UTC';
begin
  select jsonb_agg(u) into v_counts
  from (
    -- tool calls as scsql.usage_days keeps them summed (the model's messages have no status)
    select u.project_id, 'calls' as part, coalesce(u.model, '') as k1, u.status as k2, null::text as k3,
           sum(u.tool_calls)::numeric as a, sum(u.cost_usd)::numeric as b, sum(u.input_tokens)::numeric as c,
           sum(u.output_tokens)::numeric as d, null::timestamptz as t, null::interval as i1, null::interval as i2,
           null::float8 as f, null::bigint[] as counts
    from scsql.usage_days u where u.status is not null and (p_only is null or u.project_id = p_only) group by 1, 3, 4
    union all
    -- the queue in one part (the parts depth, oldest and claim are made of it below):
    -- per team role k1 and state k2, tasks a; claimed tasks b, the sum and the max of
    -- their claim latency i1, i2; the oldest created_at of a queued, due task t
    select t.project_id, 'tasks', t.team_role,
           case when t.state = 'claimed' and t.lease_expires_at < p_now then 'expired' when t.state = 'claimed' then 'claimed'
                when t.run_after > p_now then 'scheduled' else 'queued' end,
           null, count(*), count(*) filter (where t.state = 'claimed'), null, null,
           min(t.created_at) filter (where t.state = 'queued' and t.run_after <= p_now),
           sum(greatest(t.claimed_at - t.run_after, interval '0')) filter (where t.state = 'claimed'),
           max(greatest(t.claimed_at - t.run_after, interval '0')) filter (where t.state = 'claimed'), null, null
    from scsql.tasks t where p_only is null or t.project_id = p_only group by 1, 3, 4
    union all
    select a.project_id, 'finished', a.team_role, a.state, null, count(*), null, null, null, null, null, null, null, null
    from scsql.tasks_archive a where p_only is null or a.project_id = p_only group by 1, 3, 4
    union all
    select c.project_id, 'heads', null, null, null, sum(c.head_seq), sum(c.head_seq - coalesce(k.seq, 0)), null, null,
           min(c.created_at), null, null, null, null
    from scsql.chains c
    left join (select h.project_id, h.chain_id, max(h.seq) as seq from scsql.checkpoint_heads h
               where p_only is null or h.project_id = p_only group by 1, 2) k
      on k.project_id = c.project_id and k.chain_id = c.chain_id
    where p_only is null or c.project_id = p_only group by 1
    union all
    select c.project_id, 'checkpoint', null, null, null, null, null, null, null, max(c.at), null, null, null, null
    from scsql.checkpoints c where p_only is null or c.project_id = p_only group by 1
    union all
    select q.project_id, 'backlog', null, null, null, count(q.chunk_hash), null, null, null, min(q.enqueued_at), null, null,
           null, null
    from scsql.kb_embed_queue q where p_only is null or q.project_id = p_only group by 1
    union all
    select w.project_id, 'workers', null, null, null,
           count(*) filter (where w.seen_at >= p_now - greatest(interval '1 minute', 3 * w.poll_seconds * interval '1 second')),
           null, null, null, max(w.seen_at), null, null, null, null
    from scsql.worker_heartbeats w where p_only is null or w.project_id = p_only group by 1
    union all
    select l.project_id, 'latency', null, null, null, null, null, null, null, null, null, null, l.sum_seconds, l.counts
    from scsql.search_latency l where p_only is null or l.project_id = p_only
    union all
    -- distillation as scsql._distill_status counts it (the day in UTC)
    select s.project_id, 'distill', null, null, null, max(s.daily_tokens),
           coalesce(sum(coalesce(j.input_tokens, 0) + coalesce(j.output_tokens, 0) + j.reserved_tokens)
                    filter (where j.started_at >= v_day), 0), null, null, null, null, null, null,
           array[count(*) filter (where j.state = 'queued'), count(*) filter (where j.state = 'deferred'),
                 count(*) filter (where j.state = 'running')]
    from scsql.distill_settings s join scsql.agents a on a.agent_id = s.distiller_id
    left join scsql.distill_jobs j on j.project_id = s.project_id
    where p_only is null or s.project_id = p_only group by 1
  ) u;
  -- The queue's parts, made of its one (an arm a table costs each shard's
  -- planning, and the coordinator's, once more).
  return scsql._metric_queue_parts(coalesce(v_counts, '[]'));
end
$$;
comment on function scsql._metric_counts(bigint, timestamptz) is
  'Private, for scsql.metrics(). The per-project figures of every project (only P_ONLY''s when given) at time NOW, read in one query, as a JSON array of rows (project_id, part, keys k1-k3, numbers a-d, time t, intervals i1-i2, float f, counts): calls (per model k1 and status k2: calls a, cost b, input c and output d tokens), tasks (per team role k1 and state k2: tasks a, claimed tasks b, the sum and the max of their claim latency i1, i2, the oldest created_at of a queued, due task t), and made of it, depth (per team role k1 and state k2: tasks a), oldest (per team role: oldest created_at of a queued, due task), claim (per team role: mean and max claim latency i1, i2), finished (per team role and state: archived tasks a), heads (rows a, rows after the newest checkpointed seq b, first chain created t), checkpoint (newest t), backlog (embedding queue: a, oldest t), workers (alive a, last heartbeat t), latency (sum_seconds f, counts), distill (of a project that distils: daily token budget a, tokens used today in UTC b, counts of jobs queued, deferred and running).';

-- On Citus, over one connection to each worker: the pass's tasks are small,
-- and opening more connections to run them side by side (Citus keeps one a
-- worker between transactions) costs more than it saves (measured on the
-- .ci/citus.sh cluster: about 150 ms against 240 ms for metrics()).
do $$
begin
  if scsql_caller.citus() then
    alter function scsql._metric_counts(bigint, timestamptz) set citus.max_adaptive_executor_pool_size = 1;
  end if;
end
$$;

create or replace function scsql._metric_rows(p_counts jsonb, p_part text)
returns table (project_id bigint, k1 text, k2 text, k3 text, a numeric, b numeric, c numeric, d numeric, t timestamptz,
               i1 interval, i2 interval, f float8, counts bigint[])
language sql immutable
as $$
  select x.project_id, x.k1, x.k2, x.k3, x.a, x.b, x.c, x.d, x.t, x.i1, x.i2, x.f, x.counts
  from jsonb_to_recordset(p_counts) x(project_id bigint, part text, k1 text, k2 text, k3 text, a numeric, b numeric,
                                      c numeric, d numeric, t timestamptz, i1 interval, i2 interval, f float8,
                                      counts bigint[])
  where x.part = p_part
$$;
comment on function scsql._metric_rows(jsonb, text) is
  'Private, for scsql.metrics(). The rows of one PART of scsql._metric_counts()''s figures, typed.';

create or replace function scsql._metric_queue_parts(p_counts jsonb)
returns jsonb
language sql immutable
as $$
  select p_counts || coalesce(jsonb_agg(q), '[]')
  from (
    select r.project_id, 'depth' as part, r.k1, r.k2, null::text as k3, r.a, null::numeric as b, null::numeric as c,
           null::numeric as d, null::timestamptz as t, null::interval as i1, null::interval as i2, null::float8 as f,
           null::bigint[] as counts
    from scsql._metric_rows(p_counts, 'tasks') r
    union all
    select r.project_id, 'oldest', r.k1, null, null, null, null, null, null, min(r.t), null, null, null, null
    from scsql._metric_rows(p_counts, 'tasks') r where r.t is not null group by r.project_id, r.k1
    union all
    select r.project_id, 'claim', r.k1, null, null, null, null, null, null, null, sum(r.i1) / sum(r.b)::float8, max(r.i2),
           null, null
    from scsql._metric_rows(p_counts, 'tasks') r where r.b > 0 group by r.project_id, r.k1
  ) q
$$;
comment on function scsql._metric_queue_parts(jsonb) is
  'Private, for scsql._metric_counts(). Its figures P_COUNTS with the queue''s parts added, made of its part tasks: depth (per project, team role k1 and state k2: tasks a), oldest (per project and team role: the oldest created_at t of a queued, due task) and claim (per project and team role: the mean i1 and the longest i2 claim latency of the claimed tasks).';

create or replace function scsql._tool_call_metrics(p_only bigint, p_counts jsonb)
returns table (metric text, labels jsonb, value double precision, buckets jsonb)
language plpgsql stable
as $$
#variable_conflict use_column
begin
  return query
  with projects as not materialized (  -- the projects shown: every one, or P_ONLY
    select p.project_id, p.name from scsql.projects p where p_only is null or p.project_id = p_only
  ),
  calls as (
    select pr.name, r.k1 as model, r.k2 as status, r.a as n, r.b as cost, r.c as tin, r.d as tout
    from scsql._metric_rows(p_counts, 'calls') r join projects pr using (project_id)
  )
  select 'scsql_tool_calls_total' as metric, jsonb_build_object('project', name, 'model', model, 'status', status) as labels,
         n::float8 as value, null::jsonb as buckets from calls
  union all
  select 'scsql_tool_call_cost_usd_total', jsonb_build_object('project', name, 'model', model), sum(cost)::float8, null from calls group by name, model
  union all
  select 'scsql_tool_call_tokens_total', jsonb_build_object('project', name, 'model', model, 'direction', d.dir), d.n::float8, null
  from (select name, model, sum(tin) as tin, sum(tout) as tout from calls group by 1, 2) c
  cross join lateral (values ('input', c.tin), ('output', c.tout)) d(dir, n);
end
$$;
comment on function scsql._tool_call_metrics(bigint, jsonb) is
  'Private, for scsql.metrics(). The tool call series (calls, cost in USD, tokens by direction) per project, model and status, of every project or only P_ONLY''s, from the figures of scsql._metric_counts().';

create or replace function scsql._queue_metrics(p_only bigint, p_now timestamptz, p_counts jsonb)
returns table (metric text, labels jsonb, value double precision, buckets jsonb)
language plpgsql stable
as $$
#variable_conflict use_column
begin
  return query
  with projects as not materialized (  -- the projects shown: every one, or P_ONLY
    select p.project_id, p.name from scsql.projects p where p_only is null or p.project_id = p_only
  )
  select 'scsql_queue_depth' as metric, jsonb_build_object('project', pr.name, 'team_role', r.k1, 'state', r.k2) as labels,
         r.a::float8 as value, null::jsonb as buckets
  from scsql._metric_rows(p_counts, 'depth') r join projects pr using (project_id)
  union all
  select 'scsql_queue_oldest_wait_seconds', jsonb_build_object('project', pr.name, 'team_role', r.k1),
         extract(epoch from p_now - r.t)::float8, null
  from scsql._metric_rows(p_counts, 'oldest') r join projects pr using (project_id)
  union all
  select 'scsql_claim_latency_seconds', jsonb_build_object('project', pr.name, 'team_role', r.k1, 'stat', s.stat), s.v, null
  from scsql._metric_rows(p_counts, 'claim') r
  join projects pr using (project_id)
  cross join lateral (values ('avg', extract(epoch from r.i1)::float8), ('max', extract(epoch from r.i2)::float8)) s(stat, v)
  union all
  select 'scsql_tasks_finished_total', jsonb_build_object('project', pr.name, 'team_role', r.k1, 'state', r.k2), r.a::float8, null
  from scsql._metric_rows(p_counts, 'finished') r join projects pr using (project_id);
end
$$;
comment on function scsql._queue_metrics(bigint, timestamptz, jsonb) is
  'Private, for scsql.metrics(). The task queue series at time NOW (depth by state, oldest wait, claim latency, finished tasks) per project and team role, of every project or only P_ONLY''s, from the figures of scsql._metric_counts().';

create or replace function scsql._chain_metrics(p_only bigint, p_now timestamptz, p_counts jsonb)
returns table (metric text, labels jsonb, value double precision, buckets jsonb)
language plpgsql stable
as $$
#variable_conflict use_column
begin
  return query
  with projects as not materialized (  -- the projects shown: every one, or P_ONLY
    select p.project_id, p.name from scsql.projects p where p_only is null or p.project_id = p_only
  ),
  heads as (select r.project_id, r.a as rows, r.t as first_at, r.b as unverified from scsql._metric_rows(p_counts, 'heads') r),
  cps as (select r.project_id, r.t as at from scsql._metric_rows(p_counts, 'checkpoint') r)
  select 'scsql_chain_rows_total' as metric, jsonb_build_object('project', pr.name) as labels, h.rows::float8 as value, null::jsonb as buckets
  from heads h join projects pr using (project_id)
  union all
  select 'scsql_chain_rows_unverified', jsonb_build_object('project', pr.name), h.unverified::float8, null
  from heads h join projects pr using (project_id)
  union all
  select 'scsql_last_verification_timestamp_seconds', jsonb_build_object('project', pr.name), extract(epoch from c.at)::float8, null
  from cps c join projects pr using (project_id)
  union all
  select 'scsql_checkpoint_age_seconds', jsonb_build_object('project', pr.name),
         extract(epoch from p_now - coalesce(c.at, h.first_at))::float8, null
  from heads h join projects pr using (project_id) left join cps c using (project_id)
  where h.rows > 0
  union all
  select 'scsql_chain_quarantines_open', jsonb_build_object('project', pr.name), coalesce(q.n, 0)::float8, null
  from projects pr
  left join (select q.project_id, count(*) as n from scsql.chain_quarantines q where q.acknowledged_at is null group by 1) q
    using (project_id);  -- a reference table: read on the coordinator
end
$$;
comment on function scsql._chain_metrics(bigint, timestamptz, jsonb) is
  'Private, for scsql.metrics(). The audit chain series at time NOW (rows, rows no checkpoint covers, last verification, checkpoint age, open quarantines) per project, of every project or only P_ONLY''s, from the figures of scsql._metric_counts().';

create or replace function scsql._worker_metrics(p_only bigint, p_now timestamptz, p_counts jsonb)
returns table (metric text, labels jsonb, value double precision, buckets jsonb)
language plpgsql stable
as $$
#variable_conflict use_column
begin
  return query
  with projects as not materialized (  -- the projects shown: every one, or P_ONLY
    select p.project_id, p.name from scsql.projects p where p_only is null or p.project_id = p_only
  )
  select 'scsql_embedding_backlog' as metric, jsonb_build_object('project', pr.name) as labels,
         coalesce(q.a, 0)::float8 as value, null::jsonb as buckets
  from projects pr left join scsql._metric_rows(p_counts, 'backlog') q using (project_id)
  union all
  select 'scsql_embedding_backlog_oldest_seconds', jsonb_build_object('project', pr.name),
         coalesce(extract(epoch from p_now - q.t), 0)::float8, null
  from projects pr left join scsql._metric_rows(p_counts, 'backlog') q using (project_id)
  union all
  select 'scsql_workers_alive', jsonb_build_object('project', pr.name), coalesce(w.a, 0)::float8, null
  from projects pr left join scsql._metric_rows(p_counts, 'workers') w using (project_id)
  union all
  select 'scsql_worker_heartbeat_age_seconds', jsonb_build_object('project', pr.name),
         extract(epoch from p_now - w.t)::float8, null
  from scsql._metric_rows(p_counts, 'workers') w join projects pr using (project_id)
  union all
  select 'scsql_search_latency_seconds', jsonb_build_object('project', pr.name),
         l.f, scsql._latency_buckets(l.counts)
  from scsql._metric_rows(p_counts, 'latency') l join projects pr using (project_id);
end
$$;
comment on function scsql._worker_metrics(bigint, timestamptz, jsonb) is
  'Private, for scsql.metrics(). The series of the work done beside the API at time NOW (embedding backlog and its oldest entry, live workers, last heartbeat, search latency histogram) per project, of every project or only P_ONLY''s, from the figures of scsql._metric_counts().';

create or replace function scsql._partition_metrics(p_only bigint, p_now timestamptz)
returns table (metric text, labels jsonb, value double precision, buckets jsonb)
language plpgsql stable  -- not SQL: Citus plans no query with an SQL function's parameters
as $$
#variable_conflict use_column
begin
  return query
  select 'scsql_partition_days_ahead' as metric, jsonb_build_object('table', s.parent) as labels,
         coalesce(extract(epoch from max(p.upper_bound) - p_now) / 86400, 0)::float8 as value, null::jsonb as buckets
  from scsql.partition_settings s cross join lateral scsql._partitions(s.parent::regclass) p
  where p_only is null group by s.parent
  union all
  select 'scsql_partitions_past_retention', jsonb_build_object('table', s.parent),
         count(p.partition) filter (where not p.is_default and s.retention is not null
                                    and p.upper_bound <= p_now - s.retention - interval '1 day')::float8, null
  from scsql.partition_settings s cross join lateral scsql._partitions(s.parent::regclass) p
  where p_only is null group by s.parent;
end
$$;
comment on function scsql._partition_metrics(bigint, timestamptz) is
  'Private, for scsql.metrics(). The server-wide partition series at time NOW (days of partitions ahead, partitions past retention) per partitioned table; none when P_ONLY names a project.';

create or replace function scsql.metrics()
returns table (metric text, kind text, help text, labels jsonb, value double precision, buckets jsonb)
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  -- Values, not calls inside the query: on Citus the query's parts run on
  -- the shards, as the owner.
  v_only bigint := scsql._metric_scope();
  v_now timestamptz := now();
  v_counts jsonb;
begin
  v_counts := scsql._metric_counts(v_only, v_now);  -- every project's figures, in one pass
  return query
  select d.metric, h.kind, h.help, d.labels, d.value, d.buckets
  from (select * from scsql._tool_call_metrics(v_only, v_counts)
        union all select * from scsql._queue_metrics(v_only, v_now, v_counts)
        union all select * from scsql._chain_metrics(v_only, v_now, v_counts)
        union all select * from scsql._worker_metrics(v_only, v_now, v_counts)
        union all select * from scsql._partition_metrics(v_only, v_now)
        union all select * from scsql._distill_metrics(v_only, v_counts)) d
  join scsql._metric_help() h using (metric)
  order by d.metric, d.labels::text;
end
$$;
comment on function scsql.metrics() is
  'Operators and scsql metrics (not an MCP tool). The figures an operator graphs, one row per series: metric (a Prometheus name), kind (counter, gauge, histogram), help, labels (project, and model, status, team_role, state, stat, direction or table where they apply), value (for a histogram: the sum of its observations, in seconds) and, for a histogram, buckets: [[le, cumulative count], ..., ["+Inf", count]]. Tool calls, their cost and tokens count the rows retention still keeps (a dropped partition looks like a counter reset, which Prometheus rate() handles). An agent sees only its own project''s series; administrators and the auditor see every project and the server-wide partition figures. Raises SC002 when the acting agent was revoked.';
