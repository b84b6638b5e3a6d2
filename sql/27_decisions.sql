-- scsql memory: decisions and open loops, first-class. Written by decide
-- and open_loop, and by summarize_session (its decisions and open tasks);
-- shown by recall_context; decisions never change (a new one supersedes an
-- older one, which stays as history); an open loop is closed once, with a
-- resolution. Error codes: sql/22_lifecycle.sql.
--
-- Search returns current decisions as kind decision with one UNION arm
-- over scsql.decisions: source_path 'decision:' || decision_id, content
-- title || E'\n\n' || rationale, author decided_by, time decided_at, and
-- "not superseded" is: not exists (a decision of the project whose
-- supersedes is its id), served by the unique key decisions_supersedes_once.

create or replace function scsql._decide(p_project bigint, p_title text, p_rationale text, p_supersedes bigint,
                                         p_source_path text)
returns scsql.decisions
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_row scsql.decisions;
  v_err scsql.violation;
  v_agent bigint := scsql._my_agent_id();
  v_old scsql.decisions;
begin
  -- The text rules every memory write uses (sql/20_text.sql), raised as
  -- SC235; the table's constraints (sql/90_constraints.sql) bound what is
  -- stored once redacted.
  perform scsql._check_text('decision title', p_title, 200, false, 'SC235');
  perform scsql._check_text('decision rationale', p_rationale, 4000, true, 'SC235');
  if scsql._holds_private_key(p_title || E'\n' || p_rationale) then
    raise exception using errcode = 'SC215', message = 'the decision holds a PEM private key block; nothing was stored',
      hint = 'Private keys never belong in memory every agent of the project reads.';
  end if;
  p_title := btrim(scsql._redact(p_title));
  p_rationale := btrim(scsql._redact(p_rationale));
  if p_supersedes is not null then
    if not exists (select from scsql.decisions d where d.project_id = p_project and d.decision_id = p_supersedes) then
      raise exception using errcode = 'SC236', message = format('no decision %s in this project', p_supersedes),
        hint = 'decisions() lists the current decisions with their ids.';
    end if;
  end if;
  begin
    insert into scsql.decisions (project_id, title, rationale, supersedes, decided_by, source_path)
    values (p_project, p_title, p_rationale, p_supersedes, v_agent, p_source_path)
    returning * into v_row;
  exception
    when unique_violation then
      raise exception using errcode = 'SC237',
        message = format('decision %s was already superseded by decision %s', p_supersedes,
                         (select d.decision_id from scsql.decisions d where d.project_id = p_project and d.supersedes = p_supersedes)),
        hint = 'Supersede the current decision instead; decisions(p_include_superseded => true) shows the history.';
    when check_violation or not_null_violation then   -- too long once redacted
      get stacked diagnostics v_err.returned_sqlstate = returned_sqlstate, v_err.schema_name = schema_name,
        v_err.table_name = table_name, v_err.constraint_name = constraint_name, v_err.column_name = column_name, v_err.message_text = message_text;
      perform scsql._raise_violation(v_err);
  end;
  -- Memory history (sql/26_history.sql): the decision, and the one it supersedes.
  perform scsql._memory_change(p_project, 'decide', 'decision', 'decision:' || v_row.decision_id, null, null,
    scsql._text_hash(v_row.title || E'\n\n' || v_row.rationale), left(v_row.title, 1000),
    coalesce('decision:' || v_row.supersedes, p_source_path));
  -- The superseded decision is read first: a write from inside a query on a
  -- shard is refused on Citus.
  select * into v_old from scsql.decisions d where d.project_id = p_project and d.decision_id = v_row.supersedes;
  if v_old.decision_id is not null then
    perform scsql._memory_change(p_project, 'supersede', 'decision', 'decision:' || v_old.decision_id, null,
      scsql._text_hash(v_old.title || E'\n\n' || v_old.rationale), null,
      format('superseded by decision %s', v_row.decision_id), 'decision:' || v_row.decision_id);
  end if;
  return v_row;
end
$$;
comment on function scsql._decide(bigint, text, text, bigint, text) is
  'Private. Records a decision of the project (title and rationale stored redacted, trimmed), superseding P_SUPERSEDES if given; P_SOURCE_PATH names the session summary it came from. Records the decision (op decide) and the superseded one (op supersede) in the memory history. Raises SC235 bad title or rationale, SC215 a private key block, SC236 unknown superseded decision, SC237 already superseded (the unique key decides under concurrency).';

create or replace function scsql.decide(p_title text, p_rationale text, p_supersedes bigint default null)
returns table (decision_id bigint, title text, supersedes bigint, decided_at timestamptz)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_row scsql.decisions := scsql._decide(scsql._my_project(), p_title, p_rationale, p_supersedes, null);
begin
  return query select v_row.decision_id, v_row.title, v_row.supersedes, v_row.decided_at;
end
$$;
comment on function scsql.decide(text, text, bigint) is
  'Records a decision of your project with its rationale, optionally superseding an earlier one (which stays as history). Returns decision_id, title, supersedes, decided_at.

p_title: the decision, one line (1-200 characters)
p_rationale: why, and what was rejected (1-4,000 characters)
p_supersedes: id of the decision this one replaces

TITLE is one line of 1-200 characters and RATIONALE 1-4,000 characters, both stored redacted (see scsql.redact); the decision is attributed to the acting agent, with the time. A superseded decision (SUPERSEDES, its id) stays, and decisions() no longer lists it as current; a decision is superseded once (supersede the newest). Decisions are also recorded from the decisions of summarize_session. recall_context shows the latest ones; search finds them. Raises SC235 bad title or rationale, SC215 a PEM private key block, SC236 no such decision to supersede, SC237 that decision is already superseded.';

create or replace function scsql.decisions(p_query text default null, p_include_superseded boolean default false,
                                           p_limit integer default 20)
returns table (decision_id bigint, title text, rationale text, status text, supersedes bigint, superseded_by bigint,
               decided_by text, decided_at timestamptz, source_path text)
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_project bigint := scsql._my_project();
  v_terms text[];
begin
  if p_limit is null or p_limit not between 1 and 200 then
    raise exception using errcode = 'SC010', message = format('limit must be 1 to 200, got %s', p_limit);
  end if;
  if p_include_superseded is null then
    raise exception using errcode = 'SC010', message = 'include_superseded must be true or false';
  end if;
  if p_query is not null then
    if btrim(p_query, E' \t\r\n') = '' or char_length(p_query) > 2000 then
      raise exception using errcode = 'SC205',
        message = format('the query must be 1 to 2,000 characters, got %s', char_length(p_query)),
        hint = 'Omit it to list the latest decisions.';
    end if;
    select array_agg(t.term) into v_terms from scsql_caller.terms(p_query) t;
    if v_terms is null then
      return;  -- only stop words
    end if;
  end if;
  return query
  select d.decision_id, d.title, d.rationale, case when n.decision_id is null then 'current' else 'superseded' end,
         d.supersedes, n.decision_id, a.name::text, d.decided_at, d.source_path
  from scsql.decisions d
  left join scsql.decisions n on n.project_id = d.project_id and n.supersedes = d.decision_id
  left join scsql.agents a on a.agent_id = d.decided_by
  cross join lateral (
    select count(*) as hits from scsql_caller.terms(d.title || ' ' || d.rationale) t
    where v_terms is not null and t.term = any(v_terms)) m
  where d.project_id = v_project
    and (p_include_superseded or n.decision_id is null)
    and (v_terms is null or m.hits > 0)
  order by m.hits desc, d.decided_at desc, d.decision_id desc
  limit p_limit;
end
$$;
comment on function scsql.decisions(text, boolean, integer) is
  'Your project''s decisions, newest first, or those matching a query (best match first). Returns decision_id, title, rationale, status, supersedes, superseded_by, decided_by, decided_at, source_path.

p_query: words to look for in titles and rationales; omit for the latest
p_include_superseded: also list superseded decisions (the history)
p_limit (1..200): at most this many

The decisions of the acting agent''s project: current ones (not superseded) by default, with INCLUDE_SUPERSEDED the whole history. With QUERY, only those sharing a term with it (code-aware terms, as search uses), the most shared terms first; a query of only stop words returns nothing. Returns decision_id, title, rationale, status (current or superseded), supersedes, superseded_by, decided_by (agent), decided_at, source_path (the session summary it came from, if any). Raises SC205 for an empty or over-long query, SC010 for a limit out of 1..200.';

-- ---------------------------------------------------------------------------
-- Open loops
-- ---------------------------------------------------------------------------

create or replace function scsql._open_loop(p_project bigint, p_text text, p_owner text, p_source_path text)
returns table (loop_id bigint, created boolean)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_id bigint;
  v_err scsql.violation;
  v_agent bigint := scsql._my_agent_id();
begin
  -- The text rules every memory write uses (sql/20_text.sql), raised as
  -- SC238; the table's constraints (sql/90_constraints.sql) bound what is
  -- stored once redacted.
  perform scsql._check_text('open loop text', p_text, 2000, true, 'SC238');
  if p_owner is not null then
    perform scsql._check_text('open loop owner', p_owner, 200, false, 'SC238');
  end if;
  if scsql._holds_private_key(p_text) then
    raise exception using errcode = 'SC215', message = 'the open loop holds a PEM private key block; nothing was stored';
  end if;
  p_text := btrim(scsql._redact(p_text));
  p_owner := btrim(scsql._redact(p_owner));
  begin
    insert into scsql.open_loops as l (project_id, text, owner, opened_by, source_path)
    values (p_project, p_text, p_owner, v_agent, p_source_path)
    on conflict (project_id, md5(text)) where closed_at is null do nothing
    returning l.loop_id into v_id;
  exception when check_violation or not_null_violation then   -- too long once redacted
    get stacked diagnostics v_err.returned_sqlstate = returned_sqlstate, v_err.schema_name = schema_name,
      v_err.table_name = table_name, v_err.constraint_name = constraint_name, v_err.column_name = column_name, v_err.message_text = message_text;
    perform scsql._raise_violation(v_err);
  end;
  if v_id is not null then
    -- Memory history (sql/26_history.sql).
    perform scsql._memory_change(p_project, 'open_loop', 'loop', 'loop:' || v_id, null, null, scsql._text_hash(p_text),
                                 coalesce('owner ' || p_owner, 'no owner'), p_source_path);
    return query select v_id, true;
    return;
  end if;
  -- Opened again: touched, so it stays in recall_context (loop_stale_after).
  return query update scsql.open_loops l set touched_at = now()
  where l.project_id = p_project and md5(l.text) = md5(p_text) and l.closed_at is null
  returning l.loop_id, false;
end
$$;
comment on function scsql._open_loop(bigint, text, text, text) is
  'Private. Opens a loop of the project (text and owner stored redacted, trimmed), or finds the open loop with the same text (created false). A loop opened is recorded in the memory history (op open_loop, target loop:<id>). Raises SC238 bad text or owner, SC215 a private key block.';

create or replace function scsql.open_loop(p_text text, p_owner text default null)
returns table (loop_id bigint, text text, owner text, created boolean)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_r record;
  v_project bigint := scsql._my_project();
begin
  select * into v_r from scsql._open_loop(v_project, p_text, p_owner, null);
  return query select l.loop_id, l.text, l.owner, v_r.created from scsql.open_loops l
  where l.project_id = v_project and l.loop_id = v_r.loop_id;
end
$$;
comment on function scsql.open_loop(text, text) is
  'Opens a loop (an open task or question) in your project, or returns the open one with the same text. Returns loop_id, text, owner, created.

p_text: what is open (1-2,000 characters)
p_owner: who owns it (an agent, team role or person), one line

TEXT is 1-2,000 characters and the optional OWNER one line of 1-200 characters, both stored redacted; the loop is attributed to the acting agent. When the open loop with the same text is returned, created is false and it counts as touched, so repeating an open task never duplicates it and keeps it in recall_context; the open tasks of summarize_session open loops the same way. recall_context shows the open loops until close_loop closes them, or until one is untouched for the project''s loop_stale_after (30 days by default; see pin_loop). Raises SC238 bad text or owner, SC215 a PEM private key block.';

create or replace function scsql._close_loop(p_project bigint, p_id bigint, p_resolution text)
returns scsql.open_loops
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_row scsql.open_loops;
  v_err scsql.violation;
begin
  -- The text rules every memory write uses (sql/20_text.sql), raised as
  -- SC238; the table's constraint bounds the resolution once redacted.
  perform scsql._check_text('resolution', p_resolution, 4000, true, 'SC238');
  if scsql._holds_private_key(p_resolution) then
    raise exception using errcode = 'SC215', message = 'the resolution holds a PEM private key block; nothing was stored';
  end if;
  p_resolution := btrim(scsql._redact(p_resolution));
  select * into v_row from scsql.open_loops l where l.project_id = p_project and l.loop_id = p_id for update;
  if not found then
    raise exception using errcode = 'SC239', message = format('no open loop %s in this project', p_id),
      hint = 'open_loops() lists them with their ids.';
  end if;
  if v_row.closed_at is not null then
    raise exception using errcode = 'SC240',
      message = format('open loop %s was closed at %s: %s', p_id, v_row.closed_at, v_row.resolution);
  end if;
  begin
    update scsql.open_loops l set closed_at = now(), closed_by = scsql._my_agent_id(), resolution = p_resolution
    where l.project_id = p_project and l.loop_id = p_id
    returning * into v_row;
  exception when check_violation or not_null_violation then   -- too long once redacted
    get stacked diagnostics v_err.returned_sqlstate = returned_sqlstate, v_err.schema_name = schema_name,
      v_err.table_name = table_name, v_err.constraint_name = constraint_name, v_err.column_name = column_name, v_err.message_text = message_text;
    perform scsql._raise_violation(v_err);
  end;
  -- Memory history (sql/26_history.sql).
  perform scsql._memory_change(p_project, 'close_loop', 'loop', 'loop:' || v_row.loop_id, null, scsql._text_hash(v_row.text),
                               scsql._text_hash(v_row.resolution), left(v_row.resolution, 1000), null);
  return v_row;
end
$$;
comment on function scsql._close_loop(bigint, bigint, text) is
  'Private. Closes open loop P_ID of project P_PROJECT with P_RESOLUTION (stored redacted) as the acting agent, recorded in the memory history. Raises SC239 no such loop, SC240 already closed, SC238 bad resolution, SC215 a private key block.';

create or replace function scsql.close_loop(p_id bigint, p_resolution text)
returns table (loop_id bigint, text text, closed_at timestamptz, resolution text)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_row scsql.open_loops := scsql._close_loop(scsql._my_project(), p_id, p_resolution);
begin
  return query select v_row.loop_id, v_row.text, v_row.closed_at, v_row.resolution;
end
$$;
comment on function scsql.close_loop(bigint, text) is
  'Closes an open loop of your project with its resolution; it stays as history. Returns loop_id, text, closed_at, resolution.

p_id: the loop''s id (open_loops lists them)
p_resolution: how it was closed (1-4,000 characters)

RESOLUTION is 1-4,000 characters, stored redacted; the closing agent and the time are recorded. Concurrent closes of one loop: one wins, the other gets SC240. The close is recorded in the memory history (op close_loop, target loop:<id>, reason the resolution). Raises SC239 no such loop, SC240 already closed, SC238 bad resolution, SC215 a PEM private key block.';

create or replace function scsql.pin_loop(p_id bigint, p_pinned boolean default true)
returns table (loop_id bigint, text text, pinned boolean)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_project bigint := scsql._my_project();
  v_row scsql.open_loops;
begin
  if p_id is null or p_pinned is null then
    raise exception using errcode = 'SC010', message = 'give the loop''s id and whether to pin it';
  end if;
  update scsql.open_loops l set pinned = p_pinned, touched_at = now()
  where l.project_id = v_project and l.loop_id = p_id and l.closed_at is null
  returning * into v_row;
  if not found then
    raise exception using errcode = 'SC239', message = format('no open loop %s in this project', p_id),
      hint = 'open_loops() lists them with their ids.';
  end if;
  -- Memory history (sql/26_history.sql).
  perform scsql._memory_change(v_project, case when p_pinned then 'pin_loop' else 'unpin_loop' end, 'loop',
                               'loop:' || p_id, null, null, null, null, null);
  return query select v_row.loop_id, v_row.text, v_row.pinned;
end
$$;
comment on function scsql.pin_loop(bigint, boolean) is
  'Pins an open loop of your project so it stays in recall_context however long nobody touches it (PINNED false unpins it). Returns loop_id, text, pinned.

p_id: the loop''s id (open_loops lists them)
p_pinned: true to pin (default), false to unpin

An open loop nobody touched (opened again, pinned) for the project''s loop_stale_after (30 days by default, scsql.set_memory_lifecycle) leaves recall_context, the context a new session starts with; it stays open and listed by open_loops until close_loop. Pinning or unpinning touches it and is recorded in the memory history (op pin_loop or unpin_loop). Raises SC239 no such open loop, SC010 a NULL argument.';

create or replace function scsql.open_loops(p_owner text default null)
returns table (loop_id bigint, text text, owner text, opened_by text, opened_at timestamptz, source_path text)
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_project bigint := scsql._my_project();  -- on the coordinator (Citus), before the query
begin
  return query
  select l.loop_id, l.text, l.owner, a.name::text, l.opened_at, l.source_path
  from scsql.open_loops l
  left join scsql.agents a on a.agent_id = l.opened_by
  where l.project_id = v_project and l.closed_at is null
    and (p_owner is null or l.owner = p_owner)
  order by l.opened_at desc, l.loop_id desc;
end
$$;
comment on function scsql.open_loops(text) is
  'Your project''s open loops, newest first. Returns loop_id, text, owner, opened_by, opened_at, source_path.

p_owner: only the loops of this owner

Loops are opened by open_loop or by the open tasks of summarize_session, until close_loop closes them. opened_by is the agent that opened it; source_path the session summary it came from, if any. With OWNER, only that owner''s.';

create or replace function scsql._loop_key(p_text text)
returns text
language sql immutable parallel safe
as $$ select lower(btrim(regexp_replace(regexp_replace(p_text, '\s+\(in progress\)\s*$', ''), '\s+', ' ', 'g'))) $$;
comment on function scsql._loop_key(text) is
  'Private. What two loop texts are compared by: lower case, runs of blanks as one, without a trailing "(in progress)".';

create or replace function scsql.close_loops_done(p_texts text[], p_resolution text)
returns table (loop_id bigint, text text)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_project bigint := scsql._my_project();
  v_id bigint;
begin
  perform scsql._require(p_texts is not null and cardinality(p_texts) <= 1000, 'texts must be an array of at most 1000 texts');
  for v_id in
    select l.loop_id from scsql.open_loops l
    where l.project_id = v_project and l.closed_at is null
      and scsql._loop_key(l.text) = any (select scsql._loop_key(btrim(scsql._redact(t))) from unnest(p_texts) t)
    order by l.loop_id
    for update skip locked
  loop
    perform scsql._close_loop(v_project, v_id, p_resolution);
    return query select l.loop_id, l.text from scsql.open_loops l where l.project_id = v_project and l.loop_id = v_id;
  end loop;
end
$$;
comment on function scsql.close_loops_done(text[], text) is
  'Closes the open loops of your project whose text is one of the texts given: work reported done.

p_texts (array): what was done (a completed TODO item, a finished task''s subject)
p_resolution: how they were closed (1-4,000 characters)
hidden: the Claude Code hooks close loops a later TODO list, summary or finished task reports done

Texts compare in lower case, blanks squashed, without a trailing "(in progress)". Returns loop_id and text of each loop closed; a loop being closed by another transaction is left to it. Raises SC010 bad texts, SC238 bad resolution.';

-- ---------------------------------------------------------------------------
-- Fed by session summaries
-- ---------------------------------------------------------------------------

create or replace function scsql._feed_decisions_and_loops(p_me scsql.agents, p_path text, p_summary jsonb)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_item text;
  v_title text;
  v_redacted text;
begin
  -- Items are cut to fit once redacted (a secret's marker can be longer
  -- than the secret), and a marker cut in two is dropped, so _decide and
  -- _open_loop, which redact again, store what was cut.
  for v_item in select jsonb_array_elements_text(coalesce(p_summary -> 'decisions', '[]')) loop
    v_item := btrim(scsql._redact(regexp_replace(v_item, E'[\\x01-\\x08\\x0B\\x0C\\x0E-\\x1F\\x7F]+', ' ', 'g')));
    v_title := btrim(regexp_replace(v_item, E'\\s+', ' ', 'g'));
    if char_length(v_title) > 200 then
      v_title := regexp_replace(left(v_title, 197), '\[[A-Z]*(:[a-z_]*)?$', '') || '...';
    end if;
    continue when v_title = '';
    v_redacted := btrim(scsql._redact(v_title));  -- a value, not a call on the shard (Citus)
    continue when exists (
      select from scsql.decisions d
      where d.project_id = p_me.project_id and d.title = v_redacted
        and not exists (select from scsql.decisions n where n.project_id = d.project_id and n.supersedes = d.decision_id));
    perform scsql._decide(p_me.project_id, v_title,
                          regexp_replace(left(v_item, 3900), '\[[A-Z]*(:[a-z_]*)?$', '')
                          || format(E'\n\n(from the session summary %s)', p_path), null, p_path);
  end loop;
  for v_item in select jsonb_array_elements_text(coalesce(p_summary -> 'open_tasks', '[]')) loop
    v_item := btrim(regexp_replace(left(btrim(scsql._redact(regexp_replace(v_item, E'[\\x01-\\x08\\x0B\\x0C\\x0E-\\x1F\\x7F]+', ' ', 'g'))), 2000),
                                   '\[[A-Z]*(:[a-z_]*)?$', ''));
    continue when v_item = '';
    perform scsql._open_loop(p_me.project_id, v_item, p_me.name, p_path);
  end loop;
  -- What the summary says was done closes the loops of that text: a TODO item
  -- completed since, or a done item naming the loop.
  perform scsql.close_loops_done(array(select regexp_replace(x, '^completed:\s*', '')
                                       from jsonb_array_elements_text(coalesce(p_summary -> 'done', '[]')) x),
                                 'done, as the session summary ' || p_path || ' says');
end
$$;
comment on function scsql._feed_decisions_and_loops(scsql.agents, text, jsonb) is
  'Private, called by summarize_session. Records each decision of a (cleaned) session summary as a decision (title: its first 200 characters on one line; rationale: the item, naming the summary), unless a current decision of the project has that title, opens a loop owned by the agent for each open task (an open loop with the same text is kept), and closes the open loops that its done items name (a TODO item completed since: close_loops_done).';
