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
  scsql.index_code(text, text, text, text, text, integer[], jsonb, jsonb),
  scsql.index_code_delta(text, text, text, text, integer[], integer[], jsonb, text[], jsonb, jsonb), scsql.forget_code(text[]),
  scsql.code_changes(text, jsonb), scsql.resolve_code(), scsql.rank_code()
to scsql_worker;

-- What the read tools evaluate as the caller.
grant execute on function scsql_caller.recent_edits(integer), scsql_caller.code_focus(bigint, text[]),
  scsql_caller.code_spread(bigint, bigint[], double precision[])
to scsql_agent;

-- The agents' code tools.
grant execute on function scsql.repo_map(integer, text[]) to scsql_agent;
grant execute on function scsql_caller.code_file(bigint, text), scsql_caller.file_links(scsql.code_files),
  scsql_caller.file_stem(text), scsql_caller.file_history(scsql.code_files), scsql_caller.test_command(bigint)
to scsql_agent;
grant execute on function scsql.file_card(text), scsql.project_card() to scsql_agent;
grant execute on function scsql_caller.graph_nodes(bigint, text),
  scsql_caller.graph_code_step(bigint, text[], bigint[], boolean, text[], boolean),
  scsql_caller.graph_work_step(bigint, text[], bigint[], text[], boolean, text[]),
  scsql_caller.graph_label(bigint, text, bigint, text),
  scsql_caller.graph_step(bigint, text[], bigint[], text[], text, text[], boolean),
  scsql_caller.graph_check(text, text, text[], integer, integer)
to scsql_agent;
grant execute on function scsql.graph_neighbors(text, text, text[], integer), scsql.graph_path(text, text, integer)
to scsql_agent;
-- What search evaluates as the caller: the definitions a query names, what a chunk defines.
grant execute on function scsql_caller.symbol_query(text), scsql_caller.symbol_chunk_ids(bigint[], text),
  scsql_caller.symbol_chunks(bigint[], text),
  scsql_caller.chunk_defines(bigint, text[], integer[], integer[])
to scsql_agent;
