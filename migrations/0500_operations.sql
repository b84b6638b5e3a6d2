-- 0500 operations: the worker's heartbeat and the search latency histogram,
-- read by scsql doctor and scsql.metrics() (sql/50_operations.sql).

-- One row per running scsql worker process (project, agent, host, pid),
-- updated on every round of its loop. Rows of workers gone for a week are
-- pruned by the next heartbeat of the project.
create table scsql.worker_heartbeats (
  project_id    bigint not null references scsql.projects,
  agent_id      bigint not null,
  host          text not null check (char_length(host) between 1 and 255),
  pid           integer not null check (pid > 0),
  jobs          text[] not null default '{}',
  poll_seconds  double precision not null check (poll_seconds > 0 and poll_seconds <= 3600),
  units         bigint not null default 0 check (units >= 0),
  started_at    timestamptz not null default now(),
  seen_at       timestamptz not null default now(),
  primary key (project_id, agent_id, host, pid)
);
comment on table scsql.worker_heartbeats is
  'The heartbeat of each scsql worker process: who runs it (agent, host, pid), its jobs and poll interval, the units of work it did, when it started and when it was last seen. Written by scsql.worker_heartbeat.';

-- Search latency as a cumulative histogram per project: counts[i] counts
-- searches that took at most scsql._search_latency_bounds()[i] seconds (and
-- more than the bound before it); the last element counts the rest. Clients
-- send what they timed in batches, so a search costs no write of its own.
create table scsql.search_latency (
  project_id   bigint not null references scsql.projects,
  counts       bigint[] not null,
  sum_seconds  double precision not null default 0 check (sum_seconds >= 0),
  updated_at   timestamptz not null default now(),
  primary key (project_id)
);
comment on table scsql.search_latency is
  'Search latency per project as a cumulative histogram (counts per bucket of scsql._search_latency_bounds(), the last one unbounded; sum_seconds), added to by scsql.record_search_latency.';
