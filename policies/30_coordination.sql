-- Coordination: the task queue, its archive and the exclusive files.
--
-- Agents change these tables only through the API functions (security
-- definer, fenced by lease tokens). They may read their own project's rows.

select scsql._secure_table(t) from unnest(array[
  'scsql.tasks', 'scsql.tasks_archive', 'scsql.task_files'
]::regclass[]) t;

select scsql._agent_read(array['scsql.tasks', 'scsql.tasks_archive', 'scsql.task_files']::regclass[],
                         'project_id = (select scsql_caller.project_id())');

grant execute on function
  scsql_caller.my_channel(text),
  scsql.enqueue_task(text, jsonb, integer, text[], text, integer, timestamptz, integer),
  scsql.claim_task(integer, integer),
  scsql.claim_task_by_id(bigint, integer),
  scsql.heartbeat_task(bigint, bigint, integer),
  scsql.complete_task(bigint, bigint, jsonb),
  scsql.complete_and_claim(bigint, bigint, jsonb, integer, integer),
  scsql.fail_task(bigint, bigint, text, boolean),
  scsql.release_task(bigint, bigint, boolean),
  scsql.cancel_task(bigint, text),
  scsql.queue_stats(),
  scsql.claimable_for_me(),
  scsql.my_tasks(),
  scsql.queue_maintenance(integer)
to scsql_agent;
-- 00_privileges.sql revokes all functions from PUBLIC, which are not procedures.
revoke all on procedure scsql.wait_for_task(numeric, bigint) from public;
grant execute on procedure scsql.wait_for_task(numeric, bigint) to scsql_agent;
grant execute on function scsql.queue_maintenance(integer) to scsql_admin;

-- The broadcast channel. Agents read their own project's messages and
-- acknowledgements; they write only through broadcast and ack_message.
select scsql._secure_table(t) from unnest(array[
  'scsql.coordination_settings', 'scsql.broadcast_senders', 'scsql.messages', 'scsql.message_acks'
]::regclass[]) t;

select scsql._agent_read(array['scsql.messages', 'scsql.message_acks', 'scsql.coordination_settings']::regclass[],
                         'project_id = (select scsql_caller.project_id())');

grant execute on function
  scsql.broadcast(text, text, text, jsonb, bigint, timestamptz, integer, bytea),
  scsql.replay_messages(integer),
  scsql.ack_message(bigint),
  scsql.explain_message(bigint)
to scsql_agent;
grant execute on function scsql.set_broadcast_limit(text, integer, text) to scsql_admin;
