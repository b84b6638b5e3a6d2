-- 13 checkpoints: chain heads signed by the auditor's key.
--
-- The auditor's private key lives in the keystore as auditor.key (mode
-- 0600); an administrator registers its public key with
-- scsql.register_auditor_key. scsql checkpoint reads the heads
-- (checkpoint_heads_now), signs one payload per project and records it with
-- scsql.record_checkpoint; --export appends it to a JSONL file kept outside
-- the database, so removing the newest rows of a chain (even by a superuser
-- with triggers disabled, who could also rewrite the heads table) is found
-- by comparing the chain with the exported checkpoint.
--
-- Checkpoint payload (what the auditor signs), in the canonical field
-- encoding of scsql._enc: text "scsql/checkpoint/2", int project_id,
-- timestamptz at, int key_id, int number of heads, then for each chain in
-- chain_id order: int chain_id, int seq, bytea row_hash.
--
-- Format 2 states that the auditor verified every row of each chain up to
-- its head (links, hashes and signatures) before signing: scsql checkpoint
-- verifies first and refuses to sign chains that do not verify (SC132).
-- Verifiers then check every hash but the signatures only of rows after the
-- newest format-2 head of a chain (the rows up to it are the ones the
-- auditor verified, since their hashes lead to the signed head). Format 1,
-- "scsql/checkpoint/1" with the same fields, vouches for the heads only and
-- was written by earlier versions; verifiers accept both and tell them
-- apart by the payload the signature verifies.

select scsql._define_error(code, name, meaning) from (values
  ('SC130', 'auditor_key_missing',  'No auditor key is registered, or the key_id is not the current auditor key.'),
  ('SC131', 'checkpoint_invalid',   'A checkpoint names a chain of another project, or a seq and hash that are not in the chain.')
) as t(code, name, meaning);
select scsql._define_error('SC132', 'checkpoint_refused',
  'scsql checkpoint verified the chains before signing their heads and found a break; scsql verify lists them.', 'client');

create or replace function scsql.register_auditor_key(p_public_key bytea)
returns integer
language plpgsql
security definer
set search_path = pg_catalog, scsql
as $$
declare
  v_key integer;
begin
  if p_public_key is null or length(p_public_key) <> 32 then
    raise exception using errcode = 'SC009',
      message = format('the auditor''s public key must be 32 bytes (raw Ed25519), got %s', coalesce(length(p_public_key)::text, 'NULL'));
  end if;
  select key_id into v_key from scsql.auditor_keys where public_key = p_public_key;
  if found then
    return v_key;
  end if;
  insert into scsql.auditor_keys (public_key) values (p_public_key) returning key_id into v_key;
  return v_key;
end
$$;
comment on function scsql.register_auditor_key(bytea) is
  'Administrators only. Registers the auditor''s Ed25519 public key (raw 32 bytes), valid from now; checkpoints are signed with the newest key. Returns its key_id (the existing one when already registered). Raises SC009 for a bad key.';

create or replace function scsql.auditor_keys()
returns table (key_id integer, public_key text, valid_from timestamptz)
language sql
stable
security definer
set search_path = pg_catalog, scsql
as $$ select key_id, encode(public_key, 'hex'), valid_from from scsql.auditor_keys order by key_id $$;
comment on function scsql.auditor_keys() is
  'Auditor and administrators. The auditor''s registered public keys (hex), oldest first.';

create or replace function scsql.checkpoint_heads_now()
returns table (project_id bigint, project text, chain_id bigint, head_seq bigint, head_hash bytea)
language sql
stable
security definer
set search_path = pg_catalog, scsql
as $$
  select c.project_id, p.name, c.chain_id, c.head_seq, c.head_hash
  from scsql.chains c join scsql.projects p using (project_id)
  where c.head_seq > 0
  order by c.project_id, c.chain_id
$$;
comment on function scsql.checkpoint_heads_now() is
  'Auditor. The current head (seq, row_hash) of every non-empty chain, by project: what scsql checkpoint signs.';

create or replace function scsql._chain_row_hash(p_chain bigint, p_seq bigint)
returns bytea
language plpgsql
stable
security definer
set search_path = pg_catalog, scsql
as $$
declare
  v_query text;
  v_hash bytea;
begin
  select string_agg(format('select row_hash from %s where chain_id = $1 and seq = $2', t.table_name), ' union all ')
  into v_query from scsql.chained_tables t;
  if v_query is null then
    return null;
  end if;
  execute v_query || ' limit 1' into v_hash using p_chain, p_seq;
  return v_hash;
end
$$;
comment on function scsql._chain_row_hash(bigint, bigint) is
  'Private. The row_hash of the row at P_SEQ of chain P_CHAIN, whichever chained table holds it; NULL when none does.';

create or replace function scsql.record_checkpoint(
  p_project_id bigint, p_at timestamptz, p_key_id integer,
  p_chain_ids bigint[], p_seqs bigint[], p_hashes bytea[], p_signature bytea)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, scsql
as $$
declare
  v_id bigint;
  v_chain scsql.chains;
  v_hash bytea;
  i integer;
begin
  if p_key_id is null or p_key_id is distinct from (select max(k.key_id) from scsql.auditor_keys k) then
    raise exception using errcode = 'SC130',
      message = format('key %s is not the current auditor key', coalesce(p_key_id::text, 'NULL')),
      hint = 'An administrator registers the auditor''s key: scsql checkpoint --register-key.';
  end if;
  perform scsql._require(p_signature is not null and length(p_signature) = 64, 'signature must be 64 bytes (Ed25519)');
  perform scsql._require(p_at is not null and abs(extract(epoch from p_at - clock_timestamp())) <= extract(epoch from scsql._chain_clock_skew()),
    'at must be within scsql.clock_skew of the server clock');
  perform scsql._require(cardinality(p_chain_ids) >= 1 and cardinality(p_chain_ids) = cardinality(p_seqs)
                         and cardinality(p_seqs) = cardinality(p_hashes),
                         'chain_ids, seqs and hashes must be non-empty arrays of one length');
  insert into scsql.checkpoints (project_id, at, key_id, signature)
  values (p_project_id, p_at, p_key_id, p_signature) returning checkpoint_id into v_id;
  for i in 1 .. cardinality(p_chain_ids) loop
    select * into v_chain from scsql.chains c where c.chain_id = p_chain_ids[i];
    if not found or v_chain.project_id <> p_project_id then
      raise exception using errcode = 'SC131', message = format('chain %s is not a chain of project %s', p_chain_ids[i], p_project_id);
    end if;
    v_hash := null;
    if p_seqs[i] = v_chain.head_seq then
      v_hash := v_chain.head_hash;
    elsif p_seqs[i] between 1 and v_chain.head_seq then
      v_hash := scsql._chain_row_hash(p_chain_ids[i], p_seqs[i]);
    end if;
    if v_hash is null or p_hashes[i] is distinct from v_hash then
      raise exception using errcode = 'SC131',
        message = format('chain %s has no row at seq %s with that row_hash', p_chain_ids[i], p_seqs[i]);
    end if;
    insert into scsql.checkpoint_heads (project_id, checkpoint_id, chain_id, seq, row_hash)
    values (p_project_id, v_id, p_chain_ids[i], p_seqs[i], p_hashes[i]);
  end loop;
  return v_id;
end
$$;
comment on function scsql.record_checkpoint(bigint, timestamptz, integer, bigint[], bigint[], bytea[], bytea) is
  'Auditor. Records a checkpoint of project P_PROJECT_ID: the heads (chain_ids, seqs, row hashes) signed at P_AT with auditor key P_KEY_ID; the signed payload is described in sql/13_checkpoints.sql (canonical fields: "scsql/checkpoint/2", project_id, at, key_id, n, then chain_id, seq, row_hash per chain in chain_id order; format 2 means the auditor verified every row up to these heads, format 1 of earlier versions only vouches for the heads). Returns checkpoint_id. Raises SC130 when the key is not the current auditor key, SC131 when a head is not in its chain, SC010 for malformed arguments.';

create or replace function scsql.checkpoints(p_after_id bigint default 0)
returns table (checkpoint_id bigint, project_id bigint, project text, at timestamptz, key_id integer,
               public_key text, signature text, heads jsonb)
language sql
stable
security definer
set search_path = pg_catalog, scsql
as $$
  select c.checkpoint_id, c.project_id, p.name, c.at, c.key_id, encode(k.public_key, 'hex'), encode(c.signature, 'hex'),
         (select jsonb_agg(jsonb_build_object('chain_id', h.chain_id, 'seq', h.seq, 'row_hash', encode(h.row_hash, 'hex'))
                           order by h.chain_id)
          from scsql.checkpoint_heads h where h.project_id = c.project_id and h.checkpoint_id = c.checkpoint_id)
  from scsql.checkpoints c
  join scsql.projects p on p.project_id = c.project_id
  join scsql.auditor_keys k on k.key_id = c.key_id
  where c.checkpoint_id > p_after_id
  order by c.checkpoint_id
$$;
comment on function scsql.checkpoints(bigint) is
  'Auditor. Checkpoints with checkpoint_id > P_AFTER_ID (default all), oldest first: project, signing time, auditor key id and public key, signature and heads (chain_id, seq, row_hash in hex) as JSON. scsql checkpoint --export appends them to a JSONL file.';
