-- 0112 quarantined chains, retirements and the retention settings' history.
--
-- A chain that does not verify no longer stops checkpoints of the others:
-- scsql checkpoint signs the rows of it that verify and records the chain in
-- scsql.chain_quarantines, where it stays until an administrator
-- acknowledges it; retention never drops its rows after the anchored prefix.
--
-- A partition whose rows are missing counts as retired only when retention
-- dropped it: scsql._retire_partition records each drop it makes, with the
-- retention setting in force (and when it was set). Every change of the
-- settings is logged with its time. Verification accepts missing rows only
-- where a checkpoint segment, a retirement record and the logged setting
-- agree (sql/12_partitions.sql).
create table scsql.chain_quarantines (
  quarantine_id   bigint generated always as identity primary key,
  project_id      bigint not null references scsql.projects,
  chain_id        bigint not null,
  from_seq        bigint not null check (from_seq >= 0),
  anchored_seq    bigint not null check (anchored_seq >= 0),
  checkpoint_id   bigint,
  kind            text not null check (char_length(kind) between 1 and 100),
  detail          text not null check (char_length(detail) <= 2000),
  found_at        timestamptz not null default now(),
  found_by        text not null default session_user,
  acknowledged_at timestamptz,
  acknowledged_by text,
  note            text check (char_length(note) <= 2000),
  check ((acknowledged_at is null) = (acknowledged_by is null))
);
create index chain_quarantines_chain_idx on scsql.chain_quarantines (chain_id, from_seq);
comment on table scsql.chain_quarantines is
  'Chains scsql checkpoint found broken: from_seq is the first seq that did not verify (0: the chain as a whole), anchored_seq the last seq a checkpoint signed for it (checkpoint_id: the checkpoint that anchored its verified prefix, if this run did), kind and detail the break, found_at/found_by who found it. Retention never drops rows of the chain after anchored_seq. It stays open until an administrator acknowledges it (scsql.acknowledge_quarantine); the record is kept.';

create table scsql.partition_settings_log (
  log_id    bigint generated always as identity primary key,
  parent    text not null,
  retention interval,
  premake   integer not null,
  set_at    timestamptz not null default clock_timestamp(),
  set_by    text not null default session_user
);
create index partition_settings_log_parent_idx on scsql.partition_settings_log (parent, set_at);
comment on table scsql.partition_settings_log is
  'Every value scsql.partition_settings took, with when and by whom (written by a trigger on it; append-only). A retirement counts only when the retention it records was the logged setting at the time of the drop.';
insert into scsql.partition_settings_log (parent, retention, premake, set_at, set_by)
select s.parent, s.retention, s.premake, s.updated_at, 'migration 0112' from scsql.partition_settings s order by s.parent;

create table scsql.partition_retirements (
  retirement_id     bigint generated always as identity primary key,
  parent            text not null,
  part              text not null check (char_length(part) between 1 and 300),
  lower_bound       timestamptz not null,
  upper_bound       timestamptz not null,
  retention         interval not null,
  retention_set_at  timestamptz not null,
  retired_at        timestamptz not null default clock_timestamp(),
  retired_by        text not null default session_user,
  chains            jsonb not null default '[]'::jsonb,
  check (upper_bound > lower_bound)
);
create index partition_retirements_part_idx on scsql.partition_retirements (part);
comment on table scsql.partition_retirements is
  'Every partition retention dropped (scsql._retire_partition): its name in checkpoints (part, see scsql._chain_partitions), its range, the retention setting in force and when it was set, when and by whom it was dropped, and the rows it held per chain (chain_id, first_seq, last_seq, rows). Append-only. Missing rows count as retired only where such a record, valid by the settings log, and a checkpoint segment say so.';

-- Partitions retention of earlier versions dropped (gone, named by signed
-- segments) are recorded as retired now, but only for a table whose
-- retention is on and under which their range has expired: a partition
-- dropped while retention was off stays a break. (Bounds are compared in UTC.)
set local timezone = 'UTC';
insert into scsql.partition_retirements (parent, part, lower_bound, upper_bound, retention, retention_set_at, retired_at, retired_by)
select s.parent, g.part, g.lo, g.lo + interval '1 day', s.retention, s.updated_at, greatest(now(), s.updated_at), 'migration 0112'
from (select distinct g.part, split_part(g.part, '@', 1) as parent, split_part(g.part, '@', 2)::timestamptz as lo
      from scsql.checkpoint_segments g
      where g.part like '%@%' and g.part not like '%@default') g
join scsql.partition_settings s on s.parent = g.parent
where s.retention is not null and g.lo + interval '1 day' + s.retention <= now()
  and not exists (select from pg_catalog.pg_inherits i join pg_catalog.pg_class c on c.oid = i.inhrelid
                  where i.inhparent = to_regclass(s.parent)
                    and pg_catalog.pg_get_expr(c.relpartbound, c.oid)
                        like 'FOR VALUES FROM (''' || to_char(g.lo, 'YYYY-MM-DD HH24:MI:SS') || '+00'')%')
order by g.part;
reset timezone;
