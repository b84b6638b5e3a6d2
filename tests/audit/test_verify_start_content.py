"""Verification from a checkpoint checks the content of the row the
checkpoint names, as verification of every row does: its hash covers a
purgeable text through the text's sha256, so a text put in its place other
than it was is a content-mismatch there, in both verifiers, and one removed
by no recorded purge a purge-unrecorded."""

from __future__ import annotations

from scsql.api import Api

from ..helpers import tamper, trail  # noqa: F401 - trail is a fixture


def _checkpoint(db) -> int:
    from scsql.audit.checkpoints import record_checkpoints
    from tests.audit.test_verify import _auditor_key

    record_checkpoints(db.admin, _auditor_key(db), progress=False)
    with db.connect() as conn:
        return conn.execute("select max(checkpoint_id) as id from scsql.checkpoints").fetchone()["id"]


def test_the_starting_rows_purgeable_text_is_checked(trail, verifier):
    db, a, b, ca, cb = trail
    cp = _checkpoint(db)                             # A's head: the outcome at seq 6
    Api(a).call("record_tool_call", tool="after")    # seq 7
    assert verifier.breaks(db, from_checkpoint=cp) == []
    # The outcome's summary is hashed through its digest: the row's hash, and the
    # hash the checkpoint signed, still match; only the text tells.
    tamper(db, f"update scsql.outcomes set summary = 'not what was said' where chain_id = {ca} and seq = 6")
    assert verifier.breaks(db) == [(ca, 6, "content-mismatch")]
    assert verifier.breaks(db, from_checkpoint=cp) == [(ca, 6, "content-mismatch")]


def test_the_starting_rows_text_removed_without_a_purge_is_found(trail, verifier):
    db, a, b, ca, cb = trail
    cp = _checkpoint(db)
    Api(a).call("record_tool_call", tool="after")
    tamper(db, f"update scsql.outcomes set summary = null where chain_id = {ca} and seq = 6")
    assert verifier.breaks(db, from_checkpoint=cp) == [(ca, 6, "purge-unrecorded")]


def test_the_newest_row_as_the_start_is_checked_too(trail, verifier):
    """The checkpoint's head is the chain's last row: nothing follows it."""
    db, a, b, ca, cb = trail
    cp = _checkpoint(db)
    tamper(db, f"update scsql.outcomes set summary = 'not what was said' where chain_id = {ca} and seq = 6")
    assert verifier.breaks(db, from_checkpoint=cp) == [(ca, 6, "content-mismatch")]
