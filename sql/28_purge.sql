-- 28 purge: forget the content, keep the proof. The author of a prompt, a
-- tool call or a knowledge-base chunk (a conversation turn, say), or an
-- administrator, removes its text with scsql.purge. The row stays: a chained
-- row keeps its hashes and signature, because it hashes and signs each
-- purgeable text through its sha256 (scsql._enc, DIGESTED FIELDS); a chunk
-- keeps its chunk_hash. A chained record in scsql.purges says who removed
-- what, why, and the sha256 of each text removed; scsql verify and
-- scsql.verify_chain stay clean and still find a purged row altered.
-- Tables: migrations/0800_purge.sql.

select scsql._define_error(code, name, meaning) from (values
  ('SC360', 'purge_kind_invalid',   'What scsql.purge removes is a prompt, a tool_call, a chunk, an outcome, a learning or a decision.'),
  ('SC361', 'purge_target_unknown', 'No row of that kind has that id (in the acting agent''s project).'),
  ('SC362', 'purge_not_allowed',    'Only the author of a row (the agent that wrote the prompt or tool call, or the chunk''s source) or an administrator (scsql_admin) may purge it.'),
  ('SC363', 'purge_already',        'The row''s text was purged already (or it has none to purge); scsql.purges records by whom and why.'),
  ('SC364', 'purge_reason_invalid', 'A purge needs a reason: 1 to 1,000 characters of printable text.'),
  ('SC365', 'purge_unsupported',    'The row was written before scsql hashed its text through a digest: removing the text would break its chain, so it cannot be purged.')
) as t(code, name, meaning);

-- Purges are written by the database inside scsql.purge, in the chain of
-- the acting agent (an administrator: of the purged row's author), chained
-- unsigned like scsql.memory_changes (see the head of sql/26_history.sql).
select scsql._make_chained('scsql.purges', array['target_kind', 'target_id', 'digests', 'reason', 'purged_by'],
                           array['purge_id']);

create or replace function scsql._make_digested(p_table regclass, p_fields text[])
returns void
language plpgsql
as $$
declare
  v_name text := (select n.nspname || '.' || c.relname from pg_catalog.pg_class c
                  join pg_catalog.pg_namespace n on n.oid = c.relnamespace where c.oid = p_table);
  v_have text[];
  v_col text;
begin
  select t.digested_fields into v_have from scsql.chained_tables t where t.table_name = v_name;
  if v_have is null then
    raise exception using errcode = 'SC105', message = format('%s is not chained', p_table);
  end if;
  if v_have is distinct from p_fields[1:cardinality(v_have)] then
    raise exception using errcode = 'SC107',
      message = format('the digested fields of %s are %s; %s removes or reorders them', v_name, v_have, p_fields);
  end if;
  foreach v_col in array p_fields[cardinality(v_have) + 1:] loop
    if not exists (select from scsql._chain_fields(v_name) f where f.column_name = v_col and f.part in ('signed', 'appended')
                   and f.kind = 'text')
       or not exists (select from pg_catalog.pg_attribute a where a.attrelid = p_table and a.attname = v_col || '_sha256'
                      and a.atttypid = 'bytea'::regtype and not a.attisdropped) then
      raise exception using errcode = 'SC105',
        message = format('%s.%s is not a signed text column with a bytea column %s_sha256', v_name, v_col, v_col);
    end if;
  end loop;
  update scsql.chained_tables set digested_fields = p_fields where table_name = v_name;
  execute scsql._chain_trigger_sql(v_name);
end
$$;
comment on function scsql._make_digested(regclass, text[]) is
  'Private; called from sql/ files (idempotent). Makes signed text columns of a chained table digested (see scsql._enc, DIGESTED FIELDS): rows written from now on hash and sign each through its sha256, kept in <column>_sha256 (a bytea column the table must have, added without a default), so scsql.purge can remove the text. The list only grows at its end. Regenerates the table''s insert trigger, which fills the digests. Raises SC105 for a table that is not chained or a column that is not a signed text column with its digest column, SC107 when the list removes or reorders registered fields.';

select scsql._make_digested('scsql.prompts', array['text']);
select scsql._make_digested('scsql.tool_calls', array['input_preview', 'output_preview', 'input_key']);
select scsql._make_digested('scsql.outcomes', array['summary', 'evidence']);
select scsql._make_digested('scsql.memory_changes', array['reason']);  -- a decision's reason quotes it

-- Learnings are not chained: each keeps the sha256 of its texts beside them
-- (filled here when it is written), the proof of what a purge removed, by
-- which a rule of a purged learning still matches calls.
create or replace function scsql._learning_digests()
returns trigger
language plpgsql
as $$
begin
  new.summary_sha256 := sha256(convert_to(new.summary, 'UTF8'));
  new.evidence_sha256 := sha256(convert_to(new.evidence, 'UTF8'));
  new.input_key_sha256 := sha256(convert_to(new.input_key, 'UTF8'));
  return new;
end
$$;
comment on function scsql._learning_digests() is
  'Private trigger (before insert on scsql.learnings, after the input key is copied): fills summary_sha256, evidence_sha256 and input_key_sha256, the sha256 of each text (NULL for none), which stay when scsql.purge removes the texts.';
drop trigger if exists zz_learning_digests on scsql.learnings;
create trigger zz_learning_digests before insert on scsql.learnings
  for each row execute function scsql._learning_digests();

create or replace function scsql._learning_author(p_project bigint, p_kind text, p_meta jsonb)
returns bigint
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  select l.author_id from scsql.learnings l
  where p_kind = 'learning' and l.project_id = p_project
    and l.learning_id = case when p_meta ->> 'learning_id' ~ '^[0-9]{1,18}$' then (p_meta ->> 'learning_id')::bigint end
$$;
comment on function scsql._learning_author(bigint, text, jsonb) is
  'Private. The author of the learning a knowledge-base source of kind P_KIND with meta P_META holds (the author of its outcome; as scsql._check_forgettable finds it), NULL for any other source.';

create or replace function scsql._purge_consents(p_table text, p_old jsonb, p_new jsonb)
returns boolean
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  -- Every changed column is a digested text set to NULL beside its digest,
  -- at least one changed, and each removal is recorded in scsql.purges.
  with changed as (
    select o.key from jsonb_each(p_old) o where o.value is distinct from p_new -> o.key
  )
  select exists (select from changed)
     and not exists (
       select from changed c
       left join scsql._chain_digests(p_table) d on d.column_name = c.key
       where d.column_name is null
          or jsonb_typeof(p_new -> c.key) is distinct from 'null'
          or p_old ->> d.digest_column is null
          or not exists (select from scsql.purges p
                         where p.project_id = (p_old ->> 'project_id')::bigint and p.target_kind = d.target_kind
                           and p.target_id = (p_old ->> d.id_column)::bigint
                           and p.digests ->> d.column_name = substr(p_old ->> d.digest_column, 3)))
$$;
comment on function scsql._purge_consents(text, jsonb, jsonb) is
  'Private, for the append-only trigger (scsql._chain_append_only). True when an UPDATE of a row of chained table P_TABLE from P_OLD to P_NEW (the rows as jsonb) only sets digested texts to NULL that keep their digest, each removal recorded in scsql.purges for that row with that digest: what scsql.purge does, and nothing else.';

create or replace function scsql._purger(out agent scsql.agents, out is_admin boolean, out name text)
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_role text := scsql._acting_role();
begin
  select * into agent from scsql.agents a where a.role_name = v_role;
  if agent.agent_id is not null then
    agent := scsql._not_revoked(agent, format('role "%s"', v_role));
    is_admin := false;
    name := agent.name;
  elsif pg_catalog.pg_has_role(v_role, 'scsql_admin', 'MEMBER') then
    is_admin := true;
    name := v_role;
  else
    raise exception using errcode = 'SC362', message = format('role "%s" is neither a scsql agent nor an administrator', v_role),
      hint = 'Purge as the row''s author (scsql psql --agent NAME) or as an administrator (scsql_admin).';
  end if;
end
$$;
comment on function scsql._purger() is
  'Private. Who is purging: the acting agent (is_admin false), or an administrator (a member of scsql_admin that is not an agent; is_admin true), with the name scsql.purges records. Raises SC362 for any other role, SC002 for a revoked agent.';

create or replace function scsql._purge_record(p_project bigint, p_author bigint, p_kind text, p_id bigint,
                                               p_digests jsonb, p_reason text, p_by text)
returns bigint
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_at timestamptz := clock_timestamp();
  v_id bigint;
begin
  insert into scsql.purges (project_id, author_id, target_kind, target_id, digests, reason, purged_by, at, key_id, signature)
  values (p_project, p_author, p_kind, p_id, p_digests, p_reason, p_by, v_at,
          (select k.key_id from scsql.agent_keys k where k.agent_id = p_author and k.valid_from <= v_at
           order by k.valid_from desc limit 1),
          '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea || sha256(uuid_send(gen_random_uuid())))
  returning purge_id into v_id;
  return v_id;
end
$$;
comment on function scsql._purge_record(bigint, bigint, text, bigint, jsonb, text, text) is
  'Private. Writes the purge record of one row into the chain of agent P_AUTHOR (the purging agent, or for an administrator the row''s author): what (P_KIND, P_ID), the sha256 hex of each text removed by field (P_DIGESTS), why and by whom. Chained unsigned, like scsql.memory_changes. Returns its purge_id.';

create or replace function scsql._purge_chained(p_table text, p_kind text, p_id bigint, p_reason text)
returns table (purge_id bigint, fields text[], quoted_by text[])
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_who record := scsql._purger();
  v_id_col text := (select min(d.id_column) from scsql._chain_digests(p_table) d);
  v_row jsonb;
  v_digests jsonb;
  v_old text[];
begin
  -- The row, locked: a second purge of it waits here, then finds it purged.
  execute format('select to_jsonb(t) from %s t where t.%I = $1 and ($2 or t.project_id = $3) for update', p_table, v_id_col)
    into v_row using p_id, v_who.is_admin, (v_who.agent).project_id;
  if v_row is null then
    raise exception using errcode = 'SC361', message = format('no %s has id %s%s', p_kind, p_id,
      case when v_who.is_admin then '' else ' in your project' end);
  end if;
  if not v_who.is_admin and (v_row ->> 'author_id')::bigint <> (v_who.agent).agent_id then
    raise exception using errcode = 'SC362', message = format('%s %s is another agent''s; only its author or an administrator may purge it', p_kind, p_id),
      hint = 'Ask the author, or an administrator (scsql_admin).';
  end if;
  if exists (select from scsql._chain_digests(p_table) d where v_row ->> d.column_name is not null and v_row ->> d.digest_column is null) then
    raise exception using errcode = 'SC365', message = format('%s %s was written before scsql hashed its text through a digest; it cannot be purged', p_kind, p_id);
  end if;
  select jsonb_object_agg(d.column_name, substr(v_row ->> d.digest_column, 3)), array_agg(d.column_name order by d.column_name)
    into v_digests, fields
  from scsql._chain_digests(p_table) d where v_row ->> d.column_name is not null;
  if v_digests is null then
    raise exception using errcode = 'SC363', message = format('%s %s has no text left to purge', p_kind, p_id),
      hint = 'scsql.purges records who purged it and why.';
  end if;
  purge_id := scsql._purge_record((v_row ->> 'project_id')::bigint,
                                  case when v_who.is_admin then (v_row ->> 'author_id')::bigint else (v_who.agent).agent_id end,
                                  p_kind, p_id, v_digests, scsql._redact(p_reason), v_who.name);
  perform scsql._purge_summaries((v_row ->> 'project_id')::bigint,
                                 array(select v_row ->> f from unnest(fields) f));
  quoted_by := scsql._purge_quoted((v_row ->> 'project_id')::bigint, p_kind, p_id,
                                   array(select v_row ->> f from unnest(fields) f));
  execute format('update %s t set %s where t.project_id = $1 and t.%I = $2', p_table,
                 (select string_agg(format('%I = null', f), ', ') from unnest(fields) f), v_id_col)
    using (v_row ->> 'project_id')::bigint, p_id;
  return next;
end
$$;
comment on function scsql._purge_chained(text, text, bigint, text) is
  'Private, for scsql.purge. Purges row P_ID of chained table P_TABLE (kind P_KIND): checks who may, records the purge (scsql._purge_record), sets each digested text the row still has to NULL (the append-only trigger consents, scsql._purge_consents), and replaces the items of session summaries that quote them (scsql._purge_summaries). Returns the purge_id, the fields removed and what still quotes them (scsql._purge_quoted). Raises SC361, SC362, SC363, SC365.';

create or replace function scsql._purge_chunk(p_id bigint, p_reason text)
returns table (purge_id bigint, fields text[], quoted_by text[])
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_who record := scsql._purger();
  v_project bigint;
  v_c record;
begin
  select c.project_id into v_project from scsql.kb_chunks c
  where c.chunk_id = p_id and (v_who.is_admin or c.project_id = (v_who.agent).project_id);
  if v_project is not null then
    perform scsql._memory_state_lock(v_project);  -- as every writer of the knowledge base
    select c.*, s.created_by, s.updated_by, scsql._learning_author(s.project_id, s.kind, s.meta) as learning_author
      into v_c from scsql.kb_chunks c
    join scsql.kb_sources s on s.project_id = c.project_id and s.source_id = c.source_id
    where c.project_id = v_project and c.chunk_id = p_id for update of c;
  end if;
  if v_project is null or v_c.chunk_id is null then
    raise exception using errcode = 'SC361', message = format('no chunk has id %s%s', p_id,
      case when v_who.is_admin then '' else ' in your project' end);
  end if;
  if not v_who.is_admin and not (v_who.agent).agent_id = any (array_remove(array[v_c.created_by, v_c.updated_by, v_c.learning_author], null)) then
    raise exception using errcode = 'SC362', message = format('chunk %s is of another agent''s source; only its author or an administrator may purge it', p_id),
      hint = 'Ask the author, or an administrator (scsql_admin).';
  end if;
  if v_c.purged_at is not null then
    raise exception using errcode = 'SC363', message = format('chunk %s was purged at %s', p_id, v_c.purged_at),
      hint = 'scsql.purges records who purged it and why.';
  end if;
  purge_id := scsql._purge_record(v_project, case when v_who.is_admin then v_c.updated_by else (v_who.agent).agent_id end,
                                  'chunk', p_id, jsonb_build_object('content', scsql._text_hash(v_c.content)),
                                  scsql._redact(p_reason), v_who.name);
  perform scsql._purge_chunk_text(v_project, v_c.source_id, p_id);
  quoted_by := scsql._purge_quoted(v_project, 'chunk', p_id, array[v_c.content]);
  fields := array_remove(array['content', case when v_c.anchor is not null then 'anchor' end,
                                case when v_c.context is not null then 'context' end], null);
  return next;
end
$$;
comment on function scsql._purge_chunk(bigint, text) is
  'Private, for scsql.purge. Purges chunk P_ID: checks who may (an agent that created or last wrote its source, for a learning''s source also the learning''s author, or an administrator), records the purge in the chain of the purging agent (an administrator: of the source''s last writer), and removes its text everywhere it is kept (scsql._purge_chunk_text). Returns the purge_id, the fields removed and what still cites it (scsql._purge_quoted). Raises SC361, SC362, SC363.';

create or replace function scsql._purge_chunk_text(p_project bigint, p_source bigint, p_chunk bigint)
returns void
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
-- Caller holds the project's memory_state lock.
declare
  v_c scsql.kb_chunks;
begin
  select * into strict v_c from scsql.kb_chunks c where c.project_id = p_project and c.chunk_id = p_chunk;
  -- Its terms: postings, document frequencies and the project's BM25 lengths.
  delete from scsql.kb_postings p where p.project_id = p_project and p.chunk_id = p_chunk and p.term_id = any (v_c.term_ids);
  update scsql.kb_terms t set df = t.df - 1, published_df = t.published_df - case when v_c.published then 1 else 0 end
  where t.project_id = p_project and t.term_id = any (v_c.term_ids);
  update scsql.memory_state
     set total_len = total_len - v_c.n_terms,
         published_len = published_len - case when v_c.published then v_c.n_terms else 0 end, updated_at = now()
   where project_id = p_project;
  update scsql.kb_chunks c
     set content = '', anchor = null, context = null, context_sources = null, context_hashes = null, n_terms = 0,
         term_ids = '{}', purged_at = now()
   where c.project_id = p_project and c.chunk_id = p_chunk;
  -- Its vector, unless a chunk not purged holds the same text.
  delete from scsql.kb_embeddings e where e.project_id = p_project and e.chunk_hash = v_c.chunk_hash
    and not exists (select from scsql.kb_chunks c where c.project_id = p_project and c.chunk_hash = v_c.chunk_hash and c.purged_at is null);
  delete from scsql.kb_embed_queue q where q.project_id = p_project and q.chunk_hash = v_c.chunk_hash
    and not exists (select from scsql.kb_chunks c where c.project_id = p_project and c.chunk_hash = v_c.chunk_hash and c.purged_at is null);
  -- The contexts taken from it (the next turn is indexed with the end of this one).
  perform scsql._forget_in_context(p_project, array[p_source], array[v_c.chunk_hash], array[v_c.content], array[v_c.anchor]);
  -- Words no chunk holds any more leave the vocabulary; summaries stop quoting it.
  delete from scsql.kb_terms t where t.project_id = p_project and t.term_id = any (v_c.term_ids) and t.df = 0;
  perform scsql._purge_summaries(p_project, array_remove(array[v_c.content, v_c.anchor], null));
end
$$;
comment on function scsql._purge_chunk_text(bigint, bigint, bigint) is
  'Private. Removes the text of chunk P_CHUNK of source P_SOURCE: its content (left empty), anchor and context, its postings, document frequencies and BM25 lengths, the terms no chunk holds any more, its embedding and queued embedding work (unless a chunk not purged holds the same text), the lines of the contexts other chunks took from it (scsql._forget_in_context: stored again without them) and the items of session summaries that quote it (scsql._purge_summaries). The chunk stays, with its chunk_hash and purged_at.';

create or replace function scsql._clip_marks()
returns text
language sql immutable parallel safe
as $$ select ' ?\[\.\.\. [0-9]+ characters cut\]|\s?…(\[cut\])?|\.\.\.' $$;
comment on function scsql._clip_marks() is
  'Private. A regular expression matching the marks a clipped copy ends in: " [... N characters cut]" (scsql.clip and the hooks'' clip), " …[cut]" (the conversation''s and an import''s bound) "…" (short items: summary items, anchors, conversation lines of tool calls) and "..." (a decision''s title).';

create or replace function scsql._quote_targets(p_texts text[])
returns text[]
language sql immutable parallel safe
as $$
  -- Each text, and its JSON-unescaped form (a tool input is kept as JSON),
  -- cut at clip marks, whitespace squashed: what a copy's piece may stand in.
  select coalesce(pg_catalog.array_agg(distinct n.x), '{}')
  from pg_catalog.unnest(p_texts) t(txt),
       lateral (values (t.txt), (pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(
                  t.txt, '\n', E'\n'), '\t', E'\t'), '\"', '"'), '\\', '\'))) v(u),
       lateral pg_catalog.regexp_split_to_table(v.u, scsql._clip_marks()) s(seg),
       lateral (select pg_catalog.btrim(pg_catalog.regexp_replace(s.seg, '\s+', ' ', 'g')) as x) n
  where pg_catalog.char_length(n.x) >= 16
$$;
comment on function scsql._quote_targets(text[]) is
  'Private, for scsql._quotes. The texts P_TEXTS as a copy''s pieces are looked up in: each text and its JSON-unescaped form, cut at clip marks (scsql._clip_marks), runs of whitespace made one space; those of at least 16 characters.';

create or replace function scsql._quote_pieces(p_item text)
returns setof text
language sql immutable parallel safe
as $$
  -- How copies are made: a text cut at line ends (chunks, conversation
  -- lines), clipped (a mark at the cut), quoted in backticks, in a list
  -- item or after a label ("User: ", "- request: ", "Bash failed: ", an
  -- anchor's "Turn 1, <when>: ").
  select distinct q.x from (
    select pg_catalog.btrim(pg_catalog.regexp_replace(w.piece, '\s+', ' ', 'g')) as x
    from pg_catalog.regexp_split_to_table(p_item, E'\n|`|' || scsql._clip_marks()) f(frag),
         lateral (select pg_catalog.string_to_array(pg_catalog.regexp_replace(f.frag, '^\s*([-*+>]|#{1,6}|[0-9]{1,3}[.)])\s+', ''),
                                                    ': ') as parts) p,
         lateral (select pg_catalog.array_to_string(p.parts[i:], ': ') as piece
                  from pg_catalog.generate_series(1, least(pg_catalog.cardinality(p.parts), 6)) i) w
    union all
    select pg_catalog.btrim(pg_catalog.regexp_replace(s.seg, '\s+', ' ', 'g'))
    from pg_catalog.regexp_split_to_table(p_item, scsql._clip_marks()) s(seg)) q
  where pg_catalog.char_length(q.x) >= 16
$$;
comment on function scsql._quote_pieces(text) is
  'Private, for scsql._quotes. The pieces of copy P_ITEM that may each be a piece of a purged text: the item cut at line ends, backticks and clip marks (scsql._clip_marks), each piece without a leading list or heading mark and also without up to five labels before it (what precedes a ": "), and the item cut at clip marks only; runs of whitespace made one space; those of at least 16 characters.';

create or replace function scsql._holds_piece(p_item text, p_targets text[])
returns boolean
language sql immutable parallel safe
as $$
  -- What stands in the other counts from 16 characters on: a short piece
  -- ("ok", "done") says nothing of where it came from.
  select p_item is not null and (
    exists (select from pg_catalog.unnest(p_targets) x, scsql._quote_pieces(p_item) p where pg_catalog.strpos(x, p) > 0)
    or exists (select from pg_catalog.unnest(p_targets) x
               where pg_catalog.strpos(pg_catalog.regexp_replace(p_item, '\s+', ' ', 'g'), x) > 0))
$$;
comment on function scsql._holds_piece(text, text[]) is
  'Private: scsql._quotes over texts already cut (scsql._quote_targets of them, P_TARGETS), for a caller that weighs many copies against the same texts.';

create or replace function scsql._quotes(p_item text, p_texts text[])
returns boolean
language sql immutable parallel safe
as $$ select scsql._holds_piece(p_item, scsql._quote_targets(p_texts)) $$;
comment on function scsql._quotes(text, text[]) is
  'Private. True when copy P_ITEM (a chunk, a summary item, an outcome''s summary, a decision) holds a piece of one of P_TEXTS, or one of them whole: a piece of the item (scsql._quote_pieces: a line, a part between clip marks or backticks, with or without the labels before it) stands in a text cut at its clip marks (scsql._quote_targets), or such a part of a text stands in the item; whitespace compared as one space, and what stands in the other at least 16 characters long. So a text split over chunks, clipped (head kept, a mark at the cut), quoted after a label or in a line of its own is found.';

create or replace function scsql._purge_summaries(p_project bigint, p_texts text[])
returns void
language sql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  -- A session summary's items (kb_sources.meta -> summary) quote prompts and
  -- turns ("request: <the prompt>"): an item that stands in a purged text, or
  -- holds one, is replaced by "[purged]".
  with t as (select scsql._quote_targets(p_texts) as ts)
  update scsql.kb_sources s
     set meta = jsonb_set(s.meta, '{summary}', (
           select jsonb_object_agg(j.key, case when jsonb_typeof(j.value) <> 'array' then j.value else (
                    select coalesce(jsonb_agg(case when scsql._holds_piece(e.x, t.ts) then '[purged]' else e.x end order by e.o), '[]')
                    from jsonb_array_elements_text(j.value) with ordinality e(x, o)) end)
           from jsonb_each(s.meta -> 'summary') j))
    from t
   where s.project_id = p_project and jsonb_typeof(s.meta -> 'summary') = 'object'
     and exists (select from jsonb_each(s.meta -> 'summary') j, jsonb_array_elements_text(j.value) e(x)
                 where jsonb_typeof(j.value) = 'array' and scsql._holds_piece(e.x, t.ts))
$$;
comment on function scsql._purge_summaries(bigint, text[]) is
  'Private. Replaces by "[purged]" each item of the session summaries of project P_PROJECT (kb_sources.meta -> summary) that quotes one of the purged texts P_TEXTS (scsql._quotes).';

create or replace function scsql._purge_learning(p_id bigint, p_reason text)
returns table (purge_id bigint, fields text[], quoted_by text[])
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_who record := scsql._purger();
  v_l scsql.learnings;
  v_texts text[];
begin
  select * into v_l from scsql.learnings l
  where l.learning_id = p_id and (v_who.is_admin or l.project_id = (v_who.agent).project_id) for update;
  if v_l.learning_id is null then
    raise exception using errcode = 'SC361', message = format('no learning has id %s%s', p_id,
      case when v_who.is_admin then '' else ' in your project' end);
  end if;
  if not v_who.is_admin and v_l.author_id <> (v_who.agent).agent_id then
    raise exception using errcode = 'SC362', message = format('learning %s is of another agent''s outcome; only its author or an administrator may purge it', p_id),
      hint = 'Ask the author, or an administrator (scsql_admin).';
  end if;
  if v_l.summary is null then
    raise exception using errcode = 'SC363', message = format('learning %s has no text left to purge', p_id),
      hint = 'scsql.purges records who purged it and why.';
  end if;
  fields := array_remove(array['summary', case when v_l.evidence is not null then 'evidence' end,
                               case when v_l.input_key is not null then 'input_key' end], null);
  v_texts := array_remove(array[v_l.summary, v_l.evidence, v_l.input_key], null);
  purge_id := scsql._purge_record(v_l.project_id, case when v_who.is_admin then v_l.author_id else (v_who.agent).agent_id end,
                                  'learning', p_id,
                                  jsonb_strip_nulls(jsonb_build_object('summary', scsql._text_hash(v_l.summary),
                                    'evidence', scsql._text_hash(v_l.evidence), 'input_key', scsql._text_hash(v_l.input_key))),
                                  scsql._redact(p_reason), v_who.name);
  -- Never indexed now; a worker indexing it holds its queue row until it commits.
  delete from scsql.kb_learning_queue q where q.project_id = v_l.project_id and q.learning_id = p_id;
  update scsql.learnings l
     set summary = null, evidence = null, input_key = null,
         summary_sha256 = coalesce(l.summary_sha256, sha256(convert_to(l.summary, 'UTF8'))),
         evidence_sha256 = coalesce(l.evidence_sha256, sha256(convert_to(l.evidence, 'UTF8'))),
         input_key_sha256 = coalesce(l.input_key_sha256, sha256(convert_to(l.input_key, 'UTF8')))
   where l.project_id = v_l.project_id and l.learning_id = p_id;
  perform scsql._purge_summaries(v_l.project_id, v_texts);
  quoted_by := scsql._purge_quoted(v_l.project_id, 'learning', p_id, v_texts);
  return next;
end
$$;
comment on function scsql._purge_learning(bigint, text) is
  'Private, for scsql.purge. Purges learning P_ID: checks who may (the author of its outcome, or an administrator), records the purge in the chain of the purging agent (an administrator: of the learning''s author), sets its summary, evidence and input key to NULL (their sha256 stay beside them), takes it off the knowledge base''s queue and replaces the items of session summaries that quote it. Returns the purge_id, the fields removed and what still quotes it (scsql._purge_quoted). Raises SC361, SC362, SC363.';

create or replace function scsql._purge_decision(p_id bigint, p_reason text)
returns table (purge_id bigint, fields text[], quoted_by text[])
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_who record := scsql._purger();
  v_d scsql.decisions;
begin
  select * into v_d from scsql.decisions d
  where d.decision_id = p_id and (v_who.is_admin or d.project_id = (v_who.agent).project_id) for update;
  if v_d.decision_id is null then
    raise exception using errcode = 'SC361', message = format('no decision has id %s%s', p_id,
      case when v_who.is_admin then '' else ' in your project' end);
  end if;
  if not v_who.is_admin and v_d.decided_by <> (v_who.agent).agent_id then
    raise exception using errcode = 'SC362', message = format('decision %s is another agent''s; only its author or an administrator may purge it', p_id),
      hint = 'Ask the author, or an administrator (scsql_admin).';
  end if;
  if v_d.purged_at is not null then
    raise exception using errcode = 'SC363', message = format('decision %s was purged at %s', p_id, v_d.purged_at),
      hint = 'scsql.purges records who purged it and why.';
  end if;
  -- "decision": the hash its decide change recorded (scsql._memory_decision_drift compares it).
  purge_id := scsql._purge_record(v_d.project_id, case when v_who.is_admin then v_d.decided_by else (v_who.agent).agent_id end,
                                  'decision', p_id,
                                  jsonb_build_object('title', scsql._text_hash(v_d.title), 'rationale', scsql._text_hash(v_d.rationale),
                                                     'decision', scsql._text_hash(v_d.title || E'\n\n' || v_d.rationale)),
                                  scsql._redact(p_reason), v_who.name);
  update scsql.decisions d set title = '[purged]', rationale = '[purged]', purged_at = now()
   where d.project_id = v_d.project_id and d.decision_id = p_id;
  perform scsql._purge_summaries(v_d.project_id, array[v_d.title, v_d.rationale]);
  fields := array['rationale', 'title'];
  quoted_by := scsql._purge_quoted(v_d.project_id, 'decision', p_id, array[v_d.title, v_d.rationale]);
  return next;
end
$$;
comment on function scsql._purge_decision(bigint, text) is
  'Private, for scsql.purge. Purges decision P_ID: checks who may (the agent that decided it, or an administrator), records the purge (the sha256 of title, rationale and of both as its decide change hashed them) in the chain of the purging agent (an administrator: of the decision''s author), sets title and rationale to "[purged]" with purged_at, and replaces the items of session summaries that quote them. Returns the purge_id, the fields removed and what still quotes it (scsql._purge_quoted). Raises SC361, SC362, SC363.';

create or replace function scsql._purge_copy_chunks(p_kind text, p_id bigint, p_project bigint, p_texts text[])
returns table (chunk_id bigint, authors bigint[])
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  -- The chunks not purged that hold a copy of a purged row's text: a
  -- learning's knowledge-base source; for a prompt or a tool call, the
  -- chunks of its session's conversation (claude/sessions/<Claude session
  -- id>/<n>.md, meta.session) and of session summaries ("request: <the
  -- prompt>") that quote one of its texts (scsql._quotes).
  -- authors: the agents who may purge each besides an administrator.
  select c.chunk_id, array_remove(array[s.created_by, s.updated_by, scsql._learning_author(s.project_id, s.kind, s.meta)], null)
  from scsql.kb_sources s
  join scsql.kb_chunks c on c.project_id = s.project_id and c.source_id = s.source_id and c.purged_at is null
  cross join (select scsql._quote_targets(p_texts) as ts) t
  where s.project_id = p_project
    and case when p_kind = 'learning' then s.kind = 'learning' and s.path = 'learning:' || p_id
             when p_kind in ('prompt', 'tool_call') then
               scsql._holds_piece(c.content || E'\n' || coalesce(c.anchor, ''), t.ts)
               and (s.kind = 'session_summary' or s.path like 'claude/sessions/%' and s.meta ->> 'session' = (
                 select x.external_id from scsql.sessions x
                 where x.project_id = p_project
                   and x.session_id = case when p_kind = 'prompt'
                     then (select r.session_id from scsql.prompts r where r.project_id = p_project and r.prompt_id = p_id)
                     else (select t.session_id from scsql.tool_calls t where t.project_id = p_project and t.tool_call_id = p_id limit 1) end
                 limit 1))
             else false end
  order by c.chunk_id
$$;
comment on function scsql._purge_copy_chunks(text, bigint, bigint, text[]) is
  'Private, for scsql.purge. The knowledge-base chunks not purged yet that copy the texts P_TEXTS purged from row P_ID of kind P_KIND in project P_PROJECT: a learning''s chunks (source learning:<id>); for a prompt or tool call, the chunks of its session''s conversation and of session summaries that quote one of the texts (scsql._quotes). With the agents who may purge each: the source''s creator and last writer, and for a learning''s source the learning''s author.';

create or replace function scsql._purge_texts(p_kind text, p_id bigint)
returns text[]
language plpgsql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_table text := case p_kind when 'prompt' then 'scsql.prompts' when 'tool_call' then 'scsql.tool_calls'
                              when 'outcome' then 'scsql.outcomes' end;
  v_texts text[];
begin
  if p_kind = 'learning' then
    select array_remove(array[l.summary, l.evidence, l.input_key], null) into v_texts
    from scsql.learnings l where l.learning_id = p_id limit 1;
  elsif p_kind = 'decision' then
    select array[d.title, d.rationale] into v_texts from scsql.decisions d where d.decision_id = p_id and d.purged_at is null limit 1;
  elsif v_table is not null then
    execute (select format('select array_remove(array[%s]::text[], null) from %s t where t.%I = $1 limit 1',
                           string_agg(format('t.%I', d.column_name), ', ' order by d.column_name), v_table, min(d.id_column))
             from scsql._chain_digests(v_table) d)
      into v_texts using p_id;
  end if;
  return coalesce(v_texts, '{}');
end
$$;
comment on function scsql._purge_texts(text, bigint) is
  'Private, for scsql.purge, which checks who may purge the row. The purgeable texts row P_ID of kind P_KIND (prompt, tool_call, outcome, learning, decision) holds now (empty when none or no such row).';

create or replace function scsql._purge_copies(p_kind text, p_id bigint, p_project bigint, p_texts text[], p_reason text)
returns table (purge_id bigint, kind text, id bigint, fields text[])
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_who record := scsql._purger();
  v_me bigint := (v_who.agent).agent_id;
  v_c record;
  v_r record;
begin
  -- Outcomes of a tool call that quote its text (written since outcomes keep digests), each with its copies.
  for v_c in select o.outcome_id, array_remove(array[o.summary, o.evidence], null) as texts from scsql.outcomes o
             where p_kind = 'tool_call' and o.project_id = p_project and o.tool_call_id = p_id
               and o.summary is not null and o.summary_sha256 is not null and (v_who.is_admin or o.author_id = v_me)
               and (scsql._quotes(o.summary, p_texts) or scsql._quotes(o.evidence, p_texts))
             order by o.outcome_id loop
    select * into v_r from scsql._purge_chained('scsql.outcomes', 'outcome', v_c.outcome_id, p_reason);
    return query select v_r.purge_id, 'outcome'::text, v_c.outcome_id, v_r.fields;
    return query select * from scsql._purge_copies('outcome', v_c.outcome_id, p_project, v_c.texts, p_reason);
  end loop;
  -- Learnings: those of an outcome (its copies), those of a tool call that quote its text.
  for v_c in select l.learning_id from scsql.learnings l
             where p_kind in ('outcome', 'tool_call') and l.project_id = p_project and l.summary is not null
               and (v_who.is_admin or l.author_id = v_me)
               and case when p_kind = 'outcome' then l.outcome_id = p_id
                        else l.tool_call_id = p_id and (scsql._quotes(l.summary, p_texts) or scsql._quotes(l.evidence, p_texts)
                                                        or scsql._quotes(l.input_key, p_texts)) end
             order by l.learning_id loop
    select * into v_r from scsql._purge_learning(v_c.learning_id, p_reason);
    return query select v_r.purge_id, 'learning'::text, v_c.learning_id, v_r.fields;
    return query select * from scsql._purge_copies('learning', v_c.learning_id, p_project, null, p_reason);
  end loop;
  -- Decisions a session summary took from a prompt or tool call, each with the reason of its decide change.
  for v_c in select d.decision_id from scsql.decisions d
             where p_kind in ('prompt', 'tool_call') and d.project_id = p_project and d.purged_at is null
               and (v_who.is_admin or d.decided_by = v_me) and scsql._quotes(d.title || E'\n' || d.rationale, p_texts)
             order by d.decision_id loop
    select * into v_r from scsql._purge_decision(v_c.decision_id, p_reason);
    return query select v_r.purge_id, 'decision'::text, v_c.decision_id, v_r.fields;
    return query select * from scsql._purge_copies('decision', v_c.decision_id, p_project, null, p_reason);
  end loop;
  for v_c in select m.change_id from scsql.memory_changes m
             where p_kind = 'decision' and m.project_id = p_project and m.kind = 'decision' and m.target = 'decision:' || p_id
               and m.reason is not null and m.reason_sha256 is not null and (v_who.is_admin or m.author_id = v_me)
             order by m.change_id loop
    select * into v_r from scsql._purge_chained('scsql.memory_changes', 'memory_change', v_c.change_id, p_reason);
    return query select v_r.purge_id, 'memory_change'::text, v_c.change_id, v_r.fields;
  end loop;
  -- Chunks: a learning's, and the conversation of a prompt's or tool call's session quoting it,
  -- looked up again after each purge (a purge stores again the chunks whose context it took from).
  loop
    select c.chunk_id into v_c from scsql._purge_copy_chunks(p_kind, p_id, p_project, p_texts) c
    where v_who.is_admin or v_me = any (c.authors) order by c.chunk_id limit 1;
    exit when not found;
    select * into v_r from scsql._purge_chunk(v_c.chunk_id, p_reason);
    return query select v_r.purge_id, 'chunk'::text, v_c.chunk_id, v_r.fields;
  end loop;
end
$$;
comment on function scsql._purge_copies(text, bigint, bigint, text[], text) is
  'Private, for scsql.purge, in its transaction. Purges what copies texts P_TEXTS purged from row P_ID of kind P_KIND in project P_PROJECT, where the purging agent may (its own rows; an administrator every one), each with its own purge record and copies in turn: of a tool call, its outcomes (written since they keep digests) and learnings that quote a removed text; of an outcome, its learnings; of a learning, the chunks of its knowledge-base source; of a prompt or tool call, the decisions that quote a removed text (a session summary''s, taken from a prompt) and the chunks of its session''s conversation and of session summaries that quote one (scsql._purge_copy_chunks); of a decision, the reason of its memory changes (written since they keep digests). Returns purge_id, kind, id and fields of each purge.';

create or replace function scsql._purge_quoted(p_project bigint, p_kind text, p_id bigint, p_texts text[])
returns text[]
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  -- What still copies the texts once the purge and its copies are done:
  -- the distilled items citing the row (signed by the distiller), and what
  -- the purging agent may not purge or that cannot be (an outcome written
  -- before outcomes kept digests).
  select coalesce(array_agg(q.ref order by q.ref), '{}') from (
    select 'distill_item:' || c.item_id as ref from scsql.distill_citations c
    where c.project_id = p_project and c.cited = p_kind and c.cited_id = p_id
    union
    select 'outcome:' || o.outcome_id from scsql.outcomes o
    where p_kind = 'tool_call' and o.project_id = p_project and o.tool_call_id = p_id
      and (scsql._quotes(o.evidence, p_texts) or scsql._quotes(o.summary, p_texts))
    union
    select 'learning:' || l.learning_id from scsql.learnings l
    where p_kind in ('tool_call', 'outcome') and l.project_id = p_project and l.summary is not null
      and case when p_kind = 'outcome' then l.outcome_id = p_id
               else l.tool_call_id = p_id and (scsql._quotes(l.evidence, p_texts) or scsql._quotes(l.summary, p_texts)
                                               or scsql._quotes(l.input_key, p_texts)) end
    union
    select 'decision:' || d.decision_id from scsql.decisions d
    where p_kind in ('prompt', 'tool_call') and d.project_id = p_project and d.purged_at is null
      and scsql._quotes(d.title || E'\n' || d.rationale, p_texts)
    union
    select 'memory_change:' || m.change_id from scsql.memory_changes m
    where p_kind = 'decision' and m.project_id = p_project and m.kind = 'decision' and m.target = 'decision:' || p_id
      and m.reason is not null
    union
    select 'chunk:' || c.chunk_id from scsql._purge_copy_chunks(p_kind, p_id, p_project, p_texts) c) q
$$;
comment on function scsql._purge_quoted(bigint, text, bigint, text[]) is
  'Private, for scsql.purge. What still quotes or cites a purged row after its purge and the purges of its copies (scsql._purge_copies): distilled items citing it (distill_item:<id>); for a tool call, outcomes and learnings of it that quote a removed text (outcome:<id>, learning:<id>); for an outcome, its learnings; for a prompt or tool call, the decisions (decision:<id>) and the chunks of its session''s conversation and of session summaries that quote one, and for a learning the chunks of its source (chunk:<id>); for a decision, the memory changes whose reason still names it (memory_change:<id>): those of other agents, and outcomes and memory changes written before they kept digests.';

create or replace function scsql.purge(p_kind text, p_id bigint, p_reason text)
returns table (purge_id bigint, kind text, id bigint, fields text[], quoted_by text[])
language plpgsql security definer set search_path = pg_catalog, scsql, pg_temp
as $$
declare
  v_r record;
  v_texts text[];
  v_project bigint;
  v_copies jsonb;
begin
  if p_kind is null or p_kind not in ('prompt', 'tool_call', 'chunk', 'outcome', 'learning', 'decision') then
    raise exception using errcode = 'SC360', message = format('cannot purge a %s', coalesce(p_kind, 'NULL')),
      hint = 'Purge a prompt, a tool_call, a chunk, an outcome, a learning or a decision.';
  end if;
  if p_id is null or p_id < 1 then
    raise exception using errcode = 'SC361', message = format('no %s has id %s', p_kind, coalesce(p_id::text, 'NULL'));
  end if;
  perform scsql._check_text('reason', p_reason, 1000, true, 'SC364');
  if p_kind = 'chunk' then
    select * into v_r from scsql._purge_chunk(p_id, p_reason);
    return query select v_r.purge_id, p_kind, p_id, v_r.fields, v_r.quoted_by;
    return;
  end if;
  -- The texts, read before the row is locked: once its purge succeeds they are what it removed.
  v_texts := scsql._purge_texts(p_kind, p_id);
  if p_kind = 'learning' then
    select * into v_r from scsql._purge_learning(p_id, p_reason);
  elsif p_kind = 'decision' then
    select * into v_r from scsql._purge_decision(p_id, p_reason);
  else
    select * into v_r from scsql._purge_chained(case p_kind when 'prompt' then 'scsql.prompts' when 'tool_call' then 'scsql.tool_calls'
                                                             else 'scsql.outcomes' end, p_kind, p_id, p_reason);
  end if;
  select p.project_id into v_project from scsql.purges p where p.purge_id = v_r.purge_id;
  -- Its copies, in this transaction; then what still quotes it.
  select coalesce(jsonb_agg(to_jsonb(c)), '[]') into v_copies
  from scsql._purge_copies(p_kind, p_id, v_project, v_texts, p_reason) c;
  return query select v_r.purge_id, p_kind, p_id, v_r.fields, scsql._purge_quoted(v_project, p_kind, p_id, v_texts);
  return query select c.purge_id, c.kind, c.id, c.fields, '{}'::text[]
               from jsonb_to_recordset(v_copies) c(purge_id bigint, kind text, id bigint, fields text[]);
end
$$;
comment on function scsql.purge(text, bigint, text) is
  'Removes the text of one of your prompts, tool calls, outcomes, learnings, decisions or knowledge-base chunks, and the copies of it you may purge, keeping the rows and a proof of what they held.

p_kind: prompt, tool_call, chunk, outcome, learning or decision
p_id: the prompt_id, tool_call_id, chunk_id, outcome_id, learning_id or decision_id
p_reason: why (at most 1,000 characters; stored redacted)

Removes the text of the row: a prompt''s text; a tool call''s input_preview, output_preview and input_key; an outcome''s summary and evidence; a learning''s summary, evidence and input_key; a decision''s title and rationale (each left "[purged]"); a chunk''s content and context, with its postings and embedding and what other chunks'' contexts took from it. The row stays. A prompt, tool call or outcome keeps its place in its chain, its hashes and signature (it hashes and signs its texts through their sha256, see scsql._enc), so scsql verify and scsql.verify_chain stay clean, and still find the row altered or its text put back other than it was; a learning keeps the sha256 of its texts, a chunk its chunk_hash. In the same transaction it purges the copies it can identify, each with its own purge record, when they are yours (an administrator: anyone''s): of a tool call, its outcomes and learnings that quote a removed text (such as the outcome the hooks record of a failed call); of an outcome, its learnings; of a learning, the chunks of its knowledge-base source; of a prompt or tool call, the decisions that quote a removed text (those a session summary took from a prompt) and the chunks of its session''s conversation and of session summaries that quote one; of a decision, the reason of the memory change that recorded it. A copy quotes a text when it holds a piece of it or all of it: a part of a text split over chunks, clipped (its head, before a cut mark), quoted after a label or in a list item (scsql._quotes; a piece counts from 16 characters). A chained record in scsql.purges says who purged what, why, and the sha256 of each text removed. The viewer shows "[purged]" in its place; search and recall no longer find it. Allowed to the row''s author (a chunk: the agent that created or last wrote its source; a learning and its chunks: the author of its outcome) and to administrators (scsql_admin), for a row of any project. Returns one row per purge, the row asked for first: purge_id, kind, id, the fields removed and, in the first row, quoted_by: what still cites or quotes the row and was not purged (distill_item:<id>, another agent''s outcome:<id>, learning:<id>, decision:<id> or chunk:<id>, an outcome or memory_change:<id> written before they kept digests), to purge or forget separately. Raises SC360 for another kind, SC361 for an id with no such row (in your project), SC362 for another agent''s row, SC363 for a row purged already, SC364 for a missing or bad reason, SC365 for a row written before scsql hashed texts through digests; nothing is purged then.';
