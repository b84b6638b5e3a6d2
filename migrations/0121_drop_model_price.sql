-- 0121 capture_tool_call reads the price of a call's model itself, before
-- its INSERT (a statement calling a SQL function that reads a table with
-- parameters cannot be planned on Citus); scsql._model_price is no longer
-- used.

drop function if exists scsql._model_price(text, timestamptz);
