-- 0741 A knowledge-base source carries the time what it holds happened
-- (a session summary's session, a part of a conversation), not only when it
-- was indexed: a summary imported today for a session of last week is dated
-- last week.

alter table scsql.kb_sources add column occurred_at timestamptz;
comment on column scsql.kb_sources.occurred_at is
  'When what the source holds happened (the session of a summary or of a conversation part), when that is not when it was indexed.';

-- summarize_session and index_text take that time (sql/24_context.sql and sql/21_knowledge.sql make them again).
drop function if exists scsql.summarize_session(jsonb);
drop function if exists scsql.index_text(text, text, text, text, text, jsonb, jsonb);
