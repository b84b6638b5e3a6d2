-- 0222 The uses of search and pack results, recorded when their transaction
-- commits (on Citus).
--
-- search and pack record the use of what they return (last_used_at and
-- use_count of the facts and sources, sql/22_lifecycle.sql). On Citus that
-- UPDATE runs as the owner on the project's shards, and Citus then refuses
-- the caller's own reads of any co-located shard in the same transaction
-- ("modified in this transaction by a different user"): a statement that
-- joins search's results with scsql.kb_chunks failed. There the uses wait
-- in this table, on the coordinator only (migrate --citus leaves it a local
-- table: scsql.core.citus.LOCAL_TABLES), and a deferred trigger records
-- them at commit, after every read of the transaction.

create table scsql.kb_use_pending (
  project_id bigint not null,
  pending_id bigint generated always as identity,
  paths      text[] not null,
  primary key (project_id, pending_id)
);
comment on table scsql.kb_use_pending is
  'Uses of search and pack results waiting for their transaction to commit (on Citus only), recorded then by scsql._apply_pending_use and deleted; empty between transactions.';
