-- 0304 coordination: names for the table-wide check constraints that
-- PostgreSQL had named <table>_check, so that a violation (and the SC code
-- that sql/90_constraints.sql maps to it) says which rule was broken.

alter table scsql.tasks rename constraint tasks_check to tasks_claimed_has_lease;
alter table scsql.messages rename constraint messages_check to messages_one_recipient;
