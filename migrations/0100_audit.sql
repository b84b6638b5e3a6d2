-- 0100 audit: chain heads, the registry of chained tables, sessions, tool
-- calls, outcomes, learnings, model prices, checkpoints, partition settings.
--
-- The chain columns (at, author_id, key_id, chain_id, seq, prev_hash,
-- row_hash, signature) are declared here because tool_calls and outcomes are
-- partitioned by "at"; scsql._make_chained (sql/10_chain.sql) adds them to a
-- table that lacks them, then installs the triggers.

-- One chain per (project, agent). The row is the chain's head: the chain
-- trigger locks it FOR UPDATE, so appends to one chain are serialised while
-- different agents never wait on each other. The horizon is where
-- verification starts after retention retired older rows (a checkpointed
-- seq and its row_hash).
create table scsql.chains (
  project_id         bigint not null references scsql.projects,
  chain_id           bigint generated always as identity,
  agent_id           bigint not null references scsql.agents,
  head_seq           bigint not null default 0 check (head_seq >= 0),
  head_hash          bytea not null default '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea
                       check (length(head_hash) = 32),
  horizon_seq        bigint not null default 0 check (horizon_seq >= 0),
  horizon_hash       bytea not null default '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea
                       check (length(horizon_hash) = 32),
  horizon_checkpoint bigint,
  created_at         timestamptz not null default now(),
  primary key (project_id, chain_id),
  unique (project_id, agent_id)
);
comment on table scsql.chains is
  'One hash chain per (project, agent), spanning every chained table. head_seq/head_hash: the newest row; horizon_seq/horizon_hash: where verification starts once retention retired older rows.';

-- Catalogue of chained tables (reference table: no project_id).
create table scsql.chained_tables (
  table_name     text primary key,
  signed_fields  text[] not null,
  stamped_fields text[] not null default '{}',
  registered_at  timestamptz not null default now()
);
comment on table scsql.chained_tables is
  'Tables made chained by scsql._make_chained: the columns the author signs (payload order) and the columns the database stamps (hashed, not signed).';

create table scsql.sessions (
  project_id  bigint not null references scsql.projects,
  session_id  bigint generated always as identity,
  client      text check (char_length(client) <= 100),
  model       text check (char_length(model) <= 200),
  title       text check (char_length(title) <= 500),
  at          timestamptz not null,
  author_id   bigint not null,
  key_id      integer not null,
  chain_id    bigint not null,
  seq         bigint not null,
  prev_hash   bytea not null,
  row_hash    bytea not null,
  signature   bytea not null,
  primary key (project_id, session_id)
);
comment on table scsql.sessions is 'An agent''s working session (client, model, title). Chained and append-only.';

create sequence scsql.tool_calls_id_seq as bigint;
create table scsql.tool_calls (
  project_id     bigint not null,
  tool_call_id   bigint not null default nextval('scsql.tool_calls_id_seq'),
  at             timestamptz not null,
  session_id     bigint,
  tool           text not null check (char_length(tool) between 1 and 200),
  model          text check (char_length(model) <= 200),
  origin         text not null default 'model' check (origin in ('model', 'database')),
  input_tokens   integer not null default 0 check (input_tokens >= 0),
  output_tokens  integer not null default 0 check (output_tokens >= 0),
  latency_ms     integer check (latency_ms >= 0),
  status         text not null check (status in ('ok', 'error', 'timeout', 'cancelled', 'denied')),
  input_preview  text check (char_length(input_preview) <= 4000),
  output_preview text check (char_length(output_preview) <= 4000),
  cost_usd       numeric check (cost_usd >= 0),
  author_id      bigint not null,
  key_id         integer not null,
  chain_id       bigint not null,
  seq            bigint not null,
  prev_hash      bytea not null,
  row_hash       bytea not null,
  signature      bytea not null,
  primary key (project_id, tool_call_id, at)
) partition by range (at);
alter sequence scsql.tool_calls_id_seq owned by scsql.tool_calls.tool_call_id;
create index tool_calls_at_idx on scsql.tool_calls (project_id, at);
comment on table scsql.tool_calls is
  'One row per tool call an agent made: tool, model, tokens (input = arguments the model generated, output = the result the model reads next), latency, status, cost in USD computed from scsql.model_prices, bounded previews. origin = database marks calls that only assembled database content (cost 0). Chained, append-only, partitioned by day on at.';

create sequence scsql.outcomes_id_seq as bigint;
create table scsql.outcomes (
  project_id     bigint not null,
  outcome_id     bigint not null default nextval('scsql.outcomes_id_seq'),
  at             timestamptz not null,
  tool_call_id   bigint,
  session_id     bigint,
  task_ref       text check (char_length(task_ref) <= 200),
  kind           text not null check (kind in ('shipped', 'accepted', 'rejected', 'failed', 'insufficient', 'errored', 'reverted')),
  signal         text not null check (signal ~ '^[a-z][a-z0-9_.-]{0,31}$'),
  confidence     numeric check (confidence >= 0 and confidence <= 1),
  summary        text not null check (char_length(summary) between 1 and 1000),
  evidence       text check (char_length(evidence) <= 8000),
  classification text not null default 'internal'
                   check (classification in ('public', 'internal', 'confidential', 'restricted')),
  author_id      bigint not null,
  key_id         integer not null,
  chain_id       bigint not null,
  seq            bigint not null,
  prev_hash      bytea not null,
  row_hash       bytea not null,
  signature      bytea not null,
  primary key (project_id, outcome_id, at),
  check (tool_call_id is not null or session_id is not null or task_ref is not null)
) partition by range (at);
alter sequence scsql.outcomes_id_seq owned by scsql.outcomes.outcome_id;
comment on table scsql.outcomes is
  'What came of a tool call, task or session: kind (shipped, accepted, rejected, failed, insufficient, errored, reverted), signal source, confidence, summary, evidence, classification (public, internal, confidential, restricted; enforced by RLS). Chained, append-only, partitioned by day on at.';

create table scsql.learnings (
  project_id     bigint not null references scsql.projects,
  learning_id    bigint generated always as identity,
  kind           text not null check (kind in ('failure', 'experiment')),
  outcome_id     bigint not null,
  outcome_kind   text not null,
  author_id      bigint not null,
  tool           text,
  tool_call_id   bigint,
  session_id     bigint,
  task_ref       text,
  signal         text not null,
  confidence     numeric,
  summary        text not null,
  evidence       text,
  classification text not null check (classification in ('public', 'internal', 'confidential', 'restricted')),
  created_at     timestamptz not null default now(),
  primary key (project_id, learning_id)
);
create index learnings_outcome_idx on scsql.learnings (project_id, outcome_id);
comment on table scsql.learnings is
  'Lessons derived from outcomes in the same transaction: failure learnings from rejected, failed, insufficient, errored and reverted outcomes; experiment learnings from shipped or accepted outcomes with high confidence. Same classification as the outcome.';

-- Explicit grants of confidential rows: agent may read confidential rows
-- written by agents of team role team_role in project project_id.
create table scsql.confidential_grants (
  project_id bigint not null references scsql.projects,
  agent_id   bigint not null references scsql.agents,
  team_role  text not null references scsql.team_roles,
  granted_at timestamptz not null default now(),
  granted_by text not null default session_user,
  primary key (project_id, agent_id, team_role)
);
comment on table scsql.confidential_grants is
  'Lets an agent read confidential outcomes and learnings written by agents of another team role of the same project.';

-- Prices (reference table).
create table scsql.model_prices (
  model                text not null check (char_length(model) between 1 and 200),
  effective_from       timestamptz not null,
  input_usd_per_mtok   numeric not null check (input_usd_per_mtok >= 0),
  output_usd_per_mtok  numeric not null check (output_usd_per_mtok >= 0),
  primary key (model, effective_from)
);
comment on table scsql.model_prices is
  'USD per million tokens a model reads (input) and writes (output), from effective_from on. A tool call''s model matches the longest model name that is a prefix of it.';

-- Checkpoints: signed sets of chain heads, one per project and moment.
create table scsql.auditor_keys (
  key_id        integer generated always as identity primary key,
  public_key    bytea not null unique check (length(public_key) = 32),
  valid_from    timestamptz not null default clock_timestamp(),
  registered_by text not null default session_user
);
comment on table scsql.auditor_keys is
  'Ed25519 public keys of the auditor, who signs checkpoints. Registered by an administrator; the private key stays in the auditor''s keystore (auditor.key, mode 0600).';

create table scsql.checkpoints (
  project_id    bigint not null references scsql.projects,
  checkpoint_id bigint generated always as identity,
  at            timestamptz not null,
  key_id        integer not null references scsql.auditor_keys,
  signature     bytea not null check (length(signature) = 64),
  recorded_at   timestamptz not null default now(),
  primary key (project_id, checkpoint_id)
);
comment on table scsql.checkpoints is
  'A signed record of every chain head of one project at one moment. Verification can start from one; retention drops only rows a checkpoint covers.';

create table scsql.checkpoint_heads (
  project_id    bigint not null,
  checkpoint_id bigint not null,
  chain_id      bigint not null,
  seq           bigint not null check (seq >= 0),
  row_hash      bytea not null check (length(row_hash) = 32),
  primary key (project_id, checkpoint_id, chain_id),
  foreign key (project_id, checkpoint_id) references scsql.checkpoints
);
comment on table scsql.checkpoint_heads is 'The chain heads (seq, row_hash) a checkpoint signed.';

-- Partitioning settings of the time-partitioned tables (reference table).
create table scsql.partition_settings (
  parent     text primary key,
  premake    integer not null default 7 check (premake between 1 and 90),
  retention  interval check (retention is null or retention >= interval '1 day'),
  updated_at timestamptz not null default now()
);
comment on table scsql.partition_settings is
  'Daily partitions of time-partitioned tables: how many days ahead to create, and how long to keep them (NULL: forever). Retention never drops rows that no checkpoint covers.';
insert into scsql.partition_settings (parent) values ('scsql.tool_calls'), ('scsql.outcomes');
