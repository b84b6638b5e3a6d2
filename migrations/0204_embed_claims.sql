-- 0204 embeddings are stored only under a claim, and say who stored them;
-- background work gets public names.
--
-- A worker (scsql worker, or an MCP server with the model loaded) claims
-- queued chunk hashes with scsql.embed_claim: each row gets the claiming
-- agent, a token shared by the claim and a lease expiry. scsql.embed_store
-- accepts a vector only for a chunk hash the acting agent holds a live claim
-- on, with that token and for that model; anything else is refused and
-- nothing is stored. So no agent can replace the vector of a chunk it was
-- not given to embed, and each stored vector names the agent that stored it
-- (NULL for vectors stored before this migration), so a re-embedding check
-- (scsql verify --embeddings) can name a worker that lied.

alter table scsql.kb_embed_queue
  add column claimed_by bigint references scsql.agents,
  add column claim_token uuid,
  add column claim_expires_at timestamptz,
  add constraint kb_embed_queue_claim_check
    check ((claimed_by is null) = (claim_token is null) and (claim_token is null) = (claim_expires_at is null));
comment on column scsql.kb_embed_queue.claimed_by is 'The agent that claimed this chunk hash for embedding (embed_claim), or NULL when unclaimed.';
comment on column scsql.kb_embed_queue.claim_token is 'The token of the claim; embed_store must present it.';
comment on column scsql.kb_embed_queue.claim_expires_at is 'When the claim''s lease ends; afterwards another claim may take the chunk hash and the old token stores nothing.';
comment on table scsql.kb_embed_queue is
  'Chunks waiting for an embedding with a model. Filled by the write functions, claimed with a lease (claimed_by, claim_token, claim_expires_at) and drained by scsql worker (and inline by an MCP server that has the model loaded) through embed_claim and embed_store.';

alter table scsql.kb_embeddings add column stored_by bigint references scsql.agents;
comment on column scsql.kb_embeddings.stored_by is
  'The agent whose claim stored this vector (embed_store); NULL for vectors stored before scsql recorded it. created_at is when.';

-- The private names of background work are gone; sql/ defines the public
-- ones (granted to scsql_worker, which agents inherit; never MCP tools).
drop function if exists scsql._embed_claim(text, integer);
drop function if exists scsql._embed_store(text, text[], vector[]);
drop function if exists scsql._purge_expired();
drop function if exists scsql._index_learnings(integer);
drop function if exists scsql._learnings_export(bigint, integer);
drop function if exists scsql._maintain_partitions();
