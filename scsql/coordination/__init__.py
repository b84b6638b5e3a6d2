"""Coordination (sql/30-31): the client side of the task queue and broadcasts
(client: waiting for work, signed broadcasts, file paths, the queue's job)
and the coordination commands (cli)."""
