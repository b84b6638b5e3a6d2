"""Appended fields: a chained table gains signed columns after it has rows,
and the rows written before keep their bytes, hashes and signatures."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from decimal import Decimal

import psycopg
import pytest

from scsql.api import Api
from scsql.audit import encoding
from scsql.audit.signing import SignedField, SignedTable

from ..helpers import tamper

V1 = [SignedField("body", "text")]
V2 = V1 + [SignedField("tag", "text", appended=True)]
V3 = V2 + [SignedField("n", "int", appended=True), SignedField("j", "jsonb", appended=True)]


def _create_probes(conn) -> None:
    """As the owner, creates scsql.appended_probes (project_id, probe_id, body), chained with body
    signed and probe_id stamped, no field appended yet."""
    conn.execute("set role scsql_owner")
    conn.execute("""
        create table scsql.appended_probes (
          project_id bigint not null, probe_id bigint generated always as identity, body text,
          primary key (project_id, probe_id))""")
    conn.execute("select scsql._make_chained('scsql.appended_probes', array['body'], array['probe_id'])")


def _writer(conn, name: str, args: list[tuple[str, str]]) -> None:
    """A writing function of scsql.appended_probes taking ARGS (column, type) and the signing fields."""
    params = "".join(f"p_{c} {t} default null, " for c, t in args)
    cols = "".join(f"{c}, " for c, _ in args)
    vals = "".join(f"p_{c}, " for c, _ in args)
    conn.execute(f"""
        create function scsql.{name}({params}p_at timestamptz default null, p_key_id integer default null,
          p_signature bytea default null) returns bigint language sql security definer
          set search_path = pg_catalog, scsql as $$
          insert into scsql.appended_probes ({cols}at, key_id, signature)
          values ({vals}p_at, p_key_id, p_signature) returning seq $$""")
    conn.execute(f"comment on function scsql.{name} is 'test probe'")
    conn.execute(f"revoke execute on function scsql.{name} from public")
    conn.execute(f"grant execute on function scsql.{name} to scsql_agent")


def _api(agent, name: str, fields) -> Api:
    api = Api(agent)
    api.functions[name] = dataclasses.replace(api.functions[name],
                                              adapter=SignedTable("scsql.appended_probes", fields).adapter())
    return api


def _hashes(db) -> dict[int, bytes]:
    with db.connect() as conn:
        return {r["seq"]: bytes(r["row_hash"]) for r in
                conn.execute("select seq, row_hash from scsql.appended_probes order by seq").fetchall()}


def _make_chained(db, appended: str | None = None, *, fail: str | None = None) -> None:
    with db.connect() as conn:
        conn.execute("set role scsql_owner")
        call = "select scsql._make_chained('scsql.appended_probes', array['body'], array['probe_id']" + \
            (f", p_appended => {appended})" if appended is not None else ")")
        if fail is None:
            conn.execute(call)
            return
        with pytest.raises(psycopg.Error) as err:
            conn.execute(call)
        assert err.value.sqlstate == fail, err.value


@pytest.fixture
def probes(scsql_db):
    """scsql.appended_probes with rows written before any column was appended,
    then the column tag appended and rows written with and without it, then
    (a later release) n and j appended after it and more rows."""
    db = scsql_db
    with db.connect() as conn:
        _create_probes(conn)
        _writer(conn, "write_probe_v1", [("body", "text")])
        conn.execute("grant select on scsql.appended_probes to scsql_auditor")
        conn.commit()
    project = db.project()
    a = db.agent("app", project)
    api = _api(a, "write_probe_v1", V1)
    assert [api.call("write_probe_v1", body=b) for b in ("one", None)] == [1, 2]
    before = _hashes(db)

    with db.connect() as conn:
        conn.execute("set role scsql_owner")
        conn.execute("alter table scsql.appended_probes add column tag text")
        conn.execute("select scsql._make_chained('scsql.appended_probes', array['body'], array['probe_id'], "
                     "p_appended => array['tag'])")
        _writer(conn, "write_probe_v2", [("body", "text"), ("tag", "text")])
        conn.commit()
    api = _api(a, "write_probe_v2", V2)
    assert api.call("write_probe_v2", body="three", tag="red") == 3
    assert api.call("write_probe_v2", body="four") == 4            # tag NULL
    assert api.call("write_probe_v2", body="five", tag="") == 5    # tag empty, not NULL

    with db.connect() as conn:
        conn.execute("set role scsql_owner")
        conn.execute("alter table scsql.appended_probes add column n integer, add column j jsonb")
        # A call without p_appended (an sql/ file of an earlier release) keeps the registered list.
        conn.execute("select scsql._make_chained('scsql.appended_probes', array['body'], array['probe_id'])")
        conn.execute("select scsql._make_chained('scsql.appended_probes', array['body'], array['probe_id'], "
                     "p_appended => array['tag', 'n', 'j'])")
        _writer(conn, "write_probe_v3", [("body", "text"), ("tag", "text"), ("n", "int"), ("j", "jsonb")])
        conn.commit()
    api = _api(a, "write_probe_v3", V3)
    assert api.call("write_probe_v3", body="six", n=0) == 6                            # tag NULL, n set
    assert api.call("write_probe_v3", body="seven", tag="blue", n=-3, j={"k": [1]}) == 7
    with db.connect() as conn:
        chain = conn.execute("select chain_id from scsql.appended_probes limit 1").fetchone()["chain_id"]
        # A jsonb field left out is SQL NULL (no bytes), not JSON null.
        assert conn.execute("select j is null as n from scsql.appended_probes where seq = 6").fetchone()["n"]
    return db, chain, before


def test_fields_lists_appended_after_signed(probes):
    db, _, _ = probes
    with db.connect() as conn:
        rows = conn.execute("select part, ordinal, column_name, kind from scsql._chain_fields('scsql.appended_probes')"
                            ).fetchall()
    assert [(r["part"], r["ordinal"], r["column_name"], r["kind"]) for r in rows] == [
        ("stamped", 1, "probe_id", "int"), ("signed", 1, "body", "text"),
        ("appended", 1, "tag", "text"), ("appended", 2, "n", "int"), ("appended", 3, "j", "jsonb")]


def test_rows_before_and_after_appending_verify(probes, verifier):
    db, _, before = probes
    report = verifier.run(db)
    assert report.breaks == []
    assert report.rows == 7
    # The rows written before the columns were appended kept their hashes (and
    # so their signatures, which the Python verifier checked).
    assert {s: h for s, h in _hashes(db).items() if s in before} == before


def test_old_rows_encode_as_before(probes):
    """A row whose appended fields are NULL has the payload it had without them."""
    with_none = encoding.encode_fields(["text"], ["one"]) + encoding.encode_appended_fields(
        ["text", "int", "jsonb"], [None, None, None])
    assert with_none == encoding.encode_fields(["text"], ["one"])
    # In SQL too: the body expression of the table now, over an old row, is the one it had.
    db, chain, before = probes
    with db.connect() as conn:
        computed = conn.execute(
            "select t.seq, sha256(t.prev_hash || scsql._enc_int(t.chain_id) || scsql._enc_int(t.seq) || "
            + conn.execute("select scsql._chain_body_expr('scsql.appended_probes', 't', 'a.name')").fetchone()[
                "_chain_body_expr"]
            + " || t.signature) as h from scsql.appended_probes t join scsql.agents a on a.agent_id = t.author_id "
            "order by t.seq").fetchall()
    assert {r["seq"]: bytes(r["h"]) for r in computed if r["seq"] in before} == before


def test_null_and_values_encode_distinctly():
    assert encoding.encode_appended(1, "text", None) == b""
    assert encoding.encode_appended(1, "text", "") == encoding.enc_int(1) + encoding.enc_text("")
    assert encoding.encode_appended(2, "text", "x") != encoding.encode_appended(1, "text", "x")
    # Positions keep one field from passing for another of the same kind.
    assert encoding.encode_appended_fields(["text", "text"], ["x", None]) != \
        encoding.encode_appended_fields(["text", "text"], [None, "x"])


@pytest.mark.parametrize("statement, seq", [
    ("update scsql.appended_probes set tag = 'green' where seq = 3", 3),    # value changed
    ("update scsql.appended_probes set tag = null where seq = 3", 3),       # value removed
    ("update scsql.appended_probes set tag = '' where seq = 4", 4),         # NULL made empty
    ("update scsql.appended_probes set tag = null where seq = 5", 5),       # empty made NULL
    ("update scsql.appended_probes set tag = 'x' where seq = 1", 1),        # a value given to an old row
    ("update scsql.appended_probes set n = 1 where seq = 6", 6),
    ("update scsql.appended_probes set j = '{\"k\": [2]}' where seq = 7", 7),
    ("update scsql.appended_probes set tag = null, n = null, j = null where seq = 7", 7),
])
def test_tampered_appended_value_is_a_hash_mismatch(probes, verifier, statement, seq):
    db, chain, _ = probes
    tamper(db, statement)
    assert verifier.breaks(db) == [(chain, seq, "hash-mismatch")]


@pytest.mark.parametrize("appended", [
    "array['n', 'tag', 'j']",      # reordered
    "array['tag', 'n']",           # the last removed
    "array['n', 'j']",             # the first removed
    "'{}'::text[]",                # all removed
    "array['j', 'tag', 'n']",
])
def test_removing_or_reordering_appended_fields_is_refused(probes, appended):
    db, _, _ = probes
    _make_chained(db, appended, fail="SC107")
    with db.connect() as conn:
        assert conn.execute("select appended_fields from scsql.chained_tables where table_name = "
                            "'scsql.appended_probes'").fetchone()["appended_fields"] == ["tag", "n", "j"]


def test_appending_a_column_existing_rows_have_values_in_is_refused(probes):
    db, _, _ = probes
    with db.connect() as conn:
        conn.execute("alter table scsql.appended_probes add column flag boolean default false")
        conn.commit()
    _make_chained(db, "array['tag', 'n', 'j', 'flag']", fail="SC107")
    with db.connect() as conn:
        conn.execute("alter table scsql.appended_probes add column later text")
        conn.commit()
    _make_chained(db, "array['tag', 'n', 'j', 'later']")


def test_appended_fields_are_checked_like_the_others(probes):
    db, _, _ = probes
    _make_chained(db, "array['tag', 'n', 'j', 'body']", fail="SC105")      # listed twice
    _make_chained(db, "array['tag', 'n', 'j', 'seq']", fail="SC105")       # managed by the chain
    _make_chained(db, "array['tag', 'n', 'j', 'nope']", fail="SC105")      # no such column
    _make_chained(db, "array['tag', 'n', 'j', null]", fail="SC105")


def test_signed_table_wants_appended_fields_last():
    with pytest.raises(ValueError):
        SignedTable("scsql.appended_probes", [SignedField("tag", "text", appended=True), SignedField("body", "text")])


def test_every_kind_can_be_appended(scsql_db, verifier):
    """Each chainable type as an appended field, written through SignedField(..., appended=True)
    with values and with NULLs, verifies: the generated SQL and the Python encoding agree."""
    db = scsql_db
    kinds = [("t", "text", "text"), ("i", "bigint", "int"), ("n", "numeric", "numeric"), ("b", "boolean", "bool"),
             ("ts", "timestamptz", "ts"), ("x", "bytea", "bytea"), ("u", "uuid", "uuid"), ("j", "jsonb", "jsonb")]
    with db.connect() as conn:
        _create_probes(conn)
        conn.execute("alter table scsql.appended_probes " + ", ".join(f"add column {c} {t}" for c, t, _ in kinds))
        conn.execute("select scsql._make_chained('scsql.appended_probes', array['body'], array['probe_id'], "
                     "p_appended => %s)", ([c for c, _, _ in kinds],))
        _writer(conn, "write_probe", [("body", "text")] + [(c, t) for c, t, _ in kinds])
        conn.execute("grant select on scsql.appended_probes to scsql_auditor")
        conn.commit()
    a = db.agent("kinds", db.project())
    api = _api(a, "write_probe",
               [SignedField("body", "text")] + [SignedField(c, k, appended=True) for c, _, k in kinds])
    values = [
        dict(t="naïve ☃", i=-7, n=Decimal("1.2300"), b=True, ts=dt.datetime(2001, 2, 3, 4, 5, 6, 789, tzinfo=dt.UTC),
             x=b"\x00\xff", u=str(uuid.uuid4()), j={"k": [1, 2.5, "v"], "a": None}),
        dict(),
        dict(t="", i=0, n=0.1, b=False, ts=dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=dt.UTC), x=b"",
             j=[{"bb": 1, "a": 1e-7}]),
        dict(b=False, j=[]),
    ]
    assert [api.call("write_probe", body="b", **v) for v in values] == [1, 2, 3, 4]
    report = verifier.run(db)
    assert report.breaks == [] and report.rows == 4


def test_only_the_four_argument_make_chained_exists(scsql_db):
    with scsql_db.connect() as conn:
        found = conn.execute("select oid::regprocedure::text as f from pg_catalog.pg_proc "
                             "where proname = '_make_chained' and pronamespace = 'scsql'::regnamespace").fetchall()
    assert [r["f"] for r in found] == ["scsql._make_chained(regclass,text[],text[],text[])"]
