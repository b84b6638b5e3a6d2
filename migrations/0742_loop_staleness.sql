-- Open loops leave SessionStart's context (recall_context) once nobody has
-- touched them for the project's loop_stale_after (default 30 days), unless
-- pinned; they stay open, listed by open_loops and the viewer, until closed.
alter table scsql.memory_settings
  add column loop_stale_after interval not null default interval '30 days'
    constraint memory_settings_loop_stale_after_check
    check (loop_stale_after >= interval '1 hour' and loop_stale_after <= interval '3650 days');
comment on column scsql.memory_settings.loop_stale_after is
  'How long an open loop nobody touched (opened again, pinned) stays in recall_context before it leaves it, unless pinned (default 30 days).';

alter table scsql.open_loops
  add column pinned boolean not null default false,
  add column touched_at timestamptz;
comment on column scsql.open_loops.pinned is 'A pinned open loop stays in recall_context however long it is untouched (scsql.pin_loop).';
comment on column scsql.open_loops.touched_at is 'When the loop was last opened again or pinned (NULL: never since it was opened).';

-- set_memory_lifecycle takes and returns loop_stale_after.
drop function if exists scsql.set_memory_lifecycle(text, interval, interval);
