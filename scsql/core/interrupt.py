"""Ctrl-C for the commands that run until stopped (``scsql worker``, ``scsql
mcp``, ``scsql metrics --listen``): they say "Ctrl-C stops it", and it must.

A process whose parent ignored SIGINT starts with SIGINT ignored, and Python
then leaves it so: a shell without job control does this for every command
it starts with ``&``, and so do some CI runners. Such a command would run on
through Ctrl-C (and a test that stops it with SIGINT would wait in vain).
"""

from __future__ import annotations

import signal


def ctrl_c_stops() -> None:
    """Have SIGINT raise KeyboardInterrupt in this process (the command then
    exits with status 130), as in one started from a terminal, even when its
    parent ignored SIGINT. Call it from the main thread, as a command starts."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
