-- The catalogue of chain breaks (scsql.chain_break_kinds): what scsql verify
-- and scsql.verify_chain report. tests/audit/test_break_kinds.py checks that
-- every kind either verifier can report is listed here, and nothing else.

create or replace function scsql._define_break_kind(p_kind text, p_found_by text, p_excusable boolean, p_meaning text)
returns void
language sql
as $$
  insert into scsql.chain_break_kinds (kind, found_by, excusable, meaning)
  values (p_kind, p_found_by, p_excusable, p_meaning)
  on conflict (kind) do update
    set found_by = excluded.found_by, excusable = excluded.excusable, meaning = excluded.meaning;
$$;
comment on function scsql._define_break_kind(text, text, boolean, text) is
  'Private. Adds or updates one entry of scsql.chain_break_kinds.';

select scsql._define_break_kind(kind, found_by, excusable, meaning) from (values
  ('seq-gap',             'both',   false, 'A seq is missing: a row was deleted, or the chain jumps.'),
  ('prev-mismatch',       'both',   false, 'A row''s prev_hash is not the previous row''s row_hash: a row was removed, inserted or reordered.'),
  ('hash-mismatch',       'both',   false, 'A row''s row_hash does not match its content: the row was edited after it was written.'),
  ('content-mismatch',    'both',   false, 'A text the row is hashed by the digest of is not the text that digest was made of: changed, or put back other than it was.'),
  ('purge-unrecorded',    'both',   false, 'A text the row is hashed by the digest of is gone, and no purge recorded in scsql.purges removed it.'),
  ('wrong-author',        'both',   false, 'A row names an author other than the chain''s agent.'),
  ('wrong-project',       'both',   false, 'A row names a project other than the chain''s.'),
  ('chain-identity',      'both',   false, 'The chain''s project or agent differs from its agent''s, or from what a checkpoint recorded for it.'),
  ('chain-missing',       'both',   false, 'A chain a checkpoint names no longer exists.'),
  ('checkpoint-mismatch', 'both',   false, 'A row a checkpoint signed (a head or a segment end) no longer has the signed hash, or is gone.'),
  ('head-mismatch',       'both',   false, 'The chain ends before the head recorded for it (its newest rows are gone).'),
  ('horizon-unanchored',  'both',   false, 'The chain''s horizon (where retention of earlier versions began) is not the head of any valid checkpoint.'),
  ('partition-dropped',   'both',   false, 'Rows are missing in a range of a dropped partition that retention did not record, or did not cover with a checkpoint.'),
  ('retired-row-present', 'both',   false, 'A row is present where a checkpoint segment says its partition was retired: it was moved or put back.'),
  ('signature',           'client', true,  'A row''s signature does not verify with its key (for a table written unsigned: its marker is wrong).'),
  ('wrong-key',           'client', true,  'A row names a key of its author that does not exist or was not valid at the row''s time.'),
  ('replay',              'both',   true,  'A row repeats the signature of an earlier row of the chain.'),
  ('fork',                'both',   false, 'Two rows have the same seq in one chain.'),
  ('chain-unknown',       'client', false, 'Rows name a chain that has no head row.'),
  ('checkpoint-signature','client', false, 'A checkpoint''s auditor signature does not verify, or it differs from its exported copy.')
) as k(kind, found_by, excusable, meaning);
