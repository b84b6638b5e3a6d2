"""Learnings into the knowledge base.

An outcome's transaction queues its public or internal learning
(sql/40_integration.sql). This module indexes the queue: right after an
outcome recorded through the API (MCP tools included), in a transaction of
its own, and as the ``learnings`` job of ``scsql worker`` for writes made
any other way (psql).
"""

from __future__ import annotations

from typing import Any

from .db import Agent
from .registry import after


def index_queued(agent: Agent, limit: int = 50) -> int:
    """Index up to ``limit`` queued learnings of the agent's project. Returns how many."""
    with agent.transaction() as conn:
        return conn.execute("select scsql.index_learnings(%s) as n", (limit,)).fetchone()["n"]


@after("record_outcome")
def _index_after_outcome(agent: Agent, result: Any) -> Any:
    if isinstance(result, dict) and result.get("learning_id") is not None:
        index_queued(agent)
    return result


def jobs():
    from .worker import Job

    return [Job("learnings", index_queued, ["scsql_learnings"])]
