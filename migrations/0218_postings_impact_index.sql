-- 0218 BM25 reads each term's postings in impact order: by tf descending,
-- then dl ascending, the order of the score a posting adds for any k1 and b
-- within one tf (it falls as dl grows). scsql_caller.bm25 reads through
-- this index only the postings that score above a threshold (a range of dl
-- for each tf), so a common term costs what its best postings cost, not
-- its whole list. PostgreSQL keeps the index with the table: the writers
-- (index_text, forget, and the rest through _index_chunks and
-- _unindex_chunks) need no change. It covers every column BM25 and the
-- row-level security policy read, so the reads touch the index only.

create index kb_postings_impact_idx on scsql.kb_postings (project_id, term_id, tf desc, dl) include (chunk_id, published);
comment on index scsql.kb_postings_impact_idx is
  'Each term''s postings by tf descending, then dl ascending: BM25 (scsql_caller.bm25) reads the postings of a term that score at least a threshold as one range of dl per tf.';
