"""The team server: ``scsql serve`` serves the MCP tools (streamable HTTP)
and the Claude Code hook events to remote agents, each request acting as the
agent its bearer token names, under that agent's role and row-level
security, as over stdio. ``tokens.py`` makes and checks the tokens,
``app.py`` is the HTTP application, ``limits.py`` its rate and size limits,
and ``cli.py`` registers the commands. What ``scsql install claude --server``
asks of a server is the hook client's (``scsql/hooks/remote.py``).
"""
