-- 0780 distillation: a model, run outside the database by scsql worker,
-- turns a session into facts, decisions, open loops and a summary, written
-- by the project's distiller agent through the memory functions, each item
-- signed and citing the prompts, tool calls and conversation chunks it came
-- from (sql/65_distill.sql).
--
-- distill_settings: whether a project distils, who its distiller is, the
-- model command and the daily token budget. distill_jobs: one job per
-- session segment (what the session added since the last job), with what it
-- cost and what came of it. distill_items: each item a job wrote, chained
-- and signed by the distiller. distill_citations: the rows each item cites.
-- distill_withdrawn: the decisions an undo withdrew, kept whole.

insert into scsql.team_roles (name, orchestrates, description)
values ('distiller', false, 'distils sessions into facts, decisions and open loops with a model (scsql worker --job distill)')
on conflict (name) do nothing;

create table scsql.distill_settings (
  project_id      bigint primary key references scsql.projects,
  enabled         boolean not null default true,
  distiller_id    bigint not null references scsql.agents,
  command         text[],
  model           text not null default 'haiku',
  daily_tokens    integer not null default 200000,
  max_input_chars integer not null default 60000,
  updated_at      timestamptz not null default now(),
  updated_by      text not null default session_user,
  constraint distill_settings_command_check check (cardinality(command) between 1 and 64),
  constraint distill_settings_model_check check (model ~ '^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,99}$'),
  constraint distill_settings_daily_tokens_check check (daily_tokens between 1000 and 100000000),
  constraint distill_settings_max_input_chars_check check (max_input_chars between 2000 and 1000000)
);
comment on table scsql.distill_settings is
  'Per project: whether sessions are distilled (enabled), the distiller agent that writes what the model proposes, the model command scsql worker runs (NULL: claude -p with MODEL), the daily token budget (UTC days) and how many characters of conversation one job sends at most. Set by administrators with scsql.set_distill; no row: the project does not distil.';

create table scsql.distill_jobs (
  project_id      bigint not null references scsql.projects,
  job_id          bigint generated always as identity,
  session_id      bigint not null,
  segment         integer not null,
  task_id         bigint,
  prompts_from    bigint not null default 0,
  prompts_upto    bigint not null default 0,
  tool_calls_from bigint not null default 0,
  tool_calls_upto bigint not null default 0,
  chunks_from     bigint not null default 0,
  chunks_upto     bigint not null default 0,
  queued_by       bigint not null references scsql.agents,
  queued_at       timestamptz not null default now(),
  state           text not null default 'queued',
  started_at      timestamptz,
  finished_at     timestamptz,
  reserved_tokens integer not null default 0,
  input_tokens    integer,
  output_tokens   integer,
  output_hash     text,
  written         integer,
  refusals        jsonb,
  error           text,
  undone_at       timestamptz,
  undone_by       bigint references scsql.agents,
  primary key (project_id, job_id),
  constraint distill_jobs_segment_key unique (project_id, session_id, segment),
  constraint distill_jobs_state_check
    check (state in ('queued', 'running', 'deferred', 'done', 'rejected', 'failed', 'skipped'))
);
create index distill_jobs_started_idx on scsql.distill_jobs (project_id, started_at) where started_at is not null;
comment on table scsql.distill_jobs is
  'One distillation job per session segment: the prompts, tool calls and conversation chunks of the session with ids in (*_from, *_upto]; its task in the queue (team role distiller); its state; the tokens it reserved from the daily budget and those the model used; the sha256 of the model''s output; how many items were written and why others were refused; when and by whom it was undone.';

create sequence scsql.distill_items_id_seq as bigint;
create table scsql.distill_items (
  project_id bigint not null references scsql.projects,
  item_id    bigint not null default nextval('scsql.distill_items_id_seq'),
  job_id     bigint not null,
  kind       text not null,
  item       jsonb not null,
  cites      jsonb not null,
  action     text not null,
  target     text not null,
  undo       jsonb,
  at         timestamptz not null,
  author_id  bigint not null,
  key_id     integer not null,
  chain_id   bigint not null,
  seq        bigint not null,
  prev_hash  bytea not null,
  row_hash   bytea not null,
  signature  bytea not null,
  primary key (project_id, item_id)
);
alter sequence scsql.distill_items_id_seq owned by scsql.distill_items.item_id;
create index distill_items_job_idx on scsql.distill_items (project_id, job_id, item_id);
create index distill_items_target_idx on scsql.distill_items (project_id, target);
comment on table scsql.distill_items is
  'Each item a distillation job wrote: its kind (fact, decision, loop_opened, loop_closed, contradiction, summary), the item as the model proposed it (redacted) and the rows it cites, signed by the distiller; what the database did with it (action), the memory it names (target: a fact key, decision:<id>, loop:<id>, conflict:<id> or a source path) and what an undo needs. Chained, append-only.';

create table scsql.distill_citations (
  project_id bigint not null references scsql.projects,
  item_id    bigint not null,
  cited      text not null,
  cited_id   bigint not null,
  primary key (project_id, item_id, cited, cited_id),
  constraint distill_citations_cited_check check (cited in ('prompt', 'tool_call', 'chunk'))
);
create index distill_citations_cited_idx on scsql.distill_citations (project_id, cited, cited_id);
comment on table scsql.distill_citations is
  'The prompts, tool calls and conversation chunks each distilled item cites (checked when written: rows of the job''s session segment, in the project).';

create table scsql.distill_withdrawn (
  project_id   bigint not null references scsql.projects,
  decision_id  bigint not null,
  job_id       bigint not null,
  decision     jsonb not null,
  withdrawn_at timestamptz not null default now(),
  withdrawn_by bigint not null references scsql.agents,
  primary key (project_id, decision_id)
);
comment on table scsql.distill_withdrawn is
  'Distilled decisions an undo withdrew, whole (the row as it was): the decision leaves scsql.decisions, the one it superseded is current again, and the memory history records the withdrawal.';
