"""Configuration, read from the environment and command-line flags.

| variable          | meaning                                                                 |
| ----------------- | ----------------------------------------------------------------------- |
| SCSQL_DSN         | an external PostgreSQL server; administrative commands connect with it  |
|                   | as given. Unset: the embedded server in the data directory.             |
| SCSQL_AGENT_DSN   | the connection agent processes (mcp, worker, hooks) use; they SET ROLE  |
|                   | to the named agent. Default: the agent's own login role on the server   |
|                   | SCSQL_DSN names (scsql agent login NAME prints its DSN), or scsql_app   |
|                   | on the embedded server.                                                 |
| SCSQL_DATA_DIR    | where the embedded server and the keystore live                         |
|                   | (default: the user data directory, e.g. ~/.local/share/scsql).          |
| SCSQL_KEYSTORE    | directory of agents' private keys (default: DATA_DIR/keys).             |
| SCSQL_START_      | seconds an agent process (mcp, worker, hooks) waits for another one    |
| TIMEOUT           | that is starting the embedded server, before SC033 (default 60).       |

The agent an MCP server or worker acts as is never read from the environment:
it is named on the command line.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from . import errors

DATABASE = "scsql"
APP_ROLE = "scsql_app"
AGENT_ROLE_PREFIX = "scsql_agent_"
AUDITOR_ROLE = "scsql_auditor"  # reads everything, changes nothing: verification and checkpoints act as it


@dataclass(frozen=True)
class Settings:
    dsn: str | None
    agent_dsn: str | None
    data_dir: Path
    keystore: Path
    start_timeout: float = 60.0

    @property
    def embedded(self) -> bool:
        return self.dsn is None

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pg"

    @classmethod
    def load(cls, data_dir: str | Path | None = None) -> Settings:
        env = os.environ
        root = find_data_dir(data_dir)
        keystore = Path(env.get("SCSQL_KEYSTORE") or root / "keys").expanduser().resolve()
        return cls(
            dsn=env.get("SCSQL_DSN") or None,
            agent_dsn=env.get("SCSQL_AGENT_DSN") or None,
            data_dir=root,
            keystore=keystore,
            start_timeout=_start_timeout(env.get("SCSQL_START_TIMEOUT")),
        )


def find_data_dir(given: str | Path | None = None) -> Path:
    """The data directory: GIVEN (--data-dir), else SCSQL_DATA_DIR, else the
    user data directory (e.g. ~/.local/share/scsql); absolute, links resolved."""
    given = given or os.environ.get("SCSQL_DATA_DIR")
    if not given:
        import platformdirs  # only for the default (a command's start pays for it otherwise)

        given = platformdirs.user_data_dir("scsql")
    return Path(given).expanduser().resolve()


def agent_env_path(home: str | Path, agent: str) -> str:
    return os.path.join(home, "hooks", agent + ".env.json")


def agent_env(home: str | Path, agent: str) -> dict[str, str]:
    """What the processes of AGENT need to reach its database, as ``scsql
    install claude`` recorded it in the data directory HOME (a file of this
    user, 0600): SCSQL_AGENT_DSN (the agent's own login on a shared server)
    and SCSQL_KEYSTORE. Empty when there is none (the embedded default)."""
    import json

    try:
        with open(agent_env_path(home, agent), encoding="utf-8") as f:
            data = json.loads(f.read(65536))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and k.startswith("SCSQL_") and isinstance(v, str)}


def _start_timeout(value: str | None) -> float:
    """SCSQL_START_TIMEOUT in seconds: more than 0, at most 3600; unset or empty: 60."""
    if not value:
        return 60.0
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= 3600:
        from .errors import ScsqlError

        raise ScsqlError(errors.INVALID_ARGUMENT, f"SCSQL_START_TIMEOUT must be a number of seconds from 0 to 3600, "
                                  f"got {value!r}", "unset it for the default, 60")
    return seconds


def role_for(agent: str) -> str:
    """The PostgreSQL role of an agent."""
    return AGENT_ROLE_PREFIX + agent
