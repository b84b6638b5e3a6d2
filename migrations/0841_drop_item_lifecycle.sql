-- 0841 search and pack score the lifecycle of all their items in one query
-- (scsql_caller.items_lifecycle, over an array of paths), so the function
-- that scored one item at a time is dropped.

drop function if exists scsql_caller.item_lifecycle(text, double precision, double precision, double precision, double precision);
