"""The foundation every subsystem stands on, importing none of them: settings
(config), connections acting as one agent (db), the error catalogue
(errors), projects, agents and their roles (roles), key files (keys),
migrations (migrate), the embedded server (embedded), the catalogue of SQL
functions as Python calls (registry) and jsonb's text of a JSON value
(jsonb), the background worker loop (worker); the types the package is
assembled with (app: a subsystem, the bundle of them, a command's context)
and the command kit (command); and the commands of the foundation (cli)."""
