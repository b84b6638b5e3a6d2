-- scsql redaction: one function for every write path to apply to the text
-- it stores (prompts, previews, facts, knowledge-base text, summaries,
-- broadcasts, task payloads), in the database, so that a write made with
-- psql is redacted too.
--
-- Re-applied on every migrate (CREATE OR REPLACE). Runs as scsql_owner.
-- The redaction functions are private (owner only), for the security-
-- definer write paths to call; scsql.redaction_kinds() shows administrators
-- and the auditor what is redacted and by which pattern.
--
-- A secret becomes [REDACTED:<kind>]; only the secret part is replaced, so
-- AWS_SECRET_ACCESS_KEY=wJal... becomes AWS_SECRET_ACCESS_KEY=[REDACTED:aws_secret_key]
-- and postgres://app:pw@db/x becomes postgres://app:[REDACTED:url_password]@db/x.
-- No rule matches a marker, so redacting twice changes nothing.
--
-- The patterns are PostgreSQL regular expressions without back references,
-- which the engine runs as automata: no catastrophic backtracking. Time
-- grows linearly with the text: lookahead constraints, which the engine
-- re-runs at every candidate position, only look a bounded distance ahead
-- (a key body of 20 characters, not "any uppercase letter later on"), and
-- the body and header lines of a private key block cannot run past the
-- next ----- marker.

select scsql._define_error(code, name, meaning) from (values
  ('SC040', 'secret_in_signed_text', 'A signed field (a tool call''s preview, an outcome''s summary or evidence, a session''s title, a message''s payload) holds a secret that redaction replaces. The database never changes signed text, so it refuses the row: sign the redacted text (scsql.redact, scsql.redact_jsonb; the scsql client does this itself). Nothing was stored.'),
  ('SC041', 'redaction_input_too_large', 'The text or JSON given to scsql.redact or scsql.redact_jsonb is larger than 2 MiB (2,097,152 bytes), more than any write path stores.')
) as t(code, name, meaning);

-- ---------------------------------------------------------------------------
-- The rules, in the order they are applied
-- ---------------------------------------------------------------------------

create or replace function scsql._redaction_token_rules()
returns text[]
language sql immutable parallel safe
as $rules$
  -- One row per rule: kind, mode, pattern, replacement, flags, prefilter, description.
  -- mode replace: regexp_replace(text, pattern, replacement, flags), run only
  --   when the text matches the prefilter (LIKE patterns, | between them, a cheap test).
  -- Specific token shapes come first, so a JWT sent as a bearer token is a
  -- jwt and a GitHub token in a URL is a github_token.
  select array[
    ['private_key', 'replace',
     '-----BEGIN[A-Z0-9 ]*?PRIVATE KEY(?: BLOCK)?-----(?=(?:[[:space:]]|\\[nr])+(?:[A-Za-z-]+:(?:[^\n\\-]|-[^\n\\-])*(?:[[:space:]]|\\[nr])+)*[A-Za-z0-9+/=]{16})(?:[^-]|-[^-]|--[^-]|---[^-]|----[^-])*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----',
     '[REDACTED:private_key]', 'g', '%PRIVATE KEY%',
     'A PEM private key block (PKCS#8, RSA, EC, DSA, OPENSSH, ENCRYPTED, PGP PRIVATE KEY BLOCK) holding key data, from its BEGIN line to its END line; the whole block is replaced. Naming the marker without key data is not a key.'],
    ['private_key', 'replace',
     '-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:[[:space:]]|\\[nr])+(?:[A-Za-z-]+:(?:[^\n\\-]|-[^\n\\-])*(?:[[:space:]]|\\[nr])+)*[A-Za-z0-9+/=]{16,}(?:(?:[[:space:]]|\\[nr])*[A-Za-z0-9+/=]{16,})*',
     '[REDACTED:private_key]', 'g', '%PRIVATE KEY%',
     'A PEM private key block cut off before its END line: the BEGIN line and the key data after it.'],
    ['anthropic_key', 'replace',
     '\msk-ant-[A-Za-z0-9_-]{20,}',
     '[REDACTED:anthropic_key]', 'g', '%sk-ant-%',
     'An Anthropic API key: sk-ant- followed by at least 20 key characters (sk-ant-api03-..., sk-ant-admin01-...).'],
    ['openai_key', 'replace',
     '\msk-(?:proj-|svcacct-|admin-)?(?=[A-Za-z0-9_-]{20})[A-Za-z0-9_-]*(?:[A-Z][A-Za-z0-9_-]*[0-9]|[0-9][A-Za-z0-9_-]*[A-Z])[A-Za-z0-9_-]*',
     '[REDACTED:openai_key]', 'g', '%sk-%',
     'An OpenAI API key: sk-, sk-proj-, sk-svcacct- or sk-admin- followed by at least 20 characters with an upper-case letter and a digit (so sk-learn-style words are not keys).'],
    ['github_token', 'replace',
     '\m(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})',
     '[REDACTED:github_token]', 'g', '%ghp_%|%gho_%|%ghu_%|%ghs_%|%ghr_%|%github_pat_%',
     'A GitHub token: ghp_, gho_, ghu_, ghs_ or ghr_ followed by at least 30 letters and digits, or a fine-grained github_pat_ token.'],
    ['slack_token', 'replace',
     '\m(?:xox[abposre]-[0-9]+-[A-Za-z0-9-]{8,}|xapp-[0-9]-[A-Za-z0-9-]{10,})',
     '[REDACTED:slack_token]', 'g', '%xox%|%xapp-%',
     'A Slack token: xoxb-, xoxp-, xoxa-, xoxo-, xoxs-, xoxr- or xoxe- followed by a number and at least 8 more token characters, or an app-level xapp- token (so the word xoxo-and-so-on is not a token).'],
    ['slack_webhook', 'replace',
     '(hooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9_/+-]{8,}',
     '\1[REDACTED:slack_webhook]', 'g', '%hooks.slack.com/%',
     'A Slack incoming-webhook URL: the path after hooks.slack.com/services/ (or workflows/, triggers/) is replaced; the host stays.'],
    ['aws_access_key', 'replace',
     '\m(?:AKIA|ASIA)[A-Z0-9]{16}\M',
     '[REDACTED:aws_access_key]', 'g', '%AKIA%|%ASIA%',
     'An AWS access key id: AKIA (long-term) or ASIA (temporary) followed by 16 upper-case letters and digits.'],
    ['jwt', 'replace',
     '\meyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*',
     '[REDACTED:jwt]', 'g', '%eyJ%.%.%',
     'A JSON Web Token: three base64url segments separated by dots, the header starting eyJ (base64 of {"). A base64 blob without the dots is not a JWT.'],
    ['bearer', 'replace',
     '(\mbearer[ \t]+)(?=[A-Za-z0-9._~+/-]{16})[A-Za-z._~+/-]*[0-9][A-Za-z0-9._~+/-]*=*',
     '\1[REDACTED:bearer]', 'gi', '%bearer%',
     'A bearer token (Authorization: Bearer ...): at least 16 token characters with a digit after the word Bearer, which stays. Tokens of a known shape (JWT, GitHub, ...) keep their own kind.'],
    ['basic_auth', 'replace',
     '((?:[Aa]uthorization|AUTHORIZATION)["'']?[ \t]*[:=][ \t]*["'']?(?:[Bb]asic|BASIC)[ \t]+)(?=[A-Za-z0-9+/]{8})[A-Za-z0-9+/]*(?:[0-9+/]|[A-Z][A-Za-z0-9+/]*[A-Z])[A-Za-z0-9+/]*={0,2}',
     '\1[REDACTED:basic_auth]', 'g', '%asic%|%ASIC%',
     'HTTP basic credentials (Authorization: Basic <base64 of user:password>, the header name and Basic in lower, capitalized or upper case): at least 8 base64 characters with a digit, + or / or two upper-case letters, matched case-sensitively (so in authorization: basic settings and Basic authentication the words stay); the header name and Basic stay.']
  ]
$rules$;
comment on function scsql._redaction_token_rules() is
  'Private. The redaction rules for secrets of a known shape (private keys, API keys and tokens, JWTs, bearer and basic credentials), applied first, in the rows of scsql._redaction_rules.';

create or replace function scsql._redaction_assignment_rules()
returns text[]
language sql immutable parallel safe
as $rules$
  -- Rows as in scsql._redaction_token_rules. mode assigned: the pattern finds
  --   (secret word)(separator)(value)(call paren); the name is the identifier
  --   that ends with the secret word; scsql._assigned_secret_kind decides from
  --   the name and the value whether, and as which kind, the value is replaced.
  select array[
    ['url_password', 'replace',
     '(://[^[:space:]:/@"''<>]*:)(?![$*{]|%s|%\(|\[REDACTED:|(?:[Pp]ass(?:word)?|PASS(?:WORD)?|[Pp]asswd|PASSWD|[Ss]ecret|SECRET|changeme)@)[^[:space:]/"''<>@]+(?:@[^[:space:]/"''<>@]+)*(@)',
     '\1[REDACTED:url_password]\2', 'g', '%://%:%@%',
     'The password of a URL with credentials (scheme://user:password@host, also with an empty user as in redis://:password@host); scheme, user and host stay. Placeholders ($VAR, ${VAR}, %s, {x}, ***, the words password or secret) are not passwords.'],
    ['password', 'replace',
     '((?:^|[[:space:]])-p'')(?![$*{<%]|\[REDACTED:|[0-9:./-]*'')[^''\n]{4,}('')',
     '\1[REDACTED:password]\2', 'g', '%-p''%',
     'A password given to a -p option in single quotes with no space between, as mysql, mysqldump and mariadb take it (-p''S3cr3t!''), at least 4 characters; the quotes stay. Placeholders ($VAR, ${VAR}, <x>, ***, %s) and port numbers or mappings (-p''8080:80'') are not passwords.'],
    ['password', 'replace',
     '((?:^|[[:space:]])-p")(?![$*{<%]|\[REDACTED:|[0-9:./-]*")[^"\n]{4,}(")',
     '\1[REDACTED:password]\2', 'g', '%-p"%',
     'A password given to a -p option in double quotes with no space between (-p"S3cr3t!"), judged as in single quotes.'],
    ['password, aws_secret_key, assigned_secret', 'assigned',
     '(key|secret|token|passw(?:or)?d|pwd|pass|passphrase|credentials?)(["'']?[ \t]*(?::=|=>|=|:)[ \t]*)("[^"\n]+"|''[^''\n]+''|[^[:space:]"''`,;&(){}<>\[\]\\]*[^[:space:]"''`,;&(){}<>\[\]\\:.!?])(\(?)',
     '', 'gi', '%key%|%secret%|%token%|%pwd%|%pass%|%credential%',
     'A value assigned to a secret-looking name (.env and shell: NAME=value, export NAME=value; JSON, YAML, code: "name": "value", name: value, name = "value", name := "value"; libpq and ODBC connection strings: password=... / Pwd=...; query strings: access_token=...). Only the value is replaced, by the kind of its name: password for names ending in password, passwd, passphrase, pwd or _pass (a quoted or .env value of 4 or more characters; elsewhere a value with letters and a digit or symbol, or of 6 or more digits, so self.password, str and prose are not passwords); aws_secret_key for aws_secret_access_key and the like; assigned_secret for names ending in _key, _secret, _token or _credentials (or apiKey, clientSecret, ...) when the value looks random: at least 12 characters, letters and digits, no spaces, not a URL or path, and a Shannon entropy of at least 0.7 times the most its alphabet and length allow. Names of non-secret keys (public_key, primary_key, idempotency_key, cache_key, page_token, max_tokens, bare key, ...) and placeholders (${VAR}, <token>, ***, changeme, None, ...) are left alone.'],
    ['password, aws_secret_key, assigned_secret', 'assigned',
     '(--[A-Za-z0-9-]*(?:key|secret|token|password|passwd|pwd|passphrase))([ \t]+)("[^"\n]+"|''[^''\n]+''|[^[:space:]"''`,;&(){}<>\[\]\\]*[^[:space:]"''`,;&(){}<>\[\]\\:.!?])(\(?)',
     '', 'gi', '%--%key%|%--%secret%|%--%token%|%--%pwd%|%--%pass%',
     'A value given to a command-line option with a secret-looking name (--api-key VALUE, --password VALUE), judged as above.'],
    ['password', 'assigned',
     '((?:^|\n)[ \t]*password|\mlogin[ \t]+[^[:space:]]+[ \t]+password)([ \t]+)("[^"\n]+"|''[^''\n]+''|[^[:space:]"''`,;&(){}<>\[\]\\]*[^[:space:]"''`,;&(){}<>\[\]\\:.!?])(\(?)',
     '', 'g', '%password%',
     'A .netrc password (machine HOST login USER password VALUE, on one line or one per line), judged as above.']
  ]
$rules$;
comment on function scsql._redaction_assignment_rules() is
  'Private. The redaction rules for secrets given to a name or an option (URL passwords, -p passwords, values assigned to secret-looking names), applied after the token rules, in the rows of scsql._redaction_rules.';

create or replace function scsql._redaction_rules()
returns text[]
language sql immutable parallel safe
as $$ select scsql._redaction_token_rules() || scsql._redaction_assignment_rules() $$;
comment on function scsql._redaction_rules() is
  'Private. The redaction rules in the order scsql._redact applies them, as a two-dimensional text array, one row per rule: kind, mode (replace or assigned), pattern (a PostgreSQL regular expression), replacement, flags, prefilter (LIKE patterns separated by |, of which the text must match one for the rule to run; ILIKE when the flags hold i) and a description. scsql.redaction_kinds() lists them.';

-- ---------------------------------------------------------------------------
-- Helpers
-- ---------------------------------------------------------------------------

create or replace function scsql._zero_width_free(p_text text)
returns boolean
language sql immutable parallel safe
as $$
  -- ASCII text (most of it) is decided by its length; translate, which
  -- looks each character up, is the slow way (about 35 ms a megabyte).
  select pg_catalog.octet_length(p_text) = pg_catalog.char_length(p_text)
         or p_text !~ U&'[\200B\200C\200D\2060\FEFF]'
$$;
comment on function scsql._zero_width_free(text) is
  'Private. True when the text holds no zero-width character (U+200B, U+200C, U+200D, U+2060, U+FEFF), NULL for NULL.';

create or replace function scsql._without_zero_width(p_text text)
returns text
language sql immutable parallel safe
as $$
  select case when scsql._zero_width_free(p_text) then p_text
              else pg_catalog.translate(p_text, U&'\200B\200C\200D\2060\FEFF', '') end
$$;
comment on function scsql._without_zero_width(text) is
  'Private. The text without its zero-width characters (U+200B, U+200C, U+200D, U+2060, U+FEFF), NULL for NULL.';

create or replace function scsql._entropy(p_text text)
returns double precision
language sql immutable strict parallel safe
as $$
  select coalesce(-sum(p * ln(p)) / ln(2), 0)
  from (select count(*)::double precision / length(p_text) as p
        from pg_catalog.string_to_table(p_text, null) c
        group by c) s
$$;
comment on function scsql._entropy(text) is
  'Private. Shannon entropy of a text in bits per character: -sum(p * log2 p) over the frequencies p of its characters; 0 for the empty text, NULL for NULL.';

create or replace function scsql._looks_random(p_value text)
returns boolean
language plpgsql immutable strict parallel safe
as $$
declare
  v_n integer := length(p_value);
  v_lower text := lower(p_value);
  v_alphabet integer;
begin
  -- At least 12 characters, with letters and digits and no spaces. (Tests
  -- by translate rather than regular expressions: a session caches only 32
  -- compiled expressions, and _redact needs most of them for its rules.)
  if v_n < 12 or p_value ~ '[[:space:]]' or translate(p_value, '0123456789', '') = p_value or v_lower = upper(p_value) then
    return false;
  end if;
  -- The most entropy a text can have is log2 of its length or of its
  -- alphabet, whichever is smaller. Random keys come close to it (hex:
  -- about 3.8 of 4 bits); words, identifiers and repeated patterns do not.
  v_alphabet := case
    when translate(v_lower, '0123456789abcdef-', '') = '' then 16
    when translate(v_lower, '0123456789abcdefghijklmnopqrstuvwxyz_.-', '') = ''
         and (p_value = v_lower or p_value = upper(p_value)) then 36
    else 64 end;
  return scsql._entropy(p_value) >= 0.7 * ln(least(v_n, v_alphabet)::double precision) / ln(2);
end
$$;
comment on function scsql._looks_random(text) is
  'Private. True when a value looks like a random secret rather than a word, an identifier or a number: at least 12 characters, letters and digits, no whitespace, and a Shannon entropy (scsql._entropy) of at least 0.7 times log2(min(length, alphabet size)), where the alphabet is 16 for hex, 36 for one-case letters and digits, 64 otherwise.';

create or replace function scsql._assigned_secret_kind(p_name text, p_value text, p_quoted boolean, p_env boolean)
returns text
language plpgsql immutable parallel safe
as $$
declare
  v_name text := lower(ltrim(p_name, '-.'));
  v_class text;
  v_value text := p_value;
begin
  if p_name is null or v_value is null then
    return null;
  end if;
  -- Which kind of name. (Few distinct regular expressions: see _looks_random.)
  if v_name ~ '(password|passwd|passphrase)$|(^|[_.-])(pwd|pass)$'
     or (p_name ~ '[a-z0-9](Pwd|Pass|Key|Secret|Token|Credentials?)$' and (right(v_name, 3) = 'pwd' or right(v_name, 4) = 'pass')) then
    v_class := 'password';
  elsif v_name ~ '(^|[_.-])aws[_.-]?secret[_.-]?(access[_.-]?)?key$|^(aws)?secretaccesskey$' then
    v_class := 'aws_secret_key';
  elsif (v_name <> 'key' and v_name ~ '(^|[_.-])(key|secret|token|credentials?)$|(api|secret|private|access|auth|client|signing|encryption|master|session|app|bot|service|refresh|deploy|webhook|bearer)(key|secret|token)$')
     or p_name ~ '[a-z0-9](Pwd|Pass|Key|Secret|Token|Credentials?)$' then
    v_class := 'assigned_secret';
  else
    return null;
  end if;
  -- Names of keys and tokens that are not secrets.
  if v_class = 'assigned_secret'
     and v_name ~ '(public|publishable|idempotency|primary|foreign|partition|cache|lookup|dedup|dedupe|deduplication|composite|surrogate|continuation|pagination)[_.-]?(key|token)$|(^|[_.-])(pub|sort|row|hash|range|unique|natural|page|next|sync|max|min|num|total|input|output|prompt|completion|context|csrf|ssh|gpg|host)[_.-]?(key|token)$' then
    return null;
  end if;
  -- Placeholders, references and markers are not values.
  if v_value = '' or v_value ~ '^(\$|\{|<|!|\?|\*{3,}|[xX]{3,}$|\.\.\.|\[REDACTED:)|%[sdr(]|\{[A-Za-z0-9_.]*\}'
     or lower(v_value) in ('none', 'null', 'nil', 'true', 'false', 'undefined', 'changeme', 'change_me', 'changeit',
                           'secret', 'password', 'passwd', 'required', 'optional', 'todo', 'tbd', 'redacted', 'hidden',
                           'masked', 'str', 'string', 'bytes', 'int', 'env') then
    return null;
  end if;
  if v_class = 'password' then
    if length(v_value) < 4 or v_value ~ '[[:space:]]' then
      return null;
    end if;
    -- Outside quotes and .env or shell lines (NAME=value at a line start),
    -- a password has letters and a digit or a symbol, or is a number of 6
    -- or more digits: identifiers are code (password=self.password,
    -- password: str), and words, times and dates are prose.
    if not p_quoted and not p_env
       and not (translate(v_value, '0123456789', '') = '' and length(v_value) >= 6)
       and (lower(v_value) = upper(v_value)
            or (translate(v_value, '0123456789', '') = v_value
                and translate(v_value, 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789:./_-$', '') = '')) then
      return null;
    end if;
    -- PWD is also the working directory.
    if right(v_name, 3) = 'pwd' and left(v_value, 1) in ('/', '~', '.') then
      return null;
    end if;
    return 'password';
  end if;
  if v_class = 'aws_secret_key' and length(v_value) = 40 and translate(v_value, 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/+', '') = '' then
    return 'aws_secret_key';
  end if;
  -- A URL or a file path is not a key; neither is anything that does not look random.
  if v_value ~ '://|^(~|\.\.?)?/[A-Za-z0-9._-]{2,}(/[A-Za-z0-9._-]{2,})*/?$' or not scsql._looks_random(v_value) then
    return null;
  end if;
  return v_class;
end
$$;
comment on function scsql._assigned_secret_kind(text, text, boolean, boolean) is
  'Private. The redaction kind of VALUE assigned to NAME (password, aws_secret_key or assigned_secret), or NULL when it is not a secret: NAME is not secret-looking or names a non-secret key (public_key, primary_key, page_token, ...), VALUE is a placeholder or template ($VAR, ${VAR}, the ?message of ${VAR:?message}, <x>, %s, {name}, a YAML tag such as !Ref, ***, None, changeme, ...) or a marker, a password value is shorter than 4 characters, has spaces or (unless QUOTED or ENV, an .env/shell NAME=value line) has no letter or neither a digit nor a symbol (self.password, str, a:b, 10:30; a number of 6 or more digits is a password), and any other value does not look random (scsql._looks_random) or is a URL or path. QUOTED: the value was a quoted literal; ENV: the assignment is an .env or shell line (NAME=value at a line start, NAME in capitals).';

create or replace function scsql._redact_assigned(p_text text, p_pattern text, p_flags text)
returns text
language plpgsql immutable strict parallel safe
as $$
declare
  v_parts text[];
  v_out text[];
  v_match text[];
  v_i integer := 0;
  v_value text;
  v_quote text := '';
  v_kind text;
  v_before text;
  v_prefix text;
  v_env boolean;
begin
  -- The pieces between matches, and the matches in the same order: the
  -- output is piece 1, match 1 (redacted or not), piece 2, ..., piece n+1.
  v_parts := pg_catalog.regexp_split_to_array(p_text, p_pattern, replace(p_flags, 'g', ''));
  if array_length(v_parts, 1) = 1 then
    return p_text;
  end if;
  -- Pieces are collected in an array and joined once: appending to a
  -- text copies it, which is quadratic over many matches.
  v_out := array[v_parts[1]];
  for v_match in select m from pg_catalog.regexp_matches(p_text, p_pattern, p_flags) m loop
    v_i := v_i + 1;
    v_value := v_match[3];
    v_quote := '';
    if left(v_value, 1) in ('"', '''') and length(v_value) >= 2 and right(v_value, 1) = left(v_value, 1) then
      v_quote := left(v_value, 1);
      v_value := substr(v_value, 2, length(v_value) - 2);
    end if;
    -- The pattern starts at the secret word, so that the scan looks for a
    -- literal; the name is the identifier that ends with it.
    v_before := v_parts[v_i];
    v_prefix := substring(right(v_before, 200) from '[A-Za-z0-9_.-]*$');
    v_before := left(v_before, length(v_before) - length(v_prefix));
    -- An .env or shell line: NAME=value (or export NAME=value) at a line
    -- start, NAME in capitals as environment variables are (a lower-case
    -- name=value line is a keyword argument in code as often as not).
    v_env := v_match[2] = '=' and v_quote = '' and (v_i = 1 or strpos(v_before, E'\n') > 0)
             and v_prefix || v_match[1] = upper(v_prefix || v_match[1])
             and btrim(pg_catalog.split_part(v_before, E'\n', -1), E' \t') in ('', 'export');
    v_kind := case when v_match[4] = '(' then null
                   else scsql._assigned_secret_kind(v_prefix || v_match[1], v_value, v_quote <> '', v_env) end;
    if v_kind is null then
      v_out := v_out || (v_match[1] || v_match[2] || v_match[3] || v_match[4]);
    else
      v_out := v_out || (v_match[1] || v_match[2] || v_quote || '[REDACTED:' || v_kind || ']' || v_quote || v_match[4]);
    end if;
    v_out := v_out || v_parts[v_i + 1];
  end loop;
  return pg_catalog.array_to_string(v_out, '');
end
$$;
comment on function scsql._redact_assigned(text, text, text) is
  'Private. Applies one assigned-secret rule of scsql._redaction_rules: finds (secret word)(separator)(value)(paren) with the pattern, takes the identifier ending in the secret word as the name, and replaces the value, keeping its quotes, by [REDACTED:<kind>] where scsql._assigned_secret_kind names a kind. A value followed by ( is a call, not a literal.';

-- ---------------------------------------------------------------------------
-- The redaction functions
-- ---------------------------------------------------------------------------

create or replace function scsql._redact_as_written(p_text text)
returns text
language plpgsql immutable strict parallel safe
as $$
declare
  v_rules text[] := scsql._redaction_rules();
  v_text text := p_text;
begin
  for i in 1 .. array_length(v_rules, 1) loop
    if (strpos(v_rules[i][5], 'i') > 0 and v_text ilike any (pg_catalog.string_to_array(v_rules[i][6], '|')))
       or (strpos(v_rules[i][5], 'i') = 0 and v_text like any (pg_catalog.string_to_array(v_rules[i][6], '|'))) then
      if v_rules[i][2] = 'replace' then
        v_text := pg_catalog.regexp_replace(v_text, v_rules[i][3], v_rules[i][4], v_rules[i][5]);
      else
        v_text := scsql._redact_assigned(v_text, v_rules[i][3], v_rules[i][5]);
      end if;
    end if;
  end loop;
  return v_text;
end
$$;
comment on function scsql._redact_as_written(text) is
  'Private. The text with each secret the rules of scsql._redaction_rules find in it, as it is written, replaced by [REDACTED:<kind>]; scsql._redact also looks through zero-width characters and percent-encoding. NULL for NULL; raises nothing.';

create or replace function scsql._redact_seen(p_text text)
returns text
language plpgsql immutable strict parallel safe
as $$
declare
  v_seen text;
  v_redacted text;
begin
  -- Zero-width characters (U+200B, U+200C, U+200D, U+2060, U+FEFF) cannot
  -- be seen: a key split by them (gh<U+200B>p_...) reads as the key. Those
  -- between ASCII characters are left out of the text as it is seen (emoji
  -- joined by U+200D and words of other scripts keep theirs); when that
  -- text holds a secret, it is what is stored, redacted.
  if scsql._zero_width_free(p_text) then
    return scsql._redact_as_written(p_text);
  end if;
  v_seen := pg_catalog.regexp_replace(p_text, U&'(^|[\0009\000A\000D\0020-\007E])[\200B\200C\200D\2060\FEFF]+(?=[\0009\000A\000D\0020-\007E]|$)', '\1', 'g');
  if v_seen = p_text then
    return scsql._redact_as_written(p_text);
  end if;
  v_redacted := scsql._redact_as_written(v_seen);
  return case when v_redacted <> v_seen then v_redacted else scsql._redact_as_written(p_text) end;
end
$$;
comment on function scsql._redact_seen(text) is
  'Private. The text redacted as it is seen: when zero-width characters (U+200B, U+200C, U+200D, U+2060, U+FEFF) between ASCII characters hide a secret (a key split by them), the text without them, redacted; else the text redacted as written (scsql._redact_as_written), zero-width characters kept. NULL for NULL; raises nothing.';

create or replace function scsql._percent_decoded(p_text text)
returns text
language sql immutable strict parallel safe
as $$
  -- Each %XX of a printable ASCII character (%20 to %7E) becomes that
  -- character; other bytes (%00, %0A, %C3, ...) stay encoded.
  select pg_catalog.string_agg(x.piece, '' order by x.n)
  from (select 2 * u.n - 1 as n, u.piece
        from pg_catalog.unnest(pg_catalog.regexp_split_to_array(p_text, '%([2-6][0-9A-Fa-f]|7[0-9A-Ea-e])'))
             with ordinality u(piece, n)
        union all
        select 2 * m.n, pg_catalog.chr(('x' || m.code[1])::bit(8)::integer)
        from pg_catalog.regexp_matches(p_text, '%([2-6][0-9A-Fa-f]|7[0-9A-Ea-e])', 'g') with ordinality m(code, n)) x
$$;
comment on function scsql._percent_decoded(text) is
  'Private. The text with each percent-encoded printable ASCII character (%20 to %7E, as %3D for =, %2F for /) decoded; other percent sequences stay as they are. NULL for NULL; raises nothing.';

create or replace function scsql._redact_percent_encoded(p_text text)
returns text
language plpgsql immutable strict parallel safe
as $$
declare
  v_run constant text := '[^[:space:]"''<>`]*%(?:[2-6][0-9A-Fa-f]|7[0-9A-Ea-e])[^[:space:]"''<>`]*';
  v_parts text[];
  v_out text[];
  v_match text[];
  v_i integer := 0;
  v_plain text;
  v_next text;
  v_redacted text;
begin
  -- A run of text (between blanks and quotes) with percent-encoded
  -- characters, such as a URL's query (key%3Dsk-ant-...) or a form body,
  -- is decoded (up to three times: what was encoded twice too); when the
  -- decoded run holds a secret, it takes the run's place, redacted.
  -- First the whole text decoded, once: most texts with percent-encoding
  -- hold no secret in it, and are done.
  v_plain := p_text;
  for k in 1 .. 3 loop
    v_next := scsql._percent_decoded(v_plain);
    exit when v_next = v_plain;
    v_plain := v_next;
  end loop;
  if v_plain = p_text or scsql._redact_seen(v_plain) = v_plain then
    return p_text;
  end if;
  v_parts := pg_catalog.regexp_split_to_array(p_text, v_run);
  if array_length(v_parts, 1) = 1 then
    return p_text;
  end if;
  v_out := array[v_parts[1]];
  for v_match in select m from pg_catalog.regexp_matches(p_text, v_run, 'g') m loop
    v_i := v_i + 1;
    v_plain := v_match[1];
    for k in 1 .. 3 loop
      v_next := scsql._percent_decoded(v_plain);
      exit when v_next = v_plain;
      v_plain := v_next;
    end loop;
    v_redacted := scsql._redact(v_plain);  -- its first test passes over most runs (a=1&b=2)
    v_out := v_out || case when v_redacted <> v_plain then v_redacted else v_match[1] end || v_parts[v_i + 1];
  end loop;
  return pg_catalog.array_to_string(v_out, '');
end
$$;
comment on function scsql._redact_percent_encoded(text) is
  'Private. Each run of text (between blanks and quotes) holding percent-encoded printable characters is decoded (scsql._percent_decoded, up to three times); where the decoded run holds a secret (scsql._redact), the run is replaced by the decoded run, redacted (key%3Dsk-ant-... becomes key=[REDACTED:anthropic_key]); other runs stay as written. NULL for NULL; raises nothing.';

create or replace function scsql._redact_whole(p_text text)
returns text
language plpgsql immutable strict parallel safe
as $$
declare
  v_text text;
  v_next text;
begin
  v_text := scsql._redact_seen(p_text);
  -- Percent-encoded runs that hold a secret are stored decoded, redacted;
  -- the text is then judged again, as decoding may have joined a name to
  -- its value, until nothing changes.
  if strpos(v_text, '%') > 0 then
    for i in 1 .. 3 loop
      v_next := scsql._redact_percent_encoded(v_text);
      exit when v_next = v_text;
      v_text := scsql._redact_seen(v_next);
    end loop;
  end if;
  return v_text;
end
$$;
comment on function scsql._redact_whole(text) is
  'Private. scsql._redact of a text that matches scsql_caller.redaction_prefilter, applied to it as one piece (scsql._redact_lines applies it to the lines that need it). NULL for NULL; raises nothing.';

create or replace function scsql._redact_lines(p_text text)
returns text
language plpgsql immutable strict parallel safe
as $$
declare
  v_line constant text := '([^\n]*' || scsql_caller.redaction_prefilter() || '[^\n]*)';
  v_parts text[];
  v_hits text[];
  v_joined text;
  v_redacted text[];
  v_out text[];
begin
  -- No rule matches across a line end (only a private key block does, and
  -- scsql._redact does not come here for one), nothing hidden is decoded
  -- into a line end, and a line that does not match the prefilter holds
  -- nothing to redact. So a text is redacted as its lines that match the
  -- prefilter, joined, are: one scan finds them, and most of a source file
  -- is never read by a rule. (tests/audit/test_redaction.py compares both
  -- ways on the corpus, glued at line ends, and on whole source files.)
  v_hits := array(select m[1] from pg_catalog.regexp_matches(p_text, v_line, 'gi') m);
  if cardinality(v_hits) = 0 then
    return p_text;
  end if;
  v_joined := pg_catalog.array_to_string(v_hits, E'\n');
  v_redacted := pg_catalog.string_to_array(scsql._redact_whole(v_joined), E'\n');
  if v_redacted = v_hits then
    return p_text;
  end if;
  if cardinality(v_redacted) <> cardinality(v_hits) then  -- not reached: the rules keep line ends
    return scsql._redact_whole(p_text);
  end if;
  v_parts := pg_catalog.regexp_split_to_array(p_text, v_line, 'i');
  v_out := array[v_parts[1]];
  for i in 1 .. cardinality(v_hits) loop
    v_out := v_out || v_redacted[i] || v_parts[i + 1];
  end loop;
  return pg_catalog.array_to_string(v_out, '');
end
$$;
comment on function scsql._redact_lines(text) is
  'Private. scsql._redact of a text of several lines that holds no zero-width character and no PRIVATE KEY marker: the lines that match scsql_caller.redaction_prefilter, joined, redacted as one text (scsql._redact_whole), each put back in its place; the same result, without reading the other lines. NULL for NULL; raises nothing.';

create or replace function scsql._redact(p_text text)
returns text
language plpgsql immutable strict parallel safe
as $$
begin
  -- Most texts hold nothing secret-shaped: one scan decides. (The words,
  -- and percent-encoding and zero-width characters, which can hide them.)
  if p_text !~* scsql_caller.redaction_prefilter() then
    return p_text;
  end if;
  -- A text of several lines is redacted line by line (scsql._redact_lines),
  -- unless it holds what is judged across lines: a private key block, or
  -- zero-width characters (scsql._redact_seen judges the whole text).
  if pg_catalog.strpos(p_text, E'\n') > 0 and pg_catalog.strpos(p_text, 'PRIVATE KEY') = 0
     and scsql._zero_width_free(p_text) then
    return scsql._redact_lines(p_text);
  end if;
  return scsql._redact_whole(p_text);
end
$$;
comment on function scsql._redact(text) is
  'Private; the function write paths apply to the text they store. Returns the text with each secret replaced by [REDACTED:<kind>] (kinds and patterns: scsql.redaction_kinds()): private_key, anthropic_key, openai_key, github_token, slack_token, slack_webhook, aws_access_key, jwt, bearer, basic_auth, url_password, and values assigned to secret-looking names or given to password options: password, aws_secret_key, assigned_secret. Only the secret part is replaced (names, URL schemes, users and hosts stay), with two exceptions made to find what is hidden: a text whose zero-width characters (U+200B, U+200C, U+200D, U+2060, U+FEFF) split a secret is stored without those between ASCII characters (scsql._redact_seen), and a percent-encoded run (a URL query, a form body) that holds a secret once decoded is stored decoded (scsql._redact_percent_encoded). Git shas, UUIDs, hashes and base64 that are not assigned to a secret name are left alone. Idempotent: _redact(_redact(x)) = _redact(x). NULL for NULL; raises nothing.';

create or replace function scsql._redact_jsonb_walk(p_value jsonb)
returns jsonb
language plpgsql immutable strict parallel safe
as $$
begin
  case pg_catalog.jsonb_typeof(p_value)
    when 'string' then
      return pg_catalog.to_jsonb(scsql._redact(p_value #>> '{}'));
    when 'array' then
      return (select coalesce(pg_catalog.jsonb_agg(scsql._redact_jsonb_walk(e) order by n), '[]'::jsonb)
              from pg_catalog.jsonb_array_elements(p_value) with ordinality a(e, n));
    when 'object' then
      return (
        select coalesce(pg_catalog.jsonb_object_agg(scsql._redact(m.k),
                 case when pg_catalog.jsonb_typeof(m.v) <> 'string' then scsql._redact_jsonb_walk(m.v)
                      -- A header value: judged as the header line it comes from.
                      when lower(m.k) in ('authorization', 'proxy-authorization')
                      then pg_catalog.to_jsonb(substr(scsql._redact('Authorization: ' || (m.v #>> '{}')), 16))
                      -- Else the string on its own, then as the value of its key.
                      else pg_catalog.to_jsonb(coalesce('[REDACTED:' || scsql._assigned_secret_kind(m.k, r.s, true, false) || ']', r.s))
                 end), '{}'::jsonb)
        from pg_catalog.jsonb_each(p_value) m(k, v)
        cross join lateral (select scsql._redact(m.v #>> '{}') as s) r);
    else
      return p_value;
  end case;
end
$$;
comment on function scsql._redact_jsonb_walk(jsonb) is
  'Private; scsql._redact_jsonb without its depth check, calling itself for each level. NULL for NULL; raises nothing.';

create or replace function scsql._redact_jsonb(p_value jsonb)
returns jsonb
language plpgsql immutable strict parallel safe
as $$
begin
  -- Each level is a call of _redact_jsonb_walk: deeper than the write paths
  -- allow (scsql._jsonb_depth), a value would exhaust the stack (54001).
  if scsql._jsonb_depth(p_value) > 64 then
    raise exception using errcode = 'SC010', message = 'a JSON value nests deeper than 64 levels',
      hint = 'No write path stores deeper JSON.';
  end if;
  return scsql._redact_jsonb_walk(p_value);
end
$$;
comment on function scsql._redact_jsonb(jsonb) is
  'Private; the function write paths apply to the JSON they store (task payloads, broadcast bodies, summaries). Returns the value with every string redacted by scsql._redact, recursively through arrays and objects. Object keys are redacted too (two keys that redact to the same text collapse into one, the last kept). A string member of an object is also judged with its key as the name it is assigned to, so {"api_key": "<random>"} and {"password": "hunter2"} are redacted like api_key=... in text, and the value of an Authorization key like an Authorization header. Numbers, booleans and null stay. NULL for NULL; raises SC010 for a value nested more than 64 levels deep (each level is a call: deeper, the stack would run out).';

-- ---------------------------------------------------------------------------
-- Public: what is redacted
-- ---------------------------------------------------------------------------

create or replace function scsql.redaction_kinds()
returns table (kind text, applied integer, pattern text, description text)
language sql stable security definer set search_path = pg_catalog, scsql, pg_temp
as $$
  select r[i][1], i, r[i][3], r[i][7]
  from (select scsql._redaction_rules() as r) s, generate_series(1, array_length(s.r, 1)) i
  order by i
$$;
comment on function scsql.redaction_kinds() is
  'What scsql redacts before it stores text: one row per rule, in the order applied, with the kind written in the marker [REDACTED:<kind>], the PostgreSQL regular expression that finds it, and a description of what it matches and what stays. These are the rules of the redaction function that write paths apply in the database to the text and JSON they store (facts, knowledge-base text, summaries, prompts, previews, broadcasts, task payloads), so writes made with psql are redacted too. Raises nothing.';

-- ---------------------------------------------------------------------------
-- Public: redacting, for clients that sign what they store
-- ---------------------------------------------------------------------------

create or replace function scsql._redact_size(p_what text, p_bytes integer)
returns void
language plpgsql immutable parallel safe
as $$
begin
  if p_bytes > 2097152 then
    raise exception using errcode = 'SC041',
      message = format('the %s to redact is %s bytes; at most 2 MiB (2,097,152 bytes)', p_what, p_bytes),
      hint = 'No write path stores more; redact the part that is stored.';
  end if;
end
$$;
comment on function scsql._redact_size(text, integer) is
  'Private, the size limit of scsql.redact and scsql.redact_jsonb: raises SC041 when the WHAT (text or JSON) to redact is BYTES bytes, over 2 MiB. NULL passes.';

create or replace function scsql.redact(p_text text)
returns text
language plpgsql immutable parallel safe security definer set search_path = pg_catalog, scsql, pg_temp
as $$
begin
  perform scsql._redact_size('text', pg_catalog.octet_length(p_text));
  return scsql._redact(p_text);
end
$$;
comment on function scsql.redact(text) is
  'The text as scsql stores it: each secret replaced by [REDACTED:<kind>] (scsql.redaction_kinds lists the kinds and patterns), by the same function every write path applies in the database. Clients that sign text (tool-call previews, outcome summaries and evidence, session titles, prompts) pass it through this function first, because the database refuses signed text that still holds a secret (SC040) rather than change it after signing. Idempotent; NULL for NULL. Raises SC041 for a text over 2 MiB.';

create or replace function scsql.redact_jsonb(p_value jsonb)
returns jsonb
language plpgsql immutable parallel safe security definer set search_path = pg_catalog, scsql, pg_temp
as $$
begin
  perform scsql._redact_size('JSON', pg_catalog.octet_length(p_value::text));
  return scsql._redact_jsonb(p_value);  -- which refuses JSON nested deeper than 64 levels
end
$$;
comment on function scsql.redact_jsonb(jsonb) is
  'The JSON value as scsql stores it: every string (object keys included) redacted like scsql.redact, and a string member also judged with its key as the name it is assigned to ({"api_key": "..."}, {"password": "..."}); numbers, booleans and null stay. Clients that sign JSON (broadcast payloads) pass it through this function first: the database refuses signed JSON that still holds a secret (SC040). Idempotent; NULL for NULL. Raises SC041 for a value over 2 MiB, SC010 for one nested deeper than 64 levels.';

-- ---------------------------------------------------------------------------
-- Private: signed text must arrive redacted
-- ---------------------------------------------------------------------------

create or replace function scsql._redacted_kinds(p_before text, p_after text)
returns text
language sql immutable parallel safe
as $$
  -- The kinds of the markers redaction added: those in AFTER beyond their count in BEFORE.
  select coalesce(pg_catalog.string_agg(a.kind, ', ' order by a.kind), 'secret')
  from (select m[1] as kind, count(*) as n from pg_catalog.regexp_matches(p_after, '\[REDACTED:([a-z_]+)\]', 'g') m group by 1) a
  left join (select m[1] as kind, count(*) as n from pg_catalog.regexp_matches(p_before, '\[REDACTED:([a-z_]+)\]', 'g') m group by 1) b
    using (kind)
  where a.n > coalesce(b.n, 0)
$$;
comment on function scsql._redacted_kinds(text, text) is
  'Private. The kinds of the [REDACTED:<kind>] markers that redaction added to BEFORE to make AFTER, comma-separated (secret when none can be told), for error messages that name the kind and never the secret.';

create or replace function scsql._refuse_signed_secret(p_field text, p_what text, p_before text, p_after text)
returns void
language plpgsql immutable parallel safe
as $$
begin
  if p_after is distinct from p_before then
    raise exception using errcode = 'SC040',
      message = format('%s holds a secret (%s); signed %s is stored as signed, so it must be redacted before it is signed; nothing was stored',
                       p_field, scsql._redacted_kinds(p_before, p_after), p_what),
      hint = format('Sign scsql.%s instead (the scsql client does this for you).',
                    case p_what when 'JSON' then 'redact_jsonb(value)' else 'redact(text)' end);
  end if;
end
$$;
comment on function scsql._refuse_signed_secret(text, text, text, text) is
  'Private. Raises SC040 when redaction changed BEFORE into AFTER: FIELD (signed WHAT: text or JSON) holds a secret, named by kind (scsql._redacted_kinds), never shown. The one refusal of scsql._require_redacted and scsql._require_redacted_jsonb.';

create or replace function scsql._require_redacted(p_field text, p_value text)
returns void
language sql immutable parallel safe
as $$ select scsql._refuse_signed_secret(p_field, 'text', p_value, scsql._redact(p_value)) $$;
comment on function scsql._require_redacted(text, text) is
  'Private, for the signed write functions: raises SC040 when redaction (scsql._redact) would change VALUE, naming FIELD and the kinds of secret found, never the secret. The database never changes signed text, so it refuses it. NULL passes.';

create or replace function scsql._require_redacted_jsonb(p_field text, p_value jsonb)
returns void
language sql immutable parallel safe
as $$ select scsql._refuse_signed_secret(p_field, 'JSON', p_value::text, scsql._redact_jsonb(p_value)::text) $$;
comment on function scsql._require_redacted_jsonb(text, jsonb) is
  'Private, for the signed write functions: raises SC040 when redaction (scsql._redact_jsonb) would change VALUE, naming FIELD and the kinds of secret found, never the secret. NULL passes.';
