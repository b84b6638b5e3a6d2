"""Operations: ``scsql doctor`` (doctor.py), ``scsql metrics`` (metrics.py), ``scsql backup``
and ``scsql restore`` (backup.py); the database side is sql/50_operations.sql."""
