-- A project's rows of scsql.project_locks and its channel key are made by
-- scsql.create_project, in the transaction that creates the project, not by
-- triggers on scsql.projects: Citus fires a reference table's triggers on
-- every replica, where they may not write a distributed table, so
-- migrate --citus dropped them and each project's first use made the rows,
-- the first transactions of a new project waiting on each other's insert.
-- Now one rule holds on one server and on Citus.
drop trigger if exists project_lock_rows on scsql.projects;
drop trigger if exists channel_key_row on scsql.projects;
drop function if exists scsql._project_lock_rows();
drop function if exists scsql._channel_key_row();
