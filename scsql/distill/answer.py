"""The answer a distillation model must give, and how an answer is checked.

The model is untrusted (a transcript can carry a prompt injection), so its
answer is refused whole unless it is one JSON object of exactly this shape,
within these bounds; every string is typed, no field is coerced, no field
beyond these is accepted (an answer that also asks for a rule, a key, a
command is not an answer). What passes is written item by item by
``scsql.distill_write``, which checks each item again, and its citations.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

MAX_ANSWER_BYTES = 256 * 1024  # an answer longer than this is refused whole, unread

Cite = Annotated[str, StringConstraints(pattern=r"^(prompt|tool_call|chunk):[0-9]{1,18}$")]
Cites = Annotated[list[Cite], Field(min_length=1, max_length=20)]
Line = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\n\r]*\S[^\n\r]*$")]


def bounded(n: int) -> Any:
    return Annotated[str, StringConstraints(min_length=1, max_length=n, pattern=r"\S")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Fact(_Strict):
    """A fact worth keeping, or a new value for a fact of memory (same key)."""
    key: Line
    value: bounded(4000)
    importance: int = Field(3, ge=1, le=5)
    cites: Cites


class Decision(_Strict):
    """A choice made in the session, why, and the current decision it replaces."""
    title: Line
    rationale: bounded(3800)
    supersedes: int | None = Field(None, ge=1)
    cites: Cites


class LoopOpened(_Strict):
    """Work or a question left open."""
    text: bounded(2000)
    owner: Line | None = None
    cites: Cites


class LoopClosed(_Strict):
    """An open loop of memory (by id) the session finished."""
    loop_id: int = Field(ge=1)
    resolution: bounded(3800)
    cites: Cites


class Contradiction(_Strict):
    """Two facts of memory that cannot both be true."""
    key: Line
    other_key: Line
    reason: bounded(1000)
    cites: Cites


class Summary(_Strict):
    """What the session did, in a few sentences."""
    text: bounded(2000)
    cites: Cites


class Usage(_Strict):
    input_tokens: int = Field(0, ge=0, le=100_000_000)
    output_tokens: int = Field(0, ge=0, le=100_000_000)


class Answer(_Strict):
    facts: list[Fact] = Field(default_factory=list, max_length=20)
    decisions: list[Decision] = Field(default_factory=list, max_length=10)
    loops_opened: list[LoopOpened] = Field(default_factory=list, max_length=20)
    loops_closed: list[LoopClosed] = Field(default_factory=list, max_length=20)
    contradictions: list[Contradiction] = Field(default_factory=list, max_length=10)
    summary: Summary | None = None
    usage: Usage | None = None  # a command may report the tokens its model used

    def items(self) -> list[tuple[str, dict]]:
        """(kind, item) for scsql.distill_write, in the order they are written."""
        out = [("fact", f.model_dump()) for f in self.facts]
        out += [("decision", d.model_dump(exclude_none=True)) for d in self.decisions]
        out += [("loop_closed", c.model_dump()) for c in self.loops_closed]
        out += [("loop_opened", o.model_dump(exclude_none=True)) for o in self.loops_opened]
        out += [("contradiction", c.model_dump()) for c in self.contradictions]
        if self.summary is not None:
            out.append(("summary", self.summary.model_dump()))
        return out


class Refused(Exception):
    """The answer is refused whole (SC336): why, for the job's record."""


def schema() -> dict:
    """The JSON schema of the answer, as the request states it (without the
    titles pydantic adds, which say nothing the names do not)."""
    def bare(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: bare(v) for k, v in x.items() if not (k == "title" and isinstance(v, str))}
        return [bare(v) for v in x] if isinstance(x, list) else x

    s = bare(Answer.model_json_schema())
    s["properties"].pop("usage", None)
    return s


_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*)\n\s*```\s*$", re.S)


def parse(raw: str) -> Answer:
    """The answer in RAW (a JSON object, possibly in a ```json fence or after
    a line of prose, as chat models write), checked; Refused otherwise."""
    if len(raw.encode("utf-8", "surrogatepass")) > MAX_ANSWER_BYTES:
        raise Refused(f"the answer is larger than {MAX_ANSWER_BYTES // 1024} KiB")
    body = raw.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    elif not body.startswith("{") and "{" in body:
        body = body[body.index("{"):body.rindex("}") + 1]
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise Refused(f"the answer is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise Refused("the answer is not a JSON object")
    try:
        return Answer.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the answer"
        raise Refused(f"the answer is not of the schema ({exc.error_count()} error(s)); {where}: {first['msg']}") from None
