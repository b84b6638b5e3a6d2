-- 0863 repo_map's second step follows the strongest links into each file
-- (sql/70_code.sql): the links into a file are read by their share, the
-- strongest first, from an index that also serves every lookup by
-- destination the one it replaces did.

create index code_links_dst_share_idx on scsql.code_links (project_id, dst_file_id, in_share desc);
drop index scsql.code_links_dst_idx;
