-- 0762 Each link's share of its file's links, kept as the links are made
-- (scsql._code_links), so the repo map walks the graph without summing a
-- file's links at each step.

alter table scsql.code_links
  add column out_share double precision not null default 0,
  add column in_share  double precision not null default 0;
comment on table scsql.code_links is
  'The graph between files that ranking walks, made by scsql.rank_code from the references: SRC refers to what DST defines, with WEIGHT (the square root of the references, a tenth for private names, shared among the candidates of an ambiguous one; an import counts one); out_share is WEIGHT over the weights of SRC''s links, in_share over those of the links to DST.';
