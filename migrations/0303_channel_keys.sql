-- 0303 channel keys: a random secret per project, from which the names of
-- its LISTEN/NOTIFY channels are derived.
--
-- Any session may LISTEN on any channel name, so a name must not be
-- guessable: a channel is scsql_ and 32 hex digits of sha256(key, purpose).
-- Only the owner reads this table; an agent learns its own channel names
-- through scsql.my_channel and nothing else.

create table scsql.channel_keys (
  project_id bigint primary key,
  key        bytea not null
               default pg_catalog.sha256(pg_catalog.convert_to(
                 pg_catalog.gen_random_uuid()::text || pg_catalog.gen_random_uuid()::text, 'UTF8'))
               check (length(key) = 32)
);
comment on table scsql.channel_keys is
  'The secret each project''s LISTEN/NOTIFY channel names are derived from (see scsql._channel): 32 random bytes, made with the project (a trigger on scsql.projects). Only the owner reads it.';

alter table scsql.channel_keys enable row level security;
alter table scsql.channel_keys force row level security;
create policy owner_all on scsql.channel_keys to scsql_owner using (true) with check (true);

insert into scsql.channel_keys (project_id) select p.project_id from scsql.projects p;
