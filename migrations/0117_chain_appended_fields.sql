-- 0117 appended fields of chained tables: signed columns a table gains after
-- it has rows, encoded only when not NULL so earlier rows keep their hashes
-- and signatures (see scsql._enc and scsql._make_chained in sql/10_chain.sql).

alter table scsql.chained_tables add column appended_fields text[] not null default '{}';
comment on table scsql.chained_tables is
  'Tables made chained by scsql._make_chained: the columns the author signs (payload order), the columns the database stamps (hashed, not signed), and the appended fields (signed columns added after rows existed, in the payload after the signed ones, each only when not NULL; the list only grows at its end).';

-- _make_chained gained the argument p_appended; sql/10_chain.sql creates it again.
drop function if exists scsql._make_chained(regclass, text[], text[]);
