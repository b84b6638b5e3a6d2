"""Configuration, read from the environment and command-line flags.

| variable          | meaning                                                                 |
| ----------------- | ----------------------------------------------------------------------- |
| SCSQL_DSN         | an external PostgreSQL server; administrative commands connect with it  |
|                   | as given. Unset: the embedded server in the data directory.             |
| SCSQL_AGENT_DSN   | the connection agent processes (mcp, worker, hooks) use; they SET ROLE  |
|                   | to the named agent. Default: SCSQL_DSN, or scsql_app on the embedded    |
|                   | server.                                                                 |
| SCSQL_DATA_DIR    | where the embedded server and the keystore live                         |
|                   | (default: the user data directory, e.g. ~/.local/share/scsql).          |
| SCSQL_KEYSTORE    | directory of agents' private keys (default: DATA_DIR/keys).             |
| SCSQL_START_      | seconds an agent process (mcp, worker, hooks) waits for another one    |
| TIMEOUT           | that is starting the embedded server, before SC033 (default 60).       |

The agent an MCP server or worker acts as is never read from the environment:
it is named on the command line.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, ValidationError

DATABASE = "scsql"
APP_ROLE = "scsql_app"
AGENT_ROLE_PREFIX = "scsql_agent_"


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True)

    dsn: str | None = None
    agent_dsn: str | None = None
    data_dir: Path
    keystore: Path
    start_timeout: float = Field(default=60.0, gt=0, le=3600)

    @property
    def embedded(self) -> bool:
        return self.dsn is None

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pg"

    @classmethod
    def load(cls, data_dir: str | Path | None = None) -> Settings:
        env = os.environ
        root = Path(data_dir or env.get("SCSQL_DATA_DIR") or platformdirs.user_data_dir("scsql")).expanduser()
        root = root.resolve()
        keystore = Path(env.get("SCSQL_KEYSTORE") or root / "keys").expanduser().resolve()
        extra = {}
        if env.get("SCSQL_START_TIMEOUT"):
            extra["start_timeout"] = env["SCSQL_START_TIMEOUT"]
        try:
            return cls(
                dsn=env.get("SCSQL_DSN") or None,
                agent_dsn=env.get("SCSQL_AGENT_DSN") or None,
                data_dir=root,
                keystore=keystore,
                **extra,
            )
        except ValidationError:
            from .errors import ScsqlError

            raise ScsqlError("SC010", f"SCSQL_START_TIMEOUT must be a number of seconds from 0 to 3600, "
                                      f"got {env.get('SCSQL_START_TIMEOUT')!r}", "unset it for the default, 60") from None


def role_for(agent: str) -> str:
    """The PostgreSQL role of an agent."""
    return AGENT_ROLE_PREFIX + agent
