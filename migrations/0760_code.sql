-- 0760 Code knowledge: the project's source files as a symbol graph.
--
-- One row per file parsed, per definition in it (module, class, function,
-- method, ...) and per reference (a call, an inheritance, an import) from
-- a definition or a file's top level. A reference is resolved to one
-- definition where it can be (resolution says how) and keeps its
-- candidates where it cannot. code_links is the graph between files that
-- ranking walks (scsql.rank_code). Written by the functions of
-- sql/70_code.sql only; agents read their own project's rows.
--
-- Every key holds project_id first (one project's rows live together on
-- Citus). Definition and reference ids are not foreign keys: a reference
-- names a definition of another file, which re-indexing that file may
-- remove, and resolution finds it again.

create table scsql.code_files (
  project_id   bigint not null references scsql.projects,
  file_id      bigint generated always as identity,
  path         text not null,
  language     text,
  module       text not null,
  module_keys  text[] not null,
  content_hash text not null,
  status       text not null constraint code_files_status_check check (status in ('parsed', 'partial', 'text')),
  error_lines  integer[] not null default '{}',
  rank         double precision not null default 0,
  indexed_at   timestamptz not null default now(),
  indexed_by   bigint not null references scsql.agents,
  primary key (project_id, file_id),
  constraint code_files_path_key unique (project_id, path)
);
create index code_files_module_idx on scsql.code_files (project_id, module);
create index code_files_module_keys_idx on scsql.code_files using gin (module_keys);
create index code_files_rank_idx on scsql.code_files (project_id, rank desc);
comment on table scsql.code_files is
  'A source file of the project as parsed: path (relative to the project root), language (NULL: held as text, no symbols), module (how imports name it: a/b/c for a/b/c.py; module_keys are its trailing parts, for matching imports), content_hash (sha256 of the file as read), status (parsed; partial: the grammar met errors at error_lines and what parsed around them is kept; text), rank (PageRank over code_links, scsql.rank_code).';

create table scsql.code_definitions (
  project_id bigint not null,
  def_id     bigint generated always as identity,
  file_id    bigint not null,
  key        text not null,
  parent_id  bigint,
  kind       text not null constraint code_definitions_kind_check check (kind in (
               'module', 'class', 'interface', 'type', 'function', 'method', 'macro', 'constant',
               'table', 'view', 'trigger', 'sequence', 'script', 'target')),
  name       text not null,
  qualname   text not null,
  signature  text not null,
  line_start integer not null,
  line_end   integer not null,
  rank       double precision not null default 0,
  primary key (project_id, def_id),
  constraint code_definitions_key_key unique (project_id, file_id, key),
  foreign key (project_id, file_id) references scsql.code_files (project_id, file_id) on delete cascade
);
create index code_definitions_name_idx on scsql.code_definitions (project_id, name);
create index code_definitions_qualname_idx on scsql.code_definitions (project_id, qualname);
comment on table scsql.code_definitions is
  'A definition in a file: kind, name, qualified name (Class.method), signature (its text up to the body, one line), line span, and parent_id (the definition it is nested in). key (the qualified name, #2, #3 for repeats) keeps its def_id while the file is re-indexed, so references to it stay resolved. rank: how much the rest of the code leans on it (scsql.rank_code).';

create table scsql.code_references (
  project_id     bigint not null,
  ref_id         bigint generated always as identity,
  file_id        bigint not null,
  from_def_id    bigint,
  kind           text not null constraint code_references_kind_check check (kind in ('call', 'inherit', 'import')),
  name           text not null,
  qualifier      text,
  alias          text,
  lines          integer[] not null,
  n              integer not null,
  resolution     text not null default 'pending' constraint code_references_resolution_check check (resolution in (
                   'pending', 'local', 'import', 'unique', 'ambiguous', 'unresolved', 'file', 'module', 'external')),
  target_def_id  bigint,
  target_file_id bigint,
  target_module  text,
  candidates     bigint[],
  primary key (project_id, ref_id),
  foreign key (project_id, file_id) references scsql.code_files (project_id, file_id) on delete cascade
);
create index code_references_file_idx on scsql.code_references (project_id, file_id);
create index code_references_name_idx on scsql.code_references (project_id, name);
create index code_references_target_idx on scsql.code_references (project_id, target_def_id)
  where target_def_id is not null;
create index code_references_target_file_idx on scsql.code_references (project_id, target_file_id)
  where target_file_id is not null;
create index code_references_pending_idx on scsql.code_references (project_id, ref_id) where resolution = 'pending';
comment on table scsql.code_references is
  'A reference from a definition (from_def_id; NULL: the file''s top level) of a file: a call of NAME (qualifier a.b for a.b.f()), an inheritance of NAME, or an import of module NAME (qualifier: the symbol imported; alias: the name it is bound to), with the lines it occurs on and how often (n). resolution: pending (not yet resolved); local, import (through the file''s imports) or unique (the only definition of that name): target_def_id; ambiguous: candidates (the definitions it may be, best first); unresolved (no definition of that name in the project: a library''s or the language''s); for an import, file (target_file_id), module (several files, target_module: a Go package) or external.';

create table scsql.code_links (
  project_id  bigint not null,
  src_file_id bigint not null,
  dst_file_id bigint not null,
  weight      double precision not null,
  primary key (project_id, src_file_id, dst_file_id)
);
create index code_links_dst_idx on scsql.code_links (project_id, dst_file_id);
comment on table scsql.code_links is
  'The graph between files that ranking walks, made by scsql.rank_code from the references: SRC refers to what DST defines, with WEIGHT (the square root of the references, a tenth for private names, shared among the candidates of an ambiguous one; an import counts one).';

create table scsql.code_state (
  project_id bigint primary key references scsql.projects,
  changed_at timestamptz not null default now(),
  ranked_at  timestamptz
);
comment on table scsql.code_state is
  'One row per project with code indexed: when its graph last changed and when it was last ranked. Writers of the graph lock it (one writer of a project''s graph at a time).';
