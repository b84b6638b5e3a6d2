"""Audit (sql/10-13): the canonical row encoding (encoding), signing chained
writes with the agent's key (signing), the telemetry writes (telemetry),
verification of every chain (verify), auditor checkpoints and partition
retention (partitions), and their commands (cli). Verification and
checkpoints act as the auditor role (``core.config.AUDITOR_ROLE``)."""
