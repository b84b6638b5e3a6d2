-- 0111 checkpoint segments: checkpoint format 3 (sql/13_checkpoints.sql).
--
-- Each head a checkpoint signs also names the chain's agent and the seq
-- (from_seq) after which the checkpoint describes the chain's rows as
-- segments: runs of consecutive rows that lie in one table partition, each
-- with the row_hash of its last row and the partition it lies in. Retention
-- drops only rows whose segments a checkpoint signed, so verification knows
-- which missing rows were retired (their partition is gone) and still links
-- the rows kept around them to signed hashes.
alter table scsql.checkpoint_heads
  add column agent_id bigint,
  add column from_seq bigint check (from_seq >= 0);
comment on column scsql.checkpoint_heads.agent_id is 'The chain''s agent, as the auditor signed it (checkpoint format 3; NULL in earlier formats).';
comment on column scsql.checkpoint_heads.from_seq is 'The checkpoint''s segments of this chain cover the rows after this seq up to the head (format 3; NULL in earlier formats).';
create index checkpoint_heads_chain_idx on scsql.checkpoint_heads (chain_id, seq);

create table scsql.checkpoint_segments (
  project_id    bigint not null,
  checkpoint_id bigint not null,
  chain_id      bigint not null,
  first_seq     bigint not null check (first_seq >= 1),
  last_seq      bigint not null,
  row_hash      bytea not null check (length(row_hash) = 32),
  part          text not null check (char_length(part) between 1 and 300),
  primary key (project_id, checkpoint_id, chain_id, last_seq),
  foreign key (project_id, checkpoint_id) references scsql.checkpoints,
  check (last_seq >= first_seq)
);
create index checkpoint_segments_part_idx on scsql.checkpoint_segments (part, chain_id, last_seq);
create index checkpoint_segments_chain_idx on scsql.checkpoint_segments (chain_id, last_seq);
comment on table scsql.checkpoint_segments is
  'Segments a checkpoint signed: rows first_seq..last_seq of a chain lie in partition PART (see scsql._chain_partitions) and the last one has row_hash. Retention drops a partition only when segments cover every row in it.';

comment on table scsql.chains is
  'One hash chain per (project, agent), spanning every chained table. head_seq/head_hash: the newest row. Verification checks every row still present; rows may be missing only where checkpoint segments place them in a partition retention dropped (horizon_seq/horizon_hash: see their comment).';
comment on column scsql.chains.horizon_seq is
  'Set by retention of earlier versions: rows up to this seq may have been retired without segments. Trusted only when (horizon_seq, horizon_hash) is the head of a checkpoint; 0 when retention never ran before checkpoint format 3.';
