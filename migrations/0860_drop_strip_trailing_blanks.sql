-- 0860 scsql._normalize strips the trailing blanks of each line itself
-- (each of its steps only where it changes something); the function that
-- did it alone is no longer called.

drop function if exists scsql._strip_trailing_blanks(text);
