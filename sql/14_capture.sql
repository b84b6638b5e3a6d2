-- 14 capture: what the Claude Code hooks write and ask (scsql/hooks/handlers.py).
-- Sessions keyed by the client's session id, prompts, tool calls with the
-- files they touched, event keys that make a replay add nothing, and the
-- one question PreToolUse asks: check_tool_use.

select scsql._define_error(code, name, meaning) from (values
  ('SC140', 'event_key_invalid',    'A capture event key is empty or longer than 200 characters.'),
  ('SC141', 'session_source_invalid', 'A session source must be startup, resume, clear, compact, import or hook.'),
  ('SC142', 'learning_unknown',     'No learning with that id in the agent''s project.'),
  ('SC143', 'rule_pattern_invalid', 'A learning rule''s pattern is not a valid regular expression, or is longer than 1000 characters.'),
  ('SC144', 'rule_not_allowed',     'Only the author of a learning or an orchestrator role may make it a rule.'),
  ('SC145', 'tool_input_invalid',   'A tool name is empty or a tool input is not a JSON object.'),
  ('SC146', 'transcript_session_unknown', 'No session of the acting agent with that id: a transcript cursor belongs to one of your sessions.'),
  ('SC147', 'transcript_cursor_invalid',  'A transcript cursor must be 1 to 200 characters, and its parts and messages may only grow.'),
  ('SC150', 'altered_invalid',      'A captured row''s altered object names a field the row does not have, or a mark capture does not make.'),
  ('SC151', 'event_too_large',      'A hook event was too large to parse or to shrink; it was stored as a stub with its size and sha256.')
) as t(code, name, meaning);

-- Sessions and tool calls are chained with their appended fields in 11_audit.sql.
select scsql._make_chained('scsql.prompts', array['session_id', 'text', 'imported', 'occurred_at'], array['prompt_id'],
  array['altered']);

-- ---------------------------------------------------------------------------
-- Storable text: what capture stores is redacted, then bounded
-- ---------------------------------------------------------------------------

create or replace function scsql.column_bounds()
returns table (table_name text, column_name text, max_chars integer)
language sql stable set search_path = pg_catalog, scsql, pg_temp
as $$
  select c.relname::text, m[1], min(m[2]::integer)
  from pg_catalog.pg_constraint k
  join pg_catalog.pg_class c on c.oid = k.conrelid and not c.relispartition
  join pg_catalog.pg_namespace n on n.oid = c.relnamespace and n.nspname = 'scsql'
  cross join lateral regexp_matches(pg_catalog.pg_get_constraintdef(k.oid), 'char_length\((\w+)\) <= (\d+)', 'g') m
  where k.contype = 'c'
  group by 1, 2
$$;
comment on function scsql.column_bounds() is
  'The most characters each bounded text column of scsql''s tables holds, read from their check constraints.

hidden: clients read it once per connection to bound what they store

A client bounds what it stores by the same numbers the database enforces (char_length(column) <= N). Returns table_name, column_name, max_chars. Raises nothing.';

create or replace function scsql._word_break(p_char text)
returns boolean
language sql immutable parallel safe
as $$ select p_char ~ ('[][(){}<>"'',;|`[:space:]' || chr(160) || chr(8232) || chr(8233) || ']') $$;
comment on function scsql._word_break(text) is
  'Private. Whether character P_CHAR ends a word for clipping: whitespace, quotes, brackets and list separators, none of which occurs inside a token, key, JWT or URL with a password.';

create or replace function scsql._clip(p_text text, p_limit integer, p_length integer default null)
returns text
language sql immutable parallel safe
as $$
  with whole as (select greatest(coalesce(p_length, 0), char_length(p_text)) as len),
       room as (select greatest(0, p_limit - char_length(format(' [... %s characters cut]', len))) as n from whole),
       cut as (
         select case when scsql._word_break(substr(p_text, n + 1, 1)) or scsql._word_break(substr(p_text, n, 1))
                     then left(p_text, n)
                     else coalesce(substring(left(p_text, n) from ('^(.*[][(){}<>"'',;|`[:space:]' || chr(160) || chr(8232) || chr(8233) || '])')), '')
                end as head
         from room)
  select case when p_text is null or (char_length(p_text) <= p_limit and coalesce(p_length, 0) <= char_length(p_text))
              then p_text
              else head || format(' [... %s characters cut]', len - char_length(head)) end
  from cut, whole
$$;
comment on function scsql._clip(text, integer, integer) is
  'Private: scsql.clip without its checks, for capture''s own bounds. Raises nothing.';

create or replace function scsql.clip(p_text text, p_limit integer, p_length integer default null)
returns text
language plpgsql immutable parallel safe security definer set search_path = pg_catalog, scsql, pg_temp
as $$
begin
  if p_limit is null or p_limit not between 30 and 100000000 or p_length < 0 then
    raise exception using errcode = 'SC010', message = 'limit must be 30 to 100,000,000 characters and length at least 0';
  end if;
  return scsql._clip(p_text, p_limit, p_length);
end
$$;
comment on function scsql.clip(text, integer, integer) is
  'Cuts text to at most a limit where a word ends, marked " [... N characters cut]", so a secret is kept whole or not at all.

p_text: the text
p_limit (30..100000000): characters at most, the mark included
p_length (0..): characters of the whole text when p_text is already a cut part of it, for the count
hidden: capture bounds what it stores with it

Returns p_text as it is when it fits; NULL for NULL. Raises SC010 for a limit out of range or a negative length.';

create or replace function scsql._storable(p_text text, p_limit integer, p_length integer,
                                           out stored text, out clipped boolean)
language plpgsql immutable parallel safe
as $$
declare
  v_redacted text;
begin
  clipped := false;
  stored := p_text;
  if p_text is null then
    return;
  end if;
  if pg_catalog.octet_length(stored) > 2097152 then
    stored := left(stored, p_limit + 8192);
    clipped := true;
  end if;
  for i in 1 .. 3 loop
    v_redacted := scsql._redact(stored);
    stored := scsql._clip(v_redacted, p_limit, case when i = 1 then p_length end);
    clipped := clipped or stored is distinct from v_redacted;
    if scsql._redact(stored) = stored then
      return;
    end if;
  end loop;
  stored := left(format('[withheld: no redacted form within %s characters]', p_limit), p_limit);
  clipped := true;
end
$$;
comment on function scsql._storable(text, integer, integer) is
  'Private. TEXT as capture stores it in a column of LIMIT characters: redacted, then clipped (scsql.clip), until redaction changes it no more (at most three rounds; else a short withheld marker); clipped says whether it was cut. Raises nothing.';

create or replace function scsql.storable(p_texts text[], p_limits integer[], p_lengths integer[] default null,
                                          out texts text[], out clipped boolean[])
language plpgsql immutable parallel safe security definer set search_path = pg_catalog, scsql, pg_temp
as $$
begin
  if cardinality(p_texts) is distinct from cardinality(p_limits)
     or (p_lengths is not null and cardinality(p_lengths) is distinct from cardinality(p_texts))
     or exists (select from unnest(p_limits) n where n is null or n not between 30 and 100000000)
     or exists (select from unnest(p_lengths) n where n < 0) then
    raise exception using errcode = 'SC010',
      message = 'texts, limits and lengths must be arrays of one length, each limit 30 to 100,000,000 characters';
  end if;
  select coalesce(array_agg(s.stored order by i), '{}'), coalesce(array_agg(s.clipped order by i), '{}')
    into texts, clipped
  from unnest(p_texts, p_limits, coalesce(p_lengths, array_fill(null::integer, array[cardinality(p_texts)])))
         with ordinality u(t, n, len, i),
       scsql._storable(t, n, len) s;
end
$$;
comment on function scsql.storable(text[], integer[], integer[]) is
  'Each text as a signed write may store it: redacted, then clipped where a word ends to its column''s bound.

p_texts (array): the texts
p_limits (array): the bound of each text''s column (scsql.column_bounds), 30..100000000
p_lengths (array): the characters of each whole text when only its start is sent, for the cut mark
hidden: the Claude Code hooks bound what they capture with it

Clipping after redaction never keeps part of a secret, and the stored text never exceeds its bound (scsql.clip). Returns texts, and clipped: true where a text was cut (or withheld) rather than only redacted. Raises SC010 for arrays of different lengths or a limit out of range.';

create or replace function scsql._require_altered(p_altered jsonb, p_fields text[])
returns void
language plpgsql immutable parallel safe
as $$
begin
  if p_altered is null then
    return;
  end if;
  if jsonb_typeof(p_altered) <> 'object' or exists (
      select from jsonb_each(p_altered) e
      where not (e.key = 'stub' and jsonb_typeof(e.value) = 'object' and e.value ? 'code')
        and not (e.key = any (p_fields) and jsonb_typeof(e.value) = 'object'
                 and not exists (select from jsonb_object_keys(e.value) m
                                 where m not in ('replaced', 'clipped', 'bytes', 'sha256', 'hashed')))) then
    raise exception using errcode = 'SC150',
      message = format('altered must be an object of %s or stub, each an object of replaced, clipped, bytes, sha256, hashed',
                       array_to_string(p_fields, ', ')),
      hint = 'scsql/hooks/storable.py writes it';
  end if;
end
$$;
comment on function scsql._require_altered(jsonb, text[]) is
  'Private, for the capture writers: raises SC150 unless ALTERED is NULL or an object whose keys are among FIELDS (each an object of the marks replaced, clipped, bytes, sha256, hashed) or stub (an object with a code).';

create or replace function scsql._tool_use_key(p_tool_use_id text)
returns text
language sql immutable parallel safe
as $$ select 'tool:' || p_tool_use_id $$;
comment on function scsql._tool_use_key(text) is
  'Private. The capture event key that a tool call''s tool_use_id claims (the column holds at most 190 characters; a longer id is stored as its sha256, so the key stays within 200).';

-- ---------------------------------------------------------------------------
-- Event keys
-- ---------------------------------------------------------------------------

create or replace function scsql._capture_key(p_project bigint, p_agent bigint, p_key text)
returns boolean
language plpgsql
as $$
declare
  v_new integer;
begin
  if p_key is null then
    return true;
  end if;
  if char_length(p_key) not between 1 and 200 then
    raise exception using errcode = 'SC140',
      message = format('event key must be 1 to 200 characters, got %s', char_length(p_key));
  end if;
  insert into scsql.capture_events (project_id, event_key, agent_id) values (p_project, p_key, p_agent)
  on conflict do nothing;
  get diagnostics v_new = row_count;
  return v_new = 1;
end
$$;
comment on function scsql._capture_key(bigint, bigint, text) is
  'Private. Records event key P_KEY of project P_PROJECT in the calling transaction and returns true, or returns false when the key was already recorded (the event was captured before: write nothing). A NULL key returns true and records nothing. Waits for a concurrent transaction recording the same key. Raises SC140 for an empty or over-long key.';

create or replace function scsql.capture_event(p_event_key text)
returns boolean
language sql security definer set search_path = pg_catalog, scsql, pg_temp
as $$ select scsql._capture_key(me.project_id, me.agent_id, p_event_key) from scsql._me() me $$;
comment on function scsql.capture_event(text) is
  'Claims a hook event''s key for this transaction: true the first time, false when it was captured before.

p_event_key: the event''s key, 1-200 characters
hidden: the Claude Code hooks call it

EVENT_KEY is a hook event id, claimed in the acting agent''s project; on false the caller writes nothing. Write the event''s rows in the same transaction. Raises SC140 for an empty or over-long key.';

-- ---------------------------------------------------------------------------
-- Sessions
-- ---------------------------------------------------------------------------

create or replace function scsql.session_for(p_external_id text)
returns bigint
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  select s.session_id from scsql.sessions s, scsql._me() me
  where s.project_id = me.project_id and s.author_id = me.agent_id and s.external_id = p_external_id
$$;
comment on function scsql.session_for(text) is
  'The session_id of your session for a Claude Code session id, or null.

p_external_id: Claude Code''s session_id
hidden: the Claude Code hooks call it

EXTERNAL_ID is the client''s session id; only the acting agent''s sessions are looked up.';

create or replace function scsql.open_session(
  p_external_id text, p_source text default null, p_cwd text default null, p_git_branch text default null,
  p_git_commit text default null, p_client text default null, p_model text default null, p_title text default null,
  p_occurred_at timestamptz default null, p_altered jsonb default null,
  p_at timestamptz default null, p_key_id integer default null, p_signature bytea default null,
  out session_id bigint, out created boolean)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_me scsql.agents := scsql._me();
  v_err scsql.violation;
begin
  if p_external_id is null or char_length(p_external_id) not between 1 and 200 then
    raise exception using errcode = 'SC010', message = 'external_id must be 1 to 200 characters';
  end if;
  if p_source is not null and p_source not in ('startup', 'resume', 'clear', 'compact', 'import', 'hook') then
    raise exception using errcode = 'SC141',
      message = format('source must be startup, resume, clear, compact, import or hook, got %L', p_source);
  end if;
  perform scsql._require_redacted('title', p_title);
  perform scsql._require_redacted('cwd', p_cwd);
  perform scsql._require_time('occurred_at', p_occurred_at);
  perform scsql._require_altered(p_altered, array['external_id', 'cwd', 'git_branch', 'git_commit', 'client', 'model', 'title']);
  perform scsql._require_redacted_jsonb('altered', p_altered);
  created := false;
  select s.session_id into session_id from scsql.sessions s
  where s.project_id = v_me.project_id and s.author_id = v_me.agent_id and s.external_id = p_external_id;
  if found then
    return;
  end if;
  begin
    insert into scsql.sessions as s (project_id, author_id, client, model, title, external_id, cwd, git_branch, git_commit,
                                     source, occurred_at, altered, at, key_id, signature)
    values (v_me.project_id, v_me.agent_id, p_client, p_model, p_title, p_external_id, p_cwd, p_git_branch, p_git_commit, p_source,
            p_occurred_at, p_altered, p_at, p_key_id, p_signature)
    returning s.session_id into session_id;
    created := true;
  exception
    when unique_violation then
      -- Another transaction opened it first: that one is the session.
      select s.session_id into session_id from scsql.sessions s
      where s.project_id = v_me.project_id and s.author_id = v_me.agent_id and s.external_id = p_external_id;
    when check_violation or not_null_violation then
      get stacked diagnostics v_err.returned_sqlstate = returned_sqlstate, v_err.schema_name = schema_name,
        v_err.table_name = table_name, v_err.constraint_name = constraint_name, v_err.column_name = column_name, v_err.message_text = message_text;
      perform scsql._raise_violation(v_err);
  end;
end
$$;
comment on function scsql.open_session(text, text, text, text, text, text, text, text, timestamptz, jsonb, timestamptz, integer, bytea) is
  'Opens your session for a Claude Code session, or returns the one already open. Signed for you.

p_external_id: Claude Code''s session_id
p_source (startup|resume|clear|compact|import|hook): why the session starts
p_cwd: working directory
p_git_branch: git branch
p_git_commit: git commit
p_client: client name
p_model: model
p_title: what the session is about
p_occurred_at: when it happened, when imported
p_altered (object): how its text was made storable (see tool_calls.altered)
hidden: the Claude Code hooks open a session for every Claude session

EXTERNAL_ID is the client''s session id; occurred_at is when an imported session started. The session already open for EXTERNAL_ID (after a resume, a compaction, a replay) is returned with nothing written; created says which. Returns session_id and created. Chained and signed by the scsql client (at, key_id, signature over the appended fields external_id, cwd, git_branch, git_commit, source, occurred_at, altered). Raises SC010 bad argument, SC040 a title or cwd holding a secret, SC141 unknown source, SC150 a bad altered object, SC101/SC102/SC103 bad signing fields.';

-- ---------------------------------------------------------------------------
-- Prompts and tool calls
-- ---------------------------------------------------------------------------

create or replace function scsql._prompt_twin(p_me scsql.agents, p_session_id bigint, p_text text,
                                              p_imported boolean, p_at timestamptz)
returns boolean
language plpgsql
as $$
declare
  v_twin bigint;
begin
  if p_session_id is null or p_text is null then
    return false;
  end if;
  -- One writer of a session's prompts at a time (the session's transcript
  -- cursor row is its lock), so a live prompt and its transcript copy
  -- written at once still find each other.
  if not exists (select from scsql.sessions s where s.project_id = p_me.project_id and s.session_id = p_session_id) then
    return false;   -- record_prompt raises SC111
  end if;
  insert into scsql.transcript_cursors (project_id, session_id) values (p_me.project_id, p_session_id)
  on conflict do nothing;
  perform from scsql.transcript_cursors c
  where c.project_id = p_me.project_id and c.session_id = p_session_id
  for update;
  select p.prompt_id into v_twin
  from scsql.prompts p
  where p.project_id = p_me.project_id and p.session_id = p_session_id and p.text = p_text
    and coalesce(p.imported, false) <> coalesce(p_imported, false)
    and coalesce(p.occurred_at, p.at) between p_at - interval '60 seconds' and p_at + interval '60 seconds'
    and not exists (select from scsql.capture_events e
                    where e.project_id = p_me.project_id and e.event_key = 'prompt-twin:' || p.prompt_id)
  order by abs(extract(epoch from coalesce(p.occurred_at, p.at) - p_at)), p.prompt_id
  limit 1;
  if v_twin is null then
    return false;
  end if;
  perform scsql._capture_key(p_me.project_id, p_me.agent_id, 'prompt-twin:' || v_twin);
  return true;
end
$$;
comment on function scsql._prompt_twin(scsql.agents, bigint, text, boolean, timestamptz) is
  'Private. Whether a prompt of session P_SESSION_ID is already stored from the other path: a live prompt (imported NULL) whose transcript copy was imported, or an imported prompt captured live before. Twins have the same text (redacted, clipped alike), the same session and times (occurred_at, else at) at most 60 seconds apart; each stored prompt pairs with one twin at most (nearest in time first; the pair is recorded as event key prompt-twin:<prompt_id>), so a prompt typed twice is kept twice. Locks the session''s transcript cursor row for the transaction. Returns true (and records the pair) when a twin is found. Raises nothing.';

create or replace function scsql.record_prompt(
  p_text text, p_session_id bigint default null, p_imported boolean default null, p_occurred_at timestamptz default null,
  p_altered jsonb default null, p_event_key text default null,
  p_at timestamptz default null, p_key_id integer default null, p_signature bytea default null,
  out prompt_id bigint, out chain_id bigint, out seq bigint)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_me scsql.agents := scsql._me();
  v_err scsql.violation;
begin
  perform scsql._require(p_text is not null, 'text is required');
  perform scsql._require_redacted('text', p_text);
  perform scsql._require_time('occurred_at', p_occurred_at);
  perform scsql._require_altered(p_altered, array['text']);
  perform scsql._require_redacted_jsonb('altered', p_altered);
  if not scsql._capture_key(v_me.project_id, v_me.agent_id, p_event_key) then
    return;  -- captured before
  end if;
  if scsql._prompt_twin(v_me, p_session_id, p_text, p_imported, coalesce(p_occurred_at, p_at, now())) then
    return;  -- the same prompt, captured live and read back from the transcript
  end if;
  insert into scsql.prompts as p (project_id, author_id, session_id, text, imported, occurred_at, altered, at, key_id, signature)
  values (v_me.project_id, v_me.agent_id, p_session_id, p_text, p_imported, p_occurred_at, p_altered, p_at, p_key_id, p_signature)
  returning p.prompt_id, p.chain_id, p.seq into prompt_id, chain_id, seq;
  perform scsql._require_references(v_me.project_id, p_session_id);
exception when check_violation or not_null_violation then
  get stacked diagnostics v_err.returned_sqlstate = returned_sqlstate, v_err.schema_name = schema_name,
    v_err.table_name = table_name, v_err.constraint_name = constraint_name, v_err.column_name = column_name, v_err.message_text = message_text;
  perform scsql._raise_violation(v_err);
end
$$;
comment on function scsql.record_prompt(text, bigint, boolean, timestamptz, jsonb, text, timestamptz, integer, bytea) is
  'Records a user prompt of your session, redacted. Signed for you.

p_text: the prompt
p_session_id: session_id from open_session
p_imported: true when imported from a transcript
p_occurred_at: when it happened, when imported
p_altered (object): how its text was made storable (see tool_calls.altered)
p_event_key: the hook event''s key (a replay adds nothing)
hidden: the Claude Code hooks record every prompt

Text: at most 20,000 characters; imported: true for a prompt read back from a transcript; occurred_at: its original time (at, the signed write time, stays within minutes of the server clock). EVENT_KEY (optional) makes it idempotent: when that key was captured before, nothing is written and every column returned is NULL. A prompt captured live and the same prompt imported from the session''s transcript are stored once: the second of the two (same session and text, times at most 60 seconds apart; live prompts give occurred_at = when the hook received them) writes nothing and returns NULLs. Returns prompt_id, chain_id, seq. Chained and signed by the scsql client. Raises SC010 bad argument, SC040 text holding a secret (sign scsql.redact(text)), SC111 unknown session, SC140 bad event key, SC150 a bad altered object, SC101/SC102/SC103 bad signing fields.';

create or replace function scsql._require_tool_call_texts(
  p_input_preview text, p_output_preview text, p_input_key text, p_occurred_at timestamptz, p_files jsonb, p_altered jsonb)
returns void
language plpgsql stable
as $$
begin
  -- One statement for every check, in the order they raise: SC040 for a
  -- text holding a secret, SC010 for a bad time, SC150 for a bad altered
  -- object, SC010 for a files value that is not an array of paths.
  perform scsql._require_redacted('input_preview', p_input_preview),
          scsql._require_redacted('output_preview', p_output_preview),
          scsql._require_redacted('input_key', p_input_key),
          scsql._require_time('occurred_at', p_occurred_at),
          scsql._require_redacted_jsonb('files', p_files),
          scsql._require_altered(p_altered, array['tool', 'model', 'input_preview', 'output_preview', 'tool_use_id', 'files', 'input_key']),
          scsql._require_redacted_jsonb('altered', p_altered),
          scsql._require(p_files is null
                         or (jsonb_typeof(p_files) = 'array' and jsonb_array_length(p_files) <= 1000
                             and not jsonb_path_exists(p_files, '$[*] ? (@.type() != "string")')),
                         'files must be a JSON array of at most 1000 paths');
end
$$;
comment on function scsql._require_tool_call_texts(text, text, text, timestamptz, jsonb, jsonb) is
  'Private, for scsql.capture_tool_call. Raises SC040 when a signed text (input_preview, output_preview, input_key, files, altered) holds a secret, SC010 for occurred_at out of range or files not a JSON array of at most 1000 paths, SC150 for a bad altered object.';

create or replace function scsql._tool_call_cost(
  p_origin text, p_model text, p_input_tokens integer, p_output_tokens integer, p_at timestamptz)
returns numeric
language plpgsql stable
as $$
begin
  -- Priced from the model's side: it writes the tool's input (the
  -- arguments) at its output rate and reads the tool's output (the
  -- result) at its input rate. Calls that only assembled database
  -- content cost nothing; a model without a price costs NULL. The price
  -- is the row of model_prices whose model is the longest prefix of the
  -- call's, effective latest at or before it.
  if p_origin = 'database' then
    return 0;
  end if;
  return (select (p_input_tokens::numeric * m.output_usd_per_mtok + p_output_tokens::numeric * m.input_usd_per_mtok) / 1000000
          from scsql.model_prices m
          where left(p_model, length(m.model)) = m.model and m.effective_from <= p_at
          order by length(m.model) desc, m.effective_from desc
          limit 1);
end
$$;
comment on function scsql._tool_call_cost(text, text, integer, integer, timestamptz) is
  'Private, for scsql.capture_tool_call. The cost in USD of a tool call: 0 for origin database, NULL for a model without a price, else its tokens at the price of model_prices effective at AT for the longest model prefix.';

create or replace function scsql.capture_tool_call(
  p_tool text,
  p_status text default 'ok',
  p_session_id bigint default null,
  p_model text default null,
  p_origin text default 'model',
  p_input_tokens integer default 0,
  p_output_tokens integer default 0,
  p_latency_ms integer default null,
  p_input_preview text default null,
  p_output_preview text default null,
  p_tool_use_id text default null,
  p_files jsonb default null,
  p_scsql_tool boolean default null,
  p_imported boolean default null,
  p_input_key text default null,
  p_occurred_at timestamptz default null,
  p_altered jsonb default null,
  p_event_key text default null,
  p_at timestamptz default null,
  p_key_id integer default null,
  p_signature bytea default null,
  out tool_call_id bigint, out chain_id bigint, out seq bigint, out cost_usd numeric)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_cost numeric;
  v_me scsql.agents := scsql._me();
  v_err scsql.violation;
begin
  perform scsql._require_tool_call_texts(p_input_preview, p_output_preview, p_input_key, p_occurred_at, p_files, p_altered);
  -- A call is captured once whether it came live (a random event key) or
  -- from a transcript (a key made from the message): both claim its
  -- tool_use_id too.
  if not scsql._capture_key(v_me.project_id, v_me.agent_id, coalesce(p_event_key, scsql._tool_use_key(p_tool_use_id))) then
    return;  -- captured before
  end if;
  if p_event_key is not null and p_tool_use_id is not null
     and not scsql._capture_key(v_me.project_id, v_me.agent_id, scsql._tool_use_key(p_tool_use_id)) then
    return;  -- the same call, captured live and read back from the transcript
  end if;
  -- The price is read here, before the INSERT: Citus plans no statement
  -- that calls a SQL function reading its tables with parameters, and a
  -- PL/pgSQL variable is one.
  v_cost := scsql._tool_call_cost(p_origin, p_model, p_input_tokens, p_output_tokens, p_at);
  insert into scsql.tool_calls as t (project_id, author_id, session_id, tool, model, origin, input_tokens, output_tokens, latency_ms, status,
                                     input_preview, output_preview, tool_use_id, files, scsql_tool, imported, input_key,
                                     occurred_at, altered, cost_usd, at, key_id, signature)
  values (v_me.project_id, v_me.agent_id, p_session_id, p_tool, p_model, p_origin, p_input_tokens, p_output_tokens, p_latency_ms, p_status,
          p_input_preview, p_output_preview, p_tool_use_id, p_files, p_scsql_tool, p_imported, p_input_key,
          p_occurred_at, p_altered, v_cost, p_at, p_key_id, p_signature)
  returning t.tool_call_id, t.chain_id, t.seq, t.cost_usd into tool_call_id, chain_id, seq, cost_usd;
  perform scsql._require_references(v_me.project_id, p_session_id);
exception when check_violation or not_null_violation then
  get stacked diagnostics v_err.returned_sqlstate = returned_sqlstate, v_err.schema_name = schema_name,
    v_err.table_name = table_name, v_err.constraint_name = constraint_name, v_err.column_name = column_name, v_err.message_text = message_text;
  perform scsql._raise_violation(v_err);
end
$$;
comment on function scsql.capture_tool_call(text, text, bigint, text, text, integer, integer, integer, text, text, text, jsonb, boolean, boolean, text, timestamptz, jsonb, text, timestamptz, integer, bytea) is
  'Records one tool call captured by a hook. Signed for you.

p_tool: tool name
p_status (ok|error|timeout|cancelled|denied): how it ended
p_session_id: session_id from open_session
p_model: model that made the call
p_origin (model|database): who generated the call
p_input_tokens (0..): tokens of the arguments
p_output_tokens (0..): tokens of the result
p_latency_ms (0..): duration
p_input_preview: at most 4,000 characters
p_output_preview: at most 4,000 characters
p_tool_use_id: Claude Code''s tool_use_id
p_files (array): paths the call touched
p_scsql_tool: a call of scsql''s own tools
p_imported: true when imported from a transcript
p_input_key: the command or file path lessons match on
p_occurred_at: when it happened, when imported
p_altered (object): how its text was made storable, or that it is a stub of a refused call
p_event_key: the hook event''s key (a replay adds nothing)
hidden: the Claude Code hooks record every tool call

record_tool_call as a hook captures it: the same arguments, plus tool_use_id (the client''s id of the call), files (JSON array of the paths it touched), scsql_tool (a call of scsql''s own MCP tools), imported (read back from a transcript), occurred_at (its original time; at, the signed write time, stays within minutes of the server clock), input_key (the Bash command or the file path, redacted: what lessons and rules match on), altered (how its text was made storable: replaced NUL and lone surrogates, clipped values with their original bytes and sha256, or a stub naming the refusal of a call that could not be stored otherwise). Idempotent by EVENT_KEY and by the tool_use_id: a call captured before (by a hook or by an import of its transcript) writes nothing and returns NULLs. Returns tool_call_id, chain_id, seq and cost_usd (NULL when the model has no price). Chained and signed by the scsql client. Raises SC010 bad argument, SC040 a preview or key holding a secret, SC111 unknown session, SC140 bad event key, SC150 a bad altered object, SC101/SC102/SC103 bad signing fields.';

-- ---------------------------------------------------------------------------
-- Lessons and rules
-- ---------------------------------------------------------------------------

create or replace function scsql._tool_input_key(p_tool text, p_input jsonb)
returns text
language sql immutable
as $$
  select left(case when p_tool = 'Bash' then p_input ->> 'command'
                   when p_tool = 'NotebookEdit' then p_input ->> 'notebook_path'
                   else p_input ->> 'file_path' end, 4000)
$$;
comment on function scsql._tool_input_key(text, jsonb) is
  'Private. What lessons and rules of a tool match on: the command of a Bash call, the notebook_path of NotebookEdit, the file_path of other tools (NULL when there is none), at most 4000 characters. scsql/hooks/handlers.py computes the same key for the tool calls it captures.';

create or replace function scsql._learning_input_key()
returns trigger
language plpgsql
as $$
begin
  if new.tool_call_id is not null and new.input_key is null then
    select t.input_key into new.input_key from scsql.tool_calls t
    where t.project_id = new.project_id and t.tool_call_id = new.tool_call_id
    limit 1;
  end if;
  return new;
end
$$;
comment on function scsql._learning_input_key() is
  'Private trigger. Copies the input key (command or file path) of a learning''s tool call into the learning, so check_tool_use finds the lessons of a call by index.';
drop trigger if exists learning_input_key on scsql.learnings;
create trigger learning_input_key before insert on scsql.learnings
  for each row execute function scsql._learning_input_key();

-- mark_learning_rule and check_tool_use: sql/15_rules.sql.

create or replace function scsql.others_exclusive_files()
returns table (task_id bigint, path text, state text, owner text, owner_role text)
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  select t.task_id, h.path, t.state::text, c.name, t.team_role
  from scsql._me() me
  join scsql.task_files h on h.project_id = me.project_id
  join scsql.tasks t on t.project_id = h.project_id and t.task_id = h.task_id
  left join scsql.agents c on c.agent_id = t.claimed_by
  where t.claimed_by is distinct from me.agent_id
  order by h.path, t.task_id
  limit 10000
$$;
comment on function scsql.others_exclusive_files() is
  'The paths that queued and claimed tasks not held by you own exclusively.

hidden: the Claude Code hooks see with it whether a shell command changed an owned file

Returns task_id, path (relative to the project root; "." is all of it), state, owner (the claiming agent; NULL while queued) and owner_role (the team role it is queued for), at most 10,000 rows. Raises nothing.';

create or replace function scsql.capture_counts()
returns table (project text, stubs bigint, replaced bigint, clipped bigint)
language sql stable set search_path = pg_catalog, scsql, pg_temp
as $$
  select p.name,
         count(*) filter (where r.altered ? 'stub'),
         count(*) filter (where jsonb_path_exists(r.altered, '$.*.replaced')),
         count(*) filter (where jsonb_path_exists(r.altered, '$.*.clipped'))
  from (select project_id, altered from scsql.tool_calls where altered is not null
        union all select project_id, altered from scsql.prompts where altered is not null
        union all select project_id, altered from scsql.sessions where altered is not null) r
  join scsql.projects p on p.project_id = r.project_id
  group by p.name
  order by p.name
$$;
comment on function scsql.capture_counts() is
  'How many captured tool calls, prompts and sessions were stored as stubs of refused events, or with their text replaced or clipped, by project.

Counts the rows the caller may read. Returns project, stubs, replaced (NUL, lone surrogates), clipped; no row for a project where every event was stored as given. Raises nothing.';

-- ---------------------------------------------------------------------------
-- Transcript cursors
-- ---------------------------------------------------------------------------

create or replace function scsql._my_session(p_me scsql.agents, p_session_id bigint)
returns void
language plpgsql
as $$
begin
  if p_session_id is null or not exists (
      select from scsql.sessions s
      where s.project_id = p_me.project_id and s.session_id = p_session_id and s.author_id = p_me.agent_id) then
    raise exception using errcode = 'SC146',
      message = format('no session %s of agent %s in this project', p_session_id, p_me.name),
      hint = 'open_session returns the session_id of your session for a Claude Code session';
  end if;
end
$$;
comment on function scsql._my_session(scsql.agents, bigint) is
  'Private. Raises SC146 unless P_SESSION_ID is a session of agent P_ME in its project.';

create or replace function scsql.transcript_cursor(p_session_id bigint,
  out cursor text, out parts integer, out messages bigint)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_me scsql.agents := scsql._me();
begin
  perform scsql._my_session(v_me, p_session_id);
  insert into scsql.transcript_cursors (project_id, session_id) values (v_me.project_id, p_session_id)
  on conflict do nothing;
  select c.cursor, c.parts, c.messages into cursor, parts, messages
  from scsql.transcript_cursors c
  where c.project_id = v_me.project_id and c.session_id = p_session_id
  for update;
end
$$;
comment on function scsql.transcript_cursor(bigint) is
  'How far your session''s transcript was kept, locked until your transaction ends.

p_session_id: session_id from open_session
hidden: the Claude Code hooks and scsql import claude keep transcripts

Returns cursor (the uuid of the last transcript message kept in the session''s summary and conversation text; NULL when nothing was kept yet), parts (conversation parts written) and messages (messages read). SESSION_ID is one of the acting agent''s sessions; while the lock is held a concurrent PreCompact, SessionEnd or import of the same session waits and then reads only what follows. Record the new position with advance_transcript_cursor in the same transaction. Raises SC146 for a session that is not yours.';

create or replace function scsql.advance_transcript_cursor(p_session_id bigint, p_cursor text, p_parts integer,
                                                           p_messages bigint)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_me scsql.agents := scsql._me();
  v_old scsql.transcript_cursors;
begin
  perform scsql._my_session(v_me, p_session_id);
  if p_cursor is null or char_length(p_cursor) not between 1 and 200 then
    raise exception using errcode = 'SC147', message = 'a transcript cursor must be 1 to 200 characters';
  end if;
  insert into scsql.transcript_cursors (project_id, session_id) values (v_me.project_id, p_session_id)
  on conflict do nothing;
  select * into v_old from scsql.transcript_cursors c
  where c.project_id = v_me.project_id and c.session_id = p_session_id
  for update;
  if p_parts is null or p_messages is null or p_parts < v_old.parts or p_messages < v_old.messages then
    raise exception using errcode = 'SC147',
      message = format('parts and messages of a transcript cursor may only grow (now %s and %s, given %s and %s)',
                       v_old.parts, v_old.messages, p_parts, p_messages);
  end if;
  update scsql.transcript_cursors c
  set cursor = p_cursor, parts = p_parts, messages = p_messages, updated_at = now()
  where c.project_id = v_me.project_id and c.session_id = p_session_id;
end
$$;
comment on function scsql.advance_transcript_cursor(bigint, text, integer, bigint) is
  'Records how far your session''s transcript is now kept.

p_session_id: session_id from open_session
p_cursor: uuid of the last transcript message kept, 1-200 characters
p_parts (0..): conversation parts written in all
p_messages (0..): messages read in all
hidden: the Claude Code hooks and scsql import claude keep transcripts

SESSION_ID is one of the acting agent''s sessions; CURSOR is the last message kept, PARTS and MESSAGES totals, never less than before. Write the summary and conversation text of what followed the old cursor in the same transaction. Raises SC146 for a session that is not yours, SC147 for an empty or over-long cursor or totals that shrink.';
