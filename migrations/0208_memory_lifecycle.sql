-- 0208 memory lifecycle: use and decay of facts and sources, fact TTLs,
-- pinned sources, the per-project expiry of external sources, and
-- decisions and open loops as first-class memory.
--
-- Use is recorded in place (last_used_at, use_count), at most once per
-- memory_settings.use_granularity per row, by scsql._note_use with SKIP
-- LOCKED, so a reader never waits on a writer's row lock (sql/24_context.sql).

alter table scsql.memory_facts
  add column last_used_at timestamptz,
  add column use_count integer not null default 0 constraint memory_facts_use_count_check check (use_count >= 0),
  add column expires_at timestamptz;
comment on column scsql.memory_facts.last_used_at is 'When recall_context, pack or search last returned the fact (recorded at most once per use_granularity).';
comment on column scsql.memory_facts.use_count is 'How often the fact was returned (at most one count per use_granularity).';
comment on column scsql.memory_facts.expires_at is 'End of the fact''s TTL (remember''s p_ttl); the worker purges it after that, and nothing returns it.';
create index memory_facts_expiry_idx on scsql.memory_facts (project_id, expires_at) where expires_at is not null;

alter table scsql.kb_sources
  add column last_used_at timestamptz,
  add column use_count integer not null default 0 constraint kb_sources_use_count_check check (use_count >= 0),
  add column pinned boolean not null default false;
comment on column scsql.kb_sources.last_used_at is 'When recall_context, pack or search last returned a chunk of the source (recorded at most once per use_granularity).';
comment on column scsql.kb_sources.use_count is 'How often a chunk of the source was returned (at most one count per use_granularity).';
comment on column scsql.kb_sources.pinned is 'Set by scsql.pin: the source never expires and never decays in ranking (like tier pinned, which survives no re-index with another tier).';
create index kb_sources_external_idx on scsql.kb_sources (project_id, updated_at)
  where trust = 'external' and not pinned and tier <> 'pinned';

create table scsql.memory_settings (
  project_id      bigint primary key references scsql.projects,
  external_ttl    interval not null default interval '14 days'
                  constraint memory_settings_external_ttl_check
                  check (external_ttl >= interval '1 hour' and external_ttl <= interval '3650 days'),
  use_granularity interval not null default interval '1 minute'
                  constraint memory_settings_use_granularity_check
                  check (use_granularity >= interval '0' and use_granularity <= interval '1 day'),
  updated_at      timestamptz not null default now()
);
comment on table scsql.memory_settings is
  'Per-project memory lifecycle settings (defaults when the project has no row): external_ttl, how long after it was last indexed an external source that is not pinned is kept (14 days); use_granularity, how often at most one fact or source records a use (1 minute). Changed by administrators with scsql.set_memory_lifecycle.';

-- Decisions: append-only. A decision that supersedes another names it;
-- the older one stays, as history (superseded: some decision names it).
create table scsql.decisions (
  project_id  bigint not null references scsql.projects,
  decision_id bigint generated always as identity,
  title       text not null constraint decisions_title_check check (char_length(title) between 1 and 200),
  rationale   text not null constraint decisions_rationale_check check (char_length(rationale) between 1 and 4000),
  supersedes  bigint,
  decided_by  bigint not null references scsql.agents,
  decided_at  timestamptz not null default now(),
  source_path text,
  primary key (project_id, decision_id),
  constraint decisions_supersedes_fkey foreign key (project_id, supersedes) references scsql.decisions (project_id, decision_id),
  constraint decisions_supersedes_once unique (project_id, supersedes)
);
create index decisions_recent_idx on scsql.decisions (project_id, decided_at desc, decision_id desc);
comment on table scsql.decisions is
  'Decisions of a project, with their rationale: written by decide and by summarize_session (its decisions), never changed. A decision that supersedes another names it (each is superseded at most once); the older one stays as history. Search returns current decisions as kind decision (source_path decision:<id>).';

create table scsql.open_loops (
  project_id  bigint not null references scsql.projects,
  loop_id     bigint generated always as identity,
  text        text not null constraint open_loops_text_check check (char_length(text) between 1 and 2000),
  owner       text constraint open_loops_owner_check check (char_length(owner) between 1 and 200),
  opened_by   bigint not null references scsql.agents,
  opened_at   timestamptz not null default now(),
  source_path text,
  closed_at   timestamptz,
  closed_by   bigint references scsql.agents,
  resolution  text constraint open_loops_resolution_check check (char_length(resolution) between 1 and 4000),
  primary key (project_id, loop_id),
  constraint open_loops_closed_check check ((closed_at is null) = (closed_by is null) and (closed_at is null) = (resolution is null))
);
-- One open loop per text: a summary that repeats an open task finds it.
create unique index open_loops_open_text_key on scsql.open_loops (project_id, md5(text)) where closed_at is null;
create index open_loops_open_idx on scsql.open_loops (project_id, opened_at desc) where closed_at is null;
comment on table scsql.open_loops is
  'Open loops (open tasks, questions) of a project: written by open_loop and by summarize_session (its open tasks), closed by close_loop with a resolution; closed loops stay as history. One open loop per text.';

-- Functions that gained trailing defaulted arguments (ranking weights, a
-- fact's TTL): sql/ creates them again with the new signatures.
drop function if exists scsql.remember(text, text, integer);
drop function if exists scsql.recall_context(integer);
drop function if exists scsql.pack(text, integer, vector, text);
drop function if exists scsql.search(text, integer, text[], text, timestamptz, text, double precision, double precision,
                                     double precision, double precision, double precision, integer, vector, text);
