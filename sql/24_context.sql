-- scsql memory: session summaries, context recall and context packs.
-- Definitions: sql/20_text.sql.

-- ---------------------------------------------------------------------------
-- Sessions, context recall, context packs
-- ---------------------------------------------------------------------------

create or replace function scsql.summarize_session(p_summary jsonb, p_occurred_at timestamptz default null)
returns table (path text, chunks integer, expires_at timestamptz)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_me scsql.agents := scsql._me();
  v_keys constant text[] := array['done', 'decisions', 'files', 'open_tasks'];
  v_titles constant text[] := array['Done', 'Decisions', 'Files', 'Open tasks'];
  v_clean jsonb := '{}';
  v_items text[];
  v_text text := '';
  v_path text;
  v_expires timestamptz := now() + interval '365 days';
  v_r record;
  v_i integer;
begin
  if p_summary is null or jsonb_typeof(p_summary) <> 'object' then
    raise exception using errcode = 'SC208', message = 'a session summary must be a JSON object',
      hint = 'Give {"done": [...], "decisions": [...], "files": [...], "open_tasks": [...]}.';
  end if;
  if exists (select from jsonb_object_keys(p_summary) k where k <> all (v_keys)) then
    raise exception using errcode = 'SC208',
      message = format('unknown keys in session summary: %s',
                       (select string_agg(k, ', ') from jsonb_object_keys(p_summary) k where k <> all (v_keys))),
      hint = 'Keys: done, decisions, files, open_tasks.';
  end if;
  if octet_length(p_summary::text) > 20000 then
    raise exception using errcode = 'SC208', message = format('session summary is %s bytes; at most 20,000', octet_length(p_summary::text));
  end if;
  for v_i in 1 .. 4 loop
    v_items := case coalesce(jsonb_typeof(p_summary -> v_keys[v_i]), 'null')
      when 'string' then array[p_summary ->> v_keys[v_i]]
      when 'array' then (select array_agg(e #>> '{}' order by o) from jsonb_array_elements(p_summary -> v_keys[v_i]) with ordinality x(e, o))
      when 'null' then null
      else array[null::text] end;
    if v_items is not null and (exists (select from unnest(v_items) i where i is null)
        or exists (select from jsonb_array_elements(case when jsonb_typeof(p_summary -> v_keys[v_i]) = 'array'
                                                         then p_summary -> v_keys[v_i] else '[]' end) e
                   where jsonb_typeof(e) <> 'string')) then
      raise exception using errcode = 'SC208', message = format('%s must be a string or a list of strings', v_keys[v_i]);
    end if;
    select array_agg(btrim(i)) into v_items from unnest(v_items) i where btrim(i) <> '';
    if v_items is not null then
      v_clean := v_clean || jsonb_build_object(v_keys[v_i], to_jsonb(v_items));
      v_text := v_text || format(E'## %s\n', v_titles[v_i])
                || (select string_agg('- ' || i, E'\n') from unnest(v_items) i) || E'\n\n';
    end if;
  end loop;
  if v_clean = '{}' then
    raise exception using errcode = 'SC208', message = 'the session summary is empty',
      hint = 'Say at least what was done, decided, touched or left open.';
  end if;
  if scsql._holds_private_key(v_text) then
    raise exception using errcode = 'SC215', message = 'the session summary holds a PEM private key block; nothing was stored',
      hint = 'Private keys never belong in the knowledge base, which every agent of the project can search.';
  end if;
  perform scsql._require_time('occurred_at', p_occurred_at);
  v_path := format('session:%s/%s', v_me.name,
                   to_char(coalesce(p_occurred_at, clock_timestamp()) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'));
  v_text := format(E'# Session summary by %s, %s\n\n', v_me.name,
                   to_char(coalesce(p_occurred_at, now()) at time zone 'UTC', 'YYYY-MM-DD HH24:MI "UTC"')) || v_text;
  select * into v_r from scsql._index_source(v_me.project_id, v_path, rtrim(v_text, E'\n'), 'session_summary', 'internal',
    'session', null, jsonb_build_object('agent', v_me.name, 'summary', v_clean), v_expires);
  -- Decisions and open tasks become first-class (sql/27_decisions.sql):
  -- each decision a decision (unless a current one has its title), each
  -- open task an open loop owned by the agent (unless one is open already).
  perform scsql._date_source(v_me.project_id, v_path, p_occurred_at);
  perform scsql._feed_decisions_and_loops(v_me, v_path, v_clean);
  -- Memory history (sql/26_history.sql).
  perform scsql._memory_change(v_me.project_id, 'summary', 'source', v_path, null, null, v_r.content_hash, 'session summary', null);
  return query select v_path, v_r.chunks, v_expires;
end
$$;
comment on function scsql.summarize_session(jsonb, timestamptz) is
  'Archives a summary of your session (kept 365 days), found by search and restored by recall_context. Returns path, chunks, expires_at.

p_summary (object): {"done", "decisions", "files", "open_tasks"}, each a string or a list of strings; at least one
p_occurred_at: when the session happened, when that is not now (an imported session)

The summary is {"done", "decisions", "files", "open_tasks"}, each a string or a list of strings, of the acting agent''s session. It is stored redacted (each secret replaced by [REDACTED:<kind>], see scsql.redact); each part is a chunk for search, and pack offers its decisions. With OCCURRED_AT the summary is dated when the session happened (its path and heading too). path is session:<agent>/<time>. Raises SC010 an occurred_at out of 1970..9000, SC208 for an empty, unknown-keyed or over-long summary, SC215 for one holding a PEM private key block.';

create or replace function scsql._recall_items(
  p_project bigint, p_agent bigint, p_team_role text, p_joined_at timestamptz, p_loop_stale interval,
  p_importance_weight double precision, p_recency_weight double precision, p_use_weight double precision,
  p_half_life_days double precision)
returns table (sec integer, section text, item bigint, key text, content text, importance integer, at timestamptz,
               source_path text)
language plpgsql stable
as $$
#variable_conflict use_column
begin
  return query
  select 1 as sec, 'fact' as section,
         row_number() over (order by f.life desc, f.importance desc, f.updated_at desc, f.key) as item,
         f.key, f.key || ': ' || f.value as content, f.importance::integer as importance,
         f.updated_at as at, null::text as source_path
  from (select f.*, scsql_caller.lifecycle(f.importance, f.updated_at, f.last_used_at, f.use_count, f.importance = 5,
                                           p_importance_weight, p_recency_weight, p_use_weight, p_half_life_days) as life
        from scsql.memory_facts f
        where f.project_id = p_project and (f.expires_at is null or f.expires_at > now())) f
  union all
  -- Open loops (sql/27_decisions.sql), newest first, untouched past the
  -- project's loop_stale_after left out unless pinned.
  select 2, 'open_loop', row_number() over (order by l.opened_at desc, l.loop_id desc), l.loop_id::text,
         'open loop ' || l.loop_id || coalesce(' (owner ' || l.owner || ')', '') || ': ' || l.text,
         null, l.opened_at, coalesce(l.source_path, 'loop:' || l.loop_id)
  from (select * from scsql.open_loops l
        where l.project_id = p_project and l.closed_at is null
          and (l.pinned or coalesce(l.touched_at, l.opened_at)
                           >= now() - coalesce((select ms.loop_stale_after from scsql.memory_settings ms
                                                where ms.project_id = p_project), p_loop_stale))
        order by l.opened_at desc, l.loop_id desc limit 20) l
  union all
  -- The latest current decisions (sql/27_decisions.sql).
  select 3, 'decision', row_number() over (order by d.decided_at desc, d.decision_id desc), d.decision_id::text,
         'decision ' || d.decision_id || ': ' || d.title
           || case when d.source_path is null then E'\n' || left(d.rationale, 400)
                   || case when char_length(d.rationale) > 400 then '...' else '' end else '' end,
         null, d.decided_at, 'decision:' || d.decision_id
  from (select * from scsql.decisions d
        where d.project_id = p_project
          and not exists (select from scsql.decisions n where n.project_id = d.project_id and n.supersedes = d.decision_id)
        order by d.decided_at desc, d.decision_id desc limit 5) d
  union all
  select 4, 'session', row_number() over (order by s.created_at desc, s.source_id desc), s.meta ->> 'agent',
         scsql._session_line(s.meta, s.created_at), null::integer, s.created_at, s.path
  from (select * from scsql.kb_sources s
        where s.project_id = p_project and s.kind = 'session_summary'
          and (s.expires_at is null or s.expires_at > now() or s.pinned)
        order by s.created_at desc, s.source_id desc limit 5) s
  union all
  -- Broadcasts to the agent by name or to its team role since it joined,
  -- acknowledged or not (sql/31_broadcast.sql), the 10 newest.
  select 5, 'broadcast', row_number() over (order by m.created_at desc, m.message_id desc), 'message:' || m.message_id,
         format('%s from %s (%s)%s: %s', m.type, coalesce(a.name, '?'), scsql._provenance(m.from_orchestrator),
                case when m.task_id is not null then ' on task ' || m.task_id else '' end, left(m.payload::text, 600)),
         null, m.created_at, null
  from (select * from (select * from scsql.messages m where m.project_id = p_project and m.to_agent_id = p_agent
                       union all
                       select * from scsql.messages m
                       where m.project_id = p_project and m.to_role = p_team_role and m.created_at >= p_joined_at
                         and m.author_id <> p_agent) m
        order by m.created_at desc, m.message_id desc limit 10) m
  left join scsql.agents a on a.agent_id = m.author_id
  union all
  -- Possibly stale (sql/26_history.sql): the facts of the 10 newest open
  -- conflicts whose two facts are both still in working memory.
  select 6, 'stale', row_number() over (order by c.conflict_id desc), c.key,
         format('possibly stale: %s (%s) conflicts with %s (%s); settle with resolve_conflict(%L, ''this''|''others''|''both'')',
                c.key, c.value, c.other_key, c.other_value, c.key),
         null, c.detected_at, null
  from (select c.conflict_id, c.key, f.value, c.other_key, o.value as other_value, c.detected_at
        from scsql.fact_conflicts c
        join scsql.memory_facts f on f.project_id = c.project_id and f.key = c.key
        join scsql.memory_facts o on o.project_id = c.project_id and o.key = c.other_key
        where c.project_id = p_project and c.resolved_at is null
        order by c.conflict_id desc limit 10) c;
end
$$;
comment on function scsql._recall_items(bigint, bigint, text, timestamptz, interval, double precision, double precision,
                                        double precision, double precision) is
  'For recall_context: a project''s items, each numbered within its section: working-memory facts (section 1, fact: not expired, by lifecycle score), open loops (2, open_loop: the 20 newest not untouched past the project''s loop_stale_after, p_loop_stale when it has no settings row, or pinned), the latest current decisions (3, decision: up to 5), session summaries (4, session: up to 5), the 10 newest broadcasts to agent P_AGENT by name or to its team role P_TEAM_ROLE since it joined at P_JOINED_AT (5, broadcast: orchestrator or unverified agent output), and the facts in the 10 newest open conflicts whose two facts are both in working memory (6, stale). One statement, so that on Citus the project''s node answers it in one round trip: its sections are not functions of their own (each would be a statement of its own, and Citus plans no inlined SQL function''s parameters). Raises nothing of its own.';

create or replace function scsql._session_line(p_meta jsonb, p_created_at timestamptz)
returns text
language sql stable  -- to_char is
as $$
  select concat_ws(E'\n',
    'session ' || to_char(p_created_at at time zone 'UTC', 'YYYY-MM-DD HH24:MI') || ' UTC by ' || (p_meta ->> 'agent'),
    'done: ' || (select string_agg(x, '; ') from jsonb_array_elements_text(p_meta -> 'summary' -> 'done') x),
    'decisions: ' || (select string_agg(x, '; ') from jsonb_array_elements_text(p_meta -> 'summary' -> 'decisions') x),
    'files: ' || (select string_agg(x, ', ') from jsonb_array_elements_text(p_meta -> 'summary' -> 'files') x),
    'open tasks: ' || (select string_agg(x, '; ') from jsonb_array_elements_text(p_meta -> 'summary' -> 'open_tasks') x))
$$;
comment on function scsql._session_line(jsonb, timestamptz) is
  'Private, for recall_context. A session summary as one item: its time in UTC, its agent, and what was done, decided, touched and left open (the summary in the source''s meta).';

create or replace function scsql.recall_context(
  p_budget integer default 1500, p_importance_weight double precision default 1,
  p_recency_weight double precision default 0.2, p_use_weight double precision default 0.2,
  p_half_life_days double precision default 30)
returns table (section text, item integer, key text, content text, importance integer,
               at timestamptz, tokens integer, source_path text)
language plpgsql volatile security definer set search_path = pg_catalog, scsql, pg_temp
as $$
-- Runs as the owner and reads only the acting agent's own project, every
-- row of which row-level security shows the agent too. Volatile: it
-- records the use of the facts and summaries it returns (scsql._note_use).
-- Its items are one query, the agent given as values and what writes (the
-- use) after it: on Citus that query runs whole on the project's node (one
-- round trip) and calls nothing there that reads or writes elsewhere.
#variable_conflict use_column
declare
  v_me scsql.agents := scsql._me();
  v_project bigint := v_me.project_id;
  -- the default; the project's own setting is read in the query (_recall_items)
  v_loop_stale interval := (scsql._memory_settings_default(v_project)).loop_stale_after;
  v_used text[] := '{}';
  r record;
begin
  if p_budget is null or p_budget not between 50 and 100000 then
    raise exception using errcode = 'SC209', message = format('budget must be 50 to 100,000 tokens, got %s', p_budget);
  end if;
  perform scsql_caller.check_lifecycle(p_importance_weight, p_recency_weight, p_use_weight, p_half_life_days);
  for r in
  with items as (
    select * from scsql._recall_items(v_project, v_me.agent_id, v_me.team_role, v_me.created_at, v_loop_stale,
                                      p_importance_weight, p_recency_weight, p_use_weight, p_half_life_days)
  ),
  costed as (
    select i.*, scsql_caller.tokens(i.content) as tokens,
           -- Each section first gets its share of the budget (facts 40%,
           -- open loops 10%, decisions 10%, sessions 30%, broadcasts 10%;
           -- possibly stale facts only what is left) ...
           sum(scsql_caller.tokens(i.content)) over (partition by i.sec order by i.item) as sec_cum,
           case i.sec when 1 then 0.4 when 4 then 0.3 when 6 then 0 else 0.1 end * p_budget as share
    from items i
  ),
  firsts as (
    select c.*, c.sec_cum <= c.share as in_share from costed c
  ),
  filled as (
    -- ... then what is left goes to the remaining items in order.
    select f.*, (select coalesce(sum(x.tokens), 0) from firsts x where x.in_share) as used,
           sum(case when f.in_share then 0 else f.tokens end) over (order by f.sec, f.item) as extra_cum
    from firsts f
  ),
  chosen as materialized (
    select f.* from filled f where f.in_share or f.used + f.extra_cum <= p_budget
  )
  select c.sec, c.section, c.item::integer as item, c.key, c.content, c.importance, c.at, c.tokens, c.source_path
  from chosen c
  order by c.sec, c.item
  loop
    section := r.section; item := r.item; key := r.key; content := r.content; importance := r.importance;
    at := r.at; tokens := r.tokens; source_path := r.source_path;
    return next;
    -- The use of what is returned: facts and session summaries.
    if r.sec in (1, 4) then
      v_used := v_used || case r.sec when 1 then 'memory:' || r.key else r.source_path end;
    end if;
  end loop;
  perform scsql._note_use(v_project, v_used);
end
$$;
comment on function scsql.recall_context(integer, double precision, double precision, double precision, double precision) is
  'Restores your project''s context in one call: working-memory facts, open loops, the latest decisions and session summaries, and recent broadcasts, within a token budget. Returns section, item, key, content, importance, at, tokens, source_path.

p_budget (50..100000): tokens (characters / 4)
p_importance_weight (0..100, tuning): ranking weight of importance
p_recency_weight (0..100, tuning): ranking weight of recency
p_use_weight (0..100, tuning): ranking weight of use
p_half_life_days (0.01..36500, tuning): days for recency and use to halve

The budget defaults to 1,500 tokens (50 to 100,000; tokens estimated as ceil(characters / 4)). Working-memory facts (not expired) come first, ordered by their lifecycle score L = importance_weight * (importance - 1) / 4 + recency_weight * 0.5 ^ (days since written / half_life) + use_weight * uses / (uses + 3) * 0.5 ^ (days since last returned / half_life) (defaults 1, 0.2, 0.2 and 30 days; importance-5 facts never decay; ties by importance, then the most recently updated), then the open loops (newest first, up to 20), the latest current decisions (up to 5), the latest session summaries (up to 5) and recent broadcasts. Each section first gets a share of the budget (facts 40%, open loops 10%, decisions 10%, sessions 30%, broadcasts 10%), what is left goes to the remaining items in order; items are never cut. Facts in an open conflict (remember returned conflicts_with) are listed again, last, in section stale (the 10 newest conflicts, only within what is left of the budget), until resolve_conflict settles them. The facts and summaries returned record their use (last_used_at, use_count; at most once per the project''s use_granularity, 1 minute by default). Stable order: section, then item. section is fact, open_loop, decision, session, broadcast or stale; source_path is decision:<id> for a decision, and for an open loop the session summary it came from, else loop:<id>. Raises SC209 for a budget out of range, SC243 for a weight out of 0..100 or a half-life out of 0.01..36,500 days.';

create or replace function scsql_caller.pack_facts(p_project bigint, p_terms text[])
returns table (keys text[], contents text[], authors text[], ats timestamptz[])
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_by bigint[];
begin
  -- Read as the owner (on Citus, no policy call per row on the shards):
  -- working memory is readable only in one's own project (policies/
  -- 20_memory.sql), so another project's facts are none, as under
  -- row-level security, and the project is the acting role's.
  if p_project is distinct from scsql_caller.project_id() then
    return next;
    return;
  end if;
  -- Working-memory facts (not expired) that share terms with the intent,
  -- weighted by the terms' rarity in the knowledge base (bm25_idf; a term
  -- in no chunk has df 0), then by importance.
  -- One statement (on Citus, of the project's shard alone).
  with st as materialized (
    select st.n_chunks from scsql.memory_state st where st.project_id = p_project
  ),
  kt as materialized (
    select kt.term, kt.df from scsql.kb_terms kt where kt.project_id = p_project and kt.term = any(p_terms)
  )
  select array_agg(x.key order by x.rel desc, x.importance desc, x.key),
         array_agg(x.content order by x.rel desc, x.importance desc, x.key),
         array_agg(x.updated_by order by x.rel desc, x.importance desc, x.key),
         array_agg(x.updated_at order by x.rel desc, x.importance desc, x.key)
    into keys, contents, v_by, ats
  from (
    select f.key, f.key || ': ' || f.value as content, f.importance, f.updated_by, f.updated_at,
           (select sum(scsql_caller.bm25_idf(coalesce((select st.n_chunks from st), 0), coalesce(kt.df, 0)))
            from unnest(f.terms) ft(term)
            left join kt on kt.term = ft.term
            where ft.term = any(p_terms)) as rel
    from scsql.memory_facts f
    where f.project_id = p_project and (f.expires_at is null or f.expires_at > now()) and f.terms && p_terms
  ) x
  where x.rel > 0;
  -- The authors' names apart (agent_names reads other tables).
  select array_agg(an.name order by u.i) into authors
  from unnest(v_by) with ordinality u(agent_id, i)
  left join scsql_caller.agent_names(v_by) an on an.agent_id = u.agent_id;
  return next;
end
$$;
comment on function scsql_caller.pack_facts(bigint, text[]) is
  'For pack: the working-memory facts of a project (not expired) holding any of the terms p_terms, best first by the sum of those terms'' idf (bm25_idf over the knowledge base''s statistics), then importance, then key, as arrays of keys, contents (key: value), authors'' names (NULL for an author the caller may not see) and update times; NULL arrays for none. Read as the owner, for the acting agent''s own project only (its facts are all it may read of working memory): NULL arrays for any other project, as row-level security gives. Raises SC001 / SC002 like scsql_caller.project_id.';

create or replace function scsql_caller.pack_hits(p_project bigint, p_intent text, p_query_embedding vector, p_model text)
returns table (kinds text[], contents text[], paths text[], anchors text[], line_starts integer[], line_ends integer[],
               hashes text[], trusts text[], notices text[], authors text[], ats timestamptz[])
language plpgsql stable
as $$
begin
  -- search: the hits other than facts and decisions, which pack ranks itself;
  -- the own project's read as the owner (search_own), another's as the
  -- caller (row-level security shows its published knowledge).
  return query
  select array_agg(case when s.source_kind = 'session_summary' and s.anchor = 'Decisions' then 'decision'
                        when s.source_kind = 'learning' then 'learning'
                        when s.source_kind = 'archived_fact' then 'fact'
                        else 'chunk' end order by s.ordinality),
         array_agg(s.content order by s.ordinality),
         array_agg(s.source_path order by s.ordinality), array_agg(s.anchor order by s.ordinality),
         array_agg(s.line_start order by s.ordinality), array_agg(s.line_end order by s.ordinality),
         array_agg(s.chunk_hash order by s.ordinality), array_agg(s.trust order by s.ordinality),
         array_agg(s.notice order by s.ordinality), array_agg(s.author order by s.ordinality),
         array_agg(s.written_at order by s.ordinality)
  from (select o.* from scsql_caller.search_own(p_intent, 20, null, null, null, 'hybrid', p_query_embedding, p_model,
                                                 60, 1, 1, 1.2, 0.75, 50, 'score', 0.2) with ordinality o
        where p_project = scsql_caller.project_id()
        union all  -- one arm runs: the order is its ordinality
        select o.* from scsql_caller.search_projects(array[p_project], p_intent, 20, null, null, null, 'hybrid', p_query_embedding,
                                                     p_model, 60, 1, 1, 1.2, 0.75, 50, 'score', 0.2) with ordinality o
        where p_project is distinct from scsql_caller.project_id()) s
  where s.source_kind not in ('fact', 'decision');
end
$$;
comment on function scsql_caller.pack_hits(bigint, text, vector, text) is
  'For pack: the best 20 hits of hybrid search (search''s defaults, depth 50) over a project for the intent, other than facts and decisions, in rank order, as arrays of their pack kinds (decision: the Decisions part of a session summary; learning; fact: an archived fact; else chunk) and citation fields. The acting agent''s own project is read as the owner (search_own), another as the caller, under row-level security. Raises what search raises.';

create or replace function scsql.pack(p_intent text, p_budget integer default 2000,
                                      p_query_embedding vector default null, p_model text default null,
                                      p_importance_weight double precision default 0.2,
                                      p_recency_weight double precision default 0.1,
                                      p_use_weight double precision default 0.1,
                                      p_half_life_days double precision default 30)
returns table (item integer, kind text, score double precision, tokens integer, key text, content text,
               source_path text, anchor text, line_start integer, line_end integer, chunk_hash text,
               trust text, notice text, author text, written_at timestamptz)
language plpgsql volatile
as $$
-- Runs as the caller; its own project's facts and hits are read as the owner,
-- the project fixed from the acting role (pack_facts, pack_hits). Volatile:
-- it records the use of what it returns (scsql_caller.note_use).
#variable_conflict use_column
declare
  v_project bigint := scsql_caller.project_id();
  v_terms text[];
  v_life boolean;
  v_f record;  -- the matching facts (pack_facts), then the search hits (pack_hits)
  v_h record;
begin
  if p_budget is null or p_budget not between 50 and 100000 then
    raise exception using errcode = 'SC209', message = format('budget must be 50 to 100,000 tokens, got %s', p_budget);
  end if;
  if p_intent is null or btrim(p_intent, E' \t\r\n') = '' or char_length(p_intent) > 2000 then
    raise exception using errcode = 'SC205',
      message = format('the intent must be 1 to 2,000 characters, got %s', coalesce(char_length(p_intent), 0));
  end if;
  v_life := scsql_caller.check_lifecycle(p_importance_weight, p_recency_weight, p_use_weight, p_half_life_days);
  select array_agg(t.term) into v_terms from scsql_caller.terms(p_intent) t;
  if v_terms is null then
    return;
  end if;
  -- Facts and search hits are read first, into arrays, and ranked from
  -- them: Citus runs each read on the project's shard, and the calls of
  -- functions that read other tables (search, authors) stay here.
  select * into v_f from scsql_caller.pack_facts(v_project, v_terms);
  select * into v_h from scsql_caller.pack_hits(v_project, p_intent, p_query_embedding, p_model);
  return query
  with items as (
    select 1.0 / (60 + r.rank) as score, 0 as pref, 'fact' as kind, r.key, r.content,
           'memory:' || r.key as source_path, null::text as anchor, null::integer as line_start, null::integer as line_end,
           null::text as chunk_hash, 'internal'::text as trust, null::text as notice, r.author, r.updated_at as written_at
    from unnest(v_f.keys, v_f.contents, v_f.authors, v_f.ats) with ordinality r(key, content, author, updated_at, rank)
    union all
    select 1.0 / (60 + h.rank), 1, h.kind, null, h.content, h.source_path, h.anchor, h.line_start, h.line_end,
           h.chunk_hash, h.trust, h.notice, h.author, h.written_at
    from unnest(v_h.kinds, v_h.contents, v_h.paths, v_h.anchors, v_h.line_starts, v_h.line_ends, v_h.hashes, v_h.trusts,
                v_h.notices, v_h.authors, v_h.ats)
           with ordinality h(kind, content, source_path, anchor, line_start, line_end, chunk_hash, trust, notice,
                             author, written_at, rank)
  ),
  lives as materialized (  -- every item's L at once (one query of the project's facts and sources)
    select l.* from scsql_caller.items_lifecycle((select array_agg(i.source_path) from items i where v_life),
                                                 p_importance_weight, p_recency_weight, p_use_weight, p_half_life_days) l
  ),
  lived as (
    -- Importance, recency and use: the fused score times exp(L) (sql/22_lifecycle.sql).
    select i.*, case when v_life then i.score * exp(l.life) else i.score end as life_score
    from items i left join lives l on l.source_path is not distinct from i.source_path
  ),
  ordered as (
    select row_number() over (order by i.life_score desc, i.pref, i.source_path, i.line_start) as item, i.*,
           scsql_caller.tokens(i.content) as tokens
    from lived i
  ),
  cum as materialized (
    select o.*, sum(o.tokens) over (order by o.item) as total from ordered o
  ),
  noted as materialized (
    select scsql_caller.note_use(array_agg(distinct c.source_path)) as n from cum c where c.total <= p_budget
  )
  select c.item::integer, c.kind, c.life_score::double precision, c.tokens, c.key, c.content, c.source_path, c.anchor,
         c.line_start, c.line_end, c.chunk_hash, c.trust, c.notice, c.author, c.written_at
  from cum c cross join noted
  where c.total <= p_budget
  order by c.item;
end
$$;
comment on function scsql.pack(text, integer, vector, text, double precision, double precision, double precision, double precision) is
  'A context pack for a task within a token budget: matching facts, decisions, learnings and search hits, each with its citation, author and time.

p_intent: the task, in words (1-2,000 characters)
p_budget (50..100000): tokens (characters / 4)
p_importance_weight (0..100, tuning): ranking weight of importance
p_recency_weight (0..100, tuning): ranking weight of recency
p_use_weight (0..100, tuning): ranking weight of use
p_half_life_days (0.01..36500, tuning): days for recency and use to halve

BUDGET defaults to 2,000 tokens (tokens = ceil(characters / 4)). Facts (not expired) match when they share terms with INTENT; hits are the best of hybrid search; kind is fact, decision (from session summaries), learning or chunk. The citation is source_path, anchor, line span, chunk_hash, trust and notice; author is the agent that wrote it. Facts and hits are ranked by reciprocal rank times exp(L), L the lifecycle score importance_weight * (importance - 1) / 4 + recency_weight * 0.5 ^ (days since written / half_life) + use_weight * uses / (uses + 3) * 0.5 ^ (days since last returned / half_life) (defaults 0.2, 0.1, 0.1 and 30 days; sources count as importance 3; importance-5 facts and pinned sources never decay; all weights 0: reciprocal rank alone); when over budget the lowest-scored items are dropped first. What is returned records its use (at most once per the project''s use_granularity). Returns item, kind, score, tokens, key, content and the citation fields (source_path, anchor, line_start, line_end, chunk_hash, trust, notice, author, written_at). Raises SC205 for a bad intent, SC209 for a budget out of range, SC243 for a weight out of 0..100 or a half-life out of 0.01..36,500 days.';
