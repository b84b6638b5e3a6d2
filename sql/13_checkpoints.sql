-- 13 checkpoints: chain heads signed by the auditor's key.
--
-- The auditor's private key lives in the keystore as auditor.key (mode
-- 0600); an administrator registers its public key with
-- scsql.register_auditor_key. scsql checkpoint verifies every chain and,
-- in the same pass, reads each chain's head and the segments of its rows
-- since its previous checkpoint (scsql/audit/verify.py, collect=True; not
-- checkpoint_heads_now), signs one payload per project and records it with
-- scsql.record_checkpoint; --export appends it to a JSONL file kept outside
-- the database, so removing the newest rows of a chain (even by a superuser
-- with triggers disabled, who could also rewrite the heads table) is found
-- by comparing the chain with the exported checkpoint.
--
-- Checkpoint payload (what the auditor signs), in the canonical field
-- encoding of scsql._enc. Format 3, written by this version:
--   text "scsql/checkpoint/3", int project_id, timestamptz at, int key_id,
--   int number of chains, then for each chain in chain_id order:
--     int chain_id, int agent_id, int seq, bytea row_hash   (the head)
--     int from_seq, int number of segments, then for each segment in seq
--     order: int last_seq, bytea row_hash, text part.
-- The segments cover the chain's rows from_seq + 1 .. seq, in order: segment
-- i holds rows (last_seq of segment i-1, or from_seq) + 1 .. last_seq, all in
-- the partition named part (scsql._chain_partitions: "scsql.sessions",
-- "scsql.tool_calls@default", "scsql.tool_calls@2025-06-01T00:00:00Z"),
-- and row_hash is the row_hash of its last row; the last segment ends at the
-- head. from_seq is the chain's head in the auditor's previous format-3
-- checkpoint (0 for the first), so successive checkpoints describe every
-- row once. Exported lines carry agent_id, from_seq and segments in each
-- head ({"chain_id", "agent_id", "seq", "row_hash", "from_seq", "segments":
-- [{"last_seq", "row_hash", "part"}]}).
--
-- Format 3 states that the auditor verified every row of each chain up to
-- its head (links, hashes and signatures) before signing: scsql checkpoint
-- verifies first and signs a chain that does not verify only up to the last
-- row that does (when there are new ones); it records such a chain in
-- scsql.chain_quarantines (see the end of this file) and still signs every
-- other chain, so one broken chain stops no other.
-- Verifiers then check every hash, but the signatures only of rows after the
-- newest verified head of a chain (the rows up to it are the ones the
-- auditor verified, since their hashes lead to signed hashes). A row may be
-- missing only when a segment places it in a dated partition that no longer
-- exists and retention retired it (scsql._retire_partition drops only rows
-- in segments, and records each drop in scsql.partition_retirements under
-- the retention setting in force; a partition dropped otherwise is a
-- partition-dropped break naming its rows), and then no row of that segment may be present (retention
-- drops whole partitions: a row still there was moved or put back). A run of
-- missing rows ends at the end of a segment, and the row after it must link
-- to the hash the segment signed, so the rows kept around retired ones stay
-- bound to signed hashes. The project and agent signed for a chain must
-- still be the chain's.
--
-- Earlier formats are still verified and told apart by the payload the
-- signature verifies: format 2, "scsql/checkpoint/2", int project_id,
-- timestamptz at, int key_id, int number of heads, then per chain int
-- chain_id, int seq, bytea row_hash (verified up to the heads, no agent and
-- no segments); format 1, "scsql/checkpoint/1" with the same fields, only
-- vouches for the heads.

select scsql._define_error(code, name, meaning) from (values
  ('SC130', 'auditor_key_missing',  'No auditor key is registered, or the key_id is not the current auditor key.'),
  ('SC131', 'checkpoint_invalid',   'A checkpoint names a chain of another project, or a seq and hash that are not in the chain.')
) as t(code, name, meaning);
select scsql._define_error('SC132', 'checkpoint_refused',
  'scsql checkpoint verified the chains before signing their heads and found a break; it signed the other chains, and a broken chain only up to its last verified row (scsql.chain_quarantines); scsql verify lists the breaks.', 'client');

create or replace function scsql.register_auditor_key(p_public_key bytea)
returns integer
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_key integer;
  v_err scsql.violation;
begin
  select key_id into v_key from scsql.auditor_keys where public_key = p_public_key;
  if found then
    return v_key;
  end if;
  -- The key's length is checked by the table's constraint.
  insert into scsql.auditor_keys (public_key) values (p_public_key) returning key_id into v_key;
  return v_key;
exception when check_violation or not_null_violation then
  get stacked diagnostics v_err.returned_sqlstate = returned_sqlstate, v_err.schema_name = schema_name,
    v_err.table_name = table_name, v_err.constraint_name = constraint_name, v_err.column_name = column_name, v_err.message_text = message_text;
  perform scsql._raise_violation(v_err);
end
$$;
comment on function scsql.register_auditor_key(bytea) is
  'Administrators only. Registers the auditor''s Ed25519 public key (raw 32 bytes), valid from now; checkpoints are signed with the newest key. Returns its key_id (the existing one when already registered). Raises SC009 for a bad key.';

create or replace function scsql.auditor_keys()
returns table (key_id integer, public_key text, valid_from timestamptz)
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$ select key_id, encode(public_key, 'hex'), valid_from from scsql.auditor_keys order by key_id $$;
comment on function scsql.auditor_keys() is
  'Auditor and administrators. The auditor''s registered public keys (hex), oldest first.';

create or replace function scsql.checkpoint_heads_now()
returns table (project_id bigint, project text, chain_id bigint, head_seq bigint, head_hash bytea)
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  select c.project_id, p.name, c.chain_id, c.head_seq, c.head_hash
  from scsql.chains c join scsql.projects p using (project_id)
  where c.head_seq > 0
  order by c.project_id, c.chain_id
$$;
comment on function scsql.checkpoint_heads_now() is
  'Auditor. The current head (seq, row_hash) of every non-empty chain, by project, as scsql.chains records it. scsql checkpoint does not sign these: it signs the heads its own verification of the rows reached.';

create or replace function scsql._chain_row_at(p_chain bigint, p_seq bigint, out row_hash bytea, out part text)
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_query text;
  v_oid oid;
begin
  select string_agg(format('select row_hash, %s from %s where chain_id = $1 and seq = $2',
                           scsql._chain_part_expr(t.table_name), t.table_name), ' union all ')
  into v_query from scsql.chained_tables t;
  if v_query is null then
    return;
  end if;
  execute v_query || ' limit 1' into row_hash, v_oid using p_chain, p_seq;
  select p.part into part from scsql._chain_partitions() p where p.relid = v_oid;
end
$$;
comment on function scsql._chain_row_at(bigint, bigint) is
  'Private. The row_hash of the row at P_SEQ of chain P_CHAIN and the partition holding it (its name in scsql._chain_partitions), whichever chained table holds it; NULLs when none does.';

create or replace function scsql._chain_row_hash(p_chain bigint, p_seq bigint)
returns bytea
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$ select (scsql._chain_row_at(p_chain, p_seq)).row_hash $$;
comment on function scsql._chain_row_hash(bigint, bigint) is
  'Private. The row_hash of the row at P_SEQ of chain P_CHAIN, whichever chained table holds it; NULL when none does.';

create or replace function scsql._checkpoint_int(p_value jsonb)
returns bigint
language sql immutable set search_path = pg_catalog, scsql, pg_temp
as $$
  select case when pg_catalog.jsonb_typeof(p_value) = 'number' and p_value::text ~ '^[0-9]{1,18}$'
              then p_value::text::bigint end
$$;
comment on function scsql._checkpoint_int(jsonb) is
  'Private. A JSON number that is a whole number from 0 to 10^18 - 1, as bigint; NULL for anything else (another type, a fraction, an exponent, a sign, JSON null, absent).';

create or replace function scsql._checkpoint_hash(p_value jsonb)
returns bytea
language sql immutable set search_path = pg_catalog, scsql, pg_temp
as $$
  select case when pg_catalog.jsonb_typeof(p_value) = 'string' and (p_value #>> '{}') ~ '^[0-9a-fA-F]{64}$'
              then pg_catalog.decode(p_value #>> '{}', 'hex') end
$$;
comment on function scsql._checkpoint_hash(jsonb) is
  'Private. A JSON string of 64 hex digits (a sha256 row_hash, as scsql.checkpoints() writes it) as its 32 bytes; NULL for anything else.';

create or replace function scsql._checkpoint_heads_format3(p_heads jsonb)
returns boolean
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_bad text;
  v_format3 boolean;
begin
  -- One check a statement, each relying on the ones before: nothing here may fail other than by _require.
  perform scsql._require(jsonb_typeof(p_heads) is not distinct from 'array', 'heads must be a non-empty JSON array of objects');
  perform scsql._require(jsonb_array_length(p_heads) >= 1, 'heads must be a non-empty JSON array of objects');
  perform scsql._require(not exists (select from jsonb_array_elements(p_heads) h where jsonb_typeof(h) <> 'object'),
                         'heads must be a non-empty JSON array of objects');
  select string_agg(distinct k, ', ') into v_bad
  from jsonb_array_elements(p_heads) h, jsonb_object_keys(h) k
  where k <> all (array['chain_id', 'seq', 'row_hash', 'agent_id', 'from_seq', 'segments']);
  perform scsql._require(v_bad is null,
                         format('a head has no key %s (keys: chain_id, seq, row_hash; in format 3 also agent_id, from_seq, segments)', v_bad));
  perform scsql._require(not exists (select from jsonb_array_elements(p_heads) h
                                     where scsql._checkpoint_int(h -> 'chain_id') is null or scsql._checkpoint_int(h -> 'seq') is null
                                        or scsql._checkpoint_hash(h -> 'row_hash') is null),
                         'every head needs chain_id and seq (whole numbers) and row_hash (64 hex digits)');
  perform scsql._require(not exists (select from jsonb_array_elements(p_heads) h
                                     group by scsql._checkpoint_int(h -> 'chain_id') having count(*) > 1),
                         'each chain may appear only once in heads');
  select bool_or(h ?| array['agent_id', 'from_seq', 'segments']) into v_format3 from jsonb_array_elements(p_heads) h;
  if v_format3 then
    perform scsql._checkpoint_check_segments(p_heads);
  end if;
  return v_format3;
end
$$;
comment on function scsql._checkpoint_heads_format3(jsonb) is
  'Private, used by scsql.record_checkpoint. Whether the heads P_HEADS are of checkpoint format 3 (they name agent_id, from_seq and segments), once they are well formed: a non-empty JSON array of objects with no other keys, each with chain_id and seq (whole numbers) and row_hash (64 hex digits), no chain twice, and in format 3 the keys of scsql._checkpoint_check_segments. Raises SC010 (scsql._require) otherwise.';

create or replace function scsql._checkpoint_check_segments(p_heads jsonb)
returns void
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_bad text;
begin
  perform scsql._require(not exists (select from jsonb_array_elements(p_heads) h
                                     where scsql._checkpoint_int(h -> 'agent_id') is null
                                        or scsql._checkpoint_int(h -> 'from_seq') is null
                                        or jsonb_typeof(h -> 'segments') is distinct from 'array'),
                         'agent_id, from_seq and segments come together (checkpoint format 3): every head needs agent_id and from_seq (whole numbers) and segments (an array), or none has any');
  perform scsql._require(not exists (select from jsonb_array_elements(p_heads) h, jsonb_array_elements(h -> 'segments') g
                                     where jsonb_typeof(g) <> 'object'),
                         'every segment must be an object of last_seq (a whole number), row_hash (64 hex digits) and part (text)');
  select string_agg(distinct k, ', ') into v_bad
  from jsonb_array_elements(p_heads) h, jsonb_array_elements(h -> 'segments') g, jsonb_object_keys(g) k
  where k <> all (array['last_seq', 'row_hash', 'part']);
  perform scsql._require(v_bad is null, format('a segment has no key %s (keys: last_seq, row_hash, part)', v_bad));
  perform scsql._require(not exists (select from jsonb_array_elements(p_heads) h, jsonb_array_elements(h -> 'segments') g
                                     where scsql._checkpoint_int(g -> 'last_seq') is null
                                        or scsql._checkpoint_hash(g -> 'row_hash') is null
                                        or jsonb_typeof(g -> 'part') is distinct from 'string'),
                         'every segment must be an object of last_seq (a whole number), row_hash (64 hex digits) and part (text)');
  perform scsql._require(not exists (select from jsonb_array_elements(p_heads) h, jsonb_array_elements(h -> 'segments') g
                                     group by scsql._checkpoint_int(h -> 'chain_id'), scsql._checkpoint_int(g -> 'last_seq')
                                     having count(*) > 1),
                         'the segments of a chain must end at different seqs');
end
$$;
comment on function scsql._checkpoint_check_segments(jsonb) is
  'Private, used by scsql._checkpoint_heads_format3. Checks the format-3 keys of the heads P_HEADS: every head has agent_id and from_seq (whole numbers) and segments, an array of objects of last_seq (a whole number), row_hash (64 hex digits) and part (text) and no other keys, and no two segments of a chain end at one seq. Raises SC010 (scsql._require) otherwise.';

create or replace function scsql._checkpoint_check_head(p_project_id bigint, p_chain bigint, p_seq bigint, p_hash bytea,
                                                        p_format3 boolean, p_agent bigint, p_from_seq bigint)
returns void
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_chain scsql.chains;
  v_hash bytea;
begin
  select * into v_chain from scsql.chains c where c.chain_id = p_chain;
  if not found or v_chain.project_id <> p_project_id then
    raise exception using errcode = 'SC131', message = format('chain %s is not a chain of project %s', p_chain, p_project_id);
  end if;
  if p_seq = v_chain.head_seq then
    v_hash := v_chain.head_hash;
  elsif p_seq between 1 and v_chain.head_seq then
    v_hash := scsql._chain_row_hash(p_chain, p_seq);
  end if;
  if v_hash is null or p_hash is distinct from v_hash then
    raise exception using errcode = 'SC131',
      message = format('chain %s has no row at seq %s with that row_hash', p_chain, p_seq);
  end if;
  if p_format3 then
    if p_agent is distinct from v_chain.agent_id then
      raise exception using errcode = 'SC131',
        message = format('chain %s belongs to agent %s, not %s', p_chain, v_chain.agent_id, p_agent);
    end if;
    perform scsql._require(p_from_seq <= p_seq, 'from_seq must be between 0 and the head''s seq');
  end if;
end
$$;
comment on function scsql._checkpoint_check_head(bigint, bigint, bigint, bytea, boolean, bigint, bigint) is
  'Private, used by scsql.record_checkpoint. Checks one head of a checkpoint of project P_PROJECT_ID: chain P_CHAIN is of that project and has a row at P_SEQ with hash P_HASH, and in format 3 (P_FORMAT3) is agent P_AGENT''s chain, with P_FROM_SEQ at most P_SEQ. Raises SC131, or SC010 for from_seq.';

create or replace function scsql._checkpoint_record_segments(p_project_id bigint, p_checkpoint bigint, p_chain bigint,
                                                             p_from_seq bigint, p_seq bigint, p_segments jsonb)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_next bigint := p_from_seq + 1;
  v_at record;
  s record;
begin
  -- The segments cover from_seq + 1 .. seq in order; each ends at a row of its partition with its hash.
  for s in select scsql._checkpoint_int(g -> 'last_seq') as last_seq, scsql._checkpoint_hash(g -> 'row_hash') as row_hash,
                  g ->> 'part' as part
           from jsonb_array_elements(p_segments) g order by 1 loop
    select * into v_at from scsql._chain_row_at(p_chain, s.last_seq);
    if s.last_seq < v_next or s.last_seq > p_seq or v_at.row_hash is distinct from s.row_hash
       or v_at.part is distinct from s.part then
      raise exception using errcode = 'SC131',
        message = format('chain %s has no row at seq %s with that row_hash in partition %s (segments must cover seq %s to %s in order)',
                         p_chain, s.last_seq, s.part, p_from_seq + 1, p_seq);
    end if;
    insert into scsql.checkpoint_segments (project_id, checkpoint_id, chain_id, first_seq, last_seq, row_hash, part)
    values (p_project_id, p_checkpoint, p_chain, v_next, s.last_seq, s.row_hash, s.part);
    v_next := s.last_seq + 1;
  end loop;
  if v_next <> p_seq + 1 then
    raise exception using errcode = 'SC131',
      message = format('the segments of chain %s end at seq %s, not at its head %s', p_chain, v_next - 1, p_seq);
  end if;
end
$$;
comment on function scsql._checkpoint_record_segments(bigint, bigint, bigint, bigint, bigint, jsonb) is
  'Private, used by scsql.record_checkpoint. Records the segments P_SEGMENTS (format 3) of chain P_CHAIN in checkpoint P_CHECKPOINT of project P_PROJECT_ID, after checking that they cover seq P_FROM_SEQ + 1 to the head P_SEQ in order, each ending at a row of the chain with its hash in the partition it names. Raises SC131 otherwise.';

create or replace function scsql.record_checkpoint(
  p_project_id bigint, p_at timestamptz, p_key_id integer, p_signature bytea, p_heads jsonb)
returns bigint
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_id bigint;
  v_format3 boolean;
  hd record;
begin
  if p_key_id is null or p_key_id is distinct from (select max(k.key_id) from scsql.auditor_keys k) then
    raise exception using errcode = 'SC130',
      message = format('key %s is not the current auditor key', coalesce(p_key_id::text, 'NULL')),
      hint = 'Register the auditor''s key: scsql checkpoint --init.';
  end if;
  perform scsql._require(p_signature is not null and length(p_signature) = 64, 'signature must be 64 bytes (Ed25519)');
  perform scsql._require(p_at is not null and abs(extract(epoch from p_at - clock_timestamp())) <= extract(epoch from scsql._chain_clock_skew()),
    'at must be within scsql.chain_settings.clock_skew of the server clock');
  perform scsql._require(exists (select from scsql.projects p where p.project_id = p_project_id),
                         format('project_id %s is not a project', coalesce(p_project_id::text, 'NULL')));
  -- The heads: a JSON array of objects, as scsql.checkpoints() returns them.
  v_format3 := scsql._checkpoint_heads_format3(p_heads);

  insert into scsql.checkpoints (project_id, at, key_id, signature)
  values (p_project_id, p_at, p_key_id, p_signature) returning checkpoint_id into v_id;
  for hd in select scsql._checkpoint_int(e.h -> 'chain_id') as chain_id, scsql._checkpoint_int(e.h -> 'seq') as seq,
                  scsql._checkpoint_hash(e.h -> 'row_hash') as row_hash, scsql._checkpoint_int(e.h -> 'agent_id') as agent_id,
                  scsql._checkpoint_int(e.h -> 'from_seq') as from_seq, e.h -> 'segments' as segments
           from jsonb_array_elements(p_heads) with ordinality e(h, n) order by e.n loop
    perform scsql._checkpoint_check_head(p_project_id, hd.chain_id, hd.seq, hd.row_hash, v_format3, hd.agent_id, hd.from_seq);
    if v_format3 then
      perform scsql._checkpoint_record_segments(p_project_id, v_id, hd.chain_id, hd.from_seq, hd.seq, hd.segments);
    end if;
    insert into scsql.checkpoint_heads (project_id, checkpoint_id, chain_id, seq, row_hash, agent_id, from_seq)
    values (p_project_id, v_id, hd.chain_id, hd.seq, hd.row_hash,
            case when v_format3 then hd.agent_id end, case when v_format3 then hd.from_seq end);
  end loop;
  return v_id;
end
$$;
comment on function scsql.record_checkpoint(bigint, timestamptz, integer, bytea, jsonb) is
  'Auditor. Records a checkpoint of project P_PROJECT_ID signed at P_AT with auditor key P_KEY_ID (P_SIGNATURE, 64 bytes). P_HEADS is a JSON array with one object per chain, the shape scsql.checkpoints() returns: {"chain_id", "seq", "row_hash"} (the head; row_hash in hex), and in format 3 in every head also "agent_id", "from_seq" (the seq after which its segments start) and "segments": [{"last_seq", "row_hash", "part"}] (runs of rows in one partition, each with its last row''s hash; they cover from_seq + 1 .. seq in order). Numbers are whole JSON numbers, hashes 64 hex digits; no other keys. The signed payload is described in sql/13_checkpoints.sql; format 3 means the auditor verified every row up to these heads. Returns checkpoint_id. Raises SC130 when the key is not the current auditor key, SC131 when a head or segment is not in its chain (or the chain is of another project or agent), SC010 for malformed arguments (an unknown project, heads that are not an array of objects, an unknown key, a missing or mistyped value, format-3 keys in some heads only, a chain named twice, two segments of a chain ending at one seq); nothing is recorded then.';

create or replace function scsql.checkpoints(p_after_id bigint default 0)
returns table (checkpoint_id bigint, project_id bigint, project text, at timestamptz, key_id integer,
               public_key text, signature text, heads jsonb)
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  select c.checkpoint_id, c.project_id, p.name, c.at, c.key_id, encode(k.public_key, 'hex'), encode(c.signature, 'hex'),
         (select jsonb_agg(jsonb_build_object('chain_id', h.chain_id, 'seq', h.seq, 'row_hash', encode(h.row_hash, 'hex'))
                           -- format 3 heads also name the agent, from_seq and the segments
                           || case when h.agent_id is null then '{}'::jsonb
                                   else jsonb_build_object('agent_id', h.agent_id, 'from_seq', h.from_seq,
                                       'segments', coalesce((select jsonb_agg(jsonb_build_object('last_seq', g.last_seq,
                                                                'row_hash', encode(g.row_hash, 'hex'), 'part', g.part)
                                                              order by g.last_seq)
                                                             from scsql.checkpoint_segments g
                                                             where g.project_id = h.project_id and g.checkpoint_id = h.checkpoint_id
                                                               and g.chain_id = h.chain_id), '[]'::jsonb)) end
                           order by h.chain_id)
          from scsql.checkpoint_heads h where h.project_id = c.project_id and h.checkpoint_id = c.checkpoint_id)
  from scsql.checkpoints c
  join scsql.projects p on p.project_id = c.project_id
  join scsql.auditor_keys k on k.key_id = c.key_id
  where c.checkpoint_id > p_after_id
  order by c.checkpoint_id
$$;
comment on function scsql.checkpoints(bigint) is
  'Auditor. Checkpoints with checkpoint_id > P_AFTER_ID (default all), oldest first: project, signing time, auditor key id and public key, signature and heads as JSON (chain_id, seq, row_hash in hex; in format 3 also agent_id, from_seq and segments: last_seq, row_hash, part). scsql checkpoint --export appends them to a JSONL file.';

-- ---------------------------------------------------------------------------
-- Quarantine: a chain that does not verify is recorded, not signed past its
-- verified prefix, and kept from retention; the other chains carry on.
-- ---------------------------------------------------------------------------

select scsql._define_error('SC133', 'quarantine_unknown',
  'No open quarantine has that id (scsql.chain_quarantines() lists them; an acknowledged one stays acknowledged).');

create or replace function scsql.record_quarantine(p_chain_id bigint, p_from_seq bigint, p_kind text, p_detail text)
returns bigint
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_project bigint;
  v_id bigint;
  v_head record;
begin
  perform scsql._require(p_from_seq is not null and p_from_seq >= 0, 'from_seq must be 0 or more');
  perform scsql._require(p_kind is not null and char_length(p_kind) between 1 and 100, 'kind must be 1 to 100 characters');
  perform scsql._require(p_detail is not null and char_length(p_detail) <= 2000, 'detail must be at most 2000 characters');
  -- The chain's project; a chain that is gone is known by the checkpoints that named it.
  select c.project_id into v_project from scsql.chains c where c.chain_id = p_chain_id;
  if v_project is null then
    select h.project_id into v_project from scsql.checkpoint_heads h where h.chain_id = p_chain_id
    order by h.checkpoint_id desc limit 1;
  end if;
  if v_project is null then
    raise exception using errcode = 'SC106', message = format('chain %s does not exist', coalesce(p_chain_id::text, 'NULL'));
  end if;
  -- One record per break: the quarantine of this very row says it, and so does an
  -- open one of the chain from an earlier seq (nothing after it was verified yet).
  -- An acknowledged quarantine excuses only its own row (scsql verify goes on past
  -- it), so a later break of the chain is a quarantine of its own.
  select q.quarantine_id into v_id from scsql.chain_quarantines q
  where q.chain_id = p_chain_id
    and (q.from_seq = p_from_seq or (q.from_seq < p_from_seq and q.acknowledged_at is null))
  order by q.from_seq, q.quarantine_id limit 1;
  if found then
    return v_id;
  end if;
  -- Anchored: what the newest checkpoint signed of the chain, but never the broken rows.
  select h.seq, h.checkpoint_id into v_head from scsql.checkpoint_heads h
  where h.chain_id = p_chain_id order by h.seq desc, h.checkpoint_id desc limit 1;
  insert into scsql.chain_quarantines (project_id, chain_id, from_seq, anchored_seq, checkpoint_id, kind, detail)
  values (v_project, p_chain_id, p_from_seq, least(coalesce(v_head.seq, 0), greatest(p_from_seq - 1, 0)),
          v_head.checkpoint_id, p_kind, p_detail)
  returning quarantine_id into v_id;
  return v_id;
end
$$;
comment on function scsql.record_quarantine(bigint, bigint, text, text) is
  'Auditor; scsql checkpoint calls it for every chain that does not verify, after signing the chain''s verified prefix. Records chain P_CHAIN_ID as quarantined from seq P_FROM_SEQ (the first seq that did not verify; 0 for the chain as a whole) with the break''s kind and detail, who found it (session_user) and when; anchored_seq is the newest seq a checkpoint signed for the chain, but below P_FROM_SEQ (retention never drops the rows after it). Returns the quarantine_id, that of an existing quarantine of the chain from this very seq, or of an open one from an earlier seq, when there is one (nothing new is recorded then); a break after an acknowledged quarantine is a new quarantine. A chain that is gone but that a checkpoint named is recorded under that checkpoint''s project. Raises SC106 for a chain neither scsql.chains nor a checkpoint knows, SC010 for a bad seq, kind or detail.';

create or replace function scsql.acknowledge_quarantine(p_quarantine_id bigint, p_note text)
returns timestamptz
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_at timestamptz;
begin
  perform scsql._require(p_note is not null and char_length(p_note) between 1 and 2000,
                         'note must say, in 1 to 2000 characters, what was done about the chain');
  update scsql.chain_quarantines q
  set acknowledged_at = now(), acknowledged_by = session_user, note = p_note
  where q.quarantine_id = p_quarantine_id and q.acknowledged_at is null
  returning q.acknowledged_at into v_at;
  if not found then
    raise exception using errcode = 'SC133',
      message = format('quarantine %s is not open', coalesce(p_quarantine_id::text, 'NULL')),
      hint = 'scsql.chain_quarantines() lists quarantines; an acknowledged one stays acknowledged.';
  end if;
  return v_at;
end
$$;
comment on function scsql.acknowledge_quarantine(bigint, text) is
  'Administrators only. Marks open quarantine P_QUARANTINE_ID as dealt with, with a note of what was done (for instance the agent revoked); the record stays, and retention still keeps the chain''s rows after its anchored prefix, as evidence. From then on scsql verify, scsql checkpoint and scsql restore excuse the row it names when its break is one an agent can cause through the API (signature, wrong-key, replay): they report it and verify the chain past it; any other break stays a break. Returns the acknowledgement time. Raises SC133 when no open quarantine has that id, SC010 without a note.';

create or replace function scsql.chain_quarantines(p_open_only boolean default false)
returns table (quarantine_id bigint, project text, chain_id bigint, agent text, from_seq bigint, anchored_seq bigint,
               checkpoint_id bigint, kind text, detail text, found_at timestamptz, found_by text,
               acknowledged_at timestamptz, acknowledged_by text, note text)
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  select q.quarantine_id, p.name, q.chain_id, a.name, q.from_seq, q.anchored_seq, q.checkpoint_id, q.kind, q.detail,
         q.found_at, q.found_by, q.acknowledged_at, q.acknowledged_by, q.note
  from scsql.chain_quarantines q
  join scsql.projects p on p.project_id = q.project_id
  left join scsql.chains c on c.chain_id = q.chain_id
  left join scsql.agents a on a.agent_id = c.agent_id
  where not coalesce(p_open_only, false) or q.acknowledged_at is null
  order by q.quarantine_id
$$;
comment on function scsql.chain_quarantines(boolean) is
  'Administrators and the auditor. Quarantined chains (all, or with P_OPEN_ONLY those no administrator acknowledged yet), oldest first: project, chain, agent, the first seq that did not verify (from_seq), the last seq signed (anchored_seq) and the checkpoint that signed it, the break (kind, detail), who found it and when, and the acknowledgement (when, by whom, note).';
