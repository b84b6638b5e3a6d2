-- 0824 verify_chain's locator (on Citus, one query over every shard) finds
-- the chained tables that hold rows of the chain besides the projects
-- (scsql._chain_located), and the read of its rows reads those tables only.
-- The helpers take them as an argument (sql/10_chain.sql defines them);
-- their old forms are dropped.

drop function if exists scsql._chain_projects(bigint);
drop function if exists scsql._chain_walk(scsql.chains, bigint, bytea, bigint, bigint[], bigint[], boolean[], int8multirange, bigint[]);
drop function if exists scsql._chain_rows_sql(bigint[]);
