"""scsql's API as one agent's Python calls: every function of the catalogue
the agent may execute (``core/registry.py``), each with the adapters the
subsystems declare for it (``subsystems.py``). The command line, the MCP
tools and the benchmarks reach the same through their context
(``ctx.api(agent)``); a program of its own uses this::

    api = Api(agent)
    api.call("remember", key="build", value="make test", importance=4)
"""

from __future__ import annotations

from . import subsystems
from .core.db import Agent
from .core.registry import Catalogue


class Api(Catalogue):
    """The functions ``agent`` may call, with every subsystem's adapters."""

    def __init__(self, agent: Agent):
        super().__init__(agent, subsystems.adapters())
