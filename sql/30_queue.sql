-- scsql coordination: the task queue, leases with fencing, exclusive files,
-- wake-ups and the drain check.
--
-- A task belongs to one project and one team role. Orchestrator roles
-- (team_roles.orchestrates) enqueue; agents of the task's role claim it with
-- FOR UPDATE SKIP LOCKED, best priority first, then in enqueue order. A claim
-- hands out a lease: the task's fence, incremented by every claim, is the
-- lease token, and the lease expires unless heartbeats extend it. Every call
-- that acts on a claimed task names the task and its token; the row is
-- changed only while it is still claimed by the caller under that token, so
-- a worker whose lease expired and whose task was claimed again is refused
-- (SC302) and its result is never applied.
--
-- Wake-ups: enqueue and requeue NOTIFY the channel of the (project, team
-- role), named by scsql._queue_channel after a secret of the project, so a
-- name reveals nothing and cannot be guessed. A notification is only a
-- hint; clients poll as a fallback.

select scsql._define_error(code, name, meaning) from (values
  ('SC300', 'not_orchestrator',     'Only agents of an orchestrator team role (team_roles.orchestrates) may enqueue or cancel tasks.'),
  ('SC301', 'task_not_found',       'No task with that id exists in the caller''s project.'),
  ('SC302', 'lease_superseded',     'The lease token no longer holds the task: the lease expired and the task was claimed again (or the token was never valid). Nothing was applied.'),
  ('SC303', 'lease_expired',        'The lease expired and the task went back to the queue before this call; nothing was applied. Claim it again.'),
  ('SC304', 'task_finished',        'The task already finished (done, dead, released or cancelled); nothing was applied.'),
  ('SC305', 'wrong_team_role',      'The task belongs to another team role; an agent claims only its own role''s tasks.'),
  ('SC306', 'task_not_claimable',   'The task is held by another lease or scheduled for later; it cannot be claimed now.'),
  ('SC320', 'invalid_path',         'An exclusive file path is empty, longer than 1024 characters, or holds what would let one file go by two names: control characters, backslashes, invisible characters (zero-width, bidirectional controls, variation selectors, soft hyphen, tags), whitespace other than a plain space, or a part that starts or ends with a space.'),
  ('SC321', 'path_outside_project', 'An exclusive file path leaves the project: a ".." above the project root, or an absolute path outside projects.root_path (or any absolute path when the project has no root).'),
  ('SC322', 'files_overlap',        'Exclusive files overlap files held by a queued or claimed task of the project; the message lists them.')
) as t(code, name, meaning);

-- ---------------------------------------------------------------------------
-- Helpers
-- ---------------------------------------------------------------------------

create or replace function scsql._channel(p_project bigint, p_purpose text)
returns text
language plpgsql volatile security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_key bytea;
begin
  if p_project is null or p_purpose is null then
    raise exception using errcode = 'SC010', message = 'project and purpose of a channel must not be NULL';
  end if;
  select k.key into v_key from scsql.channel_keys k where k.project_id = p_project;
  if not found then
    insert into scsql.channel_keys (project_id) values (p_project) on conflict do nothing;
    select k.key into strict v_key from scsql.channel_keys k where k.project_id = p_project;
  end if;
  return 'scsql_' || left(encode(sha256(v_key || convert_to(p_purpose, 'UTF8')), 'hex'), 32);
end
$$;
comment on function scsql._channel(bigint, text) is
  'Private. The LISTEN/NOTIFY channel of one purpose of a project: scsql_ and 32 hex digits of sha256 of the project''s secret channel key (scsql.channel_keys, made with the project, read only by the owner) and the purpose. The name reveals neither the project nor the purpose, and cannot be derived without the key. Raises SC010 for a NULL argument.';

create or replace function scsql._queue_channel(p_project bigint, p_team_role text)
returns text
language sql volatile
as $$ select scsql._channel(p_project, 'team:' || p_team_role) $$;
comment on function scsql._queue_channel(bigint, text) is
  'Private. The wake-up channel of one (project, team role) (see _channel). Enqueue, requeue and broadcasts notify it; the payload ("task" or "message") is only a hint.';

create or replace function scsql_caller.my_channel(p_purpose text default 'team')
returns text
language plpgsql volatile security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_me scsql.agents := scsql._me();
begin
  if p_purpose = 'team' then
    return scsql._queue_channel(v_me.project_id, v_me.team_role);
  elsif p_purpose in ('learnings', 'embed') then
    return scsql._channel(v_me.project_id, p_purpose);
  end if;
  raise exception using errcode = 'SC010',
    message = format('purpose must be team, learnings or embed, got %s', coalesce(quote_literal(p_purpose), 'NULL'));
end
$$;
comment on function scsql_caller.my_channel(text) is
  'The LISTEN/NOTIFY channel the acting agent listens on for PURPOSE: team (default; tasks and messages for its own team role in its own project, hints "task" and "message"), learnings (learnings of its project queued for the knowledge base, hint "learning") or embed (chunk texts of its project queued for embedding, hint "embed"). A name reveals nothing about the project or role, and no other project''s channel can be derived from it. Clients call it to LISTEN (it is not an MCP tool). Raises SC010 for another purpose, and like _me.';

create or replace function scsql._is_orchestrator(p_team_role text)
returns boolean
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$ select coalesce((select r.orchestrates from scsql.team_roles r where r.name = p_team_role), false) $$;
comment on function scsql._is_orchestrator(text) is
  'Private. Whether a team role is an orchestrator role (team_roles.orchestrates).';

-- Exclusive file paths. Every path a task may hold enters through
-- _normalize_path (the one place their rules live) and is compared through
-- _path_key, which folds letter case:
--
-- * Unicode NFC, always: "café" typed with a combining accent (NFD, as macOS
--   file names come) and precomposed (NFC) are one file.
-- * Letter case folded, always (_fold_path): SRC/a.py, src/A.py and src/a.py
--   are one file for ownership. The project's files are checked out on
--   several machines (agents on Linux, people on macOS or Windows), and on a
--   case-insensitive file system they are one file; a false conflict costs
--   a wait, a missed one two agents writing one file. The path a task holds
--   keeps the case it was given in.
-- * Characters that make one file look like two are refused (SC320):
--   zero-width and other invisible characters, bidirectional controls,
--   whitespace other than a plain space, a part starting or ending with a
--   space, control characters, backslashes.
-- * "." and ".." are read lexically (_path_parts); a path may not climb
--   above the project root (SC321). Symbolic links cannot be seen from the
--   database: the enqueue_task tool resolves them, inside the project root,
--   on the machine that holds the files before it calls enqueue_task.

do $do$
begin
  -- Full Unicode case folding where the server has it (PostgreSQL 18:
  -- casefold with the builtin PG_UNICODE_FAST collation), else lower case
  -- with the builtin C.UTF-8 collation (17), else the database's own lower().
  -- Either way the result does not depend on the database's locale from 17 on.
  execute format($f$
    create or replace function scsql._fold_path(p_path text)
    returns text
    language sql
    immutable strict parallel safe
    as $b$ select pg_catalog.normalize(%s, 'NFC') $b$
  $f$, case
         when current_setting('server_version_num')::int >= 180000
           then 'pg_catalog.casefold(p_path collate pg_catalog.pg_unicode_fast)'
         when current_setting('server_version_num')::int >= 170000
           then 'pg_catalog.lower(p_path collate pg_catalog.pg_c_utf8)'
         else 'pg_catalog.lower(p_path)'
       end);
end
$do$;
comment on function scsql._fold_path(text) is
  'Private. A path with its letter case folded, in NFC, for comparing exclusive files: full Unicode case folding on PostgreSQL 18 (casefold, PG_UNICODE_FAST), simple lower case with the builtin C.UTF-8 collation on 17, the database''s lower() before.';

create or replace function scsql._path_digits(p_path text)
returns text
language sql immutable
as $$
  select coalesce(string_agg(lpad(pg_catalog.get_byte(k.b, i)::text, 3, '0'), '' order by i), '')
  from (select pg_catalog.convert_to(case when p_path = '.' then '' else replace('/' || p_path, '/', chr(1)) end,
                                     'UTF8') as b) k,
       generate_series(0, length(k.b) - 1) i
$$;
comment on function scsql._path_digits(text) is
  'Private. The bytes of "/" || path (normalized; "." gives none) as three decimal digits each, with "/" written as byte 1 so it sorts below every byte a path may hold.';

create or replace function scsql._path_key(p_project bigint, p_path text)
returns numeric
language sql immutable
as $$ select (p_project::text || '.' || scsql._path_digits(scsql._fold_path(p_path)) || '0')::numeric $$;
comment on function scsql._path_key(bigint, text) is
  'Private. The key of a normalized path in the key space of task_files.span: project_id + 0.b1b2b3... (see _path_digits) of the path with its case folded (_fold_path), so paths that differ only in letter case have one key. Key order is project, then the byte order of the folded path, with a directory right before what it holds.';

create or replace function scsql._path_span(p_project bigint, p_path text)
returns numrange
language sql immutable
as $$
  select numrange(scsql._path_key(p_project, p_path),
                  (p_project::text || '.' || scsql._path_digits(scsql._fold_path(p_path)) || '002')::numeric, '[)')
$$;
comment on function scsql._path_span(bigint, text) is
  'Private. The key range a normalized path covers: from its key up to, not including, its key followed by byte 2; that is the path itself and everything below it, whatever their letter case.';

create or replace function scsql._normalize_path(p_root text, p_path text)
returns text
language plpgsql immutable
as $$
declare
  v_path text;
  v_parts text[];
  v_root text[];
  v_bad text;
  v_n integer;
begin
  if p_path is null or p_path = '' then
    raise exception using errcode = 'SC320', message = 'exclusive file path is empty',
      hint = 'Give paths relative to the project root, e.g. src/app.py or docs/ (a directory covers everything below it).';
  end if;
  if length(p_path) > 1024 then
    raise exception using errcode = 'SC320',
      message = format('exclusive file path is %s characters long; the limit is 1024', length(p_path));
  end if;
  if p_path ~ '[\x01-\x1f\x7f-\x9f\\]' then
    raise exception using errcode = 'SC320',
      message = format('exclusive file path %s holds a control character or a backslash', pg_catalog.to_json(p_path)),
      hint = 'Use forward slashes: src/app.py.';
  end if;
  v_bad := substring(p_path from '[\u00a0\u00ad\u034f\u061c\u115f\u1160\u1680\u17b4\u17b5\u180b-\u180f\u2000-\u200f\u2028-\u202f\u205f-\u206f\u3000\u3164\ufe00-\ufe0f\ufeff\uffa0\U000e0000-\U000e0fff]');
  if v_bad is not null then
    raise exception using errcode = 'SC320',
      message = format('exclusive file path %s holds the invisible or blank character U+%s', pg_catalog.to_json(p_path),
                       upper(lpad(to_hex(ascii(v_bad)), 4, '0'))),
      hint = 'Zero-width and other invisible characters, bidirectional controls and blanks other than a plain space make one file look like another; name the file with visible characters.';
  end if;
  if p_path ~ '(^|/) | (/|$)' then
    raise exception using errcode = 'SC320',
      message = format('a part of exclusive file path %s starts or ends with a space', pg_catalog.to_json(p_path)),
      hint = 'Give the file''s name without surrounding spaces.';
  end if;
  v_path := pg_catalog.normalize(p_path, 'NFC');
  v_parts := scsql._path_parts(v_path);
  if v_parts is null then
    raise exception using errcode = 'SC321',
      message = format('exclusive file path %L leaves the project through ".."', p_path);
  end if;
  if left(v_path, 1) = '/' then
    v_root := scsql._root_parts(pg_catalog.normalize(p_root, 'NFC'));
    if v_root is null then
      raise exception using errcode = 'SC321',
        message = format('exclusive file path %L is absolute, and the project has no root path', p_path),
        hint = 'Give paths relative to the project root, or have an administrator set one (scsql.set_project_root).';
    end if;
    v_n := cardinality(v_root);
    if cardinality(v_parts) < v_n
       or scsql._fold_path(array_to_string(v_parts[1:v_n], '/')) <> scsql._fold_path(array_to_string(v_root, '/')) then
      raise exception using errcode = 'SC321',
        message = format('exclusive file path %L is outside the project root %s', p_path, p_root);
    end if;
    v_parts := v_parts[v_n + 1:];
  end if;
  return coalesce(nullif(array_to_string(v_parts, '/'), ''), '.');
end
$$;
comment on function scsql._normalize_path(text, text) is
  'Private. The one function an exclusive file path enters through: checks it and returns it relative to the project root P_ROOT, in NFC, "." and empty parts and trailing slashes dropped, ".." resolved (_path_parts), the root (_root_parts; a root that names "/" or climbs above it is no root) stripped from an absolute path (compared with case folded); "." is the whole project. Letter case is kept here and folded for comparison by _path_key. Raises SC320 for an empty, over-long or malformed path (control characters, backslashes, invisible characters, blanks other than a space, a part starting or ending with a space) and SC321 for a path that leaves the project.';

create or replace function scsql._normalize_files(p_project bigint, p_files text[])
returns text[]
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_root text;
  v_paths text[];
begin
  if p_files is null or cardinality(p_files) = 0 then
    return '{}';
  end if;
  perform scsql._require(cardinality(p_files) <= 1000,
    format('exclusive_files holds %s paths; the limit is 1000 (name a directory to cover what is below it)', cardinality(p_files)));
  select root_path into v_root from scsql.projects where project_id = p_project;
  select array_agg(distinct scsql._normalize_path(v_root, f)) into v_paths from unnest(p_files) f;
  -- Paths with one key (they differ in letter case only) are one path; a
  -- path below another path of the same list adds nothing: keep the top one.
  -- Sorted by key, so concurrent enqueues take their spans in one order.
  return coalesce((
    with k as (
      select distinct on (scsql._path_key(p_project, p)) p, scsql._path_key(p_project, p) as key
      from unnest(v_paths) p
      order by scsql._path_key(p_project, p), p
    )
    select array_agg(o.p order by o.key)
    from k o
    where not exists (select from k q where q.key <> o.key and scsql._path_span(p_project, q.p) @> o.key)
  ), '{}');
end
$$;
comment on function scsql._normalize_files(bigint, text[]) is
  'Private. Normalizes a list of exclusive file paths for a project (see _normalize_path), keeps one of the paths that differ only in letter case, drops paths covered by another path of the list, and sorts them by key. Raises SC010 for more than 1000 paths, SC320/SC321 for bad paths.';

create or replace function scsql._notify_queue(p_project bigint, p_team_role text, p_what text)
returns void
language sql volatile
as $$ select pg_catalog.pg_notify(scsql._queue_channel(p_project, p_team_role), p_what) $$;
comment on function scsql._notify_queue(bigint, text, text) is
  'Private. NOTIFY the channel of a (project, team role) with a short hint ("task", "message").';

create or replace function scsql._archive_row(p_t scsql.tasks, p_state text, p_result jsonb, p_error text, p_by bigint)
returns scsql.tasks_archive
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  -- Taken before the statement, which Citus runs on the shard's node: it
  -- refuses volatile functions there (and parameters in language sql).
  v_now timestamptz := clock_timestamp();
  v_archived scsql.tasks_archive;
begin
  insert into scsql.tasks_archive (
    project_id, task_id, team_role, state, priority, payload, acceptance_criteria, complexity,
    exclusive_files, attempts, max_attempts, fence, claimed_by, result, last_error,
    created_by, created_at, finished_at, finished_by)
  values (p_t.project_id, p_t.task_id, p_t.team_role, p_state, p_t.priority, p_t.payload, p_t.acceptance_criteria,
          p_t.complexity, p_t.exclusive_files, p_t.attempts, p_t.max_attempts, p_t.fence, p_t.claimed_by, p_result,
          coalesce(p_error, p_t.last_error), p_t.created_by, p_t.created_at, v_now, p_by)
  returning * into v_archived;
  return v_archived;
end
$$;
comment on function scsql._archive_row(scsql.tasks, text, jsonb, text, bigint) is
  'Private. Writes the archive row of task P_T, just deleted from the hot queue, with its final state, result or error (its own last error when none is given), finished now by P_BY. Returns the archived row.';

create or replace function scsql._archive_task(
  p_project bigint, p_task bigint, p_state text, p_result jsonb, p_error text, p_by bigint)
returns scsql.tasks_archive
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_t scsql.tasks;
  v_archived scsql.tasks_archive;
begin
  -- Deleted, then archived from the deleted row's values: on Citus two
  -- statements of the task's shard over one connection (a DELETE feeding
  -- an INSERT in one statement is copied through the coordinator and
  -- committed in two phases).
  delete from scsql.tasks t where t.project_id = p_project and t.task_id = p_task returning t.* into v_t;
  if found then
    v_archived := scsql._archive_row(v_t, p_state, p_result, p_error, p_by);
  end if;
  return v_archived;
end
$$;
comment on function scsql._archive_task(bigint, bigint, text, jsonb, text, bigint) is
  'Private. Moves a task from the hot queue to tasks_archive with its final state, result or error; its exclusive files are freed (task_files rows cascade). Returns the archived row (null when the task was not in the queue).';

create or replace function scsql._archive_held_task(p_me scsql.agents, p_task bigint, p_token bigint, p_state text,
                                                    p_result jsonb, p_error text, p_action text)
returns scsql.tasks_archive
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_t scsql.tasks;
begin
  -- The lease checked by the DELETE itself (one statement of the task's
  -- shard, where _held_task then _archive_task make two).
  delete from scsql.tasks t
  where t.project_id = p_me.project_id and t.task_id = p_task
    and t.state = 'claimed' and t.fence = p_token and t.claimed_by = p_me.agent_id
  returning t.* into v_t;
  if not found then
    perform scsql._lease_refused(p_me.project_id, p_task, p_token, p_me.agent_id, p_action);
  end if;
  return scsql._archive_row(v_t, p_state, p_result, p_error, p_me.agent_id);
end
$$;
comment on function scsql._archive_held_task(scsql.agents, bigint, bigint, text, jsonb, text, text) is
  'Private. Moves task P_TASK that agent P_ME holds under lease P_TOKEN to tasks_archive with its final state, result or error (as _archive_task), finished by P_ME. Raises what _lease_refused raises (for P_ACTION) when the lease does not hold it.';

create or replace function scsql._lease_refused(p_project bigint, p_task bigint, p_token bigint, p_agent bigint, p_action text)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_t scsql.tasks;
  v_a scsql.tasks_archive;
  v_holder text;
begin
  select * into v_t from scsql.tasks where project_id = p_project and task_id = p_task;
  if found then
    if v_t.state = 'claimed' and (v_t.fence <> p_token or v_t.claimed_by <> p_agent) then
      select name into v_holder from scsql.agents where agent_id = v_t.claimed_by;
      raise exception using errcode = 'SC302',
        message = format('task %s is held by lease %s of agent %s; lease %s no longer holds it, so %s was refused and nothing was applied',
                         p_task, v_t.fence, coalesce(v_holder, '?'), p_token, p_action),
        hint = 'Your lease expired and the task was claimed again. Drop this work; claim another task.';
    elsif v_t.state = 'queued' and p_token <= v_t.fence then
      raise exception using errcode = 'SC303',
        message = format('lease %s on task %s expired and the task went back to the queue; %s was refused and nothing was applied',
                         p_token, p_task, p_action),
        hint = 'Heartbeat more often than the lease lasts (heartbeat_task), or claim the task again.';
    else
      raise exception using errcode = 'SC302',
        message = format('lease %s does not hold task %s; %s was refused and nothing was applied', p_token, p_task, p_action),
        hint = 'Use the lease_token that claim_task returned.';
    end if;
  end if;
  select * into v_a from scsql.tasks_archive where project_id = p_project and task_id = p_task;
  if found then
    raise exception using errcode = 'SC304',
      message = format('task %s already finished (%s at %s); %s was refused and nothing was applied',
                       p_task, v_a.state, v_a.finished_at, p_action);
  end if;
  raise exception using errcode = 'SC301', message = format('no task %s in your project', p_task),
    hint = 'queue_stats and my_tasks show the tasks you can see.';
end
$$;
comment on function scsql._lease_refused(bigint, bigint, bigint, bigint, text) is
  'Private. Explains why a lease token does not hold a task, by raising SC302 (claimed again under a newer lease, or not this agent''s token), SC303 (lease expired, task back in the queue), SC304 (task finished) or SC301 (no such task in the project).';

create or replace function scsql._task_not_queued(p_project bigint, p_task bigint)
returns void
language plpgsql stable
as $$
begin
  if exists (select from scsql.tasks_archive a where a.project_id = p_project and a.task_id = p_task) then
    raise exception using errcode = 'SC304', message = format('task %s already finished', p_task);
  end if;
  raise exception using errcode = 'SC301', message = format('no task %s in your project', p_task);
end
$$;
comment on function scsql._task_not_queued(bigint, bigint) is
  'Private, called by claim_task_by_id and cancel_task when task P_TASK is not in project P_PROJECT''s queue. Raises SC304 when it finished (it is in the archive), else SC301.';

create or replace function scsql._held_task(p_me scsql.agents, p_task bigint, p_token bigint, p_action text)
returns scsql.tasks
language plpgsql
as $$
declare
  v_t scsql.tasks;
begin
  select * into v_t from scsql.tasks t
  where t.project_id = p_me.project_id and t.task_id = p_task
    and t.state = 'claimed' and t.fence = p_token and t.claimed_by = p_me.agent_id
  for update;
  if not found then
    perform scsql._lease_refused(p_me.project_id, p_task, p_token, p_me.agent_id, p_action);
  end if;
  return v_t;
end
$$;
comment on function scsql._held_task(scsql.agents, bigint, bigint, text) is
  'Private, called by the task functions (as their owner). The task P_TASK that agent P_ME holds under lease P_TOKEN, locked FOR UPDATE; when the lease does not hold it, raises what scsql._lease_refused says about P_ACTION.';

create or replace function scsql._requeue(p_project bigint, p_task bigint, p_run_after timestamptz, p_error text,
                                          p_uncount boolean default false)
returns scsql.tasks
language plpgsql
as $$
-- The time comes as a value (Citus refuses volatile functions in an
-- UPDATE's SET); the caller holds the task locked.
declare
  v_t scsql.tasks;
begin
  update scsql.tasks t
  set state = 'queued', claimed_by = null, claimed_at = null, lease_expires_at = null, run_after = p_run_after,
      last_error = coalesce(p_error, t.last_error), attempts = t.attempts - case when p_uncount then 1 else 0 end
  where t.project_id = p_project and t.task_id = p_task
  returning t.* into v_t;
  return v_t;
end
$$;
comment on function scsql._requeue(bigint, bigint, timestamptz, text, boolean) is
  'Private, called by the task functions (as their owner). Puts claimed task P_TASK back in the queue: unclaimed, runnable from P_RUN_AFTER, with last_error P_ERROR (kept when NULL) and, with P_UNCOUNT, its attempt not counted. Returns the task''s row.';

create or replace function scsql._claimed(p_t scsql.tasks)
returns scsql.claimed_task
language sql immutable
as $$
  select row(p_t.task_id, p_t.fence, p_t.lease_expires_at, p_t.attempts, p_t.max_attempts, p_t.team_role,
             p_t.priority, p_t.payload, p_t.acceptance_criteria, p_t.complexity, p_t.exclusive_files,
             p_t.created_at)::scsql.claimed_task
$$;
comment on function scsql._claimed(scsql.tasks) is
  'Private. A claimed task as claim_task, claim_task_by_id, complete_and_claim and my_tasks return it: its fence is the lease_token, its attempts so far the attempt. One expression, which the planner inlines.';

create or replace function scsql._claim_queued(p_me scsql.agents, p_task bigint, p_lease_seconds integer)
returns setof scsql.claimed_task
language plpgsql
as $$
declare
  -- Plain values: Citus routes the UPDATE by the project and refuses volatile
  -- functions in it (the time is taken first).
  v_project bigint := p_me.project_id;
  v_agent bigint := p_me.agent_id;
  v_now timestamptz := clock_timestamp();
begin
  return query
  update scsql.tasks t
  set state = 'claimed', fence = t.fence + 1, attempts = t.attempts + 1, claimed_by = v_agent,
      claimed_at = v_now, lease_seconds = p_lease_seconds,
      lease_expires_at = v_now + make_interval(secs => p_lease_seconds)
  where t.project_id = v_project and t.task_id = p_task
    and t.state = 'queued' and t.run_after <= v_now
  returning (scsql._claimed(t)).*;
end
$$;
comment on function scsql._claim_queued(scsql.agents, bigint, integer) is
  'Private, called by claim_task and claim_task_by_id (as their owner). Claims task P_TASK of agent P_ME''s project for P_ME with a lease of P_LEASE_SECONDS when it is queued and due: its fence (the lease_token) and attempts grow by one. Returns the claimed task, no row when it was not queued and due.';

create or replace function scsql._expire_leases(p_project bigint, p_team_role text, p_limit integer)
returns table (requeued integer, dead integer)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_requeued integer := 0;
  v_dead integer := 0;
  r record;
  v_now timestamptz := clock_timestamp();  -- Citus refuses volatile functions in an UPDATE's SET
  c record;
begin
  -- The expired leases, then each locked by its project and key (Citus locks
  -- rows of one project's shard only; across projects it would refuse FOR
  -- UPDATE): a task another session holds, or that changed meanwhile, is skipped.
  for c in
    select t.project_id, t.task_id
    from scsql.tasks t
    where (p_project is null or t.project_id = p_project)
      and (p_team_role is null or t.team_role = p_team_role)
      and t.state = 'claimed' and t.lease_expires_at < v_now
    order by t.lease_expires_at
    limit p_limit
  loop
    select t.project_id, t.task_id, t.team_role, t.attempts, t.max_attempts, t.fence, t.lease_expires_at into r
    from scsql.tasks t
    where t.project_id = c.project_id and t.task_id = c.task_id and t.state = 'claimed' and t.lease_expires_at < v_now
    for update skip locked;
    continue when not found;
    if r.attempts >= r.max_attempts then
      perform scsql._archive_task(r.project_id, r.task_id, 'dead', null,
        format('lease %s expired at %s on the last of %s attempts', r.fence, r.lease_expires_at, r.max_attempts), null);
      v_dead := v_dead + 1;
    else
      perform scsql._requeue(r.project_id, r.task_id, v_now, format('lease %s expired at %s', r.fence, r.lease_expires_at));
      perform scsql._notify_queue(r.project_id, r.team_role, 'task');
      v_requeued := v_requeued + 1;
    end if;
  end loop;
  return query select v_requeued, v_dead;
end
$$;
comment on function scsql._expire_leases(bigint, text, integer) is
  'Private. Returns claimed tasks whose lease expired to the queue (their fence stays, so the old token is refused with SC303, and SC302 once claimed again), or archives them as dead when that was the last attempt. Limited to one project / team role when given; skips rows other sessions hold.';

create or replace function scsql._hold_task_files(p_project bigint, p_task bigint, p_files text[])
returns void
language plpgsql
as $$
declare
  v_held integer;
  v_overlap text;
begin
  if coalesce(cardinality(p_files), 0) = 0 then
    return;
  end if;
  -- The exclusion constraint decides, even against transactions that have
  -- not committed yet: their rows make this insert wait for their outcome.
  insert into scsql.task_files (project_id, task_id, path, span)
  select p_project, p_task, f, scsql._path_span(p_project, f)
  from unnest(p_files) with ordinality u(f, i) order by i
  on conflict do nothing;
  -- Counted, not taken from the row count: on Citus, which sends the rows
  -- to the shard from the coordinator, that counts the rows sent.
  select count(*) into v_held from scsql.task_files h
  where h.project_id = p_project and h.task_id = p_task;
  if v_held < cardinality(p_files) then
    select string_agg(format('%s (held as %s by task %s)', f, h.path, h.task_id), ', ' order by f, h.task_id)
    into v_overlap
    from unnest(p_files) f
    join scsql.task_files h
      on h.project_id = p_project and h.task_id <> p_task
     and h.span && scsql._path_span(p_project, f);
    raise exception using errcode = 'SC322',
      message = format('exclusive files overlap in-flight tasks: %s', coalesce(v_overlap, '(a task that has just finished)')),
      hint = 'Wait until those tasks finish, or enqueue without the overlapping paths. A directory covers every file below it.';
  end if;
end
$$;
comment on function scsql._hold_task_files(bigint, bigint, text[]) is
  'Private, for scsql.enqueue_task. Records the normalized exclusive FILES of task TASK of PROJECT, or raises SC322 listing the in-flight tasks whose files overlap them (race-free: the exclusion constraint decides, waiting for uncommitted holders).';

create or replace function scsql._require_payload(p_payload jsonb, p_max_bytes integer, p_max text)
returns void
language plpgsql stable
as $$
begin
  perform scsql._require(p_payload is not null, 'payload must be a JSON value (use {} for none)');
  perform scsql._require(pg_catalog.octet_length(p_payload::text) <= p_max_bytes, 'payload is larger than ' || p_max);
  perform scsql._require(scsql._jsonb_depth(p_payload) <= 64, 'payload nests deeper than 64 levels');
end
$$;
comment on function scsql._require_payload(jsonb, integer, text) is
  'Private, for scsql.enqueue_task and scsql.broadcast. Raises SC010 unless PAYLOAD is a JSON value of at most MAX_BYTES (MAX: the same bound in words, for the message) nesting at most 64 levels.';

-- ---------------------------------------------------------------------------
-- Public API
-- ---------------------------------------------------------------------------

create or replace function scsql.enqueue_task(
  p_role text,
  p_payload jsonb default '{}'::jsonb,
  p_priority integer default 0,
  p_exclusive_files text[] default '{}',
  p_acceptance_criteria text default '',
  p_complexity integer default null,
  p_run_after timestamptz default null,
  p_max_attempts integer default 5,
  out task_id bigint,
  out team_role text,
  out exclusive_files text[],
  out run_after timestamptz)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_me scsql.agents := scsql._me();
  v_files text[];
  v_err scsql.violation;
begin
  if not scsql._is_orchestrator(v_me.team_role) then
    raise exception using errcode = 'SC300',
      message = format('agent %s has team role %s, which may not enqueue tasks', v_me.name, v_me.team_role),
      hint = 'Only orchestrator roles enqueue. Send a PROPOSED or STATUS broadcast to the orchestrator instead.';
  end if;
  perform scsql._team_role(p_role);
  perform scsql._require_payload(p_payload, 1048576, '1 MiB');
  perform scsql._require(p_priority is not null and p_priority between -1000000 and 1000000,
    'priority must be between -1000000 and 1000000 (higher runs first)');
  perform scsql._require(length(coalesce(p_acceptance_criteria, '')) <= 65536, 'acceptance_criteria is longer than 65536 characters');
  perform scsql._require_time('run_after', p_run_after);
  v_files := scsql._normalize_files(v_me.project_id, p_exclusive_files);
  -- Stored redacted (sql/05_redaction.sql).
  p_payload := scsql._redact_jsonb(p_payload);
  p_acceptance_criteria := scsql._redact(p_acceptance_criteria);

  -- complexity and max_attempts are checked by the table's constraints.
  -- complexity is a smallint: clamped to its range, a value out of it stays
  -- out of 1..5, so the constraint, not the cast, refuses it.
  begin
    insert into scsql.tasks (project_id, team_role, priority, payload, acceptance_criteria, complexity,
                             exclusive_files, run_after, max_attempts, created_by)
    values (v_me.project_id, p_role, p_priority, p_payload, coalesce(p_acceptance_criteria, ''),
            case when p_complexity < -32768 then -32768 when p_complexity > 32767 then 32767 else p_complexity end,
            v_files, coalesce(p_run_after, now()), p_max_attempts, v_me.agent_id)
    returning tasks.task_id, tasks.team_role, tasks.exclusive_files, tasks.run_after
    into task_id, team_role, exclusive_files, run_after;
  exception when check_violation or not_null_violation then
    get stacked diagnostics v_err.returned_sqlstate = returned_sqlstate, v_err.schema_name = schema_name,
      v_err.table_name = table_name, v_err.constraint_name = constraint_name, v_err.column_name = column_name, v_err.message_text = message_text;
    perform scsql._raise_violation(v_err);
  end;

  perform scsql._hold_task_files(v_me.project_id, task_id, v_files);
  perform scsql._notify_queue(v_me.project_id, p_role, 'task');
end
$$;
comment on function scsql.enqueue_task(text, jsonb, integer, text[], text, integer, timestamptz, integer) is
  'Orchestrators only. Queues a task for a team role of your project. Refused when its exclusive files overlap a queued or claimed task (the error lists them). Returns task_id, team_role, normalized exclusive_files, run_after.

p_role: team role that will do it
p_payload (object): what to do
p_priority (-1000000..1000000): higher runs first
p_exclusive_files: paths (or directories) under the project root that only this task may change
p_acceptance_criteria: when it counts as done
p_complexity (1..5): estimated difficulty
p_run_after: not before this time (default now)
p_max_attempts (1..100): attempts before it dies

Payload is JSON; a higher priority runs first (default 0); exclusive_files are paths relative to the project root, or absolute under it (a directory covers everything below it; compared in NFC with letter case folded, so SRC/a.py and src/A.py are one file); complexity is 1-5; run_after defaults to now, max_attempts to 5. Payload and acceptance criteria are stored redacted (each secret replaced by [REDACTED:<kind>], see scsql.redact). The role''s channel is notified. Raises SC300 for a non-orchestrator, SC008 unknown role, SC010 bad argument, SC320 a malformed path (control, invisible or blank characters other than a space, backslashes), SC321 a path leaving the project, SC322 when the files overlap a queued or claimed task (the message lists them; race-free: of two overlapping enqueues exactly one wins).';

create or replace function scsql.claim_task(p_n integer default 1, p_lease_seconds integer default 300)
returns setof scsql.claimed_task
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_me scsql.agents := scsql._me();
  v_project bigint := v_me.project_id;  -- plain values: Citus routes the claim by the project
  v_role text := v_me.team_role;
  v_agent bigint := v_me.agent_id;
  v_now timestamptz;
  v_claimed integer;
begin
  perform scsql._require(p_n is not null and p_n between 1 and 100, 'n must be 1 to 100');
  perform scsql._require(p_lease_seconds is not null and p_lease_seconds between 1 and 86400, 'lease_seconds must be 1 to 86400');
  for v_pass in 1 .. 2 loop
    v_now := clock_timestamp();
    -- One statement picks and claims the best queued, due tasks, unless a
    -- lease of the role has expired: those come back lazily, at claim time
    -- (and by queue_maintenance), first, and the claim is made again.
    -- The tasks are locked once, by a CTE (a locking subquery of the UPDATE
    -- could be run again for each row it rechecks).
    return query
    with picked as (
      select q.task_id from scsql.tasks q
      where q.project_id = v_project and q.team_role = v_role and q.state = 'queued' and q.run_after <= v_now
        and (v_pass = 2 or not exists (select from scsql.tasks e
                                       where e.project_id = v_project and e.team_role = v_role
                                         and e.state = 'claimed' and e.lease_expires_at < v_now))
      order by q.priority desc, q.task_id limit p_n for update skip locked
    ), claimed as (
      update scsql.tasks t
      set state = 'claimed', fence = t.fence + 1, attempts = t.attempts + 1, claimed_by = v_agent, claimed_at = v_now,
          lease_seconds = p_lease_seconds, lease_expires_at = v_now + make_interval(secs => p_lease_seconds)
      from picked p
      where t.project_id = v_project and t.task_id = p.task_id and t.state = 'queued' and t.run_after <= v_now
      returning (scsql._claimed(t)).*)
    select * from claimed c order by c.priority desc, c.task_id;
    get diagnostics v_claimed = row_count;
    exit when v_claimed > 0 or v_pass = 2
      or not exists (select from scsql.tasks e where e.project_id = v_project and e.team_role = v_role
                     and e.state = 'claimed' and e.lease_expires_at < v_now);
    perform scsql._expire_leases(v_project, v_role, 100);
  end loop;
end
$$;
comment on function scsql.claim_task(integer, integer) is
  'Claims up to n queued tasks of your team role, best priority then oldest; never the same task twice across workers. Each comes with lease_token (pass it to heartbeat/complete/fail/release_task) and lease_expires_at. Returns no rows when none is queued (unless wait_seconds).

p_n (1..100): how many tasks
p_lease_seconds (1..86400): lease length

N is 1-100, tasks of the caller''s own team role in its own project, claimed now with FOR UPDATE SKIP LOCKED. lease_token is the task''s fence (it grows with every claim); lease_expires_at is now + lease_seconds (default 300). Pass the token to heartbeat_task, complete_task, fail_task or release_task. Expired leases of the role return to the queue first. It never waits (to wait for work, CALL scsql.wait_for_task outside a transaction, or LISTEN on scsql_caller.my_channel(''team''), then claim again; the MCP tool claim_task adds wait_seconds and does that, claiming, waiting on LISTEN with no transaction open, and claiming again). claim_task_by_id claims one named task. Raises SC010 for a bad n or lease_seconds.';

create or replace function scsql.claim_task_by_id(p_task bigint, p_lease_seconds integer default 300)
returns setof scsql.claimed_task
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_me scsql.agents := scsql._me();
  v_t scsql.tasks;
  v_holder text;
begin
  perform scsql._require(p_task is not null, 'task is required');
  perform scsql._require(p_lease_seconds is not null and p_lease_seconds between 1 and 86400, 'lease_seconds must be 1 to 86400');
  perform scsql._expire_leases(v_me.project_id, v_me.team_role, 100);
  select * into v_t from scsql.tasks t where t.project_id = v_me.project_id and t.task_id = p_task;
  if not found then
    perform scsql._task_not_queued(v_me.project_id, p_task);
  end if;
  if v_t.team_role <> v_me.team_role then
    raise exception using errcode = 'SC305',
      message = format('task %s is for team role %s; agent %s is %s and claims only %s tasks',
                       p_task, v_t.team_role, v_me.name, v_me.team_role, v_me.team_role);
  end if;
  return query select * from scsql._claim_queued(v_me, p_task, p_lease_seconds);
  if not found then
    select * into v_t from scsql.tasks t where t.project_id = v_me.project_id and t.task_id = p_task;
    select name into v_holder from scsql.agents where agent_id = v_t.claimed_by;
    raise exception using errcode = 'SC306',
      message = case when v_t.state = 'claimed'
                     then format('task %s is claimed by agent %s until %s', p_task, coalesce(v_holder, '?'), v_t.lease_expires_at)
                     else format('task %s is scheduled for %s', p_task, v_t.run_after) end;
  end if;
end
$$;
comment on function scsql.claim_task_by_id(bigint, integer) is
  'Claims one named task of your team role (as an ASSIGN names it), like claim_task; an error, not an empty result, when it cannot be claimed.

p_task: task_id
p_lease_seconds (1..86400): lease length

TASK must be of the caller''s own team role in its own project; it is claimed now with a lease of lease_seconds (default 300), as claim_task does for the next task in the queue. Returns one row with the columns of claim_task. Raises SC301 no such task in your project, SC304 finished, SC305 task of another team role, SC306 task held by another lease or scheduled for later, SC010 bad argument.';

create or replace procedure scsql.wait_for_task(p_wait_seconds numeric default 60, inout claimable bigint default null)
language plpgsql
as $$
declare
  v_deadline timestamptz;
begin
  if p_wait_seconds is null or not p_wait_seconds between 0 and 600 then
    raise exception using errcode = 'SC010', message = 'wait_seconds must be 0 to 600',
      hint = 'Call it again to wait longer.';
  end if;
  v_deadline := pg_catalog.clock_timestamp() + pg_catalog.make_interval(secs => p_wait_seconds::double precision);
  loop
    claimable := scsql.claimable_for_me();
    exit when claimable > 0 or pg_catalog.clock_timestamp() >= v_deadline;
    -- A new transaction each poll: no xid, no lock, no snapshot older than one sleep.
    commit;
    perform pg_catalog.pg_sleep(least(0.2, extract(epoch from v_deadline - pg_catalog.clock_timestamp())));
  end loop;
end
$$;
comment on procedure scsql.wait_for_task(numeric, bigint) is
  'Waits up to wait_seconds (0-600, default 60) until a task is claimable for the caller (scsql.claimable_for_me() above zero), without claiming it: CALL it outside a transaction block (psql in autocommit) as the agent''s own role, then claim with claim_task, which may still find nothing when another worker was faster. It polls every 0.2 seconds and commits between polls, so while it waits it holds no transaction id and no lock, and no transaction or snapshot of it lasts longer than one poll. Returns claimable: how many tasks were claimable when it returned, 0 after the wait ran out. A client that can LISTEN waits on scsql_caller.my_channel(''team'') instead (scsql''s own client does). Raises SC010 for a bad wait_seconds. Inside a transaction block (which SET LOCAL ROLE needs) it cannot commit: when it would have to wait there, PostgreSQL refuses it with 2D000 (invalid transaction termination).';

create or replace function scsql.heartbeat_task(p_task bigint, p_token bigint, p_lease_seconds integer default null)
returns timestamptz
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_me scsql.agents := scsql._me();
  v_until timestamptz;
  v_now timestamptz := clock_timestamp();  -- Citus refuses volatile functions in an UPDATE's SET
begin
  perform scsql._require(p_task is not null and p_token is not null, 'task and token are required');
  perform scsql._require(p_lease_seconds is null or p_lease_seconds between 1 and 86400, 'lease_seconds must be 1 to 86400');
  update scsql.tasks t
  set lease_expires_at = v_now + make_interval(secs => coalesce(p_lease_seconds, t.lease_seconds)),
      lease_seconds = coalesce(p_lease_seconds, t.lease_seconds)
  where t.project_id = v_me.project_id and t.task_id = p_task
    and t.state = 'claimed' and t.fence = p_token and t.claimed_by = v_me.agent_id
  returning t.lease_expires_at into v_until;
  if v_until is null then
    perform scsql._lease_refused(v_me.project_id, p_task, p_token, v_me.agent_id, 'the heartbeat');
  end if;
  return v_until;
end
$$;
comment on function scsql.heartbeat_task(bigint, bigint, integer) is
  'Extends the lease on a task you hold. Returns the new expiry.

p_task: task_id you hold
p_token: its lease_token
p_lease_seconds (1..86400): new lease length (default: as claimed)

Extended by lease_seconds (default: the length it was claimed with). A lease that expired but was not yet claimed again can still be extended. Raises SC302 when the task was claimed again under a newer lease (or the token is not the caller''s), SC303 when the lease expired and the task went back to the queue, SC304 finished, SC301 unknown task.';

create or replace function scsql.complete_task(
  p_task bigint, p_token bigint, p_result jsonb default null,
  out task_id bigint, out state text, out attempts integer, out finished_at timestamptz)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_me scsql.agents := scsql._me();
begin
  perform scsql._require(p_task is not null and p_token is not null, 'task and token are required');
  perform scsql._require(p_result is null or pg_catalog.octet_length(p_result::text) <= 1048576, 'result is larger than 1 MiB');
  perform scsql._require(p_result is null or scsql._jsonb_depth(p_result) <= 64, 'result nests deeper than 64 levels');
  p_result := scsql._redact_jsonb(p_result);  -- stored redacted
  select a.task_id, a.state, a.attempts, a.finished_at into task_id, state, attempts, finished_at
  from scsql._archive_held_task(v_me, p_task, p_token, 'done', p_result, null, 'the completion') a;
end
$$;
comment on function scsql.complete_task(bigint, bigint, jsonb) is
  'Completes a task you hold; its exclusive files are freed. Fenced: a lease that expired and was claimed again is refused and the result not applied. Returns task_id, state, attempts, finished_at.

p_task: task_id you hold
p_token: its lease_token
p_result (object): what the task produced

TOKEN is the caller''s lease. The result (JSON) is stored redacted (see scsql.redact_jsonb) and the task moves to the archive as done. Raises SC302 when the lease expired and the task was claimed again (the result is NOT applied), SC303 when the task went back to the queue, SC304 when it already finished, SC301 unknown task.';

create or replace function scsql.complete_and_claim(
  p_task bigint, p_token bigint, p_result jsonb default null, p_n integer default 1, p_lease_seconds integer default 300)
returns setof scsql.claimed_task
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
begin
  -- In this order: a refused completion claims nothing.
  perform scsql.complete_task(p_task, p_token, p_result);
  return query select * from scsql.claim_task(p_n, p_lease_seconds);
end
$$;
comment on function scsql.complete_and_claim(bigint, bigint, jsonb, integer, integer) is
  'complete_task, then claim_task, in one call. Returns the claimed tasks like claim_task.

p_task: task_id you hold
p_token: its lease_token
p_result (object): what the task produced
p_n (1..100): how many tasks to claim next
p_lease_seconds (1..86400): lease length

A busy worker needs one round trip per task: TASK is completed under lease TOKEN with result, then up to n (default 1) more tasks are claimed with a lease of lease_seconds. Raises what complete_task raises (and then claims nothing) and what claim_task raises.';

create or replace function scsql.fail_task(
  p_task bigint, p_token bigint, p_error text, p_retry boolean default true,
  out task_id bigint, out state text, out attempts integer, out max_attempts integer, out run_after timestamptz)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_me scsql.agents := scsql._me();
  v_t scsql.tasks;
  v_now timestamptz;
begin
  perform scsql._require(p_task is not null and p_token is not null, 'task and token are required');
  perform scsql._require(nullif(btrim(p_error), '') is not null, 'error must say what went wrong');
  perform scsql._require(length(p_error) <= 65536, 'error is longer than 65536 characters');
  perform scsql._require(p_retry is not null, 'retry must be true or false');
  p_error := scsql._redact(p_error);  -- stored redacted
  v_t := scsql._held_task(v_me, p_task, p_token, 'the failure report');
  if p_retry and v_t.attempts < v_t.max_attempts then
    -- Exponential backoff: 1 s after the first attempt, doubling, at most an
    -- hour (from values taken first: Citus refuses volatile functions in an
    -- UPDATE's SET, and stable ones over its columns; v_t is locked).
    v_now := clock_timestamp();
    select r.task_id, r.state, r.attempts, r.max_attempts, r.run_after
    into task_id, state, attempts, max_attempts, run_after
    from scsql._requeue(v_t.project_id, v_t.task_id,
                        v_now + make_interval(secs => least(3600, power(2, v_t.attempts - 1))), p_error) r;
  else
    select a.task_id, a.state, a.attempts, a.max_attempts, null::timestamptz
    into task_id, state, attempts, max_attempts, run_after
    from scsql._archive_task(v_t.project_id, v_t.task_id, 'dead', null, p_error, v_me.agent_id) a;
  end if;
end
$$;
comment on function scsql.fail_task(bigint, bigint, text, boolean) is
  'Reports that you could not do a task you hold. With retry and attempts left it is requeued after a backoff (1 s doubling, at most 1 h); otherwise it dies and its files are freed. Returns task_id, state, attempts, max_attempts, run_after.

p_task: task_id you hold
p_token: its lease_token
p_error: what went wrong
p_retry: requeue when attempts are left

TOKEN is the caller''s lease; ERROR is stored redacted (see scsql.redact). Retry is the default; the backoff doubles (1 s, 2 s, 4 s, ... at most 1 h). A task that dies moves to the archive as dead; state is queued or dead. Raises SC302/SC303/SC304/SC301 like complete_task, SC010 for an empty error.';

create or replace function scsql.release_task(
  p_task bigint, p_token bigint, p_requeue boolean default true,
  out task_id bigint, out state text)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_me scsql.agents := scsql._me();
  v_t scsql.tasks;
  v_now timestamptz;
begin
  perform scsql._require(p_task is not null and p_token is not null, 'task and token are required');
  perform scsql._require(p_requeue is not null, 'requeue must be true or false');
  v_t := scsql._held_task(v_me, p_task, p_token, 'the release');
  if p_requeue then
    v_now := clock_timestamp();  -- Citus refuses volatile functions in an UPDATE's SET
    perform scsql._requeue(v_t.project_id, v_t.task_id, v_now, null, p_uncount => true);
    perform scsql._notify_queue(v_t.project_id, v_t.team_role, 'task');
    task_id := v_t.task_id;
    state := 'queued';
  else
    select a.task_id, a.state into task_id, state
    from scsql._archive_task(v_t.project_id, v_t.task_id, 'released', null, null, v_me.agent_id) a;
  end if;
end
$$;
comment on function scsql.release_task(bigint, bigint, boolean) is
  'Gives up a task you hold without failing it. With requeue it returns to the queue at once, uncounted, keeping its files; without, it is released and its files freed. Returns task_id, state.

p_task: task_id you hold
p_token: its lease_token
p_requeue: back to the queue

TOKEN is the caller''s lease. Requeue is the default: the task goes back to the queue at once, the attempt is not counted, and it keeps its exclusive files (they belong to the task until it finishes). With requeue false the task leaves the queue as released. Raises SC302/SC303/SC304/SC301 like complete_task.';

create or replace function scsql.cancel_task(p_task bigint, p_reason text)
returns text
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_me scsql.agents := scsql._me();
  v_a scsql.tasks_archive;
begin
  if not scsql._is_orchestrator(v_me.team_role) then
    raise exception using errcode = 'SC300',
      message = format('agent %s has team role %s, which may not cancel tasks', v_me.name, v_me.team_role);
  end if;
  perform scsql._require(p_task is not null, 'task is required');
  perform scsql._require(nullif(btrim(p_reason), '') is not null, 'reason must say why the task is cancelled');
  p_reason := scsql._redact(p_reason);  -- stored redacted
  perform 1 from scsql.tasks t where t.project_id = v_me.project_id and t.task_id = p_task for update;
  v_a := scsql._archive_task(v_me.project_id, p_task, 'cancelled', null, p_reason, v_me.agent_id);
  if v_a.task_id is null then
    perform scsql._task_not_queued(v_me.project_id, p_task);
  end if;
  return v_a.state;
end
$$;
comment on function scsql.cancel_task(bigint, text) is
  'Orchestrators only. Cancels a queued or claimed task of your project; its exclusive files are freed. Returns ''cancelled''.

p_task: task_id
p_reason: why

The reason is stored redacted (see scsql.redact); the task moves to the archive as cancelled, and a worker still holding it gets SC304 on its next call. Raises SC300 non-orchestrator, SC301 unknown task, SC304 already finished.';

create or replace function scsql.queue_stats()
returns table (
  team_role text, queued bigint, scheduled bigint, claimed bigint, expired bigint,
  done bigint, dead bigint, released bigint, cancelled bigint,
  oldest_queued_at timestamptz, oldest_wait_seconds double precision)
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  -- The caller's project, a value (on Citus, a call in the query would run on the shard's node).
  v_project bigint := scsql._my_project();
begin
  return query
  with hot as (
    select t.team_role,
           count(*) filter (where t.state = 'queued' and t.run_after <= now()) as queued,
           count(*) filter (where t.state = 'queued' and t.run_after > now()) as scheduled,
           count(*) filter (where t.state = 'claimed' and t.lease_expires_at >= now()) as claimed,
           count(*) filter (where t.state = 'claimed' and t.lease_expires_at < now()) as expired,
           min(t.created_at) filter (where t.state = 'queued' and t.run_after <= now()) as oldest
    from scsql.tasks t where t.project_id = v_project
    group by t.team_role
  ),
  arch as (
    select a.team_role,
           count(*) filter (where a.state = 'done') as done,
           count(*) filter (where a.state = 'dead') as dead,
           count(*) filter (where a.state = 'released') as released,
           count(*) filter (where a.state = 'cancelled') as cancelled
    from scsql.tasks_archive a where a.project_id = v_project
    group by a.team_role
  )
  select r,
         coalesce(h.queued, 0), coalesce(h.scheduled, 0), coalesce(h.claimed, 0), coalesce(h.expired, 0),
         coalesce(a.done, 0), coalesce(a.dead, 0), coalesce(a.released, 0), coalesce(a.cancelled, 0),
         h.oldest, extract(epoch from now() - h.oldest)::double precision
  from (select team_role from hot union select team_role from arch) roles(r)
  left join hot h on h.team_role = r
  left join arch a on a.team_role = r
  order by r;
end
$$;
comment on function scsql.queue_stats() is
  'Your project''s queue per team role: queued, scheduled, claimed, expired, done, dead, released, cancelled, oldest wait.

Counts: queued is claimable now, scheduled waits for run_after (e.g. a retry backoff), claimed has a valid lease, expired has a lease that expired and was not yet reclaimed; done, dead, released and cancelled count finished tasks. The oldest wait is the oldest claimable task''s enqueue time and its wait in seconds.';

create or replace function scsql.claimable_for_me()
returns bigint
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  -- Values (on Citus, calls in the query would run on the shard's node).
  v_me scsql.agents := scsql._me();
  v_now timestamptz := clock_timestamp();
begin
  return (select count(*)
          from scsql.tasks t
          where t.project_id = v_me.project_id and t.team_role = v_me.team_role
            and ((t.state = 'queued' and t.run_after <= v_now)
                 or (t.state = 'claimed' and t.lease_expires_at < v_now)));
end
$$;
comment on function scsql.claimable_for_me() is
  'How many tasks you could claim now: queued tasks of your team role whose run_after has come, plus claimed ones whose lease expired.

Counted in the caller''s own project. A Stop hook (scsql hook stop-check) keeps a worker going while this is above zero.';

create or replace function scsql.my_tasks()
returns setof scsql.claimed_task
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_me scsql.agents := scsql._me();
  v_t scsql.tasks;
begin
  -- Rows first, mapped here: on Citus a whole-row reference in the query
  -- would be the shard's row type, which _claimed does not take.
  for v_t in
    select * from scsql.tasks t
    where t.project_id = v_me.project_id and t.claimed_by = v_me.agent_id and t.state = 'claimed'
    order by t.task_id
  loop
    return next scsql._claimed(v_t);
  end loop;
end
$$;
comment on function scsql.my_tasks() is
  'The tasks you hold now, with lease tokens and expiries (columns of claim_task).

Includes leases that expired but were not yet claimed again.';

create or replace function scsql.queue_maintenance(p_limit integer default 1000, out requeued integer, out dead integer)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_project bigint;
begin
  perform scsql._require(p_limit is not null and p_limit between 1 and 100000, 'limit must be 1 to 100000');
  -- An agent maintains its own project; an administrator every project.
  -- Anyone else (say, an agent that SET ROLE to the scsql_agent group) is refused.
  if exists (select from scsql.agents a where a.role_name = scsql._acting_role()) then
    v_project := scsql._my_project();
  elsif not pg_catalog.pg_has_role(scsql._acting_role(), 'scsql_admin', 'MEMBER') then
    raise exception using errcode = '42501',
      message = format('role "%s" may not run queue maintenance for every project', scsql._acting_role()),
      hint = 'Agents maintain their own project; administrators (scsql_admin) maintain all.';
  end if;
  select e.requeued, e.dead into requeued, dead from scsql._expire_leases(v_project, null, p_limit) e;
end
$$;
comment on function scsql.queue_maintenance(integer) is
  'Returns expired leases to the queue (or archives the task as dead after its last attempt). Returns requeued and dead counts.

p_limit (1..100000): tasks per call

Returns tasks whose lease expired to the queue (or archives them as dead after their last attempt), at most LIMIT (default 1000) per call: for an agent, in its own project; for an administrator, in every project. Returns how many were requeued and how many died. scsql worker runs it as the queue-maintenance job; claims do the same lazily for their own role.';

-- Spans taken before letter case was folded are taken again under the rule
-- above. Two in-flight tasks may hold paths that are one under it: those
-- keep their old spans until they finish.
do $do$
declare
  r record;
begin
  for r in select f.project_id, f.task_id, f.path from scsql.task_files f
           where f.span <> scsql._path_span(f.project_id, f.path) loop
    begin
      update scsql.task_files f set span = scsql._path_span(r.project_id, r.path)
      where f.project_id = r.project_id and f.task_id = r.task_id and f.path = r.path;
    exception when exclusion_violation then
      null;
    end;
  end loop;
end
$do$;
