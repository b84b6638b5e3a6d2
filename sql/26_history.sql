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
  'Private. Records one change to memory in scsql.memory_changes, in the acting agent''s chain: op (remember, supersede, refresh, forget, archive, unarchive, conflict, resolve, purge; index, remove, pin, unpin, forget_source, forget_chunk, summary; learn, rule, unrule; decide, supersede, withdraw; open_loop, close_loop), kind (fact, source, chunk, learning, decision, loop), target (fact key, source path, learning:<id>, decision:<id> or loop:<id>), chunk_hash, the old and new content hash, the reason and a related key or path. Chained unsigned (see the head of sql/26_history.sql): the signature field is 32 zero bytes then 32 random bytes. The change is the acting agent''s; when the session acts as scsql_owner (a trigger on a Citus worker), it is the agent P_AUTHOR, which the trigger took from its row. Does nothing when the acting role is not an agent (nor the owner naming one).';

-- ---------------------------------------------------------------------------
-- Duplicates and conflicts between facts
-- ---------------------------------------------------------------------------

create or replace function scsql._fact_canon(p_term text)
returns text
language sql immutable parallel safe
as $$
  -- Words of one role spelled apart (stems, as _fact_terms makes them): a
  -- linter and linting, a pipeline and CI, a database and the db.
  -- An agent noun is its verb's stem (linter, bundler, runner: lint, bundl, runn).
  select coalesce((select s.c from (values
    ('databas', 'db'), ('postgresql', 'postgr'), ('pipelin', 'ci'), ('formatt', 'format'),
    ('deployment', 'deploy'), ('suit', 'test'), ('document', 'doc'), ('site', 'doc'), ('depend', 'dep'),
    ('packag', 'dep'), ('repositori', 'repo'), ('timestamp', 'time'), ('approv', 'review'), ('pr', 'review'),
    ('hint', 'type'), ('cache', 'cach'), ('queue', 'job'), ('frontend', 'ui'), ('space', 'indent'),
    ('width', 'line'), ('length', 'line'), ('monitor', 'metric'), ('manifest', 'kubectl')) s(w, c) where s.w = p_term),
    case when char_length(p_term) >= 6 and p_term ~ '[a-z]er$' then left(p_term, -2) else p_term end)
$$;
comment on function scsql._fact_canon(text) is
  'Private. One term for the words of one role that facts spell apart (linter and lint, pipeline and ci, database and db, ...), applied to the stems scsql._fact_terms makes.';

create or replace function scsql._fact_filler()
returns text[]
language sql immutable parallel safe
as $$
  select array['use', 'run', 'write', 'store', 'kept', 'keep', 'manag', 'done', 'go', 'happen', 'via', 'everi', 'new',
               'code', 'file', 'need', 'requir', 'support', 'main', 'primari', 'public', 'project', 'instal', 'built',
               'build', 'base', 'read', 'come', 'live', 'onli', 'mean', 'follow', 'one', 'put', 'work', 'set', 'call',
               'get', 'make', 'way', 'also', 'system', 'servic', 'tool', 'style', 'rule', 'method', 'cadenc', 'choic',
               'kind', 'version', 'standard', 'command', 'default', 'day', 'week', 'month', 'hour', 'minut', 'second',
               'year', 'never', 'no', '!not', 'hold', 'size', 'switch', 'replac', 'drop', 'instead', 'longer']
$$;
comment on function scsql._fact_filler() is
  'Private. Terms that say how rather than what (use, run, keep, every, ...), and units of time and negations, which scsql._fact_meaning does not count as a fact''s content.';

create or replace function scsql._fact_roles()
returns text[]
language sql immutable parallel safe
as $$
  select array['lint', 'format', 'test', 'ci', 'db', 'deploy', 'cach', 'job', 'log', 'secret', 'ui', 'orm', 'releas',
               'review', 'type', 'indent', 'line', 'migrat', 'repo', 'doc', 'host', 'error', 'commit', 'flag', 'dep',
               'api', 'session', 'auth', 'python', 'languag', 'framework', 'runner']
$$;
comment on function scsql._fact_roles() is
  'Private. Roles a project fills with one choice (lint, format, test, ci, db, deploy, ...): two facts sharing one and naming different things contradict (scsql._fact_meaning).';

create or replace function scsql._fact_antonyms()
returns text[]
language sql immutable parallel safe
as $$
  select array['always/never', 'enabl/disabl', 'allow/forbid', 'requir/option', 'public/privat', 'sync/async',
               'local/utc', 'squash/keep', 'manual/automat', 'parallel/serial']
$$;
comment on function scsql._fact_antonyms() is
  'Private. Pairs of stems of opposite meaning (always/never, enable/disable, manual/automatic, ...), for scsql._fact_meaning.';
create or replace function scsql._fact_meaning(k1 text[], v1 text[], k2 text[], v2 text[])
returns text
language sql immutable parallel safe
as $$
  -- What two facts say, judged by meaning without a model: a negation on one
  -- side only of a shared subject, or words of opposite meaning, contradict;
  -- about a shared role (lint, ci, db, deploy, ...) or two shared terms, the
  -- same content says the same, one or two terms swapped on each side
  -- (ruff for flake8, Jenkins for GitHub Actions, 5432 for 5433) contradict.
  with c as (
    select array(select t from unnest(k1 || v1) t where t <> all (scsql._fact_filler())) as a,
           array(select t from unnest(k2 || v2) t where t <> all (scsql._fact_filler())) as b,
           array(select t from unnest(v1) t where t <> all (scsql._fact_filler())) as va,
           array(select t from unnest(v2) t where t <> all (scsql._fact_filler())) as vb),
  d as (
    select array(select unnest(c.a) intersect select unnest(c.b)) as shared,
           array(select unnest(c.va) except select unnest(c.b)) as da,
           array(select unnest(c.vb) except select unnest(c.a)) as db, c.*
    from c)
  select case
    when ('!not' = any (v1)) <> ('!not' = any (v2)) and cardinality(d.shared) >= 2 then 'conflict'
    -- One side says the choice changed (switched, replaced, dropped, instead, no longer).
    when cardinality(d.shared) > 0 and (v1 && array['switch', 'replac', 'drop', 'instead', 'longer'])
                                       <> (v2 && array['switch', 'replac', 'drop', 'instead', 'longer']) then 'conflict'
    when cardinality(d.shared) > 0 and exists (
      select from unnest(scsql._fact_antonyms()) x(p)
      where (split_part(x.p, '/', 1) = any (k1 || v1) and split_part(x.p, '/', 2) = any (k2 || v2))
         or (split_part(x.p, '/', 2) = any (k1 || v1) and split_part(x.p, '/', 1) = any (k2 || v2))) then 'conflict'
    when not (d.shared && scsql._fact_roles() or cardinality(d.shared) >= 2) then null
    when cardinality(d.da) = 0 and cardinality(d.db) = 0 then 'duplicate'
    when cardinality(d.da) between 1 and 2 and cardinality(d.db) between 1 and 2 then 'conflict'
    -- One side says a little more, in its value only: a term its own key
    -- names is the subject it is about (old.three is not new.three).
    when (cardinality(d.da) = 0 or cardinality(d.db) = 0) and cardinality(d.da) + cardinality(d.db) <= 2
         and not (d.da && k1 or d.db && k2) then 'duplicate'
  end
  from d
$$;
comment on function scsql._fact_meaning(text[], text[], text[], text[]) is
  'Private. How two facts relate by meaning, from their terms (scsql._fact_terms of key and value): conflict when only one side negates a subject they share (two terms), when they hold words of opposite meaning (scsql._fact_antonyms), or when, about a shared role (scsql._fact_roles) or two shared terms, one or two terms are swapped on each side; duplicate when their content is the same; NULL when it cannot tell. Measured on tests/data/fact_meaning_pairs.jsonl.';

create or replace function scsql._fact_terms(p_text text)
returns text[]
language sql immutable parallel safe
as $$
  -- English stems without stop words (so "runs" = "run", "the" is gone), of
  -- the text with camelCase, dots, slashes, dashes and underscores split and
  -- the numbers one to ten as digits; a negation is kept as the term "!not"
  -- (the stop words drop "not").
  select array(select distinct scsql._fact_canon(t) from unnest(
           tsvector_to_array(to_tsvector('english'::regconfig,
             (select string_agg(coalesce((array['1','2','3','4','5','6','7','8','9','10'])[
                        array_position(array['one','two','three','four','five','six','seven','eight','nine','ten'], lower(w))], w), ' ')
              from regexp_split_to_table(
                regexp_replace(regexp_replace(p_text, '([a-z0-9])([A-Z])', '\1 \2', 'g'), '[._/:=`-]+', ' ', 'g'), '\s+') w)))
           || case when p_text ~* '\m(not|no|never|don''?t|doesn''?t|isn''?t|aren''?t|won''?t|cannot|can''t|without)\M'
                   then array['!not'] else '{}'::text[] end) t order by 1)
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

create or replace function scsql._fact_relation_by_terms(k1 text[], v1 text[], k2 text[], v2 text[])
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
comment on function scsql._fact_relation_by_terms(text[], text[], text[], text[]) is
  'Private. How two facts relate by their terms alone (the same terms: duplicate; keys alike with another claim: conflict), for scsql._fact_relation_terms.';


create or replace function scsql._fact_relation_terms(k1 text[], v1 text[], k2 text[], v2 text[])
returns text
language sql immutable parallel safe
as $$
  -- By terms first; where they see no relation, or see a conflict between
  -- facts that say the same in other words, by meaning.
  select case when t = 'unrelated' then coalesce(m, 'unrelated')
              when t = 'conflict' and m = 'duplicate' then 'duplicate'
              else t end
  from scsql._fact_relation_by_terms(k1, v1, k2, v2) t, scsql._fact_meaning(k1, v1, k2, v2) m
$$;
comment on function scsql._fact_relation_terms(text[], text[], text[], text[]) is
  'Private. scsql._fact_relation over the facts'' terms (scsql._fact_terms of key and value), as working memory stores them: scsql._fact_relation_by_terms, and scsql._fact_meaning where that sees no relation or calls a paraphrase a conflict.';

-- Facts stored before their terms were canonical (scsql._fact_canon) get them
-- now; working memory is bounded, so this costs little when sql/ is applied.
update scsql.memory_facts f set key_terms = scsql._fact_terms(f.key), value_terms = scsql._fact_terms(f.value)
where f.key_terms is distinct from scsql._fact_terms(f.key) or f.value_terms is distinct from scsql._fact_terms(f.value);

create or replace function scsql._fact_relation(p_key text, p_value text, p_other_key text, p_other_value text)
returns text
language sql immutable parallel safe
as $$
  select scsql._fact_relation_terms(scsql._fact_terms(p_key), scsql._fact_terms(p_value),
                                    scsql._fact_terms(p_other_key), scsql._fact_terms(p_other_value))
$$;
comment on function scsql._fact_relation(text, text, text, text) is
  'Private. How the fact (p_key, p_value) relates to another: duplicate (some terms, and the same terms in key and value together; or the same value terms when the value has at least 3 or the keys share one; or values of at least 4 terms differing in one term that is neither a number nor a negation; terms: scsql._fact_terms), conflict (not a duplicate, and the keys'' term sets have Jaccard similarity >= 0.5, or the keys share a term and the values'' similarity is >= 0.4 with at least two terms shared), else unrelated. Thresholds measured on tests/data/fact_pairs.jsonl (tests/memory/test_fact_conflicts.py prints precision and recall).';

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
-- is common, and how common does not matter. Every term is counted in one
-- query on the project alone (on Citus, one round trip to its shard: the
-- only table it reads is named by the project, so Citus sends it whole).
declare
  v_sides text[] := string_to_array(p_sides, NULL);
  v_rarest text[];
begin
  if coalesce(cardinality(p_terms), 0) = 0 or greatest(p_n, 0) = 0 then
    return '{}';
  end if;
  select array_agg(x.t order by x.n, x.t) into v_rarest
  from (select u.t, c.n
        from unnest(p_terms) u(t)
        cross join lateral (
          select count(*)::integer as n from (
            select 1 from scsql.memory_facts f
            where f.project_id = p_project
              and f.index_terms && array(select p_project::text || ':' || s || ':' || u.t from unnest(v_sides) s)
            limit 32) m) c
        order by c.n, u.t limit greatest(p_n, 0)) x;
  return coalesce(v_rarest, '{}');
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
-- One that scsql._fact_meaning relates shares a term of content with it.
declare
  v_pre text := p_project::text || ':';
  v_a integer := cardinality(p_kt);
  v_n integer := cardinality(p_vt);
  v_r text[];
  v_rv text[];
  v_keys text[];
  -- What scsql._fact_meaning relates shares a term of content (not filler) with the new fact.
  v_content text[] := array(select v_pre || s || ':' || t from unnest(p_kt || p_vt) t, unnest(array['k', 'v']) s
                            where t <> all (scsql._fact_filler()));
begin
  if p_relation = 'duplicate' then
    v_r := case when v_n > 0 then scsql._fact_rarest(p_project, p_vt, 'kv', 2) else p_kt end;
    select array_agg(f.key) into v_keys from scsql.memory_facts f
    where (f.index_terms
             && array(select v_pre || s || ':' || t from unnest(v_r) t, unnest(array['k', 'v']) s)
           or f.index_terms && v_content)
      and f.project_id = p_project;
  else
    v_r := scsql._fact_rarest(p_project, p_kt, 'k', 1);
    -- A value before the query (on Citus the query runs on the project's node).
    v_rv := scsql._fact_rarest(p_project, p_vt, 'v', v_n - greatest(2, ceil(0.4 * v_n)::integer) + 1);
    select array_agg(f.key) into v_keys from scsql.memory_facts f
    where f.project_id = p_project
      and (f.index_terms && v_content
           or f.index_terms && array(select v_pre || 'k:' || t from unnest(v_r) t)
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

TARGET is one fact (by key), source (by path) or chunk (by chunk_hash: the changes of forget_chunk for it and of the sources holding it now), learning (learning:<id>), decision (decision:<id>) or open loop (loop:<id>) of the acting agent''s project. Columns: at, agent (the acting agent that made the change), op (facts: remember, supersede, refresh, forget, archive, unarchive, conflict, resolve, purge; sources: index (reason: added or changed), remove (a file no longer in the tree scsql.index walks), purge (expired, by the worker), pin, unpin, forget_source, forget_chunk, summary; learnings: learn (derived from an outcome; related outcome:<id>), rule and unrule (mark_learning_rule); decisions: decide, supersede, withdraw (an undone distillation); open loops: open_loop, close_loop), kind (fact, source, chunk, learning, decision, loop), target (key, path or id), chunk_hash, old_hash and new_hash (sha256 hex of the value or text as stored, redacted), reason, related (the other key or path: the key a duplicate was asked under, the fact a conflict is with), value (a fact''s value with that new_hash, while it is in working memory or kept as superseded history; forgotten values are not kept), seq (the row''s place in its agent''s chain). Changes are rows of scsql.memory_changes, chained and checked by scsql verify (unsigned, see sql/26_history.sql). Raises SC200/SC201 for a bad target, SC227 for a limit out of range.';

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

Remember records a conflict when a new fact makes another claim about the subject of an existing fact; recall_context shows both as possibly stale until it is settled. Every open conflict of KEY in the acting agent''s project is settled by KEEP: this (KEY is right; each fact it conflicts with leaves working memory), others (the facts it conflicts with are right; KEY leaves) or both (no contradiction; both stay). A fact that leaves is kept with its value in its history (memory_history), never lost. Each settlement is recorded in the memory history with the note (stored redacted). One row per conflict settled; key is the newer fact. Raises SC200/SC201 for a bad key, SC228 when KEY has no open conflict, SC229 for keep other than this, others or both, SC230 for a bad note.';

-- recall_context reads the open conflicts itself (sql/24_context.sql).
drop function if exists scsql._open_conflicts(bigint);

-- ---------------------------------------------------------------------------
-- Verification: memory as its chained history last left it
-- ---------------------------------------------------------------------------
-- Every change made through the API records the content hash it left
-- (memory_changes.new_hash: sha256 hex of the text as stored), in a chained
-- row. scsql verify --full (and scsql restore) compare each memory table's
-- rows with the latest such change, so a row written, changed or deleted
-- outside the API is a named break. Each helper returns the rows that
-- disagree: project_id, kind, target (as memory_history names it), problem
-- (changed: other content; missing: the history says it is there, it is
-- not; unrecorded: it is there, the history says it is not or says nothing;
-- state: pinned, closed or denying otherwise than the history says),
-- expected and found (hashes or states), a detail naming the change the
-- history ends with, the row's newest time, and whether any change records
-- the row at all.

create or replace function scsql._memory_fact_drift()
returns table (project_id bigint, kind text, target text, problem text, expected text, found text, detail text,
               at timestamptz, recorded boolean)
language plpgsql stable
as $$
#variable_conflict use_column
begin
  -- PL/pgSQL: Citus plans no query over distributed tables inside an SQL function.
  return query
  -- The latest change of each key that says what working memory holds (a
  -- resolve says nothing of a value; a fact it retires has its supersede).
  with last as (
    select distinct on (m.project_id, m.target) m.project_id, m.target, m.op, m.new_hash, m.chain_id, m.seq
    from scsql.memory_changes m
    where m.kind = 'fact' and m.op <> 'resolve'
    order by m.project_id, m.target, m.change_id desc),
  held as (
    select f.project_id, f.key, scsql._text_hash(f.value) as hash, greatest(f.created_at, f.updated_at) as at
    from scsql.memory_facts f)
  select coalesce(h.project_id, l.project_id), 'fact', coalesce(h.key, l.target),
         case when h.key is null then 'missing' when l.new_hash is null then 'unrecorded' else 'changed' end,
         l.new_hash, h.hash,
         case when l.target is null then 'no change of the memory history records this fact'
              when l.new_hash is null then format('the history ends with %s (chain %s seq %s), which took it out of working memory',
                                                  l.op, l.chain_id, l.seq)
              else format('the history ends with %s (chain %s seq %s), which left the value with sha256 %s',
                          l.op, l.chain_id, l.seq, l.new_hash) end,
         h.at, l.target is not null
  from last l full join held h on h.project_id = l.project_id and h.key = l.target
  where l.new_hash is distinct from h.hash;
end
$$;
comment on function scsql._memory_fact_drift() is
  'Private, for scsql.verify_memory. Facts of working memory whose value is not the one the latest change of their key in the memory history left (other than resolve): changed, missing (the history leaves it in memory), unrecorded (in memory, though the history took it out or never recorded it).';

create or replace function scsql._memory_source_changes()
returns table (project_id bigint, path text, op text, new_hash text, resets boolean, change_id bigint,
               chain_id bigint, seq bigint)
language plpgsql stable
as $$
#variable_conflict use_column
begin
  -- PL/pgSQL: Citus plans no query over distributed tables inside an SQL function.
  return query
  -- A source's own changes, and for an archived fact (source fact:<key>)
  -- its fact's changes: archive makes the source (its hash is not
  -- recorded: "archived"), every other change of the fact leaves none.
  -- resets: the change removes the source or adds it anew (unpinned).
  select m.project_id, m.target, m.op, m.new_hash,
         m.new_hash is null or (m.old_hash is null and m.op in ('index', 'summary')), m.change_id, m.chain_id, m.seq
  from scsql.memory_changes m where m.kind = 'source'
  union all
  select m.project_id, 'fact:' || m.target, m.op, case when m.op = 'archive' then 'archived' end, true,
         m.change_id, m.chain_id, m.seq
  from scsql.memory_changes m where m.kind = 'fact' and m.op <> 'resolve';
end
$$;
comment on function scsql._memory_source_changes() is
  'Private, for scsql._memory_source_drift. The changes of the memory history that say what each knowledge-base source holds: its own (kind source), and for the archived copy of a fact (path fact:<key>) the fact''s changes, archive with the new hash "archived" (the copy''s hash is not recorded) and every other without one; resets is true for a change that removes the source or adds it anew.';

create or replace function scsql._memory_source_drift()
returns table (project_id bigint, kind text, target text, problem text, expected text, found text, detail text,
               at timestamptz, recorded boolean)
language plpgsql stable
as $$
#variable_conflict use_column
begin
  -- PL/pgSQL: Citus plans no query over distributed tables inside an SQL function.
  return query
  with c as materialized (select * from scsql._memory_source_changes()),
  last as (select distinct on (c.project_id, c.path) c.* from c order by c.project_id, c.path, c.change_id desc),
  pin as (
    select distinct on (c.project_id, c.path) c.project_id, c.path, c.op = 'pin' as pinned, c.op, c.chain_id, c.seq
    from c where c.op in ('pin', 'unpin') or c.resets
    order by c.project_id, c.path, c.change_id desc),
  d as (
    select coalesce(s.project_id, l.project_id) as project_id, coalesce(s.path, l.path) as path, l.op, l.new_hash,
           l.chain_id, l.seq, s.path is not null as held, s.content_hash, s.pinned,
           coalesce(p.pinned, false) as want_pinned, p.op as pin_op, p.chain_id as pin_chain, p.seq as pin_seq,
           greatest(s.created_at, s.updated_at) as at
    from last l
    full join scsql.kb_sources s on s.project_id = l.project_id and s.path = l.path
    left join pin p on p.project_id = coalesce(s.project_id, l.project_id) and p.path = coalesce(s.path, l.path))
  select d.project_id, 'source', d.path,
         case when not d.held then 'missing' when d.new_hash is null then 'unrecorded'
              when d.new_hash <> 'archived' and d.new_hash <> d.content_hash then 'changed' else 'state' end,
         case when d.new_hash is null or d.new_hash <> 'archived' and d.new_hash <> d.content_hash or not d.held
              then d.new_hash else 'pinned ' || d.want_pinned end,
         case when d.new_hash is null or d.new_hash <> 'archived' and d.new_hash <> d.content_hash or not d.held
              then d.content_hash else 'pinned ' || d.pinned end,
         case when d.op is null then 'no change of the memory history records this source'
              when d.held and d.new_hash is not null and (d.new_hash = 'archived' or d.new_hash = d.content_hash)
                then format('it is %s, but the history''s pins end with %s',
                            case when d.pinned then 'pinned' else 'not pinned' end,
                            coalesce(format('%s (chain %s seq %s)', d.pin_op, d.pin_chain, d.pin_seq), 'none'))
              when d.new_hash is null then format('the history ends with %s (chain %s seq %s), which removed it',
                                                  d.op, d.chain_id, d.seq)
              else format('the history ends with %s (chain %s seq %s), which left %s', d.op, d.chain_id, d.seq,
                          case when d.new_hash = 'archived' then 'the archived copy of the fact'
                               else 'content with sha256 ' || d.new_hash end) end,
         d.at, d.op is not null
  from d
  where d.held <> (d.new_hash is not null)
     or (d.held and d.new_hash <> 'archived' and d.new_hash <> d.content_hash)
     or (d.held and d.pinned <> d.want_pinned);
end
$$;
comment on function scsql._memory_source_drift() is
  'Private, for scsql.verify_memory. Knowledge-base sources whose content_hash, presence or pin is not what the latest change of their path in the memory history left (scsql._memory_source_changes): changed, missing, unrecorded, or state (pinned otherwise than the latest pin or unpin since the source was last added says).';

create or replace function scsql._memory_chunk_drift()
returns table (project_id bigint, kind text, target text, problem text, expected text, found text, detail text,
               at timestamptz, recorded boolean)
language plpgsql stable
as $$
#variable_conflict use_column
begin
  -- PL/pgSQL: Citus plans no query over distributed tables inside an SQL function.
  return query
  -- A purged chunk (sql/28_purge.sql) holds no text, and a purge recorded it.
  select c.project_id, 'chunk', s.path || '#' || c.seq, 'changed', c.chunk_hash, scsql._chunk_hash(c.content),
         case when c.purged_at is null
              then format('the text of chunk %s of %s is not the text its chunk_hash addresses (sha256 of the normalized text)',
                          c.seq, s.path)
              else format('chunk %s of %s is marked purged, but holds text or no purge in scsql.purges removed it', c.seq, s.path) end,
         c.created_at, true
  from scsql.kb_chunks c
  join scsql.kb_sources s on s.project_id = c.project_id and s.source_id = c.source_id
  where case when c.purged_at is null then scsql._chunk_hash(c.content) <> c.chunk_hash
             else c.content <> '' or c.anchor is not null or c.context is not null
                  or not exists (select from scsql.purges p where p.project_id = c.project_id and p.target_kind = 'chunk'
                                 and p.target_id = c.chunk_id) end;
end
$$;
comment on function scsql._memory_chunk_drift() is
  'Private, for scsql.verify_memory. Chunks whose text does not have their chunk_hash (the sha256 of the normalized text, scsql._chunk_hash): text changed outside the API; and purged chunks (purged_at set) that hold text or that no purge in scsql.purges removed.';

create or replace function scsql._memory_decision_drift()
returns table (project_id bigint, kind text, target text, problem text, expected text, found text, detail text,
               at timestamptz, recorded boolean)
language plpgsql stable
as $$
#variable_conflict use_column
begin
  -- PL/pgSQL: Citus plans no query over distributed tables inside an SQL function.
  return query
  -- A decision never changes: its decide change holds the hash of title and
  -- rationale and, in related, what it supersedes (or its session summary).
  -- A withdraw change (an undone distillation, sql/65_distill.sql) records
  -- no hash: the decision is gone.
  with rec as (
    select distinct on (m.project_id, m.target) m.project_id, m.target, m.new_hash, m.related, m.chain_id, m.seq
    from scsql.memory_changes m where m.kind = 'decision' and m.op in ('decide', 'withdraw')
    order by m.project_id, m.target, m.change_id desc),
  held as (
    select d.project_id, 'decision:' || d.decision_id as target,
           case when d.purged_at is null then scsql._text_hash(d.title || E'\n\n' || d.rationale)
                else (select p.digests ->> 'decision' from scsql.purges p  -- purged: what it held, by its purge record
                      where p.project_id = d.project_id and p.target_kind = 'decision' and p.target_id = d.decision_id
                      order by p.purge_id limit 1) end as hash,
           left(coalesce('decision:' || d.supersedes, d.source_path), 1024) as related, d.decided_at as at
    from scsql.decisions d)
  select coalesce(h.project_id, r.project_id), 'decision', coalesce(h.target, r.target),
         case when h.target is null then 'missing' when r.target is null then 'unrecorded'
              when r.new_hash is distinct from h.hash then 'changed' else 'state' end,
         case when r.new_hash is distinct from h.hash or h.target is null then r.new_hash else r.related end,
         case when r.new_hash is distinct from h.hash or h.target is null then h.hash else h.related end,
         case when r.target is null then 'no change of the memory history records this decision'
              when h.target is not null and r.new_hash is not distinct from h.hash
                then format('it names %s as what it supersedes or comes from; its decide (chain %s seq %s) named %s',
                            coalesce(h.related, 'nothing'), r.chain_id, r.seq, coalesce(r.related, 'nothing'))
              else format('its decide (chain %s seq %s) recorded title and rationale with sha256 %s',
                          r.chain_id, r.seq, r.new_hash) end,
         h.at, r.target is not null
  from rec r full join held h on h.project_id = r.project_id and h.target = r.target
  where r.new_hash is distinct from h.hash
     or (r.target is not null and h.target is not null and r.related is distinct from h.related);
end
$$;
comment on function scsql._memory_decision_drift() is
  'Private, for scsql.verify_memory. Decisions whose title and rationale (sha256 of title, a blank line, rationale), or whose superseded decision or source, are not what their decide change in the memory history recorded, decisions that change records but that are gone (missing; a decision whose last change is a withdraw is gone as recorded), and decisions no change records (unrecorded).';

create or replace function scsql._memory_loop_drift()
returns table (project_id bigint, kind text, target text, problem text, expected text, found text, detail text,
               at timestamptz, recorded boolean)
language plpgsql stable
as $$
#variable_conflict use_column
begin
  -- PL/pgSQL: Citus plans no query over distributed tables inside an SQL function.
  return query
  -- open_loop recorded the text's hash, the owner (reason) and the source
  -- (related); close_loop the resolution's hash.
  with o as (
    select distinct on (m.project_id, m.target) m.project_id, m.target, m.new_hash, m.reason, m.related, m.chain_id, m.seq
    from scsql.memory_changes m where m.kind = 'loop' and m.op = 'open_loop'
    order by m.project_id, m.target, m.change_id desc),
  c as (
    select distinct on (m.project_id, m.target) m.project_id, m.target, m.new_hash, m.chain_id, m.seq
    from scsql.memory_changes m where m.kind = 'loop' and m.op = 'close_loop'
    order by m.project_id, m.target, m.change_id desc),
  held as (
    select l.project_id, 'loop:' || l.loop_id as target, scsql._text_hash(l.text) as hash,
           coalesce('owner ' || l.owner, 'no owner') as owner, left(l.source_path, 1024) as related,
           scsql._text_hash(l.resolution) as resolution, greatest(l.opened_at, l.closed_at) as at
    from scsql.open_loops l),
  d as (
    select coalesce(h.project_id, o.project_id) as project_id, coalesce(h.target, o.target) as target,
           h.target is not null as held, o.target is not null as opened, o.new_hash, h.hash, o.reason, h.owner,
           o.related as o_related, h.related, c.new_hash as closed_hash, h.resolution, o.chain_id, o.seq,
           c.chain_id as c_chain, c.seq as c_seq, h.at
    from o full join held h on h.project_id = o.project_id and h.target = o.target
    left join c on c.project_id = coalesce(h.project_id, o.project_id) and c.target = coalesce(h.target, o.target))
  select d.project_id, 'loop', d.target,
         case when not d.held then 'missing' when not d.opened then 'unrecorded'
              when d.new_hash is distinct from d.hash then 'changed' else 'state' end,
         case when d.new_hash is distinct from d.hash or not d.held then d.new_hash
              else concat_ws(' ', d.reason, d.o_related, coalesce('resolution ' || d.closed_hash, 'open')) end,
         case when d.new_hash is distinct from d.hash or not d.held then d.hash
              else concat_ws(' ', d.owner, d.related, coalesce('resolution ' || d.resolution, 'open')) end,
         case when not d.opened then 'no change of the memory history records this open loop'
              when d.new_hash is distinct from d.hash or not d.held
                then format('its open_loop (chain %s seq %s) recorded the text with sha256 %s', d.chain_id, d.seq, d.new_hash)
              else format('owner, source or closing differ from its open_loop (chain %s seq %s) and close_loop (%s)',
                          d.chain_id, d.seq, coalesce(format('chain %s seq %s', d.c_chain, d.c_seq), 'none')) end,
         d.at, d.opened
  from d
  where d.new_hash is distinct from d.hash
     or (d.held and d.opened and (d.reason is distinct from d.owner or d.o_related is distinct from d.related
                                  or d.closed_hash is distinct from d.resolution));
end
$$;
comment on function scsql._memory_loop_drift() is
  'Private, for scsql.verify_memory. Open loops whose text, owner, source or closing (open, or closed with a resolution of that sha256) are not what their open_loop and close_loop changes in the memory history recorded, loops those changes record that are gone (missing), and loops no change records (unrecorded).';

create or replace function scsql._same_text(p_a text, p_a_sha256 bytea, p_b text, p_b_sha256 bytea)
returns boolean
language sql immutable parallel safe
as $$
  -- Two texts, either of which a purge may have removed, keeping its sha256.
  select case when p_a is not null and p_b is not null then p_a = p_b
              when p_a is null and p_b is null and p_a_sha256 is null and p_b_sha256 is null then true
              else coalesce(p_a_sha256, sha256(convert_to(p_a, 'UTF8')))
                   is not distinct from coalesce(p_b_sha256, sha256(convert_to(p_b, 'UTF8'))) end
$$;
comment on function scsql._same_text(text, bytea, text, bytea) is
  'Private. True when text P_A (or, removed by scsql.purge, its sha256 P_A_SHA256) is text P_B (or its sha256): a learning compared with the outcome it was derived from when either was purged.';

create or replace function scsql._memory_learning_learned()
returns table (project_id bigint, target text, new_hash text, chain_id bigint, seq bigint)
language plpgsql stable
as $$
#variable_conflict use_column
begin
  -- PL/pgSQL: Citus plans no query over distributed tables inside an SQL function.
  return query
  select distinct on (m.project_id, m.target) m.project_id, m.target, m.new_hash, m.chain_id, m.seq
  from scsql.memory_changes m where m.kind = 'learning' and m.op = 'learn'
  order by m.project_id, m.target, m.change_id desc;
end
$$;
comment on function scsql._memory_learning_learned() is
  'Private, for scsql._memory_learning_drift and _memory_learning_gone. The latest learn change of each learning in the memory history: its project, target (learning:<id>), the summary hash it recorded (new_hash), chain and seq.';

create or replace function scsql._memory_learning_drift()
returns table (project_id bigint, kind text, target text, problem text, expected text, found text, detail text,
               at timestamptz, recorded boolean)
language plpgsql stable
as $$
#variable_conflict use_column
begin
  -- A learning is a copy of the outcome it was derived from (chained and signed by its author), while
  -- that outcome is kept; after retention took it, of the summary hash its learn change recorded (public
  -- and internal learnings only). Whether it denies calls is what its last rule or unrule change says,
  -- with the pattern that change names. (PL/pgSQL, purges joined: Citus plans neither an SQL
  -- function's query over distributed tables nor a correlated subquery beside these.)
  return query
  with learn as materialized (select * from scsql._memory_learning_learned()),
  rule as (
    select distinct on (m.project_id, m.target) m.project_id, m.target, m.op, m.reason, m.chain_id, m.seq
    from scsql.memory_changes m where m.kind = 'learning' and m.op in ('rule', 'unrule')
    order by m.project_id, m.target, m.change_id desc),
  purged as (
    select distinct p.project_id, p.target_id, p.digests ->> 'summary' as summary
    from scsql.purges p where p.target_kind = 'learning'),
  d as (
    select l.project_id, 'learning:' || l.learning_id as target, l.created_at as at, o.outcome_id is not null as kept,
           o.chain_id as o_chain, o.seq as o_seq, n.target is not null as learned, n.new_hash,
           n.chain_id as n_chain, n.seq as n_seq,
           coalesce(scsql._text_hash(l.summary), encode(l.summary_sha256, 'hex')) as hash, l.deny, l.pattern,
           r.op as rule_op, r.reason as rule_reason,
           array_to_string(array[
             case when not scsql._same_text(l.summary, l.summary_sha256, o.summary, o.summary_sha256) then 'summary' end,
             case when not scsql._same_text(l.evidence, l.evidence_sha256, o.evidence, o.evidence_sha256) then 'evidence' end,
             -- A text removed (scsql.purge keeps its sha256) needs the purge that removed it.
             case when (l.summary is null or (l.evidence is null and l.evidence_sha256 is not null)) and pu.target_id is null
                  then 'text removed without a purge' end,
             case when l.outcome_kind is distinct from o.kind
                    or l.kind is distinct from case when o.kind in ('shipped', 'accepted') then 'experiment' else 'failure' end
                  then 'kind' end,
             case when l.author_id is distinct from o.author_id then 'author' end,
             case when (l.signal, l.confidence, l.classification) is distinct from (o.signal, o.confidence, o.classification)
                  then 'signal, confidence or classification' end,
             case when (l.tool_call_id, l.session_id, l.task_ref) is distinct from (o.tool_call_id, o.session_id, o.task_ref)
                  then 'tool call, session or task' end], ', ') as differs
    from scsql.learnings l
    left join scsql.outcomes o on o.project_id = l.project_id and o.outcome_id = l.outcome_id
    left join learn n on n.project_id = l.project_id and n.target = 'learning:' || l.learning_id
    left join rule r on r.project_id = l.project_id and r.target = 'learning:' || l.learning_id
    left join purged pu on pu.project_id = l.project_id and pu.target_id = l.learning_id
                       and pu.summary = encode(l.summary_sha256, 'hex')),
  bad as (
    select d.*, d.deny <> coalesce(d.rule_op = 'rule', false)
                or (d.deny and d.rule_reason is distinct from
                    'denies matching calls' || coalesce(' (pattern ' || left(d.pattern, 900) || ')', '')) as rule_bad
    from d)
  select b.project_id, 'learning', b.target,
         case when not b.kept and not b.learned then 'unrecorded'
              when b.differs <> '' or (not b.kept and b.new_hash is distinct from b.hash and b.new_hash is not null)
                then 'changed' else 'state' end,
         case when b.differs = '' and b.kept or not b.kept and b.new_hash is null
              then coalesce(b.rule_op, 'no rule') else b.new_hash end,
         case when b.differs = '' and b.kept or not b.kept and b.new_hash is null
              then case when b.deny then 'rule' else 'no rule' end else b.hash end,
         case when not b.kept and not b.learned
                then 'neither its outcome nor a change of the memory history records this learning'
              when b.differs <> ''
                then format('%s not as in the outcome (chain %s seq %s) it was derived from, which its author signed',
                            b.differs, b.o_chain, b.o_seq)
              when not b.kept and b.new_hash is distinct from b.hash and b.new_hash is not null
                then format('its learn change (chain %s seq %s) recorded the summary with sha256 %s',
                            b.n_chain, b.n_seq, b.new_hash)
              else format('it %s, but its rule changes end with %s', case when b.deny then 'denies calls' else 'denies nothing' end,
                          coalesce(b.rule_op, 'none')) end,
         b.at, b.kept or b.learned
  from bad b
  where (not b.kept and not b.learned) or b.differs <> '' or b.rule_bad
     or (not b.kept and b.new_hash is not null and b.new_hash <> b.hash);
end
$$;
comment on function scsql._memory_learning_drift() is
  'Private, for scsql.verify_memory. Learnings that differ from the outcome they were derived from (while it is kept; a text either purged is compared by its sha256, and a learning''s text removed needs its purge record) or, once retention took it, from the summary hash of their learn change; that deny calls otherwise than their latest rule or unrule change says (with its pattern); and that nothing records (unrecorded). Those a learn change records that are gone: scsql._memory_learning_gone.';

create or replace function scsql._memory_learning_gone()
returns table (project_id bigint, kind text, target text, problem text, expected text, found text, detail text,
               at timestamptz, recorded boolean)
language plpgsql stable
as $$
#variable_conflict use_column
begin
  -- PL/pgSQL: Citus plans no query over distributed tables inside an SQL function.
  return query
  with learn as materialized (select * from scsql._memory_learning_learned())
  select n.project_id, 'learning', n.target, 'missing', n.new_hash, null::text,
         format('its learn change (chain %s seq %s) records it, but it is gone', n.chain_id, n.seq), null::timestamptz, true
  from learn n left join scsql.learnings l on l.project_id = n.project_id and 'learning:' || l.learning_id = n.target
  where l.learning_id is null;
end
$$;
comment on function scsql._memory_learning_gone() is
  'Private, for scsql.verify_memory. Learnings the latest learn change of the memory history records that are gone (missing).';

create or replace function scsql.verify_memory()
returns table (project text, kind text, target text, problem text, expected text, found text, detail text,
               before_history boolean)
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
begin
  -- PL/pgSQL: Citus plans no query over distributed tables inside an SQL function.
  return query
  select p.name, d.kind, d.target, d.problem, d.expected, d.found, d.detail,
         coalesce(not d.recorded and d.at < (select m.applied_at from scsql.schema_migrations m where m.version = 207), false)
  from (select * from scsql._memory_fact_drift()
        union all select * from scsql._memory_source_drift()
        union all select * from scsql._memory_chunk_drift()
        union all select * from scsql._memory_decision_drift()
        union all select * from scsql._memory_loop_drift()
        union all select * from scsql._memory_learning_drift()
        union all select * from scsql._memory_learning_gone()) d
  join scsql.projects p on p.project_id = d.project_id
  order by p.name, d.kind, d.target;
end
$$;
comment on function scsql.verify_memory() is
  'Auditor (scsql verify --full, scsql restore). Every row of memory that is not what the chained memory history (scsql.memory_changes) last recorded of it, so a change made outside the API is named: facts (sha256 of the value), knowledge-base sources (content_hash, presence, pin; an archived fact''s copy by presence), chunks (their text against their chunk_hash), decisions (title and rationale, what they supersede), open loops (text, owner, source, closing and resolution), learnings (against the signed outcome they were derived from, else the summary hash their learn change recorded; rule and pattern). Returns project, kind (fact, source, chunk, decision, loop, learning), target (as memory_history names it), problem (changed, missing, unrecorded, state), expected and found (hashes or states), detail (the change the history ends with) and before_history (true for a row no change records that is older than the memory history, migration 0207: not a break). No row: memory is as its history says. Tasks have no chained record and are not compared.';
