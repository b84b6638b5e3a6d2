-- 0857 The code tables' two analyze rules (a table grown past its
-- statistics, a large pending resolution) are one function,
-- scsql._code_analyze_for, so the first one's own function is dropped.

drop function if exists scsql._code_analyze_grown();
