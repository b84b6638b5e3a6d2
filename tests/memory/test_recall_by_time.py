"""Recall by time: the time range a query names (scsql/core/when.py), and
search and UserPromptSubmit recall within it, measured on a labelled set.

tests/data/recall_by_time.json holds sixteen Claude Code sessions between
2026-03-03 and 2026-05-20 over ten topics, each topic discussed on seven of
those days, and 70 questions that name when (yesterday, last Friday, two
weeks ago, on 8 May, in March, ...). The sessions are written as
transcripts and imported as any transcript is (scsql import: their
conversation chunks carry the time they happened); each question's answer
is the turn of its session that holds its answer text, and the same topic
on the other six days is its distractor. The test prints recall@5 with and
without the time handling; run it with ``-s`` to see the figures.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path

import pytest

from scsql.api import Api
from scsql.core import when
from scsql.core.errors import ScsqlError
from scsql.hooks import handlers, importer, transcript

DATA = next(p for p in Path(__file__).resolve().parents if p.name == "tests") / "data" / "recall_by_time.json"
NOW = dt.datetime(2026, 5, 20, 15, tzinfo=dt.UTC)
K = 5


def at(s: str) -> dt.datetime:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00"))


# -- the reader -----------------------------------------------------------------

@pytest.mark.parametrize("text, since, until, rest", [
    ("what did we fix yesterday?", "2026-05-19", "2026-05-20", "what did we fix?"),
    ("the auth bug last week", "2026-05-11", "2026-05-18", "the auth bug"),
    ("this week", "2026-05-18", "2026-05-25", ""),
    ("last month", "2026-04-01", "2026-05-01", ""),
    ("in March we chose pgvector", "2026-03-01", "2026-04-01", "we chose pgvector"),
    ("what did we decide on 8 May about the queue", "2026-05-08", "2026-05-09", "what did we decide about the queue"),
    ("May 8th migration", "2026-05-08", "2026-05-09", "migration"),
    ("the 12th of April", "2026-04-12", "2026-04-13", ""),
    ("2026-03-03 cache key", "2026-03-03", "2026-03-04", "cache key"),
    ("the decision in December", "2025-12-01", "2026-01-01", "the decision"),   # the last December, not a future one
    ("3 days ago the deploy broke", "2026-05-17", "2026-05-18", "the deploy broke"),
    ("a couple of weeks ago", "2026-05-04", "2026-05-11", ""),
    ("last Friday's flaky test", "2026-05-15", "2026-05-16", "flaky test"),
    ("on Wednesday", "2026-05-13", "2026-05-14", ""),   # today is a Wednesday: the one before
    ("since Monday", "2026-05-18", None, ""),
    ("after April 2026", "2026-05-01", None, ""),
    ("before 2026-05-01", None, "2026-05-01", ""),
    ("until 3 May", None, "2026-05-04", ""),
    ("in the past 10 days", "2026-05-10T15:00", "2026-05-20T15:00", ""),
])
def test_read_names_the_range_in_utc_and_the_words_left(text, since, until, rest):
    span = when.read(text, NOW)
    assert span is not None
    day = lambda s: None if s is None else dt.datetime.fromisoformat(s).replace(tzinfo=dt.UTC)  # noqa: E731
    assert (span.since, span.until, span.rest) == (day(since), day(until), rest)


@pytest.mark.parametrize("text", ["may we use ruff for linting", "the march of the tests", "the test 2 may fail",
                                  "May 8 workers", "before we switched to pgvector", "a monday morning meeting",
                                  "Weekday 12 of the sprint", "2026-13-45"])
def test_read_names_no_range_without_a_time(text):
    assert when.read(text, NOW) is None


def test_read_takes_another_time_zone_as_utc():
    later = dt.datetime(2026, 5, 21, 1, tzinfo=dt.timezone(dt.timedelta(hours=3)))  # 2026-05-20 22:00 UTC
    assert when.read("yesterday", later).since == dt.datetime(2026, 5, 19, tzinfo=dt.UTC)


# -- the labelled set -------------------------------------------------------------

def write_transcripts(sessions: list[dict], out: Path) -> list[Path]:
    """Each session as a Claude Code transcript: a user prompt and the
    assistant's answer per turn, at the turn's time."""
    out.mkdir()
    for s in sessions:
        lines, parent = [], None
        for t in s["turns"]:
            for role, text, when_ in (("user", t["user"], at(t["at"])),
                                      ("assistant", [{"type": "text", "text": t["assistant"]}],
                                       at(t["at"]) + dt.timedelta(seconds=40))):
                u = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{s['id']}/{len(lines)}"))
                lines.append(json.dumps({
                    "parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/home/dev/shop",
                    "sessionId": s["id"], "version": "2.0.31", "type": role, "uuid": u,
                    "timestamp": when_.isoformat().replace("+00:00", "Z"),
                    "message": {"role": role, "content": text}
                               | ({"model": "claude-sonnet-4-5"} if role == "assistant" else {})}))
                parent = u
        (out / f"{s['id']}.jsonl").write_text("\n".join(lines) + "\n")
    return transcript.transcript_files([out])


@pytest.fixture
def imported(scsql_db, tmp_path, monkeypatch):
    """An agent with the labelled set's sessions imported, the questions, and
    the clock of when.read at the set's now."""
    doc = json.loads(DATA.read_text())
    assert at(doc["now"]) == NOW
    agent = scsql_db.agent("bytime", scsql_db.project())
    report = importer.import_files(agent, write_transcripts(doc["sessions"], tmp_path / "t"), progress=False)
    assert not report.failed and report.new_sessions == len(doc["sessions"]), report.failed
    monkeypatch.setattr(when, "clock", lambda: NOW)
    monkeypatch.setenv("SCSQL_EMBED", "none")
    return agent, doc["questions"]


def found(question: dict, hits: list[dict]) -> bool:
    """Whether one of HITS is the question's answer: a chunk of its session holding its answer text."""
    return any(h["source_path"].startswith(f"claude/sessions/{question['session']}/")
               and question["answer"] in h["content"] for h in hits)


def sql_search(agent, text: str, since: dt.datetime | None, k: int) -> list[dict]:
    with agent.transaction() as conn:
        return conn.execute("select * from scsql.search(%s, p_k => %s, p_since => %s)", (text, k, since)).fetchall()


def within(agent, question: str, how: str) -> list[dict]:
    span = when.read(question, NOW)

    def times(hits):
        with agent.transaction() as conn:
            return when.happened(conn, hits)

    return when.search_within(span, question, K, lambda t, s, k: sql_search(agent, t, s, k), times, how=how)


def test_the_time_a_question_names_raises_recall_at_5(imported):
    """Recall@5 over the 70 questions: search as asked (no time handling),
    the search tool (the range filtered, the search as asked when nothing
    in it matches), the range boosted instead, and UserPromptSubmit's recall
    (at most 5 hits past its relevance floor) with and without the range."""
    agent, questions = imported
    assert len(questions) >= 60
    for q in questions:   # each question names a range that holds its answer
        span = when.read(q["question"], NOW)
        assert span is not None and span.holds(at(q["happened"] + "T12:00:00Z")), q["question"]
    api = Api(agent)
    runs = {
        "search, no time handling": lambda q: sql_search(agent, q, None, K),
        "search tool, range filtered": lambda q: api.call("search", query=q, k=K),
        "range boosted": lambda q: within(agent, q, "boost"),
        "hook recall, no time handling": lambda q: handlers._recall(agent, q, K, None, None),
        "hook recall, range filtered": lambda q: handlers.recall(agent, q, K, now=NOW),
    }
    recall, first = {}, {}
    for name, run in runs.items():
        hits = [run(q["question"]) for q in questions]
        recall[name] = sum(found(q, h) for q, h in zip(questions, hits)) / len(questions)
        first[name] = sum(found(q, h[:1]) for q, h in zip(questions, hits)) / len(questions)
    print(f"\nover {len(questions)} time-bound questions (BM25):       recall@{K}  recall@1")
    for name in runs:
        print(f"  {name:32} {recall[name]:8.3f}  {first[name]:8.3f}")
    assert recall["search tool, range filtered"] > recall["search, no time handling"]
    assert recall["range boosted"] > recall["search, no time handling"]
    assert recall["hook recall, range filtered"] > recall["hook recall, no time handling"]


def test_a_range_that_holds_nothing_falls_back_to_the_search_as_asked(imported):
    """Naming a time never loses an answer: when nothing that happened then
    matches, the search tool and the hook return what the search as asked
    returns."""
    agent, _ = imported
    q = "What did we decide about the pgvector HNSW index in January?"
    assert when.read(q, NOW).since == dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    plain = [h["chunk_hash"] for h in sql_search(agent, q, None, K)]
    assert plain
    assert [h["chunk_hash"] for h in Api(agent).call("search", query=q, k=K)] == plain
    assert handlers.recall(agent, q, K, now=NOW) == handlers._recall(agent, q, K, None, None)


def test_a_caller_that_gives_since_gets_exactly_that(imported):
    """The search tool reads no time from a query whose caller gave since."""
    agent, _ = imported
    q = "flaky queue test yesterday"
    since = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    given = Api(agent).call("search", query=q, k=K, since=since.isoformat())
    assert [h["chunk_hash"] for h in given] == [h["chunk_hash"] for h in sql_search(agent, q, since, K)]


def test_source_times_reads_only_the_callers_project(scsql_db, imported):
    """When the sources of hits happened, for the caller's own project only."""
    agent, questions = imported
    path = f"claude/sessions/{questions[0]['session']}/1.md"
    with agent.transaction() as conn:
        assert conn.execute("select occurred_at from scsql_caller.source_times(%s::text[])", ([path],)).fetchone()
    other = scsql_db.agent("bytime_other", scsql_db.project())
    with other.transaction() as conn:
        assert conn.execute("select * from scsql_caller.source_times(%s::text[])", ([path],)).fetchall() == []
    with pytest.raises(ScsqlError) as err, other.transaction() as conn:
        conn.execute("select * from scsql_caller.source_times(null)")
    assert err.value.code == "SC010"
