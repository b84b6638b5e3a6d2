-- The tables of scsql's schema as a fresh install makes them, generated from the
-- database's catalogue (scsql/ops/schema.py); migrations/ is how they got here,
-- sql/ and policies/ hold the functions, triggers and row-level security policies.
-- Not applied by anything: tests/core/test_schema.py checks it is current.

-- Ed25519 public keys of agents. A key is valid from valid_from until the valid_from of the agent's next key; old rows stay verifiable with the key valid when they were written.
create table scsql.agent_keys (
  agent_id bigint not null,
  key_id integer not null,
  public_key bytea not null,
  valid_from timestamp with time zone default clock_timestamp() not null
);
alter table scsql.agent_keys add constraint agent_keys_pkey PRIMARY KEY (agent_id, key_id);
alter table scsql.agent_keys add constraint agent_keys_public_key_key UNIQUE (public_key);
alter table scsql.agent_keys add constraint agent_keys_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES scsql.agents(agent_id);
alter table scsql.agent_keys add constraint agent_keys_key_id_check CHECK ((key_id > 0));
alter table scsql.agent_keys add constraint agent_keys_public_key_check CHECK ((length(public_key) = 32));
alter table scsql.agent_keys enable row level security;
alter table scsql.agent_keys force row level security;

-- Bearer tokens of the team server (scsql serve), one agent each: the sha256 of the token (never the token), its scope (agent: MCP tools and hook events; tools; hooks), an optional note, when and by whom it was made, when it expires (NULL: never), when it was last used (to the minute) and when it was revoked. Written only by scsql.create_agent_token, scsql.revoke_agent_token and scsql_caller.use_token.
create table scsql.agent_tokens (
  project_id bigint not null,
  token_id bigint default nextval('scsql.agent_tokens_id_seq'::regclass) not null,
  agent_id bigint not null,
  -- sha256 of the token's text. The token carries 256 random bits, so a fast hash is enough (no guess can be checked against it in any useful time) and lets each request be checked by one index look-up.
  token_hash bytea not null,
  scope text default 'agent'::text not null,
  note text,
  created_at timestamp with time zone default now() not null,
  created_by text default SESSION_USER not null,
  expires_at timestamp with time zone,
  last_used_at timestamp with time zone,
  revoked_at timestamp with time zone
);
alter table scsql.agent_tokens add constraint agent_tokens_pkey PRIMARY KEY (project_id, token_id);
alter table scsql.agent_tokens add constraint agent_tokens_hash_key UNIQUE (project_id, token_hash);
alter table scsql.agent_tokens add constraint agent_tokens_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES scsql.agents(agent_id);
alter table scsql.agent_tokens add constraint agent_tokens_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.agent_tokens add constraint agent_tokens_expiry CHECK (((expires_at IS NULL) OR (expires_at > created_at)));
alter table scsql.agent_tokens add constraint agent_tokens_note_check CHECK (((char_length(note) >= 1) AND (char_length(note) <= 200)));
alter table scsql.agent_tokens add constraint agent_tokens_scope_check CHECK ((scope = ANY (ARRAY['agent'::text, 'tools'::text, 'hooks'::text])));
alter table scsql.agent_tokens add constraint agent_tokens_token_hash_check CHECK ((octet_length(token_hash) = 32));
CREATE INDEX agent_tokens_agent_idx ON scsql.agent_tokens USING btree (project_id, agent_id);
alter table scsql.agent_tokens enable row level security;
alter table scsql.agent_tokens force row level security;

-- One row per agent. Each agent is the PostgreSQL role role_name (scsql_agent_<name>); its identity inside the database is current_user, never an argument.
create table scsql.agents (
  agent_id bigint generated always as identity not null,
  project_id bigint not null,
  name text not null,
  role_name text not null,
  team_role text not null,
  created_at timestamp with time zone default now() not null,
  revoked_at timestamp with time zone
);
alter table scsql.agents add constraint agents_pkey PRIMARY KEY (agent_id);
alter table scsql.agents add constraint agents_name_key UNIQUE (name);
alter table scsql.agents add constraint agents_role_name_key UNIQUE (role_name);
alter table scsql.agents add constraint agents_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.agents add constraint agents_team_role_fkey FOREIGN KEY (team_role) REFERENCES scsql.team_roles(name);
alter table scsql.agents add constraint agents_name_check CHECK ((name ~ '^[a-z][a-z0-9_]{0,47}$'::text));
CREATE INDEX agents_project_idx ON scsql.agents USING btree (project_id);
alter table scsql.agents enable row level security;
alter table scsql.agents force row level security;

-- One row: the sha256 of the sql/ and policies/ files scsql migrate applied last. Migrate re-applies them only when they changed (or with --reapply).
create table scsql.applied_definitions (
  one boolean default true not null,
  checksum text not null,
  applied_at timestamp with time zone default now() not null
);
alter table scsql.applied_definitions add constraint applied_definitions_pkey PRIMARY KEY (one);
alter table scsql.applied_definitions add constraint applied_definitions_checksum CHECK ((checksum ~ '^[0-9a-f]{64}$'::text));
alter table scsql.applied_definitions add constraint applied_definitions_one CHECK (one);
alter table scsql.applied_definitions enable row level security;
alter table scsql.applied_definitions force row level security;

-- Ed25519 public keys of the auditor, who signs checkpoints. Registered by an administrator; the private key stays in the auditor's keystore (auditor.key, mode 0600).
create table scsql.auditor_keys (
  key_id integer generated always as identity not null,
  public_key bytea not null,
  valid_from timestamp with time zone default clock_timestamp() not null,
  registered_by text default SESSION_USER not null
);
alter table scsql.auditor_keys add constraint auditor_keys_pkey PRIMARY KEY (key_id);
alter table scsql.auditor_keys add constraint auditor_keys_public_key_key UNIQUE (public_key);
alter table scsql.auditor_keys add constraint auditor_keys_public_key_check CHECK ((length(public_key) = 32));
alter table scsql.auditor_keys enable row level security;
alter table scsql.auditor_keys force row level security;

-- One row per agent that has broadcast: locked by each broadcast of that agent, so concurrent sends by one agent count each other (the rate limit is race-free); per_minute overrides the project's limit for that agent.
create table scsql.broadcast_senders (
  project_id bigint not null,
  agent_id bigint not null,
  per_minute integer
);
alter table scsql.broadcast_senders add constraint broadcast_senders_pkey PRIMARY KEY (project_id, agent_id);
alter table scsql.broadcast_senders add constraint broadcast_senders_per_minute_check CHECK (((per_minute >= 0) AND (per_minute <= 10000)));
alter table scsql.broadcast_senders enable row level security;
alter table scsql.broadcast_senders force row level security;

-- The keys of the events capture wrote (a hook event id, or a tool call's tool_use_id), each written in the transaction of its rows, so a replayed or re-imported event adds nothing.
create table scsql.capture_events (
  project_id bigint not null,
  event_key text not null,
  agent_id bigint not null,
  captured_at timestamp with time zone default now() not null
);
alter table scsql.capture_events add constraint capture_events_pkey PRIMARY KEY (project_id, event_key);
alter table scsql.capture_events add constraint capture_events_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.capture_events add constraint capture_events_event_key_check CHECK (((char_length(event_key) >= 1) AND (char_length(event_key) <= 200)));
alter table scsql.capture_events enable row level security;
alter table scsql.capture_events force row level security;

-- Every kind of break the verifiers report, with its meaning: found_by both (scsql verify and scsql.verify_chain) or client (scsql verify alone: signatures, keys, exported checkpoints, rows of no chain), and whether an acknowledged quarantine excuses it (a break an agent can cause through the API).
create table scsql.chain_break_kinds (
  kind text not null,
  found_by text not null,
  excusable boolean default false not null,
  meaning text not null
);
alter table scsql.chain_break_kinds add constraint chain_break_kinds_pkey PRIMARY KEY (kind);
alter table scsql.chain_break_kinds add constraint chain_break_kinds_found_by_check CHECK ((found_by = ANY (ARRAY['both'::text, 'client'::text])));
alter table scsql.chain_break_kinds add constraint chain_break_kinds_kind_check CHECK ((kind ~ '^[a-z]+(-[a-z]+)*$'::text));
alter table scsql.chain_break_kinds enable row level security;
alter table scsql.chain_break_kinds force row level security;

-- Chains scsql checkpoint found broken: from_seq is the first seq that did not verify (0: the chain as a whole), anchored_seq the last seq a checkpoint signed for it (checkpoint_id: the checkpoint that anchored its verified prefix, if this run did), kind and detail the break, found_at/found_by who found it. Retention never drops rows of the chain after anchored_seq. It stays open until an administrator acknowledges it (scsql.acknowledge_quarantine); the record is kept.
create table scsql.chain_quarantines (
  quarantine_id bigint generated always as identity not null,
  project_id bigint not null,
  chain_id bigint not null,
  from_seq bigint not null,
  anchored_seq bigint not null,
  checkpoint_id bigint,
  kind text not null,
  detail text not null,
  found_at timestamp with time zone default now() not null,
  found_by text default SESSION_USER not null,
  acknowledged_at timestamp with time zone,
  acknowledged_by text,
  note text
);
alter table scsql.chain_quarantines add constraint chain_quarantines_pkey PRIMARY KEY (quarantine_id);
alter table scsql.chain_quarantines add constraint chain_quarantines_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.chain_quarantines add constraint chain_quarantines_acknowledged_by CHECK (((acknowledged_at IS NULL) = (acknowledged_by IS NULL)));
alter table scsql.chain_quarantines add constraint chain_quarantines_anchored_seq_check CHECK ((anchored_seq >= 0));
alter table scsql.chain_quarantines add constraint chain_quarantines_detail_check CHECK ((char_length(detail) <= 2000));
alter table scsql.chain_quarantines add constraint chain_quarantines_from_seq_check CHECK ((from_seq >= 0));
alter table scsql.chain_quarantines add constraint chain_quarantines_kind_check CHECK (((char_length(kind) >= 1) AND (char_length(kind) <= 100)));
alter table scsql.chain_quarantines add constraint chain_quarantines_note_check CHECK ((char_length(note) <= 2000));
CREATE INDEX chain_quarantines_chain_idx ON scsql.chain_quarantines USING btree (chain_id, from_seq);
alter table scsql.chain_quarantines enable row level security;
alter table scsql.chain_quarantines force row level security;

-- Settings of every chain (one row): clock_skew, how far the timestamp a chained write or a checkpoint carries may be from the server clock (default 5 minutes). Changed by administrators with scsql.set_clock_skew.
create table scsql.chain_settings (
  singleton boolean default true not null,
  clock_skew interval default '00:05:00'::interval not null,
  updated_at timestamp with time zone default now() not null,
  updated_by text default SESSION_USER not null
);
alter table scsql.chain_settings add constraint chain_settings_pkey PRIMARY KEY (singleton);
alter table scsql.chain_settings add constraint chain_settings_clock_skew_check CHECK (((clock_skew >= '00:00:01'::interval) AND (clock_skew <= '30 days'::interval)));
alter table scsql.chain_settings add constraint chain_settings_singleton_check CHECK (singleton);
alter table scsql.chain_settings enable row level security;
alter table scsql.chain_settings force row level security;

-- Tables made chained by scsql._make_chained: the columns the author signs (payload order), the columns the database stamps (hashed, not signed), and the appended fields (signed columns added after rows existed, in the payload after the signed ones, each only when not NULL; the list only grows at its end).
create table scsql.chained_tables (
  table_name text not null,
  signed_fields text[] not null,
  stamped_fields text[] default '{}'::text[] not null,
  registered_at timestamp with time zone default now() not null,
  appended_fields text[] default '{}'::text[] not null,
  -- Signed text columns the row hashes and signs through their sha256 (kept in the column <field>_sha256) instead of their text, for rows whose digest column is not NULL (see scsql._enc): the text may then be purged (scsql.purge) and the row still verifies. Only grows.
  digested_fields text[] default '{}'::text[] not null
);
alter table scsql.chained_tables add constraint chained_tables_pkey PRIMARY KEY (table_name);
alter table scsql.chained_tables enable row level security;
alter table scsql.chained_tables force row level security;

-- One hash chain per (project, agent), spanning every chained table. head_seq/head_hash: the newest row. Verification checks every row still present; rows may be missing only where checkpoint segments place them in a partition retention dropped (horizon_seq/horizon_hash: see their comment).
create table scsql.chains (
  project_id bigint not null,
  chain_id bigint generated always as identity not null,
  agent_id bigint not null,
  head_seq bigint default 0 not null,
  head_hash bytea default '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea not null,
  -- Set by retention of earlier versions: rows up to this seq may have been retired without segments. Trusted only when (horizon_seq, horizon_hash) is the head of a checkpoint; 0 when retention never ran before checkpoint format 3.
  horizon_seq bigint default 0 not null,
  horizon_hash bytea default '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea not null,
  horizon_checkpoint bigint,
  created_at timestamp with time zone default now() not null,
  -- row_hash of the row before the head (NULL before the first append); set by the same UPDATE that advances the head.
  prev_head_hash bytea
);
alter table scsql.chains add constraint chains_pkey PRIMARY KEY (project_id, chain_id);
alter table scsql.chains add constraint chains_project_id_agent_id_key UNIQUE (project_id, agent_id);
alter table scsql.chains add constraint chains_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES scsql.agents(agent_id);
alter table scsql.chains add constraint chains_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.chains add constraint chains_head_hash_check CHECK ((length(head_hash) = 32));
alter table scsql.chains add constraint chains_head_seq_check CHECK ((head_seq >= 0));
alter table scsql.chains add constraint chains_horizon_hash_check CHECK ((length(horizon_hash) = 32));
alter table scsql.chains add constraint chains_horizon_seq_check CHECK ((horizon_seq >= 0));
alter table scsql.chains enable row level security;
alter table scsql.chains force row level security;

-- The secret each project's LISTEN/NOTIFY channel names are derived from (see scsql._channel): 32 random bytes, made with the project (scsql.create_project). Only the owner reads it.
create table scsql.channel_keys (
  project_id bigint not null,
  key bytea default sha256(convert_to(((gen_random_uuid())::text || (gen_random_uuid())::text), 'UTF8'::name)) not null
);
alter table scsql.channel_keys add constraint channel_keys_pkey PRIMARY KEY (project_id);
alter table scsql.channel_keys add constraint channel_keys_key_check CHECK ((length(key) = 32));
alter table scsql.channel_keys enable row level security;
alter table scsql.channel_keys force row level security;

-- The chain heads (seq, row_hash) a checkpoint signed.
create table scsql.checkpoint_heads (
  project_id bigint not null,
  checkpoint_id bigint not null,
  chain_id bigint not null,
  seq bigint not null,
  row_hash bytea not null,
  -- The chain's agent, as the auditor signed it (checkpoint format 3; NULL in earlier formats).
  agent_id bigint,
  -- The checkpoint's segments of this chain cover the rows after this seq up to the head (format 3; NULL in earlier formats).
  from_seq bigint
);
alter table scsql.checkpoint_heads add constraint checkpoint_heads_pkey PRIMARY KEY (project_id, checkpoint_id, chain_id);
alter table scsql.checkpoint_heads add constraint checkpoint_heads_project_id_checkpoint_id_fkey FOREIGN KEY (project_id, checkpoint_id) REFERENCES scsql.checkpoints(project_id, checkpoint_id);
alter table scsql.checkpoint_heads add constraint checkpoint_heads_from_seq_check CHECK ((from_seq >= 0));
alter table scsql.checkpoint_heads add constraint checkpoint_heads_row_hash_check CHECK ((length(row_hash) = 32));
alter table scsql.checkpoint_heads add constraint checkpoint_heads_seq_check CHECK ((seq >= 0));
CREATE INDEX checkpoint_heads_chain_idx ON scsql.checkpoint_heads USING btree (chain_id, seq);
alter table scsql.checkpoint_heads enable row level security;
alter table scsql.checkpoint_heads force row level security;

-- Segments a checkpoint signed: rows first_seq..last_seq of a chain lie in partition PART (see scsql._chain_partitions) and the last one has row_hash. Retention drops a partition only when segments cover every row in it.
create table scsql.checkpoint_segments (
  project_id bigint not null,
  checkpoint_id bigint not null,
  chain_id bigint not null,
  first_seq bigint not null,
  last_seq bigint not null,
  row_hash bytea not null,
  part text not null
);
alter table scsql.checkpoint_segments add constraint checkpoint_segments_pkey PRIMARY KEY (project_id, checkpoint_id, chain_id, last_seq);
alter table scsql.checkpoint_segments add constraint checkpoint_segments_project_id_checkpoint_id_fkey FOREIGN KEY (project_id, checkpoint_id) REFERENCES scsql.checkpoints(project_id, checkpoint_id);
alter table scsql.checkpoint_segments add constraint checkpoint_segments_first_seq_check CHECK ((first_seq >= 1));
alter table scsql.checkpoint_segments add constraint checkpoint_segments_part_check CHECK (((char_length(part) >= 1) AND (char_length(part) <= 300)));
alter table scsql.checkpoint_segments add constraint checkpoint_segments_row_hash_check CHECK ((length(row_hash) = 32));
alter table scsql.checkpoint_segments add constraint checkpoint_segments_seq_order CHECK ((last_seq >= first_seq));
CREATE INDEX checkpoint_segments_chain_idx ON scsql.checkpoint_segments USING btree (chain_id, last_seq);
CREATE INDEX checkpoint_segments_part_idx ON scsql.checkpoint_segments USING btree (part, chain_id, last_seq);
alter table scsql.checkpoint_segments enable row level security;
alter table scsql.checkpoint_segments force row level security;

-- A signed record of every chain head of one project at one moment. Verification can start from one; retention drops only rows a checkpoint covers.
create table scsql.checkpoints (
  project_id bigint not null,
  checkpoint_id bigint generated always as identity not null,
  at timestamp with time zone not null,
  key_id integer not null,
  signature bytea not null,
  recorded_at timestamp with time zone default now() not null
);
alter table scsql.checkpoints add constraint checkpoints_pkey PRIMARY KEY (project_id, checkpoint_id);
alter table scsql.checkpoints add constraint checkpoints_key_id_fkey FOREIGN KEY (key_id) REFERENCES scsql.auditor_keys(key_id);
alter table scsql.checkpoints add constraint checkpoints_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.checkpoints add constraint checkpoints_signature_check CHECK ((length(signature) = 64));
alter table scsql.checkpoints enable row level security;
alter table scsql.checkpoints force row level security;

-- A definition in a file: kind, name, qualified name (Class.method), signature (its text up to the body, one line), line span, and parent_id (the definition it is nested in). key (the qualified name, #2, #3 for repeats) keeps its def_id while the file is re-indexed, so references to it stay resolved. rank: how much the rest of the code leans on it (scsql.rank_code).
create table scsql.code_definitions (
  project_id bigint not null,
  def_id bigint generated always as identity not null,
  file_id bigint not null,
  key text not null,
  parent_id bigint,
  kind text not null,
  name text not null,
  qualname text not null,
  signature text not null,
  line_start integer not null,
  line_end integer not null,
  rank double precision default 0 not null
);
alter table scsql.code_definitions add constraint code_definitions_pkey PRIMARY KEY (project_id, def_id);
alter table scsql.code_definitions add constraint code_definitions_key_key UNIQUE (project_id, file_id, key);
alter table scsql.code_definitions add constraint code_definitions_project_id_file_id_fkey FOREIGN KEY (project_id, file_id) REFERENCES scsql.code_files(project_id, file_id) ON DELETE CASCADE;
alter table scsql.code_definitions add constraint code_definitions_kind_check CHECK ((kind = ANY (ARRAY['module'::text, 'class'::text, 'interface'::text, 'type'::text, 'function'::text, 'method'::text, 'macro'::text, 'constant'::text, 'table'::text, 'view'::text, 'trigger'::text, 'sequence'::text, 'script'::text, 'target'::text])));
CREATE INDEX code_definitions_name_idx ON scsql.code_definitions USING btree (project_id, name);
CREATE INDEX code_definitions_qualname_idx ON scsql.code_definitions USING btree (project_id, qualname);
alter table scsql.code_definitions enable row level security;
alter table scsql.code_definitions force row level security;

-- A source file of the project as parsed: path (relative to the project root), language (NULL: held as text, no symbols), module (how imports name it: a/b/c for a/b/c.py; module_keys are its trailing parts, for matching imports), content_hash (sha256 of the file as read), status (parsed; partial: the grammar met errors at error_lines and what parsed around them is kept; text), rank (PageRank over code_links, scsql.rank_code).
create table scsql.code_files (
  project_id bigint not null,
  file_id bigint generated always as identity not null,
  path text not null,
  language text,
  module text not null,
  module_keys text[] not null,
  content_hash text not null,
  status text not null,
  error_lines integer[] default '{}'::integer[] not null,
  rank double precision default 0 not null,
  indexed_at timestamp with time zone default now() not null,
  indexed_by bigint not null
);
alter table scsql.code_files add constraint code_files_pkey PRIMARY KEY (project_id, file_id);
alter table scsql.code_files add constraint code_files_path_key UNIQUE (project_id, path);
alter table scsql.code_files add constraint code_files_indexed_by_fkey FOREIGN KEY (indexed_by) REFERENCES scsql.agents(agent_id);
alter table scsql.code_files add constraint code_files_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.code_files add constraint code_files_status_check CHECK ((status = ANY (ARRAY['parsed'::text, 'partial'::text, 'text'::text])));
CREATE INDEX code_files_module_idx ON scsql.code_files USING btree (project_id, module);
CREATE INDEX code_files_module_keys_idx ON scsql.code_files USING gin (module_keys);
CREATE INDEX code_files_rank_idx ON scsql.code_files USING btree (project_id, rank DESC);
alter table scsql.code_files enable row level security;
alter table scsql.code_files force row level security;

-- The graph between files that ranking walks, made by scsql.rank_code from the references: SRC refers to what DST defines, with WEIGHT (the square root of the references, a tenth for private names, shared among the candidates of an ambiguous one; an import counts one); out_share is WEIGHT over the weights of SRC's links, in_share over those of the links to DST.
create table scsql.code_links (
  project_id bigint not null,
  src_file_id bigint not null,
  dst_file_id bigint not null,
  weight double precision not null,
  out_share double precision default 0 not null,
  in_share double precision default 0 not null
);
alter table scsql.code_links add constraint code_links_pkey PRIMARY KEY (project_id, src_file_id, dst_file_id);
CREATE INDEX code_links_dst_share_idx ON scsql.code_links USING btree (project_id, dst_file_id, in_share DESC);
alter table scsql.code_links enable row level security;
alter table scsql.code_links force row level security;

-- A reference from a definition (from_def_id; NULL: the file's top level) of a file: a call of NAME (qualifier a.b for a.b.f()), an inheritance of NAME, or an import of module NAME (qualifier: the symbol imported; alias: the name it is bound to), with the lines it occurs on and how often (n). resolution: pending (not yet resolved); local, import (through the file's imports) or unique (the only definition of that name): target_def_id; ambiguous: candidates (the definitions it may be, best first); unresolved (no definition of that name in the project: a library's or the language's); for an import, file (target_file_id), module (several files, target_module: a Go package) or external.
create table scsql.code_references (
  project_id bigint not null,
  ref_id bigint generated always as identity not null,
  file_id bigint not null,
  from_def_id bigint,
  kind text not null,
  name text not null,
  qualifier text,
  alias text,
  lines integer[] not null,
  n integer not null,
  resolution text default 'pending'::text not null,
  target_def_id bigint,
  target_file_id bigint,
  target_module text,
  candidates bigint[]
);
alter table scsql.code_references add constraint code_references_pkey PRIMARY KEY (project_id, ref_id);
alter table scsql.code_references add constraint code_references_project_id_file_id_fkey FOREIGN KEY (project_id, file_id) REFERENCES scsql.code_files(project_id, file_id) ON DELETE CASCADE;
alter table scsql.code_references add constraint code_references_kind_check CHECK ((kind = ANY (ARRAY['call'::text, 'inherit'::text, 'import'::text])));
alter table scsql.code_references add constraint code_references_resolution_check CHECK ((resolution = ANY (ARRAY['pending'::text, 'local'::text, 'import'::text, 'unique'::text, 'ambiguous'::text, 'unresolved'::text, 'file'::text, 'module'::text, 'external'::text])));
CREATE INDEX code_references_file_idx ON scsql.code_references USING btree (project_id, file_id);
CREATE INDEX code_references_import_alias_idx ON scsql.code_references USING btree (project_id, file_id, alias) WHERE (kind = 'import'::text);
CREATE INDEX code_references_name_idx ON scsql.code_references USING btree (project_id, name);
CREATE INDEX code_references_pending_idx ON scsql.code_references USING btree (project_id, ref_id) WHERE (resolution = 'pending'::text);
CREATE INDEX code_references_target_file_idx ON scsql.code_references USING btree (project_id, target_file_id) WHERE (target_file_id IS NOT NULL);
CREATE INDEX code_references_target_idx ON scsql.code_references USING btree (project_id, target_def_id) WHERE (target_def_id IS NOT NULL);
alter table scsql.code_references enable row level security;
alter table scsql.code_references force row level security;

-- One row per project with code indexed: when its graph last changed and when it was last ranked. Writers of the graph lock it (one writer of a project's graph at a time).
create table scsql.code_state (
  project_id bigint not null,
  changed_at timestamp with time zone default now() not null,
  ranked_at timestamp with time zone
);
alter table scsql.code_state add constraint code_state_pkey PRIMARY KEY (project_id);
alter table scsql.code_state add constraint code_state_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.code_state enable row level security;
alter table scsql.code_state force row level security;

-- Lets an agent read confidential outcomes and learnings written by agents of another team role of the same project.
create table scsql.confidential_grants (
  project_id bigint not null,
  agent_id bigint not null,
  team_role text not null,
  granted_at timestamp with time zone default now() not null,
  granted_by text default SESSION_USER not null
);
alter table scsql.confidential_grants add constraint confidential_grants_pkey PRIMARY KEY (project_id, agent_id, team_role);
alter table scsql.confidential_grants add constraint confidential_grants_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES scsql.agents(agent_id);
alter table scsql.confidential_grants add constraint confidential_grants_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.confidential_grants add constraint confidential_grants_team_role_fkey FOREIGN KEY (team_role) REFERENCES scsql.team_roles(name);
alter table scsql.confidential_grants enable row level security;
alter table scsql.confidential_grants force row level security;

-- Per-project coordination settings: how many broadcasts each agent may send per minute (default 10 when the project has no row).
create table scsql.coordination_settings (
  project_id bigint not null,
  broadcasts_per_minute integer default 10 not null,
  updated_at timestamp with time zone default now() not null
);
alter table scsql.coordination_settings add constraint coordination_settings_pkey PRIMARY KEY (project_id);
alter table scsql.coordination_settings add constraint coordination_settings_broadcasts_per_minute_check CHECK (((broadcasts_per_minute >= 0) AND (broadcasts_per_minute <= 10000)));
alter table scsql.coordination_settings enable row level security;
alter table scsql.coordination_settings force row level security;

-- Decisions of a project, with their rationale: written by decide and by summarize_session (its decisions), never changed. A decision that supersedes another names it (each is superseded at most once); the older one stays as history. Search returns current decisions as kind decision (source_path decision:<id>).
create table scsql.decisions (
  project_id bigint not null,
  decision_id bigint generated always as identity not null,
  title text not null,
  rationale text not null,
  supersedes bigint,
  decided_by bigint not null,
  decided_at timestamp with time zone default now() not null,
  source_path text,
  terms text[] generated always as (scsql_caller.term_array(((title || ' '::text) || rationale))) stored,
  -- When scsql.purge removed the decision's title and rationale (each is "[purged]" since; scsql.purges holds the sha256 of what they were); NULL for a decision never purged.
  purged_at timestamp with time zone
);
alter table scsql.decisions add constraint decisions_pkey PRIMARY KEY (project_id, decision_id);
alter table scsql.decisions add constraint decisions_supersedes_once UNIQUE (project_id, supersedes);
alter table scsql.decisions add constraint decisions_decided_by_fkey FOREIGN KEY (decided_by) REFERENCES scsql.agents(agent_id);
alter table scsql.decisions add constraint decisions_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.decisions add constraint decisions_supersedes_fkey FOREIGN KEY (project_id, supersedes) REFERENCES scsql.decisions(project_id, decision_id);
alter table scsql.decisions add constraint decisions_rationale_check CHECK (((char_length(rationale) >= 1) AND (char_length(rationale) <= 4000)));
alter table scsql.decisions add constraint decisions_title_check CHECK (((char_length(title) >= 1) AND (char_length(title) <= 200)));
CREATE INDEX decisions_recent_idx ON scsql.decisions USING btree (project_id, decided_at DESC, decision_id DESC);
alter table scsql.decisions enable row level security;
alter table scsql.decisions force row level security;

-- The prompts, tool calls and conversation chunks each distilled item cites (checked when written: rows of the job's session segment, in the project).
create table scsql.distill_citations (
  project_id bigint not null,
  item_id bigint not null,
  cited text not null,
  cited_id bigint not null
);
alter table scsql.distill_citations add constraint distill_citations_pkey PRIMARY KEY (project_id, item_id, cited, cited_id);
alter table scsql.distill_citations add constraint distill_citations_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.distill_citations add constraint distill_citations_cited_check CHECK ((cited = ANY (ARRAY['prompt'::text, 'tool_call'::text, 'chunk'::text])));
CREATE INDEX distill_citations_cited_idx ON scsql.distill_citations USING btree (project_id, cited, cited_id);
alter table scsql.distill_citations enable row level security;
alter table scsql.distill_citations force row level security;

-- Each item a distillation job wrote: its kind (fact, decision, loop_opened, loop_closed, contradiction, summary), the item as the model proposed it (redacted) and the rows it cites, signed by the distiller; what the database did with it (action), the memory it names (target: a fact key, decision:<id>, loop:<id>, conflict:<id> or a source path) and what an undo needs. Chained, append-only.
create table scsql.distill_items (
  project_id bigint not null,
  item_id bigint default nextval('scsql.distill_items_id_seq'::regclass) not null,
  job_id bigint not null,
  kind text not null,
  item jsonb not null,
  cites jsonb not null,
  action text not null,
  target text not null,
  undo jsonb,
  at timestamp with time zone not null,
  author_id bigint not null,
  key_id integer not null,
  chain_id bigint not null,
  seq bigint not null,
  prev_hash bytea not null,
  row_hash bytea not null,
  signature bytea not null
);
alter table scsql.distill_items add constraint distill_items_pkey PRIMARY KEY (project_id, item_id);
alter table scsql.distill_items add constraint distill_items_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
CREATE INDEX distill_items_chain_idx ON scsql.distill_items USING btree (chain_id, seq);
CREATE INDEX distill_items_job_idx ON scsql.distill_items USING btree (project_id, job_id, item_id);
CREATE INDEX distill_items_target_idx ON scsql.distill_items USING btree (project_id, target);
alter table scsql.distill_items enable row level security;
alter table scsql.distill_items force row level security;

-- One distillation job per session segment: the prompts, tool calls and conversation chunks of the session with ids in (*_from, *_upto]; its task in the queue (team role distiller); its state; the tokens it reserved from the daily budget and those the model used; the sha256 of the model's output; how many items were written and why others were refused; when and by whom it was undone.
create table scsql.distill_jobs (
  project_id bigint not null,
  job_id bigint generated always as identity not null,
  session_id bigint not null,
  segment integer not null,
  task_id bigint,
  prompts_from bigint default 0 not null,
  prompts_upto bigint default 0 not null,
  tool_calls_from bigint default 0 not null,
  tool_calls_upto bigint default 0 not null,
  chunks_from bigint default 0 not null,
  chunks_upto bigint default 0 not null,
  queued_by bigint not null,
  queued_at timestamp with time zone default now() not null,
  state text default 'queued'::text not null,
  started_at timestamp with time zone,
  finished_at timestamp with time zone,
  reserved_tokens integer default 0 not null,
  input_tokens integer,
  output_tokens integer,
  output_hash text,
  written integer,
  refusals jsonb,
  error text,
  undone_at timestamp with time zone,
  undone_by bigint
);
alter table scsql.distill_jobs add constraint distill_jobs_pkey PRIMARY KEY (project_id, job_id);
alter table scsql.distill_jobs add constraint distill_jobs_segment_key UNIQUE (project_id, session_id, segment);
alter table scsql.distill_jobs add constraint distill_jobs_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.distill_jobs add constraint distill_jobs_queued_by_fkey FOREIGN KEY (queued_by) REFERENCES scsql.agents(agent_id);
alter table scsql.distill_jobs add constraint distill_jobs_undone_by_fkey FOREIGN KEY (undone_by) REFERENCES scsql.agents(agent_id);
alter table scsql.distill_jobs add constraint distill_jobs_state_check CHECK ((state = ANY (ARRAY['queued'::text, 'running'::text, 'deferred'::text, 'done'::text, 'rejected'::text, 'failed'::text, 'skipped'::text])));
CREATE INDEX distill_jobs_started_idx ON scsql.distill_jobs USING btree (project_id, started_at) WHERE (started_at IS NOT NULL);
alter table scsql.distill_jobs enable row level security;
alter table scsql.distill_jobs force row level security;

-- Per project: whether sessions are distilled (enabled), the distiller agent that writes what the model proposes, the model command scsql worker runs (NULL: claude -p with MODEL), the daily token budget (UTC days) and how many characters of conversation one job sends at most. Set by administrators with scsql.set_distill; no row: the project does not distil.
create table scsql.distill_settings (
  project_id bigint not null,
  enabled boolean default true not null,
  distiller_id bigint not null,
  command text[],
  model text default 'haiku'::text not null,
  daily_tokens integer default 200000 not null,
  max_input_chars integer default 60000 not null,
  updated_at timestamp with time zone default now() not null,
  updated_by text default SESSION_USER not null
);
alter table scsql.distill_settings add constraint distill_settings_pkey PRIMARY KEY (project_id);
alter table scsql.distill_settings add constraint distill_settings_distiller_id_fkey FOREIGN KEY (distiller_id) REFERENCES scsql.agents(agent_id);
alter table scsql.distill_settings add constraint distill_settings_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.distill_settings add constraint distill_settings_command_check CHECK (((cardinality(command) >= 1) AND (cardinality(command) <= 64)));
alter table scsql.distill_settings add constraint distill_settings_daily_tokens_check CHECK (((daily_tokens >= 1000) AND (daily_tokens <= 100000000)));
alter table scsql.distill_settings add constraint distill_settings_max_input_chars_check CHECK (((max_input_chars >= 2000) AND (max_input_chars <= 1000000)));
alter table scsql.distill_settings add constraint distill_settings_model_check CHECK ((model ~ '^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,99}$'::text));
alter table scsql.distill_settings enable row level security;
alter table scsql.distill_settings force row level security;

-- Distilled decisions an undo withdrew, whole (the row as it was): the decision leaves scsql.decisions, the one it superseded is current again, and the memory history records the withdrawal.
create table scsql.distill_withdrawn (
  project_id bigint not null,
  decision_id bigint not null,
  job_id bigint not null,
  decision jsonb not null,
  withdrawn_at timestamp with time zone default now() not null,
  withdrawn_by bigint not null
);
alter table scsql.distill_withdrawn add constraint distill_withdrawn_pkey PRIMARY KEY (project_id, decision_id);
alter table scsql.distill_withdrawn add constraint distill_withdrawn_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.distill_withdrawn add constraint distill_withdrawn_withdrawn_by_fkey FOREIGN KEY (withdrawn_by) REFERENCES scsql.agents(agent_id);
alter table scsql.distill_withdrawn enable row level security;
alter table scsql.distill_withdrawn force row level security;

-- Embedding models known to scsql: name, dimension. kb_embeddings has one partial HNSW index per model.
create table scsql.embed_models (
  model_id smallint generated by default as identity not null,
  name text not null,
  dims integer not null,
  created_at timestamp with time zone default now() not null
);
alter table scsql.embed_models add constraint embed_models_pkey PRIMARY KEY (model_id);
alter table scsql.embed_models add constraint embed_models_name_key UNIQUE (name);
alter table scsql.embed_models add constraint embed_models_dims_check CHECK (((dims >= 1) AND (dims <= 2000)));
alter table scsql.embed_models add constraint embed_models_name_check CHECK (((char_length(name) >= 1) AND (char_length(name) <= 200)));
alter table scsql.embed_models enable row level security;
alter table scsql.embed_models force row level security;

-- Every SQLSTATE scsql raises, with a stable name and its meaning. psql users, the CLI and MCP clients see the same code and name.
create table scsql.error_codes (
  code text not null,
  name text not null,
  raised_by text not null,
  meaning text not null
);
alter table scsql.error_codes add constraint error_codes_pkey PRIMARY KEY (code);
alter table scsql.error_codes add constraint error_codes_name_key UNIQUE (name);
alter table scsql.error_codes add constraint error_codes_code_check CHECK ((code ~ '^[0-9A-Z]{5}$'::text));
alter table scsql.error_codes add constraint error_codes_name_check CHECK ((name ~ '^[a-z][a-z0-9_]*$'::text));
alter table scsql.error_codes add constraint error_codes_raised_by_check CHECK ((raised_by = ANY (ARRAY['database'::text, 'client'::text])));
alter table scsql.error_codes enable row level security;
alter table scsql.error_codes force row level security;

-- Pairs of facts remember found to make different claims about one subject (key: the newer fact, other_key: the one it conflicts with), open until scsql.resolve_conflict settles them.
create table scsql.fact_conflicts (
  project_id bigint not null,
  conflict_id bigint generated always as identity not null,
  key text not null,
  value_hash text not null,
  other_key text not null,
  other_hash text not null,
  detected_at timestamp with time zone default now() not null,
  detected_by bigint not null,
  resolved_at timestamp with time zone,
  resolved_by bigint,
  resolution text,
  note text
);
alter table scsql.fact_conflicts add constraint fact_conflicts_pkey PRIMARY KEY (project_id, conflict_id);
alter table scsql.fact_conflicts add constraint fact_conflicts_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.fact_conflicts add constraint fact_conflicts_resolution_check CHECK ((resolution = ANY (ARRAY['this'::text, 'others'::text, 'both'::text])));
CREATE INDEX fact_conflicts_open_idx ON scsql.fact_conflicts USING btree (project_id, conflict_id) WHERE (resolved_at IS NULL);
CREATE INDEX fact_conflicts_open_key_idx ON scsql.fact_conflicts USING btree (project_id, key) WHERE (resolved_at IS NULL);
CREATE INDEX fact_conflicts_open_other_idx ON scsql.fact_conflicts USING btree (project_id, other_key) WHERE (resolved_at IS NULL);
alter table scsql.fact_conflicts enable row level security;
alter table scsql.fact_conflicts force row level security;

-- Values facts held before they were superseded (a newer value for the key, or a conflict settled against them): the fact's history, never overwritten.
create table scsql.fact_versions (
  project_id bigint not null,
  version_id bigint generated always as identity not null,
  key text not null,
  value text not null,
  value_hash text not null,
  importance smallint not null,
  created_at timestamp with time zone not null,
  created_by bigint not null,
  superseded_at timestamp with time zone default now() not null,
  superseded_by bigint not null,
  reason text not null
);
alter table scsql.fact_versions add constraint fact_versions_pkey PRIMARY KEY (project_id, version_id);
alter table scsql.fact_versions add constraint fact_versions_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
CREATE INDEX fact_versions_key_idx ON scsql.fact_versions USING btree (project_id, key, version_id);
alter table scsql.fact_versions enable row level security;
alter table scsql.fact_versions force row level security;

-- A chunk of a source: its text, chunk_hash (sha256 of the normalized text), anchor (heading or symbol), line span and character span in the source. n_terms is its BM25 length; term_ids lists its postings.
create table scsql.kb_chunks (
  project_id bigint not null,
  chunk_id bigint generated always as identity not null,
  source_id bigint not null,
  seq integer not null,
  chunk_hash text not null,
  anchor text,
  line_start integer not null,
  line_end integer not null,
  char_start integer not null,
  char_end integer not null,
  content text not null,
  n_terms integer not null,
  term_ids bigint[] not null,
  created_at timestamp with time zone default now() not null,
  -- Its source's published flag (held equal by the foreign key).
  published boolean not null,
  -- Conversation only: the context the chunk is indexed with besides its own text (the previous chunk's anchor and last 600 characters, or the span's given context), so a short reply is found by what it answers. NULL otherwise.
  context text,
  -- Conversation only: the sources of the chunks the context was taken from (pairs with context_hashes, by position). NULL without context; empty when none is known.
  context_sources bigint[],
  -- Conversation only: the chunk hashes of the chunks the context was taken from (pairs with context_sources, by position), what forgetting one of them looks up. NULL without context; empty when none is known.
  context_hashes text[],
  -- When the chunk's text was purged (scsql.purge): content is empty, it has no terms, postings or embedding; chunk_hash still names what it held.
  purged_at timestamp with time zone
);
alter table scsql.kb_chunks add constraint kb_chunks_pkey PRIMARY KEY (project_id, chunk_id);
alter table scsql.kb_chunks add constraint kb_chunks_project_id_source_id_seq_key UNIQUE (project_id, source_id, seq);
alter table scsql.kb_chunks add constraint kb_chunks_source_fkey FOREIGN KEY (project_id, source_id, published) REFERENCES scsql.kb_sources(project_id, source_id, published);
alter table scsql.kb_chunks add constraint kb_chunks_chunk_hash_check CHECK ((chunk_hash ~ '^[0-9a-f]{64}$'::text));
CREATE INDEX kb_chunks_context_hashes_idx ON scsql.kb_chunks USING gin (context_hashes) WHERE (context_hashes IS NOT NULL);
CREATE INDEX kb_chunks_hash_idx ON scsql.kb_chunks USING btree (project_id, chunk_hash);
CREATE INDEX kb_chunks_redacted_idx ON scsql.kb_chunks USING btree (project_id, created_at) WHERE (content ~~ '%[REDACTED:%'::text);
alter table scsql.kb_chunks enable row level security;
alter table scsql.kb_chunks force row level security;

-- Chunks waiting for an embedding with a model. Filled by the write functions, claimed with a lease (claimed_by, claim_token, claim_expires_at) and drained by scsql worker (and inline by an MCP server that has the model loaded) through embed_claim and embed_store.
create table scsql.kb_embed_queue (
  project_id bigint not null,
  model_id smallint not null,
  chunk_hash text not null,
  enqueued_at timestamp with time zone default now() not null,
  -- The agent that claimed this chunk hash for embedding (embed_claim), or NULL when unclaimed.
  claimed_by bigint,
  -- The token of the claim; embed_store must present it.
  claim_token uuid,
  -- When the claim's lease ends; afterwards another claim may take the chunk hash and the old token stores nothing.
  claim_expires_at timestamp with time zone
);
alter table scsql.kb_embed_queue add constraint kb_embed_queue_pkey PRIMARY KEY (project_id, model_id, chunk_hash);
alter table scsql.kb_embed_queue add constraint kb_embed_queue_claimed_by_fkey FOREIGN KEY (claimed_by) REFERENCES scsql.agents(agent_id);
alter table scsql.kb_embed_queue add constraint kb_embed_queue_model_id_fkey FOREIGN KEY (model_id) REFERENCES scsql.embed_models(model_id);
alter table scsql.kb_embed_queue add constraint kb_embed_queue_claim_check CHECK ((((claimed_by IS NULL) = (claim_token IS NULL)) AND ((claim_token IS NULL) = (claim_expires_at IS NULL))));
alter table scsql.kb_embed_queue enable row level security;
alter table scsql.kb_embed_queue force row level security;

-- One vector per (project, model, chunk_hash). Each model has a partial HNSW index (cosine) named kb_embeddings_hnsw_<model_id>.
create table scsql.kb_embeddings (
  project_id bigint not null,
  model_id smallint not null,
  chunk_hash text not null,
  embedding vector not null,
  created_at timestamp with time zone default now() not null,
  -- The agent whose claim stored this vector (embed_store); NULL for vectors stored before scsql recorded it. created_at is when.
  stored_by bigint
);
alter table scsql.kb_embeddings add constraint kb_embeddings_pkey PRIMARY KEY (project_id, model_id, chunk_hash);
alter table scsql.kb_embeddings add constraint kb_embeddings_model_id_fkey FOREIGN KEY (model_id) REFERENCES scsql.embed_models(model_id);
alter table scsql.kb_embeddings add constraint kb_embeddings_stored_by_fkey FOREIGN KEY (stored_by) REFERENCES scsql.agents(agent_id);
CREATE INDEX kb_embeddings_hnsw_1 ON scsql.kb_embeddings USING hnsw (((embedding)::vector(384)) vector_cosine_ops) WHERE (model_id = 1);
alter table scsql.kb_embeddings enable row level security;
alter table scsql.kb_embeddings force row level security;

-- Public and internal learnings not yet indexed into the knowledge base; drained by scsql.index_learnings.
create table scsql.kb_learning_queue (
  project_id bigint not null,
  learning_id bigint not null,
  queued_at timestamp with time zone default now() not null
);
alter table scsql.kb_learning_queue add constraint kb_learning_queue_pkey PRIMARY KEY (project_id, learning_id);
alter table scsql.kb_learning_queue enable row level security;
alter table scsql.kb_learning_queue force row level security;

-- BM25 postings: for each term of a chunk, its frequency (tf) and the chunk's length (dl), covered by the primary key so scoring reads the index only.
create table scsql.kb_postings (
  project_id bigint not null,
  term_id bigint not null,
  chunk_id bigint not null,
  tf integer not null,
  dl integer not null,
  -- Its chunk's published flag, written with it.
  published boolean not null
);
alter table scsql.kb_postings add constraint kb_postings_pkey PRIMARY KEY (project_id, term_id, chunk_id) INCLUDE (tf, dl, published);
alter table scsql.kb_postings add constraint kb_postings_dl_check CHECK ((dl > 0));
alter table scsql.kb_postings add constraint kb_postings_tf_check CHECK ((tf > 0));
CREATE INDEX kb_postings_tier_idx ON scsql.kb_postings USING btree (project_id, term_id, chunk_id) INCLUDE (tf, dl, published) WHERE ((tf > 1) OR (dl < 32));
alter table scsql.kb_postings enable row level security;
alter table scsql.kb_postings force row level security;

-- A knowledge-base source: a file, URL, note, session summary, archived fact or learning. path is its identity within the project; content_hash (sha256 of the text as given) and spans_hash (md5 of the chunk spans the caller gave, if any) let the indexer skip unchanged files; tier sets retention (session: 365 days).
create table scsql.kb_sources (
  project_id bigint not null,
  source_id bigint generated always as identity not null,
  path text not null,
  kind text not null,
  trust text not null,
  tier text not null,
  content_hash text not null,
  spans_hash text,
  n_chunks integer default 0 not null,
  n_chars integer default 0 not null,
  meta jsonb default '{}'::jsonb not null,
  created_by bigint not null,
  created_at timestamp with time zone default now() not null,
  updated_at timestamp with time zone default now() not null,
  expires_at timestamp with time zone,
  -- The agent that last wrote this source (created_by wrote it first).
  updated_by bigint not null,
  -- True for kinds file, url and note: the project's published knowledge, which readers granted the project may see. Session summaries, archived facts and learnings stay within the project.
  published boolean generated always as ((kind = ANY (ARRAY['file'::text, 'url'::text, 'note'::text]))) stored not null,
  -- When recall_context, pack or search last returned a chunk of the source (recorded at most once per use_granularity).
  last_used_at timestamp with time zone,
  -- How often a chunk of the source was returned (at most one count per use_granularity).
  use_count integer default 0 not null,
  -- Set by scsql.pin: the source never expires and never decays in ranking (like tier pinned, which survives no re-index with another tier).
  pinned boolean default false not null,
  -- When what the source holds happened (the session of a summary or of a conversation part), when that is not when it was indexed.
  occurred_at timestamp with time zone
);
alter table scsql.kb_sources add constraint kb_sources_pkey PRIMARY KEY (project_id, source_id);
alter table scsql.kb_sources add constraint kb_sources_project_id_path_key UNIQUE (project_id, path);
alter table scsql.kb_sources add constraint kb_sources_published_key UNIQUE (project_id, source_id, published);
alter table scsql.kb_sources add constraint kb_sources_created_by_fkey FOREIGN KEY (created_by) REFERENCES scsql.agents(agent_id);
alter table scsql.kb_sources add constraint kb_sources_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.kb_sources add constraint kb_sources_updated_by_fkey FOREIGN KEY (updated_by) REFERENCES scsql.agents(agent_id);
alter table scsql.kb_sources add constraint kb_sources_content_hash_check CHECK ((content_hash ~ '^[0-9a-f]{64}$'::text));
alter table scsql.kb_sources add constraint kb_sources_kind_check CHECK ((kind = ANY (ARRAY['file'::text, 'url'::text, 'note'::text, 'session_summary'::text, 'archived_fact'::text, 'learning'::text])));
alter table scsql.kb_sources add constraint kb_sources_path_check CHECK (((char_length(path) >= 1) AND (char_length(path) <= 1024)));
alter table scsql.kb_sources add constraint kb_sources_tier_check CHECK ((tier = ANY (ARRAY['pinned'::text, 'standard'::text, 'session'::text])));
alter table scsql.kb_sources add constraint kb_sources_trust_check CHECK ((trust = ANY (ARRAY['internal'::text, 'external'::text])));
alter table scsql.kb_sources add constraint kb_sources_url_external CHECK (((kind <> 'url'::text) OR (trust = 'external'::text)));
alter table scsql.kb_sources add constraint kb_sources_use_count_check CHECK ((use_count >= 0));
CREATE INDEX kb_sources_expiry_idx ON scsql.kb_sources USING btree (project_id, expires_at) WHERE (expires_at IS NOT NULL);
CREATE INDEX kb_sources_external_idx ON scsql.kb_sources USING btree (project_id, updated_at) WHERE ((trust = 'external'::text) AND (NOT pinned) AND (tier <> 'pinned'::text));
CREATE INDEX kb_sources_kind_idx ON scsql.kb_sources USING btree (project_id, kind, created_at);
CREATE INDEX kb_sources_session_idx ON scsql.kb_sources USING btree (project_id, ((meta ->> 'session'::text)), created_at) WHERE (meta ? 'session'::text);
alter table scsql.kb_sources enable row level security;
alter table scsql.kb_sources force row level security;

-- The chunks of each staged text (scsql._chunk_text of the redacted text), with their BM25 terms and frequencies (scsql_caller.terms of path, anchor, context and text, sorted by term) and length n_terms, waiting for scsql.index_staged.
create table scsql.kb_staged_chunks (
  project_id bigint not null,
  agent_id bigint not null,
  xact xid8 not null,
  ord bigint not null,
  seq integer not null,
  anchor text,
  line_start integer not null,
  line_end integer not null,
  char_start integer not null,
  char_end integer not null,
  content text not null,
  chunk_hash text not null,
  context text,
  n_terms integer not null,
  terms text[] not null,
  tfs integer[] not null
);
alter table scsql.kb_staged_chunks add constraint kb_staged_chunks_pkey PRIMARY KEY (project_id, agent_id, xact, ord, seq);
alter table scsql.kb_staged_chunks enable row level security;
alter table scsql.kb_staged_chunks force row level security;

-- Texts staged for bulk indexing (scsql.kb_staging, scsql.index_staged), one row each, as they will be stored: path, content hash, spans hash and meta of the redacted text, in the order ORD the stager gave, within the transaction XACT of agent AGENT_ID. source_id and unchanged are set while index_staged writes them; index_staged deletes them. Rows of an agent's earlier transactions that never called index_staged are deleted by its next call.
create table scsql.kb_staged_sources (
  project_id bigint not null,
  agent_id bigint not null,
  xact xid8 not null,
  ord bigint not null,
  path text not null,
  kind text not null,
  trust text not null,
  tier text not null,
  content_hash text not null,
  spans_hash text,
  n_chars integer not null,
  meta jsonb not null,
  occurred_at timestamp with time zone,
  source_id bigint,
  unchanged boolean
);
alter table scsql.kb_staged_sources add constraint kb_staged_sources_pkey PRIMARY KEY (project_id, agent_id, xact, ord);
alter table scsql.kb_staged_sources add constraint kb_staged_sources_project_id_agent_id_xact_path_key UNIQUE (project_id, agent_id, xact, path);
alter table scsql.kb_staged_sources enable row level security;
alter table scsql.kb_staged_sources force row level security;

-- BM25 vocabulary of a project: each term with the number of chunks that contain it (df), kept exact by the write functions, and an upper bound of its frequency in any chunk (max_tf, never lowered), which lets search skip the long posting lists of common terms when they cannot change the top results.
create table scsql.kb_terms (
  project_id bigint not null,
  term_id bigint generated always as identity not null,
  term text not null,
  df integer not null,
  max_tf integer default 0 not null,
  -- The number of published chunks (see kb_sources.published) that contain the term.
  published_df integer default 0 not null,
  -- A lower bound of the length (n_terms) of the chunks of 32 terms or more in which the term occurs once, the postings outside kb_postings_tier_idx: the shortest it was indexed in, never raised when chunks go; NULL when there has been none. Search bounds those postings' scores by it.
  tier_min_dl integer
);
alter table scsql.kb_terms add constraint kb_terms_pkey PRIMARY KEY (project_id, term_id);
alter table scsql.kb_terms add constraint kb_terms_project_id_term_key UNIQUE (project_id, term);
alter table scsql.kb_terms add constraint kb_terms_df_check CHECK ((df >= 0));
alter table scsql.kb_terms add constraint kb_terms_published_df_check CHECK ((published_df >= 0));
alter table scsql.kb_terms add constraint kb_terms_tier_min_dl_check CHECK ((tier_min_dl >= 32));
alter table scsql.kb_terms enable row level security;
alter table scsql.kb_terms force row level security;

-- Uses of search and pack results waiting for their transaction to commit (on Citus only), recorded then by scsql._apply_pending_use and deleted; empty between transactions.
create table scsql.kb_use_pending (
  project_id bigint not null,
  pending_id bigint generated always as identity not null,
  paths text[] not null
);
alter table scsql.kb_use_pending add constraint kb_use_pending_pkey PRIMARY KEY (project_id, pending_id);
alter table scsql.kb_use_pending add constraint apply_at_commit TRIGGER DEFERRABLE INITIALLY DEFERRED;
alter table scsql.kb_use_pending enable row level security;
alter table scsql.kb_use_pending force row level security;

-- Lessons derived from outcomes in the same transaction: failure learnings from rejected, failed, insufficient, errored and reverted outcomes; experiment learnings from shipped or accepted outcomes with high confidence. Same classification as the outcome.
create table scsql.learnings (
  project_id bigint not null,
  learning_id bigint generated always as identity not null,
  kind text not null,
  outcome_id bigint not null,
  outcome_kind text not null,
  author_id bigint not null,
  tool text,
  tool_call_id bigint,
  session_id bigint,
  task_ref text,
  signal text not null,
  confidence numeric,
  summary text,
  evidence text,
  classification text not null,
  created_at timestamp with time zone default now() not null,
  input_key text,
  deny boolean default false not null,
  pattern text,
  -- The agent that made this learning a rule (mark_learning_rule); NULL while it is not one.
  rule_by bigint,
  -- When this learning was made a rule; NULL while it is not one (or for a rule made before scsql recorded it).
  rule_at timestamp with time zone,
  -- The one agent this rule denies calls of (a rule made by an agent that is not an orchestrator applies to its maker only); NULL for a rule of the whole project, or while it is not a rule.
  rule_for bigint,
  -- sha256 of the summary's UTF-8 bytes (filled when the learning is written; for one written before scsql kept it, when it is purged). summary is NULL only when purged (scsql.purge).
  summary_sha256 bytea,
  -- sha256 of evidence's UTF-8 bytes (NULL when there is none). evidence NULL with a digest: purged (scsql.purge).
  evidence_sha256 bytea,
  -- sha256 of input_key's UTF-8 bytes (NULL when there is none). input_key NULL with a digest: purged (scsql.purge); a rule of the learning still matches calls by it.
  input_key_sha256 bytea
);
alter table scsql.learnings add constraint learnings_pkey PRIMARY KEY (project_id, learning_id);
alter table scsql.learnings add constraint learnings_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.learnings add constraint learnings_rule_by_fkey FOREIGN KEY (rule_by) REFERENCES scsql.agents(agent_id);
alter table scsql.learnings add constraint learnings_rule_for_fkey FOREIGN KEY (rule_for) REFERENCES scsql.agents(agent_id);
alter table scsql.learnings add constraint learnings_classification_check CHECK ((classification = ANY (ARRAY['public'::text, 'internal'::text, 'confidential'::text, 'restricted'::text])));
alter table scsql.learnings add constraint learnings_kind_check CHECK ((kind = ANY (ARRAY['failure'::text, 'experiment'::text])));
alter table scsql.learnings add constraint learnings_pattern_check CHECK ((char_length(pattern) <= 1000));
alter table scsql.learnings add constraint learnings_summary_kept CHECK (((summary IS NOT NULL) OR (summary_sha256 IS NOT NULL)));
CREATE INDEX learnings_outcome_idx ON scsql.learnings USING btree (project_id, outcome_id);
CREATE INDEX learnings_tool_idx ON scsql.learnings USING btree (project_id, tool, input_key) WHERE (kind = 'failure'::text);
alter table scsql.learnings enable row level security;
alter table scsql.learnings force row level security;

-- One row: whether scsql_app may act as every agent of this database (one_login: one user's machine) or each agent logs in as its own role (a shared server), and the CONNECTION LIMIT each agent role gets. Changed by scsql.set_login_mode and scsql.set_agent_connection_limit.
create table scsql.login_settings (
  id smallint default 1 not null,
  one_login boolean default true not null,
  agent_connection_limit integer default 32 not null,
  updated_at timestamp with time zone default now() not null
);
alter table scsql.login_settings add constraint login_settings_pkey PRIMARY KEY (id);
alter table scsql.login_settings enable row level security;
alter table scsql.login_settings force row level security;

-- Every change to working memory and the knowledge base (remember, supersede, refresh, forget, archive, unarchive, conflict, resolve, index, remove, purge, pin, unpin, forget_source, forget_chunk, summary, learn, rule, unrule, decide, open_loop, close_loop): which fact, source, learning, decision or loop, the old and new content hash (sha256 hex of the stored, redacted text), the reason, stamped with the acting agent. Chained (unsigned: written by the database inside the memory functions) and append-only.
create table scsql.memory_changes (
  project_id bigint not null,
  change_id bigint generated always as identity not null,
  op text not null,
  kind text not null,
  target text not null,
  chunk_hash text,
  old_hash text,
  new_hash text,
  reason text,
  related text,
  at timestamp with time zone not null,
  author_id bigint not null,
  key_id integer not null,
  chain_id bigint not null,
  seq bigint not null,
  prev_hash bytea not null,
  row_hash bytea not null,
  signature bytea not null,
  -- sha256 of the reason's UTF-8 bytes, what the row hashes in place of the reason (NULL when there is none, and in rows written before scsql kept it, which hash the reason itself). reason NULL with a digest: purged (scsql.purge).
  reason_sha256 bytea
);
alter table scsql.memory_changes add constraint memory_changes_pkey PRIMARY KEY (project_id, change_id);
alter table scsql.memory_changes add constraint memory_changes_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
CREATE INDEX memory_changes_author_idx ON scsql.memory_changes USING btree (project_id, author_id, at);
CREATE INDEX memory_changes_chain_idx ON scsql.memory_changes USING btree (chain_id, seq);
CREATE INDEX memory_changes_chunk_idx ON scsql.memory_changes USING btree (project_id, chunk_hash) WHERE (chunk_hash IS NOT NULL);
CREATE INDEX memory_changes_target_idx ON scsql.memory_changes USING btree (project_id, target, change_id);
alter table scsql.memory_changes enable row level security;
alter table scsql.memory_changes force row level security;

-- Working memory: facts (key, value, importance 1-5) an agent restores at the start of a session. Bounded per project; evicted facts move to the knowledge base as archived_fact sources.
create table scsql.memory_facts (
  project_id bigint not null,
  key text not null,
  value text not null,
  importance smallint not null,
  created_at timestamp with time zone default now() not null,
  updated_at timestamp with time zone default now() not null,
  created_by bigint not null,
  updated_by bigint not null,
  key_terms text[],
  value_terms text[],
  -- When recall_context, pack or search last returned the fact (recorded at most once per use_granularity).
  last_used_at timestamp with time zone,
  -- How often the fact was returned (at most one count per use_granularity).
  use_count integer default 0 not null,
  -- End of the fact's TTL (remember's p_ttl); the worker purges it after that, and nothing returns it.
  expires_at timestamp with time zone,
  terms text[] generated always as (scsql_caller.term_array(((key || ' '::text) || value))) stored,
  -- The fact's terms as entries of memory_facts_terms_idx: <project>:k:<term> for each of key_terms, <project>:v:<term> for each of value_terms. remember finds the facts it compares a new one with through it.
  index_terms text[] generated always as (scsql._fact_index_terms(project_id, key_terms, value_terms)) stored
);
alter table scsql.memory_facts add constraint memory_facts_pkey PRIMARY KEY (project_id, key);
alter table scsql.memory_facts add constraint memory_facts_created_by_fkey FOREIGN KEY (created_by) REFERENCES scsql.agents(agent_id);
alter table scsql.memory_facts add constraint memory_facts_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.memory_facts add constraint memory_facts_updated_by_fkey FOREIGN KEY (updated_by) REFERENCES scsql.agents(agent_id);
alter table scsql.memory_facts add constraint memory_facts_importance_check CHECK (((importance >= 1) AND (importance <= 5)));
alter table scsql.memory_facts add constraint memory_facts_key_check CHECK (((char_length(key) >= 1) AND (char_length(key) <= 200)));
alter table scsql.memory_facts add constraint memory_facts_use_count_check CHECK ((use_count >= 0));
alter table scsql.memory_facts add constraint memory_facts_value_check CHECK (((char_length(value) >= 1) AND (char_length(value) <= 4000)));
CREATE INDEX memory_facts_eviction_idx ON scsql.memory_facts USING btree (project_id, importance, updated_at, key);
CREATE INDEX memory_facts_expiry_idx ON scsql.memory_facts USING btree (project_id, expires_at) WHERE (expires_at IS NOT NULL);
CREATE INDEX memory_facts_terms_idx ON scsql.memory_facts USING gin (index_terms) WITH (fastupdate=off);
alter table scsql.memory_facts enable row level security;
alter table scsql.memory_facts force row level security;

-- Per-project memory lifecycle settings (defaults when the project has no row): external_ttl, how long after it was last indexed an external source that is not pinned is kept (14 days); use_granularity, how often at most one fact or source records a use (1 minute). Changed by administrators with scsql.set_memory_lifecycle.
create table scsql.memory_settings (
  project_id bigint not null,
  external_ttl interval default '14 days'::interval not null,
  use_granularity interval default '00:01:00'::interval not null,
  updated_at timestamp with time zone default now() not null,
  -- How long an open loop nobody touched (opened again, pinned) stays in recall_context before it leaves it, unless pinned (default 30 days).
  loop_stale_after interval default '30 days'::interval not null
);
alter table scsql.memory_settings add constraint memory_settings_pkey PRIMARY KEY (project_id);
alter table scsql.memory_settings add constraint memory_settings_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.memory_settings add constraint memory_settings_external_ttl_check CHECK (((external_ttl >= '01:00:00'::interval) AND (external_ttl <= '3650 days'::interval)));
alter table scsql.memory_settings add constraint memory_settings_loop_stale_after_check CHECK (((loop_stale_after >= '01:00:00'::interval) AND (loop_stale_after <= '3650 days'::interval)));
alter table scsql.memory_settings add constraint memory_settings_use_granularity_check CHECK (((use_granularity >= '00:00:00'::interval) AND (use_granularity <= '1 day'::interval)));
alter table scsql.memory_settings enable row level security;
alter table scsql.memory_settings force row level security;

-- One row per project: BM25 statistics (n_chunks = documents, total_len = sum of their lengths in terms), n_file_chunks (the project's size, which sets working-memory capacity) and the embedding model new chunks are queued for.
create table scsql.memory_state (
  project_id bigint not null,
  n_chunks bigint default 0 not null,
  total_len bigint default 0 not null,
  n_file_chunks bigint default 0 not null,
  embed_model_id smallint default 1 not null,
  updated_at timestamp with time zone default now() not null,
  -- BM25 documents of the published part of the corpus (see kb_sources.published).
  published_chunks bigint default 0 not null,
  -- Sum of the lengths in terms of the published chunks.
  published_len bigint default 0 not null
);
alter table scsql.memory_state add constraint memory_state_pkey PRIMARY KEY (project_id);
alter table scsql.memory_state add constraint memory_state_embed_model_id_fkey FOREIGN KEY (embed_model_id) REFERENCES scsql.embed_models(model_id);
alter table scsql.memory_state add constraint memory_state_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.memory_state add constraint memory_state_n_chunks_check CHECK ((n_chunks >= 0));
alter table scsql.memory_state add constraint memory_state_n_file_chunks_check CHECK ((n_file_chunks >= 0));
alter table scsql.memory_state add constraint memory_state_published_chunks_check CHECK ((published_chunks >= 0));
alter table scsql.memory_state add constraint memory_state_published_len_check CHECK ((published_len >= 0));
alter table scsql.memory_state add constraint memory_state_total_len_check CHECK ((total_len >= 0));
alter table scsql.memory_state enable row level security;
alter table scsql.memory_state force row level security;

-- Who acknowledged which message, and when.
create table scsql.message_acks (
  project_id bigint not null,
  message_id bigint not null,
  agent_id bigint not null,
  acked_at timestamp with time zone default clock_timestamp() not null
);
alter table scsql.message_acks add constraint message_acks_pkey PRIMARY KEY (project_id, message_id, agent_id);
alter table scsql.message_acks enable row level security;
alter table scsql.message_acks force row level security;

-- The broadcast channel: typed messages from one agent (author_id) to a team role or to one agent (to_agent, to_agent_id) of the same project. Chained and signed like audit rows, append-only. from_orchestrator records whether the sender's team role orchestrates when it sent; other senders' messages are shown as unverified agent output.
create table scsql.messages (
  project_id bigint not null,
  message_id bigint generated always as identity not null,
  type text not null,
  sender_role text not null,
  from_orchestrator boolean not null,
  to_role text,
  to_agent_id bigint,
  task_id bigint,
  payload jsonb not null,
  created_at timestamp with time zone default clock_timestamp() not null,
  to_agent text,
  at timestamp with time zone not null,
  author_id bigint not null,
  key_id integer not null,
  chain_id bigint not null,
  seq bigint not null,
  prev_hash bytea not null,
  row_hash bytea not null,
  signature bytea not null
);
alter table scsql.messages add constraint messages_pkey PRIMARY KEY (project_id, message_id);
alter table scsql.messages add constraint messages_one_recipient CHECK (((to_role IS NULL) <> (to_agent_id IS NULL)));
alter table scsql.messages add constraint messages_to_agent_named CHECK (((to_agent IS NULL) = (to_agent_id IS NULL)));
alter table scsql.messages add constraint messages_type_check CHECK ((type = ANY (ARRAY['ASSIGN'::text, 'STATUS'::text, 'MERGE'::text, 'DEPENDENCY'::text, 'PROPOSED'::text, 'REJECT'::text, 'REVISE'::text, 'LAUNCH_ROLE'::text, 'RETIRE_ROLE'::text])));
CREATE INDEX messages_author_idx ON scsql.messages USING btree (project_id, author_id, created_at);
CREATE INDEX messages_chain_idx ON scsql.messages USING btree (chain_id, seq);
CREATE INDEX messages_to_agent_idx ON scsql.messages USING btree (project_id, to_agent_id, message_id) WHERE (to_agent_id IS NOT NULL);
CREATE INDEX messages_to_role_idx ON scsql.messages USING btree (project_id, to_role, message_id) WHERE (to_role IS NOT NULL);
alter table scsql.messages enable row level security;
alter table scsql.messages force row level security;

-- One row per message of the model in a hooked session (read from Claude Code's transcript): model, tokens (input, output, written to and read from the prompt cache), the tool calls the message issued (tool_use_ids), when it happened, and its cost in USD from scsql.model_prices. A message is counted once, however many tool calls it issued. Chained, append-only.
create table scsql.model_calls (
  project_id bigint not null,
  model_call_id bigint default nextval('scsql.model_calls_id_seq'::regclass) not null,
  at timestamp with time zone not null,
  session_id bigint,
  message_id text not null,
  model text,
  input_tokens integer default 0 not null,
  output_tokens integer default 0 not null,
  cache_write_tokens integer default 0 not null,
  cache_read_tokens integer default 0 not null,
  tool_use_ids jsonb,
  occurred_at timestamp with time zone,
  cost_usd numeric,
  author_id bigint not null,
  key_id integer not null,
  chain_id bigint not null,
  seq bigint not null,
  prev_hash bytea not null,
  row_hash bytea not null,
  signature bytea not null
);
alter table scsql.model_calls add constraint model_calls_pkey PRIMARY KEY (project_id, model_call_id);
alter table scsql.model_calls add constraint model_calls_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.model_calls add constraint model_calls_cache_read_tokens_check CHECK ((cache_read_tokens >= 0));
alter table scsql.model_calls add constraint model_calls_cache_write_tokens_check CHECK ((cache_write_tokens >= 0));
alter table scsql.model_calls add constraint model_calls_cost_usd_check CHECK ((cost_usd >= (0)::numeric));
alter table scsql.model_calls add constraint model_calls_input_tokens_check CHECK ((input_tokens >= 0));
alter table scsql.model_calls add constraint model_calls_message_id_check CHECK (((char_length(message_id) >= 1) AND (char_length(message_id) <= 200)));
alter table scsql.model_calls add constraint model_calls_model_check CHECK (((char_length(model) >= 1) AND (char_length(model) <= 200)));
alter table scsql.model_calls add constraint model_calls_output_tokens_check CHECK ((output_tokens >= 0));
alter table scsql.model_calls add constraint model_calls_tool_use_ids_array CHECK ((jsonb_typeof(tool_use_ids) = 'array'::text));
CREATE INDEX model_calls_chain_idx ON scsql.model_calls USING btree (chain_id, seq);
CREATE INDEX model_calls_session_idx ON scsql.model_calls USING btree (project_id, session_id);
CREATE INDEX model_calls_session_when_idx ON scsql.model_calls USING btree (project_id, session_id, COALESCE(occurred_at, at), model_call_id);
CREATE INDEX model_calls_when_idx ON scsql.model_calls USING btree (project_id, COALESCE(occurred_at, at));
alter table scsql.model_calls enable row level security;
alter table scsql.model_calls force row level security;

-- USD per million tokens a model reads (input) and writes (output), from effective_from on. A tool call's model matches the longest model name that is a prefix of it.
create table scsql.model_prices (
  model text not null,
  effective_from timestamp with time zone not null,
  input_usd_per_mtok numeric not null,
  output_usd_per_mtok numeric not null,
  -- USD per million tokens written to the prompt cache; NULL: 1.25 times the input price.
  cache_write_usd_per_mtok numeric,
  -- USD per million tokens read from the prompt cache; NULL: 0.1 times the input price.
  cache_read_usd_per_mtok numeric
);
alter table scsql.model_prices add constraint model_prices_pkey PRIMARY KEY (model, effective_from);
alter table scsql.model_prices add constraint model_prices_cache_read_usd_per_mtok_check CHECK ((cache_read_usd_per_mtok >= (0)::numeric));
alter table scsql.model_prices add constraint model_prices_cache_write_usd_per_mtok_check CHECK ((cache_write_usd_per_mtok >= (0)::numeric));
alter table scsql.model_prices add constraint model_prices_input_usd_per_mtok_check CHECK ((input_usd_per_mtok >= (0)::numeric));
alter table scsql.model_prices add constraint model_prices_model_check CHECK (((char_length(model) >= 1) AND (char_length(model) <= 200)));
alter table scsql.model_prices add constraint model_prices_output_usd_per_mtok_check CHECK ((output_usd_per_mtok >= (0)::numeric));
alter table scsql.model_prices enable row level security;
alter table scsql.model_prices force row level security;

-- Open loops (open tasks, questions) of a project: written by open_loop and by summarize_session (its open tasks), closed by close_loop with a resolution; closed loops stay as history. One open loop per text.
create table scsql.open_loops (
  project_id bigint not null,
  loop_id bigint generated always as identity not null,
  text text not null,
  owner text,
  opened_by bigint not null,
  opened_at timestamp with time zone default now() not null,
  source_path text,
  closed_at timestamp with time zone,
  closed_by bigint,
  resolution text,
  -- A pinned open loop stays in recall_context however long it is untouched (scsql.pin_loop).
  pinned boolean default false not null,
  -- When the loop was last opened again or pinned (NULL: never since it was opened).
  touched_at timestamp with time zone
);
alter table scsql.open_loops add constraint open_loops_pkey PRIMARY KEY (project_id, loop_id);
alter table scsql.open_loops add constraint open_loops_closed_by_fkey FOREIGN KEY (closed_by) REFERENCES scsql.agents(agent_id);
alter table scsql.open_loops add constraint open_loops_opened_by_fkey FOREIGN KEY (opened_by) REFERENCES scsql.agents(agent_id);
alter table scsql.open_loops add constraint open_loops_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.open_loops add constraint open_loops_closed_check CHECK ((((closed_at IS NULL) = (closed_by IS NULL)) AND ((closed_at IS NULL) = (resolution IS NULL))));
alter table scsql.open_loops add constraint open_loops_owner_check CHECK (((char_length(owner) >= 1) AND (char_length(owner) <= 200)));
alter table scsql.open_loops add constraint open_loops_resolution_check CHECK (((char_length(resolution) >= 1) AND (char_length(resolution) <= 4000)));
alter table scsql.open_loops add constraint open_loops_text_check CHECK (((char_length(text) >= 1) AND (char_length(text) <= 2000)));
CREATE INDEX open_loops_open_idx ON scsql.open_loops USING btree (project_id, opened_at DESC) WHERE (closed_at IS NULL);
CREATE UNIQUE INDEX open_loops_open_text_key ON scsql.open_loops USING btree (project_id, md5(text)) WHERE (closed_at IS NULL);
alter table scsql.open_loops enable row level security;
alter table scsql.open_loops force row level security;

-- What came of a tool call, task or session: kind (shipped, accepted, rejected, failed, insufficient, errored, reverted), signal source, confidence, summary, evidence, classification (public, internal, confidential, restricted; enforced by RLS). Chained, append-only, partitioned by day on at.
create table scsql.outcomes (
  project_id bigint not null,
  outcome_id bigint default nextval('scsql.outcomes_id_seq'::regclass) not null,
  at timestamp with time zone not null,
  tool_call_id bigint,
  session_id bigint,
  task_ref text,
  kind text not null,
  signal text not null,
  confidence numeric,
  summary text,
  evidence text,
  classification text default 'internal'::text not null,
  author_id bigint not null,
  key_id integer not null,
  chain_id bigint not null,
  seq bigint not null,
  prev_hash bytea not null,
  row_hash bytea not null,
  signature bytea not null,
  -- sha256 of the summary's UTF-8 bytes, what the row hashes and signs in place of the summary (NULL in rows written before scsql kept it, which hash the summary itself). summary is NULL only when purged (scsql.purge).
  summary_sha256 bytea,
  -- sha256 of evidence's UTF-8 bytes, what the row hashes and signs in place of it (NULL when there is none, and in rows written before scsql kept it). evidence NULL with a digest: purged (scsql.purge).
  evidence_sha256 bytea
) partition by range (at);
alter table scsql.outcomes add constraint outcomes_pkey PRIMARY KEY (project_id, outcome_id, at);
alter table scsql.outcomes add constraint outcomes_classification_check CHECK ((classification = ANY (ARRAY['public'::text, 'internal'::text, 'confidential'::text, 'restricted'::text])));
alter table scsql.outcomes add constraint outcomes_confidence_check CHECK (((confidence >= (0)::numeric) AND (confidence <= (1)::numeric)));
alter table scsql.outcomes add constraint outcomes_evidence_check CHECK ((char_length(evidence) <= 8000));
alter table scsql.outcomes add constraint outcomes_kind_check CHECK ((kind = ANY (ARRAY['shipped'::text, 'accepted'::text, 'rejected'::text, 'failed'::text, 'insufficient'::text, 'errored'::text, 'reverted'::text, 'violation'::text])));
alter table scsql.outcomes add constraint outcomes_names_subject CHECK (((tool_call_id IS NOT NULL) OR (session_id IS NOT NULL) OR (task_ref IS NOT NULL)));
alter table scsql.outcomes add constraint outcomes_signal_check CHECK ((signal ~ '^[a-z][a-z0-9_.-]{0,31}$'::text));
alter table scsql.outcomes add constraint outcomes_summary_check CHECK (((char_length(summary) >= 1) AND (char_length(summary) <= 1000)));
alter table scsql.outcomes add constraint outcomes_summary_kept CHECK (((summary IS NOT NULL) OR (summary_sha256 IS NOT NULL)));
alter table scsql.outcomes add constraint outcomes_task_ref_check CHECK ((char_length(task_ref) <= 200));
CREATE INDEX outcomes_chain_idx ON ONLY scsql.outcomes USING btree (chain_id, seq);
CREATE INDEX outcomes_redacted_idx ON ONLY scsql.outcomes USING btree (project_id, at) WHERE ((summary ~~ '%[REDACTED:%'::text) OR (evidence ~~ '%[REDACTED:%'::text));
CREATE INDEX outcomes_session_idx ON ONLY scsql.outcomes USING btree (project_id, session_id, at, outcome_id) WHERE (session_id IS NOT NULL);
alter table scsql.outcomes enable row level security;
alter table scsql.outcomes force row level security;

-- Every partition retention dropped (scsql._retire_partition): its name in checkpoints (part, see scsql._chain_partitions), its range, the retention setting in force and when it was set, when and by whom it was dropped, and the rows it held per chain (chain_id, first_seq, last_seq, rows). Append-only. Missing rows count as retired only where such a record, valid by the settings log, and a checkpoint segment say so.
create table scsql.partition_retirements (
  retirement_id bigint generated always as identity not null,
  parent text not null,
  part text not null,
  lower_bound timestamp with time zone not null,
  upper_bound timestamp with time zone not null,
  retention interval not null,
  retention_set_at timestamp with time zone not null,
  retired_at timestamp with time zone default clock_timestamp() not null,
  retired_by text default SESSION_USER not null,
  chains jsonb default '[]'::jsonb not null
);
alter table scsql.partition_retirements add constraint partition_retirements_pkey PRIMARY KEY (retirement_id);
alter table scsql.partition_retirements add constraint partition_retirements_bounds CHECK ((upper_bound > lower_bound));
alter table scsql.partition_retirements add constraint partition_retirements_part_check CHECK (((char_length(part) >= 1) AND (char_length(part) <= 300)));
CREATE INDEX partition_retirements_part_idx ON scsql.partition_retirements USING btree (part);
alter table scsql.partition_retirements enable row level security;
alter table scsql.partition_retirements force row level security;

-- Daily partitions of time-partitioned tables: how many days ahead to create, and how long to keep them (NULL: forever). Retention never drops rows that no checkpoint covers.
create table scsql.partition_settings (
  parent text not null,
  premake integer default 7 not null,
  retention interval,
  updated_at timestamp with time zone default now() not null
);
alter table scsql.partition_settings add constraint partition_settings_pkey PRIMARY KEY (parent);
alter table scsql.partition_settings add constraint partition_settings_premake_check CHECK (((premake >= 1) AND (premake <= 90)));
alter table scsql.partition_settings add constraint partition_settings_retention_check CHECK (((retention IS NULL) OR (retention >= '1 day'::interval)));
alter table scsql.partition_settings enable row level security;
alter table scsql.partition_settings force row level security;

-- Every value scsql.partition_settings took, with when and by whom (written by a trigger on it; append-only). A retirement counts only when the retention it records was the logged setting at the time of the drop.
create table scsql.partition_settings_log (
  log_id bigint generated always as identity not null,
  parent text not null,
  retention interval,
  premake integer not null,
  set_at timestamp with time zone default clock_timestamp() not null,
  set_by text default SESSION_USER not null
);
alter table scsql.partition_settings_log add constraint partition_settings_log_pkey PRIMARY KEY (log_id);
CREATE INDEX partition_settings_log_parent_idx ON scsql.partition_settings_log USING btree (parent, set_at);
alter table scsql.partition_settings_log enable row level security;
alter table scsql.partition_settings_log force row level security;

-- Read access for an agent to another project's public rows (search_global, public outcomes).
create table scsql.project_grants (
  project_id bigint not null,
  agent_id bigint not null,
  granted_at timestamp with time zone default now() not null,
  granted_by text default SESSION_USER not null
);
alter table scsql.project_grants add constraint project_grants_pkey PRIMARY KEY (project_id, agent_id);
alter table scsql.project_grants add constraint project_grants_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES scsql.agents(agent_id);
alter table scsql.project_grants add constraint project_grants_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.project_grants enable row level security;
alter table scsql.project_grants force row level security;

-- One row per (project, purpose) that scsql locks to serialize work within the project: learnings (outcomes that add a learning hold it FOR SHARE, learnings export FOR NO KEY UPDATE), memory_facts (changes to working memory, FOR NO KEY UPDATE). Rows are made with the project (scsql.create_project), so a lock never waits on another transaction's insert of its row. Only the owner reads or locks it.
create table scsql.project_locks (
  project_id bigint not null,
  name text not null
);
alter table scsql.project_locks add constraint project_locks_pkey PRIMARY KEY (project_id, name);
alter table scsql.project_locks add constraint project_locks_name_check CHECK ((name = ANY (ARRAY['learnings'::text, 'memory_facts'::text])));
alter table scsql.project_locks enable row level security;
alter table scsql.project_locks force row level security;

-- A project: one code base that a team of agents works on. Every other row belongs to one project.
create table scsql.projects (
  project_id bigint generated always as identity not null,
  name text not null,
  root_path text,
  git_remote text,
  created_at timestamp with time zone default now() not null
);
alter table scsql.projects add constraint projects_pkey PRIMARY KEY (project_id);
alter table scsql.projects add constraint projects_name_key UNIQUE (name);
alter table scsql.projects add constraint projects_name_check CHECK ((name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'::text));
alter table scsql.projects add constraint projects_root_path_check CHECK (((root_path IS NULL) OR (root_path ~~ '/%'::text)));
alter table scsql.projects enable row level security;
alter table scsql.projects force row level security;

-- The prompts a person gave an agent, redacted, linked to the session. Chained and append-only.
create table scsql.prompts (
  project_id bigint not null,
  prompt_id bigint generated always as identity not null,
  session_id bigint,
  text text,
  imported boolean,
  occurred_at timestamp with time zone,
  at timestamp with time zone not null,
  author_id bigint not null,
  key_id integer not null,
  chain_id bigint not null,
  seq bigint not null,
  prev_hash bytea not null,
  row_hash bytea not null,
  signature bytea not null,
  -- How the prompt's text was made storable (see scsql.tool_calls.altered).
  altered jsonb,
  -- sha256 of the text's UTF-8 bytes, what the row hashes and signs in place of the text (NULL in rows written before scsql kept it, which hash the text itself). text is NULL only when purged (scsql.purge).
  text_sha256 bytea
);
alter table scsql.prompts add constraint prompts_pkey PRIMARY KEY (project_id, prompt_id);
alter table scsql.prompts add constraint prompts_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.prompts add constraint prompts_altered_object CHECK ((jsonb_typeof(altered) = 'object'::text));
alter table scsql.prompts add constraint prompts_text_check CHECK ((char_length(text) <= 20000));
alter table scsql.prompts add constraint prompts_text_kept CHECK (((text IS NOT NULL) OR (text_sha256 IS NOT NULL)));
CREATE INDEX prompts_altered_idx ON scsql.prompts USING btree (project_id) WHERE (altered IS NOT NULL);
CREATE INDEX prompts_chain_idx ON scsql.prompts USING btree (chain_id, seq);
CREATE INDEX prompts_redacted_idx ON scsql.prompts USING btree (project_id, COALESCE(occurred_at, at)) WHERE (text ~~ '%[REDACTED:%'::text);
CREATE INDEX prompts_session_idx ON scsql.prompts USING btree (project_id, session_id);
CREATE INDEX prompts_session_when_idx ON scsql.prompts USING btree (project_id, session_id, COALESCE(occurred_at, at), prompt_id);
alter table scsql.prompts enable row level security;
alter table scsql.prompts force row level security;

-- One row per purge (scsql.purge): which row (target_kind prompt, tool_call, chunk, outcome or learning, and its id), the sha256 (hex) of each text removed, by field, why, and who purged it (the agent's name, or the administrator's role). Chained unsigned in the chain of the purged row's author (written by the database, like scsql.memory_changes) and append-only.
create table scsql.purges (
  project_id bigint not null,
  purge_id bigint generated always as identity not null,
  target_kind text not null,
  target_id bigint not null,
  digests jsonb not null,
  reason text not null,
  purged_by text not null,
  at timestamp with time zone not null,
  author_id bigint not null,
  key_id integer not null,
  chain_id bigint not null,
  seq bigint not null,
  prev_hash bytea not null,
  row_hash bytea not null,
  signature bytea not null
);
alter table scsql.purges add constraint purges_pkey PRIMARY KEY (project_id, purge_id);
alter table scsql.purges add constraint purges_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.purges add constraint purges_digests_object CHECK ((jsonb_typeof(digests) = 'object'::text));
alter table scsql.purges add constraint purges_reason_check CHECK (((char_length(reason) >= 1) AND (char_length(reason) <= 1000)));
alter table scsql.purges add constraint purges_target_kind_check CHECK ((target_kind = ANY (ARRAY['prompt'::text, 'tool_call'::text, 'chunk'::text, 'outcome'::text, 'learning'::text, 'decision'::text, 'memory_change'::text])));
CREATE INDEX purges_chain_idx ON scsql.purges USING btree (chain_id, seq);
CREATE INDEX purges_target_idx ON scsql.purges USING btree (project_id, target_kind, target_id);
alter table scsql.purges enable row level security;
alter table scsql.purges force row level security;

-- One row per applied file of migrations/: version, file name, sha256 of the file, when and by whom.
create table scsql.schema_migrations (
  version integer not null,
  name text not null,
  checksum text not null,
  applied_at timestamp with time zone default now() not null,
  applied_by text default SESSION_USER not null
);
alter table scsql.schema_migrations add constraint schema_migrations_pkey PRIMARY KEY (version);
alter table scsql.schema_migrations enable row level security;
alter table scsql.schema_migrations force row level security;

-- Search latency per project as a cumulative histogram (counts per bucket of scsql._search_latency_bounds(), the last one unbounded; sum_seconds), added to by scsql.record_search_latency.
create table scsql.search_latency (
  project_id bigint not null,
  counts bigint[] not null,
  sum_seconds double precision default 0 not null,
  updated_at timestamp with time zone default now() not null
);
alter table scsql.search_latency add constraint search_latency_pkey PRIMARY KEY (project_id);
alter table scsql.search_latency add constraint search_latency_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.search_latency add constraint search_latency_sum_seconds_check CHECK ((sum_seconds >= (0)::double precision));
alter table scsql.search_latency enable row level security;
alter table scsql.search_latency force row level security;

-- The figures of each session, kept by triggers as its rows are written: prompts, tool calls (those written from the session's own write on, as its timeline shows them), failed tool calls, the model's messages, input and output tokens (tool calls and messages), prompt-cache tokens, cost in USD (NULL costs count 0) and when its last row happened. Retention subtracts the tool calls it drops.
create table scsql.session_totals (
  project_id bigint not null,
  session_id bigint not null,
  prompts bigint default 0 not null,
  tool_calls bigint default 0 not null,
  failures bigint default 0 not null,
  model_messages bigint default 0 not null,
  input_tokens bigint default 0 not null,
  output_tokens bigint default 0 not null,
  cache_tokens bigint default 0 not null,
  cost_usd numeric default 0 not null,
  last_at timestamp with time zone
);
alter table scsql.session_totals add constraint session_totals_pkey PRIMARY KEY (project_id, session_id);
alter table scsql.session_totals enable row level security;
alter table scsql.session_totals force row level security;

-- An agent's working session (client, model, title). Chained and append-only.
create table scsql.sessions (
  project_id bigint not null,
  session_id bigint generated always as identity not null,
  client text,
  model text,
  title text,
  at timestamp with time zone not null,
  author_id bigint not null,
  key_id integer not null,
  chain_id bigint not null,
  seq bigint not null,
  prev_hash bytea not null,
  row_hash bytea not null,
  signature bytea not null,
  external_id text,
  cwd text,
  git_branch text,
  git_commit text,
  source text,
  occurred_at timestamp with time zone,
  -- How the session's text fields were made storable (see scsql.tool_calls.altered).
  altered jsonb
);
alter table scsql.sessions add constraint sessions_pkey PRIMARY KEY (project_id, session_id);
alter table scsql.sessions add constraint sessions_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.sessions add constraint sessions_altered_object CHECK ((jsonb_typeof(altered) = 'object'::text));
alter table scsql.sessions add constraint sessions_client_check CHECK ((char_length(client) <= 100));
alter table scsql.sessions add constraint sessions_cwd_check CHECK ((char_length(cwd) <= 1024));
alter table scsql.sessions add constraint sessions_external_id_check CHECK (((char_length(external_id) >= 1) AND (char_length(external_id) <= 200)));
alter table scsql.sessions add constraint sessions_git_branch_check CHECK ((char_length(git_branch) <= 256));
alter table scsql.sessions add constraint sessions_git_commit_check CHECK ((char_length(git_commit) <= 64));
alter table scsql.sessions add constraint sessions_model_check CHECK ((char_length(model) <= 200));
alter table scsql.sessions add constraint sessions_source_check CHECK ((source = ANY (ARRAY['startup'::text, 'resume'::text, 'clear'::text, 'compact'::text, 'import'::text, 'hook'::text])));
alter table scsql.sessions add constraint sessions_title_check CHECK ((char_length(title) <= 500));
CREATE INDEX sessions_all_when_idx ON scsql.sessions USING btree (COALESCE(occurred_at, at) DESC, session_id DESC);
CREATE INDEX sessions_altered_idx ON scsql.sessions USING btree (project_id) WHERE (altered IS NOT NULL);
CREATE INDEX sessions_author_when_idx ON scsql.sessions USING btree (project_id, author_id, COALESCE(occurred_at, at));
CREATE INDEX sessions_chain_idx ON scsql.sessions USING btree (chain_id, seq);
CREATE UNIQUE INDEX sessions_external_idx ON scsql.sessions USING btree (project_id, author_id, external_id) WHERE (external_id IS NOT NULL);
CREATE INDEX sessions_when_idx ON scsql.sessions USING btree (project_id, COALESCE(occurred_at, at) DESC, session_id DESC);
alter table scsql.sessions enable row level security;
alter table scsql.sessions force row level security;

-- Paths held exclusively by queued and claimed tasks, normalized relative to the project root ("." is the whole project). A path covers itself and everything below it; the exclusion constraint task_files_exclusive keeps two overlapping paths of one project from being held at once.
create table scsql.task_files (
  project_id bigint not null,
  task_id bigint not null,
  path text not null,
  span numrange not null
);
alter table scsql.task_files add constraint task_files_pkey PRIMARY KEY (project_id, task_id, path);
alter table scsql.task_files add constraint task_files_exclusive EXCLUDE USING gist (project_id WITH =, span WITH &&);
alter table scsql.task_files add constraint task_files_project_id_task_id_fkey FOREIGN KEY (project_id, task_id) REFERENCES scsql.tasks(project_id, task_id) ON DELETE CASCADE;
alter table scsql.task_files enable row level security;
alter table scsql.task_files force row level security;

-- The hot queue: queued and claimed tasks only, per (project, team role). fence counts claims (the lease token); attempts counts claims charged against max_attempts. Finished tasks move to tasks_archive.
create table scsql.tasks (
  project_id bigint not null,
  task_id bigint generated always as identity not null,
  team_role text not null,
  state text default 'queued'::text not null,
  priority integer default 0 not null,
  payload jsonb default '{}'::jsonb not null,
  acceptance_criteria text default ''::text not null,
  complexity smallint,
  exclusive_files text[] default '{}'::text[] not null,
  run_after timestamp with time zone default now() not null,
  attempts integer default 0 not null,
  max_attempts integer default 5 not null,
  fence bigint default 0 not null,
  lease_seconds integer,
  claimed_by bigint,
  claimed_at timestamp with time zone,
  lease_expires_at timestamp with time zone,
  last_error text,
  created_by bigint not null,
  created_at timestamp with time zone default now() not null
);
alter table scsql.tasks add constraint tasks_pkey PRIMARY KEY (project_id, task_id);
alter table scsql.tasks add constraint tasks_attempts_check CHECK ((attempts >= 0));
alter table scsql.tasks add constraint tasks_claimed_has_lease CHECK (((state = 'claimed'::text) = ((claimed_by IS NOT NULL) AND (lease_expires_at IS NOT NULL))));
alter table scsql.tasks add constraint tasks_complexity_check CHECK (((complexity >= 1) AND (complexity <= 5)));
alter table scsql.tasks add constraint tasks_fence_check CHECK ((fence >= 0));
alter table scsql.tasks add constraint tasks_max_attempts_check CHECK (((max_attempts >= 1) AND (max_attempts <= 100)));
alter table scsql.tasks add constraint tasks_state_check CHECK ((state = ANY (ARRAY['queued'::text, 'claimed'::text])));
CREATE INDEX tasks_claim_idx ON scsql.tasks USING btree (project_id, team_role, priority DESC, task_id) WHERE (state = 'queued'::text);
CREATE INDEX tasks_lease_idx ON scsql.tasks USING btree (project_id, team_role, lease_expires_at) WHERE (state = 'claimed'::text);
alter table scsql.tasks enable row level security;
alter table scsql.tasks force row level security;

-- Finished tasks (done, dead, released for good, cancelled), moved out of the hot queue in the transaction that finished them. Append-only through the API.
create table scsql.tasks_archive (
  project_id bigint not null,
  task_id bigint not null,
  team_role text not null,
  state text not null,
  priority integer not null,
  payload jsonb not null,
  acceptance_criteria text not null,
  complexity smallint,
  exclusive_files text[] not null,
  attempts integer not null,
  max_attempts integer not null,
  fence bigint not null,
  claimed_by bigint,
  result jsonb,
  last_error text,
  created_by bigint not null,
  created_at timestamp with time zone not null,
  finished_at timestamp with time zone default now() not null,
  finished_by bigint
);
alter table scsql.tasks_archive add constraint tasks_archive_pkey PRIMARY KEY (project_id, task_id);
alter table scsql.tasks_archive add constraint tasks_archive_state_check CHECK ((state = ANY (ARRAY['done'::text, 'dead'::text, 'released'::text, 'cancelled'::text])));
alter table scsql.tasks_archive enable row level security;
alter table scsql.tasks_archive force row level security;

-- Team roles an agent can hold (orchestrator, developer, qa, ...). orchestrates marks roles that may assign work.
create table scsql.team_roles (
  name text not null,
  orchestrates boolean default false not null,
  description text default ''::text not null
);
alter table scsql.team_roles add constraint team_roles_pkey PRIMARY KEY (name);
alter table scsql.team_roles add constraint team_roles_name_check CHECK ((name ~ '^[a-z][a-z0-9_]{0,31}$'::text));
alter table scsql.team_roles enable row level security;
alter table scsql.team_roles force row level security;

-- One row per tool call an agent made: tool, model, tokens (input = arguments the model generated, output = the result the model reads next), latency, status, cost in USD computed from scsql.model_prices, bounded previews. origin = database marks calls that only assembled database content (cost 0). Chained, append-only, partitioned by day on at.
create table scsql.tool_calls (
  project_id bigint not null,
  tool_call_id bigint default nextval('scsql.tool_calls_id_seq'::regclass) not null,
  at timestamp with time zone not null,
  session_id bigint,
  tool text not null,
  model text,
  origin text default 'model'::text not null,
  input_tokens integer default 0 not null,
  output_tokens integer default 0 not null,
  latency_ms integer,
  status text not null,
  input_preview text,
  output_preview text,
  cost_usd numeric,
  author_id bigint not null,
  key_id integer not null,
  chain_id bigint not null,
  seq bigint not null,
  prev_hash bytea not null,
  row_hash bytea not null,
  signature bytea not null,
  tool_use_id text,
  files jsonb,
  scsql_tool boolean,
  imported boolean,
  input_key text,
  occurred_at timestamp with time zone,
  -- How the row's text was made storable, by field: replaced (counts of NUL and lone surrogates replaced by U+FFFD), clipped (with the original's bytes and sha256), and stub (the refusal's code and message when only a stub could be stored). NULL: stored as given.
  altered jsonb,
  -- sha256 of input_preview's UTF-8 bytes, what the row hashes and signs in place of it (NULL when there is none, and in rows written before scsql kept it). input_preview NULL with a digest: purged (scsql.purge).
  input_preview_sha256 bytea,
  -- sha256 of output_preview's UTF-8 bytes, what the row hashes and signs in place of it (NULL when there is none, and in rows written before scsql kept it). output_preview NULL with a digest: purged (scsql.purge).
  output_preview_sha256 bytea,
  -- sha256 of input_key's UTF-8 bytes (the command or path lessons match on), what the row hashes and signs in place of it (NULL when there is none, and in rows written before scsql kept it). input_key NULL with a digest: purged (scsql.purge).
  input_key_sha256 bytea
) partition by range (at);
alter table scsql.tool_calls add constraint tool_calls_pkey PRIMARY KEY (project_id, tool_call_id, at);
alter table scsql.tool_calls add constraint tool_calls_altered_object CHECK ((jsonb_typeof(altered) = 'object'::text));
alter table scsql.tool_calls add constraint tool_calls_cost_usd_check CHECK ((cost_usd >= (0)::numeric));
alter table scsql.tool_calls add constraint tool_calls_files_check CHECK ((jsonb_typeof(files) = 'array'::text));
alter table scsql.tool_calls add constraint tool_calls_input_key_check CHECK ((char_length(input_key) <= 4000));
alter table scsql.tool_calls add constraint tool_calls_input_preview_check CHECK ((char_length(input_preview) <= 4000));
alter table scsql.tool_calls add constraint tool_calls_input_tokens_check CHECK ((input_tokens >= 0));
alter table scsql.tool_calls add constraint tool_calls_latency_ms_check CHECK ((latency_ms >= 0));
alter table scsql.tool_calls add constraint tool_calls_model_check CHECK ((char_length(model) <= 200));
alter table scsql.tool_calls add constraint tool_calls_origin_check CHECK ((origin = ANY (ARRAY['model'::text, 'database'::text])));
alter table scsql.tool_calls add constraint tool_calls_output_preview_check CHECK ((char_length(output_preview) <= 4000));
alter table scsql.tool_calls add constraint tool_calls_output_tokens_check CHECK ((output_tokens >= 0));
alter table scsql.tool_calls add constraint tool_calls_status_check CHECK ((status = ANY (ARRAY['ok'::text, 'error'::text, 'timeout'::text, 'cancelled'::text, 'denied'::text])));
alter table scsql.tool_calls add constraint tool_calls_tool_check CHECK (((char_length(tool) >= 1) AND (char_length(tool) <= 200)));
alter table scsql.tool_calls add constraint tool_calls_tool_use_id_check CHECK (((char_length(tool_use_id) >= 1) AND (char_length(tool_use_id) <= 200)));
CREATE INDEX tool_calls_altered_idx ON ONLY scsql.tool_calls USING btree (project_id) WHERE (altered IS NOT NULL);
CREATE INDEX tool_calls_at_idx ON ONLY scsql.tool_calls USING btree (project_id, at);
CREATE INDEX tool_calls_chain_idx ON ONLY scsql.tool_calls USING btree (chain_id, seq);
CREATE INDEX tool_calls_no_session_idx ON ONLY scsql.tool_calls USING btree (project_id, COALESCE(occurred_at, at)) WHERE (session_id IS NULL);
CREATE INDEX tool_calls_redacted_idx ON ONLY scsql.tool_calls USING btree (project_id, COALESCE(occurred_at, at)) WHERE ((input_preview ~~ '%[REDACTED:%'::text) OR (output_preview ~~ '%[REDACTED:%'::text));
CREATE INDEX tool_calls_session_idx ON ONLY scsql.tool_calls USING btree (project_id, session_id, COALESCE(occurred_at, at), tool_call_id) WHERE (session_id IS NOT NULL);
CREATE INDEX tool_calls_when_idx ON ONLY scsql.tool_calls USING btree (project_id, COALESCE(occurred_at, at));
alter table scsql.tool_calls enable row level security;
alter table scsql.tool_calls force row level security;

-- Per session: the uuid of the last transcript message kept in its summary and conversation text, the conversation parts written and the messages read, so the next read of the transcript adds only what is new.
create table scsql.transcript_cursors (
  project_id bigint not null,
  session_id bigint not null,
  cursor text,
  parts integer default 0 not null,
  messages bigint default 0 not null,
  updated_at timestamp with time zone default now() not null,
  -- Bytes of the transcript read for the model's token usage (scsql.model_calls).
  usage_offset bigint default 0 not null
);
alter table scsql.transcript_cursors add constraint transcript_cursors_pkey PRIMARY KEY (project_id, session_id);
alter table scsql.transcript_cursors add constraint transcript_cursors_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.transcript_cursors add constraint transcript_cursors_cursor_check CHECK (((char_length(cursor) >= 1) AND (char_length(cursor) <= 200)));
alter table scsql.transcript_cursors add constraint transcript_cursors_messages_check CHECK ((messages >= 0));
alter table scsql.transcript_cursors add constraint transcript_cursors_parts_check CHECK ((parts >= 0));
alter table scsql.transcript_cursors add constraint transcript_cursors_usage_offset_check CHECK ((usage_offset >= 0));
alter table scsql.transcript_cursors enable row level security;
alter table scsql.transcript_cursors force row level security;

-- Tool calls and the model's messages summed per project, UTC day of when they happened, agent, model, tool ((model) for the model's messages) and status (a tool call's; NULL for a message), kept by triggers as rows are written: counts, tokens, cost in USD (NULL costs count 0) and unpriced rows (no price for a model-generated row). Retention subtracts the tool calls it drops.
create table scsql.usage_days (
  project_id bigint not null,
  day date not null,
  author_id bigint not null,
  model text,
  tool text not null,
  status text,
  tool_calls bigint default 0 not null,
  model_messages bigint default 0 not null,
  input_tokens bigint default 0 not null,
  output_tokens bigint default 0 not null,
  cache_write_tokens bigint default 0 not null,
  cache_read_tokens bigint default 0 not null,
  cost_usd numeric default 0 not null,
  unpriced bigint default 0 not null
);
alter table scsql.usage_days add constraint usage_days_key UNIQUE NULLS NOT DISTINCT (project_id, day, author_id, model, tool, status);
alter table scsql.usage_days enable row level security;
alter table scsql.usage_days force row level security;

-- Tool calls and the model's messages summed per session and agent, kept by triggers as rows are written: when the first and the last of them happened (retention leaves these as they were: the range only ever holds the rows), counts, tokens, cost in USD (NULL costs count 0) and unpriced rows. Retention subtracts the tool calls it drops.
create table scsql.usage_sessions (
  project_id bigint not null,
  session_id bigint not null,
  author_id bigint not null,
  first_at timestamp with time zone not null,
  last_at timestamp with time zone not null,
  tool_calls bigint default 0 not null,
  model_messages bigint default 0 not null,
  input_tokens bigint default 0 not null,
  output_tokens bigint default 0 not null,
  cache_write_tokens bigint default 0 not null,
  cache_read_tokens bigint default 0 not null,
  cost_usd numeric default 0 not null,
  unpriced bigint default 0 not null
);
alter table scsql.usage_sessions add constraint usage_sessions_pkey PRIMARY KEY (project_id, session_id, author_id);
CREATE INDEX usage_sessions_last_idx ON scsql.usage_sessions USING btree (project_id, last_at);
alter table scsql.usage_sessions enable row level security;
alter table scsql.usage_sessions force row level security;

-- The heartbeat of each scsql worker process: who runs it (agent, host, pid), its jobs and poll interval, the units of work it did, when it started and when it was last seen. Written by scsql.worker_heartbeat.
create table scsql.worker_heartbeats (
  project_id bigint not null,
  agent_id bigint not null,
  host text not null,
  pid integer not null,
  jobs text[] default '{}'::text[] not null,
  poll_seconds double precision not null,
  units bigint default 0 not null,
  started_at timestamp with time zone default now() not null,
  seen_at timestamp with time zone default now() not null,
  -- The server process (pg_backend_pid()) of the connection that sent the latest heartbeat: a pid of pg_stat_activity, taken by the database, not reported by the client.
  backend_pid integer,
  -- The login (session_user) of the connection that sent the latest heartbeat: the agent's own role on a shared server, scsql_app on one user's machine.
  login text
);
alter table scsql.worker_heartbeats add constraint worker_heartbeats_pkey PRIMARY KEY (project_id, agent_id, host, pid);
alter table scsql.worker_heartbeats add constraint worker_heartbeats_project_id_fkey FOREIGN KEY (project_id) REFERENCES scsql.projects(project_id);
alter table scsql.worker_heartbeats add constraint worker_heartbeats_host_check CHECK (((char_length(host) >= 1) AND (char_length(host) <= 255)));
alter table scsql.worker_heartbeats add constraint worker_heartbeats_pid_check CHECK ((pid > 0));
alter table scsql.worker_heartbeats add constraint worker_heartbeats_poll_seconds_check CHECK (((poll_seconds > (0)::double precision) AND (poll_seconds <= (3600)::double precision)));
alter table scsql.worker_heartbeats add constraint worker_heartbeats_units_check CHECK ((units >= 0));
alter table scsql.worker_heartbeats enable row level security;
alter table scsql.worker_heartbeats force row level security;
