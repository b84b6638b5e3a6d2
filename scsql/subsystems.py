"""What each subsystem adds to scsql, declared in one place.

scsql's SQL is split by subsystem (sql/10-13 audit, 20-25 memory, 30-31
coordination, 40 integration), and so is the Python package: ``core`` (the
server, identity, keys, migrations, the catalogue of functions and the
worker loop), ``audit``, ``memory`` and ``coordination``. A subsystem may
contribute three things, and this module names them, so nothing is found by
importing lists of module names:

* **adapters**: Python help around some of the catalogue's functions (see
  ``core/registry.py``), by function name. When two subsystems adapt one
  function, the one listed later runs around the one listed earlier (a
  learning is indexed around the signed write of its outcome);
* **jobs**: background work ``scsql worker`` drains (``core/worker.py``);
* **commands**: subcommands of the ``scsql`` command line.

Each is a function that imports its subsystem when first asked, so a
command that needs neither the embedding model nor the MCP SDK never loads
them. For the same reason a command module (``*/cli.py``) imports at its top
only what building its parser needs, and each command imports what it drives
when it runs; ``scsql bench`` describes its benchmarks only when it is used
(tests/test_cli_start.py checks what the everyday commands import).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the command line builds its parser without importing them
    from .core.registry import Adapter
    from .core.worker import Job


@dataclass(frozen=True)
class Subsystem:
    name: str
    adapters: Callable[[], dict[str, Adapter]] = dict
    jobs: Callable[[], list[Job]] = list
    commands: Callable[[Any, Callable], None] = lambda sub, add: None


# -- audit: chained, signed telemetry; verification; checkpoints; partitions ---


def _audit_adapters() -> dict[str, Adapter]:
    from .audit import telemetry

    return telemetry.ADAPTERS


def _audit_commands(sub: Any, add: Callable) -> None:
    from .audit import cli

    cli.register(sub, add)


# -- memory: the knowledge base, facts, search, embeddings, learnings ----------


def _memory_adapters() -> dict[str, Adapter]:
    from .memory import adapters, learning

    return {**adapters.ADAPTERS, **learning.ADAPTERS}


def _memory_jobs() -> list[Job]:
    from .memory import embed, learning

    return [*embed.jobs(), *learning.jobs()]


def _memory_commands(sub: Any, add: Callable) -> None:
    from .memory import cli

    cli.register(sub, add)


# -- coordination: the task queue, broadcasts, file ownership -----------------


def _coordination_adapters() -> dict[str, Adapter]:
    from .coordination import client

    return client.ADAPTERS


def _coordination_jobs() -> list[Job]:
    from .coordination import client

    return client.jobs()


def _coordination_commands(sub: Any, add: Callable) -> None:
    from .coordination import cli

    cli.register(sub, add)


# -- the worker and the benchmarks ---------------------------------------------


def _core_commands(sub: Any, add: Callable) -> None:
    from .core import cli

    cli.register(sub, add)


def _bench_commands(sub: Any, add: Callable) -> None:
    from . import bench

    bench.register(sub, add)


# -- hooks: capture and recall through Claude Code hooks ------------------------


def _hooks_jobs() -> list[Job]:
    from .hooks import daemon

    return daemon.jobs()


def _hooks_commands(sub: Any, add: Callable) -> None:
    from .hooks import cli, importer, install

    cli.register(sub, add)  # extends the ``hook`` group coordination made
    install.register_install(sub, add)
    importer.register(sub, add)


# -- ops: scsql doctor, scsql metrics, search latency timing, backup, restore -


def _ops_adapters() -> dict[str, Adapter]:
    from .ops import metrics

    return metrics.adapters()


def _ops_commands(sub: Any, add: Callable) -> None:
    from .ops import cli

    cli.register(sub, add)


# -- serve: the team server (MCP and hook events over HTTP) and its tokens -----


def _serve_commands(sub: Any, add: Callable) -> None:
    from .serve import cli

    cli.register(sub, add)  # extends the ``agent`` command core made


SUBSYSTEMS: tuple[Subsystem, ...] = (
    Subsystem("core", commands=_core_commands),
    Subsystem("audit", adapters=_audit_adapters, commands=_audit_commands),
    Subsystem("memory", adapters=_memory_adapters, jobs=_memory_jobs, commands=_memory_commands),
    Subsystem("coordination", adapters=_coordination_adapters, jobs=_coordination_jobs,
              commands=_coordination_commands),
    Subsystem("bench", commands=_bench_commands),
    Subsystem("hooks", jobs=_hooks_jobs, commands=_hooks_commands),
    Subsystem("serve", commands=_serve_commands),
    Subsystem("ops", adapters=_ops_adapters, commands=_ops_commands),  # listed last: its timing wraps the search
)


@cache
def _adapters() -> dict[str, Adapter]:
    merged: dict[str, Adapter] = {}
    for subsystem in SUBSYSTEMS:
        for name, adapter in subsystem.adapters().items():
            merged[name] = adapter.wrapping(merged[name]) if name in merged else adapter
    return merged


def adapters() -> dict[str, Adapter]:
    """Every subsystem's adapters, by function name (two of one function composed)."""
    return dict(_adapters())


def jobs(only: list[str] | None = None) -> list[Job]:
    """The background jobs of every subsystem (those named in ``only``, when given)."""
    found = [j for subsystem in SUBSYSTEMS for j in subsystem.jobs()]
    return [j for j in found if only is None or j.name in only]


def register_commands(sub: Any, add: Callable) -> None:
    """Every subsystem's subcommands of ``scsql``."""
    for subsystem in SUBSYSTEMS:
        subsystem.commands(sub, add)
