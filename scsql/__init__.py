"""scsql: memory, audit and coordination for AI coding agents, inside PostgreSQL."""

__version__ = "0.1.0"
