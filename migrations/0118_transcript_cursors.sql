-- 0118 transcript cursors: how far each session's transcript was kept.
-- PreCompact, SessionEnd and `scsql import claude` all read a Claude Code
-- transcript into the session's summary and conversation text; the cursor
-- (the uuid of the last message kept, and the number of conversation parts
-- written) lets each later read add only what follows it. The session is
-- checked by the functions (sessions is append-only: no foreign key may lock it).

create table scsql.transcript_cursors (
  project_id  bigint not null references scsql.projects,
  session_id  bigint not null,
  cursor      text check (char_length(cursor) between 1 and 200),
  parts       integer not null default 0 check (parts >= 0),
  messages    bigint not null default 0 check (messages >= 0),
  updated_at  timestamptz not null default now(),
  primary key (project_id, session_id)
);
comment on table scsql.transcript_cursors is
  'Per session: the uuid of the last transcript message kept in its summary and conversation text, the conversation parts written and the messages read, so the next read of the transcript adds only what is new.';
