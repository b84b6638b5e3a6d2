-- 0301 broadcast: typed messages between the agents of one project, their
-- acknowledgements, and the per-agent rate limit.
--
-- Messages are append-only: who received and acknowledged one is recorded
-- in message_acks, never by changing the message.

create table scsql.coordination_settings (
  project_id            bigint primary key,
  broadcasts_per_minute integer not null default 10 check (broadcasts_per_minute between 0 and 10000),
  updated_at            timestamptz not null default now()
);
comment on table scsql.coordination_settings is
  'Per-project coordination settings: how many broadcasts each agent may send per minute (default 10 when the project has no row).';

create table scsql.broadcast_senders (
  project_id bigint not null,
  agent_id   bigint not null,
  per_minute integer check (per_minute between 0 and 10000),
  primary key (project_id, agent_id)
);
comment on table scsql.broadcast_senders is
  'One row per agent that has broadcast: locked by each broadcast of that agent, so concurrent sends by one agent count each other (the rate limit is race-free); per_minute overrides the project''s limit for that agent.';

create table scsql.messages (
  project_id        bigint not null,
  message_id        bigint generated always as identity,
  type              text not null check (type in ('ASSIGN', 'STATUS', 'MERGE', 'DEPENDENCY', 'PROPOSED',
                                                  'REJECT', 'REVISE', 'LAUNCH_ROLE', 'RETIRE_ROLE')),
  sender_id         bigint not null,
  sender_role       text not null,
  from_orchestrator boolean not null,
  to_role           text,
  to_agent_id       bigint,
  task_id           bigint,
  payload           jsonb not null,
  created_at        timestamptz not null default clock_timestamp(),
  primary key (project_id, message_id),
  check ((to_role is null) <> (to_agent_id is null))
);
comment on table scsql.messages is
  'The broadcast channel: typed messages from one agent to a team role or to one agent of the same project. from_orchestrator records whether the sender''s team role orchestrates when it sent; other senders'' messages are shown as unverified agent output.';
create index messages_sender_idx on scsql.messages (project_id, sender_id, created_at);
create index messages_to_role_idx on scsql.messages (project_id, to_role, message_id) where to_role is not null;
create index messages_to_agent_idx on scsql.messages (project_id, to_agent_id, message_id) where to_agent_id is not null;

create table scsql.message_acks (
  project_id bigint not null,
  message_id bigint not null,
  agent_id   bigint not null,
  acked_at   timestamptz not null default clock_timestamp(),
  primary key (project_id, message_id, agent_id),
  foreign key (project_id, message_id) references scsql.messages (project_id, message_id)
);
comment on table scsql.message_acks is 'Who acknowledged which message, and when.';
