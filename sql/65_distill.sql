-- 65 distillation: a model, run outside the database, turns a session into
-- facts, decisions, open loops and a summary. The model is an untrusted
-- guest (DESIGN rule 11): what it proposes is written by the project's
-- distiller agent through the memory functions, each item checked, signed,
-- citing the rows it came from, never outranking an importance-5 fact, and
-- undone by distill_undo with the history kept.
--
-- The flow. SessionEnd and PreCompact call queue_distill for the session
-- (in the transaction that stored its conversation): when the project
-- distils (distill_settings, set by set_distill) and the session holds
-- prompts, tool calls or conversation chunks newer than its last job, a job
-- is queued for that segment, as a task of team role distiller. The
-- distiller's scsql worker claims it (claim_task), reads what the model sees
-- (distill_input: the segment's stored, redacted rows and the memory it may
-- touch), reserves its tokens from the daily budget (distill_start, which
-- defers the job to the next UTC day when the budget is spent), runs the
-- model command, checks the answer, writes each item (distill_write) and
-- ends the job (distill_finish). A job reads only what scsql stored, so text
-- kept out of storage (<private>) never reaches the model.
--
-- Tables: migrations/0780_distill.sql.

select scsql._define_error(code, name, meaning, raised_by) from (values
  ('SC330', 'not_distiller', 'database', 'Only the project''s distiller agent (scsql.distill_settings, set by set_distill) runs distillation jobs and writes what they propose.'),
  ('SC331', 'distill_citation_invalid', 'database', 'A distilled item must cite 1 to 20 rows of its job''s session segment, each as prompt:<id>, tool_call:<id> or chunk:<id>; the message names a citation that is malformed or names no such row of the segment.'),
  ('SC332', 'distill_item_invalid', 'database', 'A distilled item is not of a known kind (fact, decision, loop_opened, loop_closed, contradiction, summary) or lacks a field its kind needs, or names a fact that is not in working memory; the message says which.'),
  ('SC333', 'distill_job_unknown', 'database', 'No distillation job with that id (or task) is running in the project.'),
  ('SC334', 'distill_session_unknown', 'database', 'No session of the project has that id or Claude Code session id.'),
  ('SC335', 'distill_settings_invalid', 'database', 'set_distill: the distiller must be an agent of the project with team role distiller, not revoked; the model a name of letters, digits and ._:@/-; the command 1 to 64 words.'),
  ('SC336', 'distill_output_refused', 'client', 'The distillation model''s answer was refused whole: it is not JSON, not of the schema the request states, or larger than the bound. Nothing of it was written; the job is recorded as rejected.'),
  ('SC337', 'distill_command_failed', 'client', 'The distillation model command failed (not found, a non-zero exit, a timeout). The job is tried again later, up to its attempts.')
) as t(code, name, raised_by, meaning);

select scsql._make_chained('scsql.distill_items', array['job_id', 'kind', 'item', 'cites'],
                           array['item_id', 'action', 'target', 'undo']);

-- ---------------------------------------------------------------------------
-- Settings and budget
-- ---------------------------------------------------------------------------

create or replace function scsql.set_distill(
  p_project text, p_distiller text, p_enabled boolean default true, p_model text default null,
  p_daily_tokens integer default null, p_command text[] default null, p_max_input_chars integer default null)
returns table (project text, distiller text, enabled boolean, model text, command text[], daily_tokens integer,
               max_input_chars integer)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_project bigint;
  v_agent scsql.agents;
  v_err scsql.violation;
  -- Values, not calls, in the upsert: Citus sends it to the project's shard
  -- and refuses a function that is not immutable in its DO UPDATE (and there
  -- session_user would be the coordinator's connection, not the caller).
  v_now timestamptz := now();
  v_by text := session_user;
begin
  select p.project_id into v_project from scsql.projects p where p.name = p_project;
  if v_project is null then
    raise exception using errcode = 'SC005', message = format('no project %s', coalesce(p_project, 'NULL'));
  end if;
  perform scsql._require(p_enabled is not null, 'enabled must be true or false');
  select * into v_agent from scsql.agents a where a.name = p_distiller;
  if v_agent.agent_id is null or v_agent.project_id <> v_project or v_agent.team_role <> 'distiller'
     or v_agent.revoked_at is not null then
    raise exception using errcode = 'SC335',
      message = format('agent %s is not a distiller of project %s that can act', coalesce(p_distiller, 'NULL'), p_project),
      hint = 'Create it with scsql agent create NAME --project PROJECT --role distiller (scsql install claude --distill does).';
  end if;
  if exists (select from unnest(p_command) w where w is null or char_length(w) > 4096) then
    raise exception using errcode = 'SC335', message = 'each word of the command must be 1 to 4,096 characters';
  end if;
  begin
    insert into scsql.distill_settings as s (project_id, enabled, distiller_id, command, model, daily_tokens, max_input_chars)
    values (v_project, p_enabled, v_agent.agent_id, nullif(p_command, '{}'), coalesce(p_model, 'haiku'),
            coalesce(p_daily_tokens, 200000), coalesce(p_max_input_chars, 60000))
    on conflict (project_id) do update
      set enabled = excluded.enabled, distiller_id = excluded.distiller_id,
          command = case when p_command is null then s.command else excluded.command end,
          model = coalesce(p_model, s.model), daily_tokens = coalesce(p_daily_tokens, s.daily_tokens),
          max_input_chars = coalesce(p_max_input_chars, s.max_input_chars),
          updated_at = v_now, updated_by = v_by;
  exception when check_violation or not_null_violation then
    get stacked diagnostics v_err.returned_sqlstate = returned_sqlstate, v_err.schema_name = schema_name,
      v_err.table_name = table_name, v_err.constraint_name = constraint_name, v_err.column_name = column_name, v_err.message_text = message_text;
    perform scsql._raise_violation(v_err);
  end;
  return query select p_project, v_agent.name, s.enabled, s.model, s.command, s.daily_tokens, s.max_input_chars
  from scsql.distill_settings s where s.project_id = v_project;
end
$$;
comment on function scsql.set_distill(text, text, boolean, text, integer, text[], integer) is
  'Administrators. Makes a project distil its sessions with a model, or stop (enabled false), and sets how. Returns the settings.

The distiller (an agent of the project with team role distiller) writes what the model proposes; scsql worker acting as it runs the jobs. MODEL (default haiku) is passed to the default command, claude -p; COMMAND (argument words; {} resets it to the default) is any program that reads the JSON request on stdin and writes the JSON answer on stdout, run by the distiller''s worker, so only administrators set it. DAILY_TOKENS (1,000 to 100,000,000; default 200,000) bounds the tokens the project''s jobs use per UTC day (a job that would pass it waits for the next day); MAX_INPUT_CHARS (2,000 to 1,000,000; default 60,000) bounds the conversation one job sends. Arguments left NULL keep their value. Raises SC005 unknown project, SC335 a distiller that is not the project''s, not of team role distiller or revoked, or a bad command or model, SC010 a bad budget or bound.';

create or replace function scsql._distill_used(p_project bigint)
returns bigint
language plpgsql stable
as $$
begin
  -- The tokens of the jobs started this UTC day: used (every attempt), and
  -- reserved by those running now.
  -- PL/pgSQL: Citus cannot plan a parameterized SQL function's query over its tables.
  return (
    select coalesce(sum(coalesce(j.input_tokens, 0) + coalesce(j.output_tokens, 0) + j.reserved_tokens), 0)::bigint
    from scsql.distill_jobs j
    where j.project_id = p_project
      and j.started_at >= (date_trunc('day', now() at time zone 'UTC') at time zone 'UTC')
  );
end
$$;
comment on function scsql._distill_used(bigint) is
  'Private. The tokens a project''s distillation jobs used this UTC day (all their attempts), plus those reserved by jobs running now.';

create or replace function scsql._distill_status(p_project bigint)
returns table (enabled boolean, distiller text, model text, command text[], daily_tokens integer, used_today bigint,
               max_input_chars integer, queued bigint, deferred bigint, running bigint, done_today bigint,
               failed_today bigint, oldest_queued_at timestamptz)
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_used bigint := scsql._distill_used(p_project);  -- read first: on Citus the query below runs on a shard
begin
  -- PL/pgSQL: Citus cannot plan a parameterized SQL function's query over its tables.
  return query
  select s.enabled, a.name::text, s.model, s.command, s.daily_tokens, v_used, s.max_input_chars,
         count(*) filter (where j.state = 'queued'), count(*) filter (where j.state = 'deferred'),
         count(*) filter (where j.state = 'running'),
         count(*) filter (where j.state in ('done', 'rejected')
                          and j.finished_at >= (date_trunc('day', now() at time zone 'UTC') at time zone 'UTC')),
         count(*) filter (where j.state = 'failed'
                          and j.finished_at >= (date_trunc('day', now() at time zone 'UTC') at time zone 'UTC')),
         min(j.queued_at) filter (where j.state in ('queued', 'deferred'))
  from scsql.distill_settings s
  join scsql.agents a on a.agent_id = s.distiller_id
  left join scsql.distill_jobs j on j.project_id = s.project_id
  where s.project_id = p_project
  group by s.project_id, s.enabled, a.name, s.model, s.command, s.daily_tokens, s.max_input_chars;
end
$$;
comment on function scsql._distill_status(bigint) is
  'Private. A project''s distillation settings and use: enabled, distiller, model, command, daily_tokens, used_today (UTC), max_input_chars, jobs queued, deferred (budget spent), running, done and failed today, and when the oldest waiting job was queued. No row when the project does not distil.';

create or replace function scsql.distill_status()
returns table (enabled boolean, distiller text, model text, command text[], daily_tokens integer, used_today bigint,
               max_input_chars integer, queued bigint, deferred bigint, running bigint, done_today bigint,
               failed_today bigint, oldest_queued_at timestamptz)
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$ select * from scsql._distill_status(scsql._my_project()) $$;
comment on function scsql.distill_status() is
  'Whether your project distils its sessions, with what model and command, its daily token budget and what was used of it today (UTC), and its jobs. No row: the project does not distil. Raises SC001/SC002 like every agent function.';

create or replace function scsql.distill_overview()
returns table (project text, enabled boolean, distiller text, model text, command text[], daily_tokens integer,
               used_today bigint, max_input_chars integer, queued bigint, deferred bigint, running bigint,
               done_today bigint, failed_today bigint, oldest_queued_at timestamptz)
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_p record;
begin
  -- One project at a time: on Citus a call per row of a sharded table is
  -- pushed to the shard, where _distill_status cannot read the others.
  for v_p in select s.project_id, p.name::text as name
             from scsql.distill_settings s join scsql.projects p using (project_id) order by p.name loop
    return query select v_p.name, d.* from scsql._distill_status(v_p.project_id) d;
  end loop;
end
$$;
comment on function scsql.distill_overview() is
  'Administrators and scsql doctor. The distillation settings and use of every project that distils (as distill_status shows one project''s).';

create or replace function scsql._distill_metrics(p_only bigint, p_counts jsonb)
returns table (metric text, labels jsonb, value double precision, buckets jsonb)
language plpgsql stable
as $$
#variable_conflict use_column
begin
  return query
  with projects as not materialized (  -- the projects shown: every one, or P_ONLY
    select p.project_id, p.name from scsql.projects p where p_only is null or p.project_id = p_only
  )
  select m.metric, jsonb_build_object('project', pr.name) || m.extra, m.value, null::jsonb
  from scsql._metric_rows(p_counts, 'distill') r join projects pr using (project_id)
  cross join lateral (values
    ('scsql_distill_daily_tokens', '{}'::jsonb, r.a::float8),
    ('scsql_distill_tokens_today', '{}'::jsonb, r.b::float8),
    ('scsql_distill_jobs', '{"state": "queued"}'::jsonb, r.counts[1]::float8),
    ('scsql_distill_jobs', '{"state": "deferred"}'::jsonb, r.counts[2]::float8),
    ('scsql_distill_jobs', '{"state": "running"}'::jsonb, r.counts[3]::float8)
  ) m(metric, extra, value);
end
$$;
comment on function scsql._distill_metrics(bigint, jsonb) is
  'Private, for scsql.metrics(). The distillation series of every project that distils (only P_ONLY''s when given), from the figures of scsql._metric_counts() (P_COUNTS, its part distill): scsql_distill_daily_tokens, scsql_distill_tokens_today and scsql_distill_jobs by state (queued, deferred, running).';

-- ---------------------------------------------------------------------------
-- Queueing a session segment
-- ---------------------------------------------------------------------------

create or replace function scsql._distill_chunks(p_project bigint, p_external text)
returns table (chunk_id bigint, content text, at timestamptz)
language plpgsql stable
as $$
#variable_conflict use_column
begin
  -- A session's conversation parts: the hooks index them at
  -- claude/sessions/<Claude session id>/<n>.md with meta.session.
  -- PL/pgSQL: Citus cannot plan a parameterized SQL function's query over its tables.
  return query
  select c.chunk_id, c.content, coalesce(s.occurred_at, c.created_at)
  from scsql.kb_sources s
  join scsql.kb_chunks c on c.project_id = s.project_id and c.source_id = s.source_id
  where s.project_id = p_project and s.meta ->> 'session' = p_external and s.path like 'claude/sessions/%';
end
$$;
comment on function scsql._distill_chunks(bigint, text) is
  'Private. The conversation chunks of a Claude Code session (P_EXTERNAL: its session id) in a project: chunk_id, text and when it happened.';

create or replace function scsql.queue_distill(p_session_id bigint)
returns table (job_id bigint, segment integer, task_id bigint, queued boolean)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_me scsql.agents := scsql._me();
  v_set scsql.distill_settings;
  v_last scsql.distill_jobs;
  v_ext text;
  v_p bigint;
  v_t bigint;
  v_c bigint;
  v_job scsql.distill_jobs;
  v_task bigint;
begin
  select * into v_set from scsql.distill_settings s where s.project_id = v_me.project_id and s.enabled;
  if not found then
    return;  -- the project does not distil: everything stays model-free
  end if;
  perform scsql._my_session(v_me, p_session_id);
  select s.external_id into v_ext from scsql.sessions s where s.project_id = v_me.project_id and s.session_id = p_session_id;
  select coalesce(max(p.prompt_id), 0) into v_p from scsql.prompts p
  where p.project_id = v_me.project_id and p.session_id = p_session_id;
  select coalesce(max(t.tool_call_id), 0) into v_t from scsql.tool_calls t
  where t.project_id = v_me.project_id and t.session_id = p_session_id;
  select coalesce(max(c.chunk_id), 0) into v_c from scsql._distill_chunks(v_me.project_id, v_ext) c;
  select * into v_last from scsql.distill_jobs j
  where j.project_id = v_me.project_id and j.session_id = p_session_id order by j.segment desc limit 1;
  if v_p <= coalesce(v_last.prompts_upto, 0) and v_t <= coalesce(v_last.tool_calls_upto, 0)
     and v_c <= coalesce(v_last.chunks_upto, 0) then
    -- Nothing new since the last job (a replayed or repeated event): no job.
    return query select v_last.job_id, v_last.segment, v_last.task_id, false where v_last.job_id is not null;
    return;
  end if;
  insert into scsql.distill_jobs as j (project_id, session_id, segment, prompts_from, prompts_upto, tool_calls_from,
                                       tool_calls_upto, chunks_from, chunks_upto, queued_by)
  values (v_me.project_id, p_session_id, coalesce(v_last.segment, 0) + 1, coalesce(v_last.prompts_upto, 0), v_p,
          coalesce(v_last.tool_calls_upto, 0), v_t, coalesce(v_last.chunks_upto, 0), v_c, v_me.agent_id)
  on conflict on constraint distill_jobs_segment_key do nothing
  returning * into v_job;
  if v_job.job_id is null then
    return;  -- a concurrent call queued this segment
  end if;
  insert into scsql.tasks as t (project_id, team_role, payload, acceptance_criteria, max_attempts, created_by)
  values (v_me.project_id, 'distiller', jsonb_build_object('distill_job', v_job.job_id),
          'distilled items written through distill_write, the job ended by distill_finish', 3, v_me.agent_id)
  returning t.task_id into v_task;
  update scsql.distill_jobs j set task_id = v_task where j.project_id = v_me.project_id and j.job_id = v_job.job_id;
  perform scsql._notify_queue(v_me.project_id, 'distiller', 'task');
  return query select v_job.job_id, v_job.segment, v_task, true;
end
$$;
comment on function scsql.queue_distill(bigint) is
  'Queues the distillation of what your session added since its last job (one job per session segment), when your project distils; the Claude Code hooks call it at PreCompact and SessionEnd. Returns job_id, segment, task_id and queued (false: nothing new since the last job, which is returned); no row when the project does not distil.

The segment is the session''s prompts, tool calls and conversation chunks with ids above those of the previous job; the job is a task of team role distiller (3 attempts), which the distiller''s scsql worker runs. Calling it again with nothing new queues nothing. Raises SC146 for a session that is not yours (when the project distils).';

-- ---------------------------------------------------------------------------
-- What the model sees
-- ---------------------------------------------------------------------------

create or replace function scsql._distill_job(p_me scsql.agents, p_job bigint, p_states text[])
returns scsql.distill_jobs
language plpgsql stable
as $$
declare
  v_job scsql.distill_jobs;
begin
  if not exists (select from scsql.distill_settings s
                 where s.project_id = p_me.project_id and s.distiller_id = p_me.agent_id) then
    raise exception using errcode = 'SC330',
      message = format('agent %s is not the distiller of its project', p_me.name),
      hint = 'scsql worker --agent DISTILLER --job distill runs the jobs; scsql distill status names the distiller.';
  end if;
  select * into v_job from scsql.distill_jobs j where j.project_id = p_me.project_id and j.job_id = p_job;
  if v_job.job_id is null or not v_job.state = any (p_states) then
    raise exception using errcode = 'SC333',
      message = format('no distillation job %s is %s in this project', coalesce(p_job::text, 'NULL'),
                       array_to_string(p_states, ' or ')),
      hint = 'Claim the job''s task first (claim_task), then distill_start it.';
  end if;
  return v_job;
end
$$;
comment on function scsql._distill_job(scsql.agents, bigint, text[]) is
  'Private. Job P_JOB of agent P_ME''s project, in one of the states P_STATES. Raises SC330 unless P_ME is the project''s distiller, SC333 when there is no such job in those states.';

create or replace function scsql._distill_clip(p_text text, p_max integer)
returns text
language sql immutable
as $$ select case when char_length(p_text) > p_max then left(p_text, p_max - 1) || '…' else p_text end $$;
comment on function scsql._distill_clip(text, integer) is
  'Private. P_TEXT cut to P_MAX characters (the last an ellipsis) when longer.';

create or replace function scsql._distill_conversation(p_job scsql.distill_jobs, p_external text)
returns table (ref text, at timestamptz, doc jsonb)
language plpgsql stable
as $$
#variable_conflict use_column
begin
  -- PL/pgSQL: Citus cannot plan a parameterized SQL function's query over its tables.
  return query
  select 'prompt:' || p.prompt_id, coalesce(p.occurred_at, p.at),
         jsonb_build_object('ref', 'prompt:' || p.prompt_id, 'at', coalesce(p.occurred_at, p.at), 'said_by', 'user',
                            'text', scsql._distill_clip(p.text, 4000))
  from scsql.prompts p
  where p.project_id = p_job.project_id and p.session_id = p_job.session_id
    and p.prompt_id > p_job.prompts_from and p.prompt_id <= p_job.prompts_upto
  union all
  select 'tool_call:' || t.tool_call_id, coalesce(t.occurred_at, t.at),
         jsonb_strip_nulls(jsonb_build_object('ref', 'tool_call:' || t.tool_call_id, 'at', coalesce(t.occurred_at, t.at),
                            'tool', t.tool, 'status', t.status, 'input', scsql._distill_clip(t.input_preview, 1500),
                            'output', scsql._distill_clip(t.output_preview, 1500)))
  from scsql.tool_calls t
  where t.project_id = p_job.project_id and t.session_id = p_job.session_id
    and t.tool_call_id > p_job.tool_calls_from and t.tool_call_id <= p_job.tool_calls_upto;
  -- A statement of its own: on Citus the one above runs on the project's
  -- shard, where _distill_chunks cannot run its query.
  return query
  select 'chunk:' || c.chunk_id, c.at,
         jsonb_build_object('ref', 'chunk:' || c.chunk_id, 'at', c.at, 'conversation', scsql._distill_clip(c.content, 3000))
  from scsql._distill_chunks(p_job.project_id, p_external) c
  where c.chunk_id > p_job.chunks_from and c.chunk_id <= p_job.chunks_upto;
end
$$;
comment on function scsql._distill_conversation(scsql.distill_jobs, text) is
  'Private. The stored rows of a job''s session segment as the model sees them: prompts (4,000 characters at most), tool calls with status and previews (1,500 each) and conversation chunks (3,000), each with its ref (prompt:<id>, tool_call:<id>, chunk:<id>) and time.';

create or replace function scsql.distill_input(p_job bigint)
returns jsonb
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_me scsql.agents := scsql._me();
  v_job scsql.distill_jobs := scsql._distill_job(v_me, p_job, array['queued', 'running', 'deferred']);
  v_max integer;
  v_ext text;
  v_author text;
  v_conv jsonb;
  v_left bigint;
begin
  select s.max_input_chars into v_max from scsql.distill_settings s where s.project_id = v_me.project_id;
  select s.external_id, a.name into v_ext, v_author
  from scsql.sessions s join scsql.agents a on a.agent_id = s.author_id
  where s.project_id = v_me.project_id and s.session_id = v_job.session_id;
  -- The newest rows that fit in max_input_chars, in the order they happened.
  select coalesce(jsonb_agg(c.doc order by c.at, c.ref) filter (where c.cum <= v_max), '[]'),
         count(*) filter (where c.cum > v_max)
    into v_conv, v_left
  from (select c.*, sum(octet_length(c.doc::text)) over (order by c.at desc, c.ref desc) as cum
        from scsql._distill_conversation(v_job, v_ext) c) c;
  return jsonb_build_object(
    'job', v_job.job_id,
    'session', jsonb_build_object('id', v_job.session_id, 'claude_session', v_ext, 'agent', v_author,
                                  'segment', v_job.segment),
    'conversation', v_conv,
    'omitted', v_left,
    'memory', jsonb_build_object(
      'facts', coalesce((select jsonb_agg(jsonb_build_object('key', f.key, 'value', scsql._distill_clip(f.value, 600),
                                                             'importance', f.importance, 'protected', f.importance = 5)
                                          order by f.importance desc, f.updated_at desc, f.key)
                         from (select * from scsql.memory_facts f where f.project_id = v_me.project_id
                               and (f.expires_at is null or f.expires_at > now())
                               order by f.importance desc, f.updated_at desc, f.key limit 60) f), '[]'),
      'decisions', coalesce((select jsonb_agg(jsonb_build_object('id', d.decision_id, 'title', d.title,
                                                                 'rationale', scsql._distill_clip(d.rationale, 400))
                                              order by d.decided_at desc, d.decision_id desc)
                             from (select * from scsql.decisions d where d.project_id = v_me.project_id
                                   and not exists (select from scsql.decisions n where n.project_id = d.project_id
                                                   and n.supersedes = d.decision_id)
                                   order by d.decided_at desc, d.decision_id desc limit 20) d), '[]'),
      'open_loops', coalesce((select jsonb_agg(jsonb_strip_nulls(jsonb_build_object('id', l.loop_id,
                                                   'text', scsql._distill_clip(l.text, 400), 'owner', l.owner))
                                               order by l.opened_at desc, l.loop_id desc)
                              from (select * from scsql.open_loops l where l.project_id = v_me.project_id
                                    and l.closed_at is null order by l.opened_at desc, l.loop_id desc limit 40) l), '[]')));
end
$$;
comment on function scsql.distill_input(bigint) is
  'The distiller. What the model sees for job JOB: the session (id, Claude Code session id, its agent, the segment), its segment''s stored rows in the order they happened (prompts, tool calls with status and previews, conversation chunks; clipped, and only the newest that fit in the project''s max_input_chars; omitted counts the others), and the memory it may touch (up to 60 facts, importance 5 marked protected; the 20 latest current decisions; the 40 newest open loops). Everything in it was stored redacted, and text kept out of storage (<private>) is not in it. Raises SC330 for an agent that is not the distiller, SC333 for no such job waiting or running.';

-- ---------------------------------------------------------------------------
-- Running a job: the budget, the items, the end
-- ---------------------------------------------------------------------------

create or replace function scsql.distill_start(p_task bigint, p_token bigint, p_tokens integer,
  out job_id bigint, out state text, out used_today bigint, out daily_tokens integer, out resume_at timestamptz)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_me scsql.agents := scsql._me();
  v_t scsql.tasks;
  v_set scsql.distill_settings;
  v_job scsql.distill_jobs;
  v_error text;
begin
  perform scsql._require(p_tokens is not null and p_tokens between 1 and 100000000, 'tokens must be 1 to 100000000');
  v_t := scsql._held_task(v_me, p_task, p_token, 'the start of the distillation');
  -- One start at a time per project: the budget is read and reserved together.
  select * into v_set from scsql.distill_settings s where s.project_id = v_me.project_id for update;
  select * into v_job from scsql.distill_jobs j where j.project_id = v_me.project_id and j.task_id = p_task;
  -- running too: an attempt whose worker died before it ended (its lease expired).
  v_job := scsql._distill_job(v_me, v_job.job_id, array['queued', 'deferred', 'running']);
  job_id := v_job.job_id;
  used_today := scsql._distill_used(v_me.project_id);
  daily_tokens := v_set.daily_tokens;
  if not v_set.enabled or p_tokens > v_set.daily_tokens then
    state := 'skipped';
    -- Values, not calls, in the UPDATE: Citus refuses a function that is not immutable in its CASE.
    v_error := case when v_set.enabled then format('needs %s tokens, more than the daily budget of %s', p_tokens,
                                                   v_set.daily_tokens) else 'distillation was turned off' end;
    update scsql.distill_jobs j set state = 'skipped', finished_at = now(), error = v_error
    where j.project_id = v_me.project_id and j.job_id = v_job.job_id;
    perform scsql._archive_task(v_me.project_id, p_task, 'done', jsonb_build_object('distill_job', v_job.job_id,
                                'state', 'skipped'), null, v_me.agent_id);
  elsif used_today + p_tokens > v_set.daily_tokens then
    -- The day's budget is spent: the job waits for the next UTC day.
    state := 'deferred';
    resume_at := (date_trunc('day', now() at time zone 'UTC') + interval '1 day') at time zone 'UTC';
    perform scsql._requeue(v_me.project_id, p_task, resume_at, 'the daily token budget of distillation is spent', true);
    update scsql.distill_jobs j set state = 'deferred' where j.project_id = v_me.project_id and j.job_id = v_job.job_id;
  else
    state := 'running';
    update scsql.distill_jobs j set state = 'running', started_at = now(), reserved_tokens = p_tokens
    where j.project_id = v_me.project_id and j.job_id = v_job.job_id;
  end if;
end
$$;
comment on function scsql.distill_start(bigint, bigint, integer) is
  'The distiller. Starts the job of task TASK (held under lease TOKEN), reserving TOKENS (the request''s estimated tokens and the answer''s bound) from the project''s daily budget. Returns job_id, state, used_today, daily_tokens, resume_at.

state running: run the model. deferred: the day''s budget (UTC) cannot cover it; the task is back in the queue until resume_at, the next UTC day, its attempt not counted. skipped: distillation was turned off, or the job needs more than a whole day''s budget; the task is done. Starts are serialized per project, so two jobs never spend the same tokens. Raises SC330 for an agent that is not the distiller, SC333 when the task is no waiting job, SC302/SC303/SC304/SC301 when the lease does not hold the task, SC010 bad tokens.';

create or replace function scsql._distill_cites(p_job scsql.distill_jobs, p_cites jsonb)
returns table (cited text, cited_id bigint)
language plpgsql stable
as $$
#variable_conflict use_column
declare
  v_ext text;
  v_ref text;
  v_kind text;
  v_id bigint;
  v_ok boolean;
begin
  if pg_catalog.jsonb_typeof(p_cites) is distinct from 'array' or pg_catalog.jsonb_array_length(p_cites) not between 1 and 20
     or exists (select from pg_catalog.jsonb_array_elements(p_cites) e where pg_catalog.jsonb_typeof(e) <> 'string') then
    raise exception using errcode = 'SC331', message = 'cites must be a list of 1 to 20 strings',
      hint = 'Cite the rows an item came from as prompt:<id>, tool_call:<id> or chunk:<id> (the refs of the request).';
  end if;
  select s.external_id into v_ext from scsql.sessions s
  where s.project_id = p_job.project_id and s.session_id = p_job.session_id;
  for v_ref in select distinct e #>> '{}' from pg_catalog.jsonb_array_elements(p_cites) e order by 1 loop
    if v_ref !~ '^(prompt|tool_call|chunk):[0-9]{1,18}$' then
      raise exception using errcode = 'SC331',
        message = format('citation %s is not prompt:<id>, tool_call:<id> or chunk:<id>', pg_catalog.to_json(left(v_ref, 60)));
    end if;
    v_kind := split_part(v_ref, ':', 1);
    v_id := split_part(v_ref, ':', 2)::bigint;
    v_ok := case v_kind
      when 'prompt' then exists (select from scsql.prompts p where p.project_id = p_job.project_id
                                 and p.prompt_id = v_id and p.session_id = p_job.session_id
                                 and v_id > p_job.prompts_from and v_id <= p_job.prompts_upto)
      when 'tool_call' then exists (select from scsql.tool_calls t where t.project_id = p_job.project_id
                                    and t.tool_call_id = v_id and t.session_id = p_job.session_id
                                    and v_id > p_job.tool_calls_from and v_id <= p_job.tool_calls_upto)
      else exists (select from scsql._distill_chunks(p_job.project_id, v_ext) c
                   where c.chunk_id = v_id and v_id > p_job.chunks_from and v_id <= p_job.chunks_upto) end;
    if not v_ok then
      raise exception using errcode = 'SC331',
        message = format('citation %s names no row of session %s (segment %s) of this project', v_ref,
                         p_job.session_id, p_job.segment),
        hint = 'Cite only the refs of the request''s conversation.';
    end if;
    return query select v_kind, v_id;
  end loop;
end
$$;
comment on function scsql._distill_cites(scsql.distill_jobs, jsonb) is
  'Private. The rows a distilled item cites (P_CITES: 1 to 20 strings prompt:<id>, tool_call:<id> or chunk:<id>), each checked to be a row of the job''s session segment in its project. Raises SC331 for a malformed citation or one that names no such row.';

create or replace function scsql._distill_text(p_item jsonb, p_field text, p_required boolean default true)
returns text
language plpgsql immutable
as $$
begin
  if p_item -> p_field is null or pg_catalog.jsonb_typeof(p_item -> p_field) = 'null' then
    if p_required then
      raise exception using errcode = 'SC332', message = format('the item has no %s', p_field);
    end if;
    return null;
  end if;
  if pg_catalog.jsonb_typeof(p_item -> p_field) <> 'string' then
    raise exception using errcode = 'SC332', message = format('the item''s %s must be a string', p_field);
  end if;
  return p_item ->> p_field;
end
$$;
comment on function scsql._distill_text(jsonb, text, boolean) is
  'Private. The string field P_FIELD of a distilled item (NULL when absent and not P_REQUIRED). Raises SC332 when it is absent but required, or not a string.';

create or replace function scsql._distill_int(p_item jsonb, p_field text)
returns bigint
language plpgsql immutable
as $$
begin
  if p_item -> p_field is null or pg_catalog.jsonb_typeof(p_item -> p_field) = 'null' then
    return null;
  end if;
  if pg_catalog.jsonb_typeof(p_item -> p_field) <> 'number' or (p_item ->> p_field) !~ '^[0-9]{1,18}$' then
    raise exception using errcode = 'SC332', message = format('the item''s %s must be a whole number', p_field);
  end if;
  return (p_item ->> p_field)::bigint;
end
$$;
comment on function scsql._distill_int(jsonb, text) is
  'Private. The whole-number field P_FIELD of a distilled item (NULL when absent). Raises SC332 when it is not a non-negative whole number.';

create or replace function scsql._distill_fact(p_me scsql.agents, p_item jsonb,
                                               out action text, out target text, out undo jsonb)
language plpgsql
as $$
declare
  v_key text := scsql._distill_text(p_item, 'key');
  v_value text := scsql._distill_text(p_item, 'value');
  v_imp bigint := coalesce(scsql._distill_int(p_item, 'importance'), 3);
  v_old scsql.memory_facts;
  v_r record;
  v_id bigint;
  v_hash text;
begin
  if v_imp not between 1 and 5 then
    raise exception using errcode = 'SC332', message = format('importance must be 1 to 5, got %s', v_imp);
  end if;
  v_imp := least(v_imp, 4);  -- a distilled fact never reaches the importance that protects a fact
  perform scsql._check_text('key', v_key, 200, false);
  perform scsql._check_text('value', v_value, 4000, true);
  select * into v_old from scsql.memory_facts f where f.project_id = p_me.project_id and f.key = scsql._redact(v_key);
  if v_old.key is not null and v_old.value = scsql._redact(v_value) then
    action := 'unchanged';  -- what memory holds already: nothing written
    target := v_old.key;
    return;
  end if;
  if v_old.importance = 5 then
    -- A protected fact is never superseded by a model: the distilled claim
    -- is kept beside it, under its own key, as a conflict to settle.
    select * into v_r from scsql.remember(left(v_key, 188) || ' (distilled)', v_value, v_imp::integer);
    target := v_r.key;
    if v_r.stored = 'refreshed' then
      action := 'refreshed';
      return;
    end if;
    select c.conflict_id into v_id from scsql.fact_conflicts c
    where c.project_id = p_me.project_id and c.resolved_at is null
      and ((c.key = v_r.key and c.other_key = v_old.key) or (c.key = v_old.key and c.other_key = v_r.key));
    if v_id is null then
      perform scsql._facts_lock(p_me.project_id);
      insert into scsql.fact_conflicts (project_id, key, value_hash, other_key, other_hash, detected_by)
      values (p_me.project_id, v_r.key, scsql._text_hash(scsql._redact(v_value)), v_old.key,
              scsql._text_hash(v_old.value), p_me.agent_id)
      returning conflict_id into v_id;
      perform scsql._memory_change(p_me.project_id, 'conflict', 'fact', v_r.key, null, scsql._text_hash(v_old.value),
        scsql._text_hash(scsql._redact(v_value)),
        format('conflict %s: a distilled claim about %s, a protected fact (importance 5)', v_id, v_old.key), v_old.key);
    end if;
    action := 'conflict';
    undo := jsonb_build_object('conflict', v_id, 'hash', scsql._text_hash(scsql._redact(v_value)), 'protected', v_old.key);
    return;
  end if;
  select * into v_r from scsql.remember(v_key, v_value, v_imp::integer);
  target := v_r.key;
  v_hash := scsql._text_hash(scsql._redact(v_value));
  if v_r.stored = 'refreshed' then
    action := 'refreshed';
  elsif v_old.key is not null then
    action := 'superseded';
    select max(v.version_id) into v_id from scsql.fact_versions v where v.project_id = p_me.project_id and v.key = v_r.key;
    undo := jsonb_build_object('version', v_id, 'hash', v_hash);
  else
    action := case when v_r.stored = 'archived' then 'archived' else 'remembered' end;
    undo := jsonb_build_object('hash', v_hash);
  end if;
end
$$;
comment on function scsql._distill_fact(scsql.agents, jsonb) is
  'Private, for distill_write. Writes a distilled fact (key, value, importance 1-5 stored as at most 4) through remember, as the distiller. A fact memory holds already is left as it is (unchanged); a protected fact (importance 5) is never superseded: the claim is remembered under "<key> (distilled)" and a conflict with the protected fact recorded (conflict). Returns the action (remembered, superseded, refreshed, archived, unchanged, conflict), the key it names and what an undo needs (the hash written, the version superseded, the conflict). Raises SC332, and what remember raises.';

create or replace function scsql._distill_decision(p_me scsql.agents, p_job scsql.distill_jobs, p_item jsonb,
                                                   out action text, out target text, out undo jsonb)
language plpgsql
as $$
declare
  v_title text := scsql._distill_text(p_item, 'title');
  v_why text := scsql._distill_text(p_item, 'rationale');
  v_supersedes bigint := scsql._distill_int(p_item, 'supersedes');
  v_id bigint;
  v_row scsql.decisions;
begin
  perform scsql._check_text('decision title', v_title, 200, false, 'SC235');
  perform scsql._check_text('decision rationale', v_why, 3800, true, 'SC235');
  select d.decision_id into v_id from scsql.decisions d
  where d.project_id = p_me.project_id and d.title = btrim(scsql._redact(v_title))
    and not exists (select from scsql.decisions n where n.project_id = d.project_id and n.supersedes = d.decision_id);
  if v_id is not null then
    action := 'exists';  -- a current decision has this title
    target := 'decision:' || v_id;
    return;
  end if;
  if v_supersedes is not null and exists (select from scsql.decisions n where n.project_id = p_me.project_id
                                          and n.supersedes = v_supersedes) then
    raise exception using errcode = 'SC237', message = format('decision %s was already superseded', v_supersedes);
  end if;
  -- Labelled: the rationale says where it came from, the source names the job.
  v_row := scsql._decide(p_me.project_id, v_title,
                         btrim(v_why) || format(E'\n\n(distilled by %s from session %s)', p_me.name, p_job.session_id),
                         v_supersedes, 'distill:' || p_job.job_id);
  action := 'decided';
  target := 'decision:' || v_row.decision_id;
  undo := jsonb_build_object('supersedes', v_row.supersedes);
end
$$;
comment on function scsql._distill_decision(scsql.agents, scsql.distill_jobs, jsonb) is
  'Private, for distill_write. Records a distilled decision (title, rationale, and the id of the current decision it supersedes, if any) through scsql._decide as the distiller, its rationale labelled with the distiller and session and its source_path distill:<job>; a current decision with that title is left as it is (exists). Raises SC235/SC236/SC237 as decide does, SC332.';

create or replace function scsql._distill_loop(p_me scsql.agents, p_job scsql.distill_jobs, p_kind text, p_item jsonb,
                                               out action text, out target text, out undo jsonb)
language plpgsql
as $$
declare
  v_id bigint;
  v_r record;
  v_row scsql.open_loops;
begin
  if p_kind = 'loop_opened' then
    select * into v_r from scsql._open_loop(p_me.project_id, scsql._distill_text(p_item, 'text'),
                                            scsql._distill_text(p_item, 'owner', false), 'distill:' || p_job.job_id);
    action := case when v_r.created then 'opened' else 'found' end;
    target := 'loop:' || v_r.loop_id;
    return;
  end if;
  v_id := scsql._distill_int(p_item, 'loop_id');
  if v_id is null then
    raise exception using errcode = 'SC332', message = 'the item has no loop_id';
  end if;
  v_row := scsql._close_loop(p_me.project_id, v_id,
                             btrim(scsql._distill_text(p_item, 'resolution'))
                             || format(' (distilled by %s from session %s)', p_me.name, p_job.session_id));
  action := 'closed';
  target := 'loop:' || v_row.loop_id;
end
$$;
comment on function scsql._distill_loop(scsql.agents, scsql.distill_jobs, text, jsonb) is
  'Private, for distill_write. A distilled open loop (text, owner) opened through scsql._open_loop (found when one with that text is open), or a distilled close (loop_id, resolution) through scsql._close_loop, its resolution labelled with the distiller and session; as the distiller, the source distill:<job>. Raises SC238/SC239/SC240 as open_loop and close_loop do, SC332.';

create or replace function scsql._distill_conflict(p_me scsql.agents, p_item jsonb,
                                                   out action text, out target text, out undo jsonb)
language plpgsql
as $$
declare
  v_key text := scsql._redact(scsql._distill_text(p_item, 'key'));
  v_other text := scsql._redact(scsql._distill_text(p_item, 'other_key'));
  v_reason text := scsql._distill_text(p_item, 'reason');
  v_a scsql.memory_facts;
  v_b scsql.memory_facts;
  v_id bigint;
begin
  perform scsql._check_text('reason', v_reason, 1000, true, 'SC332');
  perform scsql._facts_lock(p_me.project_id);
  select * into v_a from scsql.memory_facts f where f.project_id = p_me.project_id and f.key = v_key;
  select * into v_b from scsql.memory_facts f where f.project_id = p_me.project_id and f.key = v_other;
  if v_a.key is null or v_b.key is null or v_a.key = v_b.key then
    raise exception using errcode = 'SC332',
      message = format('a contradiction names two facts of working memory; %s and %s are not', v_key, v_other);
  end if;
  select c.conflict_id into v_id from scsql.fact_conflicts c
  where c.project_id = p_me.project_id and c.resolved_at is null
    and ((c.key = v_a.key and c.other_key = v_b.key) or (c.key = v_b.key and c.other_key = v_a.key));
  if v_id is not null then
    action := 'found';
  else
    insert into scsql.fact_conflicts (project_id, key, value_hash, other_key, other_hash, detected_by)
    values (p_me.project_id, v_a.key, scsql._text_hash(v_a.value), v_b.key, scsql._text_hash(v_b.value), p_me.agent_id)
    returning conflict_id into v_id;
    perform scsql._memory_change(p_me.project_id, 'conflict', 'fact', v_a.key, null, scsql._text_hash(v_b.value),
      scsql._text_hash(v_a.value), format('conflict %s, distilled: %s', v_id, scsql._redact(v_reason)), v_b.key);
    action := 'recorded';
  end if;
  target := 'conflict:' || v_id;
end
$$;
comment on function scsql._distill_conflict(scsql.agents, jsonb) is
  'Private, for distill_write. Records a contradiction the model found between two facts of working memory (key, other_key, reason) as an open conflict (scsql.fact_conflicts, settled by resolve_conflict), with the reason in the memory history; found when one is open between them already. Raises SC332 when either key is not a fact of working memory, or for a bad reason.';

create or replace function scsql._distill_summary(p_me scsql.agents, p_job scsql.distill_jobs, p_item jsonb,
                                                  out action text, out target text, out undo jsonb)
language plpgsql
as $$
declare
  v_text text := scsql._distill_text(p_item, 'text');
  v_when timestamptz;
  v_r record;
begin
  perform scsql._check_text('summary', v_text, 2000, true, 'SC332');
  -- Dated when the segment happened (its latest prompt or tool call).
  select max(w) into v_when from (
    select coalesce(p.occurred_at, p.at) as w from scsql.prompts p
    where p.project_id = p_job.project_id and p.session_id = p_job.session_id
      and p.prompt_id > p_job.prompts_from and p.prompt_id <= p_job.prompts_upto
    union all
    select coalesce(t.occurred_at, t.at) from scsql.tool_calls t
    where t.project_id = p_job.project_id and t.session_id = p_job.session_id
      and t.tool_call_id > p_job.tool_calls_from and t.tool_call_id <= p_job.tool_calls_upto) w;
  select * into v_r from scsql.summarize_session(jsonb_build_object('done', jsonb_build_array(btrim(v_text))),
                                                 least(v_when, now()));
  action := 'summarized';
  target := v_r.path;
end
$$;
comment on function scsql._distill_summary(scsql.agents, scsql.distill_jobs, jsonb) is
  'Private, for distill_write. Archives the model''s short summary of the segment (text, at most 2,000 characters) through summarize_session as the distiller, dated when the segment happened. Raises SC332, and what summarize_session raises.';

create or replace function scsql.distill_write(p_job bigint, p_kind text, p_item jsonb, p_cites jsonb,
  p_at timestamptz default null, p_key_id integer default null, p_signature bytea default null,
  out item_id bigint, out action text, out target text)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_me scsql.agents := scsql._me();
  v_job scsql.distill_jobs := scsql._distill_job(v_me, p_job, array['running']);
  v_w record;
begin
  if p_kind is null or p_kind not in ('fact', 'decision', 'loop_opened', 'loop_closed', 'contradiction', 'summary') then
    raise exception using errcode = 'SC332', message = format('unknown kind of distilled item: %s', coalesce(left(p_kind, 40), 'NULL')),
      hint = 'Kinds: fact, decision, loop_opened, loop_closed, contradiction, summary.';
  end if;
  if pg_catalog.jsonb_typeof(p_item) is distinct from 'object' or octet_length(p_item::text) > 16384
     or scsql._jsonb_depth(p_item, 4) > 3 then
    raise exception using errcode = 'SC332', message = 'a distilled item must be a JSON object of at most 16 KiB';
  end if;
  -- The citations are checked before anything is written.
  perform count(*) from scsql._distill_cites(v_job, p_cites);
  if p_kind = 'fact' then
    select * into v_w from scsql._distill_fact(v_me, p_item);
  elsif p_kind = 'decision' then
    select * into v_w from scsql._distill_decision(v_me, v_job, p_item);
  elsif p_kind = 'contradiction' then
    select * into v_w from scsql._distill_conflict(v_me, p_item);
  elsif p_kind = 'summary' then
    select * into v_w from scsql._distill_summary(v_me, v_job, p_item);
  else
    select * into v_w from scsql._distill_loop(v_me, v_job, p_kind, p_item);
  end if;
  insert into scsql.distill_items as i (project_id, author_id, job_id, kind, item, cites, action, target, undo,
                                        at, key_id, signature)
  values (v_me.project_id, v_me.agent_id, p_job, p_kind, p_item, p_cites, v_w.action, v_w.target, v_w.undo,
          p_at, p_key_id, p_signature)
  returning i.item_id into item_id;
  insert into scsql.distill_citations (project_id, item_id, cited, cited_id)
  select v_me.project_id, item_id, c.cited, c.cited_id from scsql._distill_cites(v_job, p_cites) c
  on conflict do nothing;
  action := v_w.action;
  target := v_w.target;
end
$$;
comment on function scsql.distill_write(bigint, text, jsonb, jsonb, timestamptz, integer, bytea) is
  'The distiller. Writes one item a model proposed for running job JOB, through the memory functions, as the distiller, and records it signed with the rows it cites. Returns item_id, action and target.

KIND fact ({key, value, importance}: remembered, or superseding the key''s value; never superseding an importance-5 fact, with which it is recorded as a conflict instead; stored at importance 4 at most), decision ({title, rationale, supersedes}), loop_opened ({text, owner}), loop_closed ({loop_id, resolution}), contradiction ({key, other_key, reason}: an open conflict between two facts) or summary ({text}). CITES: 1 to 20 rows of the job''s session segment (prompt:<id>, tool_call:<id>, chunk:<id>), checked before anything is written and kept in scsql.distill_citations. ITEM is stored as signed (redacted first; the database refuses signed text holding a secret). Action: what was done (remembered, superseded, refreshed, archived, unchanged, conflict, decided, exists, opened, found, closed, recorded, summarized); target: the fact key, decision:<id>, loop:<id>, conflict:<id> or summary path. Raises SC330 not the distiller, SC333 no such running job, SC331 a bad citation, SC332 a bad item, what the memory function raises (SC200/SC201/SC215/SC235-SC240), SC040/SC101-SC103 bad signing fields.';

create or replace function scsql.distill_finish(p_task bigint, p_token bigint, p_state text,
  p_input_tokens integer default null, p_output_tokens integer default null, p_output_hash text default null,
  p_refusals jsonb default null, p_error text default null,
  out job_id bigint, out state text, out written integer)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_me scsql.agents := scsql._me();
  v_t scsql.tasks;
  v_job scsql.distill_jobs;
  v_r record;
begin
  perform scsql._require(p_state in ('done', 'rejected', 'failed'), 'state must be done, rejected or failed');
  perform scsql._require(coalesce(p_input_tokens, 0) between 0 and 100000000
                         and coalesce(p_output_tokens, 0) between 0 and 100000000, 'token counts must be 0 to 100000000');
  perform scsql._require(p_output_hash is null or p_output_hash ~ '^[0-9a-f]{64}$', 'output_hash must be sha256 hex');
  perform scsql._require(p_refusals is null or (pg_catalog.jsonb_typeof(p_refusals) = 'array'
                         and octet_length(p_refusals::text) <= 65536), 'refusals must be a JSON array of at most 64 KiB');
  perform scsql._require(p_state <> 'failed' or nullif(btrim(p_error), '') is not null, 'a failed job says what went wrong');
  v_t := scsql._held_task(v_me, p_task, p_token, 'the end of the distillation');
  select * into v_job from scsql.distill_jobs j where j.project_id = v_me.project_id and j.task_id = p_task;
  v_job := scsql._distill_job(v_me, v_job.job_id, array['running']);
  job_id := v_job.job_id;
  select count(*) into written from scsql.distill_items i where i.project_id = v_me.project_id and i.job_id = v_job.job_id;
  state := p_state;
  if p_state = 'failed' then
    select * into v_r from scsql.fail_task(p_task, p_token, left(p_error, 4000), true);
    state := case when v_r.state = 'queued' then 'queued' else 'failed' end;
  else
    perform scsql._archive_task(v_me.project_id, p_task, 'done', jsonb_build_object('distill_job', v_job.job_id,
                                'state', p_state, 'written', written), null, v_me.agent_id);
  end if;
  -- Values, not calls, in the SET (Citus refuses function calls there).
  p_refusals := scsql._redact_jsonb(p_refusals);
  p_error := scsql._redact(left(p_error, 4000));
  update scsql.distill_jobs j
     set state = distill_finish.state, finished_at = now(), reserved_tokens = 0,
         input_tokens = coalesce(j.input_tokens, 0) + coalesce(p_input_tokens, 0),
         output_tokens = coalesce(j.output_tokens, 0) + coalesce(p_output_tokens, 0),
         output_hash = coalesce(p_output_hash, j.output_hash), written = distill_finish.written,
         refusals = p_refusals, error = p_error
   where j.project_id = v_me.project_id and j.job_id = v_job.job_id;
end
$$;
comment on function scsql.distill_finish(bigint, bigint, text, integer, integer, text, jsonb, text) is
  'The distiller. Ends the running job of task TASK (held under lease TOKEN) with what the model used and what came of it. Returns job_id, state and written (items written).

p_state done: the items are written; rejected: the model''s answer was refused whole (SC336), nothing written, not tried again; failed: the model command failed (ERROR says how), the task is tried again after a backoff (state queued) until its attempts are spent (state failed). INPUT_TOKENS and OUTPUT_TOKENS (what the model reported, or the estimate) add to the job''s tokens, which count against the daily budget instead of what distill_start reserved; OUTPUT_HASH is the sha256 of the answer; REFUSALS lists the items refused and why (stored redacted). Raises SC330 not the distiller, SC333 no such running job, SC302/SC303/SC304/SC301 when the lease does not hold the task, SC010 bad arguments.';

-- ---------------------------------------------------------------------------
-- Undo: one session's distilled writes reverted, the history kept
-- ---------------------------------------------------------------------------

create or replace function scsql._distill_settle(p_me scsql.agents, p_conflict bigint, p_why text)
returns boolean
language plpgsql
as $$
declare
  v_c scsql.fact_conflicts;
begin
  update scsql.fact_conflicts c set resolved_at = now(), resolved_by = p_me.agent_id, resolution = 'both', note = p_why
  where c.project_id = p_me.project_id and c.conflict_id = p_conflict and c.resolved_at is null
  returning * into v_c;
  if v_c.conflict_id is null then
    return false;
  end if;
  perform scsql._memory_change(p_me.project_id, 'resolve', 'fact', v_c.key, null, null, null,
                               format('conflict %s withdrawn: %s', v_c.conflict_id, p_why), v_c.other_key);
  return true;
end
$$;
comment on function scsql._distill_settle(scsql.agents, bigint, text) is
  'Private, for distill_undo. Settles open conflict P_CONFLICT as withdrawn (resolution both: nothing to choose between), recorded in the memory history with P_WHY. Returns false when it is not open.';

create or replace function scsql._distill_undo_fact(p_me scsql.agents, p_item scsql.distill_items, p_why text)
returns text
language plpgsql
as $$
declare
  v_f scsql.memory_facts;
  v_v scsql.fact_versions;
  v_archived boolean;
begin
  if p_item.action not in ('remembered', 'archived', 'superseded', 'conflict') then
    return 'nothing to undo';
  end if;
  select * into v_f from scsql.memory_facts f where f.project_id = p_me.project_id and f.key = p_item.target;
  if v_f.key is null then
    v_archived := exists (select from scsql.kb_sources s where s.project_id = p_me.project_id
                          and s.path = 'fact:' || p_item.target and s.kind = 'archived_fact');
    if v_archived and p_item.action <> 'superseded' then
      perform scsql.forget(p_item.target);
      return 'forgotten (from the archive)';
    end if;
    return 'gone since; nothing to undo';
  end if;
  if scsql._text_hash(v_f.value) is distinct from p_item.undo ->> 'hash' then
    return 'changed since; kept';
  end if;
  if p_item.action = 'superseded' then
    select * into v_v from scsql.fact_versions v
    where v.project_id = p_me.project_id and v.version_id = (p_item.undo ->> 'version')::bigint;
    if v_v.key is null then
      return 'the value it superseded is not in the history; kept';
    end if;
    perform scsql.remember(v_v.key, v_v.value, v_v.importance::integer);
    return 'restored the value it superseded';
  end if;
  perform scsql.forget(p_item.target);
  if p_item.action = 'conflict' then  -- the claim beside a protected fact: its conflict goes with it
    perform scsql._distill_settle(p_me, (p_item.undo ->> 'conflict')::bigint, p_why);
  end if;
  return 'forgotten';
end
$$;
comment on function scsql._distill_undo_fact(scsql.agents, scsql.distill_items, text) is
  'Private, for distill_undo. Undoes a distilled fact as agent P_ME: a fact it added is forgotten, a value it superseded is remembered again (the distilled value stays in the fact''s history), a conflict it recorded with a protected fact is settled; a fact changed since is kept. Returns what was done.';

create or replace function scsql._distill_undo_memory(p_me scsql.agents, p_job scsql.distill_jobs,
                                                      p_item scsql.distill_items, p_why text)
returns text
language plpgsql
as $$
declare
  v_id bigint := case when p_item.target ~ '^(decision|loop|conflict):[0-9]{1,18}$'
                      then split_part(p_item.target, ':', 2)::bigint end;
  v_d scsql.decisions;
  v_l scsql.open_loops;
  v_r record;
begin
  if p_item.action = 'decided' then
    select * into v_d from scsql.decisions d where d.project_id = p_me.project_id and d.decision_id = v_id;
    if v_d.decision_id is null then
      return 'gone since; nothing to undo';
    elsif exists (select from scsql.decisions n where n.project_id = p_me.project_id and n.supersedes = v_id) then
      return 'superseded since; kept';
    end if;
    insert into scsql.distill_withdrawn (project_id, decision_id, job_id, decision, withdrawn_by)
    values (p_me.project_id, v_id, p_job.job_id, to_jsonb(v_d), p_me.agent_id);
    delete from scsql.decisions d where d.project_id = p_me.project_id and d.decision_id = v_id;
    perform scsql._memory_change(p_me.project_id, 'withdraw', 'decision', p_item.target, null,
      scsql._text_hash(v_d.title || E'\n\n' || v_d.rationale), null, p_why, 'decision:' || v_d.supersedes);
    return 'withdrawn' || coalesce(format('; decision %s is current again', v_d.supersedes), '');
  elsif p_item.action in ('opened', 'closed') then
    select * into v_l from scsql.open_loops l where l.project_id = p_me.project_id and l.loop_id = v_id;
    if p_item.action = 'opened' and v_l.closed_at is null then
      perform scsql._close_loop(p_me.project_id, v_id, 'withdrawn: ' || p_why);
      return 'closed';
    elsif p_item.action = 'closed' and v_l.closed_at is not null and v_l.closed_by = p_item.author_id then
      select * into v_r from scsql._open_loop(p_me.project_id, v_l.text, v_l.owner, p_item.target);
      return format('open again as loop:%s', v_r.loop_id);
    end if;
    return 'changed since; kept';
  elsif p_item.action = 'recorded' then
    return case when scsql._distill_settle(p_me, v_id, p_why) then 'settled' else 'settled since; kept' end;
  elsif p_item.action = 'summarized' then
    return case when scsql._distill_forget_summary(p_me, p_item.target) then 'forgotten' else 'gone since' end;
  end if;
  return 'nothing to undo';
end
$$;
comment on function scsql._distill_undo_memory(scsql.agents, scsql.distill_jobs, scsql.distill_items, text) is
  'Private, for distill_undo. Undoes a distilled decision, loop, contradiction or summary as agent P_ME: a decision is withdrawn (kept whole in scsql.distill_withdrawn, its withdrawal in the memory history; the decision it superseded is current again) unless superseded since; a loop it opened is closed, one it closed is opened again (a new loop of that text); a contradiction it recorded is settled; a summary is forgotten. Returns what was done.';

create or replace function scsql._distill_forget_summary(p_me scsql.agents, p_path text)
returns boolean
language plpgsql
as $$
declare
  v_s scsql.kb_sources;
begin
  -- As forget_source does, without its rule that only a summary's author
  -- forgets it: an undo of the distiller's writes is anyone's of the project.
  select * into v_s from scsql.kb_sources s
  where s.project_id = p_me.project_id and s.path = p_path and s.kind = 'session_summary';
  if v_s.source_id is null then
    return false;
  end if;
  perform scsql._memory_change(p_me.project_id, 'forget_source', 'source', v_s.path, null, v_s.content_hash, null,
                               v_s.kind, null);
  return scsql._forget_sources(p_me.project_id, array[v_s.source_id]) > 0;
end
$$;
comment on function scsql._distill_forget_summary(scsql.agents, text) is
  'Private, for distill_undo. Forgets the distilled session summary at P_PATH (as forget_source, recorded in the memory history). Returns false when it is gone.';

create or replace function scsql._distill_session(p_project bigint, p_session text)
returns bigint
language plpgsql stable
as $$
declare
  v_id bigint;
begin
  select s.session_id into v_id from scsql.sessions s
  where s.project_id = p_project
    and (s.external_id = p_session
         or (p_session ~ '^[0-9]{1,18}$' and s.session_id = p_session::bigint))
  order by (s.external_id = p_session) desc nulls last limit 1;
  if v_id is null then
    raise exception using errcode = 'SC334', message = format('no session %s in this project', pg_catalog.to_json(left(p_session, 200))),
      hint = 'Name it by its scsql session id or its Claude Code session id (scsql distill jobs lists them).';
  end if;
  return v_id;
end
$$;
comment on function scsql._distill_session(bigint, text) is
  'Private. The session of a project named by P_SESSION: its Claude Code session id (sessions.external_id) or its scsql session id. Raises SC334 when there is none.';

create or replace function scsql.distill_undo(p_session text)
returns table (job_id bigint, item_id bigint, kind text, target text, outcome text)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_me scsql.agents := scsql._me();
  v_session bigint := scsql._distill_session(v_me.project_id, p_session);
  v_job scsql.distill_jobs;
  v_item scsql.distill_items;
  v_why text;
  v_out text;
begin
  for v_job in
    select * from scsql.distill_jobs j
    where j.project_id = v_me.project_id and j.session_id = v_session and j.state = 'done' and j.undone_at is null
    order by j.job_id desc
    for update
  loop
    v_why := format('the distillation of session %s (job %s) was undone by %s', v_session, v_job.job_id, v_me.name);
    -- Newest first, so a later item is undone before the one it built on.
    for v_item in
      select * from scsql.distill_items i where i.project_id = v_me.project_id and i.job_id = v_job.job_id
      order by i.item_id desc
    loop
      v_out := case when v_item.kind = 'fact' then scsql._distill_undo_fact(v_me, v_item, v_why)
                    else scsql._distill_undo_memory(v_me, v_job, v_item, v_why) end;
      return query select v_job.job_id, v_item.item_id, v_item.kind, v_item.target, v_out;
    end loop;
    update scsql.distill_jobs j set undone_at = now(), undone_by = v_me.agent_id
    where j.project_id = v_me.project_id and j.job_id = v_job.job_id;
  end loop;
end
$$;
comment on function scsql.distill_undo(text) is
  'Reverts what distillation wrote for one session of your project, as you, keeping the history. Returns one row per distilled item: job_id, item_id, kind, target, outcome.

SESSION is the Claude Code session id or the scsql session id. Every finished job of the session not undone before is undone, newest item first: a fact it added is forgotten and a value it superseded remembered again (its history keeps the distilled one); a conflict it recorded is settled; a decision is withdrawn (kept whole in scsql.distill_withdrawn; the decision it superseded is current again); a loop it opened is closed and one it closed opened again; its summary is forgotten. What changed since it was written is kept (outcome says so). Every change is in the memory history, and the signed items stay, marked undone on their job. Raises SC334 for an unknown session, and what the memory functions raise.';

create or replace function scsql.distilled(p_session text default null, p_limit integer default 100)
returns table (job_id bigint, session_id bigint, segment integer, item_id bigint, kind text, action text, target text,
               item jsonb, cites jsonb, distiller text, at timestamptz, undone_at timestamptz)
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_project bigint := scsql._my_project();
  v_session bigint := case when p_session is not null then scsql._distill_session(v_project, p_session) end;
begin
  perform scsql._require(p_limit is not null and p_limit between 1 and 1000, 'limit must be 1 to 1000');
  return query
  select i.job_id, j.session_id, j.segment, i.item_id, i.kind, i.action, i.target, i.item, i.cites, a.name::text, i.at,
         j.undone_at
  from scsql.distill_items i
  join scsql.distill_jobs j on j.project_id = i.project_id and j.job_id = i.job_id
  join scsql.agents a on a.agent_id = i.author_id
  where i.project_id = v_project and (v_session is null or j.session_id = v_session)
  order by i.item_id desc
  limit p_limit;
end
$$;
comment on function scsql.distilled(text, integer) is
  'What distillation wrote in your project, newest first (of one session when SESSION is given: its Claude Code or scsql session id): job_id, session_id, segment, item_id, kind, action, target, the item as the model proposed it, the rows it cites, the distiller that signed it, when, and when its job was undone. Raises SC334 for an unknown session, SC010 a limit out of 1..1000.';

create or replace function scsql.distillations(p_limit integer default 50)
returns table (job_id bigint, session_id bigint, claude_session text, segment integer, state text, queued_at timestamptz,
               started_at timestamptz, finished_at timestamptz, input_tokens integer, output_tokens integer,
               written integer, refused integer, error text, undone_at timestamptz)
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_project bigint := scsql._my_project();
begin
  perform scsql._require(p_limit is not null and p_limit between 1 and 1000, 'limit must be 1 to 1000');
  return query
  select j.job_id, j.session_id, s.external_id, j.segment, j.state, j.queued_at, j.started_at, j.finished_at,
         j.input_tokens, j.output_tokens, j.written, coalesce(pg_catalog.jsonb_array_length(j.refusals), 0),
         j.error, j.undone_at
  from scsql.distill_jobs j
  left join scsql.sessions s on s.project_id = j.project_id and s.session_id = j.session_id
  where j.project_id = v_project
  order by j.job_id desc
  limit p_limit;
end
$$;
comment on function scsql.distillations(integer) is
  'Your project''s distillation jobs, newest first: job_id, session_id, claude_session, segment, state (queued, running, deferred, done, rejected, failed, skipped), when queued, started and finished, the tokens the model used, items written and refused, the error of a failed one, and when it was undone. Raises SC010 a limit out of 1..1000.';
