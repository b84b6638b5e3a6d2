"""Learnings into the knowledge base.

An outcome's transaction queues its public or internal learning
(sql/40_integration.sql). This module indexes the queue: right after an
outcome recorded through the API (MCP tools included), in a transaction of
its own, and as the ``learnings`` job of ``scsql worker`` for writes made
any other way (psql).
"""

from __future__ import annotations

import logging
from typing import Any

from ..core.db import Agent
from ..core.errors import ScsqlError
from ..core.registry import Adapter, Call
from ..core.worker import Job

log = logging.getLogger("scsql.learning")


def index_queued(agent: Agent, limit: int = 50) -> int:
    """Index up to ``limit`` queued learnings of the agent's project. Returns how many."""
    with agent.transaction() as conn:
        return conn.execute("select scsql.index_learnings(%s) as n", (limit,)).fetchone()["n"]


def _index_after_outcome(agent: Agent, args: dict[str, Any], call: Call) -> Any:
    result = call(args)
    if isinstance(result, dict) and result.get("learning_id") is not None:
        try:
            index_queued(agent)
        except ScsqlError as exc:
            # The outcome has committed: the call reports it. Its learning
            # stays queued, and the learnings job of scsql worker indexes it.
            log.warning("learning %s stays queued for scsql worker: %s", result["learning_id"], exc)
    return result


# Around the signed write of an outcome (scsql/subsystems.py lists audit first).
ADAPTERS = {"record_outcome": Adapter(frozenset(), _index_after_outcome)}


def jobs() -> list[Job]:
    from ..coordination.client import my_channel

    return [Job("learnings", index_queued, [lambda agent: my_channel(agent, "learnings")])]
