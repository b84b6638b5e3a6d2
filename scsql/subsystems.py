"""Every subsystem of scsql and what it adds, declared in one place, and
the bundle of them the entry points run (``BUNDLE``).

The types are core's (``core/app.py``: a subsystem adds adapters, jobs
and commands; a command runs in a context that carries the bundle). This
module and the other entry points (``cli.py``, ``api.py``) are the only
ones that know every subsystem: nothing below them imports them, and a
command reaches the other subsystems' adapters and jobs through its
context (``ctx.api``, ``ctx.jobs``). tests/system/test_imports.py holds the
package to that.

Each contribution below imports its subsystem when first asked. For the
same reason a command module (``*/cli.py``) imports at its top only what
building its parser needs, and each command imports what it drives when it
runs; ``scsql bench`` describes its benchmarks only when it is used
(tests/core/test_cli_start.py checks what the everyday commands import).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .core.app import Bundle, Subsystem

if TYPE_CHECKING:  # the command line builds its parser without importing them
    from .core.app import Context
    from .core.command import Commands
    from .core.registry import Adapter
    from .core.worker import Job


# -- core: the server, projects, agents ------------------------------------------


def _core_commands(commands: Commands) -> None:
    from .core import cli

    cli.register(commands)


# -- status, mcp, worker, verify: the commands composed of several subsystems ----


def _composed_commands(commands: Commands) -> None:
    from . import composed

    composed.register(commands, BUNDLE)


# -- audit: chained, signed telemetry; verification; checkpoints; partitions ---


def _audit_adapters() -> dict[str, Adapter]:
    from .audit import telemetry

    return telemetry.ADAPTERS


def _audit_commands(commands: Commands) -> None:
    from .audit import cli

    cli.register(commands)


# -- memory: the knowledge base, facts, search, embeddings, learnings ----------


def _memory_adapters() -> dict[str, Adapter]:
    from .memory import adapters, learning

    return {**adapters.ADAPTERS, **learning.ADAPTERS}


def _memory_jobs(ctx: Context) -> list[Job]:
    from .memory import embed, learning

    return [*embed.jobs(), *learning.jobs()]


def _memory_commands(commands: Commands) -> None:
    from .memory import cli

    cli.register(commands)


def _memory_watchers() -> list[Callable[..., Any]]:
    from .memory import fresh

    return [fresh.Fresh]  # the hook server indexes edited files again (chunks and symbols)


# -- coordination: the task queue, broadcasts, file ownership -----------------


def _coordination_adapters() -> dict[str, Adapter]:
    from .coordination import client

    return client.ADAPTERS


def _coordination_jobs(ctx: Context) -> list[Job]:
    from .coordination import client

    return client.jobs()


def _coordination_commands(commands: Commands) -> None:
    from .coordination import cli

    cli.register(commands)


# -- the benchmarks --------------------------------------------------------------


def _bench_commands(commands: Commands) -> None:
    from . import bench

    bench.register(commands)


# -- hooks: capture and recall through Claude Code hooks ------------------------


def _hooks_jobs(ctx: Context) -> list[Job]:
    from .hooks import daemon

    return daemon.jobs(ctx.settings.data_dir)


def _hooks_commands(commands: Commands) -> None:
    from .hooks import cli, importer, install

    cli.register(commands)  # extends the ``hook`` group coordination made
    install.register_install(commands)
    importer.register(commands)


# -- code: the symbol graph, repo map, cards; search that knows symbols -------


def _code_adapters() -> dict[str, Adapter]:
    from .code import search

    return search.ADAPTERS


def _code_commands(commands: Commands) -> None:
    from .code import cli

    cli.register(commands)


# -- distill: a model turns sessions into facts, decisions and open loops ------


def _distill_jobs(ctx: Context) -> list[Job]:
    from . import distill

    return distill.jobs()


def _distill_commands(commands: Commands) -> None:
    from . import distill

    distill.register(commands)


# -- ops: scsql doctor, scsql metrics, search latency timing, backup, restore, -
# -- and the worker's maintenance of audit's partitions -------------------------


def _ops_adapters() -> dict[str, Adapter]:
    from .ops import metrics

    return metrics.adapters()


def _ops_jobs(ctx: Context) -> list[Job]:
    from .audit import partitions

    return [partitions.maintenance_job(ctx.admin_conninfo)]


def _ops_commands(commands: Commands) -> None:
    from .ops import cli

    cli.register(commands)


# -- ui: scsql ui, its /api/v1 and scsql report (sql/60_viewer.sql) -----------


def _ui_commands(commands: Commands) -> None:
    from .ui import cli

    cli.register(commands)


# -- serve: the team server (MCP and hook events over HTTP) and its tokens -----


def _serve_commands(commands: Commands) -> None:
    from .serve import cli

    cli.register(commands)  # extends the ``agent`` command core made


SUBSYSTEMS: tuple[Subsystem, ...] = (
    Subsystem("core", commands=_core_commands),
    Subsystem("composed", commands=_composed_commands),
    Subsystem("audit", adapters=_audit_adapters, commands=_audit_commands),
    Subsystem("memory", adapters=_memory_adapters, jobs=_memory_jobs, commands=_memory_commands,
              watchers=_memory_watchers),
    Subsystem("coordination", adapters=_coordination_adapters, jobs=_coordination_jobs,
              commands=_coordination_commands),
    Subsystem("bench", commands=_bench_commands),
    Subsystem("hooks", jobs=_hooks_jobs, commands=_hooks_commands),
    Subsystem("code", adapters=_code_adapters, commands=_code_commands),
    Subsystem("serve", commands=_serve_commands),
    Subsystem("distill", jobs=_distill_jobs, commands=_distill_commands),
    # listed last: its timing wraps the search, its maintenance runs after the other jobs
    Subsystem("ops", adapters=_ops_adapters, jobs=_ops_jobs, commands=_ops_commands),
    Subsystem("ui", commands=_ui_commands),
)

BUNDLE = Bundle(SUBSYSTEMS)


def context(data_dir: str | Path | None = None) -> Context:
    """The context of a command: the settings (of DATA_DIR, --data-dir,
    when given), with every subsystem."""
    from .core.app import Context
    from .core.config import Settings

    return Context(Settings.load(data_dir), BUNDLE)


def adapters() -> dict[str, Adapter]:
    """Every subsystem's adapters, by function name (two of one function composed)."""
    return BUNDLE.adapters()


def jobs(only: list[str] | None = None) -> list[Job]:
    """The background jobs of every subsystem, for the default settings (those named in ``only``, when given)."""
    return BUNDLE.jobs(context(), only)
