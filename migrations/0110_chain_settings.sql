-- 0110 chain settings: the clock tolerance of chained writes lives in a
-- table that only administrators change (scsql.set_clock_skew), not in a
-- setting any session may override. One row.
create table scsql.chain_settings (
  singleton  boolean primary key default true check (singleton),
  clock_skew interval not null default interval '5 minutes'
               check (clock_skew >= interval '1 second' and clock_skew <= interval '30 days'),
  updated_at timestamptz not null default now(),
  updated_by text not null default session_user
);
comment on table scsql.chain_settings is
  'Settings of every chain (one row): clock_skew, how far the timestamp a chained write or a checkpoint carries may be from the server clock (default 5 minutes). Changed by administrators with scsql.set_clock_skew.';

-- A database that set scsql.clock_skew (ALTER DATABASE ... SET) keeps its
-- tolerance when it is valid; anything else starts from the default.
do $$
declare
  v interval;
begin
  begin
    v := nullif(current_setting('scsql.clock_skew', true), '')::interval;
  exception when others then
    v := null;
  end;
  if v is null or v < interval '1 second' or v > interval '30 days' then
    v := interval '5 minutes';
  end if;
  insert into scsql.chain_settings (clock_skew) values (v);
end
$$;
