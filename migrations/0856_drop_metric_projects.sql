-- 0856 metrics' parts name the projects they show in a query of their own
-- (a CTE over scsql.projects, in PL/pgSQL: Citus plans no query with an SQL
-- function's parameters), so the private helper that named them is dropped.

drop function if exists scsql._metric_projects(bigint);
