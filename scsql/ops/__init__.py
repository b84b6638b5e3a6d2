"""Operations: ``scsql doctor`` (doctor.py) and ``scsql metrics`` (metrics.py);
the database side is sql/50_operations.sql."""
