"""Administering projects and agents: each step is one stored function, called
on an administrator's connection."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.rows import dict_row

from . import errors
from .db import unreachable
from .errors import ScsqlError

if TYPE_CHECKING:
    from .keys import Keystore


@contextmanager
def admin_connection(conninfo: str) -> Iterator[psycopg.Connection]:
    """One transaction on an administrator's connection; errors become ScsqlError."""
    try:
        conn = psycopg.connect(conninfo, row_factory=dict_row, connect_timeout=10)
    except psycopg.OperationalError as exc:
        raise unreachable(exc) from None
    try:
        with conn:
            errors.learn_names(conn)
            yield conn
    except psycopg.Error as exc:
        raise errors.from_psycopg(exc) from None


def real_root(root_path: str | None) -> str | None:
    """A project root as the index tool compares it: the real path (symbolic
    links resolved, as far as they exist on this machine). A relative or
    unusable path is passed on as given, for the database to refuse."""
    if not root_path or not root_path.startswith("/"):
        return root_path
    try:
        return os.path.realpath(root_path)
    except (OSError, ValueError):
        return root_path


def create_project(conninfo: str, name: str, root_path: str | None = None, git_remote: str | None = None) -> int:
    """Create a project; its root (when given) is stored as its real path."""
    with admin_connection(conninfo) as conn:
        return conn.execute(
            "select scsql.create_project(%s::text, %s::text, %s::text) as id", (name, real_root(root_path), git_remote)
        ).fetchone()["id"]


def set_project_root(conninfo: str, name: str, root_path: str) -> str:
    """Set a project's root directory (its real path); returns the root stored."""
    with admin_connection(conninfo) as conn:
        return conn.execute(
            "select scsql.set_project_root(%s::text, %s::text) as root", (name, real_root(root_path))
        ).fetchone()["root"]


def create_agent(
    conninfo: str, keystore: Keystore, name: str, project: str, team_role: str, *, adopt_key: bool = False
) -> dict[str, Any]:
    """Generate a key pair, register the agent with its public key, and keep
    the private key in the keystore (mode 0600). All or nothing: when the
    registration fails no key file is left, and an existing key file is never
    overwritten (with ``adopt_key`` it is registered instead)."""
    from .keys import generate, public_bytes  # the key library only where keys are made

    if keystore.exists(name):
        if not adopt_key:
            raise ScsqlError(
                errors.AGENT_EXISTS,
                f"a private key for agent {name!r} already exists at {keystore.path(name)}",
                "move it away if it belongs to an agent of another server, then run the command again",
            )
        key, staged = keystore.load(name), None
    else:
        key = generate()
        staged = keystore.stage(name, key)
    try:
        with admin_connection(conninfo) as conn:
            row = conn.execute(
                "select * from scsql.register_agent(%s::text, %s::text, %s::text, %s::bytea)",
                (name, project, team_role, public_bytes(key)),
            ).fetchone()
    except BaseException:
        if staged is not None:
            staged.unlink(missing_ok=True)
        raise
    path = keystore.commit(staged, name) if staged is not None else keystore.path(name)
    return {**row, "key_file": str(path), "public_key": public_bytes(key).hex()}


def rotate_key(conninfo: str, keystore: Keystore, name: str) -> int:
    """Register a new key for the agent and replace its key file. The old
    private key is discarded; rows it signed stay verifiable with its public key."""
    from .keys import generate, public_bytes

    keystore.load(name)  # the agent's current key must be here and safe
    key = generate()
    staged = keystore.stage(name, key)
    try:
        with admin_connection(conninfo) as conn:
            key_id = conn.execute(
                "select scsql.rotate_agent_key(%s::text, %s::bytea) as k", (name, public_bytes(key))
            ).fetchone()["k"]
    except BaseException:
        staged.unlink(missing_ok=True)
        raise
    keystore.commit(staged, name)
    return key_id


# -- logins ---------------------------------------------------------------------

LOGIN_MODES = ("per_agent", "one_login")


def login_settings(conninfo: str) -> dict[str, Any] | None:
    """scsql.login_settings: how agent processes log in (None before migration 0620)."""
    with admin_connection(conninfo) as conn:
        if conn.execute("select pg_catalog.to_regclass('scsql.login_settings') is null as old").fetchone()["old"]:
            return None
        return conn.execute("select one_login, agent_connection_limit, "
                            "(select count(*) from scsql.agents) as agents from scsql.login_settings").fetchone()


def set_login_mode(conninfo: str, mode: str) -> str:
    """per_agent (a shared server: each agent logs in as its own role) or one_login."""
    with admin_connection(conninfo) as conn:
        return conn.execute("select scsql.set_login_mode(%s::text) as m", (mode,)).fetchone()["m"]


def set_connection_limit(conninfo: str, limit: int, agent: str | None = None) -> int:
    with admin_connection(conninfo) as conn:
        return conn.execute("select scsql.set_agent_connection_limit(%s::integer, %s::text) as n",
                            (limit, agent)).fetchone()["n"]


def agent_logins(conninfo: str) -> list[dict[str, Any]]:
    with admin_connection(conninfo) as conn:
        return conn.execute("select * from scsql.agent_logins()").fetchall()


def reset_agent_settings(conninfo: str, agent: str | None = None) -> int:
    with admin_connection(conninfo) as conn:
        return conn.execute("select scsql.reset_agent_settings(%s::text) as n", (agent,)).fetchone()["n"]


def issue_password(conninfo: str, name: str, *, remove: bool = False) -> str | None:
    """A new random password for agent NAME's own login, returned once; the
    server gets only its SCRAM-SHA-256 verifier, made here (no password in
    clear reaches a statement or a log). With ``remove``, the login's password
    is removed instead (client certificates) and None returned."""
    import secrets

    from .config import role_for

    password = None if remove else secrets.token_urlsafe(24)
    with admin_connection(conninfo) as conn:
        verifier = None if password is None else conn.pgconn.encrypt_password(
            password.encode(), role_for(name).encode(), b"scram-sha-256").decode()
        conn.execute("select scsql.set_agent_password(%s::text, %s::text)", (name, verifier))
    return password


def revoke_agent(conninfo: str, name: str):
    with admin_connection(conninfo) as conn:
        return conn.execute("select scsql.revoke_agent(%s::text) as at", (name,)).fetchone()["at"]


def list_agents(conninfo: str) -> list[dict[str, Any]]:
    with admin_connection(conninfo) as conn:
        return conn.execute("select * from scsql.list_agents()").fetchall()


def status(conninfo: str) -> dict[str, Any]:
    with admin_connection(conninfo) as conn:
        return conn.execute("select scsql.status() as s").fetchone()["s"]
