-- 0800 purge: the author of a prompt, a tool call or a knowledge-base chunk
-- (or an administrator) may remove its text, while the row, its hashes and
-- a proof of what was there stay (sql/28_purge.sql).
--
-- A chained row hashes and signs each purgeable text field through its
-- sha256 (the digest column <field>_sha256, filled by the chain trigger), so
-- the text can go and the row still verifies. Rows written before this
-- migration have no digest (NULL) and keep their encoding, hashes and
-- signatures; scsql._enc describes both.

alter table scsql.chained_tables add column digested_fields text[] not null default '{}';
comment on column scsql.chained_tables.digested_fields is
  'Signed text columns the row hashes and signs through their sha256 (kept in the column <field>_sha256) instead of their text, for rows whose digest column is not NULL (see scsql._enc): the text may then be purged (scsql.purge) and the row still verifies. Only grows.';

alter table scsql.prompts add column text_sha256 bytea;
alter table scsql.prompts alter column text drop not null;
alter table scsql.prompts add constraint prompts_text_kept check (text is not null or text_sha256 is not null);
comment on column scsql.prompts.text_sha256 is
  'sha256 of the text''s UTF-8 bytes, what the row hashes and signs in place of the text (NULL in rows written before scsql kept it, which hash the text itself). text is NULL only when purged (scsql.purge).';

alter table scsql.tool_calls add column input_preview_sha256 bytea;
alter table scsql.tool_calls add column output_preview_sha256 bytea;
alter table scsql.tool_calls add column input_key_sha256 bytea;
comment on column scsql.tool_calls.input_key_sha256 is
  'sha256 of input_key''s UTF-8 bytes (the command or path lessons match on), what the row hashes and signs in place of it (NULL when there is none, and in rows written before scsql kept it). input_key NULL with a digest: purged (scsql.purge).';
comment on column scsql.tool_calls.input_preview_sha256 is
  'sha256 of input_preview''s UTF-8 bytes, what the row hashes and signs in place of it (NULL when there is none, and in rows written before scsql kept it). input_preview NULL with a digest: purged (scsql.purge).';
comment on column scsql.tool_calls.output_preview_sha256 is
  'sha256 of output_preview''s UTF-8 bytes, what the row hashes and signs in place of it (NULL when there is none, and in rows written before scsql kept it). output_preview NULL with a digest: purged (scsql.purge).';

alter table scsql.kb_chunks add column purged_at timestamptz;
comment on column scsql.kb_chunks.purged_at is
  'When the chunk''s text was purged (scsql.purge): content is empty, it has no terms, postings or embedding; chunk_hash still names what it held.';

create table scsql.purges (
  project_id   bigint not null references scsql.projects,
  purge_id     bigint generated always as identity,
  target_kind  text not null,
  target_id    bigint not null,
  digests      jsonb not null,
  reason       text not null,
  purged_by    text not null,
  at           timestamptz not null,
  author_id    bigint not null,
  key_id       integer not null,
  chain_id     bigint not null,
  seq          bigint not null,
  prev_hash    bytea not null,
  row_hash     bytea not null,
  signature    bytea not null,
  primary key (project_id, purge_id),
  constraint purges_target_kind_check check (target_kind in ('prompt', 'tool_call', 'chunk')),
  constraint purges_digests_object check (jsonb_typeof(digests) = 'object'),
  constraint purges_reason_check check (char_length(reason) between 1 and 1000)
);
create index purges_target_idx on scsql.purges (project_id, target_kind, target_id);
comment on table scsql.purges is
  'One row per purge (scsql.purge): which row (target_kind prompt, tool_call or chunk, and its id), the sha256 (hex) of each text removed, by field, why, and who purged it (the agent''s name, or the administrator''s role). Chained unsigned in the chain of the purged row''s author (written by the database, like scsql.memory_changes) and append-only.';
