-- 0830 chain break kinds: the catalogue of what a verifier reports.
--
-- scsql verify (Python, outside the database) and scsql.verify_chain (SQL)
-- are independent verifiers and stay so; what they call a break is one
-- vocabulary, kept here like the error catalogue (sql/19_break_kinds.sql
-- defines the rows) and tested against both.

create table scsql.chain_break_kinds (
  kind      text primary key check (kind ~ '^[a-z]+(-[a-z]+)*$'),
  found_by  text not null check (found_by in ('both', 'client')),
  excusable boolean not null default false,
  meaning   text not null
);
comment on table scsql.chain_break_kinds is
  'Every kind of break the verifiers report, with its meaning: found_by both (scsql verify and scsql.verify_chain) or client (scsql verify alone: signatures, keys, exported checkpoints, rows of no chain), and whether an acknowledged quarantine excuses it (a break an agent can cause through the API).';
