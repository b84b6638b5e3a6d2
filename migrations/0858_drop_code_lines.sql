-- 0858 A reference's line numbers are converted where index_code stores
-- them (scsql._code_store_references), no longer by a function of their own.

drop function if exists scsql._code_lines(jsonb);
