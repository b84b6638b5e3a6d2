"""Distillation: a model, outside the database, turns sessions into facts,
decisions, open loops and summaries, written by the project's distiller
agent with the rows they came from (sql/65_distill.sql, docs/distill.md).

``answer.py`` is what the model must answer, ``model.py`` how its command
runs, ``job.py`` the ``distill`` job of ``scsql worker``, ``cli.py`` the
``scsql distill`` commands. ``scsql/subsystems.py`` lists the two functions
below; each imports its module only when asked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..core.command import Commands


def jobs() -> list:
    """The ``distill`` job of ``scsql worker``."""
    from . import job

    return job.jobs()


def register(commands: Commands) -> None:
    """The ``scsql distill`` commands."""
    from . import cli

    cli.register(commands)
