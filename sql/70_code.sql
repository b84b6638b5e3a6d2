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

create or replace function scsql._code_ref_malformed(p_ref jsonb)
returns boolean
language sql immutable parallel safe
as $$
  select pg_catalog.jsonb_typeof(p_ref) <> 'object' or coalesce(p_ref ->> 'kind', '') not in ('call', 'inherit', 'import')
         or coalesce(pg_catalog.char_length(p_ref ->> 'name'), 0) not between 1 and 300
         or pg_catalog.char_length(p_ref ->> 'qualifier') > 300 or pg_catalog.char_length(p_ref ->> 'alias') > 300
         or pg_catalog.char_length(p_ref ->> 'from') > 1100
$$;
comment on function scsql._code_ref_malformed(jsonb) is
  'Private. True when a reference sent to index_code or index_code_delta has no valid identity: an object whose kind is call, inherit or import, name 1 to 300 characters, qualifier and alias at most 300, from (the enclosing definition''s key) at most 1,100; for a valid one false or NULL, never true.';

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
    where scsql._code_ref_malformed(r)
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

create or replace function scsql._code_clean(p_definitions jsonb, p_references jsonb)
returns boolean
language sql immutable
as $$
  -- Each text index_code stores or looks a definition up by (a key, a name,
  -- a signature, a module an import names) is a text of its own. Most
  -- payloads hold none redaction would change: their distinct texts, one a
  -- line, are judged once together. Read as columns: a JSON path over every
  -- value cost more than the redaction itself.
  select (scsql._redact(x.t) = x.t) is not false
  from (select pg_catalog.string_agg(distinct s.v, E'\n') as t
        from (select pg_catalog.unnest(array[d.key, d.parent, d.name, d.qualname, d.signature]) as v
              from pg_catalog.jsonb_to_recordset(p_definitions)
                   as d(key text, parent text, name text, qualname text, signature text)
              union all
              select pg_catalog.unnest(array[r.name, r.qualifier, r.alias, r."from"])
              from pg_catalog.jsonb_to_recordset(p_references) as r(name text, qualifier text, alias text, "from" text)
             ) s) x
$$;
comment on function scsql._code_clean(jsonb, jsonb) is
  'Private. Whether no text of the payloads of index_code that it stores or looks up by (a definition''s key, parent, name, qualname and signature; a reference''s name, qualifier, alias and from) holds anything redaction would change (scsql._redact of their distinct values, one a line).';

create or replace function scsql._code_redacted(p_items jsonb)
returns jsonb
language sql immutable
as $$
  select coalesce(pg_catalog.jsonb_agg(
           (select pg_catalog.jsonb_object_agg(f.key, case when pg_catalog.jsonb_typeof(f.value) = 'string'
                                                      then pg_catalog.to_jsonb(scsql._redact(f.value #>> '{}'))
                                                      else f.value end)
            from pg_catalog.jsonb_each(a.o) f) order by a.n), '[]')
  from pg_catalog.jsonb_array_elements(p_items) with ordinality a(o, n)
$$;
comment on function scsql._code_redacted(jsonb) is
  'Private. A payload of index_code (an array of flat objects) with each string value redacted as a text of its own (scsql._redact); index_code asks for it only when scsql._code_clean finds something to redact.';

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

create or replace function scsql._code_put_definitions(p_project bigint, p_file bigint, p_definitions jsonb)
returns void
language sql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  insert into scsql.code_definitions as d (project_id, file_id, key, kind, name, qualname, signature, line_start, line_end)
  select distinct on (n.key) p_project, p_file, n.key, n.kind, n.name, n.qualname, left(coalesce(n.signature, ''), 200),
         n.line_start, n.line_end
  from jsonb_to_recordset(p_definitions) n(key text, kind text, name text, qualname text, signature text,
                                            line_start integer, line_end integer)
  order by n.key
  on conflict (project_id, file_id, key) do update
    set kind = excluded.kind, name = excluded.name, qualname = excluded.qualname, signature = excluded.signature,
        line_start = excluded.line_start, line_end = excluded.line_end
  where (d.kind, d.name, d.qualname, d.signature, d.line_start, d.line_end)
        is distinct from (excluded.kind, excluded.name, excluded.qualname, excluded.signature, excluded.line_start,
                          excluded.line_end);
  update scsql.code_definitions d set parent_id = p.def_id
  from jsonb_to_recordset(p_definitions) n(key text, parent text)
  left join scsql.code_definitions p on p.project_id = p_project and p.file_id = p_file and p.key = n.parent
  where d.project_id = p_project and d.file_id = p_file and d.key = n.key and d.parent_id is distinct from p.def_id;
$$;
comment on function scsql._code_put_definitions(bigint, bigint, jsonb) is
  'Private. Inserts or updates the given definitions of file FILE (rows as index_code takes them): each keeps its def_id by key and is rewritten only when it changed; parents are linked by key.';

create or replace function scsql._code_store_definitions(p_project bigint, p_file bigint, p_definitions jsonb)
returns text[]
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
-- Definitions keep their def_id by key; those no longer in the file go.
-- Returns the names of the definitions that came, went or changed kind:
-- references to them, here and elsewhere, may resolve differently now.
declare
  v_changed text[];
begin
  if not exists (select from scsql.code_definitions where project_id = p_project and file_id = p_file) then
    select coalesce(array_agg(distinct d.name), '{}') into v_changed    -- a new file: all its names
    from jsonb_to_recordset(p_definitions) d(name text);
  else
    v_changed := scsql._code_definitions_changed(p_project, p_file, p_definitions);
  end if;
  perform scsql._code_put_definitions(p_project, p_file, p_definitions);
  return v_changed;
end
$$;
comment on function scsql._code_store_definitions(bigint, bigint, jsonb) is
  'Private. Stores a file''s definitions (rows as index_code takes them): each keeps its def_id by key (rewritten only when it changed), those gone are deleted, parents are linked by key. Returns the names of the definitions added, removed or changed in kind.';

create or replace function scsql._code_definitions_changed(p_project bigint, p_file bigint, p_definitions jsonb)
returns text[]
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
-- For a file indexed before, to be given DEFINITIONS: the names of those
-- that come, go or change kind; those that go are deleted.
declare
  v_changed text[];
begin
  with old as (
    select key, name, kind from scsql.code_definitions where project_id = p_project and file_id = p_file
  ), new as (
    select distinct on (d.key) d.key, d.name, d.kind
    from jsonb_to_recordset(p_definitions) d(key text, name text, kind text) order by d.key
  )
  select coalesce(array_agg(distinct x.name) filter (where x.name is not null), '{}') into v_changed
  from old o full join new n using (key)
  cross join lateral unnest(array[o.name, n.name]) x(name)
  where o.key is null or n.key is null or o.name <> n.name or o.kind <> n.kind;
  delete from scsql.code_definitions d
  where d.project_id = p_project and d.file_id = p_file
    and not exists (select from jsonb_to_recordset(p_definitions) n(key text) where n.key = d.key);
  return v_changed;
end
$$;
comment on function scsql._code_definitions_changed(bigint, bigint, jsonb) is
  'Private. For a file indexed before, to be given DEFINITIONS: deletes the stored definitions whose key is not among them and returns the names of the definitions that come, go or change kind.';

create or replace function scsql._code_repend_calls(p_project bigint, p_file bigint)
returns void
language sql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  update scsql.code_references r
     set resolution = 'pending', target_def_id = null, target_file_id = null, target_module = null, candidates = null
   where r.project_id = p_project and r.file_id = p_file and r.kind <> 'import' and r.resolution <> 'pending';
$$;
comment on function scsql._code_repend_calls(bigint, bigint) is
  'Private. Sends the calls and bases of file FILE back to pending resolution: its imports changed, and what they resolve may change every one of them.';

create or replace function scsql._code_ref_key(p_kind text, p_name text, p_qualifier text, p_alias text, p_from text)
returns text
-- Stable like concat_ws, so the planner inlines it into the query that calls it.
language sql stable parallel safe
as $$
  select pg_catalog.concat_ws(chr(31), p_kind, p_name, coalesce(p_qualifier, chr(30)), coalesce(p_alias, chr(30)),
                              coalesce(p_from, chr(30)))
$$;
comment on function scsql._code_ref_key(text, text, text, text, text) is
  'Private. The identity of a reference as one text, for hash joins: kind, name, qualifier, alias and the enclosing definition (its id or key; a missing part is chr(30)), joined with chr(31). Two references are the same row of the graph when their keys are equal.';

create or replace function scsql._code_store_references(p_project bigint, p_file bigint, p_references jsonb)
returns integer
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
-- A reference's lines (a JSON array) become integers in the query: a
-- function call a reference would cost more than the conversion.
-- An edit costs what it changed: a reference found again (same kind, name,
-- qualifier and alias, in the same definition) keeps its row and its
-- resolution, its lines and count updated; the others are deleted, and the
-- new ones inserted pending. When the file's imports changed, what they
-- resolve may change every call of the file: the kept ones go back to pending.
declare
  v_n integer;
  v_imports_changed boolean;
begin
  if not exists (select from scsql.code_references where project_id = p_project and file_id = p_file) then
    insert into scsql.code_references (project_id, file_id, from_def_id, kind, name, qualifier, alias, lines, n)
    select p_project, p_file, d.def_id, r.kind, r.name, r.qualifier, r.alias,
           array(select x::integer from pg_catalog.jsonb_array_elements_text(r.lines) x where x ~ '^[0-9]{1,9}$'), r.n
    from jsonb_to_recordset(p_references) r(kind text, name text, qualifier text, alias text, "from" text, lines jsonb,
                                            n integer)
    left join scsql.code_definitions d on d.project_id = p_project and d.file_id = p_file and d.key = r."from";
    get diagnostics v_n = row_count;
    return v_n;
  end if;
  with new as (
    select r.kind, r.name, r.qualifier, r.alias, d.def_id as from_def_id, r.n, r.ord,
           array(select x::integer from pg_catalog.jsonb_array_elements_text(r.lines) x where x ~ '^[0-9]{1,9}$') as lines
    from rows from (jsonb_to_recordset(p_references) as (kind text, name text, qualifier text, alias text, "from" text,
                                                         lines jsonb, n integer)) with ordinality
         r(kind, name, qualifier, alias, "from", lines, n, ord)
    left join scsql.code_definitions d on d.project_id = p_project and d.file_id = p_file and d.key = r."from"
  ), keyed_new as materialized (
    select n.*, scsql._code_ref_key(n.kind, n.name, n.qualifier, n.alias, n.from_def_id::text) as k,
           row_number() over (partition by n.kind, n.name, n.qualifier, n.alias, n.from_def_id order by n.ord) as i
    from new n
  ), keyed_old as materialized (
    select o.ref_id, o.lines, o.n, scsql._code_ref_key(o.kind, o.name, o.qualifier, o.alias, o.from_def_id::text) as k,
           row_number() over (partition by o.kind, o.name, o.qualifier, o.alias, o.from_def_id order by o.ref_id) as i
    from scsql.code_references o where o.project_id = p_project and o.file_id = p_file
  ), pair as materialized (
    select o.ref_id, o.lines as old_lines, o.n as old_n, n.*
    from keyed_new n full join keyed_old o on o.k = n.k and o.i = n.i
  ), gone as (
    delete from scsql.code_references c using pair p
    where c.project_id = p_project and c.ref_id = p.ref_id and p.k is null
    returning c.kind
  ), kept as (
    update scsql.code_references c set lines = p.lines, n = p.n
    from pair p
    where c.project_id = p_project and c.ref_id = p.ref_id and p.k is not null
      and (p.old_lines, p.old_n) is distinct from (p.lines, p.n)
  ), added as (
    insert into scsql.code_references (project_id, file_id, from_def_id, kind, name, qualifier, alias, lines, n)
    select p_project, p_file, p.from_def_id, p.kind, p.name, p.qualifier, p.alias, p.lines, p.n
    from pair p where p.ref_id is null
    returning kind
  )
  select (select count(*) from pair where k is not null),
         exists (select from gone where kind = 'import') or exists (select from added where kind = 'import')
  into v_n, v_imports_changed;
  if v_imports_changed then
    perform scsql._code_repend_calls(p_project, p_file);
  end if;
  return v_n;
end
$$;
comment on function scsql._code_store_references(bigint, bigint, jsonb) is
  'Private. Stores a file''s references (rows as index_code takes them), each placed in the definition it occurs in (by key): one found again keeps its row and resolution (lines and count updated), the rest are replaced and wait for resolution; when the file''s imports changed, all its calls and bases wait again.';

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
  v_names text[];
  v_files bigint[];
begin
  update scsql.code_references r
     set resolution = 'pending', target_def_id = null, target_file_id = null, candidates = null
   where r.project_id = p_project and r.name = any(p_names) and r.kind <> 'import' and r.resolution <> 'pending';
  if p_new then
    -- The imports of module K, or of symbol S from module M where M/S is K,
    -- looked up by name (an index): a new file costs its keys, not the project.
    select module_keys into v_keys from scsql.code_files where project_id = p_project and file_id = p_file;
    select v_keys || coalesce(array_agg(array_to_string(p.parts[:j.n], '/')), '{}') into v_names
    from unnest(v_keys) k(key), string_to_array(k.key, '/') p(parts), generate_series(1, cardinality(p.parts) - 1) j(n);
    select array_agg(distinct i.file_id) into v_files from scsql.code_references i
    where i.project_id = p_project and i.name = any(v_names) and i.kind = 'import' and i.resolution = 'external'
      and (i.name = any(v_keys) or i.name || '/' || i.qualifier = any(v_keys));
    update scsql.code_references r
       set resolution = 'pending', target_def_id = null, target_file_id = null, target_module = null, candidates = null
     where r.project_id = p_project and r.file_id = any(v_files) and r.resolution <> 'pending';
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
  -- Values, not calls, in the upsert: Citus sends it to the project's shard
  -- and refuses a function that is not immutable in its DO UPDATE.
  v_agent bigint := scsql._my_agent_id();
  v_now timestamptz := now();
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
  perform scsql._code_analyze_for(0);
  -- What is stored is redacted like every text (a default argument may hold a token):
  -- both payloads judged in one pass, each string redacted only when that finds something.
  if not scsql._code_clean(p_definitions, p_references) then
    p_definitions := scsql._code_redacted(p_definitions);
    p_references := scsql._code_redacted(p_references);
  end if;
  insert into scsql.code_files as f (project_id, path, language, module, module_keys, content_hash, status, error_lines,
                                     indexed_by)
  values (v_project, p_path, p_language, p_module, scsql._code_module_keys(p_module), p_content_hash, p_status,
          coalesce(p_error_lines, '{}'), v_agent)
  on conflict (project_id, path) do update
    set language = excluded.language, module = excluded.module, module_keys = excluded.module_keys,
        content_hash = excluded.content_hash, status = excluded.status, error_lines = excluded.error_lines,
        indexed_at = v_now, indexed_by = excluded.indexed_by
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

-- An edit's symbols as a change of what is stored: the hook server keeps
-- what it last stored (or read) of a file and sends only the rows that
-- changed, so an edit costs what it changed, not the file.

create or replace function scsql._code_delta_plan(p_project bigint, p_file bigint, p_references jsonb, p_gone jsonb)
returns table (ref_id bigint, gone boolean, kind text, name text, qualifier text, alias text, from_key text,
               lines integer[], n integer, copies bigint)
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  -- Each reference of the delta (changed or added, then gone) with the
  -- stored row of the same identity (kind, name, qualifier, alias and
  -- enclosing definition's key), and the copies of that pair: more than
  -- one when the delta names an identity twice or several stored rows have
  -- it. Keys are joined as one text, so the planner hashes them.
  with stored as (
    select r.ref_id, scsql._code_ref_key(r.kind, r.name, r.qualifier, r.alias, d.key) as k
    from scsql.code_references r
    left join scsql.code_definitions d on d.project_id = p_project and d.def_id = r.from_def_id
    where r.project_id = p_project and r.file_id = p_file
  ), delta as (
    select false as gone, x.kind, x.name, x.qualifier, x.alias, x."from", x.lines, x.n
    from jsonb_to_recordset(p_references) x(kind text, name text, qualifier text, alias text, "from" text, lines jsonb,
                                            n integer)
    union all
    select true, x.kind, x.name, x.qualifier, x.alias, x."from", null, null
    from jsonb_to_recordset(p_gone) x(kind text, name text, qualifier text, alias text, "from" text)
  ), keyed as (
    select d.*, scsql._code_ref_key(d.kind, d.name, d.qualifier, d.alias, d."from") as k
    from delta d
  )
  select s.ref_id, d.gone, d.kind, d.name, d.qualifier, d.alias, d."from",
         array(select x::integer from pg_catalog.jsonb_array_elements_text(d.lines) x where x ~ '^[0-9]{1,9}$'), d.n,
         count(*) over (partition by d.k, d.gone)
  from keyed d left join stored s on s.k = d.k
$$;
comment on function scsql._code_delta_plan(bigint, bigint, jsonb, jsonb) is
  'Private. For index_code_delta: each reference of the delta (REFERENCES changed or added, GONE removed) with the stored reference of file FILE of the same identity (kind, name, qualifier, alias, enclosing definition''s key), if any, and its copies (more than one when the delta names the identity twice or several stored references have it).';

create or replace function scsql._code_delta_definitions(p_project bigint, p_file bigint, p_definitions jsonb,
                                                         p_gone text[])
returns text[]
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
-- The definitions GONE (keys) deleted, DEFINITIONS (changed or added)
-- stored as _code_store_definitions stores them. Returns the names of the
-- definitions that came, went or changed name or kind.
declare
  v_changed text[];
begin
  select coalesce(array_agg(distinct x.name) filter (where x.name is not null), '{}') into v_changed
  from (select o.name, n.name as new_name
        from jsonb_to_recordset(p_definitions) n(key text, name text, kind text)
        left join scsql.code_definitions o on o.project_id = p_project and o.file_id = p_file and o.key = n.key
        where o.key is null or o.name <> n.name or o.kind <> n.kind
        union all
        select o.name, null from scsql.code_definitions o
        where o.project_id = p_project and o.file_id = p_file and o.key = any(p_gone)) c
  cross join lateral unnest(array[c.name, c.new_name]) x(name);
  delete from scsql.code_definitions where project_id = p_project and file_id = p_file and key = any(p_gone);
  perform scsql._code_put_definitions(p_project, p_file, p_definitions);
  return v_changed;
end
$$;
comment on function scsql._code_delta_definitions(bigint, bigint, jsonb, text[]) is
  'Private. For index_code_delta: deletes the definitions of file FILE whose keys are GONE and stores DEFINITIONS (changed or added, keyed as index_code keys them, parents linked by key). Returns the names of the definitions added, removed or changed in name or kind.';

create or replace function scsql._code_delta_references(p_project bigint, p_file bigint, p_plan jsonb)
returns boolean
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
-- The plan of _code_delta_plan applied: gone references deleted, changed
-- ones given their lines (resolution kept), added ones inserted pending.
-- Returns whether the file's imports changed.
begin
  delete from scsql.code_references r using jsonb_to_recordset(p_plan) x(ref_id bigint, gone boolean)
  where r.project_id = p_project and r.ref_id = x.ref_id and x.gone;
  update scsql.code_references r set lines = x.lines, n = x.n
  from jsonb_to_recordset(p_plan) x(ref_id bigint, gone boolean, lines integer[], n integer)
  where r.project_id = p_project and r.ref_id = x.ref_id and not x.gone and (r.lines, r.n) is distinct from (x.lines, x.n);
  insert into scsql.code_references (project_id, file_id, from_def_id, kind, name, qualifier, alias, lines, n)
  select p_project, p_file, d.def_id, x.kind, x.name, x.qualifier, x.alias, x.lines, x.n
  from jsonb_to_recordset(p_plan) x(ref_id bigint, gone boolean, kind text, name text, qualifier text, alias text,
                                    from_key text, lines integer[], n integer)
  left join scsql.code_definitions d on d.project_id = p_project and d.file_id = p_file and d.key = x.from_key
  where x.ref_id is null and not x.gone;
  return exists (select from jsonb_to_recordset(p_plan) x(ref_id bigint, gone boolean, kind text)
                 where x.kind = 'import' and (x.gone or x.ref_id is null));
end
$$;
comment on function scsql._code_delta_references(bigint, bigint, jsonb) is
  'Private. For index_code_delta: applies the plan of _code_delta_plan (a JSON array of its rows) to file FILE''s references: gone ones deleted, changed ones given their lines and count (their resolution kept), added ones inserted pending resolution. Returns whether an import came or went.';

create or replace function scsql._code_delta_check(p_base_hash text, p_counts integer[], p_gone_definitions text[],
                                                   p_gone_references jsonb)
returns void
language plpgsql immutable
as $$
begin
  if p_base_hash is null or p_base_hash !~ '^[0-9a-f]{64}$' or cardinality(p_counts) is distinct from 4
     or array_position(p_counts, null) is not null or exists (select from unnest(p_counts) c where c not between 0 and 200000)
     or p_gone_definitions is null or cardinality(p_gone_definitions) > 50000
     or exists (select from unnest(p_gone_definitions) k where coalesce(char_length(k), 0) not between 1 and 1100)
     or jsonb_typeof(p_gone_references) is distinct from 'array' or jsonb_array_length(p_gone_references) > 200000
     or exists (select from jsonb_array_elements(p_gone_references) r where scsql._code_ref_malformed(r)) then
    raise exception using errcode = 'SC261',
      message = 'index_code_delta: base_hash is a sha256 in hex, counts 4 numbers of 0 to 200,000 (definitions and '
                'references before, then after), gone definitions at most 50,000 keys and gone references an array of '
                '{kind, name, qualifier, alias, from}',
      hint = 'Nothing was stored. See index_code_delta''s comment.';
  end if;
end
$$;
comment on function scsql._code_delta_check(text, integer[], text[], jsonb) is
  'Private. Raises SC261 when what index_code_delta was sent besides index_code''s payload (base hash, counts, gone definitions and references) is malformed.';

create or replace function scsql.index_code_delta(
  p_path text, p_base_hash text, p_content_hash text, p_status text, p_error_lines integer[], p_counts integer[],
  p_definitions jsonb, p_gone_definitions text[], p_references jsonb, p_gone_references jsonb)
returns table (path text, definitions integer, "references" integer, status text, applied boolean)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_project bigint := scsql._my_project();
  v_file bigint;
  v_plan jsonb;
  v_ok boolean;
begin
  if not scsql._code_path_ok(p_path) then
    raise exception using errcode = 'SC260',
      message = format('index_code_delta: %L is not a path relative to the project root', left(p_path, 200));
  end if;
  perform scsql._code_check_payload(p_content_hash, null, '', p_status, p_error_lines, p_definitions, p_references);
  perform scsql._code_delta_check(p_base_hash, p_counts, p_gone_definitions, p_gone_references);
  perform scsql._code_lock(v_project);
  select f.file_id into v_file from scsql.code_files f
  where f.project_id = v_project and f.path = p_path and f.content_hash = p_base_hash;
  -- Applied only to exactly the rows its base stored, and only when it has nothing to redact.
  v_ok := v_file is not null and scsql._code_clean(p_definitions, p_references)
    and p_counts[1] = (select count(*) from scsql.code_definitions where project_id = v_project and file_id = v_file)
    and p_counts[2] = (select count(*) from scsql.code_references where project_id = v_project and file_id = v_file)
    and p_counts[3] = p_counts[1] + (select count(distinct n.key) from jsonb_to_recordset(p_definitions) n(key text)
                                     where not exists (select from scsql.code_definitions o where o.project_id = v_project
                                                         and o.file_id = v_file and o.key = n.key))
                      - (select count(*) from scsql.code_definitions o where o.project_id = v_project and o.file_id = v_file
                           and o.key = any(p_gone_definitions))
    and cardinality(p_gone_definitions) = (select count(*) from scsql.code_definitions o where o.project_id = v_project
                                             and o.file_id = v_file and o.key = any(p_gone_definitions));
  if v_ok then
    select coalesce(jsonb_agg(to_jsonb(x)), '[]'),
           coalesce(bool_and(x.copies = 1 and (x.ref_id is not null or not x.gone)), true)
           and p_counts[4] = p_counts[2] + count(*) filter (where x.ref_id is null) - count(*) filter (where x.gone)
      into v_plan, v_ok
    from scsql._code_delta_plan(v_project, v_file, p_references, p_gone_references) x;
  end if;
  if not v_ok then  -- nothing written: the caller sends the whole payload (index_code)
    return query select p_path, null::integer, null::integer, p_status, false;
    return;
  end if;
  perform scsql._code_invalidate(v_project, v_file,
                                 scsql._code_delta_definitions(v_project, v_file, p_definitions, p_gone_definitions), false);
  if scsql._code_delta_references(v_project, v_file, v_plan) then
    perform scsql._code_repend_calls(v_project, v_file);
  end if;
  update scsql.code_files set content_hash = p_content_hash, status = p_status, error_lines = coalesce(p_error_lines, '{}'),
                              indexed_at = now(), indexed_by = scsql._my_agent_id()
  where project_id = v_project and file_id = v_file;
  update scsql.code_state set changed_at = now() where project_id = v_project;
  return query select p_path, p_counts[3], p_counts[4], p_status, true;
end
$$;
comment on function scsql.index_code_delta(text, text, text, text, integer[], integer[], jsonb, text[], jsonb, jsonb) is
  'Stores the symbols of an edited file as a change of those stored, so that an edit costs what it changed (the hook server calls it). Returns path, definitions, references, status and applied.

The file at PATH of the acting agent''s project, whose symbols were stored from content BASE_HASH, now holds content CONTENT_HASH with STATUS and ERROR_LINES (as index_code takes them). DEFINITIONS are the definitions added or changed (whole rows, as index_code takes them), GONE_DEFINITIONS the keys of those removed; REFERENCES the references added or whose lines changed (whole rows), GONE_REFERENCES those removed [{kind, name, qualifier, alias, from}]; a reference is known by its kind, name, qualifier, alias and enclosing definition. COUNTS are the numbers of definitions and references before and after the edit. A changed reference keeps its resolution; the rest is as index_code stores it. Applied only to exactly what its base stored: when the stored content is not BASE_HASH, the counts or the rows named do not match what is stored, or a text of the delta holds anything redaction would change, nothing is written and applied is false (send the whole payload with index_code). Raises SC260 for a bad path, SC261 for a bad payload.';

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
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  -- An import of module K (symbol S) names the file whose module is K/S
  -- (S a submodule), or ends with K, or for Go is a trailing part of K; of
  -- several, the one nearest the importing file. Several files of one
  -- module (a Go package): resolution module. The keys of every pending
  -- import meet the module keys of every file in one join.
begin
    with imp as materialized (
      select r.ref_id, r.name, r.qualifier, rf.module as from_module, rf.language = 'go' as go
      from scsql.code_references r
      join scsql.code_files rf on rf.project_id = r.project_id and rf.file_id = r.file_id
      where r.project_id = p_project and r.kind = 'import' and r.resolution = 'pending'
    ), files as materialized (
      select f.file_id, f.module, f.module_keys from scsql.code_files f
      where f.project_id = p_project and f.language is not null and f.language <> 'manifest'
    ), hit as (
      select i.ref_id, f.file_id, f.module, f.module_keys
      from imp i
      cross join lateral (select i.name as key union all select i.name || '/' || i.qualifier where i.qualifier is not null) k
      join (select fs.file_id, fs.module, fs.module_keys, u.key from files fs, unnest(fs.module_keys) u(key)) f
        on f.key = k.key
      union
      select i.ref_id, f.file_id, f.module, f.module_keys
      from imp i cross join unnest(scsql._code_module_keys(i.name)) k(key)
      join files f on f.module = k.key
      where i.go
    ), best as (
      select distinct on (h.ref_id) h.ref_id, h.module, count(*) as n, min(h.file_id) as file_id
      from hit h join imp i using (ref_id)
      group by h.ref_id, h.module, i.name, i.qualifier, i.from_module
      order by h.ref_id, bool_or(i.qualifier is not null and h.module_keys @> array[i.name || '/' || i.qualifier]) desc,
               scsql._code_common_prefix(h.module, i.from_module) desc, char_length(h.module), h.module
    )
    update scsql.code_references r
       set resolution = case when b.n is null then 'external' when b.n = 1 then 'file' else 'module' end,
           target_file_id = case when b.n = 1 then b.file_id end,
           target_module = b.module
      from imp i left join best b using (ref_id)
     where r.project_id = p_project and r.ref_id = i.ref_id;
end
$$;
comment on function scsql._code_resolve_imports(bigint) is
  'Private. Resolves the project''s pending imports to the file (or the files of one module) they name, best effort: external when no file of the project is that module.';

create or replace function scsql._code_resolve_local(p_project bigint)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  -- A call of f() finds f defined at the file's top level, in the caller,
  -- or beside it (a method of the same class, as Java and C++ call them);
  -- self.f(), this.f() a method of the caller's class.
begin
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
end
$$;
comment on function scsql._code_resolve_local(bigint) is
  'Private. Resolves pending calls and bases to a definition of the same file: f() to f at the top level, in the caller or beside it; self.f() and this.f() to a method of the caller''s class.';

create or replace function scsql._code_resolve_imported(p_project bigint)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  -- Through the file's imports: from m import f; f() / import m; m.f() /
  -- from p import m; m.f() / from m import C; C.f(). The pending calls, by
  -- the names their imports would bind, meet the imports of their files in
  -- one join (not each import all the calls of its file).
begin
    with r as materialized (
      select r.ref_id, r.file_id, r.name, r.qualifier, k.alias
      from scsql.code_references r
      cross join lateral (select distinct u.alias
                          from unnest(case when r.qualifier is null then array[r.name]
                                           else array[r.qualifier, split_part(r.qualifier, '.', 1)] end) u(alias)) k
      where r.project_id = p_project and r.resolution = 'pending' and r.kind in ('call', 'inherit')
    ), i as materialized (
      -- Every import of those files: the statistics may predate their
      -- resolution (a first index resolves them just before), so what
      -- they resolved to is read in the join, not estimated here.
      select i.file_id, i.alias, i.name, i.qualifier, i.target_module, i.resolution
      from scsql.code_references i
      where i.project_id = p_project and i.kind = 'import' and i.file_id in (select r.file_id from r)
    ), x as (
      select distinct on (r.ref_id) r.ref_id, d.def_id, d.file_id
      from r
      join i on i.file_id = r.file_id and i.alias = r.alias and (r.qualifier is not null or i.qualifier is not null)
            and i.resolution in ('file', 'module')
      join scsql.code_files f on f.project_id = p_project and f.module = i.target_module
      join scsql.code_definitions d
        on d.project_id = p_project and d.file_id = f.file_id
       and d.name = case when r.qualifier is null then i.qualifier else r.name end
      where r.qualifier is null or i.qualifier is null or i.target_module = i.name || '/' || i.qualifier
            or d.qualname = i.qualifier || '.' || r.name
      order by r.ref_id, (i.alias = r.qualifier) desc, (d.parent_id is null) desc, d.def_id
    )
    update scsql.code_references c
       set resolution = 'import', target_def_id = x.def_id, target_file_id = x.file_id, candidates = null
      from x
     where c.project_id = p_project and c.ref_id = x.ref_id;
end
$$;
comment on function scsql._code_resolve_imported(bigint) is
  'Private. Resolves pending calls and bases through the file''s resolved imports: from m import f; f(), import m; m.f(), from p import m; m.f(), from m import C; C.f().';

create or replace function scsql._code_family(p_language text)
returns text
language sql immutable
as $$
  select case when p_language in ('javascript', 'typescript', 'tsx') then 'javascript'
              when p_language in ('c', 'cpp') then 'c' else p_language end
$$;
comment on function scsql._code_family(text) is
  'Private. The family of a source language whose files call each other by name: JavaScript, TypeScript and TSX; C and C++; every other language its own.';

create or replace function scsql._code_resolve_global(p_project bigint)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  -- What is left, by name over the project: the one definition of that
  -- name (unique), several (ambiguous: the ten likeliest kept, a method
  -- of a class the qualifier names first), none (unresolved). f() looks
  -- for functions and classes, x.f() (x no module the file imports) for
  -- methods and classes; a call on a module
  -- imported from outside the project (json.dumps) is unresolved. Only
  -- definitions of the caller's language family count (a Python call is
  -- no Go function's; C++ calls C, TypeScript JavaScript). The
  -- definitions are looked up once for each name, kind and qualifier
  -- pending (many calls share them: a first index holds every call).
begin
    with p as materialized (
      select r.ref_id, r.name, r.kind = 'inherit' as inherit, r.qualifier is null as bare,
             coalesce(r.qualifier, '') as qualifier,
             (select scsql._code_family(f.language) from scsql.code_files f
              where f.project_id = r.project_id and f.file_id = r.file_id) as family,
             r.qualifier is not null and exists (
               select from scsql.code_references i
               where i.project_id = r.project_id and i.file_id = r.file_id and i.kind = 'import'
                 and i.resolution = 'external' and i.alias = split_part(r.qualifier, '.', 1)) as external
      from scsql.code_references r
      where r.project_id = p_project and r.resolution = 'pending' and r.kind in ('call', 'inherit')
    ), c as materialized (
      select g.name, g.inherit, g.bare, g.qualifier, g.family, x.n, x.ids, x.files
      from (select distinct p.name, p.inherit, p.bare, p.qualifier, p.family from p where not p.external) g
      cross join lateral (
        select case when count(*) filter (where q.pref) > 0 then count(*) filter (where q.pref) else count(*) end as n,
               (array_agg(q.def_id order by q.pref desc, q.top desc, q.rank desc, q.def_id))[1:10] as ids,
               (array_agg(q.file_id order by q.pref desc, q.top desc, q.rank desc, q.def_id))[1:10] as files
        from (
          select d.def_id, d.file_id, d.rank, d.parent_id is null as top,
                 not g.bare and g.qualifier not in ('self', 'this', 'cls', 'Self', 'super')
                 and (d.qualname = g.qualifier || '.' || g.name
                      or d.qualname like '%.' || regexp_replace(g.qualifier, '^.*\.', '') || '.' || g.name) as pref
          from scsql.code_definitions d
          join scsql.code_files df on df.project_id = p_project and df.file_id = d.file_id
          where d.project_id = p_project and d.name = g.name and scsql._code_family(df.language) = g.family
            and case when g.inherit then d.kind in ('class', 'interface', 'type')
                     when g.bare then d.kind in ('function', 'class', 'macro')
                     else d.kind in ('method', 'class') end
        ) q
      ) x
    )
    update scsql.code_references r
       set resolution = case when coalesce(c.n, 0) = 0 then 'unresolved' when c.n = 1 then 'unique' else 'ambiguous' end,
           target_def_id = case when c.n = 1 then c.ids[1] end,
           target_file_id = case when c.n = 1 then c.files[1] end,
           candidates = case when c.n > 1 then c.ids end
      from p
      left join c on not p.external and c.name = p.name and c.inherit = p.inherit and c.bare = p.bare
                 and c.qualifier = p.qualifier and c.family = p.family
     where r.project_id = p_project and r.ref_id = p.ref_id;
end
$$;
comment on function scsql._code_resolve_global(bigint) is
  'Private. Resolves what the file''s own definitions and imports did not, by name over the files of the project in the caller''s language family: unique (one definition), ambiguous (several: the ten likeliest kept as candidates), unresolved (none: the language''s or a library''s).';

create or replace function scsql._code_analyze_for(p_pending bigint)
returns boolean
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
-- Plans made on statistics older than the graph go wrong two ways. While
-- an index writes the tables from empty, the writes' plans (the foreign-key
-- checks' and the replacing delete's among them, cached for a connection's
-- life) take any index that starts with project_id and read the whole
-- project for each row. Resolution joins references with definitions and
-- files, and planned before a large index those joins become scans repeated
-- per reference. So the three tables are analyzed once one of them has
-- changed by more rows than its statistics say it holds (and by 500 at
-- least: about log2 of the final size times in all), or when the PENDING
-- references to resolve outnumber a fifth of those the statistics know.
-- SKIP_LOCKED: it never waits for another project's writer or for
-- autovacuum (who then keeps the statistics fresh). Not on Citus, whose
-- planner reads its own.
begin
  if exists (select from pg_catalog.pg_extension where extname = 'citus')
     or (not exists (select from pg_catalog.pg_class c
                     where c.oid in ('scsql.code_files'::regclass, 'scsql.code_definitions'::regclass,
                                     'scsql.code_references'::regclass)
                       and pg_catalog.pg_stat_get_mod_since_analyze(c.oid) > greatest(c.reltuples, 0) + 500)
         and (p_pending < 1000
              or p_pending < 0.2 * (select greatest(c.reltuples, 0) from pg_catalog.pg_class c
                                    where c.oid = 'scsql.code_references'::regclass))) then
    return false;
  end if;
  analyze (skip_locked) scsql.code_files, scsql.code_definitions, scsql.code_references;
  return true;
end
$$;
comment on function scsql._code_analyze_for(bigint) is
  'Private. Analyzes code_files, code_definitions and code_references (skipping any another session holds) once one of them has changed by more rows than its statistics say it holds (and by 500 at least), or when PENDING references to resolve outnumber a fifth of those the statistics know, so that writes and resolution are planned on the graph as it is. Returns whether it analyzed.';

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
  perform scsql._code_analyze_for(v_n);
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

Resolves every pending reference of the acting agent''s project, in order: imports to the file (or the files of a module) they name; calls and bases to a definition of the same file (f() at the top level or beside the caller, self.f() in the caller''s class), then through the file''s imports (from m import f; f(), import m; m.f(), from m import C; C.f()), then by name over the project''s files of the caller''s language family (JavaScript, TypeScript and TSX are one, C and C++ one; a call x.f() on no module the file imports looks for methods and classes only): unique when one definition has that name, ambiguous when several do (the ten likeliest kept as candidates), unresolved when none does (a library''s or the language''s). The index tool calls it after storing files.';

-- ---------------------------------------------------------------------------
-- Ranking: PageRank over the files, shared among their definitions
-- ---------------------------------------------------------------------------

create or replace function scsql._code_links(p_project bigint)
returns void
language sql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  delete from scsql.code_links where project_id = p_project;
  insert into scsql.code_links (project_id, src_file_id, dst_file_id, weight, out_share, in_share)
  select p_project, g.src, g.dst, g.w, g.w / sum(g.w) over (partition by g.src), g.w / sum(g.w) over (partition by g.dst)
  from (select e.src, e.dst, sum(e.w) as w from (
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
  group by e.src, e.dst) g;
$$;
comment on function scsql._code_links(bigint) is
  'Private. Rebuilds the project''s code_links from its references: a resolved call or base weighs the square root of its occurrences (a tenth for a private _name), an ambiguous one the same shared among its candidates'' files, an import one; each link''s share of its source''s and of its target''s links.';

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
    v_base := (0.15 + 0.85 * coalesce((select sum(rr.r) from unnest(v_r) with ordinality rr(r, i)
                                       where rr.i = any(v_dangling)), 0)) / v_n;
    -- The ranks joined by position (a hash join), not read by subscript row by row.
    select array_agg(v_base + 0.85 * coalesce(t.v, 0) order by g.i) into v_next
    from generate_series(1, v_n) g(i)
    left join (select u.dst, sum(rr.r * u.w) as v
               from unnest(v_src, v_dst, v_w) u(src, dst, w)
               join unnest(v_r) with ordinality rr(r, i) on rr.i = u.src
               group by u.dst) t
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

-- ---------------------------------------------------------------------------
-- Reading, as the caller: what a focus names, the repo map
-- ---------------------------------------------------------------------------

create or replace function scsql_caller.recent_edits(p_limit integer)
returns text[]
language plpgsql stable
as $$
declare
  v_files text[];
begin
  if p_limit is null or p_limit not between 0 and 1000 then  -- runs as the caller: no scsql._require
    raise exception using errcode = 'SC010', message = format('limit must be 0 to 1,000, got %s', p_limit);
  end if;
  select coalesce(array_agg(x.f order by x.at desc), '{}') into v_files
  from (select e.f, max(t.at) as at
        from scsql.tool_calls t cross join lateral jsonb_array_elements_text(t.files) e(f)
        where t.project_id = (select scsql_caller.project_id()) and t.author_id = (select scsql_caller.agent_id())
          and t.tool in ('Edit', 'Write', 'MultiEdit', 'NotebookEdit') and t.at > now() - interval '7 days'
          and jsonb_typeof(t.files) = 'array'
        group by e.f order by 2 desc limit p_limit) x;
  return v_files;
end
$$;
comment on function scsql_caller.recent_edits(integer) is
  'The files the acting agent changed in the last 7 days (Edit, Write, MultiEdit and NotebookEdit calls captured), newest first, at most LIMIT (0 to 1,000; SC010 otherwise): the focus of a map made with none.';

create or replace function scsql_caller.code_focus(p_project bigint, p_focus text[])
returns table (file_id bigint, def_id bigint, weight double precision)
language plpgsql stable  -- not SQL: Citus plans no query with an SQL function's parameters
as $$
#variable_conflict use_column
begin
  return query
  -- Each entry is a path (absolute under the root, or relative; a tail such
  -- as indexer.py will do), a name (index_tree, Tree.manifest) or text,
  -- whose identifiers and paths are taken.
  with root as (
    select rtrim(coalesce(p.root_path, ''), '/') || '/' as r from scsql.projects p where p.project_id = p_project
  ), tok as (
    select distinct case when left(x.t, char_length(root.r)) = root.r then substr(x.t, char_length(root.r) + 1)
                         else regexp_replace(x.t, '^\./', '') end as t
    from root, unnest(p_focus) e(v)
    cross join lateral (select e.v where e.v !~ '\s'
                        union all
                        select m[1] from regexp_matches(e.v, '([A-Za-z_$./][\w$]*(?:[./-][\w$]+)*)', 'g') m
                        where e.v ~ '\s') x(t)
    where char_length(x.t) between 2 and 1024
  ), files as (  -- a path by the index; a tail (a token with / or .) by the files' ends, each pair once
    select f.file_id from scsql.code_files f join tok on f.path = tok.t
    where f.project_id = p_project
    union all
    select f.file_id from scsql.code_files f join (select t from tok where t ~ '[/.]') tail
      on right(f.path, char_length(tail.t) + 1) = '/' || tail.t and f.path <> tail.t
    where f.project_id = p_project
  ), defs as (
    select d.def_id, d.file_id, count(*) over (partition by tok.t) as n
    from scsql.code_definitions d join tok on d.name = tok.t or d.qualname = tok.t
    where d.project_id = p_project and char_length(tok.t) >= 3
  )
  select f.file_id, null::bigint, 1.0::double precision from files f
  union all
  select d.file_id, d.def_id, 1.0 / d.n from defs d;
end
$$;
comment on function scsql_caller.code_focus(bigint, text[]) is
  'The files and definitions a focus names in project PROJECT: each entry a path (absolute under the root or relative, or a tail of one), a name or qualified name, or text (its identifiers and paths), each weighted (a name several definitions share, shared among them).';

create or replace function scsql_caller.code_spread(p_project bigint, p_files bigint[], p_weights double precision[])
returns table (file_id bigint, w double precision)
language plpgsql stable  -- not SQL: Citus plans no query with an SQL function's parameters
as $$
#variable_conflict use_column
begin
  return query
  with s0 as (
    select x.file_id, x.w / sum(x.w) over () as w
    from (select f.file_id, sum(f.w) as w from unnest(p_files, p_weights) f(file_id, w) group by f.file_id) x
  ), h1 as (
    select y.file_id, sum(y.w) as w from (
      select l.dst_file_id as file_id, s.w * l.out_share as w
      from s0 s join scsql.code_links l on l.project_id = p_project and l.src_file_id = s.file_id
      union all
      select l.src_file_id, 0.5 * s.w * l.in_share
      from s0 s join scsql.code_links l on l.project_id = p_project and l.dst_file_id = s.file_id) y group by y.file_id
  ), h1top as (
    select * from h1 order by w desc, file_id limit 40  -- the second step goes on from the likeliest only
  ), h2 as (
    select y.file_id, sum(y.w) as w from (
      select l.dst_file_id as file_id, s.w * l.out_share as w
      from h1top s join scsql.code_links l on l.project_id = p_project and l.src_file_id = s.file_id
      union all
      select l.src_file_id, 0.5 * s.w * l.in_share
      from h1top s cross join lateral (  -- a file used everywhere: its 50 strongest users (the rest add next to nothing)
        select l.src_file_id, l.in_share from scsql.code_links l
        where l.project_id = p_project and l.dst_file_id = s.file_id order by l.in_share desc limit 50) l) y
    group by y.file_id
  )
  -- The first terms of PageRank personalised by the focus: the focus, then what it uses and
  -- what uses it, one step away, and two steps away from the 40 likeliest of those (through
  -- all they use and the 50 strongest of their users).
  select z.file_id, sum(z.w) as w
  from (select file_id, w from s0 union all select file_id, 0.5 * w from h1 union all select file_id, 0.25 * w from h2) z
  group by z.file_id;
end
$$;
comment on function scsql_caller.code_spread(bigint, bigint[], double precision[]) is
  'For repo_map: how a focus (FILES of project PROJECT with WEIGHTS, a file named twice counting twice) spreads over the files: the first terms of PageRank personalised by it, as row-level security shows code_links: the focus, then what it uses and what uses it one step away, and two steps away from the 40 likeliest of those, through all they use and the 50 files that use each most. Returns each file reached and its weight.';

create or replace function scsql.repo_map(p_budget_tokens integer default 1000, p_focus text[] default null)
returns table (path text, score double precision, definitions text)
language plpgsql stable
as $$
#variable_conflict use_column
declare
  v_project bigint := scsql_caller.project_id();
  v_foc_file bigint[]; v_foc_def bigint[]; v_foc_weight double precision[];
  v_pers_file bigint[]; v_pers_w double precision[];
begin
  if p_budget_tokens is null or p_budget_tokens not between 50 and 20000 then
    raise exception using errcode = 'SC262', message = format('repo_map: budget %s is not 50 to 20,000 tokens', p_budget_tokens);
  elsif cardinality(p_focus) > 100 or exists (select from unnest(p_focus) e where char_length(e) > 2000) then
    raise exception using errcode = 'SC263', message = 'repo_map: focus is at most 100 entries of at most 2,000 characters';
  end if;
  -- Read first, not inside the query: on Citus that runs on the project's shard.
  p_focus := coalesce(p_focus, scsql_caller.recent_edits(10));
  -- The focus and its spread are read into arrays first, each a query of
  -- its own: on Citus the map's query runs on the project's shard, where
  -- the functions could not read the distributed tables.
  select coalesce(array_agg(f.file_id), '{}'), coalesce(array_agg(f.def_id), '{}'), coalesce(array_agg(f.weight), '{}')
    into v_foc_file, v_foc_def, v_foc_weight
  from scsql_caller.code_focus(v_project, p_focus) f;
  select array_agg(p.file_id), array_agg(p.w) into v_pers_file, v_pers_w
  from scsql_caller.code_spread(v_project, v_foc_file, v_foc_weight) p;
  return query
  with cand as (
    select f.file_id, f.path, f.rank, coalesce(p.w, 0) as pw
    from scsql.code_files f left join unnest(v_pers_file, v_pers_w) p(file_id, w) on p.file_id = f.file_id
    where f.project_id = v_project
      and (p.file_id is not null
           or f.file_id in (select t.file_id from scsql.code_files t where t.project_id = v_project
                            order by t.rank desc limit 60))
  ), scored as (
    select c.file_id, c.path,
           coalesce(c.pw / nullif(max(c.pw) over (), 0), 0) + 0.1 * coalesce(c.rank / nullif(max(c.rank) over (), 0), 0)
             as score
    from cand c order by 3 desc, 2 limit least(100, greatest(20, p_budget_tokens / 15))
  ), defs as (  -- each file's best definitions, as many as the budget could show, read by the file's index
    select s.file_id, s.path, s.score, d.def_id, d.line_start, d.line,
           s.score * (0.2 + 0.8 * coalesce(d.rank / nullif(d.top, 0), 0)) * case when d.focused then 10 else 1 end as dscore
    from scored s cross join lateral (
      select x.def_id, x.line_start, x.rank, '  ' || x.line_start || ': ' || x.signature as line,
             x.def_id = any(v_foc_def) as focused, max(x.rank) over () as top
      from scsql.code_definitions x
      left join scsql.code_definitions p on p.project_id = v_project and p.file_id = s.file_id and p.def_id = x.parent_id
      where x.project_id = v_project and x.file_id = s.file_id and x.kind <> 'constant'
        and (p.def_id is null or p.kind not in ('function', 'method'))
      order by 5 desc, x.rank desc, x.def_id limit greatest(40, p_budget_tokens / 10)) d
  ), firsts as (  -- a line costs at least 6 characters: past the best budget * 4 / 6 none could fit
    select d.*, row_number() over (partition by d.file_id order by d.dscore desc, d.def_id) as rn
    from (select * from defs order by dscore desc, def_id limit p_budget_tokens * 4 / 6 + 1) d
  ), costed as (
    select f.*, sum(char_length(f.line) + 1 + case when f.rn = 1 then char_length(f.path) + 1 else 0 end)
                  over (order by f.dscore desc, f.def_id) as chars
    from firsts f
  )
  select c.path, max(c.score), string_agg(c.line, E'\n' order by c.line_start, c.def_id)
  from costed c where c.chars <= p_budget_tokens * 4
  group by c.file_id, c.path
  order by 2 desc, 1;
end
$$;
comment on function scsql.repo_map(integer, text[]) is
  'A map of your project''s code: the files that matter most, each with the signatures of its most important definitions, ranked over the reference graph and personalised by focus, within a token budget.

p_budget_tokens (50..20000): tokens the map may take (characters / 4)
p_focus: paths, names or text to centre the map on (files named in the prompt or touched); default the files you edited lately; [] for none

Ranks the files of the acting agent''s project: the first terms of PageRank personalised by FOCUS (the files and definitions it names, what they use and what uses them one step away over code_links, and two steps away from the 40 likeliest of those, through all they use and the 50 files that use each most) plus a tenth of each file''s own PageRank (rank_code), or that rank alone without a focus. A definition counts by its file''s score and by its own rank within the file (ten times more when the focus names it); nested functions and constants are left out. Definitions are taken best first (of the best files for the budget, each file''s best that could fit) while the map''s text (each file''s path, then one line per definition: line number and signature) fits BUDGET_TOKENS at four characters a token, and shown by file, best file first, each file''s definitions in line order. Returns path, score and definitions (the lines). A focus entry is a path (absolute under the root or relative, or its tail such as indexer.py), a name or qualified name (index_tree, Tree.manifest), or text whose identifiers and paths are taken. Without FOCUS the map centres on the files the agent edited in the last 7 days; an empty array gives the project''s overall map. Raises SC262 for a budget out of range, SC263 for a focus of more than 100 entries or an entry over 2,000 characters.';

-- ---------------------------------------------------------------------------
-- Cards: a file, the project
-- ---------------------------------------------------------------------------

create or replace function scsql_caller.code_file(p_project bigint, p_path text)
returns scsql.code_files
language sql stable
as $$
  -- PATH as indexed, or absolute under the project root, or with a leading ./
  select f.* from scsql.code_files f, scsql.projects p
  where f.project_id = p_project and p.project_id = p_project
    and f.path in (p_path, regexp_replace(p_path, '^\./', ''),
                   case when left(p_path, char_length(rtrim(p.root_path, '/')) + 1) = rtrim(p.root_path, '/') || '/'
                        then substr(p_path, char_length(rtrim(p.root_path, '/')) + 2) end)
  limit 1
$$;
comment on function scsql_caller.code_file(bigint, text) is
  'The code file of project PROJECT at PATH: as indexed (relative to the root), with a leading ./, or absolute under the project''s root.';

create or replace function scsql_caller.file_stem(p_path text)
returns text
language sql immutable
as $$ select regexp_replace(regexp_replace(p_path, '^.*/', ''), '\.[^.]*$', '') $$;
comment on function scsql_caller.file_stem(text) is 'A path''s file name without its suffix (src/app/db.py: db).';

create or replace function scsql_caller.file_links(p_file scsql.code_files)
returns jsonb
language plpgsql stable  -- not SQL: Citus plans no query with an SQL function's parameters
as $$
declare
  -- Scalars, not the row's fields: Citus routes a query to the project's
  -- shard by a value it compares project_id with; by a field of a row
  -- argument it plans a query of every shard, which it fails to plan here.
  v_project bigint := p_file.project_id;
  v_file bigint := p_file.file_id;
  v_path text := p_file.path;
  v_links jsonb := '{}';
begin
  -- One statement a part: on Citus, one query of the four parts fails to
  -- plan (a lateral reference its subqueries' planning cannot place).
  -- The file an import resolved to is joined inside the first 50 (Citus
  -- routes the query whole only when no join is above a LIMIT).
  v_links := v_links || jsonb_build_object('imports', coalesce((select jsonb_agg(i.o order by i.line, i.name)
                         from (select jsonb_build_object('module', r.name, 'symbol', r.qualifier, 'path', tf.path,
                                                         'line', r.lines[1]) as o, r.lines[1] as line, r.name
                               from scsql.code_references r
                               left join scsql.code_files tf on tf.project_id = r.project_id and tf.file_id = r.target_file_id
                               where r.project_id = v_project and r.file_id = v_file and r.kind = 'import'
                               order by r.lines[1] limit 50) i),
                        '[]'));
  v_links := v_links || jsonb_build_object('imported_by', coalesce((select jsonb_agg(jsonb_build_object('path', x.path, 'references', x.n, 'line', x.line)
                                              order by x.n desc, x.path)
                             from (select f.path, sum(r.n)::integer as n, min(r.lines[1]) as line
                                   from scsql.code_references r
                                   join scsql.code_files f on f.project_id = r.project_id and f.file_id = r.file_id
                                   where r.project_id = v_project and r.target_file_id = v_file
                                     and r.file_id <> v_file
                                   group by f.path order by 2 desc, 1 limit 30) x), '[]'));
  v_links := v_links || jsonb_build_object('uses', coalesce((select jsonb_agg(jsonb_build_object('path', x.path, 'references', x.n) order by x.n desc, x.path)
                      from (select f.path, sum(r.n)::integer as n
                            from scsql.code_references r
                            join scsql.code_files f on f.project_id = r.project_id and f.file_id = r.target_file_id
                            where r.project_id = v_project and r.file_id = v_file and r.kind <> 'import'
                              and r.target_file_id <> v_file
                            group by f.path order by 2 desc, 1 limit 30) x), '[]'));
  v_links := v_links || jsonb_build_object('tests', coalesce((select jsonb_agg(t.path order by t.path) from (
                         select f.path from scsql.code_files f
                         where f.project_id = v_project and f.file_id <> v_file
                           and (f.path ~ '(^|/)(tests?|__tests__|spec)/' or f.path ~ '(^|/)test_[^/]*$'
                                or f.path ~ '(_test|\.test|\.spec|Test|Tests)\.[a-z]+$')
                           and (regexp_replace(f.path, '^.*/', '') in (
                                  'test_' || scsql_caller.file_stem(v_path) || '.py',
                                  scsql_caller.file_stem(v_path) || '_test.py',
                                  scsql_caller.file_stem(v_path) || '_test.go',
                                  scsql_caller.file_stem(v_path) || 'Test.java',
                                  scsql_caller.file_stem(v_path) || '.test.ts',
                                  scsql_caller.file_stem(v_path) || '.test.js',
                                  scsql_caller.file_stem(v_path) || '.spec.ts')
                                -- the files referring to it, found from it (an index), not from each test file
                                or f.file_id in (select r.file_id from scsql.code_references r
                                                 where r.project_id = v_project
                                                   and r.target_file_id = v_file))
                         order by f.path limit 20) t), '[]'));
  return v_links;
end
$$;
comment on function scsql_caller.file_links(scsql.code_files) is
  'What file_card says of a file''s place in the graph: imports (module, symbol, the file it resolved to), imported_by and uses (the files that refer to it and that it refers to, with how many references), tests (test files named after it or referring to it).';

create or replace function scsql_caller.file_history(p_file scsql.code_files)
returns jsonb
language plpgsql stable  -- not SQL: Citus plans no query with an SQL function's parameters
as $$
declare
  v_project bigint := p_file.project_id;  -- scalars, as in file_links
  v_file bigint := p_file.file_id;
  v_path text := p_file.path;
begin
  return (
  -- Edits from captured tool calls (the last 20,000 of the project, within
  -- 90 days), decisions and lessons that name the file, the task holding it.
  with names as (
    select rtrim(p.root_path, '/') || '/' || v_path as abs, v_path as rel,
           regexp_replace(v_path, '^.*/', '') as base
    from scsql.projects p where p.project_id = v_project
  )
  select jsonb_build_object(
    'edits', coalesce((select jsonb_agg(jsonb_build_object('agent', a.name, 'tool', t.tool, 'at', t.at,
                                                           'cite', 'tool_call:' || t.tool_call_id) order by t.at desc)
                       from (select c.* from scsql.tool_calls c, names n
                             where c.project_id = v_project and c.at > now() - interval '90 days'
                               and c.tool in ('Edit', 'Write', 'MultiEdit', 'NotebookEdit')
                               and jsonb_typeof(c.files) = 'array' and (c.files ? n.abs or c.files ? n.rel)
                             order by c.at desc limit 10) t
                       left join scsql.agents a on a.agent_id = t.author_id), '[]'),
    'decisions', coalesce((select jsonb_agg(jsonb_build_object('title', d.title, 'at', d.decided_at,
                                                               'cite', 'decision:' || d.decision_id)
                                            order by d.decided_at desc)
                           from (select d.* from scsql.decisions d, names n
                                 where d.project_id = v_project
                                   and not exists (select from scsql.decisions s where s.project_id = d.project_id
                                                   and s.supersedes = d.decision_id)
                                   and (strpos(d.title || ' ' || d.rationale, n.rel) > 0
                                        or (char_length(n.base) >= 6 and strpos(d.title || ' ' || d.rationale, n.base) > 0))
                                 order by d.decided_at desc limit 5) d), '[]'),
    'lessons', coalesce((select jsonb_agg(jsonb_build_object('summary', left(l.summary, 300), 'kind', l.kind,
                                                             'cite', 'learning:' || l.learning_id)
                                          order by l.created_at desc)
                         from (select l.* from scsql.learnings l, names n
                               where l.project_id = v_project
                                 and (l.input_key in (n.abs, n.rel) or strpos(l.summary, n.rel) > 0
                                      or (char_length(n.base) >= 6 and strpos(l.summary, n.base) > 0))
                               order by l.created_at desc limit 5) l), '[]'),
    'task', (select jsonb_build_object('task', t.task_id, 'state', t.state, 'owner', a.name, 'team_role', t.team_role,
                                       'cite', 'task:' || t.task_id)
             from scsql.task_files tf
             join scsql.tasks t on t.project_id = tf.project_id and t.task_id = tf.task_id
             left join scsql.agents a on a.agent_id = t.claimed_by
             where tf.project_id = v_project
               and (tf.path = '.' or lower(v_path) = tf.path or lower(v_path) like tf.path || '/%')
             limit 1)));
end
$$;
comment on function scsql_caller.file_history(scsql.code_files) is
  'What file_card says of a file''s history: the last edits captured (agent, tool, time, citation), the current decisions and the lessons that name it, and the task that holds it exclusively.';

create or replace function scsql.file_card(p_path text)
returns jsonb
language plpgsql stable
as $$
declare
  v_project bigint := scsql_caller.project_id();
  v_file scsql.code_files;
  v_card jsonb;
begin
  if p_path is null or char_length(p_path) not between 1 and 4096 then
    raise exception using errcode = 'SC260', message = 'file_card: the path is 1 to 4,096 characters';
  end if;
  v_file := scsql_caller.code_file(v_project, p_path);
  if v_file.file_id is null then
    raise exception using errcode = 'SC264', message = format('file_card: %s has not been indexed', left(p_path, 300)),
      hint = 'Give the path relative to the project root (or absolute under it); scsql index PATH, or the index tool, reads the files.';
  end if;
  v_card := jsonb_build_object(
    'path', v_file.path, 'language', v_file.language, 'status', v_file.status,
    'parse_errors_at', case when v_file.status = 'partial' then to_jsonb(v_file.error_lines) end,
    'rank', round(v_file.rank::numeric, 3), 'indexed_at', v_file.indexed_at,
    'defines', coalesce((select jsonb_agg(jsonb_build_object('kind', d.kind, 'name', d.qualname,
                                                             'signature', d.signature, 'lines', d.line_start || '-' || d.line_end)
                                          order by d.line_start, d.def_id)
                         from (select d.* from scsql.code_definitions d
                               left join scsql.code_definitions p on p.project_id = d.project_id and p.def_id = d.parent_id
                               where d.project_id = v_project and d.file_id = v_file.file_id
                                 and (p.def_id is null or p.kind not in ('function', 'method'))
                               order by d.rank desc, d.line_start limit 60) d), '[]'));
  -- Its links and history read by statements of their own: on Citus the
  -- one above runs on the project's shard, where they could not read it.
  return v_card || scsql_caller.file_links(v_file) || scsql_caller.file_history(v_file);
end
$$;
comment on function scsql.file_card(text) is
  'What one file of your project is: what it defines, imports and is imported by, its tests, who edited it and when, the decisions and lessons that name it, the task that holds it. Returns one JSON object.

p_path: the file, relative to the project root (or absolute under it)

A card of one indexed file of the acting agent''s project, model-free, read as the caller (row-level security: only what the agent may read): path, language, status (parsed; partial with parse_errors_at, the lines where the grammar met errors: what parsed around them is kept; text: no symbols), rank, indexed_at; defines (kind, qualified name, signature, lines; at most 60, the most used first, nested functions left out); imports (module, symbol, the file it resolved to, line); imported_by and uses (the files that refer to it and that it refers to, with how many references); tests (test files named after it, test_x.py, x_test.go, x.test.ts, XTest.java, or referring to it); edits (the last 10 captured Edit, Write, MultiEdit and NotebookEdit calls on it within 90 days: agent, tool, time, cite tool_call:<id>); decisions (current ones naming its path, or its file name when 6 characters or more; cite decision:<id>) and lessons (learnings naming it; cite learning:<id>); task (the queued or claimed task holding it exclusively). Raises SC260 for a bad path, SC264 when the file has not been indexed.';

create or replace function scsql_caller.test_command(p_project bigint)
returns text
language plpgsql stable  -- not SQL: Citus plans no query with an SQL function's parameters
as $$
begin
  return case
    when exists (select from scsql.code_definitions d join scsql.code_files f using (project_id, file_id)
                 where d.project_id = p_project and d.kind = 'script' and d.name = 'test'
                   and f.path ~ '(^|/)package\.json$') then 'npm test'
    when exists (select from scsql.code_definitions d join scsql.code_files f using (project_id, file_id)
                 where d.project_id = p_project and d.kind = 'target' and d.name = 'test') then 'make test'
    when exists (select from scsql.code_files f where f.project_id = p_project and f.language = 'python'
                   and f.path ~ '(^|/)(test_[^/]*|[^/]*_test)\.py$') then 'python -m pytest'
    when exists (select from scsql.code_files f where f.project_id = p_project and f.path ~ '(^|/)go\.mod$')
      then 'go test ./...'
    when exists (select from scsql.code_files f where f.project_id = p_project and f.path ~ '(^|/)Cargo\.toml$')
      then 'cargo test'
    when exists (select from scsql.code_files f where f.project_id = p_project and f.path ~ '(^|/)pom\.xml$')
      then 'mvn test'
    when exists (select from scsql.code_files f where f.project_id = p_project and f.path ~ '(^|/)build\.gradle(\.kts)?$')
      then 'gradle test'
  end;
end
$$;
comment on function scsql_caller.test_command(bigint) is
  'The command that runs project PROJECT''s tests, judged from its files: package.json''s test script, a Makefile''s test target, pytest for Python test files, go test, cargo test, mvn test, gradle test; NULL when none fits.';

create or replace function scsql.project_card()
returns jsonb
language plpgsql stable  -- not SQL: Citus routes the card's query to the project's shard by a value
as $$
declare
  v_project bigint := scsql_caller.project_id();
  v_test text := scsql_caller.test_command(v_project);  -- read first: on Citus the query runs on the shard
  v_top bigint[];
begin
  -- The main modules first, then no subquery of the card refers to an outer
  -- row (Citus refuses those beside the card's CTEs).
  select array_agg(f.file_id) into v_top
  from (select f.file_id from scsql.code_files f where f.project_id = v_project and f.language is not null
          and f.language <> 'manifest' order by f.rank desc limit 10) f;
  return (
  with p as (select pr.project_id, pr.name, pr.root_path from scsql.projects pr where pr.project_id = v_project),
  files as (select f.* from scsql.code_files f where f.project_id = v_project)
  select jsonb_build_object(
    'project', p.name, 'root', p.root_path,
    'files', (select count(*) from files), 'partial_files', (select count(*) from files where status = 'partial'),
    'definitions', (select count(*) from scsql.code_definitions d where d.project_id = v_project),
    'references', (select jsonb_object_agg(x.resolution, x.n) from (
                     select r.resolution, count(*) as n from scsql.code_references r
                     where r.project_id = v_project group by 1) x),
    'languages', coalesce((select jsonb_agg(jsonb_build_object('language', x.language, 'files', x.n) order by x.n desc)
                           from (select coalesce(language, 'text') as language, count(*) as n from files group by 1) x),
                          '[]'),
    'entry_points', coalesce((select jsonb_agg(jsonb_build_object('name', x.name, 'kind', x.kind, 'signature', x.signature,
                                                                  'cite', x.path || ':' || x.line_start) order by x.o, x.path)
                              from (select d.qualname as name, d.kind, d.signature, f.path, d.line_start,
                                           case d.kind when 'script' then 0 else 1 end as o
                                    from scsql.code_definitions d join files f on f.file_id = d.file_id
                                    where d.project_id = v_project
                                      and (d.kind = 'script' or (d.name = 'main' and d.parent_id is null
                                                                 and d.kind = 'function'))
                                    union all
                                    select f.path, 'file', null, f.path, 1, 2 from files f
                                    where f.path ~ '(^|/)(__main__\.py|main\.go|main\.rs|index\.[jt]s)$'
                                    order by 6, 4 limit 15) x), '[]'),
    'test_command', v_test,
    'main_modules', coalesce((select jsonb_agg(jsonb_build_object('path', x.path, 'rank', round(x.rank::numeric, 2),
                                                                  'defines', x.defs) order by x.rank desc)
                              from (select f.path, f.rank,
                                           jsonb_agg(d.qualname order by d.rank desc) filter (where d.n is not null) as defs
                                    from files f
                                    left join (select d.file_id, d.qualname, d.rank,
                                                      row_number() over (partition by d.file_id order by d.rank desc) as n
                                               from scsql.code_definitions d where d.project_id = v_project
                                                 and d.file_id = any(v_top) and d.parent_id is null) d
                                      on d.file_id = f.file_id and d.n <= 3
                                    where f.file_id = any(v_top) group by f.file_id, f.path, f.rank) x), '[]'),
    'recent_decisions', coalesce((select jsonb_agg(jsonb_build_object('title', d.title, 'at', d.decided_at,
                                                                      'cite', 'decision:' || d.decision_id)
                                                   order by d.decided_at desc)
                                  from (select d.* from scsql.decisions d
                                        left join scsql.decisions s on s.project_id = d.project_id
                                                                   and s.supersedes = d.decision_id
                                        where d.project_id = v_project and s.decision_id is null
                                        order by d.decided_at desc limit 5) d), '[]'),
    'ranked_at', (select s.ranked_at from scsql.code_state s where s.project_id = v_project))
  from p);
end
$$;
comment on function scsql.project_card()  is
  'What your project is, from its code: languages, entry points, the test command, the main modules, recent decisions. Returns one JSON object.

A card of the acting agent''s project, model-free, read as the caller: project, root, files (and partial_files, parsed with errors), definitions, references (how many of each resolution), languages (files per language; text: no grammar), entry_points (scripts of pyproject.toml and package.json, top-level functions named main, __main__.py, main.go, main.rs, index.js/ts; each cited path:line), test_command (from the files present: package.json''s test script, a Makefile test target, pytest for Python, go test, cargo test, mvn or gradle test), main_modules (the ten files of highest rank with their three most used definitions), recent_decisions (the five latest current ones) and ranked_at.';


-- ---------------------------------------------------------------------------
-- The graph: nodes, one step, neighbours, paths
-- ---------------------------------------------------------------------------
--
-- A node is (kind, id, key): a file (file_id), a definition (def_id), an
-- agent (agent_id), a task (task_id), a decision (decision_id) or a fact
-- (its key). Edges: calls and inherits (definition or file to definition;
-- an ambiguous reference to each of its candidates), imports (file to
-- file), defines (file to its top-level definitions, a definition to those
-- nested in it), edited (agent to file, from captured tool calls), owns
-- (task to the files it holds) and mentions (decision or fact to the files
-- and definitions its text names).

create or replace function scsql_caller.graph_nodes(p_project bigint, p_node text)
returns table (kind text, id bigint, key text)
language plpgsql stable  -- not SQL: Citus plans no query with an SQL function's parameters
as $$
#variable_conflict use_column
begin
  return query
  with n as (select p_node as v, split_part(p_node, ':', 1) as pre, substr(p_node, strpos(p_node, ':') + 1) as rest)
  select 'agent', a.agent_id, null from n, scsql.agents a
  where n.pre = 'agent' and a.name = n.rest and a.project_id = p_project
  union all
  select 'task', t.task_id, null from n, scsql.tasks t
  where n.pre = 'task' and n.rest ~ '^[0-9]{1,18}$' and t.project_id = p_project and t.task_id = n.rest::bigint
  union all
  select 'decision', d.decision_id, null from n, scsql.decisions d
  where n.pre = 'decision' and n.rest ~ '^[0-9]{1,18}$' and d.project_id = p_project and d.decision_id = n.rest::bigint
  union all
  select 'fact', null, m.key from n, scsql.memory_facts m
  where n.pre = 'memory' and m.project_id = p_project and m.key = n.rest
  union all
  select 'file', f.file_id, null from n, scsql.code_files f
  where f.project_id = p_project and f.path = case when n.pre = 'file' then n.rest else n.v end
  union all
  (select 'definition', d.def_id, null from n, scsql.code_definitions d, scsql.code_files f
   where n.pre not in ('agent', 'task', 'decision', 'memory', 'file') and d.project_id = p_project
     and f.project_id = p_project and f.file_id = d.file_id
     and (case when strpos(n.v, '#') > 0 then f.path = split_part(n.v, '#', 1)
                                              and substr(n.v, strpos(n.v, '#') + 1) in (d.qualname, d.key)
               else d.qualname = n.v end)
   order by d.rank desc limit 20)
  union all
  (select 'definition', d.def_id, null from n, scsql.code_definitions d
   where n.pre not in ('agent', 'task', 'decision', 'memory', 'file') and strpos(n.v, '#') = 0
     and d.project_id = p_project and d.name = n.v
     and not exists (select from scsql.code_definitions q where q.project_id = p_project and q.qualname = n.v)
   order by d.rank desc limit 20);
end
$$;
comment on function scsql_caller.graph_nodes(bigint, text) is
  'The nodes of project PROJECT that NODE names: agent:<name>, task:<id>, decision:<id>, memory:<key> (a fact), file:<path> or a path, path#qualified.name, or a qualified name or name (the definitions so named, at most 20, the most used first).';

create or replace function scsql_caller.graph_code_step(p_project bigint, p_kind text[], p_id bigint[],
                                                        p_out boolean, p_kinds text[], p_resolved boolean)
returns table (i integer, edge text, kind text, id bigint, key text, resolution text, cite text)
language plpgsql stable  -- not SQL: Citus plans no query with an SQL function's parameters
as $$
#variable_conflict use_column
begin
  return query
  with fr as materialized (
    select u.i::integer, u.kind, u.id from unnest(p_kind, p_id) with ordinality u(kind, id, i)
    where u.kind in ('file', 'definition')
  )
  -- calls and inherits, out: what the definition (or the file's top level) refers to
  select fr.i, case r.kind when 'call' then 'calls' else 'inherits' end, 'definition', t.def_id, null, r.resolution,
         f.path || ':' || r.lines[1]
  from fr
  join scsql.code_references r on r.project_id = p_project and r.kind in ('call', 'inherit')
   and ((fr.kind = 'definition' and r.from_def_id = fr.id)
        or (fr.kind = 'file' and r.file_id = fr.id and r.from_def_id is null))
  join scsql.code_files f on f.project_id = r.project_id and f.file_id = r.file_id
  cross join lateral (select r.target_def_id as def_id where r.target_def_id is not null
                      union all select c from unnest(r.candidates) c where r.resolution = 'ambiguous' and not p_resolved) t
  where p_out and case when r.kind = 'call' then 'calls' else 'inherits' end = any(p_kinds)
  union all
  -- calls and inherits, in: who refers to the definition
  select fr.i, case r.kind when 'call' then 'calls' else 'inherits' end,
         case when r.from_def_id is null then 'file' else 'definition' end, coalesce(r.from_def_id, r.file_id), null,
         r.resolution, f.path || ':' || r.lines[1]
  from fr
  join scsql.code_definitions d on d.project_id = p_project and d.def_id = fr.id and fr.kind = 'definition'
  join scsql.code_references r on r.project_id = p_project and r.name = d.name and r.kind in ('call', 'inherit')
   and (r.target_def_id = d.def_id or (r.resolution = 'ambiguous' and not p_resolved and d.def_id = any(r.candidates)))
  join scsql.code_files f on f.project_id = r.project_id and f.file_id = r.file_id
  where not p_out and case when r.kind = 'call' then 'calls' else 'inherits' end = any(p_kinds)
  union all
  -- imports, out and in
  select fr.i, 'imports', 'file', tf.file_id, null, r.resolution, f.path || ':' || r.lines[1]
  from fr
  join scsql.code_references r on r.project_id = p_project and r.file_id = fr.id and fr.kind = 'file'
   and r.kind = 'import' and r.resolution in ('file', 'module')
  join scsql.code_files f on f.project_id = r.project_id and f.file_id = r.file_id
  join scsql.code_files tf on tf.project_id = r.project_id and tf.module = r.target_module
  where p_out and 'imports' = any(p_kinds)
  union all
  select fr.i, 'imports', 'file', r.file_id, null, r.resolution, f.path || ':' || r.lines[1]
  from fr
  join scsql.code_files me on me.project_id = p_project and me.file_id = fr.id and fr.kind = 'file'
  join scsql.code_references r on r.project_id = p_project and r.kind = 'import' and r.resolution in ('file', 'module')
   and (r.target_file_id = me.file_id or (r.resolution = 'module' and r.target_module = me.module))
  join scsql.code_files f on f.project_id = r.project_id and f.file_id = r.file_id
  where not p_out and 'imports' = any(p_kinds)
  union all
  -- defines, out and in
  select fr.i, 'defines', 'definition', d.def_id, null, null, f.path || ':' || d.line_start
  from fr
  join scsql.code_definitions d on d.project_id = p_project
   and ((fr.kind = 'file' and d.file_id = fr.id and d.parent_id is null) or (fr.kind = 'definition' and d.parent_id = fr.id))
  join scsql.code_files f on f.project_id = d.project_id and f.file_id = d.file_id
  where p_out and 'defines' = any(p_kinds)
  union all
  select fr.i, 'defines', case when d.parent_id is null then 'file' else 'definition' end, coalesce(d.parent_id, d.file_id),
         null, null, f.path || ':' || d.line_start
  from fr
  join scsql.code_definitions d on d.project_id = p_project and d.def_id = fr.id and fr.kind = 'definition'
  join scsql.code_files f on f.project_id = d.project_id and f.file_id = d.file_id
  where not p_out and 'defines' = any(p_kinds);
end
$$;
comment on function scsql_caller.graph_code_step(bigint, text[], bigint[], boolean, text[], boolean) is
  'One step of the code graph of project PROJECT from each node (KIND[i], ID[i]) of a frontier, forward (OUT) or backward, over the edge kinds KINDS: calls and inherits (an ambiguous reference leads to each candidate, resolution ambiguous, unless RESOLVED asks for resolved references only), imports, defines. Each edge names the frontier node it leaves (i) and cites where it is written, path:line.';

create or replace function scsql_caller.graph_work_step(p_project bigint, p_kind text[], p_id bigint[], p_key text[],
                                                        p_out boolean, p_kinds text[])
returns table (i integer, edge text, kind text, id bigint, key text, resolution text, cite text)
language plpgsql stable  -- not SQL: Citus plans no query with an SQL function's parameters
as $$
#variable_conflict use_column
begin
  return query with fr as materialized (
    select u.i::integer, u.kind, u.id, u.key from unnest(p_kind, p_id, p_key) with ordinality u(kind, id, key, i)
  ), root as (
    select rtrim(p.root_path, '/') || '/' as r from scsql.projects p where p.project_id = p_project
  ), edits as materialized (
    select e.tool_call_id, e.author_id, x.f
    from (select t.tool_call_id, t.author_id, t.files from scsql.tool_calls t
          where 'edited' = any(p_kinds) and exists (select from fr where fr.kind in ('agent', 'file'))
            and t.project_id = p_project and t.at > now() - interval '90 days'
            and t.tool in ('Edit', 'Write', 'MultiEdit', 'NotebookEdit') and jsonb_typeof(t.files) = 'array'
          order by t.at desc limit 20000) e
    cross join lateral jsonb_array_elements_text(e.files) x(f)
  ), texts as materialized (
    select 'decision' as kind, d.decision_id as id, null::text as key, d.title || ' ' || d.rationale as body
    from scsql.decisions d
    where 'mentions' = any(p_kinds) and d.project_id = p_project
      and not exists (select from scsql.decisions s where s.project_id = d.project_id and s.supersedes = d.decision_id)
    union all
    select 'fact', null, m.key, m.key || ' ' || m.value from scsql.memory_facts m
    where 'mentions' = any(p_kinds) and m.project_id = p_project
  )
  select fr.i, 'edited', 'file', f.file_id, null::text, null::text, 'tool_call:' || max(e.tool_call_id)
  from fr join edits e on fr.kind = 'agent' and e.author_id = fr.id
  cross join root
  join scsql.code_files f on f.project_id = p_project and f.path in (e.f, substr(e.f, char_length(root.r) + 1))
  where p_out group by fr.i, f.file_id
  union all
  select fr.i, 'edited', 'agent', e.author_id, null, null, 'tool_call:' || max(e.tool_call_id)
  from fr join scsql.code_files f on fr.kind = 'file' and f.project_id = p_project and f.file_id = fr.id
  cross join root
  join edits e on e.f in (f.path, root.r || f.path)
  where not p_out group by fr.i, e.author_id
  union all
  select fr.i, 'owns', 'file', f.file_id, null, null, 'task:' || tf.task_id
  from fr join scsql.task_files tf on fr.kind = 'task' and tf.project_id = p_project and tf.task_id = fr.id
  join scsql.code_files f on f.project_id = tf.project_id
   and (tf.path = '.' or lower(f.path) = tf.path or lower(f.path) like tf.path || '/%')
  where p_out and 'owns' = any(p_kinds)
  union all
  select fr.i, 'owns', 'task', tf.task_id, null, null, 'task:' || tf.task_id
  from fr join scsql.code_files f on fr.kind = 'file' and f.project_id = p_project and f.file_id = fr.id
  join scsql.task_files tf on tf.project_id = f.project_id
   and (tf.path = '.' or lower(f.path) = tf.path or lower(f.path) like tf.path || '/%')
  where not p_out and 'owns' = any(p_kinds)
  union all
  -- mentions: a file by its path; a definition by a qualified name, or a name of 6+ characters with a _
  select fr.i, 'mentions', 'file', f.file_id, null, null, coalesce(t.kind || ':' || t.id, 'memory:' || t.key)
  from fr join texts t on fr.kind = t.kind and (fr.id = t.id or fr.key = t.key)
  join scsql.code_files f on f.project_id = p_project and strpos(t.body, f.path) > 0
  where p_out
  union all
  select distinct fr.i, 'mentions', 'definition', d.def_id, null, null, coalesce(t.kind || ':' || t.id, 'memory:' || t.key)
  from fr join texts t on fr.kind = t.kind and (fr.id = t.id or fr.key = t.key)
  cross join lateral regexp_matches(t.body, '([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)', 'g') m
  join scsql.code_definitions d on d.project_id = p_project and d.qualname = m[1]
   and (strpos(m[1], '.') > 0 or (char_length(m[1]) >= 6 and strpos(m[1], '_') > 0))
  where p_out
  union all
  select fr.i, 'mentions', t.kind, t.id, t.key, null, coalesce(t.kind || ':' || t.id, 'memory:' || t.key)
  from fr join scsql.code_files f on fr.kind = 'file' and f.project_id = p_project and f.file_id = fr.id
  join texts t on strpos(t.body, f.path) > 0
  where not p_out
  union all
  select fr.i, 'mentions', t.kind, t.id, t.key, null, coalesce(t.kind || ':' || t.id, 'memory:' || t.key)
  from fr join scsql.code_definitions d on fr.kind = 'definition' and d.project_id = p_project and d.def_id = fr.id
   and (strpos(d.qualname, '.') > 0 or (char_length(d.qualname) >= 6 and strpos(d.qualname, '_') > 0))
  join texts t on strpos(t.body, d.qualname) > 0
   and t.body ~ ('(^|[^\w.])' || replace(d.qualname, '.', '\.') || '($|[^\w])')
  where not p_out;
end
$$;
comment on function scsql_caller.graph_work_step(bigint, text[], bigint[], text[], boolean, text[]) is
  'One step of the graph of project PROJECT between code and work, from each node of a frontier (KIND[i], ID[i] or KEY[i]), forward (OUT) or backward: edited (agent to the files its captured Edit, Write, MultiEdit and NotebookEdit calls changed within 90 days, among the project''s last 20,000 such calls; cite tool_call:<id>), owns (task to the files it holds exclusively; cite task:<id>), mentions (a current decision or a fact to the files whose path its text holds and the definitions it names by qualified name, or by a name of 6 characters or more with an underscore; cite decision:<id> or memory:<key>).';

create or replace function scsql_caller.graph_label(p_project bigint, p_kind text, p_id bigint, p_key text)
returns table (node text, detail text)
language plpgsql stable  -- not SQL: Citus plans no query with an SQL function's parameters
as $$
#variable_conflict use_column
begin
  return query
  select f.path || '#' || d.qualname, d.kind || ' ' || d.signature from scsql.code_definitions d
  join scsql.code_files f on f.project_id = d.project_id and f.file_id = d.file_id
  where p_kind = 'definition' and d.project_id = p_project and d.def_id = p_id
  union all
  select f.path, coalesce(f.language, 'text') || case when f.status = 'partial' then ' (partial)' else '' end
  from scsql.code_files f where p_kind = 'file' and f.project_id = p_project and f.file_id = p_id
  union all
  select 'agent:' || a.name, a.team_role from scsql.agents a where p_kind = 'agent' and a.agent_id = p_id
  union all
  select 'task:' || t.task_id, t.team_role || ' ' || t.state from scsql.tasks t
  where p_kind = 'task' and t.project_id = p_project and t.task_id = p_id
  union all
  select 'decision:' || d.decision_id, d.title from scsql.decisions d
  where p_kind = 'decision' and d.project_id = p_project and d.decision_id = p_id
  union all
  select 'memory:' || m.key, left(m.value, 200) from scsql.memory_facts m
  where p_kind = 'fact' and m.project_id = p_project and m.key = p_key;
end
$$;
comment on function scsql_caller.graph_label(bigint, text, bigint, text) is
  'How a graph node of project PROJECT is named and described: path#qualified.name and kind with signature, path and language, agent:<name> and team role, task:<id>, decision:<id> and title, memory:<key> and value.';

create or replace function scsql_caller.graph_step(p_project bigint, p_kind text[], p_id bigint[], p_key text[],
                                                   p_direction text, p_kinds text[], p_resolved boolean)
returns table (i integer, direction text, edge text, kind text, id bigint, key text, resolution text, cite text)
language plpgsql stable
as $$
#variable_conflict use_column
declare
  v_out boolean;
begin
  -- A statement a direction and a step, each routed to the project's shard
  -- on Citus (one SQL query of both steps over both directions found no
  -- edge there).
  foreach v_out in array array[true, false] loop
    continue when not (p_direction = 'both' or (p_direction = 'out') = v_out);
    return query
    select s.i, case when v_out then 'out' else 'in' end, s.edge, s.kind, s.id, s.key, s.resolution, s.cite
    from scsql_caller.graph_code_step(p_project, p_kind, p_id, v_out, p_kinds, p_resolved) s;
    return query
    select s.i, case when v_out then 'out' else 'in' end, s.edge, s.kind, s.id, s.key, s.resolution, s.cite
    from scsql_caller.graph_work_step(p_project, p_kind, p_id, p_key, v_out, p_kinds) s;
  end loop;
end
$$;
comment on function scsql_caller.graph_step(bigint, text[], bigint[], text[], text, text[], boolean) is
  'One step of the graph of project PROJECT from each node of a frontier (KIND[i], ID[i] or KEY[i]) in DIRECTION (out, in or both) over edge kinds KINDS (RESOLVED: code references resolved to one definition only): graph_code_step and graph_work_step together; each edge names the frontier node it leaves (i).';

create or replace function scsql_caller.graph_check(p_node text, p_direction text, p_kinds text[], p_depth integer,
                                                    p_max_depth integer)
returns text[]
language plpgsql immutable
as $$
declare
  v_all constant text[] := array['calls', 'inherits', 'imports', 'defines', 'edited', 'owns', 'mentions'];
begin
  if p_node is null or char_length(p_node) not between 1 and 1100 then
    raise exception using errcode = 'SC265', message = 'a graph node is 1 to 1,100 characters',
      hint = 'A path, path#qualified.name, a name, agent:<name>, task:<id>, decision:<id> or memory:<key>.';
  end if;
  if p_direction is null or p_direction not in ('in', 'out', 'both') then
    raise exception using errcode = 'SC267', message = format('graph direction %L is not in, out or both', p_direction);
  end if;
  if p_kinds is not null and (cardinality(p_kinds) = 0 or not p_kinds <@ v_all) then
    raise exception using errcode = 'SC268', message = format('graph edge kinds %s: each is one of %s', p_kinds, v_all);
  end if;
  if p_depth is null or p_depth not between 1 and p_max_depth then
    raise exception using errcode = 'SC269', message = format('graph depth %s is not 1 to %s', p_depth, p_max_depth);
  end if;
  return coalesce(p_kinds, v_all);
end
$$;
comment on function scsql_caller.graph_check(text, text, text[], integer, integer) is
  'Checks the arguments of graph_neighbors and graph_path; returns the edge kinds to follow (all of them for NULL). Raises SC265, SC267, SC268 or SC269.';

create or replace function scsql.graph_neighbors(p_node text, p_direction text default 'both', p_kinds text[] default null,
                                                 p_depth integer default 1)
returns table (depth integer, direction text, edge text, node text, detail text, via text, resolution text, cite text)
language plpgsql stable
as $$
#variable_conflict use_column
declare
  v_project bigint := scsql_caller.project_id();
  v_kinds text[] := scsql_caller.graph_check(p_node, p_direction, p_kinds, p_depth, 5);
  f_kind text[]; f_id bigint[]; f_key text[];
  n_kind text[]; n_id bigint[]; n_key text[];
  e_i integer[]; e_dir text[]; e_edge text[]; e_res text[]; e_cite text[];
  v_seen text[];
  v_total integer := 0;
begin
  select array_agg(g.kind), array_agg(g.id), array_agg(g.key), array_agg(g.kind || ':' || coalesce(g.id::text, g.key))
    into f_kind, f_id, f_key, v_seen
  from scsql_caller.graph_nodes(v_project, p_node) g;
  if f_kind is null then
    raise exception using errcode = 'SC266', message = format('graph: %s names no node of your project', left(p_node, 300)),
      hint = 'A file as indexed (path), path#qualified.name, a definition''s name, agent:<name>, task:<id>, decision:<id>, memory:<key>.';
  end if;
  for d in 1 .. p_depth loop
    select array_agg(x.i order by x.n), array_agg(x.direction order by x.n), array_agg(x.edge order by x.n),
           array_agg(x.kind order by x.n), array_agg(x.id order by x.n), array_agg(x.key order by x.n),
           array_agg(x.resolution order by x.n), array_agg(x.cite order by x.n)
      into e_i, e_dir, e_edge, n_kind, n_id, n_key, e_res, e_cite
    from (
      select y.*, row_number() over (order by y.edge, y.direction, y.kind, y.id, y.key) as n
      from (select distinct on (s.kind, s.id, s.key) s.*
            from scsql_caller.graph_step(v_project, f_kind, f_id, f_key, p_direction, v_kinds, false) s
            where not (s.kind || ':' || coalesce(s.id::text, s.key)) = any(v_seen)
            order by s.kind, s.id, s.key, s.i) y
      limit 500 - v_total
    ) x;
    exit when n_kind is null;
    return query
      select d, u.dir, u.edge, l.node, l.detail, fl.node, u.res, u.cite
      from unnest(e_i, e_dir, e_edge, n_kind, n_id, n_key, e_res, e_cite) with ordinality
             u(i, dir, edge, kind, id, key, res, cite, n)
      cross join lateral scsql_caller.graph_label(v_project, u.kind, u.id, u.key) l
      cross join lateral scsql_caller.graph_label(v_project, f_kind[u.i], f_id[u.i], f_key[u.i]) fl
      order by u.n;
    v_total := v_total + cardinality(n_kind);
    exit when v_total >= 500;
    v_seen := v_seen || array(select k || ':' || coalesce(i::text, y) from unnest(n_kind, n_id, n_key) u(k, i, y));
    f_kind := n_kind; f_id := n_id; f_key := n_key;
  end loop;
end
$$;
comment on function scsql.graph_neighbors(text, text, text[], integer) is
  'What a file, definition, agent, task, decision or fact is linked to in your project, up to depth steps away: who calls X (direction in, kinds calls), what breaks if Y changes (in, calls/inherits/imports, depth 3). Returns each edge with its citation.

p_node: a path, path#qualified.name, a name, agent:<name>, task:<id>, decision:<id> or memory:<key>
p_direction: out (what the node uses), in (what uses it) or both
p_kinds: edge kinds to follow, of calls, inherits, imports, defines, edited, owns, mentions; default all
p_depth (1..5): steps

Walks the graph of the acting agent''s project as the caller (row-level security), breadth first from every node NODE names (a definition''s name may name several), each node reached once, at most 500 rows. Edges: calls and inherits (a definition, or a file''s top level, to the definitions it calls or inherits; an ambiguous reference leads to each candidate and says resolution ambiguous), imports (file to file), defines (file to its top-level definitions, a definition to those nested in it), edited (agent to the files its captured edits changed within 90 days), owns (task to the files it holds exclusively), mentions (decision or fact to the files and definitions its text names). Returns depth, direction (out or in), edge, node (path, path#qualified.name, agent:<name>, task:<id>, decision:<id>, memory:<key>), detail (signature, language, title, value), via (the node it was reached from), resolution (of a code reference: local, import, unique, ambiguous, file, module) and cite (path:line where the reference is written, tool_call:<id>, task:<id>, decision:<id>, memory:<key>). Raises SC265 for a bad node, SC266 when it names nothing, SC267 for a bad direction, SC268 for an unknown edge kind, SC269 for a depth out of range.';

create or replace function scsql.graph_path(p_from text, p_to text, p_max_depth integer default 3)
returns table (step integer, node text, detail text, edge text, direction text, cite text)
language plpgsql stable
as $$
#variable_conflict use_column
declare
  v_project bigint := scsql_caller.project_id();
  v_kinds text[] := scsql_caller.graph_check(p_from, 'both', null, p_max_depth, 6);
  v_kind text[]; v_id bigint[]; v_key text[]; v_parent integer[]; v_edge text[]; v_dir text[]; v_cite text[];
  v_seen text[];
  v_goal text[];
  v_front integer[];
  v_lo integer;
  v_hit integer;
  v_path integer[];
begin
  perform scsql_caller.graph_check(p_to, 'both', null, 1, 6);
  select array_agg(g.kind), array_agg(g.id), array_agg(g.key), array_agg(g.kind || ':' || coalesce(g.id::text, g.key))
    into v_kind, v_id, v_key, v_seen from scsql_caller.graph_nodes(v_project, p_from) g;
  select array_agg(g.kind || ':' || coalesce(g.id::text, g.key)) into v_goal from scsql_caller.graph_nodes(v_project, p_to) g;
  if v_kind is null or v_goal is null then
    raise exception using errcode = 'SC266',
      message = format('graph_path: %s names no node of your project', case when v_kind is null then p_from else p_to end);
  end if;
  v_parent := array_fill(0, array[cardinality(v_kind)]);
  v_edge := array_fill(null::text, array[cardinality(v_kind)]);
  v_dir := v_edge; v_cite := v_edge;
  v_front := array(select generate_series(1, cardinality(v_kind)));
  v_hit := (select min(i) from generate_series(1, cardinality(v_kind)) i where v_seen[i] = any(v_goal));
  for d in 1 .. p_max_depth loop
    exit when v_hit is not null or cardinality(v_front) = 0 or cardinality(v_kind) > 20000;
    v_front := v_front[1:5000];
    v_lo := cardinality(v_kind) + 1;
    select v_kind || array_agg(x.kind order by x.n), v_id || array_agg(x.id order by x.n), v_key || array_agg(x.key order by x.n),
           v_parent || array_agg(x.parent order by x.n), v_edge || array_agg(x.edge order by x.n),
           v_dir || array_agg(x.direction order by x.n), v_cite || array_agg(x.cite order by x.n),
           v_seen || array_agg(x.k order by x.n)
      into v_kind, v_id, v_key, v_parent, v_edge, v_dir, v_cite, v_seen
    from (select z.*, row_number() over (order by z.k) as n
          from (select distinct on (s.kind || ':' || coalesce(s.id::text, s.key)) s.*, v_front[s.i] as parent,
                       s.kind || ':' || coalesce(s.id::text, s.key) as k
                from scsql_caller.graph_step(v_project, array(select v_kind[j] from unnest(v_front) j),
                                             array(select v_id[j] from unnest(v_front) j),
                                             array(select v_key[j] from unnest(v_front) j), 'both', v_kinds, true) s
                where not (s.kind || ':' || coalesce(s.id::text, s.key)) = any(v_seen)
                order by s.kind || ':' || coalesce(s.id::text, s.key), s.i) z) x;
    v_front := array(select generate_series(v_lo, coalesce(cardinality(v_kind), 0)));
    v_hit := (select min(i) from unnest(v_front) i where v_seen[i] = any(v_goal));
  end loop;
  if v_hit is null then
    return;
  end if;
  v_path := array[v_hit];
  while v_parent[v_path[1]] > 0 loop
    v_path := v_parent[v_path[1]] || v_path;
  end loop;
  return query
    select s.n::integer - 1, l.node, l.detail, v_edge[s.i], v_dir[s.i], v_cite[s.i]
    from unnest(v_path) with ordinality s(i, n)
    cross join lateral scsql_caller.graph_label(v_project, v_kind[s.i], v_id[s.i], v_key[s.i]) l
    order by s.n;
end
$$;
comment on function scsql.graph_path(text, text, integer) is
  'How two things of your project are connected: the shortest chain of edges (calls, inherits, imports, defines, edited, owns, mentions, either way) from one node to another, each step cited.

p_from: the node to start from (a path, path#qualified.name, a name, agent:<name>, task:<id>, decision:<id>, memory:<key>)
p_to: the node to reach
p_max_depth (1..6): steps at most

Searches breadth first from every node FROM names, following every edge kind of graph_neighbors in both directions (code references resolved to one definition only), up to MAX_DEPTH steps (at most 5,000 nodes expanded a step, 20,000 in all), for a node TO names. Returns the path, one row per node: step (0 for the start), node, detail, and the edge that led to it with its direction (out: the previous node uses this one; in: this one uses the previous) and cite; no rows when none is found within reach. Raises like graph_neighbors (SC265, SC266, SC269).';

-- ---------------------------------------------------------------------------
-- Search that knows symbols: the definitions a query names, what a chunk defines
-- ---------------------------------------------------------------------------

create or replace function scsql_caller.symbol_query(p_query text)
returns text
language sql immutable
as $$
  -- The name a query names: what is left, one identifier (dotted, or
  -- path#qualified.name), once words such as where, is, defined, def,
  -- class, function, who, calls and punctuation are set aside; else NULL.
  select case when cardinality(w.ws) = 1
                and w.ws[1] ~ '^([^\s#]+#)?[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*$' then w.ws[1] end
  from (select array(select t from regexp_split_to_table(btrim(regexp_replace(left(p_query, 300), '[?()`''",:;]+', ' ', 'g')),
                                                          '\s+') t
                     where t <> '' and lower(t) not in ('where', 'is', 'are', 'the', 'a', 'an', 'of', 'defined', 'definition',
                       'define', 'defines', 'def', 'class', 'function', 'func', 'fn', 'method', 'struct', 'interface', 'type',
                       'find', 'show', 'me', 'who', 'calls', 'call', 'callers', 'what', 'does', 'do', 'in', 'code', 'source',
                       'for', 'procedure', 'table', 'view', 'trait', 'impl', 'enum')) as ws) w
$$;
comment on function scsql_caller.symbol_query(text) is
  'The definition name a search query names (verify_chain, Store.put, "where is index_tree defined", src/a.py#Store.put), or NULL when the query is not one name.';

create or replace function scsql_caller.symbol_chunk_ids(p_projects bigint[], p_query text)
returns table (project_id bigint, chunk_id bigint, qualname text, ord bigint)
language plpgsql stable  -- not SQL: Citus plans no query with an SQL function's parameters
as $$
#variable_conflict use_column
declare
  v_name text := scsql_caller.symbol_query(p_query);
  x record;
begin
  if v_name is null then
    return;
  end if;
  -- The chunks holding the definitions the query names: a qualified name
  -- first, then a name; the most used first; at most five. The definitions
  -- are read first (on Citus, one query of the projects' shards, ordered and
  -- cut there), then the chunk of each (one query of its project).
  for x in
    select d.*, row_number() over (order by d.exact desc, d.rank desc, d.path, d.def_id) as o
    from (
      select d.project_id, f.path, d.qualname, d.line_start, d.rank, d.def_id,
             (d.qualname = v_name or strpos(v_name, '#') > 0) as exact
      from scsql.code_definitions d
      join scsql.code_files f on f.project_id = d.project_id and f.file_id = d.file_id
       and (strpos(v_name, '#') = 0 or f.path = split_part(v_name, '#', 1))
      where d.project_id = any(p_projects)
        and (case when strpos(v_name, '#') > 0 then d.qualname = split_part(v_name, '#', 2)
                  else d.qualname = v_name or d.name = v_name end)
      order by 7 desc, d.rank desc, f.path, d.def_id
      limit 5
    ) d
    order by o
  loop
    return query
    select x.project_id, c.chunk_id, x.qualname, x.o
    from scsql.kb_sources s
    join scsql.kb_chunks c on c.project_id = s.project_id and c.source_id = s.source_id
     and c.line_start <= x.line_start and c.line_end >= x.line_start
    where s.project_id = x.project_id and s.path = x.path and s.kind = 'file'
    order by c.seq
    limit 1;
  end loop;
end
$$;
comment on function scsql_caller.symbol_chunk_ids(bigint[], text) is
  'For search: the chunks (project_id, chunk_id), among projects PROJECTS, that hold the definitions QUERY names (scsql_caller.symbol_query), with the qualified name and their order: a qualified name before a name, the most used first, at most five. What search_projects puts first.';

create or replace function scsql_caller.symbol_chunks(p_projects bigint[], p_query text)
returns table (
  project text, source_kind text, source_path text, anchor text, line_start integer, line_end integer,
  text_span integer[], chunk_hash text, content text, score double precision, retrievers text[],
  bm25_rank integer, vector_rank integer, trust text, notice text, retrieved_at timestamptz,
  author text, written_at timestamptz, defines text[])
language plpgsql stable  -- not SQL: Citus plans no query with an SQL function's parameters
as $$
declare
  x record;
begin
  -- One query of its project for each chunk (at most five).
  for x in select * from scsql_caller.symbol_chunk_ids(p_projects, p_query) i order by i.ord loop
    return query
    select pr.name::text, s.kind, s.path, c.anchor, c.line_start, c.line_end, array[c.char_start, c.char_end],
         c.chunk_hash, c.content, null::double precision, array['symbol'], null::integer, null::integer, s.trust,
         null::text, now(), a.name, c.created_at, array[x.qualname]
    from scsql.kb_chunks c
    join scsql.kb_sources s on s.project_id = c.project_id and s.source_id = c.source_id
    join scsql.projects pr on pr.project_id = c.project_id
    left join scsql.agents a on a.agent_id = case when c.created_at > s.created_at then s.updated_by else s.created_by end
    where c.project_id = x.project_id and c.chunk_id = x.chunk_id;
  end loop;
end
$$;
comment on function scsql_caller.symbol_chunks(bigint[], text) is
  'For search: the chunks that hold the definitions QUERY names (scsql_caller.symbol_chunk_ids), in search''s columns, retrievers {symbol}, score NULL, defines the qualified name. A search whose query names a definition puts these first.';

create or replace function scsql_caller.chunk_defines(p_project bigint, p_paths text[], p_starts integer[],
                                                      p_ends integer[])
returns table (i integer, defines text[])
language plpgsql stable  -- not SQL: Citus plans no query with an SQL function's parameters
as $$
#variable_conflict use_column
declare
  d_path text[];
  d_line integer[];
  d_name text[];
  d_id bigint[];
begin
  -- The definitions of those files (nested functions left out), read at
  -- once (on Citus, one query of the project's shards), then for each chunk
  -- (path, first and last line) the qualified names of those that start in
  -- it, in line order.
  select array_agg(f.path), array_agg(d.line_start), array_agg(d.qualname), array_agg(d.def_id)
    into d_path, d_line, d_name, d_id
  from scsql.code_files f
  join scsql.code_definitions d on d.project_id = f.project_id and d.file_id = f.file_id
  left join scsql.code_definitions p on p.project_id = d.project_id and p.def_id = d.parent_id
  where f.project_id = p_project and f.path = any(p_paths)
    and (p.def_id is null or p.kind not in ('function', 'method'));
  return query
  select u.i::integer, (select array_agg(x.name order by x.line, x.id)
                        from unnest(d_path, d_line, d_name, d_id) x(path, line, name, id)
                        where x.path = u.path and x.line between u.s and u.e)
  from unnest(p_paths, p_starts, p_ends) with ordinality u(path, s, e, i);
end
$$;
comment on function scsql_caller.chunk_defines(bigint, text[], integer[], integer[]) is
  'For search results: for each chunk i of project PROJECT, given by PATHS[i] and its lines STARTS[i] to ENDS[i], the qualified names of the definitions that start in it, in line order (nested functions left out); NULL for a chunk that defines nothing or is no code.';
