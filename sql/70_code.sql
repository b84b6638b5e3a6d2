-- scsql code knowledge: the symbol graph of a project's source files
-- (migrations/0760_code.sql), how it is written and resolved, and what is
-- read from it: the repo map, file and project cards, graph queries, and
-- the definitions a search query names.
--
-- Writing (the index tool, scsql/code/index.py, one file a transaction with
-- its chunks): index_code stores a file's definitions and references as
-- the parser found them; forget_code removes files; code_changes says
-- which files of a tree need their symbols (re)read. resolve_code resolves
-- pending references, rank_code ranks files and definitions (PageRank over
-- code_links). These are granted to scsql_worker: callable by agents
-- through scsql, not tools.
--
-- Reading (tools): repo_map, file_card, project_card, graph_neighbors,
-- graph_path. They run as the caller, under row-level security: a card
-- shows the edits, decisions and lessons the caller may read.

select scsql._define_error(code, name, meaning) from (values
  ('SC260', 'code_path_invalid', 'A code path must be a path relative to the project root (no ".", ".." or empty part, no leading "/"), 1 to 1,024 characters.'),
  ('SC261', 'code_payload_invalid', 'What the parser found in a file must be a JSON array of definitions {key, parent, kind, name, qualname, signature, line_start, line_end} and one of references {kind, name, qualifier, alias, from, lines, n}, with a sha256 content hash and status parsed, partial or text.'),
  ('SC262', 'repo_map_budget_invalid', 'repo_map''s budget is 50 to 20,000 tokens.'),
  ('SC263', 'code_focus_invalid', 'A focus is at most 100 entries (paths, names or text), each at most 2,000 characters.'),
  ('SC264', 'code_file_unknown', 'No file of the acting agent''s project with that path has been indexed (scsql index PATH, or the index tool, reads the files).'),
  ('SC265', 'graph_node_invalid', 'A graph node is a file path, path#qualified.name, a definition''s name, or agent:<name>, task:<id>, decision:<id>, memory:<key>; 1 to 1,100 characters.'),
  ('SC266', 'graph_node_unknown', 'No file, definition, agent, task, decision or fact of the acting agent''s project is that node.'),
  ('SC267', 'graph_direction_invalid', 'A graph direction is out (what the node uses), in (what uses it) or both.'),
  ('SC268', 'graph_kinds_invalid', 'Graph edge kinds are calls, inherits, imports, defines, edited, owns and mentions.'),
  ('SC269', 'graph_depth_invalid', 'A graph depth is 1 to 5 (graph_path: 1 to 6).'),
  ('SC270', 'code_manifest_invalid', 'code_changes takes a directory relative to the project root and a JSON array of {path, content_hash} under it.')
) as t(code, name, meaning);

-- ---------------------------------------------------------------------------
-- Checking what a writer sends
-- ---------------------------------------------------------------------------

create or replace function scsql._code_path_ok(p_path text)
returns boolean
language sql immutable
as $$
  select p_path is not null and char_length(p_path) between 1 and 1024
     and array_to_string(scsql._path_parts(p_path), '/') is not distinct from p_path
     and left(p_path, 1) <> '/'
$$;
comment on function scsql._code_path_ok(text) is
  'Private. True when PATH is a path relative to the project root spelled as _path_parts reads it (no ".", ".." or empty part), 1 to 1,024 characters: how sources and code files are keyed.';

create or replace function scsql._code_check_payload(p_content_hash text, p_language text, p_module text, p_status text,
                                                     p_error_lines integer[], p_definitions jsonb, p_references jsonb)
returns void
language plpgsql immutable
as $$
declare
  v_bad text;
begin
  v_bad := case
    when p_content_hash is null or p_content_hash !~ '^[0-9a-f]{64}$' then 'content_hash must be a sha256 in hex'
    when char_length(p_language) > 40 then 'language is at most 40 characters'
    when p_module is null or char_length(p_module) > 1024 then 'module is 0 to 1,024 characters'
    when p_status is null or p_status not in ('parsed', 'partial', 'text') then 'status is parsed, partial or text'
    when cardinality(p_error_lines) > 100 then 'error_lines holds at most 100 lines'
    when jsonb_typeof(p_definitions) is distinct from 'array' or jsonb_array_length(p_definitions) > 50000
      then 'definitions must be a JSON array of at most 50,000 objects'
    when jsonb_typeof(p_references) is distinct from 'array' or jsonb_array_length(p_references) > 200000
      then 'references must be a JSON array of at most 200,000 objects'
  end;
  if v_bad is null then
    select 'definition ' || coalesce(d ->> 'key', '?') || ': ' || case
        when jsonb_typeof(d) <> 'object' then 'not an object'
        when coalesce(char_length(d ->> 'key'), 0) not between 1 and 1100 then 'key is 1 to 1,100 characters'
        when d ->> 'kind' is null or d ->> 'kind' not in ('module', 'class', 'interface', 'type', 'function', 'method',
             'macro', 'constant', 'table', 'view', 'trigger', 'sequence', 'script', 'target') then 'unknown kind'
        when coalesce(char_length(d ->> 'name'), 0) not between 1 and 200 then 'name is 1 to 200 characters'
        when coalesce(char_length(d ->> 'qualname'), 0) not between 1 and 1000 then 'qualname is 1 to 1,000 characters'
        when char_length(coalesce(d ->> 'signature', '')) > 400 then 'signature is at most 400 characters'
        when jsonb_typeof(d -> 'line_start') <> 'number' or jsonb_typeof(d -> 'line_end') <> 'number'
          or (d ->> 'line_start')::numeric not between 1 and 10000000
          or (d ->> 'line_end')::numeric not between (d ->> 'line_start')::numeric and 10000000
          then 'lines are 1-based, line_end at least line_start'
      end into v_bad
    from jsonb_array_elements(p_definitions) d
    where jsonb_typeof(d) <> 'object' or coalesce(char_length(d ->> 'key'), 0) not between 1 and 1100
       or d ->> 'kind' is null or d ->> 'kind' not in ('module', 'class', 'interface', 'type', 'function', 'method',
          'macro', 'constant', 'table', 'view', 'trigger', 'sequence', 'script', 'target')
       or coalesce(char_length(d ->> 'name'), 0) not between 1 and 200
       or coalesce(char_length(d ->> 'qualname'), 0) not between 1 and 1000
       or char_length(coalesce(d ->> 'signature', '')) > 400
       or jsonb_typeof(d -> 'line_start') <> 'number' or jsonb_typeof(d -> 'line_end') <> 'number'
       or (d ->> 'line_start')::numeric not between 1 and 10000000
       or (d ->> 'line_end')::numeric not between (d ->> 'line_start')::numeric and 10000000
    limit 1;
  end if;
  if v_bad is null then
    select 'reference ' || coalesce(r ->> 'name', '?') || ': kind is call, inherit or import; name 1 to 300 characters; '
           || 'qualifier and alias at most 300; lines an array of line numbers; n at least 1' into v_bad
    from jsonb_array_elements(p_references) r
    where jsonb_typeof(r) <> 'object' or r ->> 'kind' is null or r ->> 'kind' not in ('call', 'inherit', 'import')
       or coalesce(char_length(r ->> 'name'), 0) not between 1 and 300
       or char_length(r ->> 'qualifier') > 300 or char_length(r ->> 'alias') > 300 or char_length(r ->> 'from') > 1100
       or jsonb_typeof(r -> 'lines') is distinct from 'array' or jsonb_array_length(r -> 'lines') > 1000
       or jsonb_typeof(r -> 'n') is distinct from 'number' or (r ->> 'n')::numeric not between 1 and 1000000000
    limit 1;
  end if;
  if v_bad is not null then
    raise exception using errcode = 'SC261', message = 'index_code: ' || v_bad,
      hint = 'Nothing was stored. scsql index (scsql/code/parse.py) sends what the parser found; see index_code''s comment.';
  end if;
end
$$;
comment on function scsql._code_check_payload(text, text, text, text, integer[], jsonb, jsonb) is
  'Private. Raises SC261 naming the first thing wrong in what index_code was sent (hash, status, a definition, a reference).';

create or replace function scsql._code_lock(p_project bigint)
returns void
language sql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  insert into scsql.code_state (project_id) values (p_project) on conflict do nothing;
  select 1 from scsql.code_state where project_id = p_project for update;
$$;
comment on function scsql._code_lock(bigint) is
  'Private. Creates the project''s code_state row if needed and locks it: one writer of a project''s symbol graph at a time (other projects are not delayed).';

create or replace function scsql._code_module_keys(p_module text)
returns text[]
language sql immutable
as $$
  select coalesce(array_agg(array_to_string(p[i:], '/') order by i), '{}')
  from (select string_to_array(p_module, '/') as p) x, generate_series(1, cardinality(x.p)) i
  where p_module <> ''
$$;
comment on function scsql._code_module_keys(text) is
  'Private. The trailing parts of a module key: a/b/c gives a/b/c, b/c and c. An import of b/c finds the file whose module ends so.';

-- ---------------------------------------------------------------------------
-- Writing a file's symbols
-- ---------------------------------------------------------------------------

create or replace function scsql._code_store_definitions(p_project bigint, p_file bigint, p_definitions jsonb)
returns text[]
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
-- Definitions keep their def_id by key; those no longer in the file go.
-- Returns the names whose count in the file changed: references to them
-- elsewhere may resolve differently now.
declare
  v_changed text[];
begin
  with old as (
    select name, count(*) as n from scsql.code_definitions where project_id = p_project and file_id = p_file group by name
  ), new as (
    select name, count(*) as n
    from (select distinct on (d.key) d.key, d.name from jsonb_to_recordset(p_definitions) d(key text, name text)) x
    group by name
  )
  select coalesce(array_agg(coalesce(o.name, n.name)), '{}') into v_changed
  from old o full join new n using (name) where o.n is distinct from n.n;
  delete from scsql.code_definitions d
  where d.project_id = p_project and d.file_id = p_file
    and not exists (select from jsonb_to_recordset(p_definitions) n(key text) where n.key = d.key);
  insert into scsql.code_definitions as d (project_id, file_id, key, kind, name, qualname, signature, line_start, line_end)
  select distinct on (n.key) p_project, p_file, n.key, n.kind, n.name, n.qualname, left(coalesce(n.signature, ''), 200),
         n.line_start, n.line_end
  from jsonb_to_recordset(p_definitions) n(key text, kind text, name text, qualname text, signature text,
                                            line_start integer, line_end integer)
  order by n.key
  on conflict (project_id, file_id, key) do update
    set kind = excluded.kind, name = excluded.name, qualname = excluded.qualname, signature = excluded.signature,
        line_start = excluded.line_start, line_end = excluded.line_end;
  update scsql.code_definitions d set parent_id = p.def_id
  from jsonb_to_recordset(p_definitions) n(key text, parent text)
  left join scsql.code_definitions p on p.project_id = p_project and p.file_id = p_file and p.key = n.parent
  where d.project_id = p_project and d.file_id = p_file and d.key = n.key and d.parent_id is distinct from p.def_id;
  return v_changed;
end
$$;
comment on function scsql._code_store_definitions(bigint, bigint, jsonb) is
  'Private. Stores a file''s definitions (rows as index_code takes them): each keeps its def_id by key, those gone are deleted, parents are linked by key. Returns the names whose count in the file changed.';

create or replace function scsql._code_store_references(p_project bigint, p_file bigint, p_references jsonb)
returns integer
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_n integer;
begin
  delete from scsql.code_references where project_id = p_project and file_id = p_file;
  insert into scsql.code_references (project_id, file_id, from_def_id, kind, name, qualifier, alias, lines, n)
  select p_project, p_file, d.def_id, r.kind, r.name, r.qualifier, r.alias,
         array(select x::integer from jsonb_array_elements_text(r.lines) x where x ~ '^[0-9]{1,9}$'), r.n
  from jsonb_to_recordset(p_references) r(kind text, name text, qualifier text, alias text, "from" text, lines jsonb,
                                          n integer)
  left join scsql.code_definitions d on d.project_id = p_project and d.file_id = p_file and d.key = r."from";
  get diagnostics v_n = row_count;
  return v_n;
end
$$;
comment on function scsql._code_store_references(bigint, bigint, jsonb) is
  'Private. Replaces a file''s references (rows as index_code takes them), each placed in the definition it occurs in (by key), all pending resolution.';

create or replace function scsql._code_invalidate(p_project bigint, p_file bigint, p_names text[], p_new boolean)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
-- What another file's references found may have changed: those of the
-- names whose definitions changed go back to pending; so do, for a new
-- file, the imports its module now answers, with the calls of the files
-- that import it.
declare
  v_keys text[];
begin
  update scsql.code_references r
     set resolution = 'pending', target_def_id = null, target_file_id = null, candidates = null
   where r.project_id = p_project and r.name = any(p_names) and r.kind <> 'import' and r.resolution <> 'pending';
  if p_new then
    select module_keys into v_keys from scsql.code_files where project_id = p_project and file_id = p_file;
    update scsql.code_references r
       set resolution = 'pending', target_def_id = null, target_file_id = null, target_module = null, candidates = null
     where r.project_id = p_project and r.resolution <> 'pending'
       and r.file_id in (select i.file_id from scsql.code_references i
                         where i.project_id = p_project and i.kind = 'import' and i.resolution = 'external'
                           and (i.name = any(v_keys) or i.name || '/' || i.qualifier = any(v_keys)));
  end if;
end
$$;
comment on function scsql._code_invalidate(bigint, bigint, text[], boolean) is
  'Private. Sends back to pending resolution the references a change of file FILE may resolve differently: those naming NAMES (whose definitions changed), and for a NEW file every reference of the files whose imports it may answer.';

create or replace function scsql.index_code(
  p_path text, p_content_hash text, p_language text, p_module text, p_status text, p_error_lines integer[],
  p_definitions jsonb, p_references jsonb)
returns table (path text, definitions integer, "references" integer, status text)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_project bigint := scsql._my_project();
  v_file bigint;
  v_new boolean;
  v_names text[];
  v_refs integer;
begin
  if not scsql._code_path_ok(p_path) then
    raise exception using errcode = 'SC260', message = format('index_code: %L is not a path relative to the project root',
                                                              left(p_path, 200)),
      hint = 'Paths are spelled as the index tool stores sources: relative, no ".", ".." or empty part.';
  end if;
  perform scsql._code_check_payload(p_content_hash, p_language, p_module, p_status, p_error_lines,
                                    p_definitions, p_references);
  perform scsql._code_lock(v_project);
  -- What is stored is redacted like every text (a default argument may hold a token).
  if scsql._redact(p_definitions::text) <> p_definitions::text then
    p_definitions := scsql._redact_jsonb(p_definitions);
  end if;
  if scsql._redact(p_references::text) <> p_references::text then
    p_references := scsql._redact_jsonb(p_references);
  end if;
  insert into scsql.code_files as f (project_id, path, language, module, module_keys, content_hash, status, error_lines,
                                     indexed_by)
  values (v_project, p_path, p_language, p_module, scsql._code_module_keys(p_module), p_content_hash, p_status,
          coalesce(p_error_lines, '{}'), scsql._my_agent_id())
  on conflict (project_id, path) do update
    set language = excluded.language, module = excluded.module, module_keys = excluded.module_keys,
        content_hash = excluded.content_hash, status = excluded.status, error_lines = excluded.error_lines,
        indexed_at = now(), indexed_by = excluded.indexed_by
  returning f.file_id, (f.xmax = 0) into v_file, v_new;
  v_names := scsql._code_store_definitions(v_project, v_file, p_definitions);
  v_refs := scsql._code_store_references(v_project, v_file, p_references);
  perform scsql._code_invalidate(v_project, v_file, v_names, v_new);
  update scsql.code_state set changed_at = now() where project_id = v_project;
  return query select p_path, jsonb_array_length(p_definitions), v_refs, p_status;
end
$$;
comment on function scsql.index_code(text, text, text, text, text, integer[], jsonb, jsonb) is
  'Stores what the parser found in one source file of your project (the index tool calls it with the file''s chunks). Returns path, definitions, references, status.

Stores the symbols of the file at PATH (relative to the project root) of the acting agent''s project, replacing what was stored for it: CONTENT_HASH (sha256 of the file as read), LANGUAGE (NULL: a file held as text, no symbols), MODULE (how imports name it, a/b/c), STATUS (parsed; partial: the grammar met errors at ERROR_LINES and what parsed around them is kept; text), DEFINITIONS [{key, parent (the key of the definition it is nested in), kind (module, class, interface, type, function, method, macro, constant, table, view, trigger, sequence, script, target), name, qualname, signature, line_start, line_end}] and REFERENCES [{kind (call, inherit, import), name (callee, base or module a/b/c), qualifier (a.b of a.b.f(); an import''s symbol), alias (the name an import binds), from (key of the definition it occurs in; null: top level), lines, n}]. A definition keeps its id while its key stays, so what refers to it stays resolved; the file''s references wait for resolve_code, and so do other files'' references to names whose definitions changed. Text is stored redacted. scsql/code/parse.py makes these from tree-sitter grammars. Raises SC260 for a bad path, SC261 for a bad payload.';

create or replace function scsql.forget_code(p_paths text[])
returns integer
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_project bigint := scsql._my_project();
  v_ids bigint[];
  v_names text[];
begin
  if p_paths is null or cardinality(p_paths) > 100000 then
    raise exception using errcode = 'SC260', message = 'forget_code takes an array of at most 100,000 paths';
  end if;
  perform scsql._code_lock(v_project);
  select array_agg(file_id) into v_ids from scsql.code_files where project_id = v_project and path = any(p_paths);
  if v_ids is null then
    return 0;
  end if;
  select array_agg(distinct name) into v_names from scsql.code_definitions
  where project_id = v_project and file_id = any(v_ids);
  update scsql.code_references r
     set resolution = 'pending', target_def_id = null, target_file_id = null, target_module = null, candidates = null
   where r.project_id = v_project and not r.file_id = any(v_ids)
     and (r.target_file_id = any(v_ids) or (r.kind <> 'import' and r.name = any(v_names)));
  delete from scsql.code_links where project_id = v_project and (src_file_id = any(v_ids) or dst_file_id = any(v_ids));
  delete from scsql.code_files where project_id = v_project and file_id = any(v_ids);
  update scsql.code_state set changed_at = now() where project_id = v_project;
  return cardinality(v_ids);
end
$$;
comment on function scsql.forget_code(text[]) is
  'Removes files from your project''s symbol graph (a file deleted or no longer indexed). Returns how many were removed.

Removes the code files at PATHS (relative to the project root) of the acting agent''s project with their definitions and references; the references elsewhere that found them go back to pending resolution (resolve_code). Paths not indexed are ignored. Raises SC260 for more than 100,000 paths.';

create or replace function scsql.code_changes(p_path text, p_manifest jsonb)
returns table (path text, action text)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_project bigint := scsql._my_project();
  v_prefix text := coalesce(rtrim(p_path, '/'), '');
  v_gone text[];
begin
  if (v_prefix <> '' and not scsql._code_path_ok(v_prefix)) or jsonb_typeof(p_manifest) is distinct from 'array'
     or exists (select from jsonb_array_elements(p_manifest) m
                where jsonb_typeof(m) <> 'object' or not scsql._code_path_ok(m ->> 'path')
                   or coalesce(m ->> 'content_hash', '') !~ '^[0-9a-f]{64}$'
                   or (v_prefix <> '' and left(m ->> 'path', char_length(v_prefix) + 1) <> v_prefix || '/')) then
    raise exception using errcode = 'SC270', message = 'code_changes: bad directory or manifest',
      hint = 'The directory is relative to the project root ('''' for all of it); each entry {path, content_hash} lies under it.';
  end if;
  select array_agg(f.path) into v_gone from scsql.code_files f
  where f.project_id = v_project and (v_prefix = '' or left(f.path, char_length(v_prefix) + 1) = v_prefix || '/')
    and not exists (select from jsonb_array_elements(p_manifest) m where m ->> 'path' = f.path);
  if v_gone is not null then
    perform scsql.forget_code(v_gone);
  end if;
  return query
    select g, 'removed'::text from unnest(v_gone) g
    union all
    select m ->> 'path', 'index' from jsonb_array_elements(p_manifest) m
    where not exists (select from scsql.code_files f where f.project_id = v_project and f.path = m ->> 'path'
                        and f.content_hash = m ->> 'content_hash')
    order by 2, 1;
end
$$;
comment on function scsql.code_changes(text, jsonb) is
  'Compares a directory tree with your project''s symbol graph: removes the files gone, names the files to parse. Returns path, action (index, removed).

PATH is the directory relative to the project root ('''' for all of it) and MANIFEST the files under it [{path, content_hash}] as scsql.index takes them: code files under PATH missing from it are removed (forget_code; action removed) and files whose symbols are missing or of other content are named (action index). Raises SC270 for a bad directory or manifest.';

-- ---------------------------------------------------------------------------
-- Resolving references: imports to files, names to definitions
-- ---------------------------------------------------------------------------

create or replace function scsql._code_common_prefix(p_a text, p_b text)
returns integer
language sql immutable
as $$
  select coalesce((select min(u.i)::integer - 1
                   from unnest(string_to_array(p_a, '/'), string_to_array(p_b, '/')) with ordinality u(x, y, i)
                   where u.x is distinct from u.y),
                  least(cardinality(string_to_array(p_a, '/')), cardinality(string_to_array(p_b, '/'))))
$$;
comment on function scsql._code_common_prefix(text, text) is
  'Private. How many leading path parts two paths share (a/b/c and a/b/d share 2): the nearer of two modules an import may name.';

create or replace function scsql._code_resolve_imports(p_project bigint)
returns void
language sql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  -- An import of module K (symbol S) names the file whose module is K/S
  -- (S a submodule), or ends with K, or for Go is a trailing part of K; of
  -- several, the one nearest the importing file. Several files of one
  -- module (a Go package): resolution module.
  update scsql.code_references r
     set resolution = case when b.n is null then 'external' when b.n = 1 then 'file' else 'module' end,
         target_file_id = case when b.n = 1 then b.file_id end,
         target_module = b.module
    from (
      select r.ref_id, best.module, best.n, best.file_id
      from scsql.code_references r
      join scsql.code_files rf on rf.project_id = r.project_id and rf.file_id = r.file_id
      left join lateral (
        select f.module, count(*) as n, min(f.file_id) as file_id
        from scsql.code_files f
        where f.project_id = p_project and f.language is not null and f.language <> 'manifest'
          and (f.module_keys @> array[r.name]
               or (r.qualifier is not null and f.module_keys @> array[r.name || '/' || r.qualifier])
               or (rf.language = 'go' and f.module = any(scsql._code_module_keys(r.name))))
        group by f.module
        order by (r.qualifier is not null and scsql._code_module_keys(f.module) @> array[r.name || '/' || r.qualifier]) desc,
                 scsql._code_common_prefix(f.module, rf.module) desc, char_length(f.module), f.module
        limit 1
      ) best on true
      where r.project_id = p_project and r.kind = 'import' and r.resolution = 'pending'
    ) b
   where r.project_id = p_project and r.ref_id = b.ref_id;
$$;
comment on function scsql._code_resolve_imports(bigint) is
  'Private. Resolves the project''s pending imports to the file (or the files of one module) they name, best effort: external when no file of the project is that module.';

create or replace function scsql._code_resolve_local(p_project bigint)
returns void
language sql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  -- A call of f() finds f defined at the file's top level, in the caller,
  -- or beside it (a method of the same class, as Java and C++ call them);
  -- self.f(), this.f() a method of the caller's class.
  update scsql.code_references r
     set resolution = 'local', target_def_id = x.def_id, target_file_id = r.file_id, candidates = null
    from (
      select distinct on (r.ref_id) r.ref_id, d.def_id
      from scsql.code_references r
      left join scsql.code_definitions fd on fd.project_id = r.project_id and fd.def_id = r.from_def_id
      left join scsql.code_definitions fp on fp.project_id = r.project_id and fp.def_id = fd.parent_id
      join scsql.code_definitions d on d.project_id = r.project_id and d.file_id = r.file_id and d.name = r.name
      where r.project_id = p_project and r.resolution = 'pending' and r.kind in ('call', 'inherit')
        and case when r.kind = 'inherit' then d.kind in ('class', 'interface', 'type')
                 else d.kind in ('function', 'method', 'class', 'macro') end
        and case
              when r.qualifier is null then d.parent_id is null or d.parent_id = r.from_def_id
                                            or d.parent_id = fd.parent_id
              when r.qualifier in ('self', 'this', 'cls', 'Self', 'super') then d.kind = 'method' and d.parent_id =
                case when fd.kind in ('class', 'interface') then fd.def_id when fd.kind = 'method' then fd.parent_id
                     when fp.kind = 'method' then fp.parent_id end
              else false
            end
      order by r.ref_id, (d.parent_id = r.from_def_id) desc nulls last, (d.parent_id is null) desc, d.def_id
    ) x
   where r.project_id = p_project and r.ref_id = x.ref_id;
$$;
comment on function scsql._code_resolve_local(bigint) is
  'Private. Resolves pending calls and bases to a definition of the same file: f() to f at the top level, in the caller or beside it; self.f() and this.f() to a method of the caller''s class.';

create or replace function scsql._code_resolve_imported(p_project bigint)
returns void
language sql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  -- Through the file's imports: from m import f; f() / import m; m.f() /
  -- from p import m; m.f() / from m import C; C.f().
  update scsql.code_references r
     set resolution = 'import', target_def_id = x.def_id, target_file_id = x.file_id, candidates = null
    from (
      select distinct on (r.ref_id) r.ref_id, d.def_id, d.file_id
      from scsql.code_references r
      join scsql.code_references i
        on i.project_id = r.project_id and i.file_id = r.file_id and i.kind = 'import'
       and i.resolution in ('file', 'module')
       and ((r.qualifier is null and i.alias = r.name and i.qualifier is not null)
            or (r.qualifier is not null and (i.alias = r.qualifier or i.alias = split_part(r.qualifier, '.', 1))))
      join scsql.code_files f on f.project_id = r.project_id and f.module = i.target_module
      join scsql.code_definitions d
        on d.project_id = r.project_id and d.file_id = f.file_id
       and d.name = case when r.qualifier is null then i.qualifier else r.name end
      where r.project_id = p_project and r.resolution = 'pending' and r.kind in ('call', 'inherit')
        and (r.qualifier is null or i.qualifier is null or i.target_module = i.name || '/' || i.qualifier
             or d.qualname = i.qualifier || '.' || r.name)
      order by r.ref_id, (i.alias = r.qualifier) desc, (d.parent_id is null) desc, d.def_id
    ) x
   where r.project_id = p_project and r.ref_id = x.ref_id;
$$;
comment on function scsql._code_resolve_imported(bigint) is
  'Private. Resolves pending calls and bases through the file''s resolved imports: from m import f; f(), import m; m.f(), from p import m; m.f(), from m import C; C.f().';

create or replace function scsql._code_resolve_global(p_project bigint)
returns void
language sql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  -- What is left, by name over the project: the one definition of that
  -- name (unique), several (ambiguous: the ten likeliest kept, a method
  -- of a class the qualifier names first), none (unresolved). f() looks
  -- for functions and classes, x.f() for methods too; a call on a module
  -- imported from outside the project (json.dumps) is unresolved.
  update scsql.code_references r
     set resolution = case when x.n = 0 then 'unresolved' when x.n = 1 then 'unique' else 'ambiguous' end,
         target_def_id = case when x.n = 1 then x.ids[1] end,
         target_file_id = case when x.n = 1 then x.files[1] end,
         candidates = case when x.n > 1 then x.ids end
    from (
      select r.ref_id, c.n, c.ids, c.files
      from scsql.code_references r
      cross join lateral (
        select case when count(*) filter (where q.pref) > 0 then count(*) filter (where q.pref) else count(*) end as n,
               (array_agg(q.def_id order by q.pref desc, q.top desc, q.rank desc, q.def_id))[1:10] as ids,
               (array_agg(q.file_id order by q.pref desc, q.top desc, q.rank desc, q.def_id))[1:10] as files
        from (
          select d.def_id, d.file_id, d.rank, d.parent_id is null as top,
                 coalesce(r.qualifier is not null and r.qualifier not in ('self', 'this', 'cls', 'Self', 'super')
                          and (d.qualname = r.qualifier || '.' || r.name
                               or d.qualname like '%.' || regexp_replace(r.qualifier, '^.*\.', '') || '.' || r.name),
                          false) as pref
          from scsql.code_definitions d
          where d.project_id = r.project_id and d.name = r.name
            and case when r.kind = 'inherit' then d.kind in ('class', 'interface', 'type')
                     when r.qualifier is null then d.kind in ('function', 'class', 'macro')
                     else d.kind in ('method', 'function', 'class') end
            and not exists (select from scsql.code_references i
                            where i.project_id = r.project_id and i.file_id = r.file_id and i.kind = 'import'
                              and i.resolution = 'external' and r.qualifier is not null
                              and i.alias = split_part(r.qualifier, '.', 1))
        ) q
      ) c
      where r.project_id = p_project and r.resolution = 'pending' and r.kind in ('call', 'inherit')
    ) x
   where r.project_id = p_project and r.ref_id = x.ref_id;
$$;
comment on function scsql._code_resolve_global(bigint) is
  'Private. Resolves what the file''s own definitions and imports did not, by name over the project: unique (one definition), ambiguous (several: the ten likeliest kept as candidates), unresolved (none: the language''s or a library''s).';

create or replace function scsql.resolve_code()
returns integer
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_project bigint := scsql._my_project();
  v_n integer;
begin
  perform scsql._code_lock(v_project);
  select count(*) into v_n from scsql.code_references where project_id = v_project and resolution = 'pending';
  if v_n = 0 then
    return 0;
  end if;
  perform scsql._code_resolve_imports(v_project);
  perform scsql._code_resolve_local(v_project);
  perform scsql._code_resolve_imported(v_project);
  perform scsql._code_resolve_global(v_project);
  update scsql.code_state set changed_at = now() where project_id = v_project;
  return v_n;
end
$$;
comment on function scsql.resolve_code()  is
  'Resolves the pending references of your project''s symbol graph to the definitions they name, best effort. Returns how many were pending.

Resolves every pending reference of the acting agent''s project, in order: imports to the file (or the files of a module) they name; calls and bases to a definition of the same file (f() at the top level or beside the caller, self.f() in the caller''s class), then through the file''s imports (from m import f; f(), import m; m.f(), from m import C; C.f()), then by name over the project: unique when one definition has that name, ambiguous when several do (the ten likeliest kept as candidates), unresolved when none does (a library''s or the language''s). The index tool calls it after storing files.';

-- ---------------------------------------------------------------------------
-- Ranking: PageRank over the files, shared among their definitions
-- ---------------------------------------------------------------------------

create or replace function scsql._code_links(p_project bigint)
returns void
language sql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  delete from scsql.code_links where project_id = p_project;
  insert into scsql.code_links (project_id, src_file_id, dst_file_id, weight)
  select p_project, e.src, e.dst, sum(e.w)
  from (
    select r.file_id as src, r.target_file_id as dst,
           sqrt(r.n) * case when r.name like '\_%' then 0.1 else 1 end as w
    from scsql.code_references r
    where r.project_id = p_project and r.kind <> 'import' and r.target_file_id is not null
    union all
    select r.file_id, d.file_id, sqrt(r.n) * case when r.name like '\_%' then 0.1 else 1 end / cardinality(r.candidates)
    from scsql.code_references r
    cross join unnest(r.candidates) c(def_id)
    join scsql.code_definitions d on d.project_id = p_project and d.def_id = c.def_id
    where r.project_id = p_project and r.resolution = 'ambiguous'
    union all
    select r.file_id, f.file_id, 1.0 / count(*) over (partition by r.ref_id)
    from scsql.code_references r
    join scsql.code_files f on f.project_id = p_project and f.module = r.target_module
    where r.project_id = p_project and r.kind = 'import' and r.resolution in ('file', 'module')
  ) e
  where e.src <> e.dst
  group by e.src, e.dst;
$$;
comment on function scsql._code_links(bigint) is
  'Private. Rebuilds the project''s code_links from its references: a resolved call or base weighs the square root of its occurrences (a tenth for a private _name), an ambiguous one the same shared among its candidates'' files, an import one.';

create or replace function scsql._code_pagerank(p_project bigint)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
-- PageRank (damping 0.85) over code_links, at most 50 rounds or until no
-- rank moves by 1e-6; a file that links nowhere gives its rank to all.
-- Ranks are scaled so that their mean is 1.
declare
  v_ids bigint[];
  v_n integer;
  v_src integer[];
  v_dst integer[];
  v_w double precision[];
  v_dangling integer[];
  v_r double precision[];
  v_next double precision[];
  v_base double precision;
begin
  select array_agg(file_id order by file_id) into v_ids from scsql.code_files where project_id = p_project;
  v_n := coalesce(cardinality(v_ids), 0);
  if v_n = 0 then
    return;
  end if;
  with idx as (select id, i::integer from unnest(v_ids) with ordinality u(id, i)),
  l as (select s.i as src, d.i as dst, k.weight / sum(k.weight) over (partition by k.src_file_id) as w
        from scsql.code_links k join idx s on s.id = k.src_file_id join idx d on d.id = k.dst_file_id
        where k.project_id = p_project)
  select array_agg(src), array_agg(dst), array_agg(w) into v_src, v_dst, v_w from l;
  select array_agg(i) into v_dangling from generate_series(1, v_n) i where not i = any(coalesce(v_src, '{}'));
  v_r := array_fill(1.0 / v_n, array[v_n]);
  for round in 1 .. 50 loop
    v_base := (0.15 + 0.85 * coalesce((select sum(v_r[i]) from unnest(v_dangling) i), 0)) / v_n;
    select array_agg(v_base + 0.85 * coalesce(t.v, 0) order by g.i) into v_next
    from generate_series(1, v_n) g(i)
    left join (select u.dst, sum(v_r[u.src] * u.w) as v from unnest(v_src, v_dst, v_w) u(src, dst, w) group by u.dst) t
      on t.dst = g.i;
    exit when (select max(abs(a - b)) from unnest(v_r, v_next) u(a, b)) < 1e-6;
    v_r := v_next;
  end loop;
  update scsql.code_files f set rank = x.r * v_n
  from unnest(v_ids, v_next) x(id, r)
  where f.project_id = p_project and f.file_id = x.id and f.rank is distinct from x.r * v_n;
end
$$;
comment on function scsql._code_pagerank(bigint) is
  'Private. Ranks the project''s files by PageRank over code_links (damping 0.85, at most 50 rounds); the mean rank is 1.';

create or replace function scsql.rank_code()
returns integer
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_project bigint := scsql._my_project();
  v_n integer;
begin
  perform scsql._code_lock(v_project);
  perform scsql._code_links(v_project);
  perform scsql._code_pagerank(v_project);
  -- A definition ranks by the rank that flows to it from the files that
  -- use it (a candidate of an ambiguous reference takes its share), plus a
  -- hundredth of its own file's, so the definitions of a file nothing
  -- uses still order by their file.
  with flow as (
    select x.def_id, sum(f.rank * sqrt(r.n) / x.share) as v
    from scsql.code_references r
    join scsql.code_files f on f.project_id = v_project and f.file_id = r.file_id
    cross join lateral (select r.target_def_id as def_id, 1 as share where r.target_def_id is not null
                        union all
                        select c, cardinality(r.candidates) from unnest(r.candidates) c
                        where r.resolution = 'ambiguous') x
    where r.project_id = v_project and r.kind <> 'import'
    group by x.def_id
  ), ranked as (
    select d.def_id, coalesce(fl.v, 0) + 0.01 * f.rank as v
    from scsql.code_definitions d
    join scsql.code_files f on f.project_id = v_project and f.file_id = d.file_id
    left join flow fl on fl.def_id = d.def_id
    where d.project_id = v_project
  )
  update scsql.code_definitions d set rank = ranked.v
  from ranked
  where d.project_id = v_project and d.def_id = ranked.def_id and d.rank is distinct from ranked.v;
  select count(*) into v_n from scsql.code_files where project_id = v_project;
  update scsql.code_state set ranked_at = now() where project_id = v_project;
  return v_n;
end
$$;
comment on function scsql.rank_code() is
  'Ranks the files and definitions of your project''s symbol graph (PageRank over the references), for repo_map. Returns the files ranked.

Rebuilds code_links from the references (a resolved call or base weighs the square root of its occurrences, a tenth for a private _name; an ambiguous one shares that among its candidates; an import weighs one), ranks the files by PageRank over them (damping 0.85; mean rank 1) and each definition by the rank that flows to it from the files that use it, plus a hundredth of its file''s. The index tool calls it after indexing, and the hook server when edits have settled; repo_map reads the last ranks.';
