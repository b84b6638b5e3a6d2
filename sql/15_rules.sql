-- 15 rules: a failure learning made a rule that denies matching tool calls
-- before they run (mark_learning_rule), and the question PreToolUse asks
-- (check_tool_use), which names who made a rule and when.
--
-- Who a rule binds: a rule made by an agent that is not an orchestrator
-- (it may only mark its own learnings) applies to that agent's calls only;
-- a rule of the whole project is made by an orchestrator, and only an
-- orchestrator changes it. No rule's pattern may match every call.

select scsql._define_error(code, name, meaning) from (values
  ('SC250', 'rule_matches_everything', 'A learning rule''s pattern would deny every call of its tool: it matches the empty string, or every one of a set of ordinary commands and paths (.*, ^, .?, x*, [\s\S]*, ., \S, \w, ...), or no pattern was given for a learning whose call had no command or file path. Give a pattern that names what to deny.'),
  ('SC251', 'project_rule_not_allowed', 'The learning is a rule of the whole project, made by an orchestrator: only an orchestrator may change it.')
) as t(code, name, meaning);

create or replace function scsql._pattern_matches_everything(p_pattern text)
returns boolean
language sql immutable parallel safe
as $$
  -- A pattern that matches the empty string matches every text but the few
  -- its anchors or lookarounds rule out; one that matches each of these
  -- ordinary commands and paths, of every shape, matches any call.
  select '' ~ p_pattern
      or not exists (
        select from pg_catalog.unnest(array[
          'ls', 'make', 'git status', 'npm test', 'pytest -q tests/test_app.py', 'cargo build --release',
          'docker compose up -d', 'cd /tmp && rm -rf build', 'echo "done" > out.txt', 'python3 -c ''print(1)''',
          '/repo/src/main.py', 'src/lib/util.ts', 'README.md', 'LICENSE', 'C:\Users\dev\app.cs',
          'notebooks/analysis.ipynb', '42', U&'\03A9', U&'\4E2D\6587.txt']) probe
        where probe !~ p_pattern)
$$;
comment on function scsql._pattern_matches_everything(text) is
  'Private. True when a (valid) regular expression would match every call: it matches the empty string (.*, ^, $, .?, (?:), x*, [\s\S]*, foo|), or each of a fixed set of ordinary commands and paths of every shape (., \S, \w, [^x]). mark_learning_rule refuses such a pattern (SC250).';

create or replace function scsql._check_rule_pattern(p_pattern text, p_deny boolean, p_tool text, p_input_key text)
returns void
language plpgsql immutable
as $$
begin
  if p_pattern is not null then
    if char_length(p_pattern) not between 1 and 1000 then
      raise exception using errcode = 'SC143', message = 'pattern must be 1 to 1000 characters';
    end if;
    begin
      perform '' ~ p_pattern;
    exception when invalid_regular_expression then
      raise exception using errcode = 'SC143', message = format('pattern %L is not a valid regular expression', p_pattern);
    end;
  end if;
  if not p_deny then
    return;
  end if;
  if p_pattern is not null and scsql._pattern_matches_everything(p_pattern) then
    raise exception using errcode = 'SC250',
      message = format('pattern %L would deny every %s call: it matches an empty command and every ordinary one', p_pattern,
                       coalesce(p_tool, 'tool')),
      hint = 'Nothing was changed. Give a pattern that names what to deny, such as git push (-f|--force).';
  elsif p_pattern is null and p_tool is not null and p_input_key is null then
    raise exception using errcode = 'SC250',
      message = format('the failed %s call had no command or file path, so the rule would deny every %s call', p_tool, p_tool),
      hint = 'Nothing was changed. Give a pattern that names what to deny.';
  end if;
end
$$;
comment on function scsql._check_rule_pattern(text, boolean, text, text) is
  'Private. Checks the pattern of mark_learning_rule: raises SC143 for one that is not 1 to 1000 characters or not a valid regular expression; when the learning is to deny (P_DENY), SC250 for one that would match every call (scsql._pattern_matches_everything), or for no pattern on a learning of tool P_TOOL whose call had no command or file path (P_INPUT_KEY NULL), which would deny every call of the tool.';

create or replace function scsql.mark_learning_rule(p_learning_id bigint, p_deny boolean, p_pattern text default null)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_me scsql.agents := scsql._me();
  v_orchestrator boolean := scsql._is_orchestrator(v_me.team_role);
  v_l scsql.learnings;
  v_pattern text;
  v_for bigint;
  v_now timestamptz := now();  -- a value: Citus refuses a call that is not immutable in a CASE it sends to a shard
begin
  perform scsql._require(p_deny is not null, 'deny must be true or false');
  -- Read as columns (on Citus the row comes from a shard), locked: the
  -- history row below compares it with what the UPDATE writes.
  select l.learning_id, l.author_id, l.deny, l.pattern, l.summary, l.classification, l.tool, l.input_key, l.rule_for,
         l.input_key_sha256
    into v_l.learning_id, v_l.author_id, v_l.deny, v_l.pattern, v_l.summary, v_l.classification, v_l.tool,
         v_l.input_key, v_l.rule_for, v_l.input_key_sha256
  from scsql.learnings l
  where l.project_id = v_me.project_id and l.learning_id = p_learning_id and l.kind = 'failure'
  for update;
  if not found then
    raise exception using errcode = 'SC142', message = format('no failure learning %s in this project', p_learning_id);
  end if;
  if v_l.author_id <> v_me.agent_id and not v_orchestrator then
    raise exception using errcode = 'SC144',
      message = format('learning %s was written by another agent; only its author or an orchestrator may make it a rule', p_learning_id);
  end if;
  if v_l.deny and v_l.rule_for is null and not v_orchestrator then
    raise exception using errcode = 'SC251',
      message = format('learning %s is a rule of the whole project, made by an orchestrator; only an orchestrator may change it', p_learning_id),
      hint = 'Nothing was changed. Ask an orchestrator of the project.';
  end if;
  -- A purged input key (scsql.purge) still names the call: rules match its sha256.
  perform scsql._check_rule_pattern(p_pattern, p_deny, v_l.tool,
                                    coalesce(v_l.input_key, case when v_l.input_key_sha256 is not null then '[purged]' end));
  v_pattern := case when p_deny then p_pattern end;
  -- An orchestrator's rule binds the whole project; anyone else's, its maker.
  v_for := case when p_deny and not v_orchestrator then v_me.agent_id end;
  if v_l.deny is not distinct from p_deny and v_l.pattern is not distinct from v_pattern
     and v_l.rule_for is not distinct from v_for then
    return;  -- nothing changes: the rule keeps who made it and when
  end if;
  update scsql.learnings l
     set deny = p_deny, pattern = v_pattern, rule_for = v_for,
         rule_by = case when p_deny then v_me.agent_id end, rule_at = case when p_deny then v_now end
   where l.project_id = v_me.project_id and l.learning_id = p_learning_id;
  -- Memory history (sql/26_history.sql), written here on the coordinator,
  -- where the acting agent is known (a trigger on learnings fires on a
  -- Citus worker, as the owner): the learning made a rule that denies
  -- matching calls, or a plain lesson again. Its text does not change: both
  -- hashes are its summary's (public and internal learnings only).
  perform scsql._memory_change(v_me.project_id, case when p_deny then 'rule' else 'unrule' end, 'learning',
    'learning:' || p_learning_id, null,
    case when v_l.classification in ('public', 'internal') then scsql._text_hash(v_l.summary) end,
    case when v_l.classification in ('public', 'internal') then scsql._text_hash(v_l.summary) end,
    case when p_deny then 'denies matching calls' || coalesce(' (pattern ' || left(p_pattern, 900) || ')', '')
         else 'a plain lesson again' end,
    case when v_for is not null then 'agent:' || v_me.name end, v_me.agent_id);
end
$$;
comment on function scsql.mark_learning_rule(bigint, boolean, text) is
  'Makes a failure learning a rule that denies matching calls before they run, or a plain lesson again.

p_learning_id: the learning
p_deny: true: deny matching calls; false: only tell
p_pattern: regular expression over the command or file path (default: the failed call''s)

The calls a rule (DENY true) denies are those of the learning''s tool, refused by check_tool_use; DENY false makes a lesson. PATTERN (optional regular expression) is matched against the call''s command or file path; without it the rule denies calls with the same command or file as the failed call. Only the learning''s author or an orchestrator role may mark it. A rule made by an orchestrator applies to every agent of the project, and only an orchestrator may change it; a rule made by any other agent applies to that agent''s own calls only. The rule records who made it and when (check_tool_use names them when it denies a call). A change is recorded in the memory history (op rule or unrule, target learning:<id>, related agent:<name> for a rule of one agent; see memory_history); a mark that changes nothing keeps the rule as it was. Raises SC010 bad argument, SC142 unknown learning, SC143 bad pattern, SC144 not allowed, SC250 a pattern that would deny every call (one matching the empty string or every ordinary command: .*, ^, .?, x*, ., \S, ...; or no pattern for a failed call without command or file path), SC251 a rule of the whole project changed by an agent that is not an orchestrator.';

create or replace function scsql._denying_rule(p_me scsql.agents, p_tool text, p_key text)
returns table (learning_id bigint, reason text)
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  -- Learnings the agent may read whatever its role (public and internal
  -- ones, and its own) that are rules of the whole project or of this agent.
  select l.learning_id,
         format('scsql rule (learning %s, outcome %s), made a rule by agent %s %s for %s: %s',
                l.learning_id, l.outcome_id, coalesce(m.name, 'unknown'),
                coalesce('at ' || to_char(l.rule_at at time zone 'UTC', 'YYYY-MM-DD HH24:MI:SS "UTC"'), 'at a time not recorded'),
                case when l.rule_for is null then 'every agent of the project' else 'its own calls only' end,
                l.summary)
  from scsql.learnings l
  left join scsql.agents m on m.agent_id = l.rule_by
  where l.project_id = p_me.project_id and l.kind = 'failure' and l.deny and l.tool = p_tool
    and (l.rule_for is null or l.rule_for = p_me.agent_id)
    and (l.classification in ('public', 'internal') or l.author_id = p_me.agent_id)
    and case when l.pattern is not null then coalesce(p_key, '') ~ l.pattern
             -- A purged input key (scsql.purge) still matches by its sha256.
             when l.input_key is null and l.input_key_sha256 is not null
               then sha256(convert_to(p_key, 'UTF8')) is not distinct from l.input_key_sha256
             else l.input_key is null or l.input_key = p_key end
  order by l.learning_id desc
  limit 1
$$;
comment on function scsql._denying_rule(scsql.agents, text, text) is
  'Private. The newest learning made a rule that denies a call of tool P_TOOL with input key P_KEY (command or file path) by agent P_ME: a rule of the whole project or of P_ME alone, that P_ME may read; with the reason check_tool_use gives, naming the learning, its outcome, the agent that made it a rule, when, and for whom.';

create or replace function scsql.check_tool_use(p_tool text, p_input jsonb)
returns table (decision text, reason text, task_id bigint, owner text, lessons jsonb)
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
#variable_conflict use_column
declare
  v_me scsql.agents := scsql._me();
  v_key text;
  v_path text;
  v_root text;
  v_rule record;
  v_task record;
  v_lessons jsonb;
begin
  if p_tool is null or char_length(p_tool) not between 1 and 200 or p_input is null or jsonb_typeof(p_input) <> 'object' then
    raise exception using errcode = 'SC145', message = 'tool must be 1 to 200 characters and input a JSON object';
  end if;
  v_key := scsql._tool_input_key(p_tool, p_input);

  -- (a) Exclusive files: another agent's queued or claimed task owns the path.
  if p_tool in ('Edit', 'Write', 'MultiEdit', 'NotebookEdit') and v_key is not null then
    select p.root_path into v_root from scsql.projects p where p.project_id = v_me.project_id;
    begin
      v_path := scsql._normalize_path(v_root, v_key);
    exception when sqlstate 'SC320' or sqlstate 'SC321' then
      v_path := null;  -- not a path of the project: no task can own it
    end;
    if v_path is not null then
      select t.task_id, t.state, t.team_role, h.path, c.name as claimer, e.name as creator into v_task
      from scsql.task_files h
      join scsql.tasks t on t.project_id = h.project_id and t.task_id = h.task_id
      left join scsql.agents c on c.agent_id = t.claimed_by
      left join scsql.agents e on e.agent_id = t.created_by
      where h.project_id = v_me.project_id and h.span @> scsql._path_key(v_me.project_id, v_path)
        and t.claimed_by is distinct from v_me.agent_id
      order by t.task_id
      limit 1;
      if found then
        return query select 'deny'::text,
          format('scsql: %s is owned exclusively by task %s (%s), %s; edit it through that task or wait until it finishes',
                 v_path, v_task.task_id, v_task.path,
                 case when v_task.state = 'claimed' then format('claimed by agent %s', v_task.claimer)
                      else format('queued for team role %s by agent %s', v_task.team_role, v_task.creator) end),
          v_task.task_id,
          coalesce(v_task.claimer, 'team role ' || v_task.team_role),
          '[]'::jsonb;
        return;
      end if;
    end if;
  end if;

  -- (b) Rules that deny the call (sql/15_rules.sql).
  select r.learning_id, r.reason into v_rule from scsql._denying_rule(v_me, p_tool, v_key) r;
  if found then
    return query select 'deny'::text, v_rule.reason, null::bigint, null::text, '[]'::jsonb;
    return;
  end if;

  -- (c) Lessons: failures of this tool with the same command or file.
  if v_key is not null then
    select coalesce(jsonb_agg(jsonb_build_object(
             'learning_id', x.learning_id, 'outcome_id', x.outcome_id, 'tool_call_id', x.tool_call_id,
             'session_id', x.session_id, 'summary', x.summary, 'evidence', left(x.evidence, 500),
             'at', x.created_at) order by x.learning_id desc), '[]')
    into v_lessons
    from (select * from scsql.learnings l
          where l.project_id = v_me.project_id and l.kind = 'failure' and l.tool = p_tool and l.input_key = v_key
            and (l.classification in ('public', 'internal') or l.author_id = v_me.agent_id)
          order by l.learning_id desc limit 3) x;
  end if;
  return query select 'allow'::text, null::text, null::bigint, null::text, coalesce(v_lessons, '[]'::jsonb);
end
$$;
comment on function scsql.check_tool_use(text, jsonb) is
  'Whether a tool call may run: the task owning its file, deny rules and lessons of earlier failures.

p_tool: tool name
p_input (object): the call''s input
hidden: the Claude Code hooks check every call

What a PreToolUse hook asks before a call of TOOL with INPUT (the tool''s JSON input) runs. Returns one row: decision deny with a reason when an Edit, Write, MultiEdit or NotebookEdit would change a path that a queued or claimed task not held by the caller owns exclusively (task_id and owner: the claiming agent, or the team role it is queued for), or when a learning marked as a rule (mark_learning_rule) matches: a rule of the whole project (made by an orchestrator) or one the caller made for itself; the reason names the learning, its outcome, the agent that made it a rule, when, and for whom. Else decision allow with lessons: up to 3 failure learnings of the same tool with the same command or file path (learning_id, outcome_id, tool_call_id, session_id, summary, evidence, at: their citations), newest first. Reads public and internal learnings and the caller''s own. Raises SC145 for an empty tool or an input that is not a JSON object.';
