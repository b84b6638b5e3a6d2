-- Code knowledge (sql/70_code.sql): the symbol graph. Agents write only
-- through the functions (security definer) and read their own project's
-- files, definitions, references and links; the read tools run as the
-- caller under these policies.

select scsql._secure_table(t) from unnest(array[
  'scsql.code_files', 'scsql.code_definitions', 'scsql.code_references', 'scsql.code_links', 'scsql.code_state'
]::regclass[]) t;

select scsql._agent_read(array['scsql.code_files', 'scsql.code_definitions', 'scsql.code_references',
                               'scsql.code_links', 'scsql.code_state']::regclass[],
                         'project_id = (select scsql_caller.project_id())');

-- Writing the graph: the index tool and the hook server, as the agent.
-- Granted to scsql_worker, which agents inherit: callable, not MCP tools.
grant execute on function
  scsql.index_code(text, text, text, text, text, integer[], jsonb, jsonb), scsql.forget_code(text[]),
  scsql.code_changes(text, jsonb), scsql.resolve_code(), scsql.rank_code()
to scsql_worker;
