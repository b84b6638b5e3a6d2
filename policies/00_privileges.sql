-- Privileges every subsystem builds on. Re-applied on every migrate.
--
-- Nothing in schema scsql is usable by PUBLIC. Functions are granted one by
-- one to the roles that may call them; the functions granted to scsql_agent
-- are exactly the tools an MCP client sees. Background work that agents run
-- through scsql (embedding, learning indexing, retention, maintenance) is
-- granted to scsql_worker, which scsql_agent inherits: callable, not a tool.

revoke all on schema scsql from public;
grant usage on schema scsql to scsql_agent, scsql_auditor, scsql_admin;

-- Start from nothing, so that a grant removed from these files is taken back
-- on the next migrate; the files below grant exactly what each role holds.
revoke all on all tables in schema scsql from public, scsql_agent, scsql_auditor, scsql_admin, scsql_app, scsql_worker;
revoke all on all sequences in schema scsql from public, scsql_agent, scsql_auditor, scsql_admin, scsql_app, scsql_worker;
revoke all on all functions in schema scsql from public, scsql_agent, scsql_auditor, scsql_admin, scsql_app, scsql_worker;
alter default privileges for role scsql_owner in schema scsql revoke execute on functions from public;

-- Helpers that policies and API functions evaluate as the caller.
grant execute on function
  scsql._acting_role(), scsql._me(), scsql._my_project(), scsql._my_agent_id(),
  scsql._readable_projects(), scsql._require(boolean, text),
  scsql._check_name(text, text, text, text), scsql._api()
to scsql_agent, scsql_auditor, scsql_admin;
