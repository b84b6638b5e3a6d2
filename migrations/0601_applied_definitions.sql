-- 0601 The checksum of the sql/ and policies/ files last applied, so a
-- migrate (and every scsql up) that has nothing new to apply re-creates no
-- function, trigger or policy: it takes no lock an agent's write could wait
-- on or deadlock with.

create table scsql.applied_definitions (
  one        boolean primary key default true constraint applied_definitions_one check (one),
  checksum   text not null constraint applied_definitions_checksum check (checksum ~ '^[0-9a-f]{64}$'),
  applied_at timestamptz not null default now()
);
comment on table scsql.applied_definitions is
  'One row: the sha256 of the sql/ and policies/ files scsql migrate applied last. Migrate re-applies them only when they changed (or with --reapply).';
