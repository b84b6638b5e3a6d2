"""The hook process Claude Code runs: ``python -S -I <this file> EVENT --agent
NAME --home DIR``. The code is in :mod:`.hookclient` (standard library only);
this file is kept small because Python compiles the script it runs on every
start, while an imported module is loaded from its cached bytecode (written
by the first run: -I ignores PYTHONDONTWRITEBYTECODE). Compiling the whole
client cost 10-40 ms a hook on a loaded machine.

Imported as ``scsql.hooks.client``, it is :mod:`.hookclient` itself.
"""

if __name__ == "__main__":
    import sys

    sys.path.insert(0, __file__.rpartition("/")[0] or ".")
    from hookclient import main

    sys.exit(main())
else:
    import sys

    from . import hookclient

    sys.modules[__name__] = hookclient
