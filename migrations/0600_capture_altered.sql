-- 0600 capture: a captured row says how its text was made storable.
--
-- Capture never refuses a real event (sql/14_capture.sql, scsql.storable):
-- text PostgreSQL cannot hold (a NUL, a lone UTF-16 surrogate) is replaced,
-- an oversize value is clipped after redaction and keeps its length and
-- sha256, and an event the database refuses whatever is done to it is
-- stored as a stub naming the refusal. Each of these is recorded in the
-- row's signed "altered" object, field by field:
--   {"input_preview": {"replaced": {"nul": 1, "surrogate": 2},
--                      "clipped": true, "bytes": 10485760, "sha256": "..."},
--    "stub": {"code": "SC010", "message": "..."}}
-- It is an appended signed field (rows written before keep their signatures).
--
-- An Edit of a file another agent's task owns, made through Bash, is found
-- after the fact and recorded as an outcome of kind violation.

alter table scsql.sessions add column altered jsonb
  constraint sessions_altered_object check (jsonb_typeof(altered) = 'object');
alter table scsql.tool_calls add column altered jsonb
  constraint tool_calls_altered_object check (jsonb_typeof(altered) = 'object');
alter table scsql.prompts add column altered jsonb
  constraint prompts_altered_object check (jsonb_typeof(altered) = 'object');

comment on column scsql.tool_calls.altered is
  'How the row''s text was made storable, by field: replaced (counts of NUL and lone surrogates replaced by U+FFFD), clipped (with the original''s bytes and sha256), and stub (the refusal''s code and message when only a stub could be stored). NULL: stored as given.';
comment on column scsql.prompts.altered is 'How the prompt''s text was made storable (see scsql.tool_calls.altered).';
comment on column scsql.sessions.altered is 'How the session''s text fields were made storable (see scsql.tool_calls.altered).';

alter table scsql.outcomes drop constraint outcomes_kind_check;
alter table scsql.outcomes add constraint outcomes_kind_check
  check (kind in ('shipped', 'accepted', 'rejected', 'failed', 'insufficient', 'errored', 'reverted', 'violation'));

-- The capture writers take the altered object (sql/14_capture.sql defines them anew).
drop function if exists scsql.open_session(text, text, text, text, text, text, text, text, timestamptz, timestamptz, integer, bytea);
drop function if exists scsql.record_prompt(text, bigint, boolean, timestamptz, text, timestamptz, integer, bytea);
drop function if exists scsql.capture_tool_call(text, text, bigint, text, text, integer, integer, integer, text, text, text, jsonb,
                                                boolean, boolean, text, timestamptz, text, timestamptz, integer, bytea);
