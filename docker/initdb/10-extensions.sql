-- Runs once, when the data directory is first initialised, in the database
-- named by POSTGRES_DB (scsql in compose.yaml), and again in template1 so
-- databases created later get the same.
--
-- pgvector, and pg_partman in schema partman with the grants scsql_owner
-- needs to manage partitions through it (scsql partitions enable-partman
-- does the same on an existing server).

create extension if not exists vector;
do $$ begin
  if not exists (select from pg_roles where rolname = 'scsql_owner') then
    create role scsql_owner nologin createrole;
  end if;
end $$;
create schema if not exists partman;
create extension if not exists pg_partman schema partman;
grant usage, create on schema partman to scsql_owner;
grant select, insert, update, delete on all tables in schema partman to scsql_owner;
grant usage on all sequences in schema partman to scsql_owner;
grant execute on all functions in schema partman to scsql_owner;
grant execute on all procedures in schema partman to scsql_owner;

\connect template1
create extension if not exists vector;
create schema if not exists partman;
create extension if not exists pg_partman schema partman;
grant usage, create on schema partman to scsql_owner;
grant select, insert, update, delete on all tables in schema partman to scsql_owner;
grant usage on all sequences in schema partman to scsql_owner;
grant execute on all functions in schema partman to scsql_owner;
grant execute on all procedures in schema partman to scsql_owner;
