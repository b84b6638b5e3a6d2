-- 0770 agent tokens: the bearer tokens remote agents present to the team
-- server (scsql serve). A token names one agent; the database keeps only
-- the sha256 of it (the token is shown once, when it is made, and never
-- stored), with its scope, when it was made and by whom, when it expires,
-- when it was last used and whether it was revoked.

create sequence scsql.agent_tokens_id_seq as bigint;
create table scsql.agent_tokens (
  project_id   bigint not null references scsql.projects,
  token_id     bigint not null default nextval('scsql.agent_tokens_id_seq'),
  agent_id     bigint not null references scsql.agents,
  token_hash   bytea not null constraint agent_tokens_token_hash_check check (octet_length(token_hash) = 32),
  scope        text not null default 'agent'
               constraint agent_tokens_scope_check check (scope in ('agent', 'tools', 'hooks')),
  note         text constraint agent_tokens_note_check check (char_length(note) between 1 and 200),
  created_at   timestamptz not null default now(),
  created_by   text not null default session_user,
  expires_at   timestamptz,
  last_used_at timestamptz,
  revoked_at   timestamptz,
  primary key (project_id, token_id),
  constraint agent_tokens_hash_key unique (project_id, token_hash),
  constraint agent_tokens_expiry check (expires_at is null or expires_at > created_at)
);
alter sequence scsql.agent_tokens_id_seq owned by scsql.agent_tokens.token_id;
create index agent_tokens_agent_idx on scsql.agent_tokens (project_id, agent_id);
comment on table scsql.agent_tokens is
  'Bearer tokens of the team server (scsql serve), one agent each: the sha256 of the token (never the token), its scope (agent: MCP tools and hook events; tools; hooks), an optional note, when and by whom it was made, when it expires (NULL: never), when it was last used (to the minute) and when it was revoked. Written only by scsql.create_agent_token, scsql.revoke_agent_token and scsql_caller.use_token.';
comment on column scsql.agent_tokens.token_hash is
  'sha256 of the token''s text. The token carries 256 random bits, so a fast hash is enough (no guess can be checked against it in any useful time) and lets each request be checked by one index look-up.';
