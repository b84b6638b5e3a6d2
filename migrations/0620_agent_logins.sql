-- 0620 agent logins: how the agent processes of this database log in, and
-- how many connections an agent's login may hold.
--
-- one_login (the embedded server's default, and every database migrated
-- before this file): the Python layer logs in as scsql_app, which may SET
-- ROLE to every agent of the database. Off (a database for a shared
-- server, scsql.set_login_mode('per_agent')): each agent process logs in as
-- its own role, and scsql_app may act as none; no login but the owner's and
-- the administrators' can act as more than one agent.

create table scsql.login_settings (
  id                     smallint primary key default 1,
  one_login              boolean not null default true,
  agent_connection_limit integer not null default 32,
  updated_at             timestamptz not null default now()
);
comment on table scsql.login_settings is
  'One row: whether scsql_app may act as every agent of this database (one_login: one user''s machine) or each agent logs in as its own role (a shared server), and the CONNECTION LIMIT each agent role gets. Changed by scsql.set_login_mode and scsql.set_agent_connection_limit.';

alter table scsql.login_settings enable row level security;
alter table scsql.login_settings force row level security;
create policy owner_all on scsql.login_settings to scsql_owner using (true) with check (true);

insert into scsql.login_settings (id) values (1);
