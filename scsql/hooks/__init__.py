"""Capture and recall through Claude Code hooks.

``events.py`` names the hook events scsql answers and the command line each
runs; ``client.py`` is the hook process itself (standard library only, so it
starts in milliseconds) and hands each event to the agent's long-lived hook
server (``daemon.py``), which holds the agent's key and connection and runs
the handlers (``handlers.py``); when the server or the database cannot be
reached, the client answers at once, allows the call, and spools the event
for the server to replay. ``transcript.py`` reads Claude Code transcripts
(summaries at PreCompact and SessionEnd, ``scsql import claude``), and
``install.py`` writes and removes the hook and MCP configuration
(Claude Code's files, as ``settings.py`` reads and edits them).
"""
