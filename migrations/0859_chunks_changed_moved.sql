-- 0859 scsql._chunks_changed also returns the kept chunks that moved (an
-- edit above them), which keep their postings and take their new places:
-- its result gains a column, so the old function is dropped for sql/ to
-- make the new one.

drop function if exists scsql._chunks_changed(bigint, bigint, text, jsonb);
