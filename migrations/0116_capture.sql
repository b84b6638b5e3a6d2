-- 0116 capture: what Claude Code hooks record. Sessions keyed by the client's
-- own session id, prompts (a chained table), tool calls with the files they
-- touched, the event keys that make a replayed event add nothing, and
-- learnings that act as rules. The new columns of sessions and tool_calls
-- are appended signed fields (sql/14_capture.sql registers them with
-- scsql._make_chained), so rows written before keep their hashes and
-- signatures.

alter table scsql.sessions
  add column external_id text check (char_length(external_id) between 1 and 200),
  add column cwd         text check (char_length(cwd) <= 1024),
  add column git_branch  text check (char_length(git_branch) <= 256),
  add column git_commit  text check (char_length(git_commit) <= 64),
  add column source      text check (source in ('startup', 'resume', 'clear', 'compact', 'import', 'hook'));
create unique index sessions_external_idx on scsql.sessions (project_id, author_id, external_id)
  where external_id is not null;

alter table scsql.tool_calls
  add column tool_use_id text check (char_length(tool_use_id) between 1 and 200),
  add column files       jsonb check (jsonb_typeof(files) = 'array'),
  add column scsql_tool  boolean,
  add column imported    boolean,
  add column input_key   text check (char_length(input_key) <= 4000);

create table scsql.prompts (
  project_id  bigint not null references scsql.projects,
  prompt_id   bigint generated always as identity,
  session_id  bigint,
  text        text not null check (char_length(text) <= 20000),
  imported    boolean,
  at          timestamptz not null,
  author_id   bigint not null,
  key_id      integer not null,
  chain_id    bigint not null,
  seq         bigint not null,
  prev_hash   bytea not null,
  row_hash    bytea not null,
  signature   bytea not null,
  primary key (project_id, prompt_id)
);
create index prompts_session_idx on scsql.prompts (project_id, session_id);
comment on table scsql.prompts is
  'The prompts a person gave an agent, redacted, linked to the session. Chained and append-only.';

create table scsql.capture_events (
  project_id  bigint not null references scsql.projects,
  event_key   text not null check (char_length(event_key) between 1 and 200),
  agent_id    bigint not null,
  captured_at timestamptz not null default now(),
  primary key (project_id, event_key)
);
comment on table scsql.capture_events is
  'The keys of the events capture wrote (a hook event id, or a tool call''s tool_use_id), each written in the transaction of its rows, so a replayed or re-imported event adds nothing.';

alter table scsql.learnings
  add column input_key text,
  add column deny      boolean not null default false,
  add column pattern   text check (char_length(pattern) <= 1000);
create index learnings_tool_idx on scsql.learnings (project_id, tool, input_key) where kind = 'failure';
