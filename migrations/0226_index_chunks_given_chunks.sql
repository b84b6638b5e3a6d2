-- 0226 scsql._index_chunks takes chunks already made (p_chunks), so that
-- forgetting text can store a neighbouring chunk again without it in its
-- context (scsql._forget_in_context). The six-argument form goes; sql/
-- defines the seven-argument one.

drop function if exists scsql._index_chunks(bigint, bigint, text, text, jsonb, boolean);
