-- 0207 memory history: every change to working memory and the knowledge base
-- as an append-only chained row (scsql.memory_changes, made chained by
-- sql/26_history.sql), the values facts had before they were superseded
-- (scsql.fact_versions), and the conflicts remember found between facts
-- (scsql.fact_conflicts). remember gained an output column (conflicts_with):
-- sql/22_facts.sql creates it again.

create table scsql.memory_changes (
  project_id bigint not null references scsql.projects,
  change_id  bigint generated always as identity,
  op         text not null,
  kind       text not null,
  target     text not null,
  chunk_hash text,
  old_hash   text,
  new_hash   text,
  reason     text,
  related    text,
  at         timestamptz not null,
  author_id  bigint not null,
  key_id     integer not null,
  chain_id   bigint not null,
  seq        bigint not null,
  prev_hash  bytea not null,
  row_hash   bytea not null,
  signature  bytea not null,
  primary key (project_id, change_id)
);
create index memory_changes_target_idx on scsql.memory_changes (project_id, target, change_id);
create index memory_changes_chunk_idx on scsql.memory_changes (project_id, chunk_hash) where chunk_hash is not null;
comment on table scsql.memory_changes is
  'Every change to working memory and the knowledge base (remember, supersede, refresh, forget, archive, conflict, resolve, index, forget_source, forget_chunk, summary): which fact or source, the old and new content hash (sha256 hex of the stored, redacted text), the reason, stamped with the acting agent. Chained (unsigned: written by the database inside the memory functions) and append-only.';

create table scsql.fact_versions (
  project_id    bigint not null references scsql.projects,
  version_id    bigint generated always as identity,
  key           text not null,
  value         text not null,
  value_hash    text not null,
  importance    smallint not null,
  created_at    timestamptz not null,
  created_by    bigint not null,
  superseded_at timestamptz not null default now(),
  superseded_by bigint not null,
  reason        text not null,
  primary key (project_id, version_id)
);
create index fact_versions_key_idx on scsql.fact_versions (project_id, key, version_id);
comment on table scsql.fact_versions is
  'Values facts held before they were superseded (a newer value for the key, or a conflict settled against them): the fact''s history, never overwritten.';

create table scsql.fact_conflicts (
  project_id  bigint not null references scsql.projects,
  conflict_id bigint generated always as identity,
  key         text not null,
  value_hash  text not null,
  other_key   text not null,
  other_hash  text not null,
  detected_at timestamptz not null default now(),
  detected_by bigint not null,
  resolved_at timestamptz,
  resolved_by bigint,
  resolution  text check (resolution in ('this', 'others', 'both')),
  note        text,
  primary key (project_id, conflict_id)
);
create index fact_conflicts_open_idx on scsql.fact_conflicts (project_id, conflict_id) where resolved_at is null;
comment on table scsql.fact_conflicts is
  'Pairs of facts remember found to make different claims about one subject (key: the newer fact, other_key: the one it conflicts with), open until scsql.resolve_conflict settles them.';

-- The terms remember compares facts by (scsql._fact_terms of key and value),
-- kept with each fact so a remember compares arrays, not texts; NULL in facts
-- remembered before (remember computes them then).
alter table scsql.memory_facts add column key_terms text[], add column value_terms text[];

drop function if exists scsql.remember(text, text, integer);
