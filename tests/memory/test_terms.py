"""The BM25 tokenizer (scsql_caller.terms) against its rules written plainly:
every token found, then the compound ones kept whole. The function matches
the compound tokens with one pattern instead; on texts made to sit on the
rules' edges (separators doubled, leading, trailing; case changes; digits;
non-ASCII letters) both give the same terms and frequencies."""

from __future__ import annotations

import random

# The rules as they read: parts (camelCase split, English stemming), every
# token ([[:alnum:]_] runs joined by single [./:-]) tested for being compound,
# and calendar dates.
REFERENCE = r"""
  with parts as (
    select l.lexeme as term, coalesce(array_length(l.positions, 1), 1) as n
    from unnest(to_tsvector('english', regexp_replace(regexp_replace(regexp_replace(
           %(s)s, '([[:lower:][:digit:]])([[:upper:]])', '\1 \2', 'g'),
           '([[:upper:]])([[:upper:]][[:lower:]])', '\1 \2', 'g'), '[^[:alnum:]]+', ' ', 'g'))) l
  ), wholes as (
    select lower(m[1]) as term, 1 as n
    from regexp_matches(%(s)s, '([[:alnum:]_]+(?:[./:-][[:alnum:]_]+)*)', 'g') m
    where m[1] ~ '[_./:-]|[[:lower:][:digit:]][[:upper:]]|[[:upper:]][[:upper:]][[:lower:]]' and char_length(m[1]) <= 128
  ), dates as (
    select m[1] as term, 1 as n
    from regexp_matches(%(s)s, '(?:^|[^[:digit:]])([12][[:digit:]]{3}-[01][[:digit:]]-[0-3][[:digit:]])(?![[:digit:]])', 'g') m
  )
  select coalesce(jsonb_object_agg(term, n), '{}') as t
  from (select term, sum(n)::integer as n from (select * from parts union all select * from wholes
                                                 union all select * from dates) u group by term) g
"""

ALPHABET = list("aAbBzZ019_./:-") + [" ", " ", "\n", "\t", "É", "é", "ß", "Σ", "σ", "日", "x"]


def _texts(n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    out = ["verifyChain parse_url src/a.b/c.py a..b .x. -y- HTTPServer getHTTPResponse2 2026-11-29T10:00Z",
           "_ __ a_ _a a__b a._b a._.b ABCd aBCd a1B 1aB é_É ΣσΣ 日本_x", "x" * 130 + "_y", ""]
    for _ in range(n):
        out.append("".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(1, 60))))
    return out


def test_terms_are_the_rules_written_plainly(scsql_db):
    texts = _texts(3000, seed=29)
    with scsql_db.connect() as conn:
        differ, compound = [], 0
        for s in texts:
            got = conn.execute("select coalesce(jsonb_object_agg(term, tf), '{}') as t from scsql_caller.terms(%(s)s)",
                               {"s": s}).fetchone()["t"]
            want = conn.execute(REFERENCE, {"s": s}).fetchone()["t"]
            compound += any(ch in term for term in want for ch in "_./:-")
            if got != want:
                differ.append((s, got, want))
    assert not differ, differ[:3]
    assert compound > 500  # the texts did reach the compound rule
