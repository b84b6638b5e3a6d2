-- 0113 audit: names for the table-wide check constraints that PostgreSQL
-- had named <table>_check, so that a violation (and the SC code that
-- sql/90_constraints.sql maps to it) says which rule was broken.

alter table scsql.outcomes rename constraint outcomes_check to outcomes_names_subject;
alter table scsql.checkpoint_segments rename constraint checkpoint_segments_check to checkpoint_segments_seq_order;
alter table scsql.chain_quarantines rename constraint chain_quarantines_check to chain_quarantines_acknowledged_by;
alter table scsql.partition_retirements rename constraint partition_retirements_check to partition_retirements_bounds;
