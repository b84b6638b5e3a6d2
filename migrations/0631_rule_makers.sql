-- 0631 a learning made a rule says who made it one, when, and for whom.
--
-- learnings.rule_by, rule_at: the agent that made the learning a rule
-- (scsql.mark_learning_rule, sql/15_rules.sql) and when; check_tool_use
-- names them in the reason of a call it denies. learnings.rule_for: the
-- one agent the rule applies to (a rule an agent of another role than an
-- orchestrator makes applies to its own calls only), NULL for a rule of the
-- whole project, which only an orchestrator makes. All three are NULL while
-- the learning is not a rule.
--
-- Rules made before: their maker and time are those of the last rule change
-- the memory history recorded for the learning (op rule), else the
-- learning's author and no time; a rule whose maker was not an orchestrator
-- applies to that maker alone from now on.

alter table scsql.learnings
  add column rule_by bigint references scsql.agents,
  add column rule_at timestamptz,
  add column rule_for bigint references scsql.agents;
comment on column scsql.learnings.rule_by is
  'The agent that made this learning a rule (mark_learning_rule); NULL while it is not one.';
comment on column scsql.learnings.rule_at is
  'When this learning was made a rule; NULL while it is not one (or for a rule made before scsql recorded it).';
comment on column scsql.learnings.rule_for is
  'The one agent this rule denies calls of (a rule made by an agent that is not an orchestrator applies to its maker only); NULL for a rule of the whole project, or while it is not a rule.';

update scsql.learnings l
   set rule_by = coalesce(m.author_id, x.author_id), rule_at = m.at
  from scsql.learnings x
  left join (select distinct on (mc.project_id, mc.target) mc.project_id, mc.target, mc.author_id, mc.at
             from scsql.memory_changes mc
             where mc.op = 'rule'
             order by mc.project_id, mc.target, mc.change_id desc) m
    on m.project_id = x.project_id and m.target = 'learning:' || x.learning_id
 where l.deny and x.project_id = l.project_id and x.learning_id = l.learning_id;

update scsql.learnings l
   set rule_for = l.rule_by
 where l.deny
   and not exists (select from scsql.agents a join scsql.team_roles r on r.name = a.team_role
                   where a.agent_id = l.rule_by and r.orchestrates);
