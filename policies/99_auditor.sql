-- Last: the auditor reads every table (each has an auditor_read policy from
-- _secure_table) and changes nothing.
grant select on all tables in schema scsql to scsql_auditor;
