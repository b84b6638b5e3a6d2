-- 0002 project locks: the rows scsql locks to serialize work inside one
-- project.
--
-- Advisory locks live in one key space that every session may take, so an
-- agent could hold the key another project waits on. These rows are locked
-- instead: only scsql's security-definer functions touch the table (agents
-- hold no privilege on it, so they can neither SELECT ... FOR UPDATE nor
-- LOCK TABLE it), and each function locks only the row of the caller's own
-- project. Nothing references the table, so no foreign-key check takes
-- FOR KEY SHARE on its rows.

create table scsql.project_locks (
  project_id bigint not null,
  name       text not null check (name in ('learnings', 'memory_facts')),
  primary key (project_id, name)
);
comment on table scsql.project_locks is
  'One row per (project, purpose) that scsql locks to serialize work within the project: learnings (outcomes that add a learning hold it FOR SHARE, learnings export FOR NO KEY UPDATE), memory_facts (changes to working memory, FOR NO KEY UPDATE). Rows are made with the project (a trigger on scsql.projects), so a lock never waits on another transaction''s insert of its row. Only the owner reads or locks it.';

alter table scsql.project_locks enable row level security;
alter table scsql.project_locks force row level security;
create policy owner_all on scsql.project_locks to scsql_owner using (true) with check (true);

insert into scsql.project_locks (project_id, name)
select p.project_id, n.name from scsql.projects p cross join (values ('learnings'), ('memory_facts')) n(name);
