-- 0855 the broadcast verbs carry their noun, as the queue's do (enqueue_task,
-- claim_task, complete_task): explain is explain_message (EXPLAIN is SQL's),
-- ack is ack_message, replay is replay_messages. sql/31_broadcast.sql
-- defines the new names and policies/30_coordination.sql grants them; the
-- old names are dropped here, once, with their grants.

drop function if exists scsql.explain(bigint);
drop function if exists scsql.ack(bigint);
drop function if exists scsql.replay(integer);
