"""The wheel carries everything scsql needs at run time: every module and
every SQL file, so an installed scsql can migrate without a checkout."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


def test_wheel_contains_every_module_and_sql_file(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                    "-w", str(tmp_path), str(REPO)], check=True, capture_output=True, timeout=300)
    wheel = next(tmp_path.glob("scsql-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"scsql/{p.relative_to(REPO / 'scsql')}" for p in (REPO / "scsql").rglob("*")
                if p.is_file() and "__pycache__" not in p.parts}
    for kind in ("migrations", "sql", "policies"):
        expected |= {f"scsql/{kind}/{p.name}" for p in (REPO / kind).glob("*.sql")}
    expected.add("scsql/migrations/sequence.txt")  # the order they are applied in
    assert sorted(expected - names) == []


def test_installed_layout_finds_its_sql(tmp_path):
    """Unpacked as pip installs it, scsql finds its SQL files inside the package."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
                   check=True, capture_output=True, timeout=300)
    site = tmp_path / "site"
    zipfile.ZipFile(next(tmp_path.glob("scsql-*.whl"))).extractall(site)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import scsql.core.migrate as m; "
            "assert m.__file__.startswith(sys.argv[1]), m.__file__; print(m.Migrator('').script())")
    out = subprocess.run([sys.executable, "-c", code, str(site)], check=True, capture_output=True, text=True,
                         cwd=tmp_path, timeout=60).stdout
    assert "create table scsql.agents" in out and "scsql.whoami" in out
