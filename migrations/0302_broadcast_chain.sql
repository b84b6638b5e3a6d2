-- 0302 broadcast chain: messages are hash-chained and signed like audit
-- rows. sql/31_broadcast.sql makes the table chained with
-- scsql._make_chained: each message joins its author's chain, carries the
-- author's Ed25519 signature over its type, recipients, task and payload,
-- and can never be changed or removed.
--
-- The chain columns are declared here (they are NOT NULL once chained). The
-- recipient agent is kept by name, to_agent, because the sender signs what
-- it sent; the author is the chain's author_id, which replaces sender_id.
do $$
begin
  if exists (select from scsql.messages) then
    raise exception 'scsql.messages holds unsigned messages written before broadcasts were chained'
      using hint = 'They cannot be signed after the fact. Export them if needed, delete them (and their message_acks), then migrate again.';
  end if;
end
$$;

alter table scsql.messages
  drop column sender_id,
  add column to_agent  text,
  add column at        timestamptz not null,
  add column author_id bigint not null,
  add column key_id    integer not null,
  add column chain_id  bigint not null,
  add column seq       bigint not null,
  add column prev_hash bytea not null,
  add column row_hash  bytea not null,
  add column signature bytea not null,
  add constraint messages_to_agent_named check ((to_agent is null) = (to_agent_id is null));
create index messages_author_idx on scsql.messages (project_id, author_id, created_at);
-- A foreign key into a chained table cannot be checked: the check locks the
-- referenced row, which needs UPDATE, and nobody holds UPDATE on a chained
-- table. Messages are never removed, and ack() acknowledges only a message
-- it has found in the caller's project.
alter table scsql.message_acks drop constraint message_acks_project_id_message_id_fkey;
comment on table scsql.messages is
  'The broadcast channel: typed messages from one agent (author_id) to a team role or to one agent (to_agent, to_agent_id) of the same project. Chained and signed like audit rows, append-only. from_orchestrator records whether the sender''s team role orchestrates when it sent; other senders'' messages are shown as unverified agent output.';
