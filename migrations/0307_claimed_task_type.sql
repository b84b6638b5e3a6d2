-- 0307 The task a worker holds, as claim_task, claim_task_by_id,
-- complete_and_claim and my_tasks return it: one composite type instead of
-- the same twelve result columns written out four times.
--
-- sql/30_queue.sql creates the four functions again returning
-- setof scsql.claimed_task; CREATE OR REPLACE cannot change a function's
-- result type, so the versions that returned a table go here, once.

create type scsql.claimed_task as (
  task_id bigint,
  lease_token bigint,
  lease_expires_at timestamptz,
  attempt integer,
  max_attempts integer,
  team_role text,
  priority integer,
  payload jsonb,
  acceptance_criteria text,
  complexity smallint,
  exclusive_files text[],
  created_at timestamptz
);
comment on type scsql.claimed_task is
  'A task the acting agent holds: its lease_token (the task''s fence, passed to heartbeat/complete/fail/release_task), lease expiry, attempt so far and the most it may take, team role, priority, payload, acceptance criteria, complexity, exclusive files and creation time.';

drop function if exists scsql.claim_task(integer, integer);
drop function if exists scsql.claim_task_by_id(bigint, integer);
drop function if exists scsql.complete_and_claim(bigint, bigint, jsonb, integer, integer);
drop function if exists scsql.my_tasks();
