-- 0761 The imports of a file by the name they bind: how a call finds the
-- module its qualifier names (scsql._code_resolve_imported and _global).

create index code_references_import_alias_idx on scsql.code_references (project_id, file_id, alias)
  where kind = 'import';
