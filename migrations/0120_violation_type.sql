-- 0120 A constraint violation's diagnostics as one value, scsql.violation:
-- a write function's check_violation / not_null_violation handler fills it
-- with GET STACKED DIAGNOSTICS and passes it to scsql._raise_violation,
-- instead of declaring six variables and passing them one by one.
--
-- sql/00_core.sql creates scsql._raise_violation(scsql.violation); the
-- version that took the six values as text arguments goes here, once.

create type scsql.violation as (
  returned_sqlstate text,
  schema_name text,
  table_name text,
  constraint_name text,
  column_name text,
  message_text text
);
comment on type scsql.violation is
  'A constraint violation as GET STACKED DIAGNOSTICS reports it (the items of the same names), which scsql._raise_violation maps to its SC code.';

drop function if exists scsql._raise_violation(text, text, text, text, text, text);
