-- 0862 verify_chain finds the projects that hold anything of the chain once
-- (scsql._chain_projects: on Citus, one query over every shard; NULL on one
-- server) and its reads name them, so Citus sends each to those projects'
-- shards only. The helpers take them as an argument (sql/10_chain.sql
-- defines them); their old forms are dropped.

drop function if exists scsql._chain_identity_break(bigint, scsql.chains);
drop function if exists scsql._chain_segments(bigint);
drop function if exists scsql._chain_walk(scsql.chains, bigint, bytea, bigint, bigint[], bigint[], boolean[], int8multirange);
drop function if exists scsql._chain_end_break(scsql.chains, bigint, bytea, bigint, bigint[], bigint[], boolean[]);
drop function if exists scsql._chain_rows_sql();
