-- Runs once, when the data directory is first initialised.
\connect template1
create extension if not exists vector;
create schema if not exists partman;
create extension if not exists pg_partman schema partman;
\connect postgres
create extension if not exists vector;
create schema if not exists partman;
create extension if not exists pg_partman schema partman;
