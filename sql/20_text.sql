-- scsql memory, the definitions every memory file uses, and text: normalization,
-- terms, validation and chunking. The other memory files: 21_knowledge (the
-- knowledge base), 22_facts (working memory), 23_search, 24_context (session
-- summaries, recall, packs), 25_embeddings.
--
-- Re-applied on every migrate. Writers are SECURITY DEFINER (agents have no
-- DML on these tables); readers (search, search_global, pack) run as the
-- caller, so row-level security decides what they see, and call the search
-- functions of schema scsql_caller; recall_context reads only the acting
-- agent's own project and runs as the owner.
--
-- Definitions used throughout:
--
-- * Normalized text (chunk_hash = sha256 of it, hex): Unicode NFC; zero-width
--   characters (U+200B, U+200C, U+200D, U+2060, U+FEFF) removed; CRLF and CR
--   become LF; spaces and tabs at the end of each line removed; leading and
--   trailing whitespace removed.
-- * Terms (BM25, identical at index and query time): zero-width characters
--   removed; camelCase and acronym boundaries split (verifyChain -> verify
--   Chain, HTTPServer -> HTTP Server); every run of characters that are not
--   letters or digits separates words; each word goes through PostgreSQL's
--   'english' text search configuration (lower case, Snowball stem, English
--   stop words dropped). In addition every compound token (letters, digits
--   and underscores joined by . / : -, or containing an underscore or a
--   camelCase boundary; at most 128 characters) is kept whole, in lower case,
--   unstemmed: hmac_chain.ts gives hmac_chain.ts, hmac, chain and ts. A
--   chunk's terms are those of its source path, its anchor, its context
--   (conversation only, see below) and its text.
-- * Conversation (session summaries, and spans marked "context", such as
--   the turns of a transcript): each chunk is indexed with the context it
--   needs to be found (scsql._chunk_text): the previous chunk's anchor and
--   its last 600 characters, kept in kb_chunks.context, not in the chunk's
--   text, so a short reply is found by what it answers and no text is
--   stored twice over.
-- * BM25: score(D, Q) = sum over distinct query terms t of
--   idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * |D| / avgdl)), with
--   idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)), N = chunks in the project,
--   |D| = terms in the chunk. OR semantics: a chunk matching any term scores.
--   idf and one term's score are scsql_caller.bm25_idf and bm25_term
--   (sql/23_search.sql), the only places the formula is written.
--   Postings live in kb_postings (one row per term and chunk, tf and |D|
--   in the primary key's leaf; those with tf above 1 or in a chunk of fewer
--   than 32 terms also in the partial index kb_postings_tier_idx), df,
--   max_tf and tier_min_dl in kb_terms, N and the total length in
--   memory_state; the write functions keep df, N and the length exact, and
--   max_tf and tier_min_dl bounds (never lowered, never raised).
-- * Project size (working-memory capacity): the number of chunks of kind
--   file; capacity = 100 + size / 100, at most 250.
-- * Token estimate (recall_context, pack): ceil(characters / 4).

-- Load pgvector's library now, so the hnsw.* settings that search_projects pins
-- are known parameters rather than placeholders.
select '[1]'::public.vector;

select scsql._define_error(code, name, meaning) from (values
  ('SC200', 'memory_text_too_long', 'A key, value, path, query or text is longer than scsql accepts; nothing was truncated or stored. The message gives the limit.'),
  ('SC201', 'memory_text_invalid', 'A key, value, path or text is empty or contains control characters.'),
  ('SC202', 'importance_invalid', 'Importance must be an integer from 1 to 5.'),
  ('SC203', 'source_kind_invalid', 'Source kind must be one of file, url, note, session_summary, archived_fact, learning; trust internal or external (a url is always external); tier pinned, standard or session.'),
  ('SC204', 'source_too_large', 'A source text is larger than 2 MiB; nothing was indexed. Split it, or index the parts separately.'),
  ('SC205', 'query_invalid', 'A search query is empty (or only whitespace) or longer than 2,000 characters.'),
  ('SC206', 'spans_invalid', 'The chunk spans given to index_text are not increasing, non-overlapping line ranges inside the text.'),
  ('SC207', 'embedding_invalid', 'An embedding has the wrong dimension for its model, or the model name is unknown.'),
  ('SC208', 'summary_invalid', 'A session summary must be an object with keys done, decisions, files, open_tasks (each a string or a list of strings), not all empty, at most 20,000 characters.'),
  ('SC209', 'search_argument_invalid', 'A search parameter is out of range (k 1-200, depth 1-1000, budget 50-100000, k1 > 0, b in [0, 1], weights >= 0, rrf_k >= 1, mode bm25/vector/hybrid).'),
  ('SC210', 'manifest_invalid', 'The file manifest given to index is not a list of {path, content_hash} objects with relative paths.'),
  ('SC211', 'source_path_reserved', 'index_text does not write paths that start with learning:, session:, fact:, memory: or message:, or anything that looks like them (letter case, blanks, invisible characters, accents, fullwidth forms, Cyrillic or Greek look-alike letters do not matter): they name learnings, session summaries, archived facts, working memory and broadcasts, which only scsql writes.'),
  ('SC212', 'source_not_yours', 'A session summary or a learning in the knowledge base belongs to the agent that wrote it (the learning''s author); only that agent may forget it, by path or by chunk.'),
  ('SC213', 'index_path_outside_root', 'The directory to index is not inside the project''s root_path (compared with its real path, symbolic links resolved), or is not an absolute path.'),
  ('SC214', 'index_path_secret_store', 'The directory to index is, or is inside, a store of secrets (.ssh, .gnupg, .aws, .azure, .kube, .password-store); scsql never indexes those.'),
  ('SC216', 'project_has_no_root', 'The acting agent''s project has no root directory (projects.root_path), so the index tool would not know which directory is the project''s; nothing was read. An administrator sets one (scsql up --root DIR for the default project, or scsql.set_project_root).'),
  ('SC215', 'private_key_refused', 'The text holds a PEM private key block (-----BEGIN ... PRIVATE KEY----- followed by key data); nothing was stored. Keys never belong in working memory or the knowledge base (index_text, remember, summarize_session refuse them; the index tool skips such files; a learning holding one is not indexed).'),
  ('SC225', 'embed_not_claimed', 'An embedding was offered for a chunk the acting agent holds no claim on: nobody claimed it, another agent did, it was claimed with another token or model, or it is not waiting for an embedding. Embeddings are stored only through embed_claim then embed_store; nothing was stored.'),
  ('SC226', 'embed_lease_expired', 'The lease of the claim an embedding was offered under has ended (another worker may hold the chunk now); nothing was stored. Claim again and store before the lease ends.')
) as t(code, name, meaning);

select scsql._define_error(code, name, meaning, 'client') from (values
  ('SC220', 'embed_model_invalid', 'The default embedding model is not installed at its pinned version, or its model or tokenizer file does not match the pinned sha256. Reinstall, or set SCSQL_EMBED=none.'),
  ('SC221', 'embed_unreachable', 'The Ollama server named by SCSQL_OLLAMA_URL did not answer with embeddings. Start it and pull the model, or set SCSQL_EMBED=none.'),
  ('SC223', 'index_path_protected', 'The directory to index is, or is inside, the scsql data directory (SCSQL_DATA_DIR) or the keystore (SCSQL_KEYSTORE); scsql never indexes them.'),
  ('SC224', 'index_path_unusable', 'The directory to index cannot be looked up by the operating system: its path is too long (a name over 255 bytes, the whole over 4096), holds a NUL byte, or loops through symbolic links. Nothing was read.')
) as t(code, name, meaning);

-- ---------------------------------------------------------------------------
-- Text: normalization, terms, validation
-- ---------------------------------------------------------------------------

create or replace function scsql._nfc(p_text text)
returns text
language sql immutable strict parallel safe
as $$
  -- ASCII text (most code) is in NFC already, and so is most other text:
  -- normalizing is the slow path (about 0.13 ms a kilobyte).
  select case when pg_catalog.octet_length(p_text) = pg_catalog.char_length(p_text) or p_text is nfc normalized
              then p_text else pg_catalog.normalize(p_text, 'NFC') end
$$;
comment on function scsql._nfc(text) is
  'Private. The text in Unicode normalization form C (NFC), normalized only when it is not already.';

create or replace function scsql._normalize(p_text text)
returns text
language plpgsql immutable strict parallel safe
as $$
declare
  v text := p_text;
begin
  -- Each step only where it changes something (most chunks are ASCII code
  -- without a CR or a trailing blank): NFC, zero-width characters removed,
  -- CRLF and CR to LF, trailing blanks of each line, then the text trimmed.
  if pg_catalog.octet_length(v) <> pg_catalog.char_length(v) then
    v := scsql._without_zero_width(scsql._nfc(v));
  end if;
  if pg_catalog.strpos(v, E'\r') > 0 then
    v := pg_catalog.replace(pg_catalog.replace(v, E'\r\n', E'\n'), E'\r', E'\n');
  end if;
  if pg_catalog.strpos(v, E' \n') > 0 or pg_catalog.strpos(v, E'\t\n') > 0 or pg_catalog.right(v, 1) in (' ', E'\t') then
    v := pg_catalog.regexp_replace(v, '[ \t]+(\n|$)', '\1', 'g');
  end if;
  return pg_catalog.btrim(v, E' \t\n');
end
$$;
comment on function scsql._normalize(text) is
  'Private. The normalized form of a text, whose sha256 is a chunk_hash: NFC, zero-width characters removed, CRLF/CR to LF, trailing spaces of each line and surrounding whitespace removed.';

create or replace function scsql._normalized_hash(p_normalized text)
returns text
language sql immutable strict parallel safe
as $$ select pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(p_normalized, 'UTF8')), 'hex') $$;
comment on function scsql._normalized_hash(text) is
  'Private. sha256 (hex) of a text already normalized (scsql._normalize): a chunk_hash, for a caller that has the normalized text at hand (scsql._chunk_text).';

create or replace function scsql._chunk_hash(p_text text)
returns text
language sql immutable strict parallel safe
as $$ select scsql._normalized_hash(scsql._normalize(p_text)) $$;
comment on function scsql._chunk_hash(text) is
  'Private. sha256 (hex) of the normalized text: the content address of a chunk.';

create or replace function scsql_caller.terms(p_text text)
returns table (term text, tf integer)
-- Not strict, so the planner inlines it into the query that calls it (a
-- strict set-returning SQL function is not): a NULL text has no terms
-- either way.
language sql immutable parallel safe
as $$
  with t as (
    -- Without zero-width characters (translate, the slow way, only when some are there).
    select case when pg_catalog.octet_length(p_text) = pg_catalog.char_length(p_text)
                  or p_text !~ U&'[\200B\200C\200D\2060\FEFF]' then p_text
                else pg_catalog.translate(p_text, U&'\200B\200C\200D\2060\FEFF', '') end as s
  ),
  parts as (
    select l.lexeme as term, coalesce(pg_catalog.array_length(l.positions, 1), 1) as n
    from t, pg_catalog.unnest(pg_catalog.to_tsvector('pg_catalog.english'::regconfig,
      pg_catalog.regexp_replace(
        pg_catalog.regexp_replace(
          pg_catalog.regexp_replace(t.s, '([[:lower:][:digit:]])([[:upper:]])', '\1 \2', 'g'),
          '([[:upper:]])([[:upper:]][[:lower:]])', '\1 \2', 'g'),
        '[^[:alnum:]]+', ' ', 'g'))) l
  ),
  -- The compound tokens only: a token is a run of [[:alnum:]_] with single
  -- [./:-] between runs, and it is compound when it has such a separator,
  -- an underscore or a case change. One pattern matches exactly those (a
  -- match can start only where a token starts), where matching every token
  -- and then testing each cost five times as much.
  wholes as (
    select pg_catalog.lower(m[1]) as term, 1 as n
    from t, pg_catalog.regexp_matches(t.s, '[[:alnum:]_]+(?:[./:-][[:alnum:]_]+)+|'
                                           '[[:alnum:]_]*(?:_|[[:lower:][:digit:]][[:upper:]]|[[:upper:]][[:upper:]][[:lower:]])[[:alnum:]_]*',
                                      'g') m
    where pg_catalog.char_length(m[1]) <= 128
  ),
  -- Calendar dates (2026-11-26, also inside a timestamp or a path such as
  -- session:alice/2026-11-26T10:00:00Z) are a term of their own, so a
  -- session's date finds it.
  dates as (
    select m[1] as term, 1 as n
    from t, pg_catalog.regexp_matches(t.s, '(?:^|[^[:digit:]])([12][[:digit:]]{3}-[01][[:digit:]]-[0-3][[:digit:]])(?![[:digit:]])', 'g') m
  )
  select u.term, sum(u.n)::integer
  from (select * from parts union all select * from wholes union all select * from dates) u
  group by u.term
$$;
comment on function scsql_caller.terms(text) is
  'The BM25 terms of a text with their frequencies, used identically for chunks and queries: camelCase and snake_case split, English stemming and stop words, compound tokens (paths, dotted names, snake_case, camelCase) also kept whole in lower case, and calendar dates (YYYY-MM-DD, also inside a timestamp or path) as one term.';

create or replace function scsql_caller.term_array(p_text text)
returns text[]
language plpgsql immutable strict parallel safe
as $$ begin return (select coalesce(pg_catalog.array_agg(t.term order by t.term), '{}') from scsql_caller.terms(p_text) t); end $$;
comment on function scsql_caller.term_array(text) is
  'The distinct BM25 terms of a text (scsql_caller.terms), sorted: the stored terms of a working-memory fact (memory_facts.terms), which search scores beside chunks. Raises nothing.';

create or replace function scsql._check_text(p_what text, p_value text, p_max integer, p_allow_newlines boolean default true,
                                             p_code text default null)
returns void
language plpgsql immutable
as $$
-- P_CODE, when given, is the SQLSTATE of all three errors (decide raises
-- SC235, open_loop and close_loop SC238); the messages stay the same.
begin
  -- Empty as scsql._normalize sees it: only whitespace and zero-width characters.
  if p_value is null or pg_catalog.btrim(scsql._without_zero_width(p_value), E' \t\r\n') = '' then
    raise exception using errcode = coalesce(p_code, 'SC201'), message = format('%s is empty', p_what),
      hint = format('Give a non-empty %s.', p_what);
  end if;
  if pg_catalog.char_length(p_value) > p_max then
    raise exception using errcode = coalesce(p_code, 'SC200'),
      message = format('%s is %s characters long; at most %s are allowed', p_what,
                       pg_catalog.char_length(p_value), p_max),
      hint = 'Nothing was stored or truncated. Shorten it, or index long text with index_text.';
  end if;
  if (p_allow_newlines and p_value ~ E'[\\x01-\\x08\\x0B\\x0C\\x0E-\\x1F\\x7F]')
     or (not p_allow_newlines and p_value ~ E'[\\x01-\\x1F\\x7F]') then
    raise exception using errcode = coalesce(p_code, 'SC201'),
      message = format('%s contains control characters', p_what),
      hint = case when p_allow_newlines then 'Only tabs and newlines are allowed.' else 'Use a single line of printable text.' end;
  end if;
end
$$;
comment on function scsql._check_text(text, text, integer, boolean, text) is
  'Private. Raises SC201 when a text is empty (nothing but whitespace and zero-width characters) or has control characters (newlines too unless P_ALLOW_NEWLINES), SC200 when it is longer than p_max characters; with P_CODE, that code instead of either (the same messages).';

create or replace function scsql_caller.tokens(p_text text)
returns integer
language sql immutable strict parallel safe
as $$ select ceil(pg_catalog.char_length(p_text) / 4.0)::integer $$;
comment on function scsql_caller.tokens(text) is
  'The token estimate used for budgets: ceil(characters / 4).';

-- What counts as a secret, said once for SQL and for the index tool
-- (scsql/memory/indexer.py reads both functions once per run over its connection).

create or replace function scsql_caller.secret_dirs()
returns text[]
language sql immutable parallel safe
as $$ select array['.ssh', '.gnupg', '.aws', '.azure', '.kube', '.password-store'] $$;
comment on function scsql_caller.secret_dirs() is
  'The names of directories that are stores of secrets (.ssh, .gnupg, .aws, .azure, .kube, .password-store), compared with a directory name in lower case (lower()): index_scope refuses a directory that is or lies inside one (SC214), and the index tool, which reads this list once per run, never enters one. Raises nothing.';

create or replace function scsql_caller.private_key_pattern()
returns text
language sql immutable parallel safe
as $$
  -- Whitespace is spelled out (the characters \s matches in Python), so
  -- the regular expressions of PostgreSQL and Python read this pattern alike.
  select '-----BEGIN(?: [A-Z0-9]+)* PRIVATE KEY(?: BLOCK)?-----[\t\n\v\f\r \x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+(?:[A-Za-z0-9-]+:[^\n]*[\t\n\v\f\r \x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+)*[A-Za-z0-9+/=]{16,}'::text
$$;
comment on function scsql_caller.private_key_pattern() is
  'The regular expression of a PEM private key block, one text that PostgreSQL (_holds_private_key) and Python''s re (the index tool, which reads it once per run) read alike: a line -----BEGIN <words> PRIVATE KEY----- (or PGP''s PRIVATE KEY BLOCK), whitespace, optional header lines (Proc-Type: ...), then at least 16 characters of base64 key data. Whitespace is the class Python calls \s (tab, LF, VT, FF, CR, U+001C-U+001F, space, U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000), written out. Raises nothing.';

create or replace function scsql._holds_private_key(p_text text)
returns boolean
language sql immutable strict parallel safe
as $$ select p_text ~ scsql_caller.private_key_pattern() $$;
comment on function scsql._holds_private_key(text) is
  'Private. True when a text holds a PEM private key block (scsql_caller.private_key_pattern: -----BEGIN <words> PRIVATE KEY----- or PGP''s PRIVATE KEY BLOCK, optional header lines, then at least 16 characters of base64 key data). Naming the marker alone is not a key.';

create or replace function scsql_caller.published_text(p_project bigint, p_chunk_hash text)
returns boolean
language sql stable
as $$
  -- Not inlined (it holds a sub-select), so a policy calls it row by row, for
  -- the few rows of other projects a vector search visits, rather than
  -- hashing every published chunk first.
  select exists (select from scsql.kb_chunks c
                 where c.project_id = p_project and c.chunk_hash = p_chunk_hash and c.published)
$$;
comment on function scsql_caller.published_text(bigint, text) is
  'For the row-level security of kb_embeddings, evaluated as the caller. True when a published chunk (of a file, URL or note) of the project, visible to the caller, has this text (chunk_hash).';

create or replace function scsql._skeleton(p_text text)
returns text
language sql immutable strict parallel safe
as $$
  -- Compatibility forms (fullwidth, mathematical letters) first; capital
  -- look-alikes of Latin letters become those letters before the case fold
  -- (Greek capital Eta looks like H, its small letter like n), small ones
  -- after it; accents, invisible characters and blanks go; i, I, 1 and | all
  -- become l, 0 becomes o, rn becomes m, colon look-alikes become ":".
  select pg_catalog.replace(
           pg_catalog.translate(
             pg_catalog.regexp_replace(
               pg_catalog.normalize(
                 pg_catalog.lower(pg_catalog.translate(pg_catalog.normalize(p_text, 'NFKC'),
                   U&'\0410\0412\0421\0415\0401\041D\0406\0407\0408\041A\041C\041E\0420\051A\0405\0422\0423\0425\051C\04C0\04AE\050C\0391\0392\0395\0396\0397\0399\039A\039C\039D\039F\03A1\03A4\03A5\03A7\03F9\037F\0555\054D\13AA\13DF\13AC\13C0\13DE\13B7\13D2\13DA\13A2I',
                   'abceehlljkmopqstyxwlygabezhlkmnoptyxcjouaceglmrstl')),
                 'NFD'),
               '[[:space:]\x01-\x1f\x7f-\x9f\u00a0\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u2000-\u200f\u2028-\u202f\u205f-\u206f\u3000\u3164\ufe00-\ufe0f\ufeff\uffa0\U000e0000-\U000e0fff\u0300-\u036f\u0483-\u0489\u0591-\u05bd\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]',
               '', 'g'),
             U&'\0430\0432\0441\0501\0435\0451\04BB\0456\0457\0458\043A\043C\043F\043E\0440\051B\0433\0455\0442\0443\0445\051D\04CF\0261\04AF\04BD\050D\03B1\03B2\03B5\03B7\03B9\03BA\03BD\03BF\03C1\03C4\03C5\03C7\03B3\03F2\03F3\025B\03C2\03C3\0131\0269\01C0\026A\029F\0142\0251\1D00\1D04\1D07\0262\1D0D\0274\1D0F\0280\A731\1D1B\028F\027E\A7B5\017F\AB35\0585\0578\057D\0581\AB7A\ABAF\AB7C\AB90\ABAE\AB87\ABA2\ABAA\AB72i1|0\02D0\0589\05C3\A789\2236\02F8\FE13\FE55\FF1A\1804',
             'abcdeehlljkmnopqrstyxwlgyegabenlkvoptuxycjecollllllaacegmnorstyrbsfonugaceglmrstlllo::::::::::'),
           'rn', 'm')
$$;
comment on function scsql._skeleton(text) is
  'Private. The confusable skeleton of a text, for comparing it with reserved words: NFKC, lower case, accents (combining marks), blanks and invisible characters (zero-width, bidirectional controls, variation selectors, tags) removed, and Cyrillic, Greek, Armenian, Cherokee and Latin small-capital or IPA look-alikes of Latin letters mapped to them; i, I, 1 and | all become l, 0 becomes o, rn becomes m, colon look-alikes become ":". Two texts that look alike have the same skeleton; the converse does not hold (it is coarse on purpose).';

create or replace function scsql._reserved_path(p_path text)
returns boolean
language sql immutable strict parallel safe
as $$
  select scsql._skeleton(p_path) ~ ('^(' || (select pg_catalog.string_agg(scsql._skeleton(w), '|')
                                            from pg_catalog.unnest(array['learning', 'session', 'fact', 'memory', 'message']) w)
                                    || '):')
$$;
comment on function scsql._reserved_path(text) is
  'Private. True for source paths only scsql writes, and for anything that looks like one: learning:<id> (learnings), session:<agent>/<time> (session summaries), fact:<key> (archived facts), and memory: and message:, which pack and recall_context use to cite working memory and broadcasts. Compared on confusable skeletons (see _skeleton), so letter case, blanks, invisible characters, accents, fullwidth forms and Cyrillic or Greek look-alikes (lеarning: with U+0435) do not matter.';

-- ---------------------------------------------------------------------------
-- Chunking
-- ---------------------------------------------------------------------------

create or replace function scsql._chunk_context(p_given text, p_first boolean, p_prev_anchor text, p_prev_content text,
                                                 p_anchor text)
returns text
language plpgsql immutable parallel safe
as $$
-- P_GIVEN is the section's context: NULL (none), a text (the context of
-- its first chunk, P_FIRST) or '' (the end of the previous chunk: its last
-- 600 characters, from the first line start among them (in their first
-- half) or else the first word start (in their first 100 characters), below
-- the previous chunk's anchor when that is not the chunk's own anchor and
-- not in the tail already).
declare
  v_t text;
  v_i integer;
begin
  if p_given is null then
    return null;
  elsif p_first and p_given <> '' then
    return p_given;
  elsif p_prev_content is null then
    return null;
  end if;
  v_t := pg_catalog.right(p_prev_content, 600);
  if pg_catalog.char_length(p_prev_content) > 600 then
    v_i := pg_catalog.strpos(v_t, E'\n');
    if v_i between 1 and 300 then
      v_t := pg_catalog.substr(v_t, v_i + 1);
    else
      v_i := pg_catalog.strpos(v_t, ' ');
      if v_i between 1 and 100 then
        v_t := pg_catalog.substr(v_t, v_i + 1);
      end if;
    end if;
  end if;
  v_t := pg_catalog.btrim(v_t, E' \t\n');
  return nullif(concat_ws(E'\n',
    case when p_prev_anchor is distinct from p_anchor and pg_catalog.strpos(v_t, p_prev_anchor) = 0 then p_prev_anchor end,
    nullif(v_t, '')), '');
end
$$;
comment on function scsql._chunk_context(text, boolean, text, text, text) is
  'Private. The context a chunk is indexed with (scsql._chunk_text), given its section''s P_GIVEN: NULL, none; a text, that text for the section''s first chunk (P_FIRST); otherwise the previous chunk''s anchor (unless it is P_ANCHOR, the chunk''s own, or appears in the tail) above the previous chunk''s last 600 characters (starting at a line, else a word, boundary), NULL when there is no previous chunk.';

create or replace function scsql._chunk_span_sections(p_spans jsonb, p_lines integer, p_context boolean)
returns table (line_start integer, line_end integer, anchor text, context text)
language plpgsql immutable
as $$
declare
  v_span jsonb;
  v_s integer;
  v_e integer;
  v_prev_end integer := 0;
begin
  if pg_catalog.jsonb_typeof(p_spans) <> 'array' or pg_catalog.jsonb_array_length(p_spans) > 100000 then
    raise exception using errcode = 'SC206', message = 'spans must be a JSON array of {start, end, anchor}';
  end if;
  for v_span in select value from pg_catalog.jsonb_array_elements(p_spans) loop
    if pg_catalog.jsonb_typeof(v_span) <> 'object'
       or pg_catalog.jsonb_typeof(v_span -> 'start') is distinct from 'number'
       or pg_catalog.jsonb_typeof(v_span -> 'end') is distinct from 'number'
       or (v_span ? 'anchor' and pg_catalog.jsonb_typeof(v_span -> 'anchor') not in ('string', 'null'))
       or (v_span ? 'context' and pg_catalog.jsonb_typeof(v_span -> 'context') not in ('string', 'boolean', 'null'))
       or pg_catalog.char_length(v_span ->> 'context') > 1000 then
      raise exception using errcode = 'SC206',
        message = format('bad span %s: expected {"start": line, "end": line, "anchor": text, "context": true or a text of at most 1,000 characters}',
                         pg_catalog.left(v_span::text, 300));
    end if;
    begin
      v_s := (v_span ->> 'start')::integer;
      v_e := (v_span ->> 'end')::integer;
    exception when others then
      raise exception using errcode = 'SC206', message = format('bad span %s: line numbers must be integers', v_span);
    end;
    if v_s <= v_prev_end or v_e < v_s or v_e > p_lines then
      raise exception using errcode = 'SC206',
        message = format('span %s-%s is not after line %s and inside the text''s %s lines', v_s, v_e, v_prev_end, p_lines);
    end if;
    line_start := v_s;
    line_end := v_e;
    anchor := pg_catalog.left(v_span ->> 'anchor', 200);
    context := case when pg_catalog.jsonb_typeof(v_span -> 'context') = 'string' then scsql._normalize(v_span ->> 'context')
                    when (v_span -> 'context') = 'true'::jsonb or p_context then '' end;
    return next;
    v_prev_end := v_e;
  end loop;
end
$$;
comment on function scsql._chunk_span_sections(jsonb, integer, boolean) is
  'Private, for scsql._chunk_text. The sections a text of LINES lines is chunked in, from the line spans given ([{start, end, anchor, context}]), in order: first and last line, anchor (at most 200 characters) and context (NULL none; '''' the previous chunk''s, for spans with "context": true or every span with P_CONTEXT; else the span''s context text, normalized). Raises SC206 for spans that are not increasing, non-overlapping line ranges inside the text, or malformed.';

create or replace function scsql._chunk_heading_sections(p_lines text[], p_context boolean)
returns table (line_start integer, line_end integer, anchor text, context text)
language sql immutable parallel safe
as $$
  -- A heading is a Markdown heading line outside fenced code blocks: one
  -- before which an even number of fence lines (``` or ~~~) opened and closed.
  with l as (
    select u.i::integer as i, u.line, u.line ~ '^#{1,6}[ \t]+\S' as heading,
           coalesce(sum(case when u.line ~ '^[ \t]*(```|~~~)' then 1 else 0 end)
                      over (order by u.i rows between unbounded preceding and 1 preceding), 0) % 2 = 1 as fenced
    from pg_catalog.unnest(p_lines) with ordinality u(line, i)
  ), s as (
    select l.i, case when l.heading and not l.fenced
                     then pg_catalog.left(pg_catalog.btrim(pg_catalog.regexp_replace(l.line, '^#{1,6}[ \t]+|[ \t]+#+[ \t]*$', '', 'g')), 200)
                end as anchor
    from l where l.i = 1 or (l.heading and not l.fenced)
  )
  select s.i, coalesce(pg_catalog.lead(s.i) over (order by s.i) - 1, pg_catalog.cardinality(p_lines)), s.anchor,
         case when p_context then '' end
  from s order by s.i
$$;
comment on function scsql._chunk_heading_sections(text[], boolean) is
  'Private, for scsql._chunk_text. The sections of a text given as its LINES, cut before each Markdown heading outside fenced code blocks, in order: first and last line, anchor (the heading''s text, at most 200 characters; NULL for text before the first heading) and context ('''', the previous chunk''s, with P_CONTEXT; else NULL).';

create or replace function scsql._last_blank_lines(p_lines text[])
returns integer[]
language sql immutable
as $$
  select array(select max(u.i) filter (where pg_catalog.btrim(u.line, E' \t\r') = '') over (order by u.i)
               from pg_catalog.unnest(p_lines) with ordinality u(line, i) order by u.i)
$$;
comment on function scsql._last_blank_lines(text[]) is
  'Private, for scsql._chunk_pieces. For each line i of LINES, the last blank line (spaces, tabs and CR only) at or before it; NULL before the first.';

create or replace function scsql._first_line_over(p_off integer[], p_from integer, p_to integer, p_max integer)
returns integer
language plpgsql immutable
as $$
-- Found by halving: the offsets grow line by line.
declare
  v_lo integer := p_from;
  v_hi integer := p_to + 1;
  v_mid integer;
begin
  while v_lo < v_hi loop
    v_mid := (v_lo + v_hi) / 2;
    if p_off[v_mid + 1] - 1 - p_off[p_from] <= p_max then v_lo := v_mid + 1; else v_hi := v_mid; end if;
  end loop;
  return v_lo;
end
$$;
comment on function scsql._first_line_over(integer[], integer, integer, integer) is
  'Private, for scsql._chunk_pieces. The first line from FROM to TO whose end lies more than MAX characters after the start of line FROM (OFF[i]: the 0-based offset of line i), or TO + 1 when all fit.';

create or replace function scsql._chunk_pieces(p_content text, p_lines text[], p_off integer[], p_start integer[], p_end integer[],
                                               p_max integer)
returns table (section integer, line_start integer, line_end integer, char_start integer, char_end integer,
               content text, normalized text)
language plpgsql immutable
as $$
-- P_OFF[i] is the 0-based character offset of line i, P_OFF[n+1] the text's
-- length + 1; section j runs from line P_START[j] to line P_END[j].
declare
  v_s integer;
  v_i integer;
  v_cut integer;
  v_blank integer;
  v_piece integer;
  v_last_blank integer[];  -- v_last_blank[i]: the last blank line at or before line i (made when first needed)
begin
  for v_j in 1 .. coalesce(pg_catalog.array_length(p_start, 1), 0) loop
    section := v_j;
    v_s := p_start[v_j];
    while v_s <= p_end[v_j] loop
      -- Longest run of whole lines from v_s that fits in p_max: up to v_i - 1.
      v_i := scsql._first_line_over(p_off, v_s, p_end[v_j], p_max);
      -- Its last blank line after v_s that leaves at least p_max/3 characters
      -- (the offsets grow: if the last blank line leaves fewer, all do).
      v_blank := null;
      if v_i <= p_end[v_j] and v_i > v_s + 1 then
        v_last_blank := coalesce(v_last_blank, scsql._last_blank_lines(p_lines));
        v_blank := v_last_blank[v_i - 1];
        if v_blank <= v_s or p_off[v_blank] - p_off[v_s] < p_max / 3 then
          v_blank := null;
        end if;
      end if;
      if v_i = v_s then
        -- One line longer than p_max: pieces of p_max characters.
        line_start := v_s;
        line_end := v_s;
        v_piece := 0;
        while v_piece * p_max < pg_catalog.char_length(p_lines[v_s]) loop
          content := pg_catalog.substr(p_lines[v_s], v_piece * p_max + 1, p_max);
          normalized := scsql._normalize(content);
          char_start := p_off[v_s] + v_piece * p_max;
          char_end := char_start + pg_catalog.char_length(content);
          if normalized <> '' then
            return next;
          end if;
          v_piece := v_piece + 1;
        end loop;
        v_s := v_s + 1;
        continue;
      end if;
      v_cut := case when v_i > p_end[v_j] then p_end[v_j]      -- the rest fits
                    when v_blank is not null then v_blank - 1  -- the blank line itself starts no chunk
                    else v_i - 1 end;
      -- Blank lines at either end are not part of the chunk.
      line_start := v_s;
      line_end := v_cut;
      while line_end > line_start and pg_catalog.btrim(p_lines[line_end], E' \t\r') = '' loop
        line_end := line_end - 1;
      end loop;
      while line_start < line_end and pg_catalog.btrim(p_lines[line_start], E' \t\r') = '' loop
        line_start := line_start + 1;
      end loop;
      char_start := p_off[line_start];
      char_end := p_off[line_end + 1] - 1;
      -- Its lines joined, one by one: substr would count characters from the
      -- text's start, and a slice copies the whole array of lines first.
      content := p_lines[line_start];
      for v_k in line_start + 1 .. line_end loop
        content := content || E'\n' || p_lines[v_k];
      end loop;
      normalized := scsql._normalize(content);
      if normalized <> '' then
        return next;
      end if;
      v_s := case when v_i <= p_end[v_j] and v_blank is not null then v_blank + 1 else v_cut + 1 end;
    end loop;
  end loop;
end
$$;
comment on function scsql._chunk_pieces(text, text[], integer[], integer[], integer[], integer) is
  'Private, for scsql._chunk_text. The pieces of a text (CONTENT, its LINES and their character offsets OFF) that hold more than whitespace, section by section (lines START[j] to END[j]), in order: the longest run of whole lines that fits in MAX characters, cut at its last blank line that leaves at least MAX/3 characters, without blank lines at either end; a line longer than MAX is cut into MAX-character pieces. Each with its section, 1-based line span, 0-based character span [start, end), text and normalized text (scsql._normalize).';

create or replace function scsql._chunk_text(p_content text, p_spans jsonb default null, p_max integer default scsql_caller.chunk_chars(),
                                             p_context boolean default false)
returns table (seq integer, anchor text, line_start integer, line_end integer,
               char_start integer, char_end integer, content text, chunk_hash text, context text)
language plpgsql immutable
as $$
-- Sections come from p_spans ([{start, end, anchor}], 1-based inclusive
-- line numbers, increasing and non-overlapping; lines outside every span are
-- not indexed) or, without spans, from Markdown headings outside fenced code
-- blocks (text before the first heading is a section without anchor). A
-- section longer than p_max characters is cut at its last blank line that
-- leaves at least p_max/3 characters, else before the line that overflows; a
-- single line longer than p_max is cut into p_max-character pieces.
--
-- Conversation (a span with "context", or every section with p_context):
-- each chunk also gets a context, the text it needs to be found that is
-- not in it (a reply such as "yes, do that" names nothing it is about):
-- the previous chunk's anchor and end (scsql._chunk_context). A span's
-- "context" is true, or a text (at most 1,000 characters) that is the
-- context of its first chunk instead (what came before it in another
-- source); the span's later chunks get the previous chunk's end. The
-- context is not part of the chunk's text, hash or line and character
-- spans: the writer indexes it with the chunk (terms, embedding input).
declare
  v_lines text[] := pg_catalog.string_to_array(p_content, E'\n');
  v_off integer[];             -- v_off[i] = 0-based character offset of line i; v_off[n+1] = length + 1
  v_start integer[];
  v_end integer[];
  v_anchor text[];
  v_ctx text[];                -- per section: NULL no context, '' the previous chunk's, else that text first
begin
  v_off := array(select coalesce(sum(pg_catalog.char_length(u.line) + 1)
                                   over (order by u.i rows between unbounded preceding and 1 preceding), 0)::integer
                 from pg_catalog.unnest(v_lines || null::text) with ordinality u(line, i) order by u.i);
  if p_spans is not null then
    select array_agg(s.line_start order by s.n), array_agg(s.line_end order by s.n),
           array_agg(s.anchor order by s.n), array_agg(s.context order by s.n)
      into v_start, v_end, v_anchor, v_ctx
    from scsql._chunk_span_sections(p_spans, coalesce(pg_catalog.array_length(v_lines, 1), 0), p_context)
         with ordinality s(line_start, line_end, anchor, context, n);
  else
    select array_agg(s.line_start order by s.n), array_agg(s.line_end order by s.n),
           array_agg(s.anchor order by s.n), array_agg(s.context order by s.n)
      into v_start, v_end, v_anchor, v_ctx
    from scsql._chunk_heading_sections(v_lines, p_context) with ordinality s(line_start, line_end, anchor, context, n);
  end if;
  -- A chunk's context is made from the chunk before it, in any section.
  return query
    select (pg_catalog.row_number() over w)::integer, v_anchor[p.section], p.line_start, p.line_end, p.char_start, p.char_end,
           p.content, pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(p.normalized, 'UTF8')), 'hex'),
           case when v_ctx[p.section] is not null then
             scsql._chunk_context(v_ctx[p.section], p.section is distinct from pg_catalog.lag(p.section) over w,
                                  pg_catalog.lag(v_anchor[p.section]) over w, pg_catalog.lag(p.content) over w,
                                  v_anchor[p.section]) end
    from scsql._chunk_pieces(p_content, v_lines, v_off, v_start, v_end, p_max)
           with ordinality p(section, line_start, line_end, char_start, char_end, content, normalized, n)
    window w as (order by p.n)
    order by p.n;
end
$$;
comment on function scsql._chunk_text(text, jsonb, integer, boolean) is
  'Private. Splits a text into chunks: by the given line spans, else by Markdown headings; sections longer than p_max characters are cut at blank lines, then at line ends. Returns each chunk with anchor, 1-based line span, 0-based character span [start, end), text, chunk_hash and context: for conversation (spans with "context": true or a text, or every section with P_CONTEXT) the text the chunk is indexed with besides its own (scsql._chunk_context: the previous chunk''s anchor and end; a span''s context text for its first chunk), else NULL. Raises SC206 for bad spans (a context other than true, false or a text of at most 1,000 characters).';

