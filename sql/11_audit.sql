-- 11 audit: sessions, tool calls and outcomes (chained, signed), their cost,
-- classification, and the learning loop.

select scsql._define_error(code, name, meaning) from (values
  ('SC110', 'classification_invalid', 'Classification must be public, internal, confidential or restricted.'),
  ('SC111', 'reference_unknown',      'An outcome or tool call refers to a session or tool call that does not exist in the agent''s project.'),
  ('SC112', 'price_invalid',          'A model price must be a non-negative number of USD per million tokens.')
) as t(code, name, meaning);

-- scsql backup and scsql restore (scsql/ops/backup.py): the backup's manifest
-- is signed with the operator's backup key (keystore backup.key), and the
-- restore checks it with a key the operator gives, never one the file holds.
select scsql._define_error(code, name, meaning, 'client') from (values
  ('SC060', 'backup_unsigned',          'The backup''s manifest carries no signature (written before scsql signed its backups): scsql restore refuses it unless told --accept-unsigned, since nothing then shows who wrote the file.'),
  ('SC061', 'backup_signature_invalid', 'The backup''s manifest does not verify with the trusted backup key: it was changed after it was signed (its dump''s sha256, say), or another key signed it; nothing was restored.'),
  ('SC062', 'backup_key_missing',       'scsql restore has no key to check the backup''s signature with, or --key is not one: give --key (the public key scsql backup printed, or the backup.key of the keystore that wrote it), or point SCSQL_KEYSTORE at that keystore.'),
  ('SC063', 'backup_not_admin',         'scsql backup reads every table and role of scsql in one snapshot: it needs a superuser''s login (or one with BYPASSRLS and membership in scsql_auditor), as scsql migrate does.')
) as t(code, name, meaning);

-- Sessions and tool calls sign, after their first fields, the fields that
-- capture (14_capture.sql) appended; rows written before them keep their
-- signatures.
select scsql._make_chained('scsql.sessions', array['client', 'model', 'title'], array['session_id'],
  array['external_id', 'cwd', 'git_branch', 'git_commit', 'source', 'occurred_at', 'altered']);
select scsql._make_chained('scsql.tool_calls',
  array['session_id', 'tool', 'model', 'origin', 'input_tokens', 'output_tokens', 'latency_ms', 'status',
        'input_preview', 'output_preview'],
  array['tool_call_id', 'cost_usd'],
  array['tool_use_id', 'files', 'scsql_tool', 'imported', 'input_key', 'occurred_at', 'altered']);
select scsql._make_chained('scsql.outcomes',
  array['tool_call_id', 'session_id', 'task_ref', 'kind', 'signal', 'confidence', 'summary', 'evidence',
        'classification'],
  array['outcome_id']);

-- ---------------------------------------------------------------------------
-- Classification
-- ---------------------------------------------------------------------------

create or replace function scsql_caller.confidential_authors()
returns bigint[]
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  select coalesce(array_agg(a.agent_id), '{}')
  from scsql.agents a, scsql._me() me
  where a.project_id = me.project_id
    and (a.team_role = me.team_role
         or exists (select from scsql.confidential_grants g
                    where g.project_id = me.project_id and g.agent_id = me.agent_id and g.team_role = a.team_role))
$$;
comment on function scsql_caller.confidential_authors() is
  'Agents of the acting agent''s project whose confidential rows it may read: those of its own team role, and of team roles an administrator granted it (grant_confidential). Policies call it once per statement.';

create or replace function scsql.grant_confidential(p_agent text, p_team_role text)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_agent scsql.agents;
begin
  v_agent := scsql._agent(p_agent);
  perform scsql._team_role(p_team_role);
  insert into scsql.confidential_grants (project_id, agent_id, team_role)
  values (v_agent.project_id, v_agent.agent_id, p_team_role)
  on conflict do nothing;
end
$$;
comment on function scsql.grant_confidential(text, text) is
  'Administrators only. Lets agent AGENT read the confidential outcomes and learnings written by agents of team role TEAM_ROLE in its project (agents always read those of their own team role). Idempotent. Raises SC003 unknown agent, SC008 unknown team role.';

create or replace function scsql.revoke_confidential(p_agent text, p_team_role text)
returns boolean
language sql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  with d as (
    delete from scsql.confidential_grants g using scsql.agents a
    where g.agent_id = a.agent_id and a.name = p_agent and g.team_role = p_team_role
    returning 1
  )
  select exists (select from d)
$$;
comment on function scsql.revoke_confidential(text, text) is
  'Administrators only. Withdraws a grant made by grant_confidential. Returns true when a grant was removed.';

-- ---------------------------------------------------------------------------
-- Prices and cost
-- ---------------------------------------------------------------------------

create or replace function scsql._require_price(p_what text, p_usd numeric, p_nullable boolean default false)
returns void
language plpgsql immutable
as $$
begin
  if (p_usd is null and not p_nullable) or p_usd < 0 or p_usd = 'NaN' or p_usd = 'Infinity' then
    raise exception using errcode = 'SC112',
      message = format('%s must be finite and >= 0 USD per million tokens, got %s', p_what, coalesce(p_usd::text, 'NULL'));
  end if;
end
$$;
comment on function scsql._require_price(text, numeric, boolean) is
  'Private. Raises SC112 unless P_USD is a finite price >= 0 (or NULL when P_NULLABLE), naming it P_WHAT.';

create or replace function scsql.set_model_price(p_model text, p_input_usd_per_mtok numeric, p_output_usd_per_mtok numeric,
                                                 p_effective_from timestamptz default now(),
                                                 p_cache_write_usd_per_mtok numeric default null,
                                                 p_cache_read_usd_per_mtok numeric default null)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_err scsql.violation;
begin
  perform scsql._require_price('the input price', p_input_usd_per_mtok);
  perform scsql._require_price('the output price', p_output_usd_per_mtok);
  perform scsql._require_price('the cache write price', p_cache_write_usd_per_mtok, true);
  perform scsql._require_price('the cache read price', p_cache_read_usd_per_mtok, true);
  -- Between 1970 and 9000: a time every client can read back.
  perform scsql._require(p_effective_from is not null, 'effective_from must be a time from 1970 to 9000');
  perform scsql._require_time('effective_from', p_effective_from);
  begin  -- the model name is checked by the table's constraint
    insert into scsql.model_prices (model, effective_from, input_usd_per_mtok, output_usd_per_mtok,
                                    cache_write_usd_per_mtok, cache_read_usd_per_mtok)
    values (p_model, p_effective_from, p_input_usd_per_mtok, p_output_usd_per_mtok,
            p_cache_write_usd_per_mtok, p_cache_read_usd_per_mtok)
    on conflict (model, effective_from) do update
      set input_usd_per_mtok = excluded.input_usd_per_mtok, output_usd_per_mtok = excluded.output_usd_per_mtok,
          cache_write_usd_per_mtok = excluded.cache_write_usd_per_mtok,
          cache_read_usd_per_mtok = excluded.cache_read_usd_per_mtok;
  exception when check_violation or not_null_violation then
    get stacked diagnostics v_err.returned_sqlstate = returned_sqlstate, v_err.schema_name = schema_name,
      v_err.table_name = table_name, v_err.constraint_name = constraint_name, v_err.column_name = column_name, v_err.message_text = message_text;
    perform scsql._raise_violation(v_err);
  end;
end
$$;
comment on function scsql.set_model_price(text, numeric, numeric, timestamptz, numeric, numeric) is
  'Administrators only. Sets the price of MODEL (USD per million input tokens, output tokens, and optionally tokens written to and read from the prompt cache: NULL prices them at 1.25 and 0.1 times input) from EFFECTIVE_FROM (default now) on; a call''s model matches the longest priced name that is a prefix of it (claude-sonnet-4 prices claude-sonnet-4-20250514). scsql ships dated list prices of current models, which a price set from a later time replaces. Raises SC010 bad model name or time, SC112 bad price.';

create or replace function scsql.model_prices()
returns table (model text, effective_from timestamptz, input_usd_per_mtok numeric, output_usd_per_mtok numeric,
               cache_write_usd_per_mtok numeric, cache_read_usd_per_mtok numeric)
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  select model, effective_from, input_usd_per_mtok, output_usd_per_mtok,
         coalesce(cache_write_usd_per_mtok, 1.25 * input_usd_per_mtok), coalesce(cache_read_usd_per_mtok, 0.1 * input_usd_per_mtok)
  from scsql.model_prices
  order by model, effective_from
$$;
comment on function scsql.model_prices() is
  'The price list: model, effective_from, USD per million input, output, cache-write and cache-read tokens.';

create or replace function scsql.cost_report(p_since timestamptz default now() - interval '7 days', p_group_by text default 'model')
returns table (key text, calls bigint, input_tokens bigint, output_tokens bigint, cost_usd numeric, unpriced_calls bigint,
               model_messages bigint, cache_write_tokens bigint, cache_read_tokens bigint)
language plpgsql stable
as $$
begin
  -- Runs as the caller, who may not execute the private scsql._require.
  if p_group_by is null or p_group_by not in ('model', 'tool', 'agent', 'session', 'day', 'origin', 'status', 'project') then
    raise exception using errcode = 'SC010',
      message = format('group_by must be model, tool, agent, session, day, origin, status or project, got %L', p_group_by);
  end if;
  if p_since is null then
    raise exception using errcode = 'SC010', message = 'since must be a time';
  end if;
  -- Grouped by the ids first, and named after (Citus plans no subquery of
  -- another table correlated with a row of a sharded one).
  return query
  select coalesce(case p_group_by when 'agent' then a.name when 'project' then p.name end, g.key),
         g.calls, g.input_tokens, g.output_tokens, g.cost_usd, g.unpriced_calls,
         g.model_messages, g.cache_write_tokens, g.cache_read_tokens
  from (select case p_group_by
                 when 'model' then coalesce(u.model, '(none)') when 'tool' then u.tool
                 when 'agent' then u.author_id::text when 'session' then coalesce(u.session_id::text, '(none)')
                 when 'day' then to_char(u.happened at time zone 'UTC', 'YYYY-MM-DD')
                 when 'origin' then u.origin when 'status' then u.status when 'project' then u.project_id::text
               end as key,
               count(*) filter (where not u.message)::bigint as calls, sum(u.input_tokens)::bigint as input_tokens,
               sum(u.output_tokens)::bigint as output_tokens, coalesce(sum(u.cost_usd), 0) as cost_usd,
               count(*) filter (where u.cost_usd is null and (u.message or u.origin = 'model'))::bigint as unpriced_calls,
               count(*) filter (where u.message)::bigint as model_messages,
               sum(u.cache_write_tokens)::bigint as cache_write_tokens, sum(u.cache_read_tokens)::bigint as cache_read_tokens
        from (select t.project_id, t.author_id, t.session_id, t.tool, t.model, t.origin, t.status,
                     coalesce(t.occurred_at, t.at) as happened, t.input_tokens, t.output_tokens,
                     0 as cache_write_tokens, 0 as cache_read_tokens, t.cost_usd, false as message
              from scsql.tool_calls t where coalesce(t.occurred_at, t.at) >= p_since
              union all
              select m.project_id, m.author_id, m.session_id, '(model)', m.model, 'model', 'ok',
                     coalesce(m.occurred_at, m.at), m.input_tokens, m.output_tokens, m.cache_write_tokens,
                     m.cache_read_tokens, m.cost_usd, true
              from scsql.model_calls m where coalesce(m.occurred_at, m.at) >= p_since) u
        group by 1) g
  left join scsql.agents a on p_group_by = 'agent' and a.agent_id::text = g.key
  left join scsql.projects p on p_group_by = 'project' and p.project_id::text = g.key
  order by 5 desc, 1;
end
$$;
comment on function scsql.cost_report(timestamptz, text) is
  'Cost of the tool calls and the model''s messages you may see, grouped. Returns key, calls, input_tokens, output_tokens, cost_usd, unpriced_calls, model_messages, cache_write_tokens, cache_read_tokens.

p_since: from this time, when they happened (default 7 days ago)
p_group_by (model|tool|agent|session|day|origin|status|project): grouping

Tool calls count with their own tokens and cost (the MCP tools'' record_tool_call); a hooked session''s tokens and cost are its model''s messages (scsql.model_calls, read from Claude Code''s transcript), each counted once, under tool "(model)". Raises SC010 for an unknown grouping or a NULL since.';

create or replace function scsql._require_references(p_project bigint, p_session_id bigint, p_tool_call_id bigint default null)
returns void
language plpgsql stable
as $$
begin
  if p_tool_call_id is not null and not exists (
      select from scsql.tool_calls t where t.project_id = p_project and t.tool_call_id = p_tool_call_id) then
    raise exception using errcode = 'SC111', message = format('tool call %s does not exist in this project', p_tool_call_id);
  end if;
  if p_session_id is not null and not exists (
      select from scsql.sessions s where s.project_id = p_project and s.session_id = p_session_id) then
    raise exception using errcode = 'SC111', message = format('session %s does not exist in this project', p_session_id);
  end if;
end
$$;
comment on function scsql._require_references(bigint, bigint, bigint) is
  'Private, called by the write functions whose rows name a session or a tool call (record_outcome, record_prompt, capture_tool_call) after their insert. Raises SC111 when tool call P_TOOL_CALL_ID, then session P_SESSION_ID, is not one of project P_PROJECT''s; NULL names nothing and passes.';

create or replace function scsql.start_session(
  p_client text default null, p_model text default null, p_title text default null,
  p_at timestamptz default null, p_key_id integer default null, p_signature bytea default null,
  out session_id bigint, out chain_id bigint, out seq bigint)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_me scsql.agents := scsql._me();
  v_err scsql.violation;
begin
  -- Signed text is stored as signed: it must arrive redacted.
  perform scsql._require_redacted('title', p_title);
  -- The lengths are checked by the table's constraints.
  insert into scsql.sessions as s (project_id, author_id, client, model, title, at, key_id, signature)
  values (v_me.project_id, v_me.agent_id, p_client, p_model, p_title, p_at, p_key_id, p_signature)
  returning s.session_id, s.chain_id, s.seq into session_id, chain_id, seq;
exception when check_violation or not_null_violation then
  get stacked diagnostics v_err.returned_sqlstate = returned_sqlstate, v_err.schema_name = schema_name,
    v_err.table_name = table_name, v_err.constraint_name = constraint_name, v_err.column_name = column_name, v_err.message_text = message_text;
  perform scsql._raise_violation(v_err);
end
$$;
comment on function scsql.start_session(text, text, text, timestamptz, integer, bytea) is
  'Starts a working session of yours (the Claude Code hooks do this at session start). Signed for you. Returns session_id, chain_id, seq.

p_client: client name, at most 100 characters
p_model: model, at most 200 characters
p_title: what the session is about, at most 500 characters
hidden: the Claude Code hooks open a session for every Claude session

Client, model and title are all optional. The row is chained and signed: at, key_id and signature are supplied by the scsql client, which signs the payload described in COMMENT ON FUNCTION scsql._enc. Raises SC010 for over-long text, SC040 for a title holding a secret (sign scsql.redact(title); nothing is stored), SC101/SC102/SC103 for bad signing fields.';

create or replace function scsql.record_tool_call(
  p_tool text,
  p_status text default 'ok',
  p_session_id bigint default null,
  p_model text default null,
  p_origin text default 'model',
  p_input_tokens integer default 0,
  p_output_tokens integer default 0,
  p_latency_ms integer default null,
  p_input_preview text default null,
  p_output_preview text default null,
  p_at timestamptz default null,
  p_key_id integer default null,
  p_signature bytea default null,
  out tool_call_id bigint, out chain_id bigint, out seq bigint, out cost_usd numeric)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
begin
  -- The same row capture_tool_call writes, without what only hooks know: the
  -- appended fields stay NULL, so the payload signed here is the whole payload.
  select c.tool_call_id, c.chain_id, c.seq, c.cost_usd into tool_call_id, chain_id, seq, cost_usd
  from scsql.capture_tool_call(p_tool, p_status, p_session_id, p_model, p_origin, p_input_tokens, p_output_tokens,
                               p_latency_ms, p_input_preview, p_output_preview,
                               p_at => p_at, p_key_id => p_key_id, p_signature => p_signature) c;
end
$$;
comment on function scsql.record_tool_call(text, text, bigint, text, text, integer, integer, integer, text, text, timestamptz, integer, bytea) is
  'Records one tool call of yours (the Claude Code hooks do this for every call). Signed for you. Returns tool_call_id, chain_id, seq, cost_usd.

p_tool: tool name
p_status (ok|error|timeout|cancelled|denied): how it ended
p_session_id: session_id from start_session
p_model: model that made the call (prices it)
p_origin (model|database): model: generated by the model; database: assembled from the database, costs nothing
p_input_tokens (0..): tokens of the arguments
p_output_tokens (0..): tokens of the result
p_latency_ms (0..): duration
p_input_preview: at most 4,000 characters
p_output_preview: at most 4,000 characters
hidden: the Claude Code hooks record every tool call

Its fields: tool, status (ok, error, timeout, cancelled, denied), optional session, model, origin (model: the model generated the call; database: it only assembled database content and costs $0), input_tokens (arguments the model generated), output_tokens (the result the model reads next), latency_ms and bounded previews (4000 characters each). Cost is computed from scsql.model_prices; cost_usd is NULL when the model has no price. The row is chained and signed by the scsql client (at, key_id, signature). Raises SC010 for bad arguments, SC040 for a preview holding a secret (sign scsql.redact(preview); nothing is stored), SC111 for an unknown session, SC101/SC102/SC103 for bad signing fields.';

create or replace function scsql.record_outcome(
  p_kind text,
  p_summary text,
  p_signal text default 'agent',
  p_tool_call_id bigint default null,
  p_session_id bigint default null,
  p_task_ref text default null,
  p_confidence numeric default null,
  p_evidence text default null,
  p_classification text default 'internal',
  p_at timestamptz default null,
  p_key_id integer default null,
  p_signature bytea default null,
  out outcome_id bigint, out chain_id bigint, out seq bigint, out learning_id bigint)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_me scsql.agents := scsql._me();
  v_err scsql.violation;
begin
  -- Signed text is stored as signed: it must arrive redacted.
  perform scsql._require_redacted('summary', p_summary);
  perform scsql._require_redacted('evidence', p_evidence);
  -- The arguments are checked by the table's constraints, the references
  -- after them (as the row is in the block, a reference that fails undoes it
  -- and the learning its trigger wrote).
  insert into scsql.outcomes as o (project_id, author_id, tool_call_id, session_id, task_ref, kind, signal, confidence, summary,
                                   evidence, classification, at, key_id, signature)
  values (v_me.project_id, v_me.agent_id, p_tool_call_id, p_session_id, p_task_ref, p_kind, p_signal, p_confidence, p_summary, p_evidence,
          p_classification, p_at, p_key_id, p_signature)
  returning o.outcome_id, o.chain_id, o.seq into outcome_id, chain_id, seq;
  perform scsql._require_references(v_me.project_id, p_session_id, p_tool_call_id);
  select l.learning_id into learning_id from scsql.learnings l
  where l.project_id = v_me.project_id and l.outcome_id = record_outcome.outcome_id;
  -- Here, not in the trigger that queues it (on Citus a worker's NOTIFY reaches only its listeners).
  perform scsql._notify_learning(v_me.project_id, learning_id, p_classification);
exception when check_violation or not_null_violation then
  get stacked diagnostics v_err.returned_sqlstate = returned_sqlstate, v_err.schema_name = schema_name,
    v_err.table_name = table_name, v_err.constraint_name = constraint_name, v_err.column_name = column_name, v_err.message_text = message_text;
  perform scsql._raise_violation(v_err);
end
$$;
comment on function scsql.record_outcome(text, text, text, bigint, bigint, text, numeric, text, text, timestamptz, integer, bytea) is
  'Records what came of a tool call, session or task (name at least one). Failures, and successes with confidence >= 0.8, become learnings. Signed for you. Returns outcome_id, chain_id, seq, learning_id.

p_kind (shipped|accepted|rejected|failed|insufficient|errored|reverted|violation): what came of it
p_summary: one line, at most 1,000 characters
p_signal: where the verdict comes from (test, ci, human, review, agent...)
p_tool_call_id: the tool call it is about
p_session_id: the session it is about
p_task_ref: the task it is about (at most 200 characters)
p_confidence (0..1): how sure
p_evidence: details, at most 8,000 characters
p_classification (public|internal|confidential|restricted): who may read it: public also granted projects, internal the project, confidential your team role, restricted you and the auditor

Give at least one of tool_call_id, session_id, task_ref. Kind is one of shipped, accepted, rejected, failed, insufficient, errored, reverted; signal is the verdict''s source (test, ci, human, review, agent, ...); confidence 0..1; evidence up to 8000 characters; classification (public: the project and readers granted across projects; internal, the default: the project''s agents; confidential: agents of the author''s team role or granted; restricted: the author and the auditor). In the same transaction, failures (rejected, failed, insufficient, errored, reverted) and confident successes (shipped, accepted with confidence >= 0.8) become learnings. learning_id is NULL when none. Chained and signed by the scsql client. Raises SC010 bad argument, SC040 a summary or evidence holding a secret (sign scsql.redact(text); nothing is stored), SC110 bad classification, SC111 unknown reference, SC101/SC102/SC103 bad signing fields.';

-- ---------------------------------------------------------------------------
-- Per-project locks
-- ---------------------------------------------------------------------------

-- Row locks on scsql.project_locks, never advisory locks: any session may
-- take any advisory key, so an agent could hold the one another project
-- waits on. Agents hold no privilege on project_locks, and every caller of
-- this function passes the acting agent's own project.
create or replace function scsql._project_lock(p_project bigint, p_name text, p_shared boolean)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  i integer;
begin
  if p_project is null or p_name is null or p_shared is null then
    raise exception using errcode = 'SC010', message = 'project, lock name and mode must not be NULL';
  end if;
  for i in 1 .. 2 loop
    if p_shared then
      perform from scsql.project_locks l where l.project_id = p_project and l.name = p_name for share;
    else
      perform from scsql.project_locks l where l.project_id = p_project and l.name = p_name for no key update;
    end if;
    exit when found;
    -- Rows are made with their project (scsql.create_project); this covers a
    -- purpose added later.
    insert into scsql.project_locks (project_id, name) values (p_project, p_name) on conflict do nothing;
  end loop;
end
$$;
comment on function scsql._project_lock(bigint, text, boolean) is
  'Private, for security-definer functions only. Locks the (project, purpose) row of scsql.project_locks until the end of the transaction (rows are made with the project; a missing one is created): shared (FOR SHARE; shared holders do not wait on each other) or exclusive (FOR NO KEY UPDATE; waits for and excludes every other holder). Purposes: learnings, memory_facts. Only the project''s own work waits on it. Raises SC010 for a NULL argument (and a check violation for an unknown purpose).';

create or replace function scsql_caller.lock_my_learnings()
returns void
language sql security definer set search_path = pg_catalog, scsql, pg_temp
as $$ select scsql._project_lock(scsql._my_project(), 'learnings', false) $$;
comment on function scsql_caller.lock_my_learnings() is
  'Used by learnings_export, which runs as the caller. Takes the acting agent''s own project''s learnings lock exclusively, so it waits for every transaction of the project still inserting learnings. Raises like _me.';

-- ---------------------------------------------------------------------------
-- Learning loop
-- ---------------------------------------------------------------------------

create or replace function scsql._learn_from_outcome()
returns trigger
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_kind text;
  v_id bigint;
  v_tool text;
begin
  if new.kind in ('rejected', 'failed', 'insufficient', 'errored', 'reverted') then
    v_kind := 'failure';
  elsif new.kind in ('shipped', 'accepted') and new.confidence >= 0.8 then
    v_kind := 'experiment';
  else
    return null;
  end if;
  -- Exports take this lock exclusively, so every learning id below the ones
  -- they read is committed (or rolled back) by then: none is skipped.
  perform scsql._project_lock(new.project_id, 'learnings', true);
  -- A value, not a subquery in VALUES (which Citus refuses on a distributed table).
  select t.tool into v_tool from scsql.tool_calls t where t.project_id = new.project_id and t.tool_call_id = new.tool_call_id limit 1;
  insert into scsql.learnings (project_id, kind, outcome_id, outcome_kind, author_id, tool, tool_call_id, session_id,
                               task_ref, signal, confidence, summary, evidence, classification)
  values (new.project_id, v_kind, new.outcome_id, new.kind, new.author_id, v_tool,
          new.tool_call_id, new.session_id, new.task_ref, new.signal, new.confidence, new.summary, new.evidence,
          new.classification)
  returning learning_id into v_id;
  -- Memory history (sql/26_history.sql): the learning added, with the hash
  -- of its summary only where the whole project may read it.
  perform scsql._memory_change(new.project_id, 'learn', 'learning', 'learning:' || v_id, null, null,
    case when new.classification in ('public', 'internal') then scsql._text_hash(new.summary) end,
    format('%s learning of a %s outcome (%s)', v_kind, new.kind, new.classification), 'outcome:' || new.outcome_id,
    new.author_id);
  return null;
end
$$;
comment on function scsql._learn_from_outcome() is
  'Private trigger on outcomes, in the outcome''s transaction: rejected, failed, insufficient, errored and reverted outcomes add a failure learning; shipped and accepted outcomes with confidence >= 0.8 add an experiment learning. The learning keeps the outcome''s classification. Each learning added is recorded in the memory history (op learn, target learning:<id>, related outcome:<id>; the hash of its summary for public and internal learnings only).';

drop trigger if exists learn on scsql.outcomes;
create trigger learn after insert on scsql.outcomes for each row execute function scsql._learn_from_outcome();

create or replace function scsql_caller.learning_entry(p_l scsql.learnings)
returns scsql.learning_entry
language sql stable
as $$
  select p_l.learning_id, p_l.kind, p_l.outcome_kind, p_l.created_at,
         coalesce((select a.name from scsql.agents a where a.agent_id = p_l.author_id), p_l.author_id::text),
         p_l.tool, p_l.signal, p_l.confidence, p_l.summary, p_l.evidence, p_l.classification,
         p_l.outcome_id, p_l.tool_call_id, p_l.session_id, p_l.task_ref
$$;
comment on function scsql_caller.learning_entry(scsql.learnings) is
  'A learning as scsql.learnings and scsql.learnings_export return it: its author by name (the agent_id when the caller may not see the agent). Runs as the caller.';

create or replace function scsql.learnings(
  p_query text default null, p_kind text default null, p_since timestamptz default null, p_limit integer default 50)
returns setof scsql.learning_entry
language plpgsql stable
as $$
declare
  v_learning scsql.learnings;
begin
  -- Runs as the caller, who may not execute the private scsql._require.
  if p_kind is not null and p_kind not in ('failure', 'experiment') then
    raise exception using errcode = 'SC010', message = 'kind must be failure or experiment';
  end if;
  if p_limit is null or p_limit not between 1 and 1000 then
    raise exception using errcode = 'SC010', message = 'limit must be 1 to 1000';
  end if;
  -- Each row is read into a variable of type scsql.learnings and made an
  -- entry here: on Citus the query runs on the shards, where a row passed
  -- whole is of the shard's type (learnings_102091), which learning_entry
  -- does not take.
  for v_learning in
    select * from scsql.learnings l
    where (p_kind is null or l.kind = p_kind)
      and (p_since is null or l.created_at >= p_since)
      and (p_query is null or not exists (
            select from regexp_split_to_table(p_query, '\s+') w
            where w <> '' and strpos(lower(concat_ws(' ', l.summary, l.evidence, l.tool, l.signal, l.outcome_kind, l.task_ref)),
                                     lower(w)) = 0))
    order by l.learning_id desc
    limit p_limit
  loop
    return next scsql_caller.learning_entry(v_learning);
  end loop;
end
$$;
comment on function scsql.learnings(text, text, timestamptz, integer) is
  'Learnings you may see (failures and experiments derived from outcomes), newest first. Returns learning_id, kind, outcome_kind, created_at, agent, tool, summary, evidence, citations.

p_query: words that must all occur (case-insensitive)
p_kind (failure|experiment): kind
p_since: only learnings since this time
p_limit (1..1000): at most this many

Classification applies. QUERY keeps those whose summary, evidence, tool, signal, outcome kind or task contain every word of it (case-insensitive); KIND = failure or experiment; SINCE a time; LIMIT 1..1000 (default 50). The citations are outcome_id, tool_call_id, session_id and task_ref; each row also has signal, confidence and classification. Raises SC010 for a bad kind or limit.';

create or replace function scsql.learnings_export(p_after_id bigint, p_limit integer default 10000)
returns setof scsql.learning_entry
language plpgsql volatile
as $$
declare
  v_learning scsql.learnings;
begin
  -- Runs as the caller, who may not execute the private scsql._require.
  if p_after_id is null or p_after_id < 0 then
    raise exception using errcode = 'SC010', message = 'after_id must be >= 0';
  end if;
  if p_limit is null or p_limit not between 1 and 10000 then
    raise exception using errcode = 'SC010', message = 'limit must be 1 to 10,000';
  end if;
  -- Wait for transactions that are inserting learnings of this project.
  perform scsql_caller.lock_my_learnings();
  -- Rows made entries here, not on the shards (see scsql.learnings).
  for v_learning in
    select * from scsql.learnings l
    where l.learning_id > p_after_id and l.project_id = scsql_caller.project_id()
    order by l.learning_id
    limit p_limit
  loop
    return next scsql_caller.learning_entry(v_learning);
  end loop;
end
$$;
comment on function scsql.learnings_export(bigint, integer) is
  'Background work of scsql learnings export (not an MCP tool). Learnings of the caller''s project that it may see with learning_id > P_AFTER_ID, oldest first. It first waits for transactions still inserting learnings in the caller''s project, so no lower id can appear after the export: remembering the highest exported id is enough to append only what is new. LIMIT 1..10,000 (default 10,000). Raises SC001/SC002 when the caller is not an acting agent, SC010 for a negative AFTER_ID or a bad limit.';
