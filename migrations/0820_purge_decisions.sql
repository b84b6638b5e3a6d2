-- 0820 purge decisions: a decision a session summary took from a prompt
-- (summarize_session's decisions) is a copy of the prompt's text, and so is
-- the reason of the memory change that recorded it. scsql.purge removes both
-- (sql/28_purge.sql).
--
-- Memory changes hash their reason through its sha256 (a digest column
-- filled by the chain trigger, see scsql._enc, DIGESTED FIELDS); changes
-- written before keep a NULL digest, their encoding and their hashes. A
-- purged decision keeps its row, with "[purged]" for title and rationale.

alter table scsql.memory_changes add column reason_sha256 bytea;
comment on column scsql.memory_changes.reason_sha256 is
  'sha256 of the reason''s UTF-8 bytes, what the row hashes in place of the reason (NULL when there is none, and in rows written before scsql kept it, which hash the reason itself). reason NULL with a digest: purged (scsql.purge).';

alter table scsql.decisions add column purged_at timestamptz;
comment on column scsql.decisions.purged_at is
  'When scsql.purge removed the decision''s title and rationale (each is "[purged]" since; scsql.purges holds the sha256 of what they were); NULL for a decision never purged.';

alter table scsql.purges drop constraint purges_target_kind_check;
alter table scsql.purges add constraint purges_target_kind_check
  check (target_kind in ('prompt', 'tool_call', 'chunk', 'outcome', 'learning', 'decision', 'memory_change'));
