-- 0861 scsql._code_clean reads the texts index_code stores as columns of
-- each payload (sql/70_code.sql defines it with both payloads); the one
-- that took them joined and walked every value by a JSON path is dropped.

drop function if exists scsql._code_clean(jsonb);
