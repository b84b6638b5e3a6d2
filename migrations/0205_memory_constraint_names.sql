-- 0205 memory: a name for the check constraint that PostgreSQL had named
-- kb_sources_check, so that a violation (and the SC code that
-- sql/90_constraints.sql maps to it) says which rule was broken.

alter table scsql.kb_sources rename constraint kb_sources_check to kb_sources_url_external;
