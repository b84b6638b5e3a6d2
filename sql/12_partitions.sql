-- 12 partitions: daily partitions of tool_calls and outcomes, through
-- pg_partman (4.x or 5.x) when it is installed, else through the built-in
-- maintenance below; retention that never drops rows no checkpoint covers
-- (checkpoint segments, sql/13_checkpoints.sql, name the partition of every
-- row they cover, so verification knows which missing rows were retired).
--
-- pg_partman is used only to create partitions: its part_config.retention
-- stays NULL (it has no hook to ask before dropping), and retention is done
-- by scsql._retire_partition. To use pg_partman, a superuser installs it
-- before the first scsql migrate:
--   create schema partman; create extension pg_partman schema partman;
--   grant usage, create on schema partman to scsql_owner;
--   grant select, insert, update, delete on all tables in schema partman to scsql_owner;
--   grant execute on all functions in schema partman to scsql_owner;
-- (scsql partitions enable-partman does exactly this). A database already
-- maintained by the built-in maintenance keeps it.

select scsql._define_error(code, name, meaning) from (values
  ('SC120', 'partition_not_checkpointed', 'Retention refused to drop a partition holding rows that no checkpoint covers; run scsql checkpoint first.'),
  ('SC121', 'partition_unknown',          'The table is not a partition of a time-partitioned scsql table.'),
  ('SC122', 'retention_snapshot',         'Retention drops partitions only in a READ COMMITTED transaction: under REPEATABLE READ or SERIALIZABLE its snapshot could miss rows written into the partition meanwhile.'),
  ('SC123', 'partition_quarantined',      'Retention refused to drop a partition holding rows of a quarantined chain after its anchored prefix (scsql.chain_quarantines); they are kept as evidence.'),
  ('SC124', 'partition_not_expired',      'Retention drops a partition only when retention is on for its table and its range has expired under it (scsql.set_partition_retention).')
) as t(code, name, meaning);

create or replace function scsql._partman(out schema_name text, out major integer, out version text)
language sql stable
as $$
  select e.extnamespace::regnamespace::text, split_part(e.extversion, '.', 1)::integer, e.extversion
  from pg_catalog.pg_extension e where e.extname = 'pg_partman'
$$;
comment on function scsql._partman() is
  'Private. pg_partman''s schema, major version and version when the extension is installed in this database; NULLs otherwise.';

create or replace function scsql._owner_may_lock(p_tables regclass[], p_grant boolean)
returns void
language plpgsql
as $$
declare
  t regclass;
begin
  -- LOCK TABLE ... IN ACCESS EXCLUSIVE MODE needs MAINTAIN (PostgreSQL 17+,
  -- which the owner keeps) or UPDATE, DELETE or TRUNCATE, which chained
  -- tables deny every role, the owner included. Before 17 the owner holds
  -- TRUNCATE only between the two calls, inside one transaction (the
  -- TRUNCATE trigger refuses a TRUNCATE all the same). Citus checks a lock
  -- on a distributed table with its own copy of the pre-17 rule, so there
  -- the grant is needed on every version.
  if pg_catalog.current_setting('server_version_num')::int >= 170000 and not scsql_caller.citus() then
    return;
  end if;
  foreach t in array p_tables loop
    execute format(case when p_grant then 'grant truncate on %s to scsql_owner' else 'revoke truncate on %s from scsql_owner' end, t);
  end loop;
end
$$;
comment on function scsql._owner_may_lock(regclass[], boolean) is
  'Private. On PostgreSQL before 17, and under Citus (whose lock check on a distributed table ignores MAINTAIN), grants (P_GRANT true) or revokes (false) TRUNCATE on the tables to scsql_owner, so the owner of a chained table can LOCK it IN ACCESS EXCLUSIVE MODE (on one server, 17 and later need nothing: the owner keeps MAINTAIN). Called in pairs inside one transaction, around a lock: retention and pg_partman''s create_parent. Returns nothing; raises what GRANT raises.';

create or replace function scsql._citus_sequential()
returns void
language plpgsql
as $$
begin
  if scsql_caller.citus() then
    perform pg_catalog.set_config('citus.multi_shard_modify_mode', 'sequential', true);
  end if;
end
$$;
comment on function scsql._citus_sequential() is
  'Private. On Citus, makes the rest of the transaction reach each worker over one connection (citus.multi_shard_modify_mode = sequential): Citus refuses DDL on a shard (a partition made, protected or dropped) after a read of a co-located shard over several connections, and retention reads a partition''s rows before it drops it. Must run before the transaction''s first query of every shard. Nothing on one server.';

create or replace function scsql._qualified(p_table regclass)
returns text
language sql stable
as $$
  select format('%I.%I', n.nspname, c.relname)
  from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace where c.oid = p_table
$$;
comment on function scsql._qualified(regclass) is
  'Private. A table''s schema-qualified name, whatever the search_path.';

create or replace function scsql._partitions(p_parent regclass)
returns table (partition regclass, lower_bound timestamptz, upper_bound timestamptz, is_default boolean)
language plpgsql stable set timezone = 'UTC'
as $$
declare
  r record;
  m text[];
begin
  -- Bounds come from the catalog (never from partition names), deparsed in UTC.
  for r in
    select i.inhrelid::regclass as child, pg_catalog.pg_get_expr(c.relpartbound, c.oid) as bound
    from pg_catalog.pg_inherits i join pg_catalog.pg_class c on c.oid = i.inhrelid
    where i.inhparent = p_parent
  loop
    partition := r.child;
    if r.bound = 'DEFAULT' then
      lower_bound := null; upper_bound := null; is_default := true;
    else
      m := regexp_match(r.bound, $re$FROM \('([^']*)'\) TO \('([^']*)'\)$re$);
      lower_bound := m[1]::timestamptz; upper_bound := m[2]::timestamptz; is_default := false;
    end if;
    return next;
  end loop;
end
$$;
comment on function scsql._partitions(regclass) is
  'Private. The partitions of a range-partitioned table with their bounds read from the catalog (deparsed in UTC), and whether each is the default partition. Works the same for partitions made by pg_partman 4.x, 5.x or the built-in maintenance; partition names are never parsed.';

create or replace function scsql._create_day_partition(p_parent regclass, p_day date)
returns text
language plpgsql set timezone = 'UTC'
as $$
declare
  v_lo timestamptz := p_day::timestamp at time zone 'UTC';
  v_hi timestamptz := (p_day + 1)::timestamp at time zone 'UTC';
  v_schema text;
  v_rel text;
  v_default regclass;
begin
  if exists (select from scsql._partitions(p_parent) p
             where not p.is_default and p.lower_bound < v_hi and p.upper_bound > v_lo) then
    return null;
  end if;
  select n.nspname, c.relname into v_schema, v_rel
  from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace where c.oid = p_parent;
  select p.partition into v_default from scsql._partitions(p_parent) p where p.is_default;
  if v_default is not null then
    -- Rows that landed in the default partition stay there (chained rows are never moved).
    if exists (select 1 from scsql._default_rows_in(v_default, v_lo, v_hi)) then
      return 'blocked';
    end if;
  end if;
  execute format('create table %I.%I partition of %s for values from (%L) to (%L)',
                 v_schema, v_rel || '_p' || to_char(p_day, 'YYYYMMDD'), p_parent, v_lo, v_hi);
  return 'created';
end
$$;
comment on function scsql._create_day_partition(regclass, date) is
  'Private, built-in maintenance. Creates the partition of P_PARENT for one UTC day unless one covers it; returns created, NULL when it exists, or blocked when the default partition holds rows of that day (they stay there; chained rows are never moved).';

create or replace function scsql._default_rows_in(p_default regclass, p_lo timestamptz, p_hi timestamptz)
returns setof integer
language plpgsql stable
as $$
begin
  return query execute format('select 1 from %s where at >= $1 and at < $2 limit 1', p_default) using p_lo, p_hi;
end
$$;
comment on function scsql._default_rows_in(regclass, timestamptz, timestamptz) is
  'Private. One row when the default partition holds rows in [lo, hi).';

create or replace function scsql._chain_partitions()
returns table (relid oid, part text, dated boolean)
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  select c.oid, t.table_name, false
  from scsql.chained_tables t join pg_catalog.pg_class c on c.oid = t.table_name::regclass
  where c.relkind = 'r'
  union all
  select p.partition::oid,
         t.table_name || '@' || case when p.is_default then 'default'
                                     else to_char(p.lower_bound at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') end,
         not p.is_default
  from scsql.chained_tables t join pg_catalog.pg_class c on c.oid = t.table_name::regclass
  cross join lateral scsql._partitions(c.oid::regclass) p
  where c.relkind = 'p'
$$;
comment on function scsql._chain_partitions() is
  'Private; verifiers and checkpoints read it. Every table that holds chained rows, with the name checkpoints give it (PART): the table''s name for a table that is not partitioned, <table>@default for a default partition, and <table>@<lower bound, UTC, YYYY-MM-DDTHH:MI:SSZ> for a dated partition (DATED: retention may drop it). The name depends only on the parent and the bounds, so it is the same whether pg_partman or the built-in maintenance made the partition.';

create or replace function scsql._retirement_target(p_partition regclass, out parent regclass,
                                                    out settings scsql.partition_settings,
                                                    out lower_bound timestamptz, out upper_bound timestamptz)
language plpgsql stable
as $$
begin
  select i.inhparent::regclass into parent from pg_catalog.pg_inherits i where i.inhrelid = p_partition;
  if parent is null or scsql._qualified(parent) not in (select s.parent from scsql.partition_settings s)
     or exists (select from scsql._partitions(parent) p where p.partition = p_partition and p.is_default) then
    raise exception using errcode = 'SC121',
      message = format('%s is not a dated partition of a time-partitioned scsql table', scsql._qualified(p_partition));
  end if;
  -- Only retention drops partitions: it must be on for the table, and the range expired under it.
  select * into settings from scsql.partition_settings s where s.parent = scsql._qualified(_retirement_target.parent);
  select p.lower_bound, p.upper_bound into lower_bound, upper_bound
  from scsql._partitions(parent) p where p.partition = p_partition;
  if settings.retention is null or upper_bound > clock_timestamp() - settings.retention then
    raise exception using errcode = 'SC124',
      message = format('refusing to drop %s (up to %s): %s', scsql._qualified(p_partition), upper_bound,
                       case when settings.retention is null then format('retention is off for %s', settings.parent)
                            else format('its range has not expired under the retention of %s', settings.retention) end),
      hint = 'Partitions of chained tables go only through retention: scsql.set_partition_retention, then maintenance.';
  end if;
end
$$;
comment on function scsql._retirement_target(regclass) is
  'Private, retention. The parent, settings and bounds of a dated partition retention may drop now; raises SC121 for a table that is not a dated partition of a time-partitioned scsql table, SC124 when retention is off for it or its range has not expired.';

create or replace function scsql._lock_for_retirement(p_parent regclass, p_partition regclass)
returns void
language plpgsql
as $$
begin
  -- Lock as DROP TABLE does (the parent, then the partition) before reading
  -- the rows: a write into the partition still open is waited for and then
  -- seen by the checks that follow, and none can start until the drop
  -- commits. The checks must take their own snapshot after the lock, so
  -- only READ COMMITTED will do.
  if pg_catalog.current_setting('transaction_isolation') <> 'read committed' then
    raise exception using errcode = 'SC122',
      message = format('refusing to drop %s in a %s transaction', scsql._qualified(p_partition),
                       upper(pg_catalog.current_setting('transaction_isolation'))),
      hint = 'Run retention (scsql.maintain_partitions) in a READ COMMITTED transaction.';
  end if;
  perform scsql._owner_may_lock(array[p_parent, p_partition], true);
  execute format('lock table only %s, %s in access exclusive mode', p_parent, p_partition);
  perform scsql._owner_may_lock(array[p_parent, p_partition], false);
  if not exists (select from pg_catalog.pg_inherits i where i.inhrelid = p_partition and i.inhparent = p_parent) then
    raise exception using errcode = 'SC121',
      message = format('%s is no longer a partition of %s', scsql._qualified(p_partition), scsql._qualified(p_parent));
  end if;
end
$$;
comment on function scsql._lock_for_retirement(regclass, regclass) is
  'Private, retention. Locks the parent, then the partition, in ACCESS EXCLUSIVE mode (as DROP TABLE does) so no write into the partition can slip between retention''s checks and the drop; raises SC122 outside a READ COMMITTED transaction, SC121 when the table is no longer a partition of the parent once locked.';

create or replace function scsql._refuse_quarantined_rows(p_partition regclass)
returns void
language plpgsql
as $$
declare
  v_kept text;
  r record;
begin
  -- Rows of a quarantined chain after its anchored prefix are evidence: kept.
  for r in execute format(
      'select t.chain_id, min(t.seq) as min_seq, count(*) as n from %s t '
      'join (select q.chain_id, min(q.anchored_seq) as anchored from scsql.chain_quarantines q '
      '      where q.chain_id is not null group by 1) q on q.chain_id = t.chain_id and t.seq > q.anchored '
      'group by 1 order by 1', p_partition) loop
    v_kept := concat_ws(', ', v_kept, format('chain %s from seq %s (%s rows)', r.chain_id, r.min_seq, r.n));
  end loop;
  if v_kept is not null then
    raise exception using errcode = 'SC123',
      message = format('refusing to drop %s: it holds rows of quarantined chains after their anchored prefix: %s',
                       scsql._qualified(p_partition), v_kept),
      hint = 'See scsql.chain_quarantines(); these rows are kept whatever the retention.';
  end if;
end
$$;
comment on function scsql._refuse_quarantined_rows(regclass) is
  'Private, retention. Raises SC123, naming each chain and its first seq, when the partition holds rows of a quarantined chain after its anchored prefix (scsql.chain_quarantines); returns nothing otherwise.';

create or replace function scsql._refuse_uncovered_rows(p_partition regclass, p_part text)
returns void
language plpgsql
as $$
declare
  v_uncovered text;
  r record;
begin
  -- Every row here must lie in a segment a checkpoint signed for this
  -- partition: verification then knows these rows were retired, and links
  -- the rows kept around them to the hashes the checkpoint signed.
  for r in execute format(
      'select t.chain_id, max(t.seq) as max_seq, count(*) as n from %s t '
      'where not exists (select from scsql.checkpoint_segments g where g.part = $1 '
      '                  and g.project_id = t.project_id and g.chain_id = t.chain_id '
      '                  and g.last_seq >= t.seq and g.first_seq <= t.seq) '
      'group by 1 order by 1', p_partition) using p_part loop
    v_uncovered := concat_ws(', ', v_uncovered, format('chain %s up to seq %s (%s rows)', r.chain_id, r.max_seq, r.n));
  end loop;
  if v_uncovered is not null then
    raise exception using errcode = 'SC120',
      message = format('refusing to drop %s: no checkpoint covers %s', scsql._qualified(p_partition), v_uncovered),
      hint = 'Record a checkpoint (scsql checkpoint), keep its export, then run maintenance again.';
  end if;
end
$$;
comment on function scsql._refuse_uncovered_rows(regclass, text) is
  'Private, retention. Raises SC120, naming each chain and its last seq, when a row of the partition (named P_PART in checkpoints) lies in no segment a checkpoint signed for it; returns nothing otherwise.';

create or replace function scsql._partition_chains(p_partition regclass)
returns jsonb
language plpgsql stable
as $$
declare
  v_chains jsonb;
begin
  execute format(
      'select coalesce(jsonb_agg(jsonb_build_object(''chain_id'', x.chain_id, ''first_seq'', x.f, ''last_seq'', x.l, ''rows'', x.n) '
      'order by x.chain_id), ''[]''::jsonb) from (select t.chain_id, min(t.seq) as f, max(t.seq) as l, count(*) as n '
      'from %s t group by 1) x', p_partition) into v_chains;
  return v_chains;
end
$$;
comment on function scsql._partition_chains(regclass) is
  'Private, retention. The chains with rows in the partition, as a JSON array of {chain_id, first_seq, last_seq, rows} ordered by chain_id; [] for an empty partition.';

create or replace function scsql._retire_partition(p_partition regclass)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  t record;
  v_part text;
begin
  perform scsql._citus_sequential();
  select * into t from scsql._retirement_target(p_partition);
  perform scsql._lock_for_retirement(t.parent, p_partition);
  select p.part into v_part from scsql._chain_partitions() p where p.relid = p_partition and p.dated;
  perform scsql._refuse_quarantined_rows(p_partition);
  perform scsql._refuse_uncovered_rows(p_partition, v_part);
  -- What was dropped, under which setting: verification accepts the missing rows only with this record.
  insert into scsql.partition_retirements (parent, part, lower_bound, upper_bound, retention, retention_set_at, chains)
  values ((t.settings).parent, v_part, t.lower_bound, t.upper_bound, (t.settings).retention, (t.settings).updated_at,
          scsql._partition_chains(p_partition));
  perform scsql._viewer_totals_retire(p_partition);  -- the viewer's figures sum the rows kept (sql/60_viewer.sql)
  execute format('drop table %s', p_partition);
end
$$;
comment on function scsql._retire_partition(regclass) is
  'Private, called by retention. Drops one dated partition of tool_calls or outcomes, only when retention is on for its table and its range has expired under it, no row in it belongs to a quarantined chain after its anchored prefix (scsql.chain_quarantines), and every row in it lies in a segment a checkpoint signed for this partition (checkpoint format 3); it records the drop in scsql.partition_retirements (range, the retention in force and when it was set, the rows per chain) and subtracts the dropped tool calls from the viewer''s figures (scsql._viewer_totals_retire). Verification accepts exactly these rows as retired and checks that the rows kept around them link to the hashes the checkpoint signed. Takes ACCESS EXCLUSIVE locks on the parent and the partition before it reads the rows, so no write into the partition can slip between the check and the drop. Raises SC124 when retention is off or the range has not expired, SC123 naming the quarantined chains and seqs, SC120 naming the uncovered chains and seqs (nothing is dropped), SC121 for a table that is not such a partition (the default partition is never dropped), SC122 outside a READ COMMITTED transaction.';

create or replace function scsql._partman_manages(p_schema text, p_parent text)
returns boolean
language plpgsql stable
as $$
declare
  v boolean;
begin
  execute format('select exists (select from %I.part_config where parent_table = $1)', p_schema) into v using p_parent;
  return v;
end
$$;
comment on function scsql._partman_manages(text, text) is
  'Private. Whether pg_partman (installed in schema P_SCHEMA) has P_PARENT in its part_config.';

create or replace function scsql._partman_partitions_made(p_settings scsql.partition_settings, p_schema text,
                                                          p_major integer, p_version text)
returns table (action text, partition text, detail text)
language plpgsql
as $$
declare
  v_parent regclass := p_settings.parent::regclass;
  v_today date := (clock_timestamp() at time zone 'UTC')::date;
begin
  if not scsql._partman_manages(p_schema, p_settings.parent) then
    perform scsql._owner_may_lock(array[v_parent], true);  -- create_parent locks the parent
    execute format('select %I.create_parent(p_parent_table := %L, p_control := %L, p_type := %L, p_interval := %L, p_premake := %s, p_start_partition := %L, p_jobmon := false)',
                   p_schema, p_settings.parent, 'at', case when p_major >= 5 then 'range' else 'native' end,
                   '1 day', p_settings.premake, (v_today - 1)::text);
    perform scsql._owner_may_lock(array[v_parent], false);
    action := 'partman-setup';
  else
    execute format('update %I.part_config set premake = %s, retention = null where parent_table = %L',
                   p_schema, p_settings.premake, p_settings.parent);
    execute format('select %I.run_maintenance(p_parent_table := %L, p_jobmon := false)', p_schema, p_settings.parent);
    action := 'partman-maintenance';
  end if;
  partition := null; detail := format('pg_partman %s', p_version);
  return next;
end
$$;
comment on function scsql._partman_partitions_made(scsql.partition_settings, text, integer, text) is
  'Private, maintenance. Through pg_partman (installed in P_SCHEMA, major version P_MAJOR): sets the table up with create_parent (daily, from yesterday, PREMAKE days ahead) when pg_partman does not manage it yet, else updates its premake (retention stays NULL: scsql retires partitions) and runs its run_maintenance. Returns the one action taken: partman-setup or partman-maintenance.';

create or replace function scsql._builtin_partitions_made(p_settings scsql.partition_settings)
returns table (action text, partition text, detail text)
language plpgsql
as $$
declare
  v_parent regclass := p_settings.parent::regclass;
  v_today date := (clock_timestamp() at time zone 'UTC')::date;
  d date;
begin
  if not exists (select from scsql._partitions(v_parent) x where x.is_default) then
    execute format('create table %s partition of %s default', p_settings.parent || '_default', v_parent);
    action := 'created'; partition := p_settings.parent || '_default'; detail := 'default partition';
    return next;
  end if;
  for d in select generate_series(v_today - 1, v_today + p_settings.premake, interval '1 day')::date loop
    action := scsql._create_day_partition(v_parent, d);
    if action is not null then
      partition := d::text;
      detail := case action when 'blocked' then 'the default partition holds rows of this day' else 'built-in maintenance' end;
      return next;
    end if;
  end loop;
end
$$;
comment on function scsql._builtin_partitions_made(scsql.partition_settings) is
  'Private, built-in maintenance. Creates the table''s default partition when it has none and its daily partitions (UTC) from yesterday to PREMAKE days ahead; returns one row per partition created or blocked (the default partition holds rows of that day).';

create or replace function scsql._partitions_made(p_settings scsql.partition_settings)
returns table (action text, partition text, detail text)
language plpgsql
as $$
declare
  pm record;
begin
  select * into pm from scsql._partman();
  if pm.schema_name is not null
     and (scsql._partman_manages(pm.schema_name, p_settings.parent)
          or not exists (select from pg_catalog.pg_inherits i where i.inhparent = p_settings.parent::regclass)) then
    return query select * from scsql._partman_partitions_made(p_settings, pm.schema_name, pm.major, pm.version);
  else
    return query select * from scsql._builtin_partitions_made(p_settings);
  end if;
  perform scsql._chain_protect(p_settings.parent::regclass);
end
$$;
comment on function scsql._partitions_made(scsql.partition_settings) is
  'Private, maintenance. Makes the table''s partitions ahead, through pg_partman when it is installed and manages the table (or the table has no partition yet), else through the built-in maintenance, then protects new partitions (append-only triggers, forced RLS). Returns one row per action.';

create or replace function scsql._retention_applied(p_settings scsql.partition_settings)
returns table (action text, partition text, detail text)
language plpgsql
as $$
declare
  p record;
begin
  -- Oldest first; stop at the first partition that may not go.
  for p in select x.partition, x.upper_bound from scsql._partitions(p_settings.parent::regclass) x
           where not x.is_default and x.upper_bound <= clock_timestamp() - p_settings.retention
           order by x.lower_bound loop
    partition := scsql._qualified(p.partition);  -- named before it is dropped
    begin
      perform scsql._retire_partition(p.partition);
      action := 'dropped'; detail := format('older than %s', p_settings.retention);
      return next;
    exception
      when sqlstate 'SC123' then
        -- Rows of a quarantined chain stay; later partitions may still go.
        action := 'refused'; detail := sqlerrm;
        return next;
      when sqlstate 'SC120' or sqlstate 'SC122' then
        action := 'refused'; detail := sqlerrm;
        return next;
        exit;
      when lock_not_available then
        action := 'deferred';
        detail := format('another session holds a lock on %s or the partition (%s); retention tries again on its next run',
                         p_settings.parent, sqlerrm);
        return next;
        exit;
    end;
  end loop;
end
$$;
comment on function scsql._retention_applied(scsql.partition_settings) is
  'Private, retention. Drops the table''s dated partitions older than its retention (nothing when retention is off), oldest first, each through scsql._retire_partition; skips (refused) one holding rows of a quarantined chain, stops at the first no checkpoint covers or this transaction may not drop (refused) or whose lock is held (deferred). Returns one row per partition tried.';

-- DDL on a partitioned table waits for every session that holds a lock on
-- it, a reader's ACCESS SHARE included, and every writer queues behind that
-- wait. So maintenance gives up after 200 ms (lock_timeout), reports the
-- table as deferred and tries again on its next run (partitions are made
-- days ahead, and rows of a day without one land in the default partition).
create or replace function scsql.maintain_partitions()
returns table (parent text, action text, partition text, detail text)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp set timezone = 'UTC' set lock_timeout = '200ms'
as $$
declare
  s scsql.partition_settings;
  v_made jsonb;
begin
  perform scsql._citus_sequential();
  for s in select * from scsql.partition_settings order by 1 loop
    parent := s.parent;
    -- Actions are reported once the block commits to its savepoint: a block
    -- that times out on a lock is rolled back whole and reported as deferred.
    begin
      select coalesce(jsonb_agg(to_jsonb(m) order by m.n), '[]') into v_made
      from scsql._partitions_made(s) with ordinality m(action, partition, detail, n);
    exception when lock_not_available then
      action := 'deferred'; partition := null;
      detail := format('another session holds a lock on %s (%s); maintenance tries again on its next run', s.parent, sqlerrm);
      return next;
      continue;
    end;
    return query select s.parent, m.action, m.partition, m.detail
                 from jsonb_to_recordset(v_made) m(action text, partition text, detail text);
    if s.retention is not null then
      return query select s.parent, r.action, r.partition, r.detail from scsql._retention_applied(s) r;
    end if;
  end loop;
end
$$;
comment on function scsql.maintain_partitions() is
  'Administrators only (not an MCP tool): run by scsql worker (job partitions) over an administrator''s connection, by scsql partitions maintain, or from psql: select * from scsql.maintain_partitions(). For each time-partitioned table (scsql.partition_settings): with pg_partman installed (4.x or 5.x, detected from pg_extension), sets the table up with create_parent on first use and then runs its run_maintenance; otherwise creates the default partition and the daily partitions (UTC) from yesterday to PREMAKE days ahead. Then protects new partitions (append-only triggers, forced RLS) and applies retention: drops partitions older than RETENTION, oldest first, stopping at the first that no checkpoint covers or that this transaction may not drop (not READ COMMITTED; reported as refused), and skipping (refused) those holding rows of a quarantined chain after its anchored prefix. Each drop is recorded in scsql.partition_retirements. Every lock it takes waits at most 200 ms (lock_timeout), so a session holding a lock on a table (a reader''s open transaction included) never queues other sessions'' writes behind maintenance for longer: the table''s work is then rolled back and reported as deferred, and the next run tries again. Returns one row per action: parent, action (created, blocked, partman-setup, partman-maintenance, dropped, refused, deferred), partition, detail.';

create or replace function scsql.set_partition_retention(p_table text, p_retention interval, p_premake integer default null)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_err scsql.violation;
begin
  if not exists (select from scsql.partition_settings s where s.parent = p_table) then
    raise exception using errcode = 'SC121',
      message = format('%s is not a time-partitioned scsql table', p_table),
      hint = format('Partitioned tables: %s.', (select string_agg(parent, ', ' order by parent) from scsql.partition_settings));
  end if;
  -- The table's constraints check retention's lower bound and premake; the
  -- upper bound is checked here: now() - retention must stay a time
  -- (maintain_partitions and metrics compute it).
  perform scsql._require(p_retention is null or p_retention <= interval '36500 days',
                         format('retention must be 1 day to 36,500 days (NULL: forever), got %s', p_retention));
  update scsql.partition_settings s
  set retention = p_retention, premake = coalesce(p_premake, s.premake), updated_at = now()
  where s.parent = p_table;
  -- Without the log trigger (migrate --citus drops it: a reference table's
  -- triggers fire on every replica, where writing another Citus table is
  -- refused) the new values are logged here, as the trigger logs them.
  if not exists (select from pg_catalog.pg_trigger t
                 where t.tgrelid = 'scsql.partition_settings'::regclass and t.tgname = 'zz_log') then
    insert into scsql.partition_settings_log (parent, retention, premake)
    select l.parent, p_retention, coalesce(p_premake, l.premake)
    from (select l.parent, l.retention, l.premake from scsql.partition_settings_log l
          where l.parent = p_table order by l.set_at desc, l.log_id desc limit 1) l
    where l.retention is distinct from p_retention or l.premake is distinct from coalesce(p_premake, l.premake);
  end if;
exception when check_violation or not_null_violation then
  get stacked diagnostics v_err.returned_sqlstate = returned_sqlstate, v_err.schema_name = schema_name,
    v_err.table_name = table_name, v_err.constraint_name = constraint_name, v_err.column_name = column_name, v_err.message_text = message_text;
  perform scsql._raise_violation(v_err);
end
$$;
comment on function scsql.set_partition_retention(text, interval, integer) is
  'Administrators only. Sets how long the daily partitions of P_TABLE (scsql.tool_calls or scsql.outcomes) are kept (NULL: forever) and, optionally, how many days ahead they are created. Every change is logged, with its time, in scsql.partition_settings_log; a partition counts as retired only when the retention logged at its drop had expired its range. Retention never drops rows that no checkpoint covers. Raises SC121 for another table, SC010 for a retention under one day or over 36,500 days or premake outside 1..90.';

create or replace function scsql._partition_settings_logged()
returns trigger
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
begin
  if tg_op = 'INSERT' or new.retention is distinct from old.retention or new.premake is distinct from old.premake then
    insert into scsql.partition_settings_log (parent, retention, premake) values (new.parent, new.retention, new.premake);
  end if;
  return null;
end
$$;
comment on function scsql._partition_settings_logged() is
  'Private trigger on scsql.partition_settings. Appends every new retention or premake value, with the time (clock_timestamp) and session_user, to scsql.partition_settings_log, whoever changes the row and however. On Citus (migrate --citus drops it) set_partition_retention logs its own changes instead.';

drop trigger if exists zz_log on scsql.partition_settings;
create trigger zz_log after insert or update on scsql.partition_settings
  for each row execute function scsql._partition_settings_logged();

create or replace function scsql._make_append_only(p_table regclass)
returns void
language plpgsql
as $$
begin
  execute format('drop trigger if exists zz_append_only on %s', p_table);
  execute format('create trigger zz_append_only before update or delete on %s '
                 'for each row execute function scsql._chain_append_only()', p_table);
  execute format('drop trigger if exists zz_no_truncate on %s', p_table);
  execute format('create trigger zz_no_truncate before truncate on %s '
                 'for each statement execute function scsql._chain_append_only()', p_table);
end
$$;
comment on function scsql._make_append_only(regclass) is
  'Private; called from sql/ files (idempotent). Makes a table that is not chained append-only: its triggers zz_append_only (UPDATE, DELETE) and zz_no_truncate (TRUNCATE) raise SC100 like a chained table''s.';

select scsql._make_append_only(t) from unnest('{scsql.partition_settings_log, scsql.partition_retirements}'::regclass[]) t;

create or replace function scsql.partition_retirements()
returns table (part text, parent text, lower_bound timestamptz, upper_bound timestamptz, retention interval,
               retired_at timestamptz, retired_by text, chains jsonb, ok boolean, detail text)
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  select r.part, r.parent, r.lower_bound, r.upper_bound, r.retention, r.retired_at, r.retired_by, r.chains,
         v.problem is null, v.problem
  from scsql.partition_retirements r
  cross join lateral (
    select case
      when r.part <> r.parent || '@' || to_char(r.lower_bound at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
        then 'the record names another range than its partition'
      when r.upper_bound + r.retention > r.retired_at
        then format('its range (up to %s) had not expired under the retention of %s at %s', r.upper_bound, r.retention, r.retired_at)
      when r.retention_set_at > r.retired_at
        then 'its retention setting is dated after the drop'
      when (select l.retention from scsql.partition_settings_log l
            where l.parent = r.parent and l.set_at <= r.retired_at
            order by l.set_at desc, l.log_id desc limit 1) is distinct from r.retention
        then format('the settings log does not show a retention of %s in force for %s at %s', r.retention, r.parent, r.retired_at)
    end as problem
  ) v
  order by r.retirement_id
$$;
comment on function scsql.partition_retirements() is
  'Administrators and the auditor; verifiers read it. Every partition retention dropped (scsql.partition_retirements) and whether the record holds up (ok): its part names its range, the range had expired under the recorded retention when it was dropped, and scsql.partition_settings_log shows that retention in force for the table at that time (a retention switched on afterwards, or a record added for a partition dropped by hand, does not). DETAIL says what fails. Rows missing from a chain count as retired only where a checkpoint segment names a part gone with an ok record here.';

create or replace function scsql.partition_status()
returns table (parent text, partition text, lower_bound timestamptz, upper_bound timestamptz, is_default boolean,
               retention interval, premake integer, managed_by text)
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  select s.parent, scsql._qualified(p.partition), p.lower_bound, p.upper_bound, p.is_default, s.retention, s.premake,
         case when (select schema_name from scsql._partman()) is null then 'built-in'
              when scsql._partman_manages((select schema_name from scsql._partman()), s.parent)
              then 'pg_partman ' || (select version from scsql._partman()) else 'built-in' end
  from scsql.partition_settings s
  cross join lateral scsql._partitions(s.parent::regclass) p
  order by s.parent, p.is_default, p.lower_bound
$$;
comment on function scsql.partition_status() is
  'Administrators and the auditor. Every partition of the time-partitioned tables with its bounds (UTC), whether it is the default partition, the retention and premake settings, and whether pg_partman or the built-in maintenance manages it.';

-- Create the partitions now, so a fresh install can record at once.
select count(*) from scsql.maintain_partitions();
