"""Error codes have one definition: the database's catalogue
(scsql.error_codes, sql/*.sql). The package names each code it raises or
tests for once, in scsql/core/errors.py, by the catalogue's name in upper
case, and writes no code as a literal anywhere else."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

from scsql.core import errors

PACKAGE = Path(__file__).resolve().parent.parent.parent / "scsql"
CODE = re.compile(r"""^["']SC\d{3}["']$""")


def test_no_module_writes_an_error_code_as_a_literal():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "core" / "errors.py":
            continue
        for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
            if tok.type == tokenize.STRING and CODE.match(tok.string):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{tok.start[0]} {tok.string}")
    assert found == [], "name the code in scsql/core/errors.py and use errors.NAME:\n" + "\n".join(found)


def test_each_named_code_is_the_catalogues_under_its_name(scsql_db):
    named = {k: v for k, v in vars(errors).items() if isinstance(v, str) and re.fullmatch(r"SC\d{3}", v)}
    assert len(named) > 40
    with scsql_db.connect() as conn:
        catalogue = {r["code"]: r["name"] for r in conn.execute("select code, name from scsql.error_codes")}
    wrong = {k: (v, catalogue.get(v)) for k, v in named.items() if catalogue.get(v) != k.lower()}
    assert wrong == {}, "constant: (code, the catalogue's name for it)"
