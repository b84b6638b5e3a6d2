-- task_files_exclusive compares project_id with = as well as span with &&,
-- so task_files can be sharded by project_id on Citus (which refuses an
-- exclusion constraint that does not compare the distribution column with
-- =). A span already starts with its project's id, so exactly the same pairs
-- of paths conflict as before. project_id with = needs btree_gist (the
-- bootstrap creates it).
alter table scsql.task_files
  drop constraint task_files_exclusive,
  add constraint task_files_exclusive exclude using gist (project_id with =, span with &&);
