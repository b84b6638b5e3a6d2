"""The hook server's process (``hookclient.BOOT`` starts it): the agent's
hook server (``hooks/daemon.py``) with what the subsystems have it run
beside its handlers (``Subsystem.watchers``: the knowledge base indexes
edited files again). An entry point like ``cli.py``: it knows the bundle of
subsystems, and nothing below it imports it. It imports little: the hook
that started the server waits for it to listen.
"""

from __future__ import annotations


def main(argv: list[str]) -> int:
    from .hooks import daemon
    from .subsystems import BUNDLE

    return daemon.main(argv, watchers=BUNDLE.watchers())
