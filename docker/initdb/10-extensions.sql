-- Runs once, when the data directory is first initialised, in the database
-- named by POSTGRES_DB (scsql in compose.yaml), and again in template1 so
-- databases created later get the same.
--
-- pgvector, and pg_partman in schema partman with the grants scsql_owner
-- needs to manage partitions through it (scsql partitions enable-partman
-- does the same on an existing server): extensions.psql, beside this file
-- (the image's entrypoint runs only *.sql and *.sh files, so it runs it only
-- through here).

do $$ begin
  if not exists (select from pg_roles where rolname = 'scsql_owner') then
    create role scsql_owner nologin createrole;
  end if;
end $$;
\ir extensions.psql

\connect template1
\ir extensions.psql
