-- Audit: chains, sessions, tool calls, outcomes, learnings, prices,
-- checkpoints, partition settings.
--
-- Agents write only through the API functions (security definer; the chain
-- trigger stamps the author from the acting role) and read through these
-- policies. Outcomes and learnings follow their classification:
--   public        every agent of the project, and agents granted read on it
--   internal      every agent of the project (the default)
--   confidential  agents of the author's team role, or granted it (grant_confidential)
--   restricted    the author (and the auditor, who reads everything)

select scsql._secure_table(t) from unnest(array[
  'scsql.chains', 'scsql.chained_tables', 'scsql.sessions', 'scsql.tool_calls', 'scsql.outcomes',
  'scsql.learnings', 'scsql.confidential_grants', 'scsql.model_prices', 'scsql.auditor_keys',
  'scsql.checkpoints', 'scsql.checkpoint_heads', 'scsql.checkpoint_segments', 'scsql.partition_settings',
  'scsql.chain_settings', 'scsql.chain_quarantines', 'scsql.partition_retirements', 'scsql.partition_settings_log'
]::regclass[]) t;

-- Partitions, and the append-only rules on them, are re-applied here too.
select scsql._chain_protect(t::regclass) from scsql.chained_tables t(t);

select scsql._agent_read(array['scsql.chains', 'scsql.sessions', 'scsql.tool_calls']::regclass[],
                         'project_id = (select scsql_caller.project_id())');
select scsql._agent_read(array['scsql.outcomes', 'scsql.learnings']::regclass[], $using$
  project_id = any ((select scsql_caller.readable_projects())::bigint[])
  and (classification = 'public'
       or (project_id = (select scsql_caller.project_id())
           and (classification = 'internal'
                or author_id = (select scsql_caller.agent_id())
                or (classification = 'confidential' and author_id = any ((select scsql_caller.confidential_authors())::bigint[])))))
$using$);

-- What the policies evaluate as the caller.
grant execute on function scsql_caller.confidential_authors() to scsql_agent;

-- Agents: writing and reading their telemetry.
grant execute on function
  scsql.start_session(text, text, text, timestamptz, integer, bytea),
  scsql.record_tool_call(text, text, bigint, text, text, integer, integer, integer, text, text, timestamptz, integer, bytea),
  scsql.record_outcome(text, text, text, bigint, bigint, text, numeric, text, text, timestamptz, integer, bytea),
  scsql.learnings(text, text, timestamptz, integer)
to scsql_agent;
-- Background work an agent runs through scsql (learnings export): granted to
-- scsql_worker, which agents inherit; not MCP tools. Partition maintenance is
-- an administrator's: its ACCESS EXCLUSIVE locks would let an agent that holds
-- them open stall every project's writes.
grant execute on function scsql.learnings_export(bigint, integer), scsql_caller.lock_my_learnings(),
  scsql_caller.learning_entry(scsql.learnings)
  to scsql_worker;
grant execute on function scsql.cost_report(timestamptz, text), scsql.model_prices()
  to scsql_agent, scsql_auditor;

-- The auditor: verification and checkpoints.
grant execute on function
  scsql.verify_chain(bigint, bigint),
  scsql.chain_heads(),
  scsql.checkpoint_heads_now(),
  scsql.record_checkpoint(bigint, timestamptz, integer, bytea, jsonb),
  scsql.checkpoints(bigint),
  scsql._chain_fields(text),
  scsql._chain_scan_sql(text),
  scsql._chain_partitions(),
  scsql.record_quarantine(bigint, bigint, text, text),
  scsql.verify_memory()
to scsql_auditor;
grant execute on function scsql.auditor_keys(), scsql.partition_status(), scsql.partition_retirements(),
  scsql.chain_quarantines(boolean)
to scsql_auditor, scsql_admin;

-- Administrators: prices, grants, retention, the auditor's key, maintenance.
grant execute on function
  scsql.set_model_price(text, numeric, numeric, timestamptz, numeric, numeric),
  scsql.grant_confidential(text, text),
  scsql.revoke_confidential(text, text),
  scsql.set_partition_retention(text, interval, integer),
  scsql.register_auditor_key(bytea),
  scsql.set_clock_skew(interval),
  scsql.acknowledge_quarantine(bigint, text),
  scsql.maintain_partitions()
to scsql_admin;
