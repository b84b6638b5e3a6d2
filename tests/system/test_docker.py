"""The Docker image in docker/: PostgreSQL 18 with pgvector and pg_partman.

Builds the image with testcontainers, then runs the migration and identity
tests against it (SCSQL_TEST_DSN). Skips where no Docker engine runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent


def _docker_engine_or_skip():
    try:
        import docker

        client = docker.from_env()
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure means no usable engine
        pytest.skip(f"no Docker engine is reachable here ({type(exc).__name__}); "
                    "this test runs where Docker runs")
    return client


@pytest.mark.docker
def test_image_runs_migrations_and_identity_tests():
    _docker_engine_or_skip()
    from testcontainers.core.image import DockerImage
    from testcontainers.postgres import PostgresContainer

    with DockerImage(path=str(REPO / "docker"), tag="scsql-postgres:test") as image, \
            PostgresContainer(str(image), username="postgres", password="scsql", dbname="postgres",
                              driver=None) as pg:
        dsn = pg.get_connection_url()
        env = {**os.environ, "SCSQL_TEST_DSN": dsn}
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             str(REPO / "tests" / "core" / "test_migrations.py"), str(REPO / "tests" / "core" / "test_identity.py"),
             str(REPO / "tests" / "system" / "test_catalog.py")],
            env=env, capture_output=True, text=True, timeout=1800,
        )
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
        import psycopg

        with psycopg.connect(dsn) as conn:
            exts = dict(conn.execute("select extname, extversion from pg_extension").fetchall())
        assert "vector" in exts and "pg_partman" in exts
