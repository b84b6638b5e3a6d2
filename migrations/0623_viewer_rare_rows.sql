-- 0623 viewer: the rare rows its audit and health pages count, found by
-- index instead of by reading every row.
--
-- capture_counts counts the events stored altered (a stub, replaced or
-- clipped text); viewer_redactions counts the secrets redaction replaced.
-- Both are few among many rows: partial indexes hold only them, under the
-- very conditions those functions test (sql/14_capture.sql, sql/60_viewer.sql).

create index tool_calls_altered_idx on scsql.tool_calls (project_id) where altered is not null;
create index prompts_altered_idx on scsql.prompts (project_id) where altered is not null;
create index sessions_altered_idx on scsql.sessions (project_id) where altered is not null;

create index tool_calls_redacted_idx on scsql.tool_calls (project_id, (coalesce(occurred_at, at)))
  where (input_preview like '%[REDACTED:%' or output_preview like '%[REDACTED:%');
create index prompts_redacted_idx on scsql.prompts (project_id, (coalesce(occurred_at, at)))
  where text like '%[REDACTED:%';
create index outcomes_redacted_idx on scsql.outcomes (project_id, at)
  where (summary like '%[REDACTED:%' or evidence like '%[REDACTED:%');
create index kb_chunks_redacted_idx on scsql.kb_chunks (project_id, created_at)
  where content like '%[REDACTED:%';
