-- scsql core: the error catalogue, identity, projects and agents.
--
-- Re-applied on every migrate (CREATE OR REPLACE). Runs as scsql_owner.
-- Identity rule: the acting agent is the role the session has set (SET ROLE)
-- or logged in as; it is never taken from an argument.

-- ---------------------------------------------------------------------------
-- Error catalogue
-- ---------------------------------------------------------------------------

create or replace function scsql._define_error(p_code text, p_name text, p_meaning text, p_raised_by text default 'database')
returns void
language sql
as $$
  insert into scsql.error_codes (code, name, raised_by, meaning)
  values (p_code, p_name, p_raised_by, p_meaning)
  on conflict (code) do update
    set name = excluded.name, raised_by = excluded.raised_by, meaning = excluded.meaning;
$$;
comment on function scsql._define_error(text, text, text, text) is
  'Private. Adds or updates one entry of scsql.error_codes; each sql/ file defines the codes it raises.';

select scsql._define_error(code, name, meaning, raised_by) from (values
  ('SC001', 'not_an_agent',        'database', 'The current role is not a registered scsql agent. Act through scsql (scsql mcp --agent NAME, scsql psql --agent NAME).'),
  ('SC002', 'agent_revoked',       'database', 'The agent was revoked and can no longer act. Its history stays verifiable.'),
  ('SC003', 'agent_unknown',       'database', 'No agent has that name.'),
  ('SC004', 'agent_exists',        'database', 'An agent, or a PostgreSQL role, with that name already exists.'),
  ('SC005', 'project_unknown',     'database', 'No project has that name.'),
  ('SC006', 'project_exists',      'database', 'A project with that name already exists.'),
  ('SC007', 'invalid_name',        'database', 'A name does not match the allowed pattern (lower-case letters, digits, underscores; see the message).'),
  ('SC008', 'team_role_unknown',   'database', 'No team role has that name; scsql.team_roles lists them.'),
  ('SC009', 'invalid_key',         'database', 'A public key is not a 32-byte Ed25519 key.'),
  ('SC010', 'invalid_argument',    'database', 'An argument is missing, empty, too long or out of range; the message names it.'),
  ('SC011', 'identity_mismatch',   'database', 'A call named an agent other than the one acting. Identity comes from the database role, never from an argument.'),
  ('SC012', 'key_in_use',          'database', 'That public key is already registered, to this agent or another; every agent key is a new key pair.'),
  ('SC020', 'pgvector_missing',    'database', 'The pgvector extension is not installed on the server.'),
  ('SC021', 'server_too_old',      'database', 'The PostgreSQL server is older than scsql supports.'),
  ('SC022', 'migration_changed',   'client',   'A migration file that was already applied has changed on disk; applied migrations are immutable.'),
  ('SC023', 'migration_unknown',   'client',   'The database records a migration this scsql does not have; it was migrated by a newer scsql.'),
  ('SC024', 'migration_lock_timeout', 'client', 'scsql migrate gave up waiting for sessions holding locks on scsql''s tables (it tries again for 10 minutes, waiting at most 2 s at a time so other sessions'' writes never queue behind it for longer); nothing of the step was applied.'),
  ('SC030', 'server_unreachable',  'client',   'The PostgreSQL server named by SCSQL_DSN (or the embedded server) cannot be reached.'),
  ('SC031', 'key_file_missing',    'client',   'The agent''s private key file is not in the keystore.'),
  ('SC032', 'key_file_insecure',   'client',   'The private key file can be read by group or others; chmod 600 it.'),
  ('SC033', 'embedded_busy',       'client',   'Another scsql process is starting the embedded server and it did not come up in time (SCSQL_START_TIMEOUT seconds, default 60), or a second scsql up was started meanwhile.'),
  ('SC034', 'embedded_not_running','client',   'The embedded server is not running; start it with scsql up.'),
  ('SC035', 'agent_required',      'client',   'The command acts as an agent and needs --agent NAME; identity is never taken from the environment.'),
  ('SC036', 'agent_login_privileged', 'client', 'An agent process was given a superuser or role-administering login; agent processes log in as scsql_app (SCSQL_AGENT_DSN) or as the agent''s own role.'),
  ('SC037', 'database_error',      'client',   'PostgreSQL raised an error that the call does not map to a code of its own (its SQLSTATE is in the message); nothing was stored. Retry; if it persists, report it.'),
  ('SC222', 'text_has_nul',        'client',   'A text argument, or a string inside a jsonb or array argument, contains a NUL byte (\u0000), which PostgreSQL text cannot hold; nothing was stored.'),
  ('42501', 'insufficient_privilege', 'database', 'PostgreSQL refused the call: the role may not execute that function or touch that table (for example an agent calling an administrator function).')
) as t(code, name, raised_by, meaning);

-- scsql install / uninstall (scsql/hooks/install.py): the configuration files of agent tools.
select scsql._define_error(code, name, meaning, 'client') from (values
  ('SC050', 'install_no_project_dir', 'scsql install found no project directory: --project-dir does not name a directory, or the current directory is not inside a git repository, or no project name can be made from the directory''s name (give --project).'),
  ('SC051', 'config_not_regular',  'A configuration file scsql install would change is a symbolic link or not a regular file; scsql does not write through it and left it as it is.'),
  ('SC052', 'config_unparsable',   'A configuration file scsql install would change is not valid JSON (or has a duplicate key), or its hooks or mcpServers are not of the shape Claude Code reads; the file was left as it is.'),
  ('SC053', 'config_unwritable',   'A configuration file (or its backup) could not be read or written, or changed while scsql was reading it; the file was left as it is.'),
  ('SC054', 'install_conflict',    'The agent named to scsql install already belongs to another project; install it with that project''s --project or choose another agent name.')
) as t(code, name, meaning);

-- The embedded server's start rule and scsql backup / restore (scsql/core/embedded.py, scsql/ops/backup.py).
select scsql._define_error(code, name, meaning, 'client') from (values
  ('SC013', 'embedded_held',       'The embedded server was stopped with scsql down --hold: agent processes (mcp, worker, hooks) do not start it until scsql up is run.'),
  ('SC014', 'restore_not_empty',   'scsql restore writes only into an empty server: the target database already holds schema scsql. Restore into a new data directory (SCSQL_DATA_DIR) or a new database.'),
  ('SC015', 'backup_invalid',      'The file is not a scsql backup, or its dump does not match the sha256 its manifest records, or the manifest is malformed; nothing was restored.'),
  ('SC016', 'restore_unverified',  'scsql restore restored the dump, but its chains do not verify against the manifest''s checkpoints and heads (a break, a missing or different head, or different row counts): the data was altered or is incomplete. The message lists what differs.'),
  ('SC017', 'backup_tool_failed',  'pg_dump or pg_restore failed (its last lines are in the message), or is not found; a failed restore left nothing behind (it runs in one transaction).'),
  ('SC018', 'backup_exists',       'scsql backup does not overwrite a file; name a new one.')
) as t(code, name, meaning);

-- scsql migrate --citus (scsql/core/citus.py): sharding by project on Citus.
select scsql._define_error(code, name, meaning, 'client') from (values
  ('SC042', 'citus_missing',       'scsql migrate --citus found no citus extension in the database; load citus (shared_preload_libraries), create the extension on the coordinator and add the workers first.'),
  ('SC043', 'not_distributable',   'scsql migrate --citus found a table it cannot shard by project_id (project_id missing from a primary, unique or foreign key, and the table is not a named reference table); nothing was distributed.'),
  ('SC044', 'citus_worker_setup',  'scsql migrate --citus could not let scsql_owner and scsql_auditor log in on every node of the cluster (their statements reach the workers as themselves); the message has the node''s error.')
) as t(code, name, meaning);

-- How agent processes log in (scsql.set_login_mode, scsql.set_agent_password,
-- scsql/cli.py): one login for every agent, or each agent its own.
select scsql._define_error(code, name, meaning, raised_by) from (values
  ('SC025', 'password_not_a_verifier', 'database', 'scsql.set_agent_password takes a SCRAM-SHA-256 verifier made by the client (libpq''s PQencryptPasswordConn; scsql agent login makes one), never a password in clear: the text of a statement may be logged.'),
  ('SC026', 'agent_connection_limit', 'client',   'The agent''s own login holds as many connections as its CONNECTION LIMIT allows (scsql.set_agent_connection_limit; default 32). Stop some of its processes, or have an administrator raise its limit.'),
  ('SC027', 'login_not_this_agent',   'client',   'The login an agent process uses may not act as that agent: on a database set up for a shared server each agent process logs in as its own role (SCSQL_AGENT_DSN, printed by scsql agent login NAME), and scsql_app acts as no agent.'),
  ('SC028', 'app_grants_left',        'database', 'scsql_app may still act as agents of this database through grants scsql''s owner did not make (a superuser''s, a restore''s); a superuser revokes them (the message lists the statements), then scsql.set_login_mode(''per_agent'') succeeds.'),
  ('SC029', 'agent_login_refused',    'client',   'The server refused the agent''s own login: a wrong or missing password (scsql agent login NAME issues a new one), no pg_hba.conf rule for it, or a login disabled by revocation.')
) as t(code, name, raised_by, meaning);

create or replace function scsql_caller.citus()
returns boolean
language sql stable
as $$ select pg_catalog.to_regclass('pg_catalog.pg_dist_partition') is not null $$;
comment on function scsql_caller.citus() is
  'Whether this database has Citus''s catalogue (the citus extension): every function that must act otherwise on a cluster asks it, the owner''s and the agents'' alike, and so do scsql''s clients.';

-- ---------------------------------------------------------------------------
-- Policy plumbing
-- ---------------------------------------------------------------------------

create or replace function scsql._secure_table(p_table regclass)
returns void
language plpgsql
as $$
declare
  pol record;
begin
  execute format('alter table %s enable row level security', p_table);
  execute format('alter table %s force row level security', p_table);
  for pol in select polname from pg_catalog.pg_policy where polrelid = p_table loop
    execute format('drop policy %I on %s', pol.polname, p_table);
  end loop;
  execute format('create policy owner_all on %s to scsql_owner using (true) with check (true)', p_table);
  execute format('create policy auditor_read on %s for select to scsql_auditor using (true)', p_table);
end
$$;
comment on function scsql._secure_table(regclass) is
  'Private, used by policies/. Enables and forces row-level security on a table, drops its policies and recreates the two every table has: the owner sees everything (security-definer functions run as the owner), the auditor reads everything. Subsystem files then add the agent policies, so re-applying policies/ leaves exactly the policies the files define.';

create or replace function scsql._agent_read(p_tables regclass[], p_using text)
returns void
language plpgsql
as $$
declare
  t regclass;
begin
  foreach t in array p_tables loop
    execute format('grant select on %s to scsql_agent', t);
    execute format('create policy agent_read on %s for select to scsql_agent using (%s)', t, p_using);
  end loop;
end
$$;
comment on function scsql._agent_read(regclass[], text) is
  'Private, used by policies/ after _secure_table. Lets agents read the rows of each table of TABLES that the expression USING admits: grants SELECT to scsql_agent and creates the policy agent_read with that USING, the same for every table of the list.';

-- ---------------------------------------------------------------------------
-- Identity
-- ---------------------------------------------------------------------------

create or replace function scsql._acting_role()
returns text
language sql stable
as $$
  select coalesce(nullif(pg_catalog.current_setting('role'), 'none'), session_user::text)
$$;
comment on function scsql._acting_role() is
  'Private. The role the session acts as: the role set with SET ROLE, else the login role. Unlike current_user it keeps its value inside security-definer functions, so it names the caller there too. Only a role the session may legitimately assume can be set.';

create or replace function scsql._not_revoked(p_agent scsql.agents, p_lookup text)
returns scsql.agents
language plpgsql stable
as $$
begin
  if p_agent.agent_id is null then
    raise exception using
      errcode = 'SC001',
      message = format('%s is not a scsql agent', p_lookup),
      hint = 'Act as an agent: scsql psql --agent NAME, or scsql mcp --agent NAME (a row written as the owner names its author in author_id). Administrators create agents with scsql agent create.';
  end if;
  if p_agent.revoked_at is not null then
    raise exception using
      errcode = 'SC002',
      message = format('agent "%s" was revoked at %s and can no longer act', p_agent.name, p_agent.revoked_at),
      hint = 'Its history stays verifiable. Ask an administrator to create a new agent (scsql agent create).';
  end if;
  return p_agent;
end
$$;
comment on function scsql._not_revoked(scsql.agents, text) is
  'Private, the check _me() and _chain_author() share. Returns P_AGENT, an agents row looked up by the caller, when it exists and is not revoked. Raises SC001 when it is the NULL row of a lookup that found nothing (the message names P_LOOKUP, what was looked up), SC002 when the agent was revoked.';

create or replace function scsql._me()
returns scsql.agents
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_role text := scsql._acting_role();
  v_agent scsql.agents;
begin
  select * into v_agent from scsql.agents where role_name = v_role;
  return scsql._not_revoked(v_agent, format('role "%s"', v_role));
end
$$;
comment on function scsql._me() is
  'Private. The acting agent''s row. Raises SC001 when the session is not acting as an agent and SC002 when the agent was revoked (scsql._not_revoked). Every security-definer function that acts for an agent starts here; functions that run as the caller use scsql_caller.agent().';

create or replace function scsql._chain_author(p_author bigint)
returns scsql.agents
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_agent scsql.agents;
begin
  if scsql._acting_role() is distinct from 'scsql_owner' then
    return scsql._me();
  end if;
  -- Identity is decided once, where the writing function starts (v_me :=
  -- _me(), on the coordinator on Citus); its statements then reach the
  -- shards' nodes as the owner, with the agent in author_id. Only scsql's
  -- functions and the DBA act as the owner: no agent can SET ROLE to it or
  -- log in as it, and the owner could disable the triggers anyway.
  select * into v_agent from scsql.agents a where a.agent_id = p_author;
  return scsql._not_revoked(v_agent, format('the author (author_id %s) of a row written as role "scsql_owner"',
                                            coalesce(p_author::text, 'NULL')));
end
$$;
comment on function scsql._chain_author(bigint) is
  'Private, for the insert triggers of chained tables. The agent a chained row is written for: the acting agent (scsql._me()), or, when the session acts as scsql_owner (scsql''s own functions, whose statements Citus runs on the workers as the owner, or a DBA), the agent P_AUTHOR, the row''s author_id, which the writing function took from _me(). Raises SC001 when the session acts neither as an agent nor as the owner, or as the owner for no existing agent; SC002 when that agent was revoked (scsql._not_revoked). Nothing an agent can set (SET ROLE to its own roles, settings) makes a session act as the owner.';

create or replace function scsql._my_project()
returns bigint
language sql stable
as $$ select (scsql._me()).project_id $$;
comment on function scsql._my_project() is
  'Private, for security-definer functions. The acting agent''s project_id (raises like _me). Policies and functions that run as the caller use scsql_caller.project_id().';

create or replace function scsql._my_agent_id()
returns bigint
language sql stable
as $$ select (scsql._me()).agent_id $$;
comment on function scsql._my_agent_id() is
  'Private, for security-definer functions. The acting agent''s agent_id (raises like _me); scsql_caller.agent_id() for everyone else.';

-- ---------------------------------------------------------------------------
-- The caller's identity, for policies and for functions that run as the
-- caller (schema scsql_caller). Agents may execute these, not the private
-- helpers above, which security-definer functions call as the owner.
-- ---------------------------------------------------------------------------

create or replace function scsql_caller.agent()
returns scsql.agents
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$ select * from scsql._me() $$;
comment on function scsql_caller.agent() is
  'The acting agent''s row of scsql.agents, for functions that run as the caller (whoami). Raises SC001 when the session is not acting as an agent and SC002 when the agent was revoked.';

create or replace function scsql_caller.project_id()
returns bigint
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$ select (scsql._me()).project_id $$;
comment on function scsql_caller.project_id() is
  'The acting agent''s project_id (raises SC001 / SC002 like scsql_caller.agent). Policies call it as (select scsql_caller.project_id()) so it runs once per statement.';

create or replace function scsql_caller.agent_id()
returns bigint
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$ select (scsql._me()).agent_id $$;
comment on function scsql_caller.agent_id() is
  'The acting agent''s agent_id (raises SC001 / SC002 like scsql_caller.agent).';

create or replace function scsql_caller.row_project()
returns bigint
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
begin
  if scsql._acting_role() = 'scsql_owner' then
    raise exception using
      errcode = 'SC001',
      message = 'role "scsql_owner" is not a scsql agent: a row it writes on Citus names its project in project_id',
      hint = 'Name the agent in author_id and its project in project_id (Citus routes a row by project_id before any trigger runs), or act as the agent.';
  end if;
  return (scsql._me()).project_id;
end
$$;
comment on function scsql_caller.row_project() is
  'The project a row the caller inserts into a chained table belongs to when the row names none: the acting agent''s project_id. migrate --citus makes it the default of project_id of every chained table, because Citus routes a row by project_id before the insert trigger (which stamps it on one server) runs. Raises SC001 when the session acts as scsql_owner (its row must name its project) or as no agent, SC002 when the agent was revoked (like scsql_caller.agent).';

create or replace function scsql_caller.readable_projects()
returns bigint[]
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  select array_agg(p order by p) from (
    select scsql._my_project() as p
    union
    select g.project_id from scsql.project_grants g where g.agent_id = scsql._my_agent_id()
  ) s
$$;
comment on function scsql_caller.readable_projects() is
  'Projects whose public rows the acting agent may read: its own, plus those an administrator granted with grant_project_read. Raises SC001 / SC002 like scsql_caller.agent.';

create or replace function scsql_caller.project_agents()
returns bigint[]
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  select coalesce(array_agg(a.agent_id order by a.agent_id), '{}')
    from scsql.agents a where a.project_id = scsql._my_project()
$$;
comment on function scsql_caller.project_agents() is
  'The agent_ids of the acting agent''s project (revoked agents included), for the policy on scsql.agent_keys. Raises SC001 / SC002 like scsql_caller.agent.';

create or replace function scsql._require(p_ok boolean, p_what text)
returns void
language plpgsql immutable
as $$
begin
  if p_ok is not true then
    raise exception using errcode = 'SC010', message = p_what;
  end if;
end
$$;
comment on function scsql._require(boolean, text) is
  'Private. Raises SC010 invalid_argument with the given message unless the condition is true (NULL counts as false).';

create or replace function scsql._require_time(p_what text, p_value timestamptz)
returns void
language plpgsql stable
as $$
begin
  -- A stored time every client can read back: Python's datetime holds
  -- years 1 to 9999 only, in any time zone; infinity none.
  if p_value is not null
     and not p_value between timestamptz '1970-01-01 00:00:00+00' and timestamptz '9000-01-01 00:00:00+00' then
    raise exception using errcode = 'SC010', message = format('%s must be a time from 1970 to 9000, got %s', p_what, p_value);
  end if;
end
$$;
comment on function scsql._require_time(text, timestamptz) is
  'Private. Raises SC010 invalid_argument naming WHAT unless VALUE is NULL or a time from 1970 to 9000 (one every client can read back); for every time argument a function stores.';

create or replace function scsql._jsonb_depth(p_value jsonb, p_limit integer default 64)
returns integer
language sql immutable parallel safe
as $$
  -- Walks at most p_limit + 1 levels, so a value nested thousands deep
  -- costs no more than one nested just too deep.
  with recursive t(v, d) as (
    select p_value, 1
    union all
    select c.v, t.d + 1
    from t cross join lateral (
      select e.value as v from pg_catalog.jsonb_array_elements(
        case when pg_catalog.jsonb_typeof(t.v) = 'array' then t.v end) e
      union all
      select e.value from pg_catalog.jsonb_each(
        case when pg_catalog.jsonb_typeof(t.v) = 'object' then t.v end) e
    ) c
    where t.d <= p_limit
  )
  select max(d) from t
$$;
comment on function scsql._jsonb_depth(jsonb, integer) is
  'Private. How deep a JSON value nests (a scalar is 1, [1] is 2), counted up to LIMIT + 1 at most. Write paths refuse values deeper than 64 levels: every client, the verifier included, must be able to read back what is stored.';

create or replace function scsql._check_name(p_kind text, p_value text, p_pattern text, p_rule text)
returns void
language plpgsql immutable
as $$
begin
  if p_value is null or p_value !~ p_pattern then
    raise exception using
      errcode = 'SC007',
      message = format('invalid %s name %s', p_kind, coalesce(quote_literal(p_value), 'NULL')),
      hint = format('A %s name %s.', p_kind, p_rule);
  end if;
end
$$;
comment on function scsql._check_name(text, text, text, text) is
  'Private. Raises SC007 invalid_name unless the value matches the pattern; the hint states the rule.';

-- ---------------------------------------------------------------------------
-- Constraint violations: the table constraints are the limits. A write
-- function inserts and, in one form everywhere,
--
--   declare v_err scsql.violation;
--   ...
--   exception when check_violation or not_null_violation then
--     get stacked diagnostics v_err.returned_sqlstate = returned_sqlstate, v_err.schema_name = schema_name,
--       v_err.table_name = table_name, v_err.constraint_name = constraint_name, v_err.column_name = column_name, v_err.message_text = message_text;
--     perform scsql._raise_violation(v_err);
--
-- _raise_violation reports the SC code, message and hint that the
-- violated constraint's comment holds ('SCnnn: message', optionally a line
-- 'hint: ...'). sql/90_constraints.sql writes those comments, all of them.
-- ---------------------------------------------------------------------------

create or replace function scsql._map_constraint(p_table regclass, p_constraint text, p_code text,
                                                 p_message text, p_hint text default null)
returns void
language plpgsql
as $$
begin
  if not exists (select from scsql.error_codes e where e.code = p_code) then
    raise exception 'constraint % of % maps to %, which scsql.error_codes does not define', p_constraint, p_table, p_code;
  end if;
  if not exists (select from pg_catalog.pg_constraint c
                 where c.conrelid = p_table and c.conname = p_constraint and c.contype = 'c') then
    raise exception '% has no check constraint %', p_table, p_constraint;
  end if;
  if p_message is null or p_message ~ '\n' or (p_hint is not null and p_hint ~ '\n') then
    raise exception 'the message (and hint) of constraint % is one line of text', p_constraint;
  end if;
  execute format('comment on constraint %I on %s is %L', p_constraint, p_table,
                 p_code || ': ' || p_message || coalesce(E'\nhint: ' || p_hint, ''));
end
$$;
comment on function scsql._map_constraint(regclass, text, text, text, text) is
  'Private, used by sql/90_constraints.sql. Maps check constraint CONSTRAINT of TABLE to the error its violation raises: writes the comment ''SCnnn: message'' (and a second line ''hint: ...'') on the constraint, which _raise_violation reads. Raises when the code is not in scsql.error_codes or the table has no such check constraint.';

create or replace function scsql._raise_violation(p scsql.violation)
returns void
language plpgsql stable
as $$
declare
  v_rel regclass := pg_catalog.to_regclass(format('%I.%I', p.schema_name, p.table_name));
  v_note text;
  v_m text[];
begin
  -- On Citus a violation on a worker comes back to the coordinator as its
  -- message alone (Citus passes on no schema, table, constraint or column),
  -- naming the shard: table_<shard id> and constraint_<shard id>. The
  -- table, constraint and column are read from PostgreSQL's message then.
  if coalesce(p.table_name, '') = '' then
    if p.returned_sqlstate = '23514' then
      v_m := regexp_match(p.message_text, '^new row for relation "([^"]+)_([0-9]+)" violates check constraint "([^"]+)"$');
      p.table_name := v_m[1];
      p.constraint_name := regexp_replace(v_m[3], '_' || v_m[2] || '$', '');
    elsif p.returned_sqlstate = '23502' then
      v_m := regexp_match(p.message_text, '^null value in column "([^"]+)" of relation "([^"]+)_([0-9]+)" violates not-null constraint$');
      p.column_name := v_m[1];
      p.table_name := v_m[2];
    end if;
    if p.table_name is not null then
      p.schema_name := coalesce(nullif(p.schema_name, ''), 'scsql');
      v_rel := pg_catalog.to_regclass(format('%I.%I', p.schema_name, p.table_name));
    end if;
    v_m := null;
  end if;
  -- A partition's constraints carry the names of its root table's, which
  -- hold the comments (pg_partition_root is NULL for a table that is in no
  -- partition tree).
  v_rel := coalesce(pg_catalog.pg_partition_root(v_rel), v_rel);
  -- A NULL in a NOT NULL column is reported with the
  -- check constraint on that column alone: it states the column's rule.
  select pg_catalog.obj_description(c.oid, 'pg_constraint') into v_note
  from pg_catalog.pg_constraint c
  where c.conrelid = v_rel and c.contype = 'c'
    and case when p.returned_sqlstate = '23502'
             then c.conkey = (select array[a.attnum] from pg_catalog.pg_attribute a
                              where a.attrelid = v_rel and a.attname = p.column_name)
             else c.conname = p.constraint_name end
    and pg_catalog.obj_description(c.oid, 'pg_constraint') ~ '^SC[0-9]{3}: '
  order by c.conname
  limit 1;
  v_m := regexp_match(v_note, '^(SC[0-9]{3}): ([^\n]*)(?:\nhint: ([^\n]*))?$');
  -- Not mapped (v_m is NULL): not an argument's limit but an invariant the
  -- database itself keeps, re-raised as it was.
  if v_m[3] is null then
    raise exception using errcode = coalesce(v_m[1], p.returned_sqlstate), message = coalesce(v_m[2], p.message_text),
      schema = coalesce(p.schema_name, ''), table = coalesce(p.table_name, ''),
      constraint = coalesce(p.constraint_name, ''), column = coalesce(p.column_name, '');
  end if;
  raise exception using errcode = v_m[1], message = v_m[2], hint = v_m[3],
    schema = coalesce(p.schema_name, ''), table = coalesce(p.table_name, ''),
    constraint = coalesce(p.constraint_name, ''), column = coalesce(p.column_name, '');
end
$$;
comment on function scsql._raise_violation(scsql.violation) is
  'Private. Called in the check_violation / not_null_violation handler of a write function with its stacked diagnostics (RETURNED_SQLSTATE, SCHEMA_NAME, TABLE_NAME, CONSTRAINT_NAME, COLUMN_NAME, MESSAGE_TEXT) as one scsql.violation. Raises the SC code, message and hint mapped to the violated check constraint (for a NULL in a NOT NULL column: to the check constraint on that column alone) by scsql._map_constraint, keeping the schema, table, constraint and column names. A violation with no table name (on Citus, one raised on a worker, which comes back as PostgreSQL''s message naming the shard) is mapped by the table, constraint and column that message names, less the shard id. Re-raises the violation as it was when the constraint is not mapped (an invariant the database keeps, not a limit of an argument).';

create or replace function scsql._check_row(p_table regclass, p_row anyelement)
returns void
language plpgsql stable
as $$
declare
  c record;
  v_bad boolean;
  v_err scsql.violation;
begin
  -- As PostgreSQL does: NOT NULL first (here: of the columns a mapped check
  -- constraint states the rule of), then the check constraints by name.
  for c in
    select k.conname, pg_catalog.pg_get_expr(k.conbin, k.conrelid) as expr, a.attname, a.attnotnull
    from pg_catalog.pg_constraint k
    left join pg_catalog.pg_attribute a
      on a.attrelid = k.conrelid and cardinality(k.conkey) = 1 and a.attnum = k.conkey[1]
    where k.conrelid = p_table and k.contype = 'c'
      and pg_catalog.obj_description(k.oid, 'pg_constraint') ~ '^SC[0-9]{3}: '
    order by (a.attnotnull is true) desc, case when a.attnotnull then a.attnum end, k.conname
  loop
    if c.attnotnull then
      execute format('select %I is null from (select ($1).*) r', c.attname) into v_bad using p_row;
      if v_bad then
        v_err := row('23502', null, null, null, c.attname, format('null value in column "%s"', c.attname));
        exit;
      end if;
    end if;
    execute format('select (%s) is false from (select ($1).*) r', c.expr) into v_bad using p_row;
    if v_bad then
      v_err := row('23514', null, null, c.conname, null, format('violates check constraint "%s"', c.conname));
      exit;
    end if;
  end loop;
  if v_err.returned_sqlstate is not null then
    select n.nspname, t.relname into v_err.schema_name, v_err.table_name
    from pg_catalog.pg_class t join pg_catalog.pg_namespace n on n.oid = t.relnamespace
    where t.oid = p_table;
    perform scsql._raise_violation(v_err);
  end if;
end
$$;
comment on function scsql._check_row(regclass, anyelement) is
  'Private. Evaluates the mapped check constraints of TABLE (and NOT NULL of the columns they are about) on ROW, a row of that table, and raises the first violation as _raise_violation maps it. The insert trigger of a chained table calls it before it reports wrong signing fields, so a bad argument is reported as such whether or not the write was signed; PostgreSQL checks the constraints themselves only after BEFORE triggers.';

-- ---------------------------------------------------------------------------
-- Look-ups by name that raise when nothing has the name
-- ---------------------------------------------------------------------------

create or replace function scsql._project_id(p_name text)
returns bigint
language plpgsql stable
as $$
declare
  v_id bigint;
begin
  select p.project_id into v_id from scsql.projects p where p.name = p_name;
  if not found then
    raise exception using errcode = 'SC005', message = format('project "%s" does not exist', p_name),
      hint = 'Create it first: select scsql.create_project(name).';
  end if;
  return v_id;
end
$$;
comment on function scsql._project_id(text) is
  'Private. The project_id of project NAME. Raises SC005 when no project has that name.';

create or replace function scsql._agent(p_name text, p_lock boolean default false)
returns scsql.agents
language plpgsql
as $$
declare
  v_agent scsql.agents;
begin
  if p_lock then
    -- FOR NO KEY UPDATE: it does not wait for the key-share locks an agent's
    -- own open transaction holds on its row (every write it made references
    -- it), so no agent can hold off its own revocation or key rotation.
    select * into v_agent from scsql.agents a where a.name = p_name for no key update;
  else
    select * into v_agent from scsql.agents a where a.name = p_name;
  end if;
  if not found then
    raise exception using errcode = 'SC003', message = format('agent "%s" does not exist', p_name),
      hint = 'scsql.list_agents() lists the agents.';
  end if;
  return v_agent;
end
$$;
comment on function scsql._agent(text, boolean) is
  'Private. The row of agent NAME (revoked or not), locked FOR NO KEY UPDATE when LOCK is true. Raises SC003 when no agent has that name.';

create or replace function scsql._team_role(p_name text)
returns scsql.team_roles
language plpgsql stable
as $$
declare
  v_role scsql.team_roles;
begin
  select * into v_role from scsql.team_roles r where r.name = p_name;
  if not found then
    raise exception using errcode = 'SC008', message = format('team role "%s" does not exist', p_name),
      hint = format('Known team roles: %s.', (select string_agg(r.name, ', ' order by r.name) from scsql.team_roles r));
  end if;
  return v_role;
end
$$;
comment on function scsql._team_role(text) is
  'Private. The row of team role NAME. Raises SC008 when no team role has that name; the hint lists the known ones.';

-- ---------------------------------------------------------------------------
-- Public API: identity
-- ---------------------------------------------------------------------------

create or replace function scsql.whoami(
  out agent text, out project text, out team_role text, out orchestrates boolean,
  out role_name text, out key_id integer, out public_key text, out created_at timestamptz)
language sql stable
as $$
  select a.name, p.name, a.team_role, r.orchestrates, a.role_name,
         k.key_id, encode(k.public_key, 'hex'), a.created_at
  from scsql_caller.agent() a
  join scsql.projects p using (project_id)
  join scsql.team_roles r on r.name = a.team_role
  left join lateral (
    select key_id, public_key from scsql.agent_keys k
    where k.agent_id = a.agent_id order by k.key_id desc limit 1
  ) k on true
$$;
comment on function scsql.whoami() is
  'You, the acting agent: name, project, team role (and whether it orchestrates), PostgreSQL role, current key id and public key (hex), creation time. Derived from the session''s role, never from an argument.

Raises SC001 when not acting as an agent, SC002 when revoked.';

create or replace function scsql.status()
returns jsonb
language sql stable
as $$
  select jsonb_build_object(
    'server_version', current_setting('server_version'),
    'schema_version', (select count(*) from scsql.schema_migrations),
    'extensions', (
      select coalesce(jsonb_object_agg(n, e.extversion), '{}'::jsonb)
      from unnest(array['vector', 'pg_partman']) n
      left join pg_catalog.pg_extension e on e.extname = n
    ),
    'projects', (
      select coalesce(jsonb_agg(jsonb_build_object('name', p.name, 'root_path', p.root_path,
                                                    'git_remote', p.git_remote) order by p.name), '[]'::jsonb)
      from scsql.projects p
    ),
    'agents', (
      select coalesce(jsonb_agg(jsonb_build_object('name', a.name, 'project', p.name,
                                                    'team_role', a.team_role,
                                                    'revoked', a.revoked_at is not null) order by a.name), '[]'::jsonb)
      from scsql.agents a join scsql.projects p using (project_id)
    )
  )
$$;
comment on function scsql.status() is
  'Server and schema versions, extensions, and the projects and agents you may see.

The schema version is how many migrations the database has applied: they run in one sequence, migrations/sequence.txt, so the count names the schema. Extensions are vector and pg_partman, each with its version or null when absent. An agent sees its own project; administrators and the auditor see all.';

create or replace function scsql.list_agents()
returns table (
  agent text, project text, team_role text, role_name text,
  created_at timestamptz, revoked_at timestamptz, key_id integer, public_key text
)
language plpgsql stable
as $$
begin
  -- PL/pgSQL: Citus plans a SQL function's query as a parameterized one,
  -- which it refuses over these tables.
  return query
  select a.name, p.name, a.team_role, a.role_name, a.created_at, a.revoked_at,
         k.key_id, encode(k.public_key, 'hex')
  from scsql.agents a
  join scsql.projects p using (project_id)
  left join lateral (
    select k.key_id, k.public_key from scsql.agent_keys k
    where k.agent_id = a.agent_id order by k.key_id desc limit 1
  ) k on true
  order by p.name, a.name;
end
$$;
comment on function scsql.list_agents() is
  'Agents you may see: name, project, team role, PostgreSQL role, created and revoked times, current key.

An agent sees its own project''s agents; administrators and the auditor see all.';

-- ---------------------------------------------------------------------------
-- Paths: one reading for every function that takes one
-- ---------------------------------------------------------------------------

create or replace function scsql._path_parts(p_path text)
returns text[]
language plpgsql immutable strict parallel safe
as $$
-- The one lexical reading of a path, for every function that takes one:
-- the project root (create_project, set_project_root, through _root_parts),
-- the index tool's directory (index_scope), the files and prefix of
-- scsql.index, and the task queue's exclusive files (_normalize_path).
-- Split at "/", drop empty and "." parts, let ".." remove the part before
-- it. A ".." with nothing before it would climb above where the path starts
-- (the project root for a relative path, "/" for an absolute one): that gives
-- NULL, and each caller refuses it with its own error. Whether the path was
-- absolute is the caller's to see (a leading "/").
declare
  v_parts text[] := '{}';
  v_part text;
begin
  foreach v_part in array pg_catalog.string_to_array(p_path, '/') loop
    if v_part in ('', '.') then
      continue;
    elsif v_part = '..' then
      if pg_catalog.cardinality(v_parts) = 0 then
        return null;
      end if;
      v_parts := v_parts[1:pg_catalog.cardinality(v_parts) - 1];
    else
      v_parts := v_parts || v_part;
    end if;
  end loop;
  return v_parts;
end
$$;
comment on function scsql._path_parts(text) is
  'Private. The parts of a path read lexically, the one rule every path argument goes through (project roots, the index tool''s directory, scsql.index''s prefix and files, exclusive files): split at "/", empty and "." parts dropped, ".." removing the part before it. Returns NULL when a ".." climbs above the start of the path (above the project root for a relative path, above "/" for an absolute one); callers refuse that. An empty array is the start itself. Symbolic links are not seen: a path that may hold one is resolved (real path) by the caller on the machine that has the files.';

create or replace function scsql._root_parts(p_root text)
returns text[]
language sql immutable strict parallel safe
as $$
  select case when pg_catalog.left(p_root, 1) = '/' then nullif(scsql._path_parts(p_root), '{}'::text[]) end
$$;
comment on function scsql._root_parts(text) is
  'Private. The parts of a project root (see _path_parts), the one reading of projects.root_path: NULL unless it is an absolute path naming a directory below "/" ("/" itself, a relative path and a ".." climbing above "/" are no root). create_project and set_project_root refuse what gives NULL and store ''/'' || the parts joined by "/"; index_scope and exclusive file paths treat it as no root.';

-- ---------------------------------------------------------------------------
-- Administration (EXECUTE granted to scsql_admin only)
-- ---------------------------------------------------------------------------

create or replace function scsql.create_project(p_name text, p_root_path text default null, p_git_remote text default null)
returns bigint
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_id bigint;
  v_err scsql.violation;
  v_root text := '/' || array_to_string(scsql._root_parts(p_root_path), '/');
begin
  -- An absolute root is stored as set_project_root stores it; the table's
  -- constraints check the name and that the root is absolute.
  perform scsql._require(left(p_root_path, 1) is distinct from '/' or v_root is not null,
    format('root_path must be an absolute path of a directory below "/", got %L', p_root_path));
  if exists (select from scsql.projects where name = p_name) then
    raise exception using errcode = 'SC006', message = format('project "%s" already exists', p_name);
  end if;
  begin
    insert into scsql.projects (name, root_path, git_remote)
    values (p_name, coalesce(v_root, p_root_path), nullif(p_git_remote, ''))
    returning project_id into v_id;
  exception when check_violation or not_null_violation then
    get stacked diagnostics v_err.returned_sqlstate = returned_sqlstate, v_err.schema_name = schema_name,
      v_err.table_name = table_name, v_err.constraint_name = constraint_name, v_err.column_name = column_name, v_err.message_text = message_text;
    perform scsql._raise_violation(v_err);
  end;
  -- Its lock rows (scsql._project_lock) and channel key (scsql._channel), in
  -- the transaction that creates it: the first outcomes or remembers of a new
  -- project never wait on each other's insert of a lock row. Not made by
  -- triggers on projects: Citus fires a reference table's triggers on every
  -- replica, where they may not write a distributed table.
  insert into scsql.project_locks (project_id, name)
  select v_id, n.name from (values ('learnings'), ('memory_facts')) n(name);
  insert into scsql.channel_keys (project_id) values (v_id);
  return v_id;
end
$$;
comment on function scsql.create_project(text, text, text) is
  'Administrators only. Creates a project (name; optional root path and git remote), with its lock rows (scsql.project_locks) and secret channel key (scsql.channel_keys), and returns its project_id. The root is an absolute path of a directory below "/" (give its real path), stored with "." and ".." resolved like set_project_root does (_root_parts). Raises SC007 for a bad name, SC010 for a root path that is relative, names "/" or climbs above it, SC006 when it exists.';

create or replace function scsql._join_agent_group(p_role text)
returns void
language plpgsql
as $$
begin
  -- The agent inherits the group's privileges but may not SET ROLE to the
  -- group itself (PostgreSQL 16 and newer), where it would act as no agent.
  if current_setting('server_version_num')::int >= 160000 then
    execute format('grant scsql_agent to %I with inherit true, set false', p_role);
  else
    execute format('grant scsql_agent to %I', p_role);
  end if;
end
$$;
comment on function scsql._join_agent_group(text) is
  'Private. Makes an agent role a member of scsql_agent that inherits its privileges and, on PostgreSQL 16 and newer, cannot SET ROLE to it.';

-- Agent roles registered before the SET option was withheld lose it here.
select scsql._join_agent_group(a.role_name)
from scsql.agents a
where pg_catalog.to_regrole(pg_catalog.quote_ident(a.role_name)) is not null;

create or replace function scsql.register_agent(p_name text, p_project text, p_team_role text, p_public_key bytea)
returns table (agent_id bigint, role_name text, key_id integer)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_project bigint;
  v_role text;
  v_agent bigint;
  v_logins scsql.login_settings := scsql._login_settings(true);
begin
  perform scsql._check_name('agent', p_name, '^[a-z][a-z0-9_]{0,47}$',
    'is 1 to 48 lower-case letters, digits or underscores, starting with a letter');
  if p_public_key is null or length(p_public_key) <> 32 then
    raise exception using
      errcode = 'SC009',
      message = format('public key for agent "%s" must be 32 bytes (raw Ed25519), got %s',
                       p_name, coalesce(length(p_public_key)::text, 'NULL')),
      hint = 'scsql agent create generates the key pair and registers the public key.';
  end if;
  v_project := scsql._project_id(p_project);
  perform scsql._team_role(p_team_role);
  v_role := 'scsql_agent_' || p_name;
  -- to_regrole, not pg_roles: Citus plans a query that reads pg_roles beside
  -- a reference table as the caller, who may not read pg_authid.
  if exists (select from scsql.agents a where a.name = p_name)
     or pg_catalog.to_regrole(pg_catalog.quote_ident(v_role)) is not null then
    raise exception using errcode = 'SC004', message = format('agent "%s" (role %s) already exists', p_name, v_role);
  end if;

  insert into scsql.agents (project_id, name, role_name, team_role)
  values (v_project, p_name, v_role, p_team_role)
  returning agents.agent_id into v_agent;
  begin
    insert into scsql.agent_keys (agent_id, key_id, public_key) values (v_agent, 1, p_public_key);
  exception when unique_violation then
    raise exception using errcode = 'SC012', message = format('public key %s is already registered', encode(p_public_key, 'hex')),
      hint = 'Give each agent its own key pair: scsql agent create generates one.';
  end;

  -- The agent role logs in (on a shared server each agent process logs in
  -- as its own role), at most CONNECTION LIMIT times at once, and inherits
  -- the agent group's privileges. On one user's machine (one_login) the
  -- Python layer's login, scsql_app, may SET ROLE to it without inheriting.
  execute format('create role %I login connection limit %s', v_role, v_logins.agent_connection_limit);
  perform scsql._join_agent_group(v_role);
  if v_logins.one_login then
    execute format('grant %I to scsql_app', v_role);
  end if;
  -- Role comments are readable by every role of the cluster: name no project.
  execute format('comment on role %I is %L', v_role, format('scsql agent %s', p_name));

  return query select v_agent, v_role, 1;
end
$$;
comment on function scsql.register_agent(text, text, text, bytea) is
  'Administrators only. Registers agent NAME in PROJECT with a team role and its raw 32-byte Ed25519 public key: creates the login role scsql_agent_<name> (no password: scsql.set_agent_password gives it one; CONNECTION LIMIT from scsql.login_settings) in the scsql_agent group, lets scsql_app SET ROLE to it unless the database is set up for a shared server (scsql.set_login_mode), records key 1. Returns agent_id, role_name, key_id. Raises SC007 bad name, SC009 bad key, SC012 a key already registered, SC005 unknown project, SC008 unknown team role, SC004 when the agent or role exists. All or nothing.';

create or replace function scsql.revoke_agent(p_name text)
returns timestamptz
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_agent scsql.agents;
begin
  v_agent := scsql._agent(p_name, true);
  if v_agent.revoked_at is not null then
    return v_agent.revoked_at;
  end if;
  update scsql.agents set revoked_at = now() where agent_id = v_agent.agent_id
  returning revoked_at into v_agent.revoked_at;
  execute format('alter role %I nologin', v_agent.role_name);
  return v_agent.revoked_at;
end
$$;
comment on function scsql.revoke_agent(text) is
  'Administrators only. Revokes agent NAME: it can no longer log in, and every API call or table read it makes raises SC002. Its rows, role and keys stay, so its history remains verifiable. Returns the revocation time (the original one when already revoked). Raises SC003 for an unknown agent.';

create or replace function scsql.rotate_agent_key(p_name text, p_public_key bytea)
returns integer
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_agent scsql.agents;
  v_key integer;
  v_err scsql.violation;
begin
  v_agent := scsql._agent(p_name, true);
  if v_agent.revoked_at is not null then
    raise exception using errcode = 'SC002', message = format('agent "%s" is revoked; its keys cannot change', p_name);
  end if;
  select coalesce(max(key_id), 0) + 1 into v_key from scsql.agent_keys where agent_id = v_agent.agent_id;
  begin
    -- The key's length is checked by the table's constraint.
    insert into scsql.agent_keys (agent_id, key_id, public_key) values (v_agent.agent_id, v_key, p_public_key);
  exception
    when unique_violation then  -- the agent row is locked, so key_id is free: the key is not
      raise exception using errcode = 'SC012', message = format('public key %s is already registered', encode(p_public_key, 'hex')),
        hint = 'Rotate to a new key pair: scsql agent rotate-key NAME generates one.';
    when check_violation or not_null_violation then
      get stacked diagnostics v_err.returned_sqlstate = returned_sqlstate, v_err.schema_name = schema_name,
        v_err.table_name = table_name, v_err.constraint_name = constraint_name, v_err.column_name = column_name, v_err.message_text = message_text;
      perform scsql._raise_violation(v_err);
  end;
  return v_key;
end
$$;
comment on function scsql.rotate_agent_key(text, bytea) is
  'Administrators only. Registers a new Ed25519 public key for agent NAME, valid from now; rows written earlier stay verifiable with the key valid when they were written. Returns the new key_id. Raises SC003 unknown agent, SC002 revoked, SC009 bad key, SC012 a key already registered.';

-- ---------------------------------------------------------------------------
-- Logins: how agent processes log in (scsql.login_settings)
-- ---------------------------------------------------------------------------

create or replace function scsql._login_settings(p_lock boolean default false)
returns scsql.login_settings
language plpgsql
as $$
declare
  v scsql.login_settings;
begin
  -- FOR SHARE: set_login_mode updates the row, so an agent registered
  -- meanwhile is granted to scsql_app either before its revocations or not at all.
  if p_lock then
    select * into v from scsql.login_settings s where s.id = 1 for share;
  else
    select * into v from scsql.login_settings s where s.id = 1;
  end if;
  if not found then  -- the row migration 0620 made was deleted: its defaults
    v.id := 1;
    v.one_login := true;
    v.agent_connection_limit := 32;
  end if;
  return v;
end
$$;
comment on function scsql._login_settings(boolean) is
  'Private. The row of scsql.login_settings (its defaults when it is missing), locked FOR SHARE when LOCK is true, as register_agent reads it.';

create or replace function scsql._app_agent_grants()
returns table (role_name text, grantor text)
language plpgsql stable
as $$
begin
  -- to_regrole, not pg_roles: Citus plans a query that reads pg_roles beside
  -- a reference table as the caller, who may not read pg_authid. PL/pgSQL, not
  -- SQL: Citus plans no query of a SQL function called from a PL/pgSQL loop.
  return query
  select a.role_name, pg_catalog.pg_get_userbyid(m.grantor)::text
  from scsql.agents a
  join pg_catalog.pg_auth_members m
    on m.roleid = pg_catalog.to_regrole(pg_catalog.quote_ident(a.role_name))
   and m.member = pg_catalog.to_regrole('scsql_app')
  order by 1, 2;
end
$$;
comment on function scsql._app_agent_grants() is
  'Private. The grants that let scsql_app act as an agent of this database: the agent''s role and who granted it (a role can be granted by several).';

create or replace function scsql.set_login_mode(p_mode text)
returns text
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_role text;
  v_left text;
begin
  perform scsql._require(p_mode in ('per_agent', 'one_login'),
    format('mode must be per_agent or one_login, got %s', coalesce(quote_literal(p_mode), 'NULL')));
  insert into scsql.login_settings (id) values (1) on conflict do nothing;
  update scsql.login_settings set one_login = (p_mode = 'one_login'), updated_at = now() where id = 1;
  if p_mode = 'one_login' then
    for v_role in select a.role_name from scsql.agents a
                  where a.revoked_at is null and pg_catalog.to_regrole(pg_catalog.quote_ident(a.role_name)) is not null
                  order by a.role_name loop
      execute format('grant %I to scsql_app', v_role);
    end loop;
    return p_mode;
  end if;
  for v_role in select distinct g.role_name from scsql._app_agent_grants() g order by 1 loop
    execute format('revoke %I from scsql_app', v_role);  -- the owner's grants: register_agent's
  end loop;
  select string_agg(format('revoke %I from scsql_app granted by %I;', g.role_name, g.grantor), ' ')
    into v_left from scsql._app_agent_grants() g;
  if v_left is not null then
    raise exception using errcode = 'SC028',
      message = format('scsql_app may still act as agents of this database through grants scsql''s owner did not make: %s', v_left),
      hint = 'A superuser runs those statements; then call scsql.set_login_mode(''per_agent'') again.';
  end if;
  return p_mode;
end
$$;
comment on function scsql.set_login_mode(text) is
  'Administrators only. How the agent processes of this database log in: per_agent (a shared server: each agent process logs in as its own role, scsql_app may act as no agent, and no login but the owner''s and the administrators'' can act as more than one agent) or one_login (one user''s machine, the embedded server''s default: scsql_app may SET ROLE to every active agent). Revokes or grants every agent role of the database from or to scsql_app, all or nothing, and register_agent does the same for agents registered later. Returns the mode. Raises SC010 for another mode, SC028 when scsql_app keeps an agent through a grant the owner did not make (the message has the statements a superuser runs).';

create or replace function scsql.set_agent_connection_limit(p_limit integer, p_agent text default null)
returns integer
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_role text;
  v_n integer := 0;
begin
  perform scsql._require(p_limit between 1 and 10000,
    format('limit must be 1 to 10000 connections, got %s', coalesce(p_limit::text, 'NULL')));
  if p_agent is not null then
    v_role := (scsql._agent(p_agent, true)).role_name;
    execute format('alter role %I connection limit %s', v_role, p_limit);
    return 1;
  end if;
  update scsql.login_settings set agent_connection_limit = p_limit, updated_at = now() where id = 1;
  for v_role in select a.role_name from scsql.agents a
                where pg_catalog.to_regrole(pg_catalog.quote_ident(a.role_name)) is not null
                order by a.role_name loop
    execute format('alter role %I connection limit %s', v_role, p_limit);
    v_n := v_n + 1;
  end loop;
  return v_n;
end
$$;
comment on function scsql.set_agent_connection_limit(integer, text) is
  'Administrators only. How many connections an agent''s own login may hold at once (its role''s CONNECTION LIMIT; 1 to 10000). With AGENT, that agent''s; without, the limit of every agent of the database and of those registered later (default 32). An agent cannot change its own. Returns how many roles changed. Raises SC010 for a bad limit, SC003 for an unknown agent.';

create or replace function scsql._limit_agent_connections()
returns integer
language plpgsql
as $$
declare
  v_limit integer := (scsql._login_settings()).agent_connection_limit;
  v_role text;
  v_n integer := 0;
begin
  for v_role in select a.role_name from scsql.agents a order by a.role_name loop
    -- One query at a time: pg_roles beside a reference table fails on Citus.
    continue when not exists (select from pg_catalog.pg_roles r where r.rolname = v_role and r.rolconnlimit = -1);
    begin
      execute format('alter role %I connection limit %s', v_role, v_limit);
      v_n := v_n + 1;
    exception when insufficient_privilege then
      raise warning using message = format('could not limit the connections of %s: %s', v_role, sqlerrm),
        hint = 'A superuser runs: alter role ' || quote_ident(v_role) || ' connection limit ' || v_limit;
    end;
  end loop;
  return v_n;
end
$$;
comment on function scsql._limit_agent_connections() is
  'Private, run on every migrate. Gives every agent role of the database that has no CONNECTION LIMIT (agents registered before limits, roles a restore created) the default of scsql.login_settings; a role scsql''s owner may not alter is warned about. Returns how many roles changed.';

select scsql._limit_agent_connections();

create or replace function scsql.set_agent_password(p_agent text, p_verifier text)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_agent scsql.agents := scsql._agent(p_agent, true);
begin
  if v_agent.revoked_at is not null then
    raise exception using errcode = 'SC002', message = format('agent "%s" is revoked; it cannot log in', p_agent);
  end if;
  if p_verifier is null then
    execute format('alter role %I password null', v_agent.role_name);
    return;
  end if;
  -- Anything else would be taken, and stored, as a password in clear.
  if p_verifier !~ '^SCRAM-SHA-256\$[0-9]{4,7}:[A-Za-z0-9+/]+={0,2}\$[A-Za-z0-9+/]+={0,2}:[A-Za-z0-9+/]+={0,2}$' then
    raise exception using errcode = 'SC025', message = format('the password of agent "%s" must be given as a SCRAM-SHA-256 verifier', p_agent),
      hint = 'scsql agent login NAME makes one from a new password (libpq''s PQencryptPasswordConn); never send a password in clear.';
  end if;
  execute format('alter role %I password %L', v_agent.role_name, p_verifier);
end
$$;
comment on function scsql.set_agent_password(text, text) is
  'Administrators only. Sets the password of agent AGENT''s own login, given as a SCRAM-SHA-256 verifier made by the client (scsql agent login makes one), or removes it (NULL: for client certificates, or a login by a pg_hba.conf rule alone). Raises SC003 unknown agent, SC002 revoked, SC025 for anything but a verifier.';

create or replace function scsql.agent_logins()
returns table (agent text, role_name text, can_login boolean, connection_limit integer,
               other_logins text[], role_settings text[])
language plpgsql stable
as $$
declare
  a record;
  v_oid oid;
begin
  -- One catalogue query per agent: pg_roles beside a reference table fails on Citus.
  for a in select x.name, x.role_name from scsql.agents x order by x.name loop
    v_oid := pg_catalog.to_regrole(pg_catalog.quote_ident(a.role_name));
    agent := a.name;
    role_name := a.role_name;
    select r.rolcanlogin, r.rolconnlimit into can_login, connection_limit
    from pg_catalog.pg_roles r where r.oid = v_oid;
    select coalesce(array_agg(r.rolname::text order by r.rolname), '{}') into other_logins
    from pg_catalog.pg_roles r
    where v_oid is not null and r.rolcanlogin and not r.rolsuper and r.oid <> v_oid
      and pg_catalog.pg_has_role(r.oid, v_oid, 'MEMBER')
      and not pg_catalog.pg_has_role(r.oid, 'scsql_owner', 'MEMBER')
      and not pg_catalog.pg_has_role(r.oid, 'scsql_admin', 'MEMBER');
    select coalesce(array_agg(c.setting || case when s.setdatabase = 0 then '' else ' (in this database)' end
                              order by s.setdatabase, c.setting), '{}') into role_settings
    from pg_catalog.pg_db_role_setting s cross join lateral unnest(s.setconfig) c(setting)
    where s.setrole = v_oid
      and s.setdatabase in (0, (select d.oid from pg_catalog.pg_database d where d.datname = current_database()));
    return next;
  end loop;
end
$$;
comment on function scsql.agent_logins() is
  'Administrators and the auditor. How each agent of the database logs in: whether its role may log in (revoked agents may not), its CONNECTION LIMIT, the other login roles that can act as it (superusers, the owner''s and the administrators'' logins left out: scsql_app when the database has one login for every agent, nothing else on a shared server), and the settings its role gives its own sessions (ALTER ROLE ... SET, which an agent may do to itself: scsql''s client sets what it relies on when it connects, and scsql.reset_agent_settings removes them).';

create or replace function scsql.reset_agent_settings(p_agent text default null)
returns integer
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  r record;
  v_n integer := 0;
  v_left text[] := '{}';
  v_in text;
begin
  if p_agent is not null then
    perform scsql._agent(p_agent);
  end if;
  for r in select a.role_name, s.setdatabase, split_part(c.setting, '=', 1) as name
           from scsql.agents a
           join pg_catalog.pg_db_role_setting s on s.setrole = pg_catalog.to_regrole(pg_catalog.quote_ident(a.role_name))
           cross join lateral unnest(s.setconfig) c(setting)
           where (p_agent is null or a.name = p_agent)
             and s.setdatabase in (0, (select d.oid from pg_catalog.pg_database d where d.datname = current_database()))
           order by a.role_name, s.setdatabase, 3 loop
    v_in := case when r.setdatabase = 0 then '' else format(' in database %I', current_database()) end;
    begin
      execute format('alter role %I%s reset %I', r.role_name, v_in, r.name);
      v_n := v_n + 1;
    exception when insufficient_privilege then
      -- PostgreSQL lets no security-definer function change "role" (nor a
      -- parameter reserved to superusers): a superuser does.
      v_left := v_left || format('alter role %I%s reset %I;', r.role_name, v_in, r.name);
    end;
  end loop;
  if cardinality(v_left) > 0 then
    raise warning using message = format('%s setting(s) of agent roles are left: %s', cardinality(v_left), array_to_string(v_left, ' ')),
      hint = 'A superuser runs those statements; scsql''s client sets what it relies on when it connects, and SET LOCAL ROLE in every transaction overrides a role setting.';
  end if;
  return v_n;
end
$$;
comment on function scsql.reset_agent_settings(text) is
  'Administrators only. Removes the settings an agent''s role gives its own sessions (ALTER ROLE ... SET, in every database or in this one), of agent AGENT or of every agent of the database: an agent may set them on itself, and scsql.agent_logins() lists them. A setting PostgreSQL lets no security-definer function change (role) is left, with a warning naming the statement a superuser runs (scsql''s client overrides it in every transaction). Returns how many settings were removed. Raises SC003 for an unknown agent.';

create or replace function scsql.define_team_role(p_name text, p_orchestrates boolean default false, p_description text default '')
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_err scsql.violation;
begin
  perform scsql._require(p_orchestrates is not null, 'orchestrates must be true or false');
  -- The name is checked by the table's constraint.
  insert into scsql.team_roles (name, orchestrates, description)
  values (p_name, p_orchestrates, coalesce(p_description, ''))
  on conflict (name) do update set orchestrates = excluded.orchestrates, description = excluded.description;
exception when check_violation or not_null_violation then
  get stacked diagnostics v_err.returned_sqlstate = returned_sqlstate, v_err.schema_name = schema_name,
    v_err.table_name = table_name, v_err.constraint_name = constraint_name, v_err.column_name = column_name, v_err.message_text = message_text;
  perform scsql._raise_violation(v_err);
end
$$;
comment on function scsql.define_team_role(text, boolean, text) is
  'Administrators only. Adds a team role or changes an existing one (whether it orchestrates, its description). Raises SC007 for a bad name.';

create or replace function scsql.grant_project_read(p_project text, p_agent text)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_project bigint;
  v_agent bigint;
begin
  v_project := scsql._project_id(p_project);
  v_agent := (scsql._agent(p_agent)).agent_id;
  insert into scsql.project_grants (project_id, agent_id) values (v_project, v_agent)
  on conflict do nothing;
end
$$;
comment on function scsql.grant_project_read(text, text) is
  'Administrators only. Lets agent AGENT read the public rows of project PROJECT: its published knowledge (indexed files, URLs and notes, through search_global) and its public outcomes and learnings. Working memory, session summaries, archived facts and internal learnings stay within the project. Idempotent. Raises SC005 / SC003 for unknown names.';

create or replace function scsql.revoke_project_read(p_project text, p_agent text)
returns boolean
language sql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  with d as (
    delete from scsql.project_grants g
    using scsql.projects p, scsql.agents a
    where g.project_id = p.project_id and g.agent_id = a.agent_id
      and p.name = p_project and a.name = p_agent
    returning 1
  )
  select exists (select from d)
$$;
comment on function scsql.revoke_project_read(text, text) is
  'Administrators only. Withdraws a grant made by grant_project_read. Returns true when a grant was removed.';

-- ---------------------------------------------------------------------------
-- The API catalogue (what MCP tools are derived from)
-- ---------------------------------------------------------------------------

create or replace function scsql_caller.api()
returns table (
  name text, signature text, description text, returns_set boolean, return_type text,
  returns_row boolean, arg_names text[], arg_types text[], n_defaults integer
)
language sql stable
as $$
  select p.proname::text,
         p.oid::regprocedure::text,
         coalesce(pg_catalog.obj_description(p.oid, 'pg_proc'), ''),
         p.proretset,
         pg_catalog.format_type(p.prorettype, null),
         (t.typtype = 'c' or p.prorettype = 'record'::regtype),
         coalesce((select array_agg(coalesce(p.proargnames[i], '') order by i)
                     from generate_series(1, coalesce(array_length(p.proallargtypes, 1), p.pronargs)) i
                    where coalesce(p.proargmodes[i], 'i') in ('i', 'b', 'v')), '{}'),
         coalesce((select array_agg(pg_catalog.format_type(a.t, null) order by a.i)
                     from unnest(p.proargtypes::oid[]) with ordinality a(t, i)), '{}'),
         p.pronargdefaults::integer
  from pg_catalog.pg_proc p
  join pg_catalog.pg_type t on t.oid = p.prorettype
  where p.pronamespace = 'scsql'::regnamespace
    and p.prokind = 'f'
    and p.proname !~ '^_'
    and pg_catalog.has_function_privilege(p.oid, 'execute')
    -- Background work (embed_claim, index_learnings, ...) is granted to
    -- scsql_worker, which agents inherit: callable, never a tool.
    and not pg_catalog.has_function_privilege('scsql_worker', p.oid, 'execute')
  order by p.proname
$$;
comment on function scsql_caller.api() is
  'The public API functions of schema scsql the current role may execute, with argument names and types, how many trailing arguments have defaults, the return type and the function comment; functions of background work (those scsql_worker may execute) are left out. The MCP server derives one tool per row, so an agent''s tools are exactly the functions granted to scsql_agent.';
