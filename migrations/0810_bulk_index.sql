-- 0810 Bulk indexing: texts an agent stages with COPY (or INSERT) into the
-- view scsql.kb_staging, each validated, redacted, chunked and split into
-- terms as it arrives (scsql._stage_text, sql/21_knowledge_bulk.sql), then
-- written into the knowledge base by one call of scsql.index_staged in the
-- same transaction, set-based. Staged rows are working space of one
-- transaction: unlogged, read and written only by the owner's functions.

create unlogged table scsql.kb_staged_sources (
  project_id bigint not null,
  agent_id bigint not null,
  xact xid8 not null,
  ord bigint not null,
  path text not null,
  kind text not null,
  trust text not null,
  tier text not null,
  content_hash text not null,
  spans_hash text,
  n_chars integer not null,
  meta jsonb not null,
  occurred_at timestamptz,
  source_id bigint,
  unchanged boolean,
  primary key (project_id, agent_id, xact, ord),
  unique (project_id, agent_id, xact, path)
);
comment on table scsql.kb_staged_sources is
  'Texts staged for bulk indexing (scsql.kb_staging, scsql.index_staged), one row each, as they will be stored: path, content hash, spans hash and meta of the redacted text, in the order ORD the stager gave, within the transaction XACT of agent AGENT_ID. source_id and unchanged are set while index_staged writes them; index_staged deletes them. Rows of an agent''s earlier transactions that never called index_staged are deleted by its next call.';

create unlogged table scsql.kb_staged_chunks (
  project_id bigint not null,
  agent_id bigint not null,
  xact xid8 not null,
  ord bigint not null,
  seq integer not null,
  anchor text,
  line_start integer not null,
  line_end integer not null,
  char_start integer not null,
  char_end integer not null,
  content text not null,
  chunk_hash text not null,
  context text,
  n_terms integer not null,
  terms text[] not null,
  tfs integer[] not null,
  primary key (project_id, agent_id, xact, ord, seq)
);
comment on table scsql.kb_staged_chunks is
  'The chunks of each staged text (scsql._chunk_text of the redacted text), with their BM25 terms and frequencies (scsql_caller.terms of path, anchor, context and text, sorted by term) and length n_terms, waiting for scsql.index_staged.';

-- What an agent writes: one row per text, as index_text takes it. It has no
-- project or agent column: the trigger takes both from the acting role.
create view scsql.kb_staging as
select null::bigint as ord, null::text as path, null::text as content, null::text as kind, null::text as trust,
       null::text as tier, null::jsonb as spans, null::jsonb as meta, null::timestamptz as occurred_at
where false;
comment on view scsql.kb_staging is
  'Insert-only (COPY or INSERT) for agents: one text to index per row, as scsql.index_text takes it (ord: its position in the batch, 1 or more, unique; path, content, kind, trust, tier, spans, meta, occurred_at), staged for scsql.index_staged in the same transaction. Reads return nothing.';
