-- scsql memory: recall by time. When the sources of search hits happened,
-- for the end of a time range a query names (scsql/memory/when.py; search's
-- p_since is its start).

create or replace function scsql_caller.source_times(p_paths text[])
returns table (source_path text, occurred_at timestamptz)
language plpgsql stable
as $$
begin
  if p_paths is null or coalesce(array_length(p_paths, 1), 0) > 1000 then
    raise exception using errcode = 'SC010', message = 'source_times needs an array of at most 1,000 source paths',
      hint = 'pass the source_path of each search hit';
  end if;
  return query
    select s.path, s.occurred_at
    from scsql.kb_sources s
    where s.project_id = scsql_caller.project_id() and s.path = any(p_paths) and s.occurred_at is not null;
end
$$;
comment on function scsql_caller.source_times(text[]) is
  'When the acting agent''s project''s sources of the given paths happened: each path with its kb_sources.occurred_at (the time an imported session chunk or summary happened), as the caller under row-level security; paths without one, or not in the project, are left out (a hit''s time is then when it was written). Runs as the caller. Raises SC010 for a NULL array or more than 1,000 paths.';
