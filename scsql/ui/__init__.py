"""``scsql ui``, its ``/api/v1`` and ``scsql report``: a read-only view of
what the database holds, as one identity (an agent, or the auditor).

Every page and every API path is one or a few stored functions of
``sql/60_viewer.sql`` (the ``viewer_*`` functions, plus the existing
``status``, ``metrics``, ``capture_counts``, ``search`` ...), called on a
read-only connection that acts as the identity, so row-level security
decides what is shown, exactly as in ``scsql psql --agent NAME`` or
``--auditor``. Python chooses the connection, renders HTML (Jinja2, every
value escaped) and JSON, and signs reports.

* ``source.py``: the identity's read-only connection and the functions it may call;
* ``catalogue.py``: those functions read from the catalogue (names, arguments, comments);
* ``app.py``: the Starlette application: pages, ``/api/v1``, live timelines, the token;
* ``report.py``: ``scsql report``, signed JSON or HTML, and its verification;
* ``cli.py``: the commands; ``bench.py``: ``scsql bench ui``.
"""
