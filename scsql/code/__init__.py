"""Code knowledge: a symbol graph of the project's files in the database.

``parse.py`` turns one file into its definitions and references (tree-sitter
grammars installed from the package index; nothing is downloaded when a
file is parsed); ``index.py`` stores them, in the transaction that stores
the file's chunks (``scsql index``: memory/indexer.py; an edit, in the hook
server: memory/fresh.py). What is built on the graph, the repo map, the file
and project cards and the graph queries, is SQL: sql/70_code.sql. The
package stands on core alone.

Importing this package imports nothing else: the grammars load when a file
is first parsed.
"""
