"""Helpers shared by the coordination tests (queue, files, broadcast)."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
from psycopg.rows import dict_row

from scsql import roles
from scsql.db import Agent

from .conftest import SESSION, ScsqlDb, _counter


def one(agent: Agent, query: str, *params: Any) -> dict[str, Any] | None:
    with agent.transaction() as conn:
        return conn.execute(query, params).fetchone()


def rows(agent: Agent, query: str, *params: Any) -> list[dict[str, Any]]:
    with agent.transaction() as conn:
        return conn.execute(query, params).fetchall()


def enqueue(orch: Agent, role: str = "developer", files: list[str] | None = None, **kw: Any) -> int:
    args = {"p_role": role, "p_exclusive_files": files or [], **{f"p_{k}": v for k, v in kw.items()}}
    casts = {"p_role": "text", "p_exclusive_files": "text[]", "p_payload": "jsonb", "p_priority": "integer",
             "p_acceptance_criteria": "text", "p_complexity": "integer", "p_run_after": "timestamptz",
             "p_max_attempts": "integer"}
    sql = ", ".join(f"{k} => %({k})s::{casts[k]}" for k in args)
    if "p_payload" in args:
        args["p_payload"] = psycopg.types.json.Jsonb(args["p_payload"])
    with orch.transaction() as conn:
        return conn.execute(f"select task_id from scsql.enqueue_task({sql})", args).fetchone()["task_id"]


def claim(agent: Agent, n: int = 1, lease: int = 300, task: int | None = None) -> list[dict[str, Any]]:
    return rows(agent, "select * from scsql.claim_task(p_n => %s::integer, p_lease_seconds => %s::integer, "
                "p_task => %s::bigint)", n, lease, task)


def register(db: ScsqlDb, short: str, project: str, team_role: str = "developer") -> str:
    """Register an agent without opening a pool for it; returns its name."""
    name = f"{SESSION}_{short}_{next(_counter)}"
    roles.create_agent(db.admin, db.keystore, name, project, team_role)
    return name


def login(db: ScsqlDb, name: str, autocommit: bool = True) -> psycopg.Connection:
    """A connection that logs in as the agent's own role."""
    return psycopg.connect(db.login(name), autocommit=autocommit, row_factory=dict_row)


def admin_rows(db: ScsqlDb, query: str, *params: Any) -> list[dict[str, Any]]:
    with db.connect() as conn:
        return conn.execute(query, params).fetchall()


class Sampler(threading.Thread):
    """Samples pg_stat_activity until stopped: the most sessions of the
    database that were at once running a statement matching ``like``."""

    def __init__(self, db: ScsqlDb, like: str, every: float = 0.005):
        super().__init__(daemon=True)
        self.db, self.like, self.every = db, like, every
        self.peak = 0
        self.stop = threading.Event()

    def run(self) -> None:
        with psycopg.connect(self.db.admin, autocommit=True) as conn:
            while not self.stop.is_set():
                n = conn.execute(
                    "select count(*) from pg_stat_activity where datname = current_database() "
                    "and state = 'active' and query like %s and pid <> pg_backend_pid()", (self.like,)
                ).fetchone()[0]
                self.peak = max(self.peak, n)
                time.sleep(self.every)

    def __enter__(self) -> Sampler:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.join()


class InFlight:
    """Counts calls in flight at once across threads; ``peak`` is the most."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0

    def __enter__(self) -> InFlight:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        return self

    def __exit__(self, *exc: Any) -> None:
        with self.lock:
            self.now -= 1
