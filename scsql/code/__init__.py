"""Code knowledge: a symbol graph of the project's files in the database.

``parse.py`` turns one file into its definitions and references (tree-sitter
grammars installed from the package index; nothing is downloaded when a
file is parsed); ``index.py`` stores them with the file's chunks, one file a
transaction, and keeps them fresh as agents edit (``fresh.py``, in the hook
server). What is built on the graph, the repo map, the file and project
cards and the graph queries, is SQL: sql/70_code.sql.

Importing this package imports nothing else: the grammars load when a file
is first parsed.
"""
