-- 0842 remember reads the facts in memory and the capacity with its other
-- reads and passes them to scsql._archive_beyond_capacity, which takes them
-- as arguments: its one-argument form is dropped.

drop function if exists scsql._archive_beyond_capacity(bigint);
