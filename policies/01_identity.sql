-- Identity: projects, agents, keys, grants, team roles, the error catalogue
-- and the migrations ledger.

select scsql._secure_table(t) from unnest(array[
  'scsql.schema_migrations', 'scsql.applied_definitions', 'scsql.error_codes', 'scsql.chain_break_kinds',
  'scsql.team_roles', 'scsql.projects',
  'scsql.agents', 'scsql.agent_keys', 'scsql.project_grants', 'scsql.login_settings'
]::regclass[]) t;

-- Everyone who may use scsql reads the catalogue tables.
grant select on scsql.schema_migrations, scsql.error_codes, scsql.chain_break_kinds, scsql.team_roles
  to scsql_agent, scsql_admin;
create policy everyone_read on scsql.schema_migrations for select to scsql_agent, scsql_admin using (true);
create policy everyone_read on scsql.error_codes for select to scsql_agent, scsql_admin using (true);
create policy everyone_read on scsql.chain_break_kinds for select to scsql_agent, scsql_admin using (true);
create policy everyone_read on scsql.team_roles for select to scsql_agent, scsql_admin using (true);

-- Agents see their own project (and projects granted to them), their
-- project's agents and keys, and their own grants. Administrators read all
-- of it; they change it only through the administration functions.
grant select on scsql.projects, scsql.agents, scsql.agent_keys, scsql.project_grants
  to scsql_agent, scsql_admin;
create policy agent_read on scsql.projects for select to scsql_agent
  using (project_id = any ((select scsql_caller.readable_projects())::bigint[]));
create policy agent_read on scsql.agents for select to scsql_agent
  using (project_id = (select scsql_caller.project_id()));
create policy agent_read on scsql.agent_keys for select to scsql_agent
  using (agent_id = any ((select scsql_caller.project_agents())::bigint[]));
create policy agent_read on scsql.project_grants for select to scsql_agent
  using (agent_id = (select scsql_caller.agent_id()));
create policy admin_read on scsql.projects for select to scsql_admin using (true);
create policy admin_read on scsql.agents for select to scsql_admin using (true);
create policy admin_read on scsql.agent_keys for select to scsql_admin using (true);
create policy admin_read on scsql.project_grants for select to scsql_admin using (true);

-- How agent processes log in: administrators read it; they change it only
-- through set_login_mode and set_agent_connection_limit. Agents do not read it.
grant select on scsql.login_settings to scsql_admin;
create policy admin_read on scsql.login_settings for select to scsql_admin using (true);



grant execute on function scsql.whoami() to scsql_agent;
grant execute on function scsql.status(), scsql.list_agents()
  to scsql_agent, scsql_auditor, scsql_admin;
grant execute on function
  scsql.create_project(text, text, text),
  scsql.register_agent(text, text, text, bytea),
  scsql.revoke_agent(text),
  scsql.rotate_agent_key(text, bytea),
  scsql.define_team_role(text, boolean, text),
  scsql.grant_project_read(text, text),
  scsql.revoke_project_read(text, text),
  scsql.set_login_mode(text),
  scsql.set_agent_connection_limit(integer, text),
  scsql.set_agent_password(text, text),
  scsql.reset_agent_settings(text)
to scsql_admin;
grant execute on function scsql.agent_logins() to scsql_admin, scsql_auditor;
