-- 0306 functions of the queue and the broadcast channel that earlier
-- versions had and this one does not, or had with other results.
--
-- sql/ and policies/ define each function once, with CREATE OR REPLACE, on
-- every migrate; a function they no longer define (renamed, moved to
-- scsql_caller, or with other arguments) is dropped here, once. One whose
-- results changed under the same arguments is dropped only while it still
-- has the old results (CREATE OR REPLACE cannot change them); sql/ then
-- creates it again.

drop function if exists scsql._my_channel();                  -- now scsql_caller.my_channel(text)
drop function if exists scsql.my_channel(text);               -- now scsql_caller.my_channel(text)
drop function if exists scsql.broadcast(text, text, text, jsonb, bigint);

do $$
begin
  -- explain(bigint) gained the result column seq (a message's place in its chain).
  if exists (select from pg_catalog.pg_proc
             where oid = pg_catalog.to_regprocedure('scsql.explain(bigint)')
               and not 'seq' = any (proargnames)) then
    drop function scsql.explain(bigint);
  end if;
end
$$;
