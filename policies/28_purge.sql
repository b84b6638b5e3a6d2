-- Purge (sql/28_purge.sql): agents and administrators purge through
-- scsql.purge only; agents read the purge records of their project.

select scsql._secure_table('scsql.purges'::regclass);
select scsql._agent_read(array['scsql.purges']::regclass[], 'project_id = (select scsql_caller.project_id())');

grant execute on function scsql.purge(text, bigint, text) to scsql_agent, scsql_admin;

-- The one change of a chained row: scsql.purge (running as the owner) sets
-- digested texts to NULL, which the append-only trigger allows only with a
-- purge record (scsql._purge_consents). UPDATE of the rest stays revoked.
grant update (text) on scsql.prompts to scsql_owner;
grant update (input_preview, output_preview, input_key) on scsql.tool_calls to scsql_owner;
grant update (summary, evidence) on scsql.outcomes to scsql_owner;
grant update (reason) on scsql.memory_changes to scsql_owner;

-- The auditor's verifier reads which fields are digested.
grant execute on function scsql._chain_digests(text) to scsql_auditor;
