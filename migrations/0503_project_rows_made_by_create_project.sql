-- A project's rows of scsql.project_locks and its channel key are made by
-- scsql.create_project, in the transaction that creates the project, not by
-- triggers on scsql.projects: Citus fires a reference table's triggers on
-- every replica, where they may not write a distributed table, so
-- migrate --citus dropped them and each project's first use made the rows,
-- the first transactions of a new project waiting on each other's insert.
-- Now one rule holds on one server and on Citus. Projects that lack the rows
-- (made on Citus without the triggers) get them here.
drop trigger if exists project_lock_rows on scsql.projects;
drop trigger if exists channel_key_row on scsql.projects;
drop function if exists scsql._project_lock_rows();
drop function if exists scsql._channel_key_row();

insert into scsql.project_locks (project_id, name)
select p.project_id, n.name from scsql.projects p cross join (values ('learnings'), ('memory_facts')) n(name)
on conflict do nothing;
insert into scsql.channel_keys (project_id)
select p.project_id from scsql.projects p
on conflict do nothing;

comment on table scsql.project_locks is
  'One row per (project, purpose) that scsql locks to serialize work within the project: learnings (outcomes that add a learning hold it FOR SHARE, learnings export FOR NO KEY UPDATE), memory_facts (changes to working memory, FOR NO KEY UPDATE). Rows are made with the project (scsql.create_project), so a lock never waits on another transaction''s insert of its row. Only the owner reads or locks it.';
comment on table scsql.channel_keys is
  'The secret each project''s LISTEN/NOTIFY channel names are derived from (see scsql._channel): 32 random bytes, made with the project (scsql.create_project). Only the owner reads it.';
