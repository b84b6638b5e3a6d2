-- 0740 What hooked sessions cost: one chained row per message of the model
-- (Claude Code's transcript carries each assistant message's model and
-- token usage), priced with the cache rates model_prices now has; and how
-- far each session's transcript was read for them.

alter table scsql.model_prices
  add column cache_write_usd_per_mtok numeric
    constraint model_prices_cache_write_usd_per_mtok_check check (cache_write_usd_per_mtok >= 0),
  add column cache_read_usd_per_mtok numeric
    constraint model_prices_cache_read_usd_per_mtok_check check (cache_read_usd_per_mtok >= 0);
comment on column scsql.model_prices.cache_write_usd_per_mtok is
  'USD per million tokens written to the prompt cache; NULL: 1.25 times the input price.';
comment on column scsql.model_prices.cache_read_usd_per_mtok is
  'USD per million tokens read from the prompt cache; NULL: 0.1 times the input price.';

create sequence scsql.model_calls_id_seq as bigint;
create table scsql.model_calls (
  project_id         bigint not null references scsql.projects,
  model_call_id      bigint not null default nextval('scsql.model_calls_id_seq'),
  at                 timestamptz not null,
  session_id         bigint,
  message_id         text not null constraint model_calls_message_id_check check (char_length(message_id) between 1 and 200),
  model              text constraint model_calls_model_check check (char_length(model) between 1 and 200),
  input_tokens       integer not null default 0 constraint model_calls_input_tokens_check check (input_tokens >= 0),
  output_tokens      integer not null default 0 constraint model_calls_output_tokens_check check (output_tokens >= 0),
  cache_write_tokens integer not null default 0
                     constraint model_calls_cache_write_tokens_check check (cache_write_tokens >= 0),
  cache_read_tokens  integer not null default 0
                     constraint model_calls_cache_read_tokens_check check (cache_read_tokens >= 0),
  tool_use_ids       jsonb constraint model_calls_tool_use_ids_array check (jsonb_typeof(tool_use_ids) = 'array'),
  occurred_at        timestamptz,
  cost_usd           numeric constraint model_calls_cost_usd_check check (cost_usd >= 0),
  author_id          bigint not null,
  key_id             integer not null,
  chain_id           bigint not null,
  seq                bigint not null,
  prev_hash          bytea not null,
  row_hash           bytea not null,
  signature          bytea not null,
  primary key (project_id, model_call_id)
);
alter sequence scsql.model_calls_id_seq owned by scsql.model_calls.model_call_id;
create index model_calls_when_idx on scsql.model_calls (project_id, (coalesce(occurred_at, at)));
create index model_calls_session_idx on scsql.model_calls (project_id, session_id);
comment on table scsql.model_calls is
  'One row per message of the model in a hooked session (read from Claude Code''s transcript): model, tokens (input, output, written to and read from the prompt cache), the tool calls the message issued (tool_use_ids), when it happened, and its cost in USD from scsql.model_prices. A message is counted once, however many tool calls it issued. Chained, append-only.';

alter table scsql.transcript_cursors
  add column usage_offset bigint not null default 0
    constraint transcript_cursors_usage_offset_check check (usage_offset >= 0);
comment on column scsql.transcript_cursors.usage_offset is
  'Bytes of the transcript read for the model''s token usage (scsql.model_calls).';

-- cost_report counts the model's messages too (new columns: sql/11_audit.sql makes it again).
drop function if exists scsql.cost_report(timestamptz, text);
drop function if exists scsql.model_prices();
drop function if exists scsql.set_model_price(text, numeric, numeric, timestamptz);
