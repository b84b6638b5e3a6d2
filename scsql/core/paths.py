"""Paths of a project's tree as the file system resolves them.

The database compares paths only as text (``scsql._normalize_path``: NFC,
case folded, "." and ".." read lexically); a symbolic link, and a root
spelled through one (``/tmp`` for ``/private/tmp``), is visible only on the
machine that has the files. :func:`resolve_in_root` is the one place that
resolves them, for the paths a task takes exclusively (``enqueue_task``) and
for the path an edit would change (the PreToolUse check), so both name a
file the same way.
"""

from __future__ import annotations

import os

from .errors import ScsqlError
from . import errors

PATH_CHARS = 4096


def real_root(root: str | None) -> str | None:
    """ROOT's real path when it is a directory of this machine, else None."""
    if not root or not root.startswith("/"):
        return None
    try:
        real = os.path.realpath(root)
    except (OSError, ValueError):
        return None
    return real if os.path.isdir(real) else None


def resolve_in_root(root: str | None, given: str) -> str:
    """GIVEN (relative to ROOT, or absolute) as the file system resolves it,
    relative to ROOT's real path: ``link/a.py`` with ``link -> src`` is
    ``src/a.py``, and ``/tmp/p/a.py`` under a root ``/private/tmp/p`` is
    ``a.py``. SC321 when it resolves outside ROOT. GIVEN unchanged when ROOT
    is not a directory of this machine, or GIVEN is not a usable path (the
    database then judges it as text)."""
    top = real_root(root)
    if top is None or not given or "\x00" in given or len(given) > PATH_CHARS:
        return given
    try:
        real = os.path.realpath(given if given.startswith("/") else os.path.join(top, given))
    except (OSError, ValueError):
        return given
    if real != top and not real.startswith(top.rstrip("/") + "/"):
        raise ScsqlError(errors.PATH_OUTSIDE_PROJECT, f"path {given!r} leaves the project root {root}: it resolves to {real}",
                         "name the file inside the project, not through a symbolic link that leads out of it")
    return os.path.relpath(real, top)
