-- 0305 claim_task claims and returns at once; claiming one named task is
-- scsql.claim_task_by_id, and waiting for work is the procedure
-- scsql.wait_for_task (it commits between polls) or LISTEN in the client.
--
-- sql/30_queue.sql creates the new signatures; the old one, which took
-- p_wait_seconds and p_task, goes here so that it is no overload of the new.

drop function if exists scsql.claim_task(integer, integer, numeric, bigint);
