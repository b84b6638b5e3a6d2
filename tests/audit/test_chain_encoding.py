"""The canonical encoding, implemented twice (SQL, and Python from the
specification in COMMENT ON FUNCTION scsql._enc), agrees on generated values
under any session settings; and a table of another subsystem becomes
chained and signed with one SQL call and one Python declaration."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import uuid
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scsql.audit import encoding
from scsql.audit.signing import SignedField, SignedTable
from scsql.api import Api
from scsql.audit.verify import verify

from ..helpers import SESSION

ZONES = ["UTC", "America/Los_Angeles", "Asia/Kolkata", "Pacific/Chatham", "Europe/Berlin", "-12:45"]
DATESTYLES = ["ISO, MDY", "SQL, DMY", "German", "Postgres, YMD"]

text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)
numerics = st.one_of(
    st.decimals(allow_nan=False, allow_infinity=False, places=None, min_value=Decimal("-1e30"), max_value=Decimal("1e30")),
    st.decimals(allow_nan=False, allow_infinity=False, places=6),
    st.sampled_from([Decimal("0"), Decimal("-0.000"), Decimal("1.50"), Decimal("1E+5"), Decimal("123.4500"),
                     Decimal("NaN"), Decimal("Infinity"), Decimal("-Infinity"), Decimal("0.000001")]),
)
timestamps = st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30),
                          timezones=st.sampled_from([dt.UTC, dt.timezone(dt.timedelta(hours=5, minutes=30)),
                                                     dt.timezone(dt.timedelta(hours=-8))]))
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), text,
                         st.floats(allow_nan=False, allow_infinity=False),
                         st.decimals(allow_nan=False, allow_infinity=False, places=3, min_value=-10**6, max_value=10**6))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                                 st.dictionaries(text, inner, max_size=4)), max_leaves=12)


def _json_text(v) -> str:
    """JSON text with Decimals written as numbers (keeping their scale)."""
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, list):
        return "[" + ",".join(_json_text(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(k) + ":" + _json_text(x) for k, x in v.items()) + "}"
    return json.dumps(v)


row = st.fixed_dictionaries({
    "text": st.one_of(st.none(), text),
    "int": st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)),
    "numeric": st.one_of(st.none(), numerics),
    "bool": st.one_of(st.none(), st.booleans()),
    "ts": st.one_of(st.none(), timestamps),
    "bytea": st.one_of(st.none(), st.binary(max_size=40)),
    "uuid": st.one_of(st.none(), st.uuids()),
    "jsonb": st.one_of(st.none(), json_values),
    "zone": st.sampled_from(ZONES),
    "datestyle": st.sampled_from(DATESTYLES),
    "digits": st.sampled_from([-15, 0, 1, 3]),
})


KINDS = {"text": "text", "int": "bigint", "numeric": "numeric", "bool": "boolean", "ts": "timestamptz",
         "bytea": "bytea", "uuid": "uuid", "jsonb": "jsonb"}


@pytest.fixture(scope="module")
def probe_conn(server, template):
    """A connection to a database of its own (on Citus the template takes none)."""
    with server.scratch(f"{SESSION}_encoding", template) as conn:
        yield conn


@pytest.fixture(scope="module")
def inline_query(probe_conn) -> str:
    """The inline expressions generated triggers use (scsql._enc_expr), for every kind, in one query."""
    exprs = [probe_conn.execute("select scsql._enc_expr(%s, %s)", (k, f"%({k})s::{t}")).fetchone()[0]
             for k, t in KINDS.items()]
    return "select " + ", ".join(exprs)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(row)
def test_python_and_sql_encode_every_value_alike(probe_conn, inline_query, r):
    conn = probe_conn
    conn.execute(f"set timezone = '{r['zone']}'")
    conn.execute(f"set datestyle = '{r['datestyle']}'")
    conn.execute(f"set extra_float_digits = {r['digits']}")
    conn.execute("set client_encoding = 'UTF8'")
    jtext = None if r["jsonb"] is None else _json_text(r["jsonb"])
    got = conn.execute(
        "select scsql._enc_text(%s::text), scsql._enc_int(%s::bigint), scsql._enc_numeric(%s::numeric),"
        " scsql._enc_bool(%s::boolean), scsql._enc_ts(%s::timestamptz), scsql._enc_bytea(%s::bytea),"
        " scsql._enc_uuid(%s::uuid), scsql._enc_jsonb(%s::jsonb)",
        (r["text"], r["int"], r["numeric"], r["bool"], r["ts"], r["bytea"], r["uuid"], jtext)).fetchone()
    expected = [encoding.encode("text", r["text"]), encoding.encode("int", r["int"]), encoding.encode("numeric", r["numeric"]),
                encoding.encode("bool", r["bool"]), encoding.encode("ts", r["ts"]), encoding.encode("bytea", r["bytea"]),
                encoding.encode("uuid", r["uuid"]),
                encoding.encode("jsonb", None if jtext is None else encoding.JsonValue.parse(jtext))]
    assert [bytes(g) for g in got] == expected
    params = dict(zip(KINDS, (r["text"], r["int"], r["numeric"], r["bool"], r["ts"], r["bytea"], r["uuid"], jtext)))
    inline = probe_conn.execute(inline_query, params).fetchone()
    assert [bytes(g) for g in inline] == expected


def test_encoding_matches_the_documented_examples():
    assert encoding.encode("text", None) == b"N\x00\x00\x00\x00"
    assert encoding.encode("text", "é") == b"t\x00\x00\x00\x02\xc3\xa9"
    assert encoding.encode("numeric", Decimal("1.50")) == b"n\x00\x00\x00\x031.5"
    assert encoding.encode("numeric", Decimal("-0.00")) == b"n\x00\x00\x00\x010"
    assert encoding.encode("numeric", Decimal("1E+2")) == b"n\x00\x00\x00\x03100"
    assert encoding.encode("ts", dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC)) == b"T\x00\x00\x00\x071000000"
    assert encoding.jsonb_text({"bb": 1, "a": [True, None, "x\n"], "c": Decimal("1.50")}) == \
        '{"a": [true, null, "x\\n"], "c": 1.50, "bb": 1}'


def test_another_subsystems_table_becomes_chained_with_one_call(scsql_db):
    """A table with every chainable type, made chained by _make_chained and
    written through a SignedTable declaration, verifies; the SQL rejects
    what the encoding cannot express."""
    with scsql_db.connect() as conn:
        conn.execute("set role scsql_owner")
        conn.execute("""
            create table scsql.probes (
              project_id bigint not null, probe_id bigint generated always as identity,
              t text, i integer, n numeric, b boolean, ts timestamptz, x bytea, u uuid, j jsonb,
              primary key (project_id, probe_id))""")
        conn.execute("select scsql._make_chained('scsql.probes', array['t','i','n','b','ts','x','u','j'], array['probe_id'])")
        conn.execute("select scsql._make_chained('scsql.probes', array['t','i','n','b','ts','x','u','j'], array['probe_id'])")
        conn.execute("""
            create function scsql.write_probe(p_t text, p_i integer, p_n numeric, p_b boolean, p_ts timestamptz,
              p_x bytea, p_u uuid, p_j jsonb, p_at timestamptz default null, p_key_id integer default null,
              p_signature bytea default null) returns bigint language sql security definer
              set search_path = pg_catalog, scsql as $$
              insert into scsql.probes (t, i, n, b, ts, x, u, j, at, key_id, signature)
              values (p_t, p_i, p_n, p_b, p_ts, p_x, p_u, p_j, p_at, p_key_id, p_signature) returning seq $$""")
        conn.execute("comment on function scsql.write_probe is 'test probe'")
        conn.execute("revoke execute on function scsql.write_probe from public")  # as policies/ do for every function
        conn.execute("grant execute on function scsql.write_probe to scsql_agent")
        conn.execute("grant select on scsql.probes to scsql_auditor")  # as policies/99_auditor.sql does
        conn.commit()
        conn.execute("set role scsql_owner")
        with pytest.raises(Exception) as err:
            conn.execute("create table scsql.bad (project_id bigint, f float8)")
            conn.execute("select scsql._make_chained('scsql.bad', array['f'])")
        assert getattr(err.value, "sqlstate", None) == "SC105"
        conn.rollback()
        columns = conn.execute("select column_name from information_schema.columns where table_schema = 'scsql' "
                               "and table_name = 'probes' order by ordinal_position").fetchall()
    assert {"chain_id", "seq", "prev_hash", "row_hash", "signature", "key_id", "author_id", "at"} <= \
        {c["column_name"] for c in columns}
    probes = SignedTable("scsql.probes", [
        SignedField("t", "text"), SignedField("i", "int"), SignedField("n", "numeric"), SignedField("b", "bool"),
        SignedField("ts", "ts"), SignedField("x", "bytea"), SignedField("u", "uuid"), SignedField("j", "jsonb")])
    project = scsql_db.project()
    a = scsql_db.agent("probe", project)
    api = Api(a)
    api.functions["write_probe"] = dataclasses.replace(api.functions["write_probe"], adapter=probes.adapter())
    assert {"at", "key_id", "signature"}.isdisjoint(
        set(api.functions["write_probe"].arg_model().model_json_schema(by_alias=True)["properties"]))
    api.call("record_tool_call", tool="Read")
    values = [
        dict(t="naïve ☃", i=-7, n=Decimal("1.2300"), b=True, ts=dt.datetime(2001, 2, 3, 4, 5, 6, 789, tzinfo=dt.UTC),
             x=b"\x00\xff", u=str(uuid.uuid4()), j={"k": [1, 2.5, "v"], "a": None}),
        dict(t=None, i=None, n=None, b=None, ts=None, x=None, u=None, j=None),
        dict(t="", i=0, n=0.1, b=False, ts=dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=dt.UTC), x=b"", u=None,
             j=[{"bb": 1, "a": 1e-7}]),
    ]
    seqs = [api.call("write_probe", **v) for v in values]
    assert seqs == [2, 3, 4]  # the same chain as the agent's tool call
    report = verify(scsql_db.admin, workers=1, progress=False)
    assert report.ok, report.breaks
    assert report.rows == 4
