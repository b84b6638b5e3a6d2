-- 0621 worker heartbeats name the server's own view of the worker: the
-- backend process that sent the heartbeat (pg_backend_pid()) and the login
-- it connected as (session_user), both taken by the database, next to the
-- host and process id the client reports. An administrator finds the
-- worker's sessions in pg_stat_activity by them; an application_name is
-- whatever a client says it is.

alter table scsql.worker_heartbeats
  add column backend_pid integer,
  add column login       text;
comment on column scsql.worker_heartbeats.backend_pid is
  'The server process (pg_backend_pid()) of the connection that sent the latest heartbeat: a pid of pg_stat_activity, taken by the database, not reported by the client.';
comment on column scsql.worker_heartbeats.login is
  'The login (session_user) of the connection that sent the latest heartbeat: the agent''s own role on a shared server, scsql_app on one user''s machine.';
