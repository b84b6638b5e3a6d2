-- Privileges every subsystem builds on. Re-applied on every migrate.
--
-- Nothing in schemas scsql and scsql_caller is usable by PUBLIC. Functions
-- are granted one by one to the roles that may call them; the public
-- functions of schema scsql granted to scsql_agent are exactly the tools an
-- MCP client sees. Background work that agents run through scsql
-- (embedding, learning indexing, retention, maintenance) is granted to
-- scsql_worker, which scsql_agent inherits: callable, not a tool.

revoke all on schema scsql, scsql_caller from public;
grant usage on schema scsql, scsql_caller to scsql_agent, scsql_auditor, scsql_admin;

-- Start from nothing, so that a grant removed from these files is taken back
-- on the next migrate; the files below grant exactly what each role holds.
revoke all on all tables in schema scsql from public, scsql_agent, scsql_auditor, scsql_admin, scsql_app, scsql_worker;
revoke all on all sequences in schema scsql from public, scsql_agent, scsql_auditor, scsql_admin, scsql_app, scsql_worker;
revoke all on all functions in schema scsql, scsql_caller from public, scsql_agent, scsql_auditor, scsql_admin, scsql_app, scsql_worker;
alter default privileges for role scsql_owner in schema scsql, scsql_caller revoke execute on functions from public;

-- A function whose name starts with _ is private: only the owner, and so
-- the security-definer functions, execute it (test_catalog.py checks that no
-- agent can). What policies and functions running as the caller need has a
-- public name in schema scsql_caller, which holds no MCP tools.
grant execute on function scsql_caller.api() to scsql_agent, scsql_auditor, scsql_admin;
-- The rules the client applies as the database does (sql/01_rules.sql).
grant execute on function
  scsql_caller.rules(), scsql_caller.redaction_prefilter(), scsql_caller.query_max_chars(),
  scsql_caller.index_max_bytes(), scsql_caller.chunk_chars(), scsql_caller.confidence_levels(),
  scsql_caller.relevance_floor()
to scsql_agent, scsql_auditor, scsql_admin;
grant execute on function
  scsql_caller.agent(), scsql_caller.project_id(), scsql_caller.agent_id(), scsql_caller.readable_projects(),
  scsql_caller.project_agents()
to scsql_agent;
-- The default of project_id of chained tables on Citus (scsql.core.citus).
grant execute on function scsql_caller.row_project() to scsql_agent;
-- Whether the database is a Citus cluster: filtered BM25 and the bulk
-- path's callers ask it as the agent.
grant execute on function scsql_caller.citus() to scsql_agent;

-- What redaction replaces (sql/05_redaction.sql), for people at psql. Not
-- granted to agents, so it is no MCP tool; the redaction functions
-- themselves are private.
grant execute on function scsql.redaction_kinds() to scsql_admin, scsql_auditor;
-- Redacting a text or JSON value as the write paths do, for clients that sign
-- what they store (the database refuses signed text holding a secret).
-- Granted to scsql_worker, which agents inherit: callable, not an MCP tool.
grant execute on function scsql.redact(text), scsql.redact_jsonb(jsonb) to scsql_worker, scsql_auditor, scsql_admin;
