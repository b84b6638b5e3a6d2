-- scsql memory: the history of memory (every change to working memory and
-- the knowledge base, chained), supersession, duplicates and conflicts
-- between facts. Tables: migrations/0207_memory_history.sql.
--
-- Why memory changes are chained unsigned. A memory change is written by the
-- database, inside remember, forget, index_text, index (files removed from
-- the tree), forget_source, forget_chunk, summarize_session, resolve_conflict,
-- pin, purge_expired, index_learnings, decide, open_loop, close_loop and the
-- triggers that derive learnings from outcomes and see them made rules, and one call can make changes the
-- caller cannot know beforehand (facts archived to make room, a duplicate
-- refreshed instead of stored, an archived copy replaced, a conflict
-- recorded), so no client could sign them in advance; and the same calls
-- work from psql, where no agent key is at hand. So each row joins the acting
-- agent's chain like any chained row (author stamped from the acting role,
-- linked, hashed, append-only, covered by scsql verify and by the auditor's
-- signed checkpoints), with a signature field that is a marker, not a
-- signature: 32 zero bytes then 32 random bytes (unique, so the chain's
-- replay check still applies). scsql verify accepts the marker only in this
-- table (scsql/audit/verify.py, UNSIGNED_TABLES) and checks Ed25519 for every
-- other row. What a signature would add, proof against someone with the
-- owner's rights writing a row before the next checkpoint, is what the
-- database cannot give for changes it derives itself.

select scsql._define_error(code, name, meaning) from (values
  ('SC227', 'history_target_invalid', 'memory_history needs a fact key, a source path or a chunk_hash (1 to 1,024 characters, one line) and a limit from 1 to 1,000.'),
  ('SC228', 'conflict_unknown', 'resolve_conflict names a fact that has no open conflict: remember returns the keys a fact conflicts with (conflicts_with), recall_context lists the open ones as possibly stale.'),
  ('SC229', 'conflict_keep_invalid', 'resolve_conflict keeps this (the named fact wins), others (the facts it conflicts with win) or both (they do not contradict each other).'),
  ('SC230', 'conflict_note_invalid', 'A note on a settled conflict is at most 1,000 characters of printable text.')
) as t(code, name, meaning);

select scsql._make_chained('scsql.memory_changes',
  array['op', 'kind', 'target', 'chunk_hash', 'old_hash', 'new_hash', 'reason', 'related'], array['change_id']);

create or replace function scsql._text_hash(p_text text)
returns text
language sql immutable parallel safe
as $$ select encode(sha256(convert_to(p_text, 'UTF8')), 'hex') $$;
comment on function scsql._text_hash(text) is
  'Private. sha256 of a text''s UTF-8 bytes, in hexadecimal (the content hash of facts and sources in the memory history).';

create or replace function scsql._memory_change(
  p_project bigint, p_op text, p_kind text, p_target text, p_chunk_hash text default null,
  p_old_hash text default null, p_new_hash text default null, p_reason text default null, p_related text default null,
  p_author bigint default null)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_agent bigint;
  v_project bigint;
  v_at timestamptz := clock_timestamp();
  v_key integer;
  v_role text := scsql._acting_role();
begin
  -- Memory functions act as an agent (they raise before otherwise); a
  -- change made by an administrator's own SQL is not an agent's. A trigger
  -- acting as the owner (on Citus, on a worker) names the agent whose row
  -- fired it (see scsql._chain_author).
  if v_role = 'scsql_owner' then
    select a.role_name into v_role from scsql.agents a where a.agent_id = p_author;
  end if;
  select a.agent_id, a.project_id into v_agent, v_project from scsql.agents a where a.role_name = v_role;
  if v_agent is null then
    return;
  end if;
  select k.key_id into v_key from scsql.agent_keys k
  where k.agent_id = v_agent and k.valid_from <= v_at order by k.valid_from desc limit 1;
  -- project_id and author_id are the chain's (the trigger checks them): Citus routes the row by
  -- project_id, and its trigger runs on a worker as the owner, where author_id names the agent.
  insert into scsql.memory_changes (project_id, author_id, op, kind, target, chunk_hash, old_hash, new_hash, reason, related, at,
                                    key_id, signature)
  values (v_project, v_agent, p_op, p_kind, left(p_target, 1024), p_chunk_hash, p_old_hash, p_new_hash, left(p_reason, 1000), left(p_related, 1024),
          v_at, v_key, '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea
                       || sha256(uuid_send(gen_random_uuid())));
end
$$;
comment on function scsql._memory_change(bigint, text, text, text, text, text, text, text, text, bigint) is
  'Private. Records one change to memory in scsql.memory_changes, in the acting agent''s chain: op (remember, supersede, refresh, forget, archive, unarchive, conflict, resolve, purge; index, remove, pin, unpin, forget_source, forget_chunk, summary; learn, rule, unrule; decide, supersede; open_loop, close_loop), kind (fact, source, chunk, learning, decision, loop), target (fact key, source path, learning:<id>, decision:<id> or loop:<id>), chunk_hash, the old and new content hash, the reason and a related key or path. Chained unsigned (see the head of sql/26_history.sql): the signature field is 32 zero bytes then 32 random bytes. The change is the acting agent''s; when the session acts as scsql_owner (a trigger on a Citus worker), it is the agent P_AUTHOR, which the trigger took from its row. Does nothing when the acting role is not an agent (nor the owner naming one).';

-- ---------------------------------------------------------------------------
-- Duplicates and conflicts between facts
-- ---------------------------------------------------------------------------

create or replace function scsql._fact_terms(p_text text)
returns text[]
language sql immutable parallel safe
as $$
  -- English stems without stop words (so "runs" = "run", "the" is gone), of
  -- the text with camelCase, dots, slashes, dashes and underscores split and
  -- the numbers one to ten as digits; a negation is kept as the term "!not"
  -- (the stop words drop "not").
  select array(select distinct t from unnest(
           tsvector_to_array(to_tsvector('english'::regconfig,
             (select string_agg(coalesce((array['1','2','3','4','5','6','7','8','9','10'])[
                        array_position(array['one','two','three','four','five','six','seven','eight','nine','ten'], lower(w))], w), ' ')
              from regexp_split_to_table(
                regexp_replace(regexp_replace(p_text, '([a-z0-9])([A-Z])', '\1 \2', 'g'), '[._/:=`-]+', ' ', 'g'), '\s+') w)))
           || case when p_text ~* '\m(not|no|never|don''?t|doesn''?t|isn''?t|aren''?t|won''?t|cannot|can''t|without)\M'
                   then array['!not'] else '{}'::text[] end) t order by t)
$$;
comment on function scsql._fact_terms(text) is
  'Private. The sorted distinct terms a fact is compared by: English stems without stop words (to_tsvector english) of the text with camelCase, dots, slashes, colons, equals signs, backquotes, dashes and underscores split and the numbers one to ten written as digits, plus "!not" when it says not/no/never/don''t/without.';

create or replace function scsql._jaccard(p_a text[], p_b text[])
returns double precision
language sql immutable parallel safe
as $$
  select case when coalesce(cardinality(p_a), 0) + coalesce(cardinality(p_b), 0) = 0 then 0
              else (select count(*) from (select unnest(p_a) intersect select unnest(p_b)) i)::double precision
                   / (select count(*) from (select unnest(p_a) union select unnest(p_b)) u) end
$$;
comment on function scsql._jaccard(text[], text[]) is
  'Private. |A ∩ B| / |A ∪ B| of two term sets (0 when both are empty).';

create or replace function scsql._fact_relation_terms(k1 text[], v1 text[], k2 text[], v2 text[])
returns text
language sql immutable parallel safe
as $$
  select case
    -- The same statement: the same terms in key and value together; the same
    -- value terms where the value says enough (3 terms) or the keys share a
    -- term; or values of 4 terms or more that differ in one term, neither a
    -- number nor a negation ("Deploys happen via ArgoCD").
    when cardinality(k1 || v1) > 0
         and ((k1 || v1) @> (k2 || v2) and (k2 || v2) @> (k1 || v1)
              or (v1 @> v2 and v2 @> v1 and (cardinality(v1) >= 3 or k1 && k2))
              or (least(cardinality(v1), cardinality(v2)) >= 4
                  and (select count(*) = 1 and bool_and(d !~ '^([0-9]|!not$)')
                       from ((select unnest(v1) except select unnest(v2)) union all (select unnest(v2) except select unnest(v1))) x(d))))
      then 'duplicate'
    -- The same subject with another claim: keys mostly alike (Jaccard >= 0.5),
    -- or keys sharing a term and values alike (Jaccard >= 0.4, two terms shared).
    when scsql._jaccard(k1, k2) >= 0.5
         or (k1 && k2 and scsql._jaccard(v1, v2) >= 0.4
             and (select count(*) from (select unnest(v1) intersect select unnest(v2)) i) >= 2)
      then 'conflict'
    else 'unrelated' end
$$;
comment on function scsql._fact_relation_terms(text[], text[], text[], text[]) is
  'Private. scsql._fact_relation over the facts'' terms (scsql._fact_terms of key and value), as working memory stores them.';

create or replace function scsql._fact_relation(p_key text, p_value text, p_other_key text, p_other_value text)
returns text
language sql immutable parallel safe
as $$
  select scsql._fact_relation_terms(scsql._fact_terms(p_key), scsql._fact_terms(p_value),
                                    scsql._fact_terms(p_other_key), scsql._fact_terms(p_other_value))
$$;
comment on function scsql._fact_relation(text, text, text, text) is
  'Private. How the fact (p_key, p_value) relates to another: duplicate (some terms, and the same terms in key and value together; or the same value terms when the value has at least 3 or the keys share one; or values of at least 4 terms differing in one term that is neither a number nor a negation; terms: scsql._fact_terms), conflict (not a duplicate, and the keys'' term sets have Jaccard similarity >= 0.5, or the keys share a term and the values'' similarity is >= 0.4 with at least two terms shared), else unrelated. Thresholds measured on tests/data/fact_pairs.jsonl (tests/test_fact_conflicts.py prints precision and recall).';

-- Which facts remember compares a new fact with. Every fact that
-- scsql._fact_relation_terms could call a duplicate or a conflict of it
-- shares one of a few of its terms (below), so remember compares only the
-- facts an inverted index (memory_facts_terms_idx on memory_facts.index_terms,
-- migration 0212) finds
-- for its rarest terms, not every fact of the project.

create or replace function scsql._fact_index_terms(p_project bigint, p_key_terms text[], p_value_terms text[])
returns text[]
language sql immutable parallel safe
as $$
  select array(select p_project::text || ':k:' || t from unnest(p_key_terms) t
               union all
               select p_project::text || ':v:' || t from unnest(p_value_terms) t)
$$;
comment on function scsql._fact_index_terms(bigint, text[], text[]) is
  'Private. The entries of a fact in the inverted index memory_facts_terms_idx (the stored column memory_facts.index_terms): <project>:k:<term> for each key term, <project>:v:<term> for each value term (scsql._fact_terms).';

create or replace function scsql._fact_rarest(p_project bigint, p_terms text[], p_sides text, p_n integer)
returns text[]
language plpgsql stable
as $$
-- A term's facts are counted through the index up to 32: past that a term
-- is common, and how common does not matter. One count per term, each a
-- query of its own (Citus plans no correlated subquery over unnest), on
-- the project alone (on Citus, on its shard: remember may run there).
declare
  v_terms text[] := '{}';
  v_counts integer[] := '{}';
  v_t text;
  v_n integer;
  v_keys text[];
begin
  foreach v_t in array coalesce(p_terms, '{}') loop
    v_keys := array(select p_project::text || ':' || s || ':' || v_t from unnest(string_to_array(p_sides, NULL)) s);
    select count(*) into v_n from (
      select 1 from scsql.memory_facts f where f.project_id = p_project and f.index_terms && v_keys limit 32) c;
    v_terms := v_terms || v_t;
    v_counts := v_counts || v_n;
  end loop;
  return coalesce((select array_agg(x.t order by x.n, x.t)
                   from (select u.t, u.n from unnest(v_terms, v_counts) u(t, n)
                         order by u.n, u.t limit greatest(p_n, 0)) x), '{}');
end
$$;
comment on function scsql._fact_rarest(bigint, text[], text, integer) is
  'Private. The N terms of TERMS found in the fewest facts of the project (in their keys with sides k, values with v, either with kv; counted up to 32), rarest first.';

create or replace function scsql._fact_candidates(p_project bigint, p_kt text[], p_vt text[], p_relation text)
returns text[]
language plpgsql stable
as $$
-- A fact (K2, V2) that scsql._fact_relation_terms calls a duplicate of the
-- new fact (K, V) has the same terms in all (so every term of V, or of K
-- when V has none), or V2 = V, or V2 and V differing in one term of at
-- least four: it holds one of the two rarest terms of V (of K when V has
-- none). One that it calls a conflict shares a term of K and has either
-- Jaccard(K, K2) >= 0.5, so it shares at least half of K: it holds the
-- rarest key term r of K, or it holds another and has at most 2|K| - 3 key
-- terms (3 shared >= |K| + |K2| with at most |K| - 1 shared); or it shares
-- at least max(2, 0.4 |V|) of V (Jaccard(V, V2) >= 0.4 with two shared): it
-- holds one of the |V| - max(2, ceil(0.4 |V|)) + 1 rarest terms of V.
declare
  v_pre text := p_project::text || ':';
  v_a integer := cardinality(p_kt);
  v_n integer := cardinality(p_vt);
  v_r text[];
  v_rv text[];
  v_keys text[];
begin
  if p_relation = 'duplicate' then
    v_r := case when v_n > 0 then scsql._fact_rarest(p_project, p_vt, 'kv', 2) else p_kt end;
    select array_agg(f.key) into v_keys from scsql.memory_facts f
    where f.index_terms
          && array(select v_pre || s || ':' || t from unnest(v_r) t, unnest(array['k', 'v']) s)
      and f.project_id = p_project;
  else
    v_r := scsql._fact_rarest(p_project, p_kt, 'k', 1);
    -- A value before the query (on Citus the query runs on the project's node).
    v_rv := scsql._fact_rarest(p_project, p_vt, 'v', v_n - greatest(2, ceil(0.4 * v_n)::integer) + 1);
    select array_agg(f.key) into v_keys from scsql.memory_facts f
    where f.project_id = p_project
      and (f.index_terms && array(select v_pre || 'k:' || t from unnest(v_r) t)
           or (f.index_terms
                 && array(select v_pre || 'k:' || t from unnest(p_kt) t where t <> all (v_r))
               and cardinality(f.key_terms) <= 2 * v_a - 3)
           or (f.index_terms && array(select v_pre || 'k:' || t from unnest(p_kt) t)
               and f.index_terms
                   && array(select v_pre || 'v:' || t from unnest(v_rv) t)));
  end if;
  return coalesce(v_keys, '{}');
end
$$;
comment on function scsql._fact_candidates(bigint, text[], text[], text) is
  'Private. The keys of the facts of the project that could be a duplicate (RELATION duplicate) or a conflict (conflict) of a fact with key terms KT and value terms VT by scsql._fact_relation_terms: a superset of them, found through memory_facts_terms_idx by the new fact''s rarest terms.';

-- ---------------------------------------------------------------------------
-- Public API: history and conflicts
-- ---------------------------------------------------------------------------

create or replace function scsql.memory_history(p_target text, p_limit integer default 100)
returns table (at timestamptz, agent text, op text, kind text, target text, chunk_hash text,
               old_hash text, new_hash text, reason text, related text, value text, seq bigint)
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_project bigint := scsql._my_project();
  v_hash text;
  v_paths text[];
begin
  perform scsql._check_text('target', p_target, 1024, false);
  if p_limit is null or p_limit not between 1 and 1000 then
    raise exception using errcode = 'SC227', message = format('limit must be 1 to 1,000, got %s', coalesce(p_limit::text, 'NULL'));
  end if;
  if lower(p_target) ~ '^[0-9a-f]{64}$' then
    v_hash := lower(p_target);
    -- The sources that hold the chunk now: their changes are the chunk's too.
    v_paths := array(select distinct s.path from scsql.kb_chunks c join scsql.kb_sources s
                       on s.project_id = c.project_id and s.source_id = c.source_id
                     where c.project_id = v_project and c.chunk_hash = v_hash);
  end if;
  return query
  select m.at, a.name::text, m.op, m.kind, m.target, m.chunk_hash, m.old_hash, m.new_hash, m.reason, m.related,
         coalesce((select v.value from scsql.fact_versions v
                   where v.project_id = v_project and v.key = m.target and v.value_hash = m.new_hash
                   order by v.version_id desc limit 1),
                  (select f.value from scsql.memory_facts f
                   where f.project_id = v_project and f.key = m.target and m.kind = 'fact'
                     and scsql._text_hash(f.value) = m.new_hash)),
         m.seq
  from scsql.memory_changes m
  join scsql.agents a on a.agent_id = m.author_id
  where m.project_id = v_project
    and (m.target in (p_target, scsql._redact(p_target)) or m.related in (p_target, scsql._redact(p_target))
         or m.chunk_hash = v_hash or m.target = any (v_paths))
  order by m.at desc, m.change_id desc
  limit p_limit;
end
$$;
comment on function scsql.memory_history(text, integer) is
  'Who changed a fact, source or chunk, when and how, newest first. Returns at, agent, op, kind, target, chunk_hash, old_hash, new_hash, reason, related, value, seq.

p_target: a fact key, a source path, a chunk_hash, or learning:<id>, decision:<id>, loop:<id>
p_limit (1..1000): rows at most
hidden: for people tracing a change (scsql memory history); agents see open conflicts in recall_context

Shows the history of one fact (by key), source (by path) or chunk (by chunk_hash: the changes of forget_chunk for it and of the sources holding it now), learning (learning:<id>), decision (decision:<id>) or open loop (loop:<id>) of the acting agent''s project, newest first: at, agent (the acting agent that made the change), op (facts: remember, supersede, refresh, forget, archive, unarchive, conflict, resolve, purge; sources: index (reason: added or changed), remove (a file no longer in the tree scsql.index walks), purge (expired, by the worker), pin, unpin, forget_source, forget_chunk, summary; learnings: learn (derived from an outcome; related outcome:<id>), rule and unrule (mark_learning_rule); decisions: decide, supersede; open loops: open_loop, close_loop), kind (fact, source, chunk, learning, decision, loop), target (key, path or id), chunk_hash, old_hash and new_hash (sha256 hex of the value or text as stored, redacted), reason, related (the other key or path: the key a duplicate was asked under, the fact a conflict is with), value (a fact''s value with that new_hash, while it is in working memory or kept as superseded history; forgotten values are not kept), seq (the row''s place in its agent''s chain). Changes are rows of scsql.memory_changes, chained and checked by scsql verify (unsigned, see sql/26_history.sql). Raises SC200/SC201 for a bad target, SC227 for a limit out of range.';

create or replace function scsql._retire_fact(p_project bigint, p_key text, p_reason text, p_related text)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_fact scsql.memory_facts;
  v_agent bigint := scsql._my_agent_id();
begin
  delete from scsql.memory_facts f where f.project_id = p_project and f.key = p_key returning * into v_fact;
  if not found then
    return;
  end if;
  insert into scsql.fact_versions (project_id, key, value, value_hash, importance, created_at, created_by, superseded_by, reason)
  values (p_project, v_fact.key, v_fact.value, scsql._text_hash(v_fact.value), v_fact.importance, v_fact.created_at,
          v_fact.created_by, v_agent, p_reason);
  perform scsql._memory_change(p_project, 'supersede', 'fact', p_key, null, scsql._text_hash(v_fact.value), null,
                               p_reason, p_related);
end
$$;
comment on function scsql._retire_fact(bigint, text, text, text) is
  'Private. Takes a fact out of working memory, keeping its value in scsql.fact_versions (history) and recording the change.';

create or replace function scsql.resolve_conflict(p_key text, p_keep text, p_note text default null)
returns table (conflict_id bigint, key text, other_key text, kept text[], superseded text[])
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_project bigint := scsql._my_project();
  v_agent bigint := scsql._my_agent_id();
  v_key text;
  v_c scsql.fact_conflicts;
  v_other text;
  v_lose text;
begin
  perform scsql._check_text('key', p_key, 200, false);
  if p_keep is null or p_keep not in ('this', 'others', 'both') then
    raise exception using errcode = 'SC229', message = format('keep must be this, others or both, not %s', coalesce(quote_literal(p_keep), 'NULL')),
      hint = 'this: the named fact is right; others: the facts it conflicts with are; both: they do not contradict each other.';
  end if;
  if p_note is not null then
    if char_length(p_note) > 1000 or p_note ~ E'[\\x01-\\x08\\x0B\\x0C\\x0E-\\x1F\\x7F]' then
      raise exception using errcode = 'SC230', message = 'a note is at most 1,000 characters of printable text';
    end if;
    p_note := scsql._redact(p_note);
  end if;
  v_key := scsql._redact(p_key);
  perform scsql._facts_lock(v_project);
  if not exists (select from scsql.fact_conflicts c where c.project_id = v_project and c.resolved_at is null
                 and (c.key in (p_key, v_key) or c.other_key in (p_key, v_key))) then
    raise exception using errcode = 'SC228', message = format('fact %s has no open conflict', v_key),
      hint = 'recall_context lists open conflicts in its stale section; remember returns them as conflicts_with.';
  end if;
  for v_c in
    update scsql.fact_conflicts c
       set resolved_at = now(), resolved_by = v_agent, resolution = p_keep, note = p_note
     where c.project_id = v_project and c.resolved_at is null
       and (c.key in (p_key, v_key) or c.other_key in (p_key, v_key))
    returning *
  loop
    v_other := case when v_c.key in (p_key, v_key) then v_c.other_key else v_c.key end;
    v_key := case when v_c.key in (p_key, v_key) then v_c.key else v_c.other_key end;
    v_lose := case p_keep when 'this' then v_other when 'others' then v_key end;
    if v_lose is not null then
      perform scsql._retire_fact(v_project, v_lose, format('conflict %s settled for %s', v_c.conflict_id,
                                 case when v_lose = v_key then v_other else v_key end), v_c.key || ' / ' || v_c.other_key);
    end if;
    perform scsql._memory_change(v_project, 'resolve', 'fact', v_key, null, null, null,
      format('conflict %s: keep %s%s', v_c.conflict_id, p_keep, coalesce(': ' || p_note, '')), v_other);
    return query select v_c.conflict_id, v_c.key, v_c.other_key,
      case p_keep when 'this' then array[v_key] when 'others' then array[v_other] else array[v_key, v_other] end,
      case when v_lose is null then '{}'::text[] else array[v_lose] end;
  end loop;
end
$$;
comment on function scsql.resolve_conflict(text, text, text) is
  'Settles a fact''s open conflicts; the losing fact stays in its history. Returns conflict_id, key, other_key, kept, superseded.

p_key: a fact with an open conflict
p_keep (this|others|both): who is right
p_note: why

Settles every open conflict of fact KEY in the acting agent''s project (remember records one when a new fact makes another claim about the subject of an existing fact; recall_context shows both as possibly stale until then): keep this (KEY is right; each fact it conflicts with leaves working memory), others (the facts it conflicts with are right; KEY leaves) or both (no contradiction; both stay). A fact that leaves is kept with its value in its history (memory_history), never lost. Each settlement is recorded in the memory history with the note (stored redacted). Returns one row per conflict settled: conflict_id, key (the newer fact), other_key, kept, superseded. Raises SC200/SC201 for a bad key, SC228 when KEY has no open conflict, SC229 for keep other than this, others or both, SC230 for a bad note.';

-- recall_context reads the open conflicts itself (sql/24_context.sql).
drop function if exists scsql._open_conflicts(bigint);
