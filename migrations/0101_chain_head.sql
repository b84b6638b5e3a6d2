-- 0101 chain head: the head row also keeps the hash before the head, so the
-- chain trigger can advance the head and learn the previous hash in one
-- UPDATE ... RETURNING (one row version per append instead of a lock and an
-- update).
alter table scsql.chains add column prev_head_hash bytea;
comment on column scsql.chains.prev_head_hash is 'row_hash of the row before the head (NULL before the first append); set by the same UPDATE that advances the head.';

-- Each append rewrites the head row. A low fillfactor makes heap pruning keep
-- the chain of its dead versions short, so finding the head stays cheap for
-- an agent that appends thousands of rows between vacuums.
alter table scsql.chains set (fillfactor = 10);
