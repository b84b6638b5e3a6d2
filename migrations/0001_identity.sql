-- 0001 identity: error catalogue, team roles, projects, agents and their keys.
--
-- Distribution note: projects, agents, agent_keys, project_grants, team_roles
-- and error_codes are small and read everywhere; on Citus they are reference
-- tables. Every other table carries project_id in every key.

create table scsql.error_codes (
  code      text primary key check (code ~ '^[0-9A-Z]{5}$'),
  name      text not null unique check (name ~ '^[a-z][a-z0-9_]*$'),
  raised_by text not null check (raised_by in ('database', 'client')),
  meaning   text not null
);
comment on table scsql.error_codes is
  'Every SQLSTATE scsql raises, with a stable name and its meaning. psql users, the CLI and MCP clients see the same code and name.';

create table scsql.team_roles (
  name         text primary key check (name ~ '^[a-z][a-z0-9_]{0,31}$'),
  orchestrates boolean not null default false,
  description  text not null default ''
);
comment on table scsql.team_roles is
  'Team roles an agent can hold (orchestrator, developer, qa, ...). orchestrates marks roles that may assign work.';

insert into scsql.team_roles (name, orchestrates, description) values
  ('orchestrator', true,  'plans work, enqueues and assigns tasks, reviews results'),
  ('developer',    false, 'implements tasks'),
  ('qa',           false, 'tests and verifies delivered work'),
  ('reviewer',     false, 'reviews changes'),
  ('researcher',   false, 'investigates questions and reports findings');

create table scsql.projects (
  project_id bigint generated always as identity primary key,
  name       text not null unique check (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
  root_path  text check (root_path is null or root_path like '/%'),
  git_remote text,
  created_at timestamptz not null default now()
);
comment on table scsql.projects is 'A project: one code base that a team of agents works on. Every other row belongs to one project.';

create table scsql.agents (
  agent_id   bigint generated always as identity primary key,
  project_id bigint not null references scsql.projects,
  name       text not null unique check (name ~ '^[a-z][a-z0-9_]{0,47}$'),
  role_name  text not null unique,
  team_role  text not null references scsql.team_roles,
  created_at timestamptz not null default now(),
  revoked_at timestamptz
);
create index agents_project_idx on scsql.agents (project_id);
comment on table scsql.agents is
  'One row per agent. Each agent is the PostgreSQL role role_name (scsql_agent_<name>); its identity inside the database is current_user, never an argument.';

create table scsql.agent_keys (
  agent_id   bigint not null references scsql.agents,
  key_id     integer not null check (key_id > 0),
  public_key bytea not null unique check (length(public_key) = 32),
  valid_from timestamptz not null default clock_timestamp(),
  primary key (agent_id, key_id)
);
comment on table scsql.agent_keys is
  'Ed25519 public keys of agents. A key is valid from valid_from until the valid_from of the agent''s next key; old rows stay verifiable with the key valid when they were written.';

create table scsql.project_grants (
  project_id bigint not null references scsql.projects,
  agent_id   bigint not null references scsql.agents,
  granted_at timestamptz not null default now(),
  granted_by text not null default session_user,
  primary key (project_id, agent_id)
);
comment on table scsql.project_grants is
  'Read access for an agent to another project''s public rows (search_global, public outcomes).';
