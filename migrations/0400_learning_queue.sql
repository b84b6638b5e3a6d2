-- 0400 learning queue: learnings waiting to be indexed into the knowledge base.
--
-- The outcome's transaction records its learning and queues it here (a plain
-- insert that waits on nothing); the knowledge base indexes it afterwards,
-- from the MCP server right after the call and from scsql worker, so an
-- outcome never waits on the knowledge base's per-project statistics lock.

create table scsql.kb_learning_queue (
  project_id  bigint not null,
  learning_id bigint not null,
  queued_at   timestamptz not null default now(),
  primary key (project_id, learning_id)
);
comment on table scsql.kb_learning_queue is
  'Public and internal learnings not yet indexed into the knowledge base; drained by scsql._index_learnings.';
