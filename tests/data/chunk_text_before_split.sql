-- scsql._chunk_text as it was written in one piece, before scsql._chunk_pieces and the
-- section functions, under a name of its own: tests/memory/test_chunk_boundaries.py
-- creates it in a transaction it rolls back and compares its chunks with scsql._chunk_text's.
create function scsql._chunk_text_before_split(p_content text, p_spans jsonb default null, p_max integer default scsql_caller.chunk_chars(),
                                             p_context boolean default false)
returns table (seq integer, anchor text, line_start integer, line_end integer,
               char_start integer, char_end integer, content text, chunk_hash text, context text)
language plpgsql immutable
as $$
-- Sections come from p_spans ([{start, end, anchor}], 1-based inclusive
-- line numbers, increasing and non-overlapping; lines outside every span are
-- not indexed) or, without spans, from Markdown headings outside fenced code
-- blocks (text before the first heading is a section without anchor). A
-- section longer than p_max characters is cut at its last blank line that
-- leaves at least p_max/3 characters, else before the line that overflows; a
-- single line longer than p_max is cut into p_max-character pieces.
--
-- Conversation (a span with "context", or every section with p_context):
-- each chunk also gets a context, the text it needs to be found that is
-- not in it (a reply such as "yes, do that" names nothing it is about):
-- the previous chunk's anchor and end (scsql._chunk_context). A span's
-- "context" is true, or a text (at most 1,000 characters) that is the
-- context of its first chunk instead (what came before it in another
-- source); the span's later chunks get the previous chunk's end. The
-- context is not part of the chunk's text, hash or line and character
-- spans: the writer indexes it with the chunk (terms, embedding input).
declare
  v_lines text[] := pg_catalog.string_to_array(p_content, E'\n');
  v_n integer := coalesce(pg_catalog.array_length(v_lines, 1), 0);
  v_off integer[] := '{}';     -- v_off[i] = 0-based character offset of line i; v_off[n+1] = length + 1
  v_sec_start integer[] := '{}';
  v_sec_end integer[] := '{}';
  v_sec_anchor text[] := '{}';
  v_fence boolean := false;
  v_anchor text;
  v_prev_end integer := 0;
  v_span jsonb;
  v_s integer;
  v_e integer;
  v_i integer;
  v_j integer;
  v_cut integer;
  v_blank integer;
  v_seq integer := 0;
  v_text text;
  v_piece integer;
  v_acc integer := 0;
  v_a integer;
  v_z integer;
  v_sec_ctx text[] := '{}';    -- per section: NULL no context, '' the previous chunk's, else that text first
  v_ctx text;
  v_first boolean;
  v_prev_anchor text;
  v_prev_content text;
  v_norm text;                 -- the chunk's normalized text: empty skips it, else its sha256 is the chunk_hash
begin
  for v_i in 1 .. v_n loop
    v_off[v_i] := v_acc;
    v_acc := v_acc + pg_catalog.char_length(v_lines[v_i]) + 1;
  end loop;
  v_off[v_n + 1] := v_acc;

  if p_spans is not null then
    if pg_catalog.jsonb_typeof(p_spans) <> 'array' or pg_catalog.jsonb_array_length(p_spans) > 100000 then
      raise exception using errcode = 'SC206', message = 'spans must be a JSON array of {start, end, anchor}';
    end if;
    for v_span in select value from pg_catalog.jsonb_array_elements(p_spans) loop
      if pg_catalog.jsonb_typeof(v_span) <> 'object'
         or pg_catalog.jsonb_typeof(v_span -> 'start') is distinct from 'number'
         or pg_catalog.jsonb_typeof(v_span -> 'end') is distinct from 'number'
         or (v_span ? 'anchor' and pg_catalog.jsonb_typeof(v_span -> 'anchor') not in ('string', 'null'))
         or (v_span ? 'context' and pg_catalog.jsonb_typeof(v_span -> 'context') not in ('string', 'boolean', 'null'))
         or pg_catalog.char_length(v_span ->> 'context') > 1000 then
        raise exception using errcode = 'SC206',
          message = format('bad span %s: expected {"start": line, "end": line, "anchor": text, "context": true or a text of at most 1,000 characters}',
                           pg_catalog.left(v_span::text, 300));
      end if;
      begin
        v_s := (v_span ->> 'start')::integer;
        v_e := (v_span ->> 'end')::integer;
      exception when others then
        raise exception using errcode = 'SC206', message = format('bad span %s: line numbers must be integers', v_span);
      end;
      if v_s <= v_prev_end or v_e < v_s or v_e > v_n then
        raise exception using errcode = 'SC206',
          message = format('span %s-%s is not after line %s and inside the text''s %s lines', v_s, v_e, v_prev_end, v_n);
      end if;
      v_anchor := pg_catalog.left(v_span ->> 'anchor', 200);
      v_sec_start := v_sec_start || v_s;
      v_sec_end := v_sec_end || v_e;
      v_sec_anchor := v_sec_anchor || v_anchor;
      v_ctx := case when pg_catalog.jsonb_typeof(v_span -> 'context') = 'string' then scsql._normalize(v_span ->> 'context')
                    when (v_span -> 'context') = 'true'::jsonb or p_context then '' end;
      v_sec_ctx := v_sec_ctx || v_ctx;
      v_prev_end := v_e;
    end loop;
  else
    v_s := 1;
    v_anchor := null;
    for v_i in 1 .. v_n loop
      if not v_fence and v_lines[v_i] ~ '^#{1,6}[ \t]+\S' and v_i > 1 then
        v_sec_start := v_sec_start || v_s;
        v_sec_end := v_sec_end || (v_i - 1);
        v_sec_anchor := v_sec_anchor || v_anchor;
        v_sec_ctx := v_sec_ctx || case when p_context then '' end;
        v_s := v_i;
      end if;
      if not v_fence and v_lines[v_i] ~ '^#{1,6}[ \t]+\S' then
        v_anchor := pg_catalog.left(pg_catalog.btrim(pg_catalog.regexp_replace(v_lines[v_i], '^#{1,6}[ \t]+|[ \t]+#+[ \t]*$', '', 'g')), 200);
      end if;
      if v_lines[v_i] ~ '^[ \t]*(```|~~~)' then
        v_fence := not v_fence;
      end if;
    end loop;
    if v_n > 0 then
      v_sec_start := v_sec_start || v_s;
      v_sec_end := v_sec_end || v_n;
      v_sec_anchor := v_sec_anchor || v_anchor;
      v_sec_ctx := v_sec_ctx || case when p_context then '' end;
    end if;
  end if;

  for v_j in 1 .. coalesce(pg_catalog.array_length(v_sec_start, 1), 0) loop
    v_s := v_sec_start[v_j];
    anchor := v_sec_anchor[v_j];
    v_first := true;
    while v_s <= v_sec_end[v_j] loop
      -- Longest run of whole lines from v_s that fits in p_max.
      v_i := v_s;
      v_blank := null;
      while v_i <= v_sec_end[v_j] and v_off[v_i + 1] - 1 - v_off[v_s] <= p_max loop
        if v_i > v_s and pg_catalog.btrim(v_lines[v_i], E' \t\r') = ''
           and v_off[v_i] - v_off[v_s] >= p_max / 3 then
          v_blank := v_i;
        end if;
        v_i := v_i + 1;
      end loop;
      if v_i > v_sec_end[v_j] then
        v_cut := v_sec_end[v_j];                -- the rest fits
      elsif v_i = v_s then
        v_cut := null;                          -- one line longer than p_max
      elsif v_blank is not null then
        v_cut := v_blank - 1;                   -- the blank line itself starts no chunk
      else
        v_cut := v_i - 1;
      end if;

      if v_cut is null then
        v_piece := 0;
        while v_piece * p_max < pg_catalog.char_length(v_lines[v_s]) loop
          content := pg_catalog.substr(v_lines[v_s], v_piece * p_max + 1, p_max);
          v_norm := scsql._normalize(content);
          if v_norm <> '' then
            v_seq := v_seq + 1;
            seq := v_seq;
            line_start := v_s;
            line_end := v_s;
            char_start := v_off[v_s] + v_piece * p_max;
            char_end := char_start + pg_catalog.char_length(content);
            chunk_hash := scsql._normalized_hash(v_norm);
            context := scsql._chunk_context(v_sec_ctx[v_j], v_first, v_prev_anchor, v_prev_content, anchor);
            v_first := false;
            v_prev_anchor := anchor;
            v_prev_content := content;
            return next;
          end if;
          v_piece := v_piece + 1;
        end loop;
        v_s := v_s + 1;
      else
        -- Blank lines at either end are not part of the chunk.
        v_a := v_s;
        v_z := v_cut;
        while v_z > v_a and pg_catalog.btrim(v_lines[v_z], E' \t\r') = '' loop
          v_z := v_z - 1;
        end loop;
        while v_a < v_z and pg_catalog.btrim(v_lines[v_a], E' \t\r') = '' loop
          v_a := v_a + 1;
        end loop;
        v_text := pg_catalog.substr(p_content, v_off[v_a] + 1, v_off[v_z + 1] - 1 - v_off[v_a]);
        v_norm := scsql._normalize(v_text);
        if v_norm <> '' then
          v_seq := v_seq + 1;
          seq := v_seq;
          content := v_text;
          line_start := v_a;
          line_end := v_z;
          char_start := v_off[v_a];
          char_end := v_off[v_z + 1] - 1;
          chunk_hash := scsql._normalized_hash(v_norm);
          context := scsql._chunk_context(v_sec_ctx[v_j], v_first, v_prev_anchor, v_prev_content, anchor);
          v_first := false;
          v_prev_anchor := anchor;
          v_prev_content := v_text;
          return next;
        end if;
        v_s := case when v_i <= v_sec_end[v_j] and v_blank is not null then v_blank + 1 else v_cut + 1 end;
      end if;
    end loop;
  end loop;
end
$$;
