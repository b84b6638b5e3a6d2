"""Claude Code transcripts: a tolerant reader, a summary made without a model,
the conversation as searchable text, and the hook events a session's
transcript implies.

A transcript (``~/.claude/projects/<encoded cwd>/<session id>.jsonl``) holds
one JSON object a line. The lines read here are ``user`` and ``assistant``
messages: ``uuid``, ``parentUuid``, ``sessionId``, ``timestamp``, ``cwd``,
``gitBranch``, and ``message.content``, a string or a list of blocks
(``text``; ``tool_use`` with ``id``, ``name``, ``input``; ``tool_result`` with
``tool_use_id``, ``content``, ``is_error``). A user line may carry the tool's
structured result in ``toolUseResult``; ``isMeta`` marks text Claude Code
inserted, ``isSidechain`` a subagent's messages, and ``isCompactSummary`` the
summary Claude Code writes after compacting. ``summary``, ``system``
(``compact_boundary``), ``progress``, ``file-history-snapshot`` and other
lines are counted and otherwise passed over: unknown line types and fields
are normal. A line that is not a JSON object, or a message line without a
usable message, is skipped and counted, never fatal. Files are read a line at
a time, so their size does not matter.

Incremental use: each result carries ``cursor``, the uuid of the last message
read; given back as ``since`` it restricts the next summary and conversation
text to what came after it (PreCompact, then SessionEnd, adds only what is
new). A ``since`` that is not in the file means nothing of the file was
written yet.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import uuid as uuidlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .clip import clip, cut_point
from .hookclient import scrub, scrub_private, scrub_value

# Tools whose input names the file they change.
FILE_TOOLS = {"Edit": "file_path", "Write": "file_path", "MultiEdit": "file_path", "NotebookEdit": "notebook_path"}
MESSAGE_TYPES = ("user", "assistant")
# Other line types Claude Code writes; counted, not parsed (any other is counted as unknown).
KNOWN_TYPES = ("summary", "system", "progress", "file-history-snapshot", "queue-operation", "custom-title",
               "ai-title", "tag", "attachment", "result")

# Bounds of what a summary and the conversation text keep.
ITEM_CHARS = 300            # one summary item
MESSAGE_CHARS = 8000        # one message in the conversation text
TOOL_CHARS = 200            # one tool call's line in the conversation text
CONTEXT_CHARS = 600         # the end of what came before a part, given as its first turn's context
PART_CHARS = 512 * 1024     # one knowledge-base source of conversation text (index_text takes 2 MiB)
SUMMARY_BYTES = 19000       # summarize_session takes 20,000 bytes of JSON
EVENT_STRING_CHARS = 4096   # one string of an imported event's tool input, response or error
LIMITS = {"done": 60, "decisions": 20, "files": 100, "open_tasks": 30}

_COMMAND = re.compile(r"<command-name>\s*(.*?)\s*</command-name>.*?(?:<command-args>\s*(.*?)\s*</command-args>)?", re.S)
_CONTINUED = "This session is being continued from a previous conversation"
_NOT_REQUESTS = ("[Request interrupted by user", "<local-command-stdout>", "<local-command-stderr>",
                 "Caveat: The messages below were generated")


# -- reading ------------------------------------------------------------------


@dataclass
class ToolUse:
    id: str
    name: str
    input: dict[str, Any]


@dataclass
class ToolResult:
    tool_use_id: str
    content: str
    is_error: bool
    structured: Any = None     # the line's toolUseResult, when the line holds this one result


@dataclass
class Message:
    line: int                          # 1-based line number in the file
    uuid: str | None
    parent_uuid: str | None
    timestamp: dt.datetime | None
    role: str                          # user or assistant
    text: str                          # text blocks, joined by newlines
    tool_uses: list[ToolUse] = field(default_factory=list)
    tool_results: list[ToolResult] = field(default_factory=list)
    session_id: str | None = None
    cwd: str | None = None
    git_branch: str | None = None
    model: str | None = None
    permission_mode: str | None = None
    is_meta: bool = False
    is_sidechain: bool = False
    is_compact_summary: bool = False

    @property
    def request(self) -> str | None:
        """The text the user typed, when this message is a request: not a tool
        result, nor text Claude Code inserted (meta, compact summaries, command
        output, interruptions), nor a subagent's prompt."""
        if self.role != "user" or self.is_meta or self.is_sidechain or self.is_compact_summary:
            return None
        text = self.text.strip()
        if not text or text.startswith(_CONTINUED) or text.startswith(_NOT_REQUESTS):
            return None
        m = _COMMAND.match(text)
        if m:  # a slash command: /name args
            return " ".join(x for x in (m.group(1), m.group(2)) if x) or None
        return text


@dataclass
class ReadStats:
    path: str = ""
    lines: int = 0                     # non-blank lines
    bytes: int = 0
    messages: int = 0
    malformed: int = 0                 # lines skipped: not JSON, not an object, or a message line without a message
    malformed_lines: list[int] = field(default_factory=list)   # their line numbers (the first 100)
    types: Counter = field(default_factory=Counter)            # every line type seen, known or not
    unknown_types: Counter = field(default_factory=Counter)
    titles: list[str] = field(default_factory=list)            # text of summary lines
    compactions: int = 0               # compact_boundary lines and compact summaries
    session_ids: Counter = field(default_factory=Counter)

    def bad(self, n: int) -> None:
        self.malformed += 1
        if len(self.malformed_lines) < 100:
            self.malformed_lines.append(n)


def parse_time(value: Any) -> dt.datetime | None:
    """An ISO 8601 timestamp as an aware UTC datetime; None when absent or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        t = dt.datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except ValueError:
        return None
    return (t if t.tzinfo else t.replace(tzinfo=dt.UTC)).astimezone(dt.UTC)


def _block_text(content: Any) -> str:
    """A tool result's content (a string, or a list of text and image blocks) as text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for b in content:
            if isinstance(b, str):
                out.append(b)
            elif isinstance(b, dict):
                if isinstance(b.get("text"), str):
                    out.append(b["text"])
                elif b.get("type") == "image":
                    out.append("[image]")
        return "\n".join(out)
    if content is None:
        return ""
    return json.dumps(content, ensure_ascii=False, default=str)


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _message(n: int, obj: dict[str, Any]) -> Message | None:
    """The message of a user or assistant line, or None when it has none usable."""
    msg = obj.get("message")
    if isinstance(msg, str):  # some writers flatten the message to its text
        msg = {"role": obj["type"], "content": msg}
    if not isinstance(msg, dict):
        return None
    content = msg.get("content")
    texts: list[str] = []
    uses: list[ToolUse] = []
    results: list[ToolResult] = []
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for b in content:
            if isinstance(b, str):
                texts.append(b)
                continue
            if not isinstance(b, dict):
                continue
            kind = b.get("type")
            if kind == "text" and isinstance(b.get("text"), str):
                texts.append(b["text"])
            elif kind == "tool_use" and _str(b.get("id")) and _str(b.get("name")):
                inp = b.get("input")
                uses.append(ToolUse(b["id"], b["name"], scrub_value(inp) if isinstance(inp, dict) else {}))
            elif kind == "tool_result" and _str(b.get("tool_use_id")):
                results.append(ToolResult(b["tool_use_id"], scrub(_block_text(b.get("content"))),
                                          b.get("is_error") is True))
            # thinking, image, document and block types to come: not conversation text
    elif content is not None:
        return None
    if len(results) == 1 and "toolUseResult" in obj:
        results[0].structured = scrub_value(obj["toolUseResult"])
    role = msg.get("role") if msg.get("role") in MESSAGE_TYPES else obj["type"]
    text = scrub_private("\n".join(texts)).strip()
    return Message(
        line=n, uuid=_str(obj.get("uuid")), parent_uuid=_str(obj.get("parentUuid")),
        timestamp=parse_time(obj.get("timestamp")), role=role, text=text, tool_uses=uses, tool_results=results,
        session_id=_str(obj.get("sessionId")), cwd=_str(obj.get("cwd")), git_branch=_str(obj.get("gitBranch")),
        model=_str(msg.get("model")), permission_mode=_str(obj.get("permissionMode")),
        is_meta=obj.get("isMeta") is True, is_sidechain=obj.get("isSidechain") is True,
        is_compact_summary=obj.get("isCompactSummary") is True)


def iter_messages(path: str | os.PathLike, stats: ReadStats | None = None,
                  progress: Callable[[int], None] | None = None) -> Iterator[Message]:
    """The user and assistant messages of a transcript, in file order, read a
    line at a time. ``stats`` (filled as the file is read) counts lines, line
    types and malformed lines; ``progress`` is called with the bytes of each line."""
    stats = stats if stats is not None else ReadStats()
    stats.path = str(path)
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            stats.bytes += len(raw)
            if progress is not None:
                progress(len(raw))
            if not raw.strip():
                continue
            stats.lines += 1
            try:
                obj = json.loads(raw.decode("utf-8", errors="replace"))
            except (ValueError, RecursionError):
                stats.bad(n)
                continue
            if not isinstance(obj, dict):
                stats.bad(n)
                continue
            kind = obj.get("type")
            kind = kind if isinstance(kind, str) else "(none)"
            stats.types[kind] += 1
            if kind not in MESSAGE_TYPES:
                if kind == "summary" and isinstance(obj.get("summary"), str):
                    stats.titles.append(obj["summary"])
                elif kind == "system" and obj.get("subtype") == "compact_boundary":
                    stats.compactions += 1
                elif kind not in KNOWN_TYPES:
                    stats.unknown_types[kind] += 1
                continue
            m = _message(n, obj)
            if m is None:
                stats.bad(n)
                continue
            stats.messages += 1
            if m.session_id:
                stats.session_ids[m.session_id] += 1
            yield m


# -- what a session did ---------------------------------------------------------


@dataclass
class Command:
    command: str
    failed: bool | None          # None: no result in the transcript (yet)
    error: str | None = None     # the first line of a failure's output
    count: int = 1
    at: dt.datetime | None = None


@dataclass
class Todo:
    content: str
    status: str


@dataclass
class Summary:
    """What a session (or its part after ``since``) did, found without a model."""

    requests: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)
    todos: list[Todo] | None = None        # the TODO list's last state; None: no TodoWrite in this part
    decisions: list[str] = field(default_factory=list)
    session_id: str | None = None
    cwd: str | None = None
    git_branch: str | None = None
    started: dt.datetime | None = None
    ended: dt.datetime | None = None
    messages: int = 0                      # messages in this part
    cursor: str | None = None              # uuid of the last message read: the next call's since
    since_found: bool = True               # False: since was given but is not in the file
    stats: ReadStats = field(default_factory=ReadStats)

    @property
    def empty(self) -> bool:
        return not self.payload

    @property
    def payload(self) -> dict[str, list[str]]:
        """The jsonb ``scsql.summarize_session`` takes: done, decisions, files,
        open_tasks, each a list of strings, only those with items, every item
        at most 300 characters and the whole under its 20,000-byte limit."""
        done = [f"request: {r}" for r in self.requests]
        for c in self.commands:
            times = f" ({c.count} times)" if c.count > 1 else ""
            status = {True: f"failed{': ' + c.error if c.error else ''}", False: "ok", None: "no result"}[c.failed]
            done.append(f"ran `{c.command}`{times}: {status}")
        done += [f"completed: {t.content}" for t in self.todos or () if t.status == "completed"]
        open_tasks = [t.content + (" (in progress)" if t.status == "in_progress" else "")
                      for t in self.todos or () if t.status != "completed"]
        parts = {"done": done, "decisions": self.decisions, "files": self.files, "open_tasks": open_tasks}
        out: dict[str, list[str]] = {}
        for key, items in parts.items():
            kept = [_clip(i, ITEM_CHARS) for i in items if i and i.strip()]
            if len(kept) > LIMITS[key]:  # keep the latest, saying how many were left out
                kept = [f"({len(kept) - LIMITS[key] + 1} earlier items left out)"] + kept[-(LIMITS[key] - 1):]
            if kept:
                out[key] = kept
        while len(json.dumps(out, ensure_ascii=False).encode()) > SUMMARY_BYTES:
            key = max(out, key=lambda k: len(json.dumps(out[k], ensure_ascii=False)))
            out[key] = out[key][len(out[key]) // 4 or 1:] if len(out[key]) > 1 else [_clip(out[key][0], 100)]
        return out

    @property
    def text(self) -> str:
        """The payload as the Markdown summarize_session stores (its sections, in its order)."""
        titles = {"done": "Done", "decisions": "Decisions", "files": "Files", "open_tasks": "Open tasks"}
        p = self.payload
        return "\n\n".join(f"## {titles[k]}\n" + "\n".join(f"- {i}" for i in p[k]) for k in titles if k in p)

    def as_dict(self) -> dict[str, Any]:
        """Everything, JSON-ready."""
        return {
            "session_id": self.session_id, "cwd": self.cwd, "git_branch": self.git_branch,
            "started": _iso(self.started), "ended": _iso(self.ended), "messages": self.messages,
            "requests": self.requests, "files": self.files,
            "commands": [{"command": c.command, "failed": c.failed, "error": c.error, "count": c.count}
                         for c in self.commands],
            "todos": None if self.todos is None else [{"content": t.content, "status": t.status} for t in self.todos],
            "decisions": self.decisions, "cursor": self.cursor, "malformed_lines": self.stats.malformed,
            "payload": self.payload,
        }


def _iso(t: dt.datetime | None) -> str | None:
    return t.isoformat().replace("+00:00", "Z") if t else None


def _clip(s: str, n: int) -> str:
    """S on one line in at most N characters, never ending in part of a word."""
    return clip(s, n, squash=True, ellipsis=True)


# Decisions, found without a model. A sentence of the user's counts when it
# states a choice (the user decides); one of the assistant's only when it
# chooses between named alternatives ("X instead of Y", "X over Y", "from X
# to Y", "replace X with Y"): narrating what it does next ("I'll run the
# tests", "we chose to leave the README as it is") is not a decision.
# Hypotheticals and questions never count. Measured on
# tests/data/decision_sentences.jsonl (tests/hooks/test_transcript.py).
_CHOICE_VERB = (r"(?:us(?:e|es|ed|ing)|go(?:es|ing)? (?:with|for)|went (?:with|for)|keep(?:s|ing)?|kept|"
                r"switch(?:es|ed|ing)?|stick(?:ing)? with|stuck with|pick(?:s|ed|ing)?|choos(?:e|es|ing)|chose|chosen|"
                r"prefer(?:s|red|ring)?|rel(?:y|ies|ying) on|stor(?:e|es|ed|ing)|put|mak(?:e|es|ing)|made|"
                r"replac(?:e|es|ed|ing)|adopt(?:s|ed|ing)?|mov(?:e|es|ed|ing)|add(?:s|ed|ing)?|log(?:s|ged|ging)?|"
                r"settl(?:e|es|ed|ing) on|opt(?:s|ed|ing)? for|host(?:s|ed|ing)?|drop(?:s|ped|ping)?|"
                r"standardi[sz](?:e|es|ed|ing) on|deploy(?:s|ed|ing)?|stay(?:s|ed|ing)? (?:on|with)|want|need)")
# I / we / let's, with what may stand between the subject and its verb.
_FIRST = (r"\b(?:I|we|let'?s)\b(?:\s*(?:'ll|'m|'re|'ve|'d)|\s+(?:will|shall|am|are|have|had|just|now|then|also|"
          r"really|going to|decided to|chose to|like to|want to|agreed to))*\s+")
_DECIDED = re.compile(r"\b(?:I|we)(?:'ve|\s+have)?\s+(?:decided|chose|chosen|opted|settled on|went with|picked)\b"
                      r"|\bdecided (?:to|on|that|against)\b|^decided\b|^(?:the |our )?decision(?: is| was)?\b[:\s]", re.I)
_ALTERNATIVE = re.compile(r"\b(?:instead of|rather than|in favou?r of)\b|\bover\s+[\w.`'\"/-]+|,\s*(?:and\s+)?not\s+[\w.`'\"/-]+"
                          r"|\bfrom\s+\S+.*\bto\s+\S+|\breplac\w*\b.*\bwith\b", re.I)
_CHOOSES = re.compile(_FIRST + _CHOICE_VERB + r"\b|^(?:going with|going for)\b|\b(?:I|we)\s+agreed\b", re.I)
# A first-person verb of doing, not of looking: with a named alternative it is a choice.
_ACTS = re.compile(_FIRST + r"(?!(?:look|read|check|run|try|point|explain|show|open|see|investigate|search|print|"
                   r"start|continue|go on|wait|think|guess|ask|tell|say|mention|note)\b)[a-z]+\b", re.I)
_USER_RULE = re.compile(r"^(?:use|go with|keep|switch to|stick with|prefer|store|deploy|drop|move|host)\b"
                        r"|\b(?:from now on|from here on|going forward|standardi[sz]\w* on)\b"
                        r"|\blet'?s not\b|\bwe (?:won't|will not|don't|do not)\b", re.I)
_IMPERATIVE = re.compile(r"(?!(?:the|a|an|it|this|that|these|those|there|here|he|she|they|you|i|we|my|our|"
                         r"what|why|how|when|where|which|who|is|are|was|were|do|does|did|can|could)\b)[a-z]+\b", re.I)
_LABELLED = re.compile(r"(?:the |our )?decision(?: is| was)?:\s*\S|decided:\s*\S", re.I)
_NOT_A_CHOICE = re.compile(r"\b(?:could|would|might|maybe|perhaps|if|whether|should|wonder|not sure|considered|"
                           r"option|suggestion|plan above|first option|nothing (?:yet|changes))\b", re.I)
_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'`(*])|\n+")


def is_decision(sentence: str, role: str) -> bool:
    """Whether SENTENCE, said by ROLE (user or assistant), states a decision:
    the user's when it decides (I/we/let's with a verb of choosing, "decided",
    a rule "from now on", an imperative "use X"); the assistant's only when it
    chooses between named alternatives (a verb of choosing with I or we, and
    "instead of", "rather than", "over X", "not X", "from X to Y" or "replace
    X with Y"). Never a question or a hypothetical."""
    s = sentence.strip()
    if s.endswith("?") or _NOT_A_CHOICE.search(s):
        return False
    chooses = _DECIDED.search(s) or _CHOOSES.search(s)
    if role == "user" and (chooses or _USER_RULE.search(s)):
        return True
    if role == "user" and _IMPERATIVE.match(s):  # "Make the timeout 30 seconds instead of 10."
        chooses = _IMPERATIVE.match(s)
    if _LABELLED.match(s):  # "Decision: ...", said as one
        return True
    return _between_alternatives(s, chooses or _ACTS.search(s))


def _between_alternatives(s: str, acts: re.Match | None) -> bool:
    """Whether the choice ACTS of sentence S names what it chose against, in
    its own clause: after the verb ("I'll use X instead of Y"), or leading the
    sentence ("Instead of X, I'll use Y")."""
    if acts is None:
        return False
    alt = _ALTERNATIVE.search(s, acts.start())
    return alt is not None or bool(re.match(r"(?:instead of|rather than)\b[^,]*,", s, re.I))


def decisions_in(text: str, role: str = "assistant") -> list[str]:
    """The sentences of TEXT (code blocks left out) that state a decision,
    said by ROLE (see is_decision)."""
    out = []
    for s in _SENTENCE.split(_FENCE.sub("\n", text)):
        s = s.strip().lstrip("-*>#0123456789. ").strip()
        if 12 <= len(s) <= 1000 and is_decision(s, role):   # a longer "sentence" is pasted output
            out.append(_clip(s, ITEM_CHARS))
    return out


def _relative(path: str, cwd: str | None) -> str:
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1:]
    return path


def _first_line(s: str, n: int = 160) -> str:
    for line in s.splitlines():
        if line.strip():
            return _clip(line, n)
    return ""


_TAGS = re.compile(r"</?tool_use_error>")


def _failure(output: str) -> str:
    """A failed call's output in one line: its first line, and the next when
    the first only says "Exit code N"."""
    lines = [ln for ln in _TAGS.sub("", output).splitlines() if ln.strip()]
    if not lines:
        return ""
    if re.fullmatch(r"\s*Exit code -?\d+\s*", lines[0]) and len(lines) > 1:
        return _clip(f"{lines[0].strip()}: {lines[1]}", TOOL_CHARS)
    return _clip(lines[0], TOOL_CHARS)


def _tool_line(use: ToolUse, cwd: str | None) -> str:
    """One line saying what a tool call did, for the conversation text."""
    i = use.input
    if use.name in FILE_TOOLS or use.name in ("Read", "NotebookRead"):
        p = i.get(FILE_TOOLS.get(use.name, "file_path")) or i.get("notebook_path")
        what = _relative(p, cwd) if isinstance(p, str) else ""
    elif use.name == "Bash":
        what = f"`{_clip(str(i.get('command', '')), TOOL_CHARS)}`"
    elif use.name in ("Grep", "Glob"):
        what = f"{i.get('pattern', '')!s}" + (f" in {_relative(i['path'], cwd)}" if isinstance(i.get("path"), str) else "")
    elif use.name in ("Task", "Agent"):
        what = str(i.get("description") or i.get("prompt") or "")
    elif use.name == "WebFetch":
        what = str(i.get("url", ""))
    elif use.name == "WebSearch":
        what = str(i.get("query", ""))
    elif use.name == "TodoWrite":
        todos = i.get("todos") if isinstance(i.get("todos"), list) else []
        what = "; ".join(f"[{t.get('status', '?')}] {t.get('content', '')}" for t in todos if isinstance(t, dict))
    else:
        what = json.dumps(i, ensure_ascii=False, default=str)
    return _clip(f"{use.name} {what}".strip(), TOOL_CHARS)


@dataclass
class _Call:
    use: ToolUse
    at: dt.datetime | None


@dataclass
class Turn:
    number: int                         # 1 for the first request; 0 for messages before any request
    request: str | None
    at: dt.datetime | None
    lines: list[str] = field(default_factory=list)
    continued: bool = False             # began before the cursor


@dataclass
class Part:
    """One knowledge-base source of conversation text: the text, and a span
    per turn ({start, end, anchor, context}, 1-based lines) so each turn is
    its own chunk. ``context`` marks the turns as conversation: the database
    indexes each chunk with the end of the one before it (scsql._chunk_text),
    so a short reply is found by what it answers. A part's first turn gets
    the end of what came before it (the previous part, or the turn before the
    cursor) as its context text."""

    text: str
    spans: list[dict[str, Any]]
    first_turn: int
    last_turn: int
    at: dt.datetime | None = None   # when its last turn happened


@dataclass
class Conversation:
    session_id: str | None
    parts: list[Part]
    turns: int
    cursor: str | None
    since_found: bool = True
    stats: ReadStats = field(default_factory=ReadStats)

    @property
    def text(self) -> str:
        return "\n\n".join(p.text for p in self.parts)


@dataclass
class Update:
    """One read of a transcript: the summary and the conversation text of what
    follows ``since``, and the cursor to give as the next ``since``."""

    summary: Summary
    conversation: Conversation

    @property
    def cursor(self) -> str | None:
        return self.summary.cursor


def read(path: str | os.PathLike, since: str | int | None = None,
         progress: Callable[[int], None] | None = None, redact: Callable[[str], str] | None = None,
         private_key: re.Pattern[str] | None = None) -> Update:
    """Read a transcript once: the summary and the conversation of the messages
    after ``since`` (a message uuid, the cursor of an earlier read; or a count
    of messages already read), in one pass over the file. ``redact`` (scsql.redact,
    when the result is stored) rewrites a text holding a key block before it
    is cut into lines (spans stay right); the rest is redacted where stored."""
    stats = ReadStats()
    s = Summary(stats=stats)
    turns: list[Turn] = []
    calls: dict[str, _Call] = {}          # the tool uses of this part, by id
    result_of: dict[str, ToolResult] = {} # their results (a failure's first line only)
    turn_no = 0
    after = since is None
    seen_since = not isinstance(since, str)
    decisions: dict[str, None] = {}
    index = 0
    cwd = None
    turn: Turn | None = None
    before: list[str] = []                # the turn before the cursor, as context of the first new one
    for m in iter_messages(path, stats, progress):
        index += 1
        if redact is not None and private_key is not None and private_key.search(m.text):
            m.text = redact(m.text)  # a key block is cut into lines below: redacted whole first
        cwd = m.cwd or cwd
        s.session_id = m.session_id or s.session_id
        s.git_branch = m.git_branch or s.git_branch
        req = m.request
        if req is not None:
            turn_no += 1
        if not after:
            if isinstance(since, int) and index > since:
                after = True
            else:
                if m.uuid is not None and m.uuid == since:
                    after = seen_since = True
                if req is not None:
                    before = [f"User: {_clip(req, ITEM_CHARS)}"]
                if m.role == "assistant" and m.text and not m.is_sidechain:
                    before.append(f"Assistant: {m.text.strip()[-CONTEXT_CHARS:]}")
                continue
        # -- this message is new
        s.messages += 1
        s.cursor = m.uuid or s.cursor
        if m.timestamp:
            s.started = s.started or m.timestamp
            s.ended = m.timestamp
        if req is not None:
            s.requests.append(_clip(req, ITEM_CHARS))
            turn = Turn(turn_no, req, m.timestamp)
            turns.append(turn)
            turn.lines.append(f"User: {_clip_block(req)}")
            for d in decisions_in(req, "user"):
                decisions.setdefault(d, None)
        elif turn is None:
            turn = Turn(turn_no, None, m.timestamp, continued=turn_no > 0)
            turns.append(turn)
        if m.role == "assistant" and m.text and not m.is_sidechain:
            turn.lines.append(f"Assistant: {_clip_block(m.text)}")
            for d in decisions_in(m.text, "assistant"):
                decisions.setdefault(d, None)
        elif m.is_compact_summary or (m.role == "user" and m.text.startswith(_CONTINUED)):
            turn.lines.append("(the context was compacted here)")
        _add_calls(turn, m, calls, result_of, cwd)
    if isinstance(since, str) and not seen_since:
        # The cursor is not in this file: nothing of it was written; read it all.
        whole = read(path, None, redact=redact, private_key=private_key)
        whole.summary.since_found = whole.conversation.since_found = False
        return whole
    s.cwd = cwd
    _tally_calls(s, calls, result_of, cwd)
    s.decisions = list(decisions)
    s.since_found = seen_since
    conv = Conversation(s.session_id, _parts(turns, s, _tail(before)), len([t for t in turns if t.request is not None]),
                        s.cursor, seen_since, stats)
    return Update(s, conv)


def _add_calls(turn: Turn, m, calls: dict[str, _Call], result_of: dict[str, ToolResult], cwd: str | None) -> None:
    """A message's tool uses and their results: one line each in the turn, a failure's first line after it."""
    for u in m.tool_uses:
        calls[u.id] = _Call(u, m.timestamp)
        turn.lines.append(f"{'Subagent tool' if m.is_sidechain else 'Tool'} {_tool_line(u, cwd)}")
    for r in m.tool_results:
        if r.tool_use_id in calls:
            first = _failure(r.content) if r.is_error else ""
            result_of[r.tool_use_id] = ToolResult(r.tool_use_id, first, r.is_error)
            if r.is_error:
                turn.lines.append(f"  failed: {first}")


def _tally_calls(s: Summary, calls: dict[str, _Call], result_of: dict[str, ToolResult], cwd: str | None) -> None:
    """The summary's files changed, commands run and last TODO list, from the
    tool calls of the part read, with their results wherever they are."""
    files: dict[str, None] = {}
    by_command: dict[str, Command] = {}
    for c in calls.values():
        u, r = c.use, result_of.get(c.use.id)
        failed = None if r is None else r.is_error
        if u.name in FILE_TOOLS:
            p = u.input.get(FILE_TOOLS[u.name])
            if isinstance(p, str) and p and failed is False:
                files.setdefault(_relative(p, cwd), None)
        elif u.name == "Bash" and isinstance(u.input.get("command"), str) and u.input["command"].strip():
            cmd = _clip(u.input["command"], 200)
            err = r.content or None if r is not None and r.is_error else None
            prev = by_command.get(cmd)
            if prev is None:
                by_command[cmd] = Command(cmd, failed, err, 1, c.at)
            else:  # the same command again: counted once, with its last outcome
                prev.count += 1
                prev.failed, prev.error, prev.at = failed, err, c.at
                by_command[cmd] = by_command.pop(cmd)
        elif u.name == "TodoWrite" and isinstance(u.input.get("todos"), list):
            s.todos = [Todo(str(t.get("content", "")).strip(), str(t.get("status", "pending")))
                       for t in u.input["todos"] if isinstance(t, dict) and str(t.get("content", "")).strip()]
    s.commands = list(by_command.values())
    s.files = list(files)


def _clip_block(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MESSAGE_CHARS else text[:cut_point(text, MESSAGE_CHARS)].rstrip() + " …[cut]"


def _heading(t: Turn) -> tuple[str, str]:
    when = t.at.strftime("%Y-%m-%d %H:%M UTC") if t.at else "time unknown"
    if t.request is None:
        label = f"Turn {t.number} (continued)" if t.continued else "Before the first request"
    else:
        label = f"Turn {t.number}"
    anchor = f"{label}, {when}" + (f": {_first_line(t.request, 120)}" if t.request else "")
    return f"## {label}, {when}", anchor


def _tail(lines: list[str]) -> str | None:
    """The last CONTEXT_CHARS characters of LINES, from a line start when
    one falls in their first half: the context of a part's first turn."""
    text = "\n".join(lines).strip()
    if len(text) > CONTEXT_CHARS:
        text = text[-CONTEXT_CHARS:]
        cut = text.find("\n")
        text = text[cut + 1:] if 0 <= cut < CONTEXT_CHARS // 2 else text
    return text.strip() or None


def _parts(turns: list[Turn], s: Summary, before: str | None = None) -> list[Part]:
    """The turns as text, in parts of at most PART_CHARS characters each
    starting with a line naming the session. A turn that fits in a part is
    never split; a longer one is cut between lines (a line longer than half a
    part is cut in pieces), each piece under its heading marked continued.
    Every span is marked as conversation (``context``); a part's first span
    has as context text the end of what came before it: BEFORE (the turn
    before the cursor) for the first part, the previous part's last turn for
    the others."""
    head = f"# Claude Code session {s.session_id or '(unknown)'}" + (f" on {s.git_branch}" if s.git_branch else "") \
        + (f" in {_clip(s.cwd, 300)}" if s.cwd else "")
    room = PART_CHARS - len(head) - 1            # for a blank line and the turn's lines
    parts: list[Part] = []
    lines: list[str] = [head]
    spans: list[dict[str, Any]] = []
    size = len(head)
    first = last = 0
    when: dt.datetime | None = None
    previous: list[str] = []

    def flush() -> None:
        nonlocal lines, spans, size, first
        if spans:
            parts.append(Part("\n".join(lines), spans, first, last, when))
        lines, spans, size, first = [head], [], len(head), 0

    def place(block: list[str], anchor: str, number: int, at: dt.datetime | None = None) -> None:
        nonlocal size, first, last, previous, when
        when = at or when
        n = sum(len(x) + 1 for x in block) + 1
        if spans and size + n > PART_CHARS:
            flush()
        lines.append("")
        start = len(lines) + 1
        lines.extend(block)
        context = (before if not parts else _tail(previous)) if not spans else None
        spans.append({"start": start, "end": len(lines), "anchor": anchor[:200], "context": context or True})
        previous = block
        size += n
        first = first or number or -1
        last = number

    for t in turns:
        if not t.lines:
            continue
        heading, anchor = _heading(t)
        more = heading + " (continued)"
        piece = max(1, (room - len(more) - 2) // 2)
        body: list[str] = []
        for entry in t.lines:
            body.append("")
            for x in entry.split("\n"):
                body += [x[i:i + piece] for i in range(0, len(x), piece)] or [""]
        if len(heading) + sum(len(x) + 1 for x in body) <= room:
            place([heading, *body], anchor, t.number, t.at)
            continue
        block, n = [heading], len(heading)
        for x in body:
            if n + len(x) + 1 > room:
                place(block, anchor, t.number, t.at)
                block, n = [more], len(more)
                if not x:
                    continue
            block.append(x)
            n += len(x) + 1
        if len(block) > 1:
            place(block, anchor, t.number, t.at)
    flush()
    for p in parts:
        p.first_turn = max(p.first_turn, 0)
    return parts


def summarize(path: str | os.PathLike, since: str | int | None = None) -> Summary:
    """The session's summary, made without a model, of the messages after
    ``since`` (all of them when None): the user's requests, files changed
    (Edit, Write, MultiEdit, NotebookEdit), commands run (Bash) and whether
    they failed, the TODO list's last state (TodoWrite), decisions stated in
    the text. ``.payload`` is what ``scsql.summarize_session`` takes;
    ``.cursor`` is the next call's ``since``."""
    return read(path, since).summary


def conversation_text(path: str | os.PathLike, since: str | int | None = None) -> Conversation:
    """The conversation after ``since`` as text to index as the session's
    source: a part per at most 512 KiB, a span per turn (the user's request,
    the assistant's text, one line per tool call, failures' first lines), so
    search finds what was said and a short turn is one chunk with its context."""
    return read(path, since).conversation


# -- hook events ----------------------------------------------------------------

_NS = uuidlib.UUID("6d1f3c2e-5b0a-4c47-9a59-2f0e8d3b7c11")


def event_id(*key: str) -> str:
    """A stable event id for an imported event, so importing twice writes nothing twice."""
    return uuidlib.uuid5(_NS, "claude-transcript/" + "/".join(key)).hex


@dataclass
class EventStats:
    sessions: int = 0
    prompts: int = 0
    tool_calls: int = 0
    failures: int = 0
    unanswered: int = 0       # tool uses without a result (denied before running, interrupted)


def session_of(path: str | os.PathLike, stats: ReadStats) -> str:
    """The session a transcript file belongs to: its name (Claude Code names
    the file after the session) when its lines say so, else the last new
    session id its lines name, else its name."""
    stem = Path(path).stem
    if stem in stats.session_ids or not stats.session_ids:
        return stem
    return next(reversed(stats.session_ids))


def to_events(path: str | os.PathLike, stats: ReadStats | None = None, counts: EventStats | None = None,
              progress: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
    """The hook events a transcript implies, in order, as the hooks receive
    them: SessionStart, a UserPromptSubmit per request, a PostToolUse or
    PostToolUseFailure per tool call that has a result (at the result's time,
    with its duration), and SessionEnd. Each carries ``scsql_event_id`` (stable:
    from the message uuid or tool_use_id), ``scsql_received_at`` (the original
    time), ``scsql_imported`` true and, when known, ``scsql_git_branch``."""
    stats = stats if stats is not None else ReadStats()
    counts = counts if counts is not None else EventStats()
    path = Path(path)
    msgs = list(_slim(iter_messages(path, stats, progress)))
    if not msgs:
        return []
    sid = session_of(path, stats)
    first = next((m for m in msgs if m.timestamp), None)
    last = next((m for m in reversed(msgs) if m.timestamp), None)
    cwd = next((m.cwd for m in msgs if m.cwd), None) or ""
    model = next((m.model for m in msgs if m.model and not m.model.startswith("<")), None)
    mode = next((m.permission_mode for m in msgs if m.permission_mode), None) or "default"
    branch = next((m.git_branch for m in msgs if m.git_branch), None)
    base = {"session_id": sid, "transcript_path": str(path.resolve()), "cwd": cwd, "permission_mode": mode}
    extra = {"scsql_imported": True, **({"scsql_git_branch": branch} if branch else {})}

    def ev(name: str, key: tuple[str, ...], at: dt.datetime | None, **fields: Any) -> dict[str, Any]:
        return {**base, "hook_event_name": name, **fields, "scsql_event_id": event_id(*key),
                "scsql_received_at": _iso(at), **extra}

    events = [ev("SessionStart", (sid, "start"), first.timestamp if first else None, source="startup",
                 **({"model": model} if model else {}))]
    counts.sessions += 1
    uses: dict[str, tuple[ToolUse, Message]] = {}
    now = first.timestamp if first else None
    for m in msgs:
        now = m.timestamp or now
        if m.cwd and m.cwd != base["cwd"]:
            base["cwd"] = m.cwd
        req = m.request
        if req is not None:
            key = m.uuid or f"line{m.line}"
            events.append(ev("UserPromptSubmit", (key, "prompt"), now, prompt=req))
            counts.prompts += 1
        for u in m.tool_uses:
            uses[u.id] = (u, m)
        for r in m.tool_results:
            found = uses.pop(r.tool_use_id, None)
            if found is None:
                continue
            u, um = found
            fields: dict[str, Any] = {"tool_name": u.name, "tool_input": _bound(u.input), "tool_use_id": u.id}
            if um.timestamp and now:
                fields["duration_ms"] = max(0, int((now - um.timestamp).total_seconds() * 1000))
            if r.is_error:
                events.append(ev("PostToolUseFailure", (u.id, "tool"), now, error=_bound(r.content), **fields))
                counts.failures += 1
            else:
                resp = r.structured if r.structured is not None else r.content
                events.append(ev("PostToolUse", (u.id, "tool"), now, tool_response=_bound(resp), **fields))
            counts.tool_calls += 1
    counts.unanswered += len(uses)
    end = msgs[-1].uuid or f"line{msgs[-1].line}"
    events.append(ev("SessionEnd", (sid, "end", end), last.timestamp if last else None, reason="other"))
    return events


def _bound(value: Any, n: int = EVENT_STRING_CHARS, depth: int = 0) -> Any:
    """VALUE with every string cut to N characters and nesting cut at 32
    levels: what capture keeps of a call is a bounded preview, and a large
    transcript's events must fit in memory and in one transaction."""
    if isinstance(value, str):
        return value if len(value) <= n else value[:n] + " …[cut]"
    if depth >= 32:
        return None
    if isinstance(value, dict):
        return {k: _bound(v, n, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_bound(v, n, depth + 1) for v in value]
    return value


def _slim(msgs: Iterable[Message]) -> Iterator[Message]:
    """Messages with only what events need (no assistant text; tool results
    bounded), so a large file is held in little memory."""
    for m in msgs:
        if m.role == "assistant":
            if not m.tool_uses and not m.model:
                continue
            m.text = ""
        for r in m.tool_results:
            r.content = _bound(r.content)
            r.structured = _bound(r.structured)
        yield m


# -- what the model's messages cost ------------------------------------------------

INT_MAX = 2**31 - 1


@dataclass
class ModelCall:
    """One message of the model: its id, model, token usage and the tool calls it issued."""

    message_id: str
    model: str | None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    tool_use_ids: list[str] = field(default_factory=list)
    at: dt.datetime | None = None


def _tokens(usage: dict, key: str) -> int:
    v = usage.get(key)
    return min(max(int(v), 0), INT_MAX) if isinstance(v, int | float) and not isinstance(v, bool) else 0


def model_calls(path: str | os.PathLike, offset: int = 0, final: bool = False) -> tuple[list[ModelCall], int]:
    """The model's messages in the transcript after byte OFFSET, each once
    (Claude Code writes a line per content block of a message, each with the
    message's id and its usage), with the tool calls it issued; and the offset
    to read from next. Unless FINAL, the last message read is left for the
    next read, since its later blocks may not be written yet, and so is a
    last line without its newline."""
    calls: dict[str, ModelCall] = {}
    starts: dict[str, int] = {}
    pos = offset
    with open(path, "rb") as f:
        f.seek(offset)
        for raw in f:
            if not raw.endswith(b"\n") and not final:
                break
            line_at, pos = pos, pos + len(raw)
            try:
                obj = json.loads(raw.decode("utf-8", errors="replace"))
            except (ValueError, RecursionError):
                continue
            msg = obj.get("message") if isinstance(obj, dict) and obj.get("type") == "assistant" else None
            if not isinstance(msg, dict) or not _str(msg.get("id")) or not isinstance(msg.get("usage"), dict):
                continue
            model = _str(msg.get("model"))
            if model and model.startswith("<"):  # <synthetic>: Claude Code's own message, no model call
                continue
            call = calls.get(msg["id"])
            if call is None:
                usage = msg["usage"]
                call = calls[msg["id"]] = ModelCall(
                    msg["id"], model, _tokens(usage, "input_tokens"), _tokens(usage, "output_tokens"),
                    _tokens(usage, "cache_creation_input_tokens"), _tokens(usage, "cache_read_input_tokens"),
                    at=parse_time(obj.get("timestamp")))
                starts[msg["id"]] = line_at
            for b in msg.get("content") if isinstance(msg.get("content"), list) else ():
                if isinstance(b, dict) and b.get("type") == "tool_use" and _str(b.get("id")):
                    call.tool_use_ids.append(b["id"])
    if calls and not final:
        last = next(reversed(calls))
        pos = starts.pop(last)
        del calls[last]
    return list(calls.values()), pos


# -- where Claude Code keeps a project's transcripts ------------------------------


def projects_dir(home: str | os.PathLike | None = None) -> Path:
    """~/.claude/projects, of HOME (or the given home directory)."""
    return Path(home if home is not None else os.path.expanduser("~")) / ".claude" / "projects"


def project_dirs(cwd: str | os.PathLike, home: str | os.PathLike | None = None) -> list[Path]:
    """The directories of ``projects_dir`` holding the transcripts of sessions
    started in CWD: Claude Code names one after the path with "/" (and, in
    recent releases, every character other than a letter or digit) as "-"."""
    p = str(Path(cwd).absolute())
    names = dict.fromkeys([re.sub(r"[^A-Za-z0-9]", "-", p), p.replace("/", "-")])
    base = projects_dir(home)
    return [base / n for n in names if (base / n).is_dir()]


def transcript_files(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """The transcripts PATHS name: each file as given; of each directory, its
    *.jsonl files, oldest first, but not subagents' transcripts (agent-*.jsonl,
    and those in subdirectories): a subagent's work is part of its session."""
    out: dict[Path, None] = {}
    for p in map(Path, paths):
        if p.is_dir():
            found = [f for f in p.glob("*.jsonl") if f.is_file() and not f.name.startswith("agent-")]
            for f in sorted(found, key=lambda f: (f.stat().st_mtime, f.name)):
                out[f] = None
        else:
            out[p] = None
    return list(out)
