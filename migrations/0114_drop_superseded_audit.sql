-- 0114 functions of the chain, the audit log and checkpoints that earlier
-- versions had and this one does not, or had with other results.
--
-- sql/ and policies/ define each function once, with CREATE OR REPLACE, on
-- every migrate; a function they no longer define (renamed, moved to
-- scsql_caller, or with other arguments) is dropped here, once. One whose
-- results changed under the same arguments is dropped only while it still
-- has the old results (CREATE OR REPLACE cannot change them); sql/ then
-- creates it again.
--
-- _confidential_authors was called by row-level security policies, which go
-- with it (cascade); policies/ recreates them, calling
-- scsql_caller.confidential_authors, when this migrate applies it.

drop function if exists scsql._chain_link(bigint, bigint, bigint, bytea, bytea);
drop function if exists scsql._confidential_authors() cascade;  -- now scsql_caller.confidential_authors()
drop function if exists scsql._tool_call_cost(text, timestamptz, text, integer, integer);  -- now scsql._model_price
drop function if exists scsql._lock_my_learnings();  -- now scsql_caller.lock_my_learnings()
drop function if exists scsql.record_checkpoint(bigint, timestamptz, integer, bigint[], bigint[], bytea[], bytea);

do $$
begin
  -- _chain_gap gained the result column detail.
  if exists (select from pg_catalog.pg_proc
             where oid = pg_catalog.to_regprocedure('scsql._chain_gap(bigint, bigint, bigint[], bigint[], boolean[], bigint)')
               and not 'detail' = any (proargnames)) then
    drop function scsql._chain_gap(bigint, bigint, bigint[], bigint[], boolean[], bigint);
  end if;
  -- chain_heads gained the result columns quarantined_from and quarantine_open.
  if exists (select from pg_catalog.pg_proc
             where oid = pg_catalog.to_regprocedure('scsql.chain_heads()')
               and not 'quarantine_open' = any (proargnames)) then
    drop function scsql.chain_heads();
  end if;
end
$$;
