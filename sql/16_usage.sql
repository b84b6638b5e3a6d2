-- 16 usage: what the model's messages of a hooked session cost. Claude
-- Code's transcript carries each assistant message's model and token usage
-- (input, output, written to and read from the prompt cache); the hooks read
-- it (at Stop, PreCompact, SessionEnd, and scsql import claude) and record
-- each message once, with the tool calls it issued, priced here.

select scsql._define_error(code, name, meaning) from (values
  ('SC152', 'usage_cursor_invalid', 'A transcript''s usage offset must be a byte count that only grows.')
) as t(code, name, meaning);

select scsql._make_chained('scsql.model_calls',
  array['session_id', 'message_id', 'model', 'input_tokens', 'output_tokens', 'cache_write_tokens',
        'cache_read_tokens', 'tool_use_ids', 'occurred_at'],
  array['model_call_id', 'cost_usd']);

-- The list prices of current models, dated; an administrator's set_model_price
-- from a later time wins. Cache writes cost 1.25 times input, reads 0.1 times
-- (NULL rates: see scsql.model_calls_cost).
insert into scsql.model_prices (model, effective_from, input_usd_per_mtok, output_usd_per_mtok,
                                cache_write_usd_per_mtok, cache_read_usd_per_mtok)
values ('claude-opus-4-5', '2025-11-24', 5, 25, 6.25, 0.5),
       ('claude-opus-4', '2025-05-22', 15, 75, 18.75, 1.5),
       ('claude-sonnet-4', '2025-05-22', 3, 15, 3.75, 0.3),
       ('claude-haiku-4-5', '2025-10-15', 1, 5, 1.25, 0.1),
       ('claude-3-7-sonnet', '2025-02-24', 3, 15, 3.75, 0.3),
       ('claude-3-5-sonnet', '2024-06-20', 3, 15, 3.75, 0.3),
       ('claude-3-5-haiku', '2024-11-04', 0.8, 4, 1, 0.08),
       ('claude-3-opus', '2024-03-04', 15, 75, 18.75, 1.5)
on conflict (model, effective_from) do nothing;

create or replace function scsql.record_model_call(
  p_message_id text, p_model text default null, p_input_tokens integer default 0, p_output_tokens integer default 0,
  p_cache_write_tokens integer default 0, p_cache_read_tokens integer default 0, p_session_id bigint default null,
  p_tool_use_ids jsonb default null, p_occurred_at timestamptz default null,
  p_at timestamptz default null, p_key_id integer default null, p_signature bytea default null,
  out model_call_id bigint, out cost_usd numeric)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_me scsql.agents := scsql._me();
  v_when timestamptz := coalesce(p_occurred_at, p_at, now());
  v_price scsql.model_prices;
  v_err scsql.violation;
begin
  perform scsql._require_time('occurred_at', p_occurred_at);
  perform scsql._require(p_tool_use_ids is null or (jsonb_typeof(p_tool_use_ids) = 'array'
                         and jsonb_array_length(p_tool_use_ids) <= 1000
                         and not jsonb_path_exists(p_tool_use_ids, '$[*] ? (@.type() != "string")')),
                         'tool_use_ids must be a JSON array of at most 1000 ids');
  if not scsql._capture_key(v_me.project_id, v_me.agent_id, 'model:' || left(p_message_id, 190)) then
    return;  -- recorded before (at an earlier Stop, or by an import)
  end if;
  -- The price in force when the message happened: the longest priced prefix of its model.
  select m.* into v_price from scsql.model_prices m
  where left(p_model, length(m.model)) = m.model and m.effective_from <= v_when
  order by length(m.model) desc, m.effective_from desc limit 1;
  insert into scsql.model_calls as c (project_id, author_id, session_id, message_id, model, input_tokens, output_tokens,
                                      cache_write_tokens, cache_read_tokens, tool_use_ids, occurred_at, cost_usd,
                                      at, key_id, signature)
  values (v_me.project_id, v_me.agent_id, p_session_id, p_message_id, p_model, p_input_tokens, p_output_tokens,
          p_cache_write_tokens, p_cache_read_tokens, p_tool_use_ids, p_occurred_at,
          (p_input_tokens * v_price.input_usd_per_mtok + p_output_tokens * v_price.output_usd_per_mtok
           + p_cache_write_tokens * coalesce(v_price.cache_write_usd_per_mtok, 1.25 * v_price.input_usd_per_mtok)
           + p_cache_read_tokens * coalesce(v_price.cache_read_usd_per_mtok, 0.1 * v_price.input_usd_per_mtok))
          / 1000000,
          p_at, p_key_id, p_signature)
  returning c.model_call_id, c.cost_usd into model_call_id, cost_usd;
  perform scsql._require_references(v_me.project_id, p_session_id);
exception when check_violation or not_null_violation then
  get stacked diagnostics v_err.returned_sqlstate = returned_sqlstate, v_err.schema_name = schema_name,
    v_err.table_name = table_name, v_err.constraint_name = constraint_name, v_err.column_name = column_name, v_err.message_text = message_text;
  perform scsql._raise_violation(v_err);
end
$$;
comment on function scsql.record_model_call(text, text, integer, integer, integer, integer, bigint, jsonb, timestamptz, timestamptz, integer, bytea) is
  'Records one message of the model of your session, with its token usage and the tool calls it issued, priced. Signed for you.

p_message_id: the model''s message id (a message is recorded once)
p_model: the model that wrote it
p_input_tokens (0..): input tokens, not counting the prompt cache
p_output_tokens (0..): output tokens
p_cache_write_tokens (0..): input tokens written to the prompt cache
p_cache_read_tokens (0..): input tokens read from the prompt cache
p_session_id: session_id from open_session
p_tool_use_ids (array): the tool calls the message issued
p_occurred_at: when it happened
hidden: the Claude Code hooks read usage from the session''s transcript

Its cost is priced from scsql.model_prices in force at occurred_at: the longest priced prefix of the model, cache writes and reads at their own rates (1.25 and 0.1 times the input price where none is set). A message recorded before writes nothing and returns NULLs. Returns model_call_id and cost_usd (NULL when the model has no price). Raises SC010 bad argument, SC111 unknown session, SC101/SC102/SC103 bad signing fields.';

create or replace function scsql.usage_cursor(p_session_id bigint)
returns bigint
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_me scsql.agents := scsql._me();
  v_offset bigint;
begin
  perform scsql._my_session(v_me, p_session_id);
  insert into scsql.transcript_cursors (project_id, session_id) values (v_me.project_id, p_session_id)
  on conflict do nothing;
  select c.usage_offset into v_offset from scsql.transcript_cursors c
  where c.project_id = v_me.project_id and c.session_id = p_session_id
  for update;
  return v_offset;
end
$$;
comment on function scsql.usage_cursor(bigint) is
  'How many bytes of your session''s transcript were read for the model''s token usage, locked until your transaction ends.

p_session_id: session_id from open_session
hidden: the Claude Code hooks read usage from the session''s transcript

Record the new offset with advance_usage_cursor in the same transaction. Raises SC146 for a session that is not yours.';

create or replace function scsql.advance_usage_cursor(p_session_id bigint, p_offset bigint)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_me scsql.agents := scsql._me();
begin
  perform scsql._my_session(v_me, p_session_id);
  insert into scsql.transcript_cursors (project_id, session_id) values (v_me.project_id, p_session_id)
  on conflict do nothing;
  update scsql.transcript_cursors c set usage_offset = p_offset, updated_at = now()
  where c.project_id = v_me.project_id and c.session_id = p_session_id and p_offset >= c.usage_offset;
  if not found then
    raise exception using errcode = 'SC152',
      message = format('the usage offset of session %s may only grow (given %s)', p_session_id, p_offset),
      hint = 'read it with usage_cursor in the same transaction';
  end if;
end
$$;
comment on function scsql.advance_usage_cursor(bigint, bigint) is
  'Records how many bytes of your session''s transcript were read for the model''s token usage.

p_session_id: session_id from open_session
p_offset (0..): bytes read, never fewer than before
hidden: the Claude Code hooks read usage from the session''s transcript

Raises SC146 for a session that is not yours, SC152 for an offset below the one recorded.';
