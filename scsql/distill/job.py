"""The ``distill`` job of ``scsql worker``: one distillation job at a time,
run by the project's distiller agent.

The job claims a task of team role distiller (queued by
``scsql.queue_distill`` at PreCompact and SessionEnd), reads what the model
sees (``scsql.distill_input``), reserves the tokens from the daily budget
(``scsql.distill_start``: the job waits for the next UTC day when it is
spent), runs the model command (``model.py``) with no transaction open,
checks the answer (``answer.py``; refused whole when it is not of the
schema), then writes its items and ends the job in ONE transaction: each
item signed by the distiller, through ``scsql.distill_write`` in a savepoint
of its own, so an item the database refuses (a bad citation, a protected
fact's key, a private key block) is recorded as refused and the others are
written. A worker that does not act as a distiller does nothing here.
"""

from __future__ import annotations

import hashlib
import logging
import math
import weakref
from typing import Any

import psycopg

from ..audit.signing import SignedField, SignedTable
from ..core import errors
from ..core.db import Agent
from ..core.errors import ScsqlError
from ..hooks.hookclient import scrub_value
from . import answer, model

log = logging.getLogger("scsql.distill")

ITEMS = SignedTable("scsql.distill_items", (
    SignedField("job_id", "int"),
    SignedField("kind", "text"),
    SignedField("item", "jsonb", redact=True),
    SignedField("cites", "jsonb"),
))
LEASE_SECONDS = int(max(900, model.TIMEOUT_SECONDS + 300))

_ROLE: weakref.WeakKeyDictionary[Agent, bool] = weakref.WeakKeyDictionary()  # whether an agent is a distiller


def is_distiller(agent: Agent) -> bool:
    if agent not in _ROLE:
        with agent.transaction() as conn:
            row = conn.execute("select team_role from scsql.whoami()").fetchone()
        _ROLE[agent] = row is not None and row["team_role"] == "distiller"
    return _ROLE[agent]


def run_one(agent: Agent) -> int:
    """Claim and run one distillation job of the agent's project; 1 when one
    was run (whatever came of it), 0 when none waits (or the agent is no distiller)."""
    if not is_distiller(agent):
        return 0
    with agent.transaction() as conn:
        claimed = conn.execute("select task_id, lease_token, payload from scsql.claim_task(1, %s)",
                               (LEASE_SECONDS,)).fetchall()
    if not claimed:
        return 0
    task = claimed[0]
    job = task["payload"].get("distill_job") if isinstance(task["payload"], dict) else None
    if not isinstance(job, int):
        with agent.transaction() as conn:  # a task of the role that queue_distill did not make
            conn.execute("select * from scsql.fail_task(%s, %s, %s, false)",
                         (task["task_id"], task["lease_token"], "not a distillation job: its payload names no distill_job"))
        return 1
    distill(agent, task["task_id"], task["lease_token"], job)
    return 1


def distill(agent: Agent, task: int, token: int, job: int) -> str:
    """Run job JOB, whose task TASK the agent holds under lease TOKEN. Returns the job's state."""
    with agent.transaction() as conn:
        settings = conn.execute("select command, model from scsql.distill_status()").fetchone()
        doc = conn.execute("select scsql.distill_input(%s) as d", (job,)).fetchone()["d"]
    command = settings["command"] if settings else None
    name = settings["model"] if settings else "haiku"
    sent = model.stdin_text(command, doc)
    tokens = model.estimate_tokens(sent)
    with agent.transaction() as conn:
        started = conn.execute("select * from scsql.distill_start(%s, %s, %s)", (task, token, tokens)).fetchone()
    if started["state"] != "running":
        log.info("distillation job %s %s (%s of %s tokens used today)", job, started["state"],
                 started["used_today"], started["daily_tokens"])
        return started["state"]
    asked = math.ceil(len(sent) / 4)
    try:
        ran = model.run(command, name, doc)
    except model.CommandFailed as exc:
        log.warning("distillation job %s: the model command failed: %s", job, exc)
        return finish(agent, task, token, "failed", asked, 0, error=f"SC337: {exc}")
    used_in = ran.input_tokens if ran.input_tokens is not None else asked
    used_out = ran.output_tokens if ran.output_tokens is not None else math.ceil(len(ran.text) / 4)
    digest = hashlib.sha256(ran.text.encode("utf-8", "surrogatepass")).hexdigest()
    try:
        got = answer.parse(ran.text)
    except answer.Refused as exc:
        log.warning("distillation job %s: the answer was refused: %s", job, exc)
        return finish(agent, task, token, "rejected", used_in, used_out, digest, [{"why": f"SC336: {exc}"}])
    if got.usage is not None and ran.input_tokens is None:
        used_in, used_out = got.usage.input_tokens or used_in, got.usage.output_tokens or used_out
    return write(agent, task, token, job, got, used_in, used_out, digest)


def write(agent: Agent, task: int, token: int, job: int, got: answer.Answer, used_in: int, used_out: int,
          digest: str) -> str:
    """Write the answer's items and end the job, in one transaction."""
    refusals: list[dict[str, Any]] = []
    items = got.items()
    with agent.transaction() as conn:
        rows = [{"job_id": job, "kind": kind, "item": scrub_value({k: v for k, v in item.items() if k != "cites"}),
                 "cites": item["cites"]} for kind, item in items]
        for n, row in enumerate(ITEMS.sign_many(agent, rows, conn=conn)):
            try:
                with conn.transaction():
                    conn.execute("select * from scsql.distill_write(%s, %s, %s, %s, %s, %s, %s)",
                                 (row["job_id"], row["kind"], _jsonb(row["item"]), _jsonb(row["cites"]),
                                  row["at"], row["key_id"], row["signature"]))
            except (psycopg.Error, UnicodeEncodeError) as exc:
                err = errors.from_psycopg(exc) if isinstance(exc, psycopg.Error) else ScsqlError(
                    errors.INVALID_ARGUMENT, "an item holds text that is not valid Unicode")
                refusals.append({"kind": row["kind"], "item": n, "why": f"{err.code}: {err.message}"[:500]})
        conn.execute("select * from scsql.distill_finish(%s, %s, 'done', %s, %s, %s, %s, null)",
                     (task, token, used_in, used_out, digest, _jsonb(refusals)))
    log.info("distillation job %s: %s item(s) written, %s refused", job, len(items) - len(refusals), len(refusals))
    return "done"


def finish(agent: Agent, task: int, token: int, state: str, used_in: int, used_out: int, digest: str | None = None,
           refusals: list | None = None, error: str | None = None) -> str:
    with agent.transaction() as conn:
        row = conn.execute("select * from scsql.distill_finish(%s, %s, %s, %s, %s, %s, %s, %s)",
                           (task, token, state, used_in, used_out, digest,
                            _jsonb(refusals) if refusals is not None else None, error)).fetchone()
    return row["state"]


def _jsonb(value: Any) -> Any:
    from psycopg.types.json import Jsonb

    from ..audit import encoding

    return Jsonb(value, dumps=encoding.jsonb_text)


def jobs() -> list:
    from ..coordination.client import my_channel
    from ..core.worker import Job

    return [Job("distill", run_one, [lambda agent: my_channel(agent, "team")], unit="job")]
