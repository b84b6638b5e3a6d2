-- 0217 conversation chunks carry their context; memory history records more.
--
-- kb_chunks.context: the text a chunk of conversation (a session summary, a
-- transcript turn: spans marked "context") is indexed with besides its own,
-- the previous chunk's anchor and end (scsql._chunk_text, sql/20_text.sql).
-- Its terms are in the chunk's postings and it is part of the text embedded
-- for the chunk; it is not part of the chunk's text, hash or spans. NULL for
-- every other chunk.
--
-- _chunk_text returns the context and takes p_context; _check_text takes
-- the error code its callers raise (decide, open_loop, close_loop): the old
-- definitions are dropped once, sql/ creates the new ones.

alter table scsql.kb_chunks add column context text;
comment on column scsql.kb_chunks.context is
  'Conversation only: the context the chunk is indexed with besides its own text (the previous chunk''s anchor and last 600 characters, or the span''s given context), so a short reply is found by what it answers. NULL otherwise.';

drop function if exists scsql._chunk_text(text, jsonb, integer);
drop function if exists scsql._check_text(text, text, integer, boolean);

comment on table scsql.memory_changes is
  'Every change to working memory and the knowledge base (remember, supersede, refresh, forget, archive, unarchive, conflict, resolve, index, remove, purge, pin, unpin, forget_source, forget_chunk, summary, learn, rule, unrule, decide, open_loop, close_loop): which fact, source, learning, decision or loop, the old and new content hash (sha256 hex of the stored, redacted text), the reason, stamped with the acting agent. Chained (unsigned: written by the database inside the memory functions) and append-only.';
