"""One vocabulary of chain breaks for the two verifiers: scsql verify
(Python) and scsql.verify_chain (SQL) stay independent, and what each can
report is what the catalogue scsql.chain_break_kinds lists. The SQL
verifier's findings are checked against it in every tamper test
(tests/helpers.py, SqlVerifier); the Python verifier refuses to make a
break of an unlisted kind (scsql.audit.verify.Break)."""

from __future__ import annotations

import re

import pytest

from scsql.audit import verify

from ..helpers import triggers_off, trail  # noqa: F401 - trail is a fixture


def _catalogue(db) -> dict[str, dict]:
    with db.connect() as conn:
        conn.execute("set role scsql_auditor")
        return {r["kind"]: r for r in conn.execute("select * from scsql.chain_break_kinds")}


def test_the_python_verifier_reports_exactly_the_catalogues_kinds(scsql_db):
    catalogue = _catalogue(scsql_db)
    assert set(catalogue) == verify.KINDS
    assert {k for k, r in catalogue.items() if r["excusable"]} == verify.EXCUSABLE
    assert all(r["meaning"].strip() for r in catalogue.values())
    with pytest.raises(ValueError, match="not in scsql.chain_break_kinds"):
        verify.Break(1, 1, "hash-mismatched", "a kind nobody defined")


def test_the_sql_verifier_names_every_kind_both_find_and_no_other(scsql_db):
    """Every kind scsql.verify_chain's source can return is in the catalogue as
    found by both, and every kind the catalogue says both find is in it."""
    both = {k for k, r in _catalogue(scsql_db).items() if r["found_by"] == "both"}
    with scsql_db.connect() as conn:  # verify_chain and the private functions it calls, and those they call
        names, seen, source = {"verify_chain"}, set(), ""
        while names - seen:
            found = "\n".join(r["src"] for r in conn.execute(
                "select pg_get_functiondef(p.oid) as src from pg_proc p"
                " where p.pronamespace = 'scsql'::regnamespace and p.proname = any(%s)", (sorted(names - seen),)))
            seen |= names
            names |= set(re.findall(r"scsql\.(_\w+)\(", found))
            source += "\n" + found
    # Kinds of one word are also returned as a CASE's values (the per-row check, scsql._chain_row_fault):
    # a quoted word counts when it is a kind both find.
    named = (set(re.findall(r"'([a-z]+(?:-[a-z]+)+)'", source)) | set(re.findall(r"kind := '([a-z-]+)'", source))
             | set(re.findall(r"'([a-z]+)'", source)) & both)
    assert named == both


def test_a_tampered_row_is_the_same_catalogued_kind_to_both_verifiers(trail, verifier):
    db, _a, _b, chain_a, _chain_b = trail
    with db.connect() as conn:
        triggers_off(conn)
        conn.execute("update scsql.tool_calls set tool = 'edited' where chain_id = %s and seq = 2", (chain_a,))
    kinds = {k for _, _, k in verifier.breaks(db)}
    assert kinds == {"hash-mismatch"} and kinds <= set(_catalogue(db))


def test_the_per_row_check_is_written_once_and_inlined(trail):
    """scsql._chain_row_fault, the one check of a row by what it holds (author,
    project, hash, content, replay, a signed hash), is a plain SQL expression the
    planner inlines where the walk evaluates it: verify_chain calls it for no row,
    while the walk is counted, so the count is real; and a tampered row is still
    found by it (hash-mismatch)."""
    db, _a, _b, chain_a, _chain_b = trail
    with db.connect() as conn:
        conn.execute("set local track_functions = 'all'")
        conn.execute("set local role scsql_auditor")
        r = conn.execute("select * from scsql.verify_chain(%s)", (chain_a,)).fetchone()
        calls = {c["f"]: c["n"] for c in conn.execute(
            "select f, pg_stat_get_xact_function_calls(f::regproc) as n"
            " from unnest(array['scsql._chain_row_fault', 'scsql._chain_walk']) f").fetchall()}
        conn.rollback()
    assert r["ok"] and r["rows_checked"] == 6
    assert calls["scsql._chain_walk"] == 1 and calls["scsql._chain_row_fault"] is None, calls
    with db.connect() as conn:
        triggers_off(conn)
        conn.execute("update scsql.tool_calls set output_tokens = 7 where chain_id = %s and seq = 3", (chain_a,))
        conn.commit()
        conn.execute("set role scsql_auditor")
        r = conn.execute("select * from scsql.verify_chain(%s)", (chain_a,)).fetchone()
    assert (r["ok"], r["broken_seq"], r["kind"]) == (False, 3, "hash-mismatch")
