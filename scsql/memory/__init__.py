"""Memory (sql/20-25): embeddings (embed), walking a tree to index
(indexer), the Python help around the memory functions (adapters), learnings
into the knowledge base (learning), and the memory commands (cli)."""
