-- 0750 viewer: the indexes the viewer's pages read by (sql/60_viewer.sql).
--
-- A page reads one screen by keyset (never OFFSET): sessions newest first by
-- when they happened, a session's events in the order they happened, and
-- the time ranges of the cost page. Each index leads with project_id, as
-- row-level security filters an agent's reads by it (and Citus shards by it).

-- Sessions, newest first: of a project (an agent's viewer), of all (the
-- auditor's), and of one agent (where its next session begins).
create index sessions_when_idx on scsql.sessions (project_id, (coalesce(occurred_at, at)) desc, session_id desc);
create index sessions_all_when_idx on scsql.sessions ((coalesce(occurred_at, at)) desc, session_id desc);
create index sessions_author_when_idx on scsql.sessions (project_id, author_id, (coalesce(occurred_at, at)));

-- A session's events in the order they happened.
create index tool_calls_session_idx on scsql.tool_calls (project_id, session_id, (coalesce(occurred_at, at)), tool_call_id)
  where session_id is not null;
create index prompts_session_when_idx on scsql.prompts (project_id, session_id, (coalesce(occurred_at, at)), prompt_id);
create index model_calls_session_when_idx on scsql.model_calls (project_id, session_id, (coalesce(occurred_at, at)), model_call_id);
create index outcomes_session_idx on scsql.outcomes (project_id, session_id, at, outcome_id) where session_id is not null;
create index memory_changes_author_idx on scsql.memory_changes (project_id, author_id, at);

-- The cost page and the report: tool calls by when they happened.
create index tool_calls_when_idx on scsql.tool_calls (project_id, (coalesce(occurred_at, at)));

-- A session's conversation text and summary (written in one transaction).
create index kb_sources_session_idx on scsql.kb_sources (project_id, (meta ->> 'session'), created_at)
  where meta ? 'session';
