-- scsql integration: where subsystems meet.
--
-- 1. Learnings flow into the knowledge base.
--
-- An outcome that fails (or succeeds with high confidence) inserts a learning
-- in its own transaction (sql/11_audit.sql). Here each learning the whole
-- project may read (classification public or internal) is queued in that
-- transaction and then indexed into the project's knowledge base as the
-- source learning:<id> (by the MCP server right after the call, and by scsql
-- worker), so search, pack and later sessions find it by words and, once
-- embedded, by meaning. Queuing keeps the outcome's transaction from waiting
-- on the knowledge base's per-project lock. Confidential and restricted learnings never enter the
-- knowledge base, which every agent of the project (and readers granted the
-- project) can search; scsql.learnings() finds them for those allowed.

create or replace function scsql._learning_text(p_learning scsql.learnings)
returns text
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  select concat_ws(E'\n',
    format('# %s learning: %s', initcap(p_learning.kind), left(p_learning.summary, 120)),
    format('Outcome %s (signal %s%s) by agent %s%s%s.',
           p_learning.outcome_kind, p_learning.signal,
           case when p_learning.confidence is not null then ', confidence ' || p_learning.confidence end,
           coalesce((select a.name from scsql.agents a where a.agent_id = p_learning.author_id), '?'),
           case when p_learning.tool is not null then ', tool ' || p_learning.tool end,
           case when p_learning.task_ref is not null then ', task ' || p_learning.task_ref end),
    '',
    p_learning.summary,
    case when p_learning.evidence is not null then E'\nEvidence: ' || p_learning.evidence end)
$$;
comment on function scsql._learning_text(scsql.learnings) is
  'Private. The text a learning is indexed under: a heading with its kind and summary, the outcome, signal, confidence, author, tool and task, then the summary and evidence.';

create or replace function scsql._queue_learning()
returns trigger
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
begin
  if new.classification in ('public', 'internal') then
    insert into scsql.kb_learning_queue (project_id, learning_id) values (new.project_id, new.learning_id);
  end if;
  return null;
end
$$;
comment on function scsql._queue_learning() is
  'Private trigger (after insert on scsql.learnings): queues a public or internal learning for the knowledge base, in the outcome''s transaction. scsql.record_outcome wakes the project''s workers (scsql._notify_learning), on the coordinator: on Citus this trigger fires on a worker, whose NOTIFY reaches only that worker''s listeners.';

create or replace function scsql._notify_learning(p_project bigint, p_learning_id bigint, p_classification text)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
begin
  if p_learning_id is not null and p_classification in ('public', 'internal') then
    perform pg_catalog.pg_notify(scsql._channel(p_project, 'learnings'), 'learning');
  end if;
end
$$;
comment on function scsql._notify_learning(bigint, bigint, text) is
  'Private. Called by scsql.record_outcome after its insert, on the coordinator: when the outcome made learning P_LEARNING_ID of classification public or internal (which scsql._queue_learning queued for the knowledge base), wakes the project''s workers (NOTIFY its learnings channel with hint "learning", see scsql_caller.my_channel). Returns nothing.';

create or replace trigger learnings_to_knowledge
  after insert on scsql.learnings
  for each row execute function scsql._queue_learning();

-- A learning made a rule, or a plain lesson again, is recorded in the memory
-- history by scsql.mark_learning_rule itself (sql/14_capture.sql), where the
-- acting agent is known: on Citus a trigger on learnings fires on a worker,
-- as the owner.
drop trigger if exists learnings_history on scsql.learnings;
drop function if exists scsql._learning_changed();

comment on table scsql.kb_learning_queue is
  'Public and internal learnings not yet indexed into the knowledge base; drained by scsql.index_learnings.';

create or replace function scsql.index_learnings(p_limit integer default 50)
returns integer
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_project bigint := scsql._my_project();
  v_done integer := 0;
  v_l scsql.learnings;
  v_r record;
begin
  perform scsql._require(p_limit between 1 and 1000, 'limit must be 1 to 1000');
  for v_l in
    with claimed as (
      delete from scsql.kb_learning_queue q
      where (q.project_id, q.learning_id) in (
        select q2.project_id, q2.learning_id from scsql.kb_learning_queue q2
        where q2.project_id = v_project
        order by q2.learning_id
        limit p_limit
        for update skip locked)
      returning q.project_id, q.learning_id)
    select l.* from scsql.learnings l join claimed c using (project_id, learning_id)
    order by l.learning_id
  loop
    -- A learning whose text holds a private key stays out of the knowledge
    -- base (scsql.learnings() still shows it to those allowed).
    continue when v_l.summary is null;  -- purged (scsql.purge)
    continue when scsql._holds_private_key(scsql._learning_text(v_l));
    select * into v_r from scsql._index_source(
      v_l.project_id, 'learning:' || v_l.learning_id, scsql._learning_text(v_l), 'learning', 'internal',
      'standard', null,
      jsonb_build_object('learning_id', v_l.learning_id, 'kind', v_l.kind, 'outcome_id', v_l.outcome_id,
                         'outcome_kind', v_l.outcome_kind, 'classification', v_l.classification),
      null);
    -- Memory history (sql/26_history.sql): the learning's source added or changed.
    perform scsql._memory_index_change(v_l.project_id, 'learning:' || v_l.learning_id, v_r.content_hash, 'learning')
    where not v_r.unchanged;
    v_done := v_done + 1;
  end loop;
  return v_done;
end
$$;
comment on function scsql.index_learnings(integer) is
  'Background work of the MCP server and scsql worker, as an agent (not an MCP tool). Indexes up to LIMIT (1..1000, default 50) queued learnings of the acting agent''s project into the knowledge base, each as source learning:<learning_id> (kind learning, trust internal), oldest first; concurrent callers take different learnings (SKIP LOCKED); one whose text holds a PEM private key block is dropped from the queue unindexed. Each learning indexed is recorded in the memory history (op index, target learning:<id>). Returns how many it indexed. Raises SC010 for a bad limit.';

-- 2. recall_context restores recent broadcasts beside facts and session summaries.

-- They are read in recall_context's one query of its items
-- (scsql._recall_items, sql/24_context.sql): the messages addressed to the
-- acting agent by name or to its team role since it joined.

