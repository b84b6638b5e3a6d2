-- The rules the client applies before it asks the database, defined once,
-- here: the database enforces them with these functions, and the Python
-- layer reads them (scsql_caller.rules(), once per connection; see
-- scsql/core/rules.py) instead of writing them again.

create or replace function scsql_caller.redaction_prefilter()
returns text
language sql immutable parallel safe
as $$
  -- The words without which scsql.redact returns a text as it is, also met
  -- where they may hide (a quoted -p option, percent-encoding, zero-width
  -- characters); compared case-insensitively. Written so that PostgreSQL's
  -- and Python's regular expressions read it alike.
  select '(key|secret|token|passw|pwd|pass|credential|akia|asia|gh[pousr]_|github_pat_|sk-|xox|xapp-|hooks\.slack|eyj|bearer|basic|://|private key|-p[\x22\x27]|%[0-9a-f]{2}|[\u200b\u200c\u200d\u2060\ufeff])'::text
$$;
comment on function scsql_caller.redaction_prefilter() is
  'The first test of scsql.redact, a regular expression compared case-insensitively: a text that does not match it holds nothing redaction would change (the words a secret is found by, percent-encoding and zero-width characters that can hide them). The client reads it (scsql_caller.rules) to sign such a text without asking the database. Raises nothing.';

create or replace function scsql_caller.query_max_chars()
returns integer
language sql immutable parallel safe
as $$ select 2000 $$;
comment on function scsql_caller.query_max_chars() is
  'The longest search query, in characters (search refuses a longer one with SC205; pack takes a longer intent). Raises nothing.';

create or replace function scsql_caller.index_max_bytes()
returns integer
language sql immutable parallel safe
as $$ select 2097152 $$;
comment on function scsql_caller.index_max_bytes() is
  'The largest text indexed as one source, in bytes: 2 MiB (index_text refuses a larger one with SC204; the index tool skips a larger file). Raises nothing.';

create or replace function scsql_caller.chunk_chars()
returns integer
language sql immutable parallel safe
as $$ select 1500 $$;
comment on function scsql_caller.chunk_chars() is
  'About how many characters a chunk of an indexed text holds (scsql._chunk_text cuts at headings and blank lines within it). Raises nothing.';

create or replace function scsql_caller.confidence_levels()
returns jsonb
language sql immutable parallel safe
as $$
  -- Calibrated with scsql bench confidence (answerable and unanswerable
  -- questions over one corpus): low is the relevance floor.
  select '{"low": 0.36, "medium": 0.55, "high": 0.8}'::jsonb
$$;
comment on function scsql_caller.confidence_levels() is
  'The bounds of the confidence levels of an answer from memory (search_confidence, the search, pack and recall_context tools): low from the first, medium from the second, high from the third; below low the level is none and nothing relevant was found. low is the relevance floor, the one bound UserPromptSubmit recall and the tools apply too. Raises nothing.';

create or replace function scsql_caller.relevance_floor()
returns double precision
language sql immutable parallel safe
as $$ select (scsql_caller.confidence_levels() ->> 'low')::double precision $$;
comment on function scsql_caller.relevance_floor() is
  'The relevance floor: the confidence (0 to 1) an answer from memory must reach to count as found, the low bound of confidence_levels. Raises nothing.';

create or replace function scsql_caller.rules()
returns jsonb
language plpgsql immutable parallel safe
as $$
begin
  return jsonb_build_object(
    'redaction_prefilter', scsql_caller.redaction_prefilter(),
    'private_key_pattern', scsql_caller.private_key_pattern(),
    'secret_dirs', to_jsonb(scsql_caller.secret_dirs()),
    'query_max_chars', scsql_caller.query_max_chars(),
    'index_max_bytes', scsql_caller.index_max_bytes(),
    'chunk_chars', scsql_caller.chunk_chars(),
    'confidence_levels', scsql_caller.confidence_levels());
end
$$;
comment on function scsql_caller.rules() is
  'Every rule the client applies as the database does, in one object, read once per connection: redaction_prefilter, private_key_pattern (regular expressions PostgreSQL and Python read alike), secret_dirs, query_max_chars, index_max_bytes, chunk_chars, confidence_levels (the relevance floor and the bounds of the confidence levels). Raises nothing.';

-- BM25's parameters and mean chunk length (the formula: sql/20_text.sql),
-- defined here once: search validates k1 and b with these bounds, the
-- bm25 helpers check them again, and every score reads avgdl from here.

create or replace function scsql_caller.bm25_params_valid(p_k1 double precision, p_b double precision)
returns boolean
language sql immutable parallel safe
as $$
  -- Below b = 1e-6 (other than 0) a score underflows double precision.
  select coalesce(p_k1 between 0.001 and 10 and p_b between 0 and 1 and not (p_b > 0 and p_b < 1e-6), false)
$$;
comment on function scsql_caller.bm25_params_valid(double precision, double precision) is
  'Whether BM25''s k1 and b are in range: k1 0.001 to 10, b 0 or 1e-6 to 1 (false for NULL or NaN). search raises SC209 and the bm25 helpers SC209 otherwise. One SQL expression, inlined where it is called. Raises nothing.';

create or replace function scsql_caller.bm25_avgdl(p_total_len bigint, p_n bigint)
returns double precision
language sql immutable parallel safe
as $$ select greatest(coalesce(p_total_len, 0)::double precision / greatest(coalesce(p_n, 0), 1), 1) $$;
comment on function scsql_caller.bm25_avgdl(bigint, bigint) is
  'BM25''s mean chunk length avgdl: p_total_len terms over p_n chunks, at least 1 (also for no chunks or NULL), so a score never divides by 0. One SQL expression, inlined where it is called. Raises nothing.';
