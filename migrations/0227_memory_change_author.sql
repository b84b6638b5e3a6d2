-- 0227 scsql._memory_change takes the author (p_author) a trigger on a
-- Citus worker names when the session acts as the owner; sql/ defines the
-- ten-argument form, and the nine-argument one goes.

drop function if exists scsql._memory_change(bigint, text, text, text, text, text, text, text, text);
