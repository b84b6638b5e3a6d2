"""Every public function's comment speaks in one voice: its first paragraph
says what the function does and returns, for the MCP tool list and for a
reader alike, and the manual after it (``\\df+``, docs/reference.md) adds what
the first paragraph does not say instead of saying it again in other words.

The comments are read from the database's catalogue, as scsql_caller.api()
and the reference generator read them."""

from __future__ import annotations

import re

from scsql.ops.reference import details

SCHEMAS = ["scsql", "scsql_caller"]

COMMENTS = """
select p.oid::regprocedure::text as function,
       coalesce(pg_catalog.obj_description(p.oid, 'pg_proc'), '') as comment,
       (p.prokind = 'f' and p.pronamespace = 'scsql'::regnamespace
        and pg_catalog.has_function_privilege('scsql_agent', p.oid, 'execute')
        and not pg_catalog.has_function_privilege('scsql_worker', p.oid, 'execute')) as tool
  from pg_catalog.pg_proc p
  left join pg_catalog.pg_depend d on d.objid = p.oid and d.deptype = 'e'
 where p.pronamespace::regnamespace::text = any(%s) and p.proname !~ '^_' and d.objid is null
 order by 1
"""

# Words that carry no content here: articles and the like, and the words by
# which the two voices name the caller ("you", "the acting agent") and what
# comes back ("Returns ...").
_FILLER = set("""
a an and any are as at be but by can each for from has have in into is it its
may no not of on one only or than that the their then this to was were what
when which who with acting agent agent's caller caller's you your yours
return returns
""".split())
# A sentence of only these words says who may call the function.
_WHO = set("administrators agents auditor worker orchestrators orchestrator roles role".split())
_WORD = re.compile(r"[a-z][a-z0-9_'<>:]*[a-z0-9_>]")
_SENTENCE_END = re.compile(r"(?<=[\w)\]\"'`][.!?])\s+(?=[A-Z(`])")
_PARENTHESES = re.compile(r"\s*\([^()]*\)")

# The manual's first sentence restates the first paragraph when at least
# half of its content words, and at least MIN_SHARED of them, are the first
# paragraph's. Parenthesized remarks are left out first: they are the details
# a restating sentence adds to what it repeats. A short sentence that only
# names an argument ("PINNED false unpins.") shares a word or two by nature.
SHARED_FRACTION = 0.5
MIN_SHARED = 3

# The first paragraph of a tool's comment is its description in every
# tools/list a model is sent. The longest of today's, remember's, is 352
# characters (what a stored fact may do: supersede, refresh, conflict, move to
# the archive, all of which change how a model uses it); the median is about
# 140. 400 leaves that one room for a clause and stops a manual from moving in.
TOOL_LEAD_MAX = 400


def content_words(text: str) -> set[str]:
    return {w.strip("'") for w in _WORD.findall(text.lower())} - _FILLER


def without_remarks(text: str) -> str:
    previous = None
    while previous != text:
        previous, text = text, _PARENTHESES.sub("", text)
    return text


def manual_lead(comment: str) -> str:
    """The first sentence of the manual: what follows the first paragraph,
    argument lines and the hidden line left out, remarks in parentheses too,
    past a sentence that only says who may call it ("Orchestrator roles only.")."""
    more = details(comment)[1]
    paragraph = more.split("\n\n")[0].replace("\n", " ").strip()
    sentences = _SENTENCE_END.split(without_remarks(paragraph))
    said = [s for s in sentences if not content_words(s) <= _WHO]
    return said[0] if said else ""


def restates(comment: str) -> tuple[float, int]:
    """(share of the manual's first sentence's content words that are the
    first paragraph's, how many they are)."""
    lead = details(comment)[0]
    said = content_words(manual_lead(comment))
    shared = said & content_words(lead)
    return (len(shared) / len(said) if said else 0.0), len(shared)


def restating(rows: list[dict]) -> list[str]:
    out = []
    for r in rows:
        share, shared = restates(r["comment"])
        if share >= SHARED_FRACTION and shared >= MIN_SHARED:
            out.append(f"{r['function']}: {share:.2f} of {manual_lead(r['comment'])!r}")
    return out


def _comments(db) -> list[dict]:
    """Every public function's comment, as the administrator reads the catalogue."""
    with db.connect() as conn:
        return conn.execute(COMMENTS, (SCHEMAS,)).fetchall()


def test_the_manual_adds_to_the_first_paragraph_instead_of_restating_it(scsql_db):
    rows = _comments(scsql_db)
    assert len(rows) > 150
    assert restating(rows) == []


def test_a_tools_first_paragraph_is_short(scsql_db):
    long = [(r["function"], len(details(r["comment"])[0])) for r in _comments(scsql_db)
            if r["tool"] and len(details(r["comment"])[0]) > TOOL_LEAD_MAX]
    assert long == []


def test_the_measure_flags_a_restatement_and_passes_an_addition():
    lead = "Starts a working session of yours. Signed for you. Returns session_id, chain_id, seq."
    said_again = lead + ("\n\nStarts a working session for the acting agent (client, model, title: all optional) "
                         "and returns session_id, chain_id and seq. Raises SC010.")
    added = lead + "\n\nClient, model and title are all optional. The row is chained and signed. Raises SC010."
    rows = [{"function": "again", "comment": said_again}, {"function": "added", "comment": added}]
    assert [r.split(":")[0] for r in restating(rows)] == ["again"]

