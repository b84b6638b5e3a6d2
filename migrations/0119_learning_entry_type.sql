-- 0119 A learning as scsql.learnings and scsql.learnings_export return it:
-- one composite type, scsql.learning_entry, made by one function
-- (scsql_caller.learning_entry), instead of the same fifteen result columns
-- and the same select list written out in both.
--
-- sql/11_audit.sql creates both functions again returning
-- setof scsql.learning_entry; CREATE OR REPLACE cannot change a function's
-- result type, so the versions that returned a table go here, once.

create type scsql.learning_entry as (
  learning_id bigint,
  kind text,
  outcome_kind text,
  created_at timestamptz,
  agent text,
  tool text,
  signal text,
  confidence numeric,
  summary text,
  evidence text,
  classification text,
  outcome_id bigint,
  tool_call_id bigint,
  session_id bigint,
  task_ref text
);
comment on type scsql.learning_entry is
  'A learning as an agent reads it: id, kind (failure or experiment), the outcome''s kind, creation time, the author''s name, tool, signal, confidence, summary, evidence, classification, and the outcome, tool call, session and task it came from.';

drop function if exists scsql.learnings(text, text, timestamptz, integer);
drop function if exists scsql.learnings_export(bigint, integer);
