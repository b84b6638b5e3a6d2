-- 0211 remember looks up the open conflicts of one key (either side of the
-- pair) on every call: one partial index per side, so the lookup does not
-- read every open conflict of the project.

create index fact_conflicts_open_key_idx on scsql.fact_conflicts (project_id, key) where resolved_at is null;
create index fact_conflicts_open_other_idx on scsql.fact_conflicts (project_id, other_key) where resolved_at is null;
