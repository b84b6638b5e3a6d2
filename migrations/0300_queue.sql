-- 0300 queue: the task queue per (project, team role), the archive of
-- finished tasks, and the exclusive files held by in-flight tasks.
--
-- The hot table, scsql.tasks, holds only queued and claimed tasks: a task
-- that completes, dies, is released for good or is cancelled moves to
-- scsql.tasks_archive in the same transaction, so the cost of a claim does
-- not grow with history. Its autovacuum settings suit a queue: vacuum after
-- a fixed number of dead rows, not a fraction of the table, without cost
-- delay, and leave room on each page for HOT updates of leases.
--
-- No foreign keys on the hot path: every row is written by the API
-- functions, which take the project, the team role and the agent from the
-- caller's agent row; a key-share lock on the projects row at every insert
-- would turn many concurrent enqueues and completions into multixacts.

create table scsql.tasks (
  project_id          bigint not null,
  task_id             bigint generated always as identity,
  team_role           text not null,
  state               text not null default 'queued' check (state in ('queued', 'claimed')),
  priority            integer not null default 0,
  payload             jsonb not null default '{}'::jsonb,
  acceptance_criteria text not null default '',
  complexity          smallint check (complexity between 1 and 5),
  exclusive_files     text[] not null default '{}',
  run_after           timestamptz not null default now(),
  attempts            integer not null default 0 check (attempts >= 0),
  max_attempts        integer not null default 5 check (max_attempts between 1 and 100),
  fence               bigint not null default 0 check (fence >= 0),
  lease_seconds       integer,
  claimed_by          bigint,
  claimed_at          timestamptz,
  lease_expires_at    timestamptz,
  last_error          text,
  created_by          bigint not null,
  created_at          timestamptz not null default now(),
  primary key (project_id, task_id),
  check ((state = 'claimed') = (claimed_by is not null and lease_expires_at is not null))
) with (
  fillfactor = 80,
  autovacuum_vacuum_scale_factor = 0,
  autovacuum_vacuum_threshold = 1000,
  autovacuum_vacuum_insert_scale_factor = 0,
  autovacuum_vacuum_insert_threshold = 5000,
  autovacuum_analyze_scale_factor = 0,
  autovacuum_analyze_threshold = 5000,
  autovacuum_vacuum_cost_delay = 0
);
comment on table scsql.tasks is
  'The hot queue: queued and claimed tasks only, per (project, team role). fence counts claims (the lease token); attempts counts claims charged against max_attempts. Finished tasks move to tasks_archive.';

-- The claim path: the best queued task of one (project, team role).
create index tasks_claim_idx on scsql.tasks (project_id, team_role, priority desc, task_id)
  where state = 'queued';
-- Lease expiry: claimed tasks by expiry time.
create index tasks_lease_idx on scsql.tasks (project_id, team_role, lease_expires_at)
  where state = 'claimed';

create table scsql.tasks_archive (
  project_id          bigint not null,
  task_id             bigint not null,
  team_role           text not null,
  state               text not null check (state in ('done', 'dead', 'released', 'cancelled')),
  priority            integer not null,
  payload             jsonb not null,
  acceptance_criteria text not null,
  complexity          smallint,
  exclusive_files     text[] not null,
  attempts            integer not null,
  max_attempts        integer not null,
  fence               bigint not null,
  claimed_by          bigint,
  result              jsonb,
  last_error          text,
  created_by          bigint not null,
  created_at          timestamptz not null,
  finished_at         timestamptz not null default now(),
  finished_by         bigint,
  primary key (project_id, task_id)
);
comment on table scsql.tasks_archive is
  'Finished tasks (done, dead, released for good, cancelled), moved out of the hot queue in the transaction that finished them. Append-only through the API.';

-- Exclusive files. Each row is one normalized path a queued or claimed task
-- holds. span is the range of keys the path covers: the path itself and
-- everything below it. A key is the number project_id + 0.b1b2b3..., where
-- b1, b2, ... are the bytes of "/" || path, three digits each, and "/" is
-- written as byte 1 so it sorts below every byte a path may hold; the
-- range ends before the same key followed by byte 2. Two spans overlap
-- exactly when the paths are in the same project and one equals, or is a
-- directory above, the other, so the exclusion constraint refuses such a
-- pair, even between concurrent transactions. Rows go when their task
-- leaves the hot table (on delete cascade). numrange is built in; on a
-- distributed (Citus) deployment the constraint would carry
-- "project_id with =" through btree_gist, as Citus requires.
create table scsql.task_files (
  project_id bigint not null,
  task_id    bigint not null,
  path       text not null,
  span       numrange not null,
  primary key (project_id, task_id, path),
  foreign key (project_id, task_id) references scsql.tasks (project_id, task_id) on delete cascade,
  constraint task_files_exclusive exclude using gist (span with &&)
);
comment on table scsql.task_files is
  'Paths held exclusively by queued and claimed tasks, normalized relative to the project root ("." is the whole project). A path covers itself and everything below it; the exclusion constraint task_files_exclusive keeps two overlapping paths of one project from being held at once.';
