-- Tokens of the team server (sql/80_tokens.sql). Nobody reads or writes the
-- table but through the functions: administrators make, list and revoke
-- tokens; the auditor lists them (and reads the table, as every table); an
-- agent only checks the token it acts by, through scsql_caller.use_token.

select scsql._secure_table('scsql.agent_tokens'::regclass);

grant execute on function
  scsql.create_agent_token(text, bytea, text, timestamptz, text),
  scsql.revoke_agent_token(bigint)
to scsql_admin;
grant execute on function scsql.list_agent_tokens(text) to scsql_admin, scsql_auditor;
grant execute on function scsql_caller.use_token(bytea) to scsql_agent;
