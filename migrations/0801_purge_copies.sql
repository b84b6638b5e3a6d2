-- 0801 purge copies: an outcome's summary and evidence are purgeable like a
-- tool call's previews (the hooks' outcome of a failed call quotes them), and
-- so are the texts of the learning derived from it (sql/28_purge.sql).
--
-- Outcomes hash and sign summary and evidence through their sha256 (digest
-- columns filled by the chain trigger, see scsql._enc, DIGESTED FIELDS);
-- outcomes written before keep NULL digests, their encoding and their
-- signatures. Learnings are not chained: they keep the sha256 of their texts
-- beside them (filled when written), the proof of what a purge removed.

alter table scsql.outcomes add column summary_sha256 bytea;
alter table scsql.outcomes add column evidence_sha256 bytea;
alter table scsql.outcomes alter column summary drop not null;
alter table scsql.outcomes add constraint outcomes_summary_kept check (summary is not null or summary_sha256 is not null);
comment on column scsql.outcomes.summary_sha256 is
  'sha256 of the summary''s UTF-8 bytes, what the row hashes and signs in place of the summary (NULL in rows written before scsql kept it, which hash the summary itself). summary is NULL only when purged (scsql.purge).';
comment on column scsql.outcomes.evidence_sha256 is
  'sha256 of evidence''s UTF-8 bytes, what the row hashes and signs in place of it (NULL when there is none, and in rows written before scsql kept it). evidence NULL with a digest: purged (scsql.purge).';

alter table scsql.learnings add column summary_sha256 bytea;
alter table scsql.learnings add column evidence_sha256 bytea;
alter table scsql.learnings add column input_key_sha256 bytea;
alter table scsql.learnings alter column summary drop not null;
alter table scsql.learnings add constraint learnings_summary_kept check (summary is not null or summary_sha256 is not null);
comment on column scsql.learnings.summary_sha256 is
  'sha256 of the summary''s UTF-8 bytes (filled when the learning is written; for one written before scsql kept it, when it is purged). summary is NULL only when purged (scsql.purge).';
comment on column scsql.learnings.evidence_sha256 is
  'sha256 of evidence''s UTF-8 bytes (NULL when there is none). evidence NULL with a digest: purged (scsql.purge).';
comment on column scsql.learnings.input_key_sha256 is
  'sha256 of input_key''s UTF-8 bytes (NULL when there is none). input_key NULL with a digest: purged (scsql.purge); a rule of the learning still matches calls by it.';

alter table scsql.purges drop constraint purges_target_kind_check;
alter table scsql.purges add constraint purges_target_kind_check
  check (target_kind in ('prompt', 'tool_call', 'chunk', 'outcome', 'learning'));
comment on table scsql.purges is
  'One row per purge (scsql.purge): which row (target_kind prompt, tool_call, chunk, outcome or learning, and its id), the sha256 (hex) of each text removed, by field, why, and who purged it (the agent''s name, or the administrator''s role). Chained unsigned in the chain of the purged row''s author (written by the database, like scsql.memory_changes) and append-only.';
