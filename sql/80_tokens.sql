-- 80 tokens: the bearer tokens of the team server (scsql serve).
--
-- A remote agent reaches scsql over HTTP with a token instead of a database
-- login. The token's text is scsql.<agent>.<43 characters of base64url: 256
-- random bits>, made by the client (scsql agent token create), shown once
-- and never stored: the database keeps its sha256 (scsql.agent_tokens). The
-- server reads the agent from the token, acts as that agent's role (SET
-- LOCAL ROLE, as over stdio) and asks scsql_caller.use_token whether the
-- token is a live token of the acting agent, on every request, so a revoked
-- or expired token is refused at once. Nothing in a request but the token
-- decides the agent.

select scsql._define_error(code, name, meaning, raised_by) from (values
  ('SC280', 'token_required',      'client',   'The team server (scsql serve) refused a request without a bearer token: every request carries Authorization: Bearer <token>, a token scsql agent token create printed (scsql.<agent>.<secret>).'),
  ('SC281', 'token_unknown',       'database', 'The bearer token is not a token of the agent it names on this server: mistyped, made on another server, or never made. An administrator makes one with scsql agent token create NAME.'),
  ('SC282', 'token_revoked',       'database', 'The bearer token was revoked (scsql agent token revoke) and is refused from then on; an administrator makes a new one.'),
  ('SC283', 'token_expired',       'database', 'The bearer token expired; an administrator makes a new one (scsql agent token create NAME --expires ...).'),
  ('SC284', 'token_scope',         'client',   'The bearer token''s scope does not cover the request: a tools token reaches only the MCP tools (/mcp), a hooks token only the hook events (/hooks); an agent token reaches both.'),
  ('SC285', 'agent_not_the_tokens', 'client',  'The request named an agent (the X-Scsql-Agent header) other than the one its token belongs to. The token alone decides the agent a request acts as; a request cannot name another.'),
  ('SC286', 'request_rate_limited', 'client',   'The team server refused the request: the token made more requests than its rate allows (scsql serve --rate, --burst), or its address failed to authenticate too often. Retry after the seconds the Retry-After header says.'),
  ('SC287', 'request_too_large',   'client',   'The team server refused a request body larger than its limit (scsql serve --max-request-bytes) before reading it.'),
  ('SC288', 'token_exists',        'database', 'scsql.create_agent_token was given the hash of a token that is already registered; every token is new random text.'),
  ('SC289', 'token_not_found',     'database', 'No token has that id; scsql agent token list shows them.'),
  ('SC290', 'server_holds_no_key', 'client',   'The team server holds no private key of the token''s agent in its keystore, so it cannot sign that agent''s rows. Create the agent on the server''s data directory (scsql agent create), or copy its key file there (0600).'),
  ('SC291', 'hook_request_invalid', 'client',  'A request to the team server''s hook endpoint is not a JSON object holding an event (/hooks/event) or a list of events (/hooks/replay).')
) as t(code, name, raised_by, meaning);


create or replace function scsql._token_row(p_token scsql.agent_tokens)
returns table (
  token_id bigint, agent text, project text, scope text, note text, created_at timestamptz, created_by text,
  expires_at timestamptz, last_used_at timestamptz, revoked_at timestamptz, state text
)
language sql stable
as $$
  select p_token.token_id, a.name, p.name, p_token.scope, p_token.note, p_token.created_at, p_token.created_by,
         p_token.expires_at, p_token.last_used_at, p_token.revoked_at,
         case when p_token.revoked_at is not null then 'revoked'
              when a.revoked_at is not null then 'agent revoked'
              when p_token.expires_at <= now() then 'expired'
              else 'active' end
  from scsql.agents a join scsql.projects p on p.project_id = a.project_id
  where a.agent_id = p_token.agent_id
$$;
comment on function scsql._token_row(scsql.agent_tokens) is
  'Private. One token as create_agent_token and list_agent_tokens return it: its agent and project by name and its state (active, expired, revoked, or agent revoked).';


create or replace function scsql.create_agent_token(p_agent text, p_token_hash bytea, p_scope text default 'agent',
                                                    p_expires_at timestamptz default null, p_note text default null)
returns table (
  token_id bigint, agent text, project text, scope text, note text, created_at timestamptz, created_by text,
  expires_at timestamptz, last_used_at timestamptz, revoked_at timestamptz, state text
)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_agent scsql.agents;
  v_token scsql.agent_tokens;
begin
  v_agent := scsql._agent(p_agent, true);
  if v_agent.revoked_at is not null then
    raise exception using errcode = 'SC002', message = format('agent "%s" was revoked at %s; it gets no token', p_agent, v_agent.revoked_at);
  end if;
  perform scsql._require(octet_length(p_token_hash) = 32, 'token_hash must be the 32-byte sha256 of the token');
  perform scsql._require(p_scope in ('agent', 'tools', 'hooks'), 'scope must be agent, tools or hooks');
  perform scsql._require(p_note is null or char_length(p_note) between 1 and 200, 'note must be 1 to 200 characters');
  perform scsql._require_time('expires_at', p_expires_at);
  perform scsql._require(p_expires_at is null or p_expires_at > now(), format('expires_at must be in the future, got %s', p_expires_at));
  begin
    insert into scsql.agent_tokens (project_id, agent_id, token_hash, scope, expires_at, note, created_by)
    values (v_agent.project_id, v_agent.agent_id, p_token_hash, p_scope, p_expires_at, p_note, session_user)
    returning * into v_token;
  exception when unique_violation then
    raise exception using errcode = 'SC288', message = 'that token is already registered',
      hint = 'scsql agent token create makes each token from new random bytes.';
  end;
  return query select * from scsql._token_row(v_token);
end
$$;
comment on function scsql.create_agent_token(text, bytea, text, timestamptz, text) is
  'Administrators only. Registers a bearer token of agent AGENT for the team server, given as TOKEN_HASH, the sha256 of its text (the token itself never reaches the database; scsql agent token create makes it and prints it once).

p_agent: the agent the token acts as; nothing in a request can name another.
p_token_hash: the 32-byte sha256 of the token''s text.
p_scope (agent|tools|hooks): agent: MCP tools and hook events; tools: MCP tools only; hooks: hook events only.
p_expires_at: when it stops working (NULL: never); must be in the future.
p_note: what the token is for, 1 to 200 characters.

Returns the token''s row as list_agent_tokens shows it. Raises SC003 for an unknown agent, SC002 for a revoked one, SC010 for a bad hash, scope, expiry or note, SC288 when the hash is registered already.';


create or replace function scsql.list_agent_tokens(p_agent text default null)
returns table (
  token_id bigint, agent text, project text, scope text, note text, created_at timestamptz, created_by text,
  expires_at timestamptz, last_used_at timestamptz, revoked_at timestamptz, state text
)
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_agent bigint;
begin
  if p_agent is not null then
    v_agent := (scsql._agent(p_agent)).agent_id;
  end if;
  -- PL/pgSQL: Citus plans a SQL function's query as a parameterized one, which it refuses over these tables.
  return query
  select r.* from scsql.agent_tokens t, lateral scsql._token_row(t) r
  where v_agent is null or t.agent_id = v_agent
  order by r.agent, t.token_id;
end
$$;
comment on function scsql.list_agent_tokens(text) is
  'Administrators and the auditor. The team server''s bearer tokens, of every agent or of AGENT: id, agent, project, scope, note, when and by whom each was made, when it expires, when it was last used (to the minute) and when it was revoked, and its state (active, expired, revoked, agent revoked); never a token''s text or hash. Raises SC003 for an unknown agent.';


create or replace function scsql.revoke_agent_token(p_token_id bigint)
returns timestamptz
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_token scsql.agent_tokens;
begin
  select * into v_token from scsql.agent_tokens t where t.token_id = p_token_id for update;
  if not found then
    raise exception using errcode = 'SC289', message = format('no token has id %s', p_token_id),
      hint = 'scsql.list_agent_tokens() lists the tokens.';
  end if;
  if v_token.revoked_at is not null then
    return v_token.revoked_at;
  end if;
  update scsql.agent_tokens t set revoked_at = now()
  where t.project_id = v_token.project_id and t.token_id = v_token.token_id
  returning t.revoked_at into v_token.revoked_at;
  return v_token.revoked_at;
end
$$;
comment on function scsql.revoke_agent_token(bigint) is
  'Administrators only. Revokes team-server token TOKEN_ID: the next request that presents it is refused (SC282), and every one after. Returns the revocation time (the original one when it was revoked already). Raises SC289 when no token has that id.';


create or replace function scsql_caller.use_token(p_token_hash bytea)
returns table (token_id bigint, scope text, expires_at timestamptz)
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_me scsql.agents := scsql._me();
  v_token scsql.agent_tokens;
begin
  select * into v_token from scsql.agent_tokens t
  where t.project_id = v_me.project_id and t.token_hash = p_token_hash;
  if not found or v_token.agent_id <> v_me.agent_id then
    raise exception using errcode = 'SC281', message = format('the bearer token is not a token of agent "%s" on this server', v_me.name),
      hint = 'An administrator makes one with scsql agent token create NAME.';
  end if;
  if v_token.revoked_at is not null then
    raise exception using errcode = 'SC282', message = format('bearer token %s of agent "%s" was revoked at %s', v_token.token_id, v_me.name, v_token.revoked_at),
      hint = 'An administrator makes a new one with scsql agent token create NAME.';
  end if;
  if v_token.expires_at <= now() then
    raise exception using errcode = 'SC283', message = format('bearer token %s of agent "%s" expired at %s', v_token.token_id, v_me.name, v_token.expires_at),
      hint = 'An administrator makes a new one with scsql agent token create NAME --expires ...';
  end if;
  -- Noted to the minute: one write a minute at most, however many requests.
  update scsql.agent_tokens t set last_used_at = now()
  where t.project_id = v_token.project_id and t.token_id = v_token.token_id
    and (t.last_used_at is null or t.last_used_at < now() - interval '1 minute');
  return query select v_token.token_id, v_token.scope, v_token.expires_at;
end
$$;
comment on function scsql_caller.use_token(bytea) is
  'The team server''s check of a bearer token, run as the agent the token names (SET LOCAL ROLE), on every request: whether TOKEN_HASH (the sha256 of the token''s text) is a live token of the acting agent. Notes its use (last_used_at, to the minute) and returns its id, scope and expiry. Raises SC001 / SC002 when the session acts as no agent or a revoked one, SC281 when the hash is no token of the acting agent, SC282 when the token was revoked, SC283 when it expired. Not a tool: it lives in scsql_caller.';
