"""docs/reference.md is generated from the database's catalogue
(scsql/ops/reference.py): a freshly migrated database renders it, and the
committed file must be exactly that. After changing a function, its comment,
its grants or an error code, regenerate it with

    SCSQL_WRITE_REFERENCE=1 python -m pytest tests/ops/test_reference.py
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

import psycopg
import pytest

from scsql.ops import reference

REFERENCE = Path(__file__).resolve().parent.parent.parent / "docs" / "reference.md"


def _render(scsql_db) -> str:
    with psycopg.connect(scsql_db.admin) as conn:
        return reference.render(conn)


def _catalogue(scsql_db, query: str) -> list[str]:
    with psycopg.connect(scsql_db.admin) as conn:
        return [r[0] for r in conn.execute(query).fetchall()]


def test_the_committed_reference_is_the_generated_one(scsql_db):
    generated = _render(scsql_db)
    if os.environ.get("SCSQL_WRITE_REFERENCE"):
        REFERENCE.write_text(generated)
    committed = REFERENCE.read_text() if REFERENCE.exists() else ""
    if committed != generated:
        diff = difflib.unified_diff(committed.splitlines(), generated.splitlines(),
                                    "docs/reference.md (committed)", "docs/reference.md (generated)", lineterm="")
        shown = "\n".join(list(diff)[:80])
        pytest.fail(f"docs/reference.md is not what the catalogue generates; regenerate it with\n"
                    f"    {reference.REGENERATE}\n{shown}")


def test_every_public_function_and_error_code_is_in_it(scsql_db):
    """The generator leaves nothing out: a section per public function or procedure of
    schema scsql, its file's table links to it, and a row per error code."""
    text = _render(scsql_db)
    names = _catalogue(scsql_db, "select proname from pg_proc where pronamespace = 'scsql'::regnamespace "
                                 "and proname !~ '^_' and prokind in ('f', 'p')")
    assert len(names) > 50
    for name in names:
        assert f"\n### scsql.{name}\n" in text, name
        assert f"| [{name}](#scsql{name}) |" in text, name
    for code in _catalogue(scsql_db, "select code from scsql.error_codes"):
        assert re.search(rf"^\| {code} \| `", text, re.M), code
    assert not re.search(r"^### scsql\._", text, re.M), "a private function is in the reference"


def test_a_comment_reads_as_the_tool_list_and_psql_read_it(scsql_db):
    """Arguments come from the comment's p_ lines, hidden tools say why, the roles
    come from the grants, and text that would read as HTML is kept."""
    text = _render(scsql_db)
    remember = text[text.index("\n### scsql.remember\n"):].split("\n### ", 2)[1]
    assert "Called by agents; the MCP tool `remember`." in remember
    assert "- `importance` (1..5): 5 is kept longest" in remember
    assert "[REDACTED:&lt;kind>]" in remember  # not swallowed as an HTML tag
    assert "p_key: " not in remember  # argument lines are read, not repeated
    tool_call = text[text.index("\n### scsql.record_tool_call\n"):].split("\n### ", 2)[1]
    assert "left out of the default tool list (the Claude Code hooks record every tool call)" in tool_call
    assert "returns (tool_call_id bigint, chain_id bigint, seq bigint, cost_usd numeric)" in tool_call
    revoke = text[text.index("\n### scsql.revoke_agent\n"):].split("\n### ", 2)[1]
    assert "Called by administrators." in revoke and "MCP tool" not in revoke
    assert "| [revoke_agent](#scsqlrevoke_agent) | Revokes agent NAME" in text  # past "Administrators only."


def test_a_changed_comment_changes_the_reference(scsql_db):
    """What the test above compares is the catalogue: a comment changed in the
    database (as a new sql/ file would change it) is a different reference."""
    before = _render(scsql_db)
    with psycopg.connect(scsql_db.admin, autocommit=True) as conn:
        conn.execute("comment on function scsql.whoami() is 'Who you are.'")
    after = _render(scsql_db)
    assert after != before
    assert "| [whoami](#scsqlwhoami) | Who you are. |" in after
