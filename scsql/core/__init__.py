"""The foundation every subsystem stands on: settings (config), connections
acting as one agent (db), the error catalogue (errors), projects, agents and
their roles (roles), key files (keys), migrations (migrate), the embedded
server (embedded), the catalogue of SQL functions as Python calls (registry),
the background worker loop (worker) and its command (cli)."""
