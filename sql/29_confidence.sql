-- scsql memory: the confidence of an answer from memory. How well the hits
-- of a search (or a pack) answer its query as a whole, from evidence the
-- caller may read: the share of the query's terms the best hits hold
-- (weighted by rarity), agreement of the BM25 and vector retrievers, and
-- the margin of the best hit over the next. Bounds: sql/01_rules.sql.

select scsql._define_error(code, name, meaning) from (values
  ('SC380', 'confidence_hits_invalid', 'answer_confidence takes the hits of one search: contents, scores and ranks as arrays of the same length, at most 200 (search''s largest k).'),
  ('SC381', 'confidence_query_invalid', 'The query an answer is weighed for must be given, and at most as long as a search query (scsql_caller.query_max_chars()).')
) as t(code, name, meaning);

create or replace function scsql_caller.check_confidence_query(p_query text)
returns void
language plpgsql immutable
as $$
begin
  if p_query is null or char_length(p_query) > scsql_caller.query_max_chars() then
    raise exception using errcode = 'SC381',
      message = format('the query to weigh an answer for must be given and at most %s characters, got %s',
                       scsql_caller.query_max_chars(), coalesce(char_length(p_query)::text, 'none')),
      hint = 'Pass the query (or intent) the hits were searched for.';
  end if;
end
$$;
comment on function scsql_caller.check_confidence_query(text) is
  'For hit_coverage and answer_confidence: raises SC381 unless the query is given and at most query_max_chars characters (what search takes). Returns nothing otherwise.';

create or replace function scsql_caller.hit_coverage(p_query text, p_contents text[])
returns double precision[]
language plpgsql stable
as $$
-- Each term weighs its idf in the acting agent's project (kb_terms, as
-- the caller); a term no chunk holds weighs as the rarest one can (df 1),
-- so a distinctive word memory has never seen keeps the coverage low, and
-- in a small project (where every term is common) every term weighs alike.
declare
  v_terms text[];
  v_idf double precision[];
  v_n bigint;
  v_project bigint := scsql_caller.project_id();
begin
  perform scsql_caller.check_confidence_query(p_query);
  if coalesce(cardinality(p_contents), 0) > 200 then
    raise exception using errcode = 'SC380', message = format('hit_coverage takes at most 200 texts, got %s', cardinality(p_contents)),
      hint = 'Pass the content of each search hit (k is at most 200).';
  end if;
  select array_agg(distinct t.term) into v_terms from scsql_caller.terms(p_query) t;
  if v_terms is null or p_contents is null then
    return array_fill(0::double precision, array[coalesce(cardinality(p_contents), 0)]);
  end if;
  select st.n_chunks into v_n from scsql.memory_state st where st.project_id = v_project;
  select array_agg(coalesce(scsql_caller.bm25_idf(v_n, t.df), scsql_caller.bm25_idf(greatest(coalesce(v_n, 0), 1), 1)) order by q.term)
    into v_idf
  from unnest(v_terms) q(term)
  left join scsql.kb_terms t on t.project_id = v_project and t.term = q.term and t.df > 0;
  select array_agg(q.term order by q.term) into v_terms from unnest(v_terms) q(term);
  -- Each text's terms once (a call in the inner query would run per term).
  return array(
    select coalesce((select sum(u.idf) from unnest(v_terms, v_idf) u(term, idf) where u.term = any(c.terms)), 0)
           / nullif((select sum(x) from unnest(v_idf) x), 0)
    from (select scsql_caller.term_array(left(x.content, 8000)) as terms, x.i
          from unnest(p_contents) with ordinality x(content, i) offset 0) c
    order by c.i);
end
$$;
comment on function scsql_caller.hit_coverage(text, text[]) is
  'For each text of p_contents (the hits of a search; of each, its first 8,000 characters: a chunk holds about 1,500), the share of the query''s distinct terms it holds, each term weighted by its idf in the acting agent''s project as the caller sees it (a term found nowhere weighs as one found in a single chunk): 0 to 1, in order. Zeros for a query of only stop words, an empty array for NULL contents. Raises SC381 for a NULL query or one longer than a search query, SC380 for more than 200 texts.';

create or replace function scsql_caller.answer_confidence(
  p_query text, p_contents text[], p_scores double precision[], p_bm25_ranks integer[], p_vector_ranks integer[])
returns table (found boolean, confidence double precision, level text, reason text, hits integer,
               coverage double precision, agreement double precision, margin double precision)
language plpgsql stable
as $$
declare
  v_n integer := coalesce(cardinality(p_contents), 0);
  v_levels jsonb := scsql_caller.confidence_levels();
  v_vector boolean := exists (select from unnest(p_vector_ranks) r where r is not null);
  v_cov double precision;
  v_agree double precision;
  v_margin double precision;
  v_conf double precision;
  v_level text;
begin
  perform scsql_caller.check_confidence_query(p_query);
  if p_contents is null or v_n > 200 or cardinality(p_scores) is distinct from v_n
     or cardinality(p_bm25_ranks) is distinct from v_n or cardinality(p_vector_ranks) is distinct from v_n then
    raise exception using errcode = 'SC380',
      message = format('answer_confidence takes arrays of one length, at most 200: %s contents, %s scores, %s and %s ranks',
                       v_n, cardinality(p_scores), cardinality(p_bm25_ranks), cardinality(p_vector_ranks)),
      hint = 'Pass the content, score, bm25_rank and vector_rank of each search hit, in order.';
  end if;
  if v_n = 0 then
    return query select false, 0::double precision, 'none'::text,
      case when not exists (select from scsql_caller.terms(p_query))
           then 'the query holds only stop words or punctuation' else 'nothing in memory holds a word of the query' end,
      0, 0::double precision, null::double precision, null::double precision;
    return;
  end if;
  v_cov := (select max(x) from unnest(scsql_caller.hit_coverage(p_query, p_contents[1:3])) x);
  -- Agreement: among the best three, the share both retrievers found (only
  -- when the vector retriever ran); margin: how far the best stands out.
  v_agree := case when v_vector then
    (select avg(case when b is not null and v is not null then 1.0 else 0.0 end)
     from unnest(p_bm25_ranks[1:3], p_vector_ranks[1:3]) u(b, v)) end;
  v_margin := case when v_n = 1 or coalesce(p_scores[1], 0) <= 0 then 1
                   else greatest(least((p_scores[1] - p_scores[2]) / p_scores[1], 1), 0) end;
  v_conf := least(greatest(v_cov * (0.9 + 0.1 * coalesce(v_agree, 1)), 0), 1);
  v_level := case when v_conf >= (v_levels ->> 'high')::double precision then 'high'
                  when v_conf >= (v_levels ->> 'medium')::double precision then 'medium'
                  when v_conf >= (v_levels ->> 'low')::double precision then 'low'
                  else 'none' end;
  return query select v_level <> 'none', v_conf, v_level,
    format('the best hits hold %s%% of the query''s terms, weighted by rarity%s; %s the relevance floor %s',
           round((v_cov * 100)::numeric),
           case when v_vector then format(', %s%% found by both retrievers', round((v_agree * 100)::numeric)) else '' end,
           case when v_level <> 'none' then 'at or above' else 'below' end, v_levels ->> 'low'),
    v_n, v_cov, v_agree, v_margin;
end
$$;
comment on function scsql_caller.answer_confidence(text, text[], double precision[], integer[], integer[]) is
  'The confidence of a whole answer from memory, given the query and its hits in order (content, score, bm25_rank, vector_rank of each, as search returns them): found, confidence (0 to 1), level (high, medium, low, or none below the relevance floor: scsql_caller.confidence_levels), reason (in words), hits, and the evidence: coverage (the most of the query''s terms one of the best three hits holds, each weighted by its idf; hit_coverage), agreement (the share of the best three both retrievers found; NULL when the vector retriever did not run) and margin (how far the best score stands above the next, 0 to 1). confidence = coverage * (0.9 + 0.1 * agreement). Computed only from the hits given and the caller''s own project''s statistics, so it tells nothing of rows the caller may not read. Raises SC381 for a NULL query or one longer than a search query, SC380 for arrays of different lengths or more than 200 hits.';

create or replace function scsql.search_confidence(
  p_query text, p_k integer default 10, p_kinds text[] default null, p_trust text default null,
  p_since timestamptz default null, p_mode text default 'hybrid', p_query_embedding vector default null,
  p_model text default null)
returns table (found boolean, confidence double precision, level text, reason text, hits integer,
               coverage double precision, agreement double precision, margin double precision)
language sql stable
as $$
  select c.*
  from (select coalesce(array_agg(s.content order by s.ordinality), '{}') as contents,
               coalesce(array_agg(s.score order by s.ordinality), '{}') as scores,
               coalesce(array_agg(s.bm25_rank order by s.ordinality), '{}') as branks,
               coalesce(array_agg(s.vector_rank order by s.ordinality), '{}') as vranks
        from scsql_caller.search_own(p_query, p_k, p_kinds, p_trust, p_since, p_mode,
                                     p_query_embedding, p_model, 60, 1, 1, 1.2, 0.75, null, 'score', 0.2)
               with ordinality s) h
  cross join scsql_caller.answer_confidence(p_query, h.contents, h.scores, h.branks, h.vranks) c
$$;
comment on function scsql.search_confidence(text, integer, text[], text, timestamptz, text, vector, text) is
  'How well your project''s memory answers a query, as a whole: found (false: nothing relevant, say so rather than guess), confidence 0 to 1, level (high, medium, low, none), reason, and the evidence.

p_query: what to find (words, identifiers)
p_k (1..200): results weighed
p_kinds (file|url|note|session_summary|archived_fact|learning|fact|decision): only these kinds
p_trust (internal|external): only this trust
p_since: only items since this time
p_mode (hybrid|bm25|vector): retrievers
hidden: the search and pack tools carry it with their results

Runs search with these arguments (every tuning argument at its default; it records no use) and weighs its hits with scsql_caller.answer_confidence: found, confidence (0 to 1), level (high, medium, low; none below the relevance floor, scsql_caller.relevance_floor()), reason, hits (how many search returned), coverage (the most of the query''s terms one of the best three hits holds, weighted by rarity), agreement (the share of the best three both retrievers found; NULL without a query embedding) and margin (how far the best hit stands above the next). Over what the caller may read only: an agent of another project learns nothing from it about rows it cannot see. pack''s confidence is this for its intent with k 20. Raises like search: SC205 empty or over-long query, SC209 k or parameters out of range, SC248, SC203 unknown kind or trust, SC207 embedding of the wrong dimension.';

create or replace function scsql_caller.context_confidence(p_sections text[])
returns table (found boolean, confidence double precision, level text, reason text, hits integer,
               coverage double precision, agreement double precision, margin double precision)
language sql immutable
as $$
  -- recall_context answers no question: what it returns is the project's own
  -- context, exact, so the answer is all there is (high) or nothing (none).
  select x.n > 0, case when x.n > 0 then 1 else 0 end::double precision, case when x.n > 0 then 'high' else 'none' end,
         case when x.n > 0 then format('%s facts, open loops, decisions or session summaries of this project', x.n)
              else 'this project''s memory holds no fact, open loop, decision or session summary yet' end,
         coalesce(cardinality(p_sections), 0), null::double precision, null::double precision, null::double precision
  from (select count(*)::integer as n from unnest(p_sections) s where s in ('fact', 'open_loop', 'decision', 'session')) x
$$;
comment on function scsql_caller.context_confidence(text[]) is
  'The confidence of what recall_context returned, given the section of each row, with the columns of answer_confidence: found and level high (confidence 1) when a fact, open loop, decision or session summary came back (the project''s own context, exact: no question to be unsure of), else not found, level none, confidence 0, with the reason. coverage, agreement and margin are NULL. Raises nothing.';
