-- 10 chain: hash-chained, signed, append-only tables.
--
-- Any table becomes chained with one idempotent call placed in an sql/ file:
--
--   select scsql._make_chained('scsql.broadcasts',
--            p_signed  => array['kind', 'body'],      -- the author signs these
--            p_stamped => array['broadcast_id']);     -- the database fills these
--
-- A column added to a chained table after it has rows is signed as an
-- appended field (p_appended => array['new_column'], listed after those of
-- earlier releases): it adds bytes to the payload only when it is not NULL,
-- so the rows written before keep their hashes and signatures.
--
-- Every row then carries at, author_id, key_id, chain_id, seq, prev_hash,
-- row_hash and signature; it joins the acting agent's chain (one chain per
-- project and agent, spanning every chained table); UPDATE, DELETE and
-- TRUNCATE are revoked and rejected. The canonical encoding is defined once,
-- in the comment of scsql._enc.

select scsql._define_error(code, name, meaning) from (values
  ('SC100', 'append_only',         'Rows of a chained table are never updated, deleted or truncated; record a new row instead.'),
  ('SC101', 'signature_missing',   'A chained write needs the author''s Ed25519 signature (64 bytes) of its canonical payload; the scsql Python layer adds it.'),
  ('SC102', 'signing_key_invalid', 'The key_id of a chained write is not the author''s key valid at the row''s time (the key was rotated: restart the agent so it loads its new key).'),
  ('SC103', 'clock_skew',          'The timestamp a chained write carries is missing or too far from the server''s clock (scsql.chain_settings.clock_skew, default 5 minutes, set by scsql.set_clock_skew).'),
  ('SC104', 'chain_forbidden',     'A write named a chain, project or chain position that is not the acting agent''s to choose.'),
  ('SC105', 'not_chainable',       'scsql._make_chained refused the table or a field (see the message).'),
  ('SC106', 'chain_unknown',       'No chain has that id.'),
  ('SC107', 'appended_order',      'The appended fields of a chained table only grow at the end: earlier rows are signed with their positions, so scsql._make_chained refuses to remove or reorder them, or to append a column that rows already written have values in.')
) as t(code, name, meaning);

-- ---------------------------------------------------------------------------
-- Canonical encoding
-- ---------------------------------------------------------------------------

create or replace function scsql._enc(p_tag bytea, p_value bytea)
returns bytea
language sql immutable parallel safe
as $$
  select case when p_value is null then '\x4e00000000'::bytea
              else p_tag || pg_catalog.int4send(pg_catalog.length(p_value)) || p_value end
$$;
comment on function scsql._enc(bytea, bytea) is $doc$Private. Encodes one field of the canonical encoding of chained rows. This comment is the specification; an independent verifier needs nothing else.

FIELD. A non-NULL value is: one tag byte, the length of the value bytes as a 4-byte unsigned big-endian integer, then the value bytes. NULL, whatever its type, is the 5 bytes 4E 00 00 00 00 ("N", length 0). Value bytes and tags by column type (the encoding never depends on DateStyle, TimeZone, extra_float_digits, client_encoding or any other setting):
  text, varchar        tag "t" (0x74): the UTF-8 bytes of the string, unnormalised.
  smallint/int/bigint  tag "i" (0x69): ASCII decimal, "-" for negatives, no leading zeros or "+" ("0", "-42").
  numeric              tag "n" (0x6E): ASCII decimal of the value with trailing fractional zeros removed, and the "." too when nothing follows it; never an exponent; zero is "0"; "NaN", "Infinity", "-Infinity" (1.50 -> "1.5", 100 -> "100", -0.00 -> "0").
  boolean              tag "b" (0x62): "t" or "f".
  timestamptz          tag "T" (0x54): ASCII decimal of the microseconds since 1970-01-01 00:00:00 UTC (negative before it); infinite timestamps cannot be encoded.
  bytea                tag "x" (0x78): the bytes.
  uuid                 tag "u" (0x75): the 36-character lower-case hyphenated form, ASCII.
  jsonb                tag "j" (0x6A): the UTF-8 bytes of PostgreSQL's jsonb text output: object keys ordered by byte length then bytewise, ", " between items, ": " after keys, numbers as written in the input (scale kept, exponent expanded, "-0" as "0"), strings with only " \ and control characters escaped (\b \f \n \r \t, others \u00xx in lower-case hex).
Other types cannot be chained.

DIGESTED FIELDS. A signed or appended text column listed in scsql.chained_tables.digested_fields (scsql._chain_digests) has a digest column <column>_sha256. In a row whose digest column is not NULL the field is encoded not by its text but by that digest: tag "h" (0x68), length 32, the sha256 of the text's UTF-8 bytes (an appended field: int <i> then that, even when the text is NULL); the digest column adds nothing else. The database fills the digest when the row is written (NULL for a NULL text), so the text of every row written since may be removed later (scsql.purge sets it NULL and keeps the digest) and the row's bytes, hash and signature stay the same. A row whose digest column is NULL (rows written before the column existed) encodes the text as above. Verifiers also check that a text present has the digest's sha256 (content-mismatch otherwise) and that a text absent beside a digest was removed by a purge recorded in scsql.purges with that digest (purge-unrecorded otherwise).

PAYLOAD (what the author signs with Ed25519; everything in it is known to the client before the insert): the concatenation of the fields
  text "scsql/1", text <schema.table>, text <author agent name>, int <key_id>, timestamptz <at>,
  then the table's signed columns in scsql.chained_tables.signed_fields order,
  then its appended columns (scsql.chained_tables.appended_fields: signed columns the table gained after it had rows), in that order, each ONLY when its value is not NULL, as int <i> followed by the field, i being the column's 1-based position in appended_fields; a NULL appended column adds no bytes at all. A row whose appended columns are all NULL (every row written before they were appended) encodes exactly as without them. Positions never change: appended_fields only grows at its end.

CANONICAL ROW BYTES: int <chain_id>, int <seq>, then the table's stamped columns (assigned by the database, hashed but not signed) in stamped_fields order, then the payload.

ROW HASH: row_hash = sha256(prev_hash || canonical row bytes || signature), where prev_hash is the row_hash of the previous row of the same chain (seq - 1), or 32 zero bytes for seq 1. A chain is linear: seq runs 1, 2, 3, ... with no gap, across every chained table.

The signature is checked against the public key in scsql.agent_keys with the row's key_id for the row's author; that key must be the author's key valid at the row's at (the key with the latest valid_from <= at).$doc$;

create or replace function scsql._enc_text(p_value text)
returns bytea language sql immutable parallel safe
as $$ select scsql._enc('\x74'::bytea, pg_catalog.convert_to(p_value, 'UTF8')) $$;
comment on function scsql._enc_text(text) is 'Private. Canonical field of a text value (tag "t"); see scsql._enc.';

create or replace function scsql._enc_int(p_value bigint)
returns bytea language sql immutable parallel safe
as $$ select scsql._enc('\x69'::bytea, pg_catalog.convert_to(p_value::text, 'UTF8')) $$;
comment on function scsql._enc_int(bigint) is 'Private. Canonical field of an integer (tag "i"); see scsql._enc.';

create or replace function scsql._enc_numeric(p_value numeric)
returns bytea language sql immutable parallel safe
as $$ select scsql._enc('\x6e'::bytea, pg_catalog.convert_to(pg_catalog.trim_scale(p_value)::text, 'UTF8')) $$;
comment on function scsql._enc_numeric(numeric) is 'Private. Canonical field of a numeric (tag "n", trailing zeros trimmed); see scsql._enc.';

create or replace function scsql._enc_bool(p_value boolean)
returns bytea language sql immutable parallel safe
as $$ select scsql._enc('\x62'::bytea, case when p_value then '\x74'::bytea when not p_value then '\x66'::bytea end) $$;
comment on function scsql._enc_bool(boolean) is 'Private. Canonical field of a boolean (tag "b", "t" or "f"); see scsql._enc.';

-- extract(epoch ...) of a timestamptz does not depend on the time zone, so
-- the function is immutable even though extract in general is only stable.
create or replace function scsql._enc_ts(p_value timestamptz)
returns bytea language sql immutable parallel safe
as $$ select scsql._enc('\x54'::bytea, pg_catalog.convert_to(((extract(epoch from p_value) * 1000000)::bigint)::text, 'UTF8')) $$;
comment on function scsql._enc_ts(timestamptz) is 'Private. Canonical field of a timestamptz (tag "T", microseconds since the Unix epoch, UTC); see scsql._enc.';

create or replace function scsql._enc_bytea(p_value bytea)
returns bytea language sql immutable parallel safe
as $$ select scsql._enc('\x78'::bytea, p_value) $$;
comment on function scsql._enc_bytea(bytea) is 'Private. Canonical field of a bytea (tag "x"); see scsql._enc.';

create or replace function scsql._enc_uuid(p_value uuid)
returns bytea language sql immutable parallel safe
as $$ select scsql._enc('\x75'::bytea, pg_catalog.convert_to(p_value::text, 'UTF8')) $$;
comment on function scsql._enc_uuid(uuid) is 'Private. Canonical field of a uuid (tag "u"); see scsql._enc.';

create or replace function scsql._enc_jsonb(p_value jsonb)
returns bytea language sql immutable parallel safe
as $$ select scsql._enc('\x6a'::bytea, pg_catalog.convert_to(p_value::text, 'UTF8')) $$;
comment on function scsql._enc_jsonb(jsonb) is 'Private. Canonical field of a jsonb value (tag "j", jsonb text output); see scsql._enc.';

create or replace function scsql._enc_expr(p_kind text, p_value text)
returns text
language sql immutable
as $$
  -- Generated code evaluates the encoding inline (no function call per
  -- field); it is the same as scsql._enc_<kind>, which the tests check.
  select case p_kind
    when 'text'    then format($e$coalesce('\x74'::bytea || pg_catalog.int4send(pg_catalog.length(pg_catalog.convert_to(%1$s, 'UTF8'))) || pg_catalog.convert_to(%1$s, 'UTF8'), '\x4e00000000'::bytea)$e$, p_value)
    when 'int'     then format($e$coalesce('\x69'::bytea || pg_catalog.int4send(pg_catalog.length((%1$s)::text)) || (%1$s)::text::bytea, '\x4e00000000'::bytea)$e$, p_value)
    when 'numeric' then format($e$coalesce('\x6e'::bytea || pg_catalog.int4send(pg_catalog.length(pg_catalog.trim_scale(%1$s)::text)) || pg_catalog.trim_scale(%1$s)::text::bytea, '\x4e00000000'::bytea)$e$, p_value)
    when 'bool'    then format($e$(case when %1$s then '\x620000000174' when not %1$s then '\x620000000166' else '\x4e00000000' end)::bytea$e$, p_value)
    when 'ts'      then format($e$coalesce('\x54'::bytea || pg_catalog.int4send(pg_catalog.length(((extract(epoch from %1$s) * 1000000)::bigint)::text)) || ((extract(epoch from %1$s) * 1000000)::bigint)::text::bytea, '\x4e00000000'::bytea)$e$, p_value)
    when 'bytea'   then format($e$coalesce('\x78'::bytea || pg_catalog.int4send(pg_catalog.length(%1$s)) || %1$s, '\x4e00000000'::bytea)$e$, p_value)
    when 'uuid'    then format($e$coalesce('\x7500000024'::bytea || (%1$s)::text::bytea, '\x4e00000000'::bytea)$e$, p_value)
    when 'jsonb'   then format($e$coalesce('\x6a'::bytea || pg_catalog.int4send(pg_catalog.length(pg_catalog.convert_to((%1$s)::text, 'UTF8'))) || pg_catalog.convert_to((%1$s)::text, 'UTF8'), '\x4e00000000'::bytea)$e$, p_value)
  end
$$;
comment on function scsql._enc_expr(text, text) is
  'Private. SQL expression encoding the value expression P_VALUE as one canonical field of kind P_KIND (see scsql._enc), inline, for generated triggers and verification queries.';

create or replace function scsql._enc_kind(p_type regtype)
returns text
language sql immutable
as $$
  select case p_type
    when 'text'::regtype then 'text' when 'character varying'::regtype then 'text'
    when 'smallint'::regtype then 'int' when 'integer'::regtype then 'int' when 'bigint'::regtype then 'int'
    when 'numeric'::regtype then 'numeric'
    when 'boolean'::regtype then 'bool'
    when 'timestamp with time zone'::regtype then 'ts'
    when 'bytea'::regtype then 'bytea'
    when 'uuid'::regtype then 'uuid'
    when 'jsonb'::regtype then 'jsonb'
  end
$$;
comment on function scsql._enc_kind(regtype) is
  'Private. The canonical-encoding kind of a column type (text, int, numeric, bool, ts, bytea, uuid, jsonb), NULL when the type cannot be chained.';

-- ---------------------------------------------------------------------------
-- The registry of chained tables and its generated expressions
-- ---------------------------------------------------------------------------

create or replace function scsql._chain_fields(p_table text default null)
returns table (table_name text, part text, ordinal integer, column_name text, kind text)
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  select t.table_name, f.part, f.ord::integer, f.col, scsql._enc_kind(a.atttypid::regtype)
  from scsql.chained_tables t
  cross join lateral (
    select 'stamped' as part, s.col, s.ord from unnest(t.stamped_fields) with ordinality s(col, ord)
    union all
    select 'signed', s.col, s.ord from unnest(t.signed_fields) with ordinality s(col, ord)
    union all
    select 'appended', s.col, s.ord from unnest(t.appended_fields) with ordinality s(col, ord)
  ) f
  join pg_catalog.pg_attribute a on a.attrelid = t.table_name::regclass and a.attname = f.col and not a.attisdropped
  where p_table is null or t.table_name = p_table
  order by t.table_name, case f.part when 'stamped' then 1 when 'signed' then 2 else 3 end, f.ord
$$;
comment on function scsql._chain_fields(text) is
  'Private. The fields of each chained table in canonical order: part = stamped (hashed, not signed), then signed (in the payload), then appended (in the payload after the signed fields, each only when not NULL, as int ordinal || field; see scsql._enc), with their ordinal in their part and their encoding kind. Verifiers read it to encode rows independently.';

create or replace function scsql._chain_digests(p_table text default null)
returns table (table_name text, column_name text, digest_column text, target_kind text, id_column text)
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  select t.table_name, d.col, d.col || '_sha256', k.kind, k.id_column
  from scsql.chained_tables t
  cross join lateral unnest(t.digested_fields) with ordinality d(col, ord)
  left join (values ('scsql.prompts', 'prompt', 'prompt_id'), ('scsql.tool_calls', 'tool_call', 'tool_call_id'),
                     ('scsql.outcomes', 'outcome', 'outcome_id'), ('scsql.memory_changes', 'memory_change', 'change_id')) k(tbl, kind, id_column)
    on k.tbl = t.table_name
  where p_table is null or t.table_name = p_table
  order by t.table_name, d.ord
$$;
comment on function scsql._chain_digests(text) is
  'Private. The digested fields of each chained table (see scsql._enc, DIGESTED FIELDS), in registration order: the text column, its digest column (<column>_sha256), and the kind and id column by which scsql.purges names the table''s rows. Verifiers read it.';

create or replace function scsql._chain_content_expr(p_table text, p_rec text)
returns text
language sql stable
as $$
  -- NULL when every digested field of the row is as its digest says, else
  -- the kind of the first problem: a text that is not the digest's, or a
  -- text gone that no purge removed.
  select coalesce('(case ' || string_agg(format(
    $e$when %2$s is not null and %1$s is not null and sha256(convert_to(%1$s, 'UTF8')) <> %2$s then 'content-mismatch'
     when %2$s is not null and %1$s is null and not exists (select from scsql.purges p where p.project_id = %3$s.project_id
          and p.target_kind = %4$L and p.target_id = %5$s and p.digests ->> %6$L = encode(%2$s, 'hex')) then 'purge-unrecorded' $e$,
    format('%s.%I', p_rec, d.column_name), format('%s.%I', p_rec, d.digest_column), p_rec, d.target_kind,
    format('%s.%I', p_rec, d.id_column), d.column_name), ' ') || ' end)', 'null::text')
  from scsql._chain_digests(p_table) d
$$;
comment on function scsql._chain_content_expr(text, text) is
  'Private. Generates the SQL expression, over record p_rec of chained table p_table, that is NULL when each digested field holds the text its digest was made of (or none, removed by a recorded purge), else content-mismatch or purge-unrecorded (see scsql._enc, DIGESTED FIELDS). scsql.verify_chain evaluates it for every row.';

create or replace function scsql._chain_payload_expr(p_table text, p_rec text, p_author text)
returns text
language sql stable
as $$
  select format('%L::bytea || %s || %s || %s',
                scsql._enc_text('scsql/1') || scsql._enc_text(p_table),
                scsql._enc_expr('text', p_author), scsql._enc_expr('int', p_rec || '.key_id'), scsql._enc_expr('ts', p_rec || '.at'))
      || coalesce((select string_agg(' || ' || case when d.digest_column is null
                                                     then scsql._enc_expr(f.kind, format('%s.%I', p_rec, f.column_name))
                                                     else format($e$(case when %1$s is null then %2$s else '\x6800000020'::bytea || %1$s end)$e$,
                                                                 format('%s.%I', p_rec, d.digest_column),
                                                                 scsql._enc_expr(f.kind, format('%s.%I', p_rec, f.column_name))) end,
                                     '' order by f.ordinal)
                   from scsql._chain_fields(p_table) f
                   left join scsql._chain_digests(p_table) d on d.column_name = f.column_name
                   where f.part = 'signed'), '')
      || coalesce((select string_agg(format(' || (case %4$s when %1$s is null then ''\x''::bytea else %2$L::bytea || %3$s end)',
                                            format('%s.%I', p_rec, f.column_name), scsql._enc_int(f.ordinal),
                                            scsql._enc_expr(f.kind, format('%s.%I', p_rec, f.column_name)),
                                            case when d.digest_column is not null
                                                 then format($e$when %1$s is not null then %2$L::bytea || '\x6800000020'::bytea || %1$s$e$,
                                                             format('%s.%I', p_rec, d.digest_column), scsql._enc_int(f.ordinal)) end),
                                     '' order by f.ordinal)
                   from scsql._chain_fields(p_table) f
                   left join scsql._chain_digests(p_table) d on d.column_name = f.column_name
                   where f.part = 'appended'), '')
$$;
comment on function scsql._chain_payload_expr(text, text, text) is
  'Private. Generates the SQL expression of a row''s signed payload (see scsql._enc: the signed fields, a digested one by its digest when the row has it, then each appended field that is not NULL) for chained table p_table over record p_rec.';

create or replace function scsql._chain_body_expr(p_table text, p_rec text, p_author text)
returns text
language sql stable
as $$
  -- The stamped fields then the payload of one row, as an SQL expression over
  -- record p_rec, with p_author the expression of the author's name.
  select coalesce((select string_agg(scsql._enc_expr(f.kind, format('%s.%I', p_rec, f.column_name)) || ' || ', '' order by f.ordinal)
                   from scsql._chain_fields(p_table) f where f.part = 'stamped'), '')
      || scsql._chain_payload_expr(p_table, p_rec, p_author)
$$;
comment on function scsql._chain_body_expr(text, text, text) is
  'Private. Generates the SQL expression of a row''s stamped fields followed by its signed payload (see scsql._enc) for chained table p_table, over record p_rec; p_author is the expression of the author agent''s name. The canonical row bytes are int chain_id || int seq || this. The generated insert trigger links a row with row_hash = sha256(prev_hash || int chain_id || int seq || this || signature).';

create or replace function scsql._chain_object_name(p_table text, p_prefix text)
returns text
language sql immutable
as $$
  select p_prefix || case when split_part(p_table, '.', 1) = 'scsql' then split_part(p_table, '.', 2)
                          else replace(p_table, '.', '__') end
$$;
comment on function scsql._chain_object_name(text, text) is
  'Private. Name of a generated object for a chained table (e.g. _chain_insert_tool_calls).';

-- ---------------------------------------------------------------------------
-- Appending to a chain
-- ---------------------------------------------------------------------------

create or replace function scsql._chain_clock_skew()
returns interval
language sql stable
as $$ select coalesce((select s.clock_skew from scsql.chain_settings s), interval '5 minutes') $$;
comment on function scsql._chain_clock_skew() is
  'Private. How far the timestamp of a chained write (or a checkpoint) may be from the server clock: scsql.chain_settings.clock_skew (default 5 minutes), which only administrators change (scsql.set_clock_skew). Session settings have no say. Read by the security-definer trigger and checks, as the owner.';

create or replace function scsql.set_clock_skew(p_clock_skew interval)
returns interval
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_err scsql.violation;
begin
  -- An upsert: a settings row someone removed is written again, never silently
  -- skipped. The range is checked by the table's constraint.
  insert into scsql.chain_settings as s (singleton, clock_skew, updated_at, updated_by)
  values (true, p_clock_skew, now(), session_user)
  on conflict (singleton) do update set clock_skew = excluded.clock_skew, updated_at = excluded.updated_at,
                                        updated_by = excluded.updated_by;
  return p_clock_skew;
exception when check_violation or not_null_violation then
  get stacked diagnostics v_err.returned_sqlstate = returned_sqlstate, v_err.schema_name = schema_name,
    v_err.table_name = table_name, v_err.constraint_name = constraint_name, v_err.column_name = column_name, v_err.message_text = message_text;
  perform scsql._raise_violation(v_err);
end
$$;
comment on function scsql.set_clock_skew(interval) is
  'Administrators only. Sets how far the timestamp of a chained write or a checkpoint may be from the server clock (default 5 minutes; between 1 second and 30 days), writing the settings row again if it was removed. Returns the new tolerance. Raises SC010 for a tolerance out of range.';

create or replace function scsql._chain_check_signer(p_agent bigint, p_key_id integer, p_at timestamptz, p_signature bytea)
returns void
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_key integer;
  v_now timestamptz := clock_timestamp();
begin
  if p_signature is null or length(p_signature) <> 64 then
    raise exception using errcode = 'SC101',
      message = format('a chained write needs a 64-byte Ed25519 signature, got %s',
                       coalesce(length(p_signature)::text || ' bytes', 'none')),
      hint = 'Write through scsql (MCP tools or the Python API), which signs with the agent''s key; the payload is described in COMMENT ON FUNCTION scsql._enc.';
  end if;
  if p_at is null or p_at < v_now - scsql._chain_clock_skew() or p_at > v_now + scsql._chain_clock_skew() then
    raise exception using errcode = 'SC103',
      message = format('the write''s timestamp %s is more than %s from the server clock %s',
                       coalesce(p_at::text, 'NULL'), scsql._chain_clock_skew(), v_now),
      hint = 'Check the client''s clock (NTP).';
  end if;
  select k.key_id into v_key from scsql.agent_keys k
  where k.agent_id = p_agent and k.valid_from <= p_at
  order by k.valid_from desc limit 1;
  if v_key is distinct from p_key_id then
    raise exception using errcode = 'SC102',
      message = format('key %s is not the signing key valid at %s (that is key %s)',
                       coalesce(p_key_id::text, 'NULL'), p_at, coalesce(v_key::text, 'none')),
      hint = 'The agent''s key was rotated: restart the agent process so it loads its current key.';
  end if;
end
$$;
comment on function scsql._chain_check_signer(bigint, integer, timestamptz, bytea) is
  'Private. Raises the error for a chained write whose signing fields are wrong (the generated triggers check them inline and call it to report): a 64-byte signature (SC101), a timestamp within scsql.chain_settings.clock_skew of the server clock (SC103), and key_id = the author''s key valid at that time (SC102). The signature itself is checked by verifiers, which hold the public keys; the database has no Ed25519.';

create or replace function scsql._chain_append_only()
returns trigger
language plpgsql
as $$
begin
  -- The one change a chained row admits: scsql.purge removing a digested
  -- text it recorded a purge of (scsql._purge_consents).
  if tg_op = 'UPDATE' and tg_level = 'ROW'
     and scsql._purge_consents((select n.nspname || '.' || c.relname from pg_catalog.pg_class c
                                join pg_catalog.pg_namespace n on n.oid = c.relnamespace
                                where c.oid = coalesce(pg_catalog.pg_partition_root(tg_relid), tg_relid)),
                               pg_catalog.to_jsonb(old), pg_catalog.to_jsonb(new)) then
    return new;
  end if;
  raise exception using errcode = 'SC100',
    message = format('%s is append-only: %s is not allowed',
                     coalesce(pg_catalog.pg_partition_root(tg_relid), tg_relid)::regclass::text, lower(tg_op)),
    hint = 'Chained rows are never changed or removed; record a new row (an outcome, a correction) instead.';
end
$$;
comment on function scsql._chain_append_only() is
  'Private trigger. Rejects UPDATE, DELETE (row level) and TRUNCATE (statement level) on chained tables and their partitions with SC100, except the UPDATE scsql.purge makes: digested texts set to NULL, nothing else changed, each removal recorded in scsql.purges with the digest the row keeps (scsql._purge_consents).';

create or replace function scsql._chain_protect(p_table regclass)
returns void
language plpgsql
as $$
declare
  r record;
begin
  for r in select relid from pg_catalog.pg_partition_tree(p_table) union select p_table loop
    -- Only tables not yet protected (cheap to call from frequent maintenance).
    continue when exists (select from pg_catalog.pg_trigger t where t.tgrelid = r.relid and t.tgname = 'zz_chain_no_truncate');
    execute format('revoke update, delete, truncate on %s from public, scsql_agent, scsql_auditor, scsql_admin, scsql_app, scsql_owner', r.relid::regclass);
    execute format('create trigger zz_chain_no_truncate before truncate on %s for each statement execute function scsql._chain_append_only()', r.relid::regclass);
    if r.relid <> p_table then
      -- Partitions are reached through their parent only; direct access is the owner's and the auditor's.
      execute format('revoke all on %s from public, scsql_agent, scsql_admin, scsql_app', r.relid::regclass);
      perform scsql._secure_table(r.relid::regclass);
    end if;
  end loop;
end
$$;
comment on function scsql._chain_protect(regclass) is
  'Private. Makes a chained table and each of its partitions append-only: revokes UPDATE, DELETE and TRUNCATE from every role (the owner included), adds the TRUNCATE trigger (row triggers are inherited by partitions, statement triggers are not), and puts partitions under forced RLS with no agent access. Tables already protected (they have the TRUNCATE trigger) are skipped, so partition maintenance can call it often.';

create or replace function scsql._chain_checked_author(p_table regclass, p_row anyelement)
returns scsql.agents
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_me scsql.agents := scsql._chain_author(p_row.author_id);
  v_chain bigint;
begin
  if p_row.author_id is not null and p_row.author_id <> v_me.agent_id then
    raise exception using errcode = 'SC011',
      message = format('the row names agent %s as its author, but agent %s is acting', p_row.author_id, v_me.name),
      hint = 'The author is the acting agent; leave author_id unset.';
  end if;
  if p_row.project_id is not null and p_row.project_id <> v_me.project_id then
    raise exception using errcode = 'SC104',
      message = format('the row names project %s, but agent %s belongs to project %s', p_row.project_id, v_me.name, v_me.project_id);
  end if;
  if p_row.seq is not null or p_row.prev_hash is not null or p_row.row_hash is not null then
    raise exception using errcode = 'SC104', message = 'seq, prev_hash and row_hash are assigned by the chain, not by the writer';
  end if;
  -- A bad argument is reported before the signing fields, signed or not:
  -- the table's constraints, which PostgreSQL checks after the trigger.
  perform scsql._check_row(p_table, p_row);
  -- Signing fields: a signature, a timestamp near the server clock, the key valid then.
  perform scsql._chain_check_signer(v_me.agent_id, p_row.key_id, p_row.at, p_row.signature);
  if p_row.chain_id is not null then
    select c.chain_id into v_chain from scsql.chains c
    where c.project_id = v_me.project_id and c.agent_id = v_me.agent_id;
    if v_chain is distinct from p_row.chain_id then
      raise exception using errcode = 'SC104',
        message = format('chain %s is not the acting agent''s chain (%s)', p_row.chain_id, coalesce(v_chain::text, 'none yet')),
        hint = 'Rows join their author''s chain; leave chain_id unset.';
    end if;
  end if;
  return v_me;
end
$$;
comment on function scsql._chain_checked_author(regclass, anyelement) is
  'Private, the slow path of the insert triggers of chained tables, taken by a write that fails their one quick test. The agent row P_ROW of chained table P_TABLE is written for (scsql._chain_author), once nothing is wrong with it. Raises SC011 (another author), SC104 (another project or chain, or chain columns set), the errors of the table''s constraints (scsql._check_row), SC101/SC102/SC103 (signing fields, scsql._chain_check_signer).';

create or replace function scsql._chain_link_sql(p_table text, p_link text default 'chain')
returns text
language plpgsql stable
as $$
begin
  if p_link = 'none' then
    return $l$  new.chain_id := 0; new.seq := 0; new.prev_hash := ''; new.row_hash := '';
  new.author_id := v_agent; new.project_id := v_project;
$l$;
  elsif p_link is distinct from 'chain' and p_link is distinct from 'head' then
    raise exception using errcode = 'SC010', message = format('p_link must be chain, head or none, not %s', p_link);
  end if;
  -- The row's bytes are encoded before the UPDATE of its chain's head: on
  -- Citus that UPDATE is a distributed statement, where functions that are
  -- not immutable (extract, convert_to) may not appear inside COALESCE.
  return coalesce((select string_agg(format('  new.%I := sha256(convert_to(new.%I, ''UTF8''));', d.digest_column, d.column_name), E'\n')
                          || E'\n' from scsql._chain_digests(p_table) d), '')
      || format($l$  v_body := %2$s;
  for i in 1 .. 2 loop
    update scsql.chains c
    set prev_head_hash = c.head_hash,
        head_seq = c.head_seq + 1,
        head_hash = %1$s
    where c.project_id = v_project and c.agent_id = v_agent
    returning c.chain_id, c.head_seq, c.prev_head_hash, c.head_hash, c.agent_id, c.project_id
    into new.chain_id, new.seq, new.prev_hash, new.row_hash, new.author_id, new.project_id;
    exit when found;
    insert into scsql.chains (project_id, agent_id) values (v_project, v_agent)
    on conflict (project_id, agent_id) do nothing;
  end loop;
$l$, case when p_link = 'head' then 'c.head_hash'
          else format('sha256(c.head_hash || %s || %s || v_body || new.signature)',
                      scsql._enc_expr('int', 'c.chain_id'), scsql._enc_expr('int', 'c.head_seq + 1')) end,
       case when p_link = 'head' then 'null' else scsql._chain_body_expr(p_table, 'new', 'v_name') end);
end
$$;
comment on function scsql._chain_link_sql(text, text) is
  'Private, used by scsql._chain_trigger_sql. The statements of the insert trigger of chained table p_table that link the row into its author''s chain: the digests of its digested texts, its bytes encoded inline, and one UPDATE of the chain''s head that hashes them (the head row made first for a new chain); p_link head and none are the reduced forms scsql._chain_trigger_sql describes. Raises SC010 for another p_link.';

-- The insert trigger of a chained table, generated for its fields.
create or replace function scsql._chain_trigger_sql(p_table text, p_link text default 'chain')
returns text
language plpgsql
as $$
begin
  -- The trigger runs once for every chained write, so its common path is
  -- short: one lookup of the acting agent and its signing key, one test of
  -- everything a well-formed write satisfies, the row's bytes encoded inline
  -- (no helper calls per row), and one UPDATE of the chain's head that
  -- hashes them. A write that fails the test takes the slow path,
  -- scsql._chain_checked_author, which raises the precise errors.
  return format($f$
create or replace function scsql.%1$I()
returns trigger
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $body$
declare
  v_agent bigint;
  v_project bigint;
  v_name text;
  v_revoked timestamptz;
  v_key integer;
  v_me scsql.agents;
  v_body bytea;
  v_role text := scsql._acting_role();
begin
  -- A row written as the owner is written by one of scsql's functions, which
  -- named the agent it acts for in author_id (on Citus their statements reach
  -- the shards' nodes as the owner), or by the DBA: it is that agent's row,
  -- checked below like any other. See scsql._chain_author.
  if v_role = 'scsql_owner'%4$s then
    select a.role_name into v_role from scsql.agents a where a.agent_id = new.author_id;
  end if;
  -- The acting agent (the row scsql._me() returns) and its key valid at the row's time.
  select a.agent_id, a.project_id, a.name, a.revoked_at,
         (select k.key_id from scsql.agent_keys k where k.agent_id = a.agent_id and k.valid_from <= new.at
          order by k.valid_from desc limit 1)
    into v_agent, v_project, v_name, v_revoked, v_key
  from scsql.agents a
  where a.role_name = v_role;
  if (v_agent is not null and v_revoked is null
      and (new.author_id is null or new.author_id = v_agent)
      and (new.project_id is null or new.project_id = v_project)
      and new.chain_id is null and new.seq is null and new.prev_hash is null and new.row_hash is null
      and length(new.signature) = 64 and new.key_id = v_key
      and abs(extract(epoch from new.at - clock_timestamp())) <= extract(epoch from scsql._chain_clock_skew())) is not true then
    -- Slow path: find what is wrong and say it.
    v_me := scsql._chain_checked_author(%3$L, new);
    v_agent := v_me.agent_id;
    v_project := v_me.project_id;
    v_name := v_me.name;
  end if;
  -- Link: advancing the head locks its row until commit, so concurrent
  -- writers of one agent queue here and the chain stays linear. The same
  -- statement stamps the author and project from the acting agent.
%2$s  return new;
end
$body$;
$f$, scsql._chain_object_name(p_table, '_chain_insert_'), scsql._chain_link_sql(p_table, p_link), p_table,
  -- An administrator purging another agent's row records the purge in
  -- that agent's chain: scsql.purge is the one writer of scsql.purges.
  case when p_table = 'scsql.purges' then $a$
     or (pg_catalog.pg_has_role(v_role, 'scsql_admin', 'MEMBER') and not exists (select from scsql.agents a where a.role_name = v_role))$a$ end);
end
$$;
comment on function scsql._chain_trigger_sql(text, text) is 'Private. The CREATE FUNCTION statement of the insert trigger of chained table p_table (see scsql._make_chained). p_link chain (the default) links each row into its author''s chain; head and none are reduced forms for measuring where a chained write''s cost goes (scsql bench chain --breakdown, in a scratch database): head advances the head without encoding or hashing the row, none leaves the head alone and gives the chain columns placeholder values. Raises SC010 for another p_link.';

create or replace function scsql._chain_check_fields(p_table regclass, p_name text, p_signed text[], p_stamped text[],
                                                     p_appended text[], p_registered text[])
returns void
language plpgsql stable
as $$
declare
  v_kind text;
  v_col text;
begin
  if p_signed is null or cardinality(p_signed) = 0 or p_stamped is null then
    raise exception using errcode = 'SC105', message = 'p_signed must list at least one column and p_stamped may not be NULL';
  end if;
  -- Appended fields: a list must extend the registered one at its end.
  if array_position(p_appended, null) is not null then
    raise exception using errcode = 'SC105', message = 'p_appended may not contain NULL';
  end if;
  if p_appended[1:cardinality(p_registered)] is distinct from p_registered then
    raise exception using errcode = 'SC107',
      message = format('the appended fields of %s are %s; %s removes or reorders them', p_name, p_registered, p_appended),
      hint = 'Rows already written are signed with each appended field''s position: list the registered ones unchanged, new ones after them.';
  end if;
  if (select count(distinct c) from unnest(p_signed || p_stamped || p_appended) c) <> cardinality(p_signed || p_stamped || p_appended) then
    raise exception using errcode = 'SC105', message = 'a column is listed twice in p_signed/p_stamped/p_appended';
  end if;
  foreach v_col in array p_signed || p_stamped || p_appended loop
    if v_col = any (array['project_id', 'at', 'author_id', 'key_id', 'chain_id', 'seq', 'prev_hash', 'row_hash', 'signature']) then
      raise exception using errcode = 'SC105', message = format('column %s is managed by the chain; do not list it', v_col);
    end if;
    select scsql._enc_kind(a.atttypid::regtype) into v_kind from pg_catalog.pg_attribute a
    where a.attrelid = p_table and a.attname = v_col and not a.attisdropped;
    if not found then
      raise exception using errcode = 'SC105', message = format('%s has no column %s', p_name, v_col);
    end if;
    if v_kind is null then
      raise exception using errcode = 'SC105',
        message = format('column %s.%s has a type the canonical encoding does not define', p_name, v_col),
        hint = 'Chainable types: text, varchar, smallint, integer, bigint, numeric, boolean, timestamptz, bytea, uuid, jsonb.';
    end if;
  end loop;
end
$$;
comment on function scsql._chain_check_fields(regclass, text, text[], text[], text[], text[]) is
  'Private, used by scsql._make_chained. Checks the fields table P_TABLE (named P_NAME) is made chained with: P_SIGNED lists a column, P_STAMPED is not NULL, P_APPENDED holds no NULL and keeps the registered appended fields P_REGISTERED at its start, no column is listed twice or managed by the chain, and each exists with a type the canonical encoding defines. Raises SC105, or SC107 for appended fields removed or reordered.';

create or replace function scsql._chain_add_columns(p_table regclass, p_name text, p_new_appended text[])
returns void
language plpgsql
as $$
declare
  v_col text;
  v_has_rows boolean;
  v_chain_cols constant text[][] := array[
    ['at', 'timestamptz'], ['author_id', 'bigint'], ['key_id', 'integer'], ['chain_id', 'bigint'],
    ['seq', 'bigint'], ['prev_hash', 'bytea'], ['row_hash', 'bytea'], ['signature', 'bytea']];
begin
  -- Chain columns the table lacks (the table must be empty for NOT NULL).
  for i in 1 .. array_length(v_chain_cols, 1) loop
    execute format('alter table %s add column if not exists %I %s', p_table, v_chain_cols[i][1], v_chain_cols[i][2]);
    execute format('alter table %s alter column %I set not null', p_table, v_chain_cols[i][1]);
  end loop;
  execute format('create index if not exists %I on %s (chain_id, seq)',
                 scsql._chain_object_name(p_name, '') || '_chain_idx', p_table);
  -- A newly appended column must be NULL in every row written so far: those rows were hashed and signed without it.
  foreach v_col in array coalesce(p_new_appended, '{}') loop
    execute format('select exists (select from %s where %I is not null)', p_table, v_col) into v_has_rows;
    if v_has_rows then
      raise exception using errcode = 'SC107',
        message = format('rows of %s written before %s was appended have values in it', p_name, v_col),
        hint = 'Add the column without a default (NULL in existing rows), append it, then write values in new rows.';
    end if;
  end loop;
end
$$;
comment on function scsql._chain_add_columns(regclass, text, text[]) is
  'Private, used by scsql._make_chained. Adds to table P_TABLE (named P_NAME) the chain columns it lacks, NOT NULL, and the index on (chain_id, seq). Raises SC107 when a column of P_NEW_APPENDED, appended now, has values in rows already written.';

create or replace function scsql._chain_install_triggers(p_table regclass, p_name text)
returns void
language plpgsql
as $$
declare
  v_fn text := scsql._chain_object_name(p_name, '_chain_insert_');
begin
  execute scsql._chain_trigger_sql(p_name);
  execute format('comment on function scsql.%I() is %L', v_fn,
    format('Private trigger, generated by scsql._make_chained for %s. Stamps the author from the acting role (a row written as scsql_owner: the agent its author_id names, see scsql._chain_author), checks the signing fields and links the row into its author''s chain. Raises SC011 (another author), SC104 (another chain or project, or chain columns set), SC101/SC102/SC103 (signing fields).', p_name));
  execute format('drop trigger if exists zz_chain_insert on %s', p_table);
  execute format('create trigger zz_chain_insert before insert on %s for each row execute function scsql.%I()', p_table, v_fn);
  execute format('drop trigger if exists zz_chain_append_only on %s', p_table);
  execute format('create trigger zz_chain_append_only before update or delete on %s for each row execute function scsql._chain_append_only()', p_table);
  execute format('revoke update, delete, truncate on %s from public, scsql_agent, scsql_auditor, scsql_admin, scsql_app, scsql_owner', p_table);
  perform scsql._chain_protect(p_table);
end
$$;
comment on function scsql._chain_install_triggers(regclass, text) is
  'Private, used by scsql._make_chained. Generates the insert trigger of chained table P_TABLE (named P_NAME; scsql._chain_trigger_sql) and attaches it, the UPDATE/DELETE trigger and the TRUNCATE triggers (scsql._chain_protect), and revokes UPDATE, DELETE and TRUNCATE from every role.';

create or replace function scsql._make_chained(p_table regclass, p_signed text[], p_stamped text[] default '{}',
                                               p_appended text[] default null)
returns void
language plpgsql
as $$
declare
  v_name text;
  v_registered text[];
begin
  select n.nspname || '.' || c.relname into v_name
  from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
  where c.oid = p_table and c.relkind in ('r', 'p') and not c.relispartition;
  if v_name is null then
    raise exception using errcode = 'SC105', message = format('%s is not a table (or is a partition)', p_table);
  end if;
  if not exists (select from pg_catalog.pg_attribute where attrelid = p_table and attname = 'project_id'
                 and atttypid = 'bigint'::regtype and not attisdropped) then
    raise exception using errcode = 'SC105', message = format('%s has no project_id bigint column', v_name),
      hint = 'Chains belong to a project: every chained table carries project_id.';
  end if;
  -- Appended fields: NULL keeps the registered list.
  v_registered := coalesce((select t.appended_fields from scsql.chained_tables t where t.table_name = v_name), '{}');
  p_appended := coalesce(p_appended, v_registered);
  perform scsql._chain_check_fields(p_table, v_name, p_signed, p_stamped, p_appended, v_registered);
  perform scsql._chain_add_columns(p_table, v_name, p_appended[cardinality(v_registered) + 1:]);
  insert into scsql.chained_tables (table_name, signed_fields, stamped_fields, appended_fields)
  values (v_name, p_signed, p_stamped, p_appended)
  on conflict (table_name) do update set signed_fields = excluded.signed_fields, stamped_fields = excluded.stamped_fields,
                                         appended_fields = excluded.appended_fields;
  perform scsql._chain_install_triggers(p_table, v_name);
end
$$;
comment on function scsql._make_chained(regclass, text[], text[], text[]) is $doc$Private; called from sql/ files (it is idempotent and re-run on every migrate). Makes a table chained:
  select scsql._make_chained('scsql.broadcasts', p_signed => array['kind', 'body'], p_stamped => array['broadcast_id']);
The table needs project_id bigint. The call adds the chain columns it lacks (at timestamptz, author_id bigint, key_id integer, chain_id bigint, seq bigint, prev_hash bytea, row_hash bytea, signature bytea; all NOT NULL, so make a table chained while it is empty, or declare them in its migration, which a table partitioned on at must do), an index on (chain_id, seq), registers the table in scsql.chained_tables, generates its insert trigger (zz_chain_insert: author and project stamped from the acting agent, signing fields checked, row linked into the author's chain), the UPDATE/DELETE trigger and the TRUNCATE trigger (SC100), and revokes UPDATE, DELETE and TRUNCATE from every role.
p_signed: the columns the author signs, in payload order; the writing function takes them as arguments together with p_at timestamptz, p_key_id integer and p_signature bytea, which the Python layer supplies (declare its signed fields once with SignedTable, see scsql/audit/signing.py). p_stamped: columns the database fills (identity ids, computed values), hashed into row_hash but not signed; fill them before the insert (defaults, the writing function, or a BEFORE INSERT trigger named before zz_chain_insert).
p_appended: signed columns the table gained after it had rows (add them with ALTER TABLE ... ADD COLUMN, nullable, no default). They are signed in the payload after the p_signed columns, each only when not NULL, as int <position in p_appended> then the field, so rows written before (NULL there) keep their hashes and signatures (see scsql._enc). The list only grows at its end: keep the columns of earlier releases in their order and add new ones after them. NULL (the default) keeps the registered list (none for a new table), so calls without it keep working. In Python, declare them after the plain fields as SignedField(name, kind, default, appended=True).
Raises SC105 for a table without project_id, an unknown, repeated or managed column, NULL in p_appended, or a type the canonical encoding (scsql._enc) does not define; SC107 when p_appended removes or reorders the registered appended fields, or appends a column that rows already written have values in.$doc$;

create or replace function scsql._chain_part_expr(p_table text)
returns text
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_rel regclass := p_table::regclass;
  v_citus boolean := false;
  v_case text;
  v_default oid;
begin
  if scsql_caller.citus() then
    execute 'select exists (select from pg_catalog.pg_dist_partition where logicalrelid = $1)' into v_citus using v_rel;
  end if;
  if not v_citus then
    return 'tableoid::oid';
  end if;
  -- On Citus a row is read on a worker, where tableoid is the oid of the
  -- shard there: the partition is named by the coordinator's oid, as a
  -- constant, chosen by the row's time as PostgreSQL chose it (lower bound
  -- included, upper bound excluded, else the default partition).
  if (select c.relkind from pg_catalog.pg_class c where c.oid = v_rel) <> 'p' then
    return format('%s::oid', v_rel::oid);
  end if;
  select string_agg(format('when at >= %L::timestamptz and at < %L::timestamptz then %s::oid',
                           to_char(p.lower_bound at time zone 'UTC', 'YYYY-MM-DD HH24:MI:SS.US+00'),
                           to_char(p.upper_bound at time zone 'UTC', 'YYYY-MM-DD HH24:MI:SS.US+00'), p.partition::oid),
                    ' ' order by p.lower_bound) filter (where not p.is_default),
         max(p.partition::oid) filter (where p.is_default)
  into v_case, v_default
  from scsql._partitions(v_rel) p;
  return format('(case %s else %s end)', coalesce(v_case, 'when false then null'), coalesce(v_default::text || '::oid', 'null::oid'));
end
$$;
comment on function scsql._chain_part_expr(text) is
  'Private, for _chain_scan_sql and _chain_row_at. The SQL expression, over a row of chained table P_TABLE, that gives the oid of the partition holding the row (a relid of scsql._chain_partitions): tableoid on one server; on Citus, where tableoid is the oid of a shard on a worker, the table''s oid, or for a partitioned table the oid of the partition whose bounds hold the row''s at (the default partition otherwise), all constants of the coordinator.';

create or replace function scsql._chain_scan_sql(p_table text)
returns text
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  select format('select chain_id, seq, at, key_id, author_id, prev_hash, row_hash, signature, project_id, %s%s from %s where chain_id between %%s and %%s order by chain_id, seq',
                scsql._chain_part_expr(t.table_name),
                coalesce((select string_agg(format(', %I', f.column_name), ''
                                            order by case f.part when 'stamped' then 1 when 'signed' then 2 else 3 end, f.ordinal)
                          from scsql._chain_fields(p_table) f), '')
                || coalesce((select string_agg(format(', %I', d.digest_column), '') || ', ' || quote_ident(min(d.id_column))
                             from scsql._chain_digests(p_table) d), ''),
                t.table_name)
  from scsql.chained_tables t where t.table_name = p_table
$$;
comment on function scsql._chain_scan_sql(text) is
  'Private. The query that streams every row of one chained table ordered by (chain_id, seq): chain_id, seq, at, key_id, author_id, prev_hash, row_hash, signature, project_id, the oid of the partition holding the row (see scsql._chain_partitions), then the stamped, the signed and the appended fields in canonical order (scsql._chain_fields), then, for a table with digested fields, their digest columns and the row''s id (scsql._chain_digests). Two placeholders bound the chain_ids (inclusive), so verifiers split the chains between processes in ranges that together cover every bigint (rows naming a chain with no head row are read too) and each process reads its rows in index order, without a sort.';

-- ---------------------------------------------------------------------------
-- Verification in SQL (chain only; signatures are checked by scsql verify)
-- ---------------------------------------------------------------------------

create or replace function scsql._chain_gap(
  p_from bigint, p_to bigint, p_firsts bigint[], p_lasts bigint[], p_retired boolean[], p_legacy bigint,
  out ok boolean, out legacy_used boolean, out missing_at bigint, out detail text)
language plpgsql immutable
as $$
declare
  s bigint := p_from;
  v_cover boolean;
  v_retired boolean;
  v_next bigint;
  v_skip bigint;
  v_in_segment boolean := false;
  i integer;
begin
  ok := true;
  legacy_used := false;
  while s <= p_to loop
    v_cover := false; v_retired := true; v_skip := null; v_next := null;
    for i in 1 .. coalesce(cardinality(p_firsts), 0) loop
      if p_firsts[i] <= s and s <= p_lasts[i] then
        v_cover := true;
        v_retired := v_retired and p_retired[i];
        v_skip := least(coalesce(v_skip, p_lasts[i]), p_lasts[i]);
      elsif p_firsts[i] > s then
        v_next := least(coalesce(v_next, p_firsts[i]), p_firsts[i]);
      end if;
    end loop;
    if v_cover and v_retired then
      s := v_skip + 1;
      v_in_segment := true;
    elsif not v_cover and s <= p_legacy then
      legacy_used := true;
      v_in_segment := false;
      s := least(coalesce(v_next, p_legacy + 1), p_legacy + 1);
    else
      ok := false;
      missing_at := s;
      detail := format('seq %s was not retired: %s', s,
                       case when v_cover and v_retired is null then 'its partition was dropped, but not by retention'
                            when v_cover then 'its partition still exists' else 'no checkpoint segment holds it' end);
      return;
    end if;
  end loop;
  -- The row after the gap must link to a signed hash: a gap ending among
  -- retired segments ends at the end of one.
  if v_in_segment and not p_to = any (p_lasts) then
    ok := false;
    legacy_used := false;
    missing_at := p_to;
    detail := format('the missing rows end at seq %s, inside a retired segment, not at a signed end', p_to);
  end if;
end
$$;
comment on function scsql._chain_gap(bigint, bigint, bigint[], bigint[], boolean[], bigint) is
  'Private, used by scsql.verify_chain (scsql._chain_run_break). Whether every seq from P_FROM to P_TO may be missing from a chain: each lies in checkpoint segments (P_FIRSTS..P_LASTS) whose partitions were all retired (P_RETIRED: true when retention retired it, false when it exists, NULL when it is gone but retention did not retire it), or in no segment and at or below the anchored horizon P_LEGACY of earlier versions; and a gap ending among retired segments ends at the end of one (so the row after it links to the hash a checkpoint signed). Returns ok, whether the horizon was needed, and otherwise the seq at fault and why (detail).';

create or replace function scsql._chain_dropped(p_chain bigint, p_seq bigint,
  out part text, out first_seq bigint, out last_seq bigint, out detail text)
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_variable
declare
  v_parts text[] := array(select p.part from scsql._chain_partitions() p);
  -- Values, not subqueries: on Citus the query below runs on every shard.
  v_retired text[] := array(select r.part from scsql.partition_retirements() r where r.ok);
begin
  -- A segment holding P_SEQ whose dated partition is gone without a valid retirement record.
  select g.part into part from scsql.checkpoint_segments g
  where g.chain_id = p_chain and g.first_seq <= p_seq and p_seq <= g.last_seq
    and g.part like '%@%' and g.part not like '%@default' and not g.part = any (v_parts)
    and not g.part = any (v_retired)
  order by g.checkpoint_id limit 1;
  if part is null then
    return;
  end if;
  select min(g.first_seq), max(g.last_seq) into first_seq, last_seq
  from scsql.checkpoint_segments g where g.chain_id = p_chain and g.part = part;
  select r.detail into detail from scsql.partition_retirements() r where r.part = part order by r.retired_at desc limit 1;
  detail := format('seq %s to %s of chain %s lay in partition %s (from %s, one day), which is gone but was not retired by retention: %s',
                   first_seq, last_seq, p_chain, part, split_part(part, '@', 2),
                   coalesce('its retirement record does not hold up (' || detail || ')', 'there is no retirement record'));
end
$$;
comment on function scsql._chain_dropped(bigint, bigint) is
  'Private, used by scsql.verify_chain (scsql._chain_run_break and _chain_anchor_break). When a checkpoint segment puts seq P_SEQ of chain P_CHAIN in a dated partition that is gone although retention did not retire it (no record in scsql.partition_retirements, or one that does not hold up): the partition''s name, the first and last seq the checkpoints place in it for this chain, and a detail naming them; NULLs otherwise.';

create or replace function scsql._chain_located(p_chain bigint, out projects bigint[], out tables text[])
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_legs text;
begin
  -- One server: NULLs, every read of the chain is by chain_id alone, of
  -- every chained table. On Citus, whose tables are sharded by project, a
  -- read by chain_id alone goes to every shard: the projects holding
  -- anything of the chain (its row, checkpoint heads and segments, chained
  -- rows), and the chained tables holding its rows, are found once, by one
  -- query the workers answer whole (a union with the project in the same
  -- column of every part, grouped by it), and each later read names them.
  -- It goes to their shards only and sees every row reading every shard
  -- would: a row moved to another project, or written to another table,
  -- is read and found there.
  if not scsql_caller.citus() then
    return;
  end if;
  select string_agg(format('select t.project_id, %L as tbl from %s t where t.chain_id = $1', ct.table_name, ct.table_name),
                    ' union all ')
  into v_legs from scsql.chained_tables ct;
  execute 'select coalesce(array_agg(distinct p.project_id order by p.project_id), ''{}''), '
       || 'coalesce(array_agg(distinct p.tbl order by p.tbl) filter (where p.tbl is not null), ''{}'') '
       || 'from (select u.project_id, u.tbl from ('
       || 'select c.project_id, null::text as tbl from scsql.chains c where c.chain_id = $1 '
       || 'union all select h.project_id, null from scsql.checkpoint_heads h where h.chain_id = $1 '
       || 'union all select g.project_id, null from scsql.checkpoint_segments g where g.chain_id = $1'
       || coalesce(' union all ' || v_legs, '') || ') u group by u.project_id, u.tbl) p'
  into projects, tables using p_chain;
end
$$;
-- On Citus, over one connection to each worker: the locator's tasks are
-- small index reads, and the connections Citus would open to run them side
-- by side (it keeps one a worker between transactions) cost more than they save.
do $$
begin
  if scsql_caller.citus() then
    alter function scsql._chain_located(bigint) set citus.max_adaptive_executor_pool_size = 1;
  end if;
end
$$;
comment on function scsql._chain_located(bigint) is
  'Private, used by scsql.verify_chain. On Citus, found by one query over every shard: PROJECTS, the projects that hold anything of chain P_CHAIN (its row in scsql.chains, checkpoint heads and segments, rows of chained tables), and TABLES, the chained tables that hold rows of it; NULLs on one server. verify_chain''s reads of the chain name the projects (NULL: every project), so that Citus sends each to those projects'' shards only, and its read of the rows reads those tables only (NULL: every chained table).';

create or replace function scsql._chain_identity_break(p_chain bigint, p_row scsql.chains, p_projects bigint[],
  out broken_seq bigint, out kind text, out detail text)
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_agent scsql.agents;
  v_seq bigint;
  r record;
begin
  if p_row.chain_id is null then
    select h.seq into v_seq from scsql.checkpoint_heads h where h.chain_id = p_chain and (p_projects is null or h.project_id = any(p_projects))
    order by h.seq desc limit 1;
    if found then
      broken_seq := v_seq; kind := 'chain-missing';
      detail := format('a checkpoint covers chain %s up to seq %s, but the chain no longer exists', p_chain, v_seq);
      return;
    end if;
    raise exception using errcode = 'SC106', message = format('chain %s does not exist', coalesce(p_chain::text, 'NULL'));
  end if;
  -- Whose chain it is: the agent's project, and what checkpoints recorded.
  select * into v_agent from scsql.agents a where a.agent_id = p_row.agent_id;
  if not found or v_agent.project_id <> p_row.project_id then
    broken_seq := 0; kind := 'chain-identity';
    detail := format('the chain belongs to project %s, but its agent %s %s', p_row.project_id, p_row.agent_id,
                     case when v_agent.agent_id is null then 'does not exist' else format('belongs to project %s', v_agent.project_id) end);
    return;
  end if;
  select h.checkpoint_id, h.project_id, h.agent_id into r from scsql.checkpoint_heads h
  where h.chain_id = p_chain and (p_projects is null or h.project_id = any(p_projects))
    and (h.project_id <> p_row.project_id or h.agent_id <> p_row.agent_id)
  order by h.checkpoint_id limit 1;
  if found then
    broken_seq := 0; kind := 'chain-identity';
    detail := format('checkpoint %s recorded the chain in project %s for agent %s; it is now in project %s for agent %s',
                     r.checkpoint_id, r.project_id, coalesce(r.agent_id::text, '?'), p_row.project_id, p_row.agent_id);
    return;
  end if;
  -- A horizon left by retention of earlier versions is trusted only at a checkpointed head.
  if p_row.horizon_seq > 0 then
    -- A statement of its own (Citus plans no EXISTS subquery over the
    -- shards of every project).
    perform from scsql.checkpoint_heads h
    where h.chain_id = p_chain and (p_projects is null or h.project_id = any(p_projects)) and h.seq = p_row.horizon_seq
      and h.row_hash = p_row.horizon_hash
    limit 1;
    if not found then
      broken_seq := p_row.horizon_seq; kind := 'horizon-unanchored';
      detail := format('the chain''s horizon (seq %s) is not the head of any checkpoint', p_row.horizon_seq);
    end if;
  end if;
end
$$;
comment on function scsql._chain_identity_break(bigint, scsql.chains, bigint[]) is
  'Private, used by scsql.verify_chain. The first break in what chain P_CHAIN (its row P_ROW of scsql.chains, NULLs when there is none; its checkpoints read in projects P_PROJECTS, NULL: all, see scsql._chain_located) is, before its rows are read: chain-missing (a checkpoint names a chain that is gone), chain-identity (broken_seq 0: the chain''s agent is gone or of another project, or a checkpoint recorded another project or agent), horizon-unanchored (the horizon is not a checkpointed head); NULLs when there is none. Raises SC106 for a chain no checkpoint knows.';

create or replace function scsql._chain_segments(p_chain bigint, p_projects bigint[],
  out firsts bigint[], out lasts bigint[], out retired boolean[], out gone int8multirange)
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_parts text[] := array(select p.part from scsql._chain_partitions() p);
  -- A gone partition counts as retired only with a retirement record that holds up.
  v_retirements text[] := array(select x.part from scsql.partition_retirements() x where x.ok);
begin
  select array_agg(g.first_seq order by g.first_seq, g.last_seq), array_agg(g.last_seq order by g.first_seq, g.last_seq),
         array_agg(case when not g.gone then false when g.part = any (v_retirements) then true end
                   order by g.first_seq, g.last_seq),
         range_agg(int8range(g.first_seq, g.last_seq, '[]')) filter (where g.gone)
  into firsts, lasts, retired, gone
  from (select distinct g.first_seq, g.last_seq, g.part,
               g.part like '%@%' and g.part not like '%@default' and not g.part = any (v_parts) as gone
        from scsql.checkpoint_segments g
        where g.chain_id = p_chain and (p_projects is null or g.project_id = any(p_projects))) g;
end
$$;
comment on function scsql._chain_segments(bigint, bigint[]) is
  'Private, used by scsql.verify_chain. The segments checkpoints signed for chain P_CHAIN (read in projects P_PROJECTS, NULL: all, see scsql._chain_located), in seq order: their first and last seqs, whether each one''s partition was retired (true: gone and retired by retention; false: it exists; NULL: gone otherwise; see scsql._chain_gap), and the seqs of the segments whose partition is gone (where no row may be present).';

create or replace function scsql._chain_row_fault(
  p_author bigint, p_project bigint, p_row_hash bytea, p_computed bytea, p_content text, p_first_seq bigint,
  p_seq bigint, p_signed_differs boolean, p_chain_agent bigint, p_chain_project bigint)
returns text
language sql immutable parallel safe
as $$
  select case when p_author <> p_chain_agent then 'wrong-author'
              when p_project <> p_chain_project then 'wrong-project'
              when p_computed <> p_row_hash then 'hash-mismatch'
              when p_content is not null then p_content
              when p_first_seq < p_seq then 'replay'
              when p_signed_differs then 'checkpoint-mismatch' end
$$;
comment on function scsql._chain_row_fault(bigint, bigint, bytea, bytea, text, bigint, bigint, boolean, bigint, bigint) is
  'Private, inlined where scsql._chain_walk evaluates it for each row. The first fault of one row of a chain, by what the row holds, in this order: wrong-author, wrong-project, hash-mismatch (P_COMPUTED, the hash of its content, is not its row_hash), the content fault of scsql._chain_content_expr, replay (P_FIRST_SEQ, the first seq with its signature in its table, is before it), checkpoint-mismatch (a checkpoint signed another hash for it); NULL for none.';

create or replace function scsql._chain_fault_detail(
  p_kind text, p_author bigint, p_project bigint, p_first_seq bigint, p_chain_agent bigint, p_chain_project bigint)
returns text
language sql stable
as $$
  select case p_kind
    when 'wrong-author' then format('the row names author %s in the chain of agent %s', p_author, p_chain_agent)
    when 'wrong-project' then format('the row is in project %s, its chain in project %s', p_project, p_chain_project)
    when 'hash-mismatch' then 'row_hash does not match the row''s content'
    when 'content-mismatch' then 'a text of the row is not the one its digest was made of'
    when 'purge-unrecorded' then 'a text of the row is gone, and no purge recorded in scsql.purges removed it'
    when 'replay' then format('the row repeats seq %s: the same signed write, stored twice', p_first_seq)
    when 'checkpoint-mismatch' then 'row_hash differs from the one a checkpoint signed' end
$$;
comment on function scsql._chain_fault_detail(text, bigint, bigint, bigint, bigint, bigint) is
  'Private, used by scsql._chain_walk. The detail of a row fault P_KIND that scsql._chain_row_fault found, from the row''s author, project and first seq with its signature and the chain''s agent and project.';

create or replace function scsql._chain_rows_sql(p_projects bigint[], p_tables text[])
returns text
language plpgsql stable
as $$
declare
  v_query text;
  -- The projects as a constant, named again for each table a content check
  -- reads (scsql.purges): Citus prunes the shards of a query it pushes down
  -- by the constants every table in it is read by.
  v_in text := case when p_projects is not null then format(' and t.project_id = any(%L::bigint[])', p_projects) else '' end;
begin
  select string_agg(format('select t.seq, t.prev_hash, t.row_hash, t.author_id, t.project_id, sha256(t.prev_hash || scsql._enc_int(t.chain_id) || scsql._enc_int(t.seq) || %s || t.signature) as computed, %L as tbl, t.signature, %s as content from %s t where t.chain_id = $1%s and t.seq > $2',
                           scsql._chain_body_expr(ct.table_name, 't', '$3'), ct.table_name,
                           replace(scsql._chain_content_expr(ct.table_name, 't'), 'where p.project_id = t.project_id',
                                   'where p.project_id = t.project_id' || replace(v_in, 't.', 'p.')),
                           ct.table_name, v_in), ' union all ')
  into v_query from scsql.chained_tables ct
  where p_tables is null or ct.table_name = any(p_tables);
  -- The chain's rows and the hashes checkpoints signed are read first, each
  -- by chain_id (in the projects P_PROJECTS that hold anything of the chain,
  -- NULL: every project; a row moved to another project is read too, and found),
  -- and then compared. On Citus the tables are sharded by project: each
  -- MATERIALIZED part is read from those projects' shards (the union of the
  -- chained tables in one query, the project in the same column of every
  -- part), and the comparison runs on the coordinator (a join of the parts
  -- would be a join of tables on other columns than the one they are sharded
  -- by, which Citus refuses).
  return 'with x as materialized (select * from (' || v_query || ') u), '
      || 'e as materialized (select s.seq, array_agg(distinct s.row_hash) as hashes from ('
      || 'select h.seq, h.row_hash from scsql.checkpoint_heads h where h.chain_id = $1'
      || replace(v_in, 't.', 'h.') || ' union all select g.last_seq, g.row_hash from scsql.checkpoint_segments g '
      || 'where g.chain_id = $1' || replace(v_in, 't.', 'g.') || ') s group by s.seq) '
      || 'select x.*, (e.seq is not null and (cardinality(e.hashes) > 1 or e.hashes[1] <> x.row_hash)) as signed_differs, '
      || 'coalesce(x.seq <@ $4, false) as gone, min(x.seq) over (partition by x.tbl, x.signature) as first_seq, '
      || 'count(*) over (partition by x.seq) as copies from x left join e on e.seq = x.seq order by x.seq';
end
$$;
comment on function scsql._chain_rows_sql(bigint[], text[]) is
  'Private, used by scsql._chain_walk. The query of the rows of one chain ($1) after seq $2, in seq order, over every chained table, or the tables P_TABLES unless NULL ($3: the author''s name; only in the projects P_PROJECTS unless NULL, see scsql._chain_located): each row''s seq, prev_hash, row_hash, author_id, project_id, computed (the hash of its content), tbl, signature, content (scsql._chain_content_expr), signed_differs (a checkpoint signed another hash for its seq), gone (its seq is in $4, segments whose partition is gone), first_seq (the first seq with its signature in its table), and copies (rows with its seq); NULL when no table is chained.';

create or replace function scsql._chain_anchor_break(p_chain bigint, p_seq bigint, p_gone int8multirange, p_legacy bigint,
  p_next_seq bigint, out broken_seq bigint, out kind text, out detail text)
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_dropped record;
begin
  -- The row the starting checkpoint names is missing: only retention may have taken it.
  select * into v_dropped from scsql._chain_dropped(p_chain, p_seq);
  if v_dropped.part is not null then
    broken_seq := p_seq; kind := 'partition-dropped'; detail := v_dropped.detail;
  elsif not (coalesce(p_seq <@ p_gone, false) or p_seq <= p_legacy) then
    broken_seq := coalesce(p_next_seq, p_seq);
    kind := case when p_next_seq is null then 'checkpoint-mismatch' else 'seq-gap' end;
    detail := format('seq %s, the row the starting checkpoint names, is missing', p_seq);
  end if;
end
$$;
comment on function scsql._chain_anchor_break(bigint, bigint, int8multirange, bigint, bigint) is
  'Private, used by scsql._chain_walk. The break when seq P_SEQ of chain P_CHAIN, the row the starting checkpoint names, is missing: partition-dropped (its partition is gone though retention did not retire it), else, unless P_GONE (segments whose partition is gone) or the horizon P_LEGACY holds it, seq-gap at P_NEXT_SEQ, the first row present after it, or checkpoint-mismatch at P_SEQ when no row follows; NULLs when it may be missing.';

create or replace function scsql._chain_run_break(
  p_chain scsql.chains, p_from bigint, p_to bigint, p_at_head boolean,
  p_firsts bigint[], p_lasts bigint[], p_retired boolean[], p_legacy bigint,
  out covered boolean, out prev_hash bytea, out broken_seq bigint, out kind text, out detail text)
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_gap record;
  v_dropped record;
  v_hashes bytea[];
begin
  select * into v_gap from scsql._chain_gap(p_from, p_to, p_firsts, p_lasts, p_retired, p_legacy);
  covered := v_gap.ok;
  if not v_gap.ok then
    select * into v_dropped from scsql._chain_dropped(p_chain.chain_id, v_gap.missing_at);
    if v_dropped.part is not null then
      broken_seq := v_gap.missing_at; kind := 'partition-dropped'; detail := v_dropped.detail;
    elsif not p_at_head then
      broken_seq := p_to + 1; kind := 'seq-gap';
      detail := format('expected seq %s, found %s: rows are missing (%s)', p_from, p_to + 1, v_gap.detail);
    end if;
    return;
  end if;
  -- The row before a retired run is known by the hash a checkpoint signed for it.
  v_hashes := array(select distinct e.row_hash from scsql.checkpoint_segments e
                    where e.chain_id = p_chain.chain_id and e.last_seq = p_to);
  if cardinality(v_hashes) > 1 then
    broken_seq := case when p_at_head then p_from else p_to + 1 end; kind := 'checkpoint-mismatch';
    detail := format('checkpoints signed different hashes for seq %s, %s', p_to,
                     case when p_at_head then 'the chain''s head' else 'the last row missing before this one' end);
    return;
  end if;
  prev_hash := v_hashes[1];
  if prev_hash is null and p_to = p_legacy then
    prev_hash := p_chain.horizon_hash;
  end if;
end
$$;
comment on function scsql._chain_run_break(scsql.chains, bigint, bigint, boolean, bigint[], bigint[], boolean[], bigint) is
  'Private, used by scsql.verify_chain. Whether the rows P_FROM to P_TO of chain P_CHAIN may be missing (scsql._chain_gap over the segments P_FIRSTS, P_LASTS, P_RETIRED and the horizon P_LEGACY) and, when they may (covered), prev_hash: the hash a checkpoint signed for P_TO (the horizon''s hash at the horizon), which the next row must link to. Otherwise the break: partition-dropped (at the first row missing whose partition is gone though retention did not retire it), or seq-gap at P_TO + 1, except at the end of the chain (P_AT_HEAD), where the caller finds the rows end early. checkpoint-mismatch when checkpoints signed different hashes for P_TO.';

create or replace function scsql._chain_walk(
  p_chain scsql.chains, p_seq bigint, p_prev bytea, p_legacy bigint,
  p_firsts bigint[], p_lasts bigint[], p_retired boolean[], p_gone int8multirange, p_projects bigint[], p_tables text[],
  out rows_checked bigint, out last_seq bigint, out last_hash bytea, out broken_seq bigint, out kind text, out detail text)
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_query text := scsql._chain_rows_sql(p_projects, p_tables);
  v_pending boolean := p_seq > 0;  -- the row the starting checkpoint names is checked too
  v_name text;
  v_run record;
  v_fault text;
  r record;
begin
  rows_checked := 0; last_seq := p_seq; last_hash := p_prev;
  if v_query is null then
    return;
  end if;
  select a.name into v_name from scsql.agents a where a.agent_id = p_chain.agent_id;
  for r in execute v_query using p_chain.chain_id, p_seq - v_pending::integer, v_name, p_gone loop
    rows_checked := rows_checked + 1;
    v_fault := scsql._chain_row_fault(r.author_id, r.project_id, r.row_hash, r.computed, r.content, r.first_seq, r.seq,
                                      r.signed_differs, p_chain.agent_id, p_chain.project_id);
    if r.gone then
      broken_seq := r.seq; kind := 'retired-row-present';
      detail := 'a checkpoint segment places this row in a partition that no longer exists';
      return;
    elsif r.copies > 1 or (r.seq = last_seq and not v_pending) then
      -- Another row has this seq: a fork, whichever of them comes first.
      broken_seq := r.seq; kind := 'fork'; detail := format('two rows have seq %s', r.seq);
      return;
    end if;
    if v_pending then
      v_pending := false;
      if r.seq = last_seq then
        -- The row the starting checkpoint names: it must be that row, unaltered.
        if r.row_hash <> last_hash then
          broken_seq := r.seq; kind := 'checkpoint-mismatch';
          detail := 'the row differs from the one the starting checkpoint signed';
        elsif v_fault in ('wrong-author', 'wrong-project', 'hash-mismatch', 'content-mismatch', 'purge-unrecorded') then
          broken_seq := r.seq; kind := v_fault;
          detail := scsql._chain_fault_detail(v_fault, r.author_id, r.project_id, r.first_seq, p_chain.agent_id, p_chain.project_id);
        end if;
        if kind is not null then
          return;
        end if;
        continue;
      end if;
      select * into broken_seq, kind, detail from scsql._chain_anchor_break(p_chain.chain_id, last_seq, p_gone, p_legacy, r.seq);
      if kind is not null then
        return;
      end if;
    end if;
    if r.seq > last_seq + 1 then
      select * into v_run from scsql._chain_run_break(p_chain, last_seq + 1, r.seq - 1, false, p_firsts, p_lasts, p_retired, p_legacy);
      if v_run.kind is not null then
        broken_seq := v_run.broken_seq; kind := v_run.kind; detail := v_run.detail;
        return;
      end if;
      last_hash := v_run.prev_hash;
    end if;
    if last_hash is not null and r.prev_hash <> last_hash then
      broken_seq := r.seq; kind := 'prev-mismatch';
      detail := 'prev_hash is not the row_hash of the previous row';
      return;
    elsif v_fault is not null then
      broken_seq := r.seq; kind := v_fault;
      detail := scsql._chain_fault_detail(v_fault, r.author_id, r.project_id, r.first_seq, p_chain.agent_id, p_chain.project_id);
      return;
    end if;
    last_seq := r.seq;
    last_hash := r.row_hash;
  end loop;
  if v_pending then  -- no row from the starting checkpoint's on
    select * into broken_seq, kind, detail from scsql._chain_anchor_break(p_chain.chain_id, last_seq, p_gone, p_legacy, null);
  end if;
end
$$;
comment on function scsql._chain_walk(scsql.chains, bigint, bytea, bigint, bigint[], bigint[], boolean[], int8multirange, bigint[], text[]) is
  'Private, used by scsql.verify_chain. Reads the rows of chain P_CHAIN (in projects P_PROJECTS, NULL: all, and chained tables P_TABLES, NULL: all, see scsql._chain_located) after seq P_SEQ (and the row at P_SEQ, which must have hash P_PREV, when P_SEQ > 0: a starting checkpoint''s head) in seq order and checks each: not in a gone partition (P_GONE), no fork, runs of missing rows allowed by the segments and the horizon P_LEGACY (scsql._chain_run_break), prev_hash linking to the row before, and no fault (scsql._chain_row_fault). Returns the rows checked, the last seq and hash reached, and the first break (NULLs when none).';

create or replace function scsql._chain_end_break(
  p_chain scsql.chains, p_seq bigint, p_prev bytea, p_legacy bigint, p_firsts bigint[], p_lasts bigint[], p_retired boolean[],
  p_projects bigint[], out broken_seq bigint, out kind text, out detail text)
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_end bigint := p_seq;
  v_prev bytea := p_prev;
  v_cp_seq bigint;
  v_run record;
begin
  -- The end: the recorded head, possibly in retired rows.
  if p_seq < p_chain.head_seq then
    select * into v_run from scsql._chain_run_break(p_chain, p_seq + 1, p_chain.head_seq, true, p_firsts, p_lasts, p_retired, p_legacy);
    if v_run.kind is not null then
      broken_seq := v_run.broken_seq; kind := v_run.kind; detail := v_run.detail;
      return;
    elsif v_run.covered then
      v_end := p_chain.head_seq;
      v_prev := v_run.prev_hash;
    end if;
  end if;
  -- The newest checkpoint must still be in the chain (a removed tail is found here).
  select max(h.seq) into v_cp_seq from scsql.checkpoint_heads h
  where h.chain_id = p_chain.chain_id and (p_projects is null or h.project_id = any(p_projects));
  if v_cp_seq > v_end then
    broken_seq := v_end + 1; kind := 'checkpoint-mismatch';
    detail := format('checkpoint covers seq %s but the chain ends at seq %s', v_cp_seq, v_end);
  elsif v_end <> p_chain.head_seq or v_prev is distinct from p_chain.head_hash then
    broken_seq := v_end + 1; kind := 'head-mismatch';
    detail := format('the chain''s head is seq %s but its rows end at seq %s', p_chain.head_seq, v_end);
  end if;
end
$$;
comment on function scsql._chain_end_break(scsql.chains, bigint, bytea, bigint, bigint[], bigint[], boolean[], bigint[]) is
  'Private, used by scsql.verify_chain. The break at the end of chain P_CHAIN (its checkpoints read in projects P_PROJECTS, NULL: all), whose rows present end at seq P_SEQ with hash P_PREV: rows missing up to the recorded head that retention did not retire (scsql._chain_run_break), a checkpoint covering rows past the end (checkpoint-mismatch: the tail was removed), or an end that is not the recorded head (head-mismatch); NULLs when there is none.';

create or replace function scsql.verify_chain(
  p_chain bigint, p_from_checkpoint bigint default null,
  out chain_id bigint, out ok boolean, out rows_checked bigint, out broken_seq bigint, out kind text, out detail text)
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_chain scsql.chains;
  v_seq bigint := 0;
  v_prev bytea := '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea;
  v_legacy bigint := 0;
  v_seg record;
  v_walk record;
  v_projects bigint[];
  v_tables text[];
begin
  chain_id := p_chain;
  rows_checked := 0;
  ok := false;
  -- NULLs on one server: every project, every chained table
  select l.projects, l.tables into v_projects, v_tables from scsql._chain_located(p_chain) l;
  select * into v_chain from scsql.chains c
  where c.chain_id = p_chain and (v_projects is null or c.project_id = any(v_projects));
  select * into broken_seq, kind, detail from scsql._chain_identity_break(p_chain, v_chain, v_projects);
  if kind is not null then
    return;
  end if;
  if v_chain.horizon_seq > 0 then
    v_legacy := v_chain.horizon_seq;
  end if;
  if p_from_checkpoint is not null then
    select h.seq, h.row_hash into v_seq, v_prev from scsql.checkpoint_heads h
    where h.checkpoint_id = p_from_checkpoint and h.chain_id = p_chain
      and (v_projects is null or h.project_id = any(v_projects));
    if not found then
      raise exception using errcode = 'SC010',
        message = format('checkpoint %s has no head for chain %s', p_from_checkpoint, p_chain);
    end if;
  end if;
  -- Segments checkpoints signed: where rows may be missing (their partition
  -- was retired), and where rows may not be present (gone).
  select * into v_seg from scsql._chain_segments(p_chain, v_projects);
  select * into v_walk from scsql._chain_walk(v_chain, v_seq, v_prev, v_legacy, v_seg.firsts, v_seg.lasts, v_seg.retired,
                                              v_seg.gone, v_projects, v_tables);
  rows_checked := v_walk.rows_checked;
  broken_seq := v_walk.broken_seq; kind := v_walk.kind; detail := v_walk.detail;
  if kind is null then
    select * into broken_seq, kind, detail
    from scsql._chain_end_break(v_chain, v_walk.last_seq, v_walk.last_hash, v_legacy, v_seg.firsts, v_seg.lasts, v_seg.retired,
                                v_projects);
  end if;
  ok := kind is null;
end
$$;
comment on function scsql.verify_chain(bigint, bigint) is
  'Auditor. Re-computes chain P_CHAIN in SQL, every row still present (or, with checkpoint P_FROM_CHECKPOINT, the row at its head, which must be present, unless retention retired it, and have the signed hash, and those after it): every row''s seq follows the previous one, prev_hash is the previous row_hash, row_hash = sha256(prev_hash || canonical row bytes || signature) (see scsql._enc), the row''s author and project are the chain''s, no signature occurs twice among the chain''s rows of one table, and rows a checkpoint signed still have the signed hash. Rows may be missing only where checkpoint segments place them in a partition that is gone and that retention retired (a record in scsql.partition_retirements that holds up against the settings log) (or, for retention of earlier versions, at or below a horizon that is a checkpointed head), and no row may be present there; a run of missing rows ends at the end of such a segment (or in the horizon''s range), and the row after it must link to the hash the checkpoints signed for that end. Returns chain_id, ok, rows_checked and, for the first break, broken_seq and kind: seq-gap (rows missing before broken_seq), partition-dropped (broken_seq is the first missing row: a segment places it in a partition that is gone though retention did not retire it; detail names the seqs the checkpoints place there and the partition), retired-row-present (a segment puts the row in a partition that is gone: it was moved or put back), fork (seq repeated), prev-mismatch, hash-mismatch (the row was altered), content-mismatch (a digested text differs from its digest: changed, or put back other than it was) or purge-unrecorded (a digested text is gone without a purge record, see scsql._enc), wrong-author, wrong-project, replay (the row repeats the signature of an earlier row it checked: a signed write stored again, links and hashes recomputed around it), checkpoint-mismatch (a row differs from what a checkpoint signed, checkpoints signed different hashes for the row before broken_seq, or the newest rows were removed), head-mismatch, horizon-unanchored (the horizon is not a checkpointed head), chain-identity (broken_seq 0: the chain''s project or agent differs from its agent''s project or from what a checkpoint recorded) or chain-missing (a checkpoint names the chain but it is gone). Ed25519 signatures are checked by scsql verify (PostgreSQL has no verifier of them). Raises SC106 for a chain no checkpoint knows, SC010 for a checkpoint without that chain.';

create or replace function scsql.chain_heads()
returns table (project text, agent text, chain_id bigint, head_seq bigint, head_hash text, horizon_seq bigint,
               quarantined_from bigint, quarantine_open boolean)
language plpgsql stable
as $$
begin
  -- PL/pgSQL: Citus refuses a SQL function's query over a distributed table
  -- (it plans it as a parameterized one).
  return query
  select p.name, a.name, c.chain_id, c.head_seq, encode(c.head_hash, 'hex'), c.horizon_seq,
         q.from_seq, q.open
  from scsql.chains c join scsql.agents a using (agent_id) join scsql.projects p on p.project_id = c.project_id
  left join (select x.chain_id, min(x.from_seq) as from_seq, bool_or(x.acknowledged_at is null) as open
             from scsql.chain_quarantines x group by x.chain_id) q on q.chain_id = c.chain_id
  order by c.chain_id;
end
$$;
comment on function scsql.chain_heads() is
  'Auditor. Every chain with its project, agent, head seq and hash (hex), its horizon seq: 0, or the seq up to which retention of earlier versions may have retired rows without checkpoint segments (trusted only at a checkpointed head; verification still checks every row present), and, for a chain scsql checkpoint quarantined (scsql.chain_quarantines), the first seq that did not verify and whether a quarantine of it is still open (not acknowledged by an administrator); NULLs otherwise.';
