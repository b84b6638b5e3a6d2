"""Rules said once: the BM25 term score (scsql_caller.bm25_term, inlined
wherever it is used), the reading of a path (scsql._path_parts and
_root_parts, the same for every function that takes a path), and what
counts as a secret (scsql_caller.secret_dirs and private_key_pattern, which
SQL enforces and the index tool reads over its connection)."""

from __future__ import annotations

import random

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from scsql.core import roles
from scsql.memory import indexer
from scsql.core.errors import ScsqlError
from ..helpers import enqueue

# -- BM25: one term score, inlined ------------------------------------------------


def test_bm25_term_score_is_inlined_in_every_branch(scsql_db):
    """bm25_term and bm25_idf are plain SQL expressions the planner inlines:
    every branch of scsql_caller.bm25 (filters, one project pruned with any
    budget, several projects) runs without calling them once, while bm25
    itself is counted, so the count is real."""
    agent = scsql_db.agent("inline", scsql_db.project())
    rng = random.Random(3)
    vocab = [f"t{i}" for i in range(40)]
    with agent.transaction() as conn:
        for d in range(120):
            words = rng.choices(vocab, [1.0 / (i + 1) for i in range(40)], k=rng.randint(5, 30))
            conn.execute("select 1 from scsql.index_text(%s, %s, 'note')", (f"d{d}", " ".join(words)))
    with scsql_db.connect() as conn:
        conn.execute("set local track_functions = 'all'")
        conn.execute(sql.SQL("set local role {}").format(sql.Identifier(agent.role)))
        n = 0
        for budget in ("0", "15", "60", "20000"):
            conn.execute("select set_config('scsql.bm25_prune_postings', %s, true)", (budget,))
            for query in ("t0 t1 t2", "t0 t35", "t3 t7 t20 t0", "t1"):
                n += len(conn.execute("select * from scsql.search(%s, p_mode => 'bm25', p_k => 5, p_depth => 5)",
                                      (query,)).fetchall())
                n += len(conn.execute("select * from scsql.search(%s, p_mode => 'bm25', p_kinds => '{note}')",
                                      (query,)).fetchall())
                n += len(conn.execute("select * from scsql.search_global(%s, p_mode => 'bm25')", (query,)).fetchall())
        calls = conn.execute("""
            select f, pg_stat_get_xact_function_calls(f::regprocedure) as n
            from unnest(array['scsql_caller.bm25(bigint[],text[],float8,float8,integer,text[],text,timestamptz)',
                              'scsql_caller.bm25_term(float8,float8,float8,float8,float8,float8)',
                              'scsql_caller.bm25_idf(bigint,bigint)']) f
        """).fetchall()
        conn.rollback()
    assert n > 0
    got = {r["f"].split("(")[0]: r["n"] for r in calls}
    assert got["scsql_caller.bm25"] and got["scsql_caller.bm25"] > 0
    assert got["scsql_caller.bm25_term"] is None and got["scsql_caller.bm25_idf"] is None, got


# -- paths: one reading ---------------------------------------------------------------


def _code(conn, query, *args) -> str | None:
    try:
        with conn.transaction():
            conn.execute(query, args)
    except psycopg.Error as exc:
        return exc.sqlstate
    return None


def test_create_project_reads_its_root_like_set_project_root(scsql_db):
    """create_project stores the root as set_project_root does ("." and ".."
    resolved, trailing "/" dropped) and refuses what it refuses: "/", a root
    climbing above "/", a relative path (before, it stored any text starting
    with "/", "/" itself included)."""
    with scsql_db.connect() as conn:
        pid = conn.execute("select scsql.create_project('rootread', '/srv//work/./x/../repo/') as id").fetchone()["id"]
        assert conn.execute("select root_path from scsql.projects where project_id = %s", (pid,)).fetchone()[
            "root_path"] == "/srv/work/repo"
        conn.commit()
        for i, bad in enumerate(("/", "//./", "/..", "/a/../..", "relative/dir")):
            assert _code(conn, "select scsql.create_project(%s, %s)", f"badroot{i}", bad) == "SC010", bad
            assert _code(conn, "select scsql.set_project_root('rootread', %s)", bad) == "SC010", bad
        assert conn.execute("select scsql.set_project_root('rootread', '/srv/work/./repo/')").fetchone()[
            "set_project_root"] == "/srv/work/repo"


def test_a_root_naming_slash_is_no_root_everywhere(scsql_db, tmp_path):
    """A root that names "/" (a row written before create_project read its
    root) is no root for the index tool (SC216) and for absolute exclusive
    file paths (SC321, "no root path"); relative paths still work."""
    project = f"slashroot{random.Random().randrange(10**6)}"
    roles.create_project(scsql_db.admin, project, str(tmp_path))
    orch = scsql_db.agent("slash", project, "orchestrator")
    with scsql_db.connect() as conn:
        conn.execute("update scsql.projects set root_path = '/' where name = %s", (project,))
        conn.commit()
    with pytest.raises(ScsqlError) as err, orch.transaction() as conn:
        conn.execute("select scsql_caller.index_scope(%s)", (str(tmp_path),))
    assert err.value.code == "SC216"
    with pytest.raises(ScsqlError) as err:
        enqueue(orch, files=[f"{tmp_path}/a.py"])
    assert err.value.code == "SC321" and "no root path" in err.value.message
    tid = enqueue(orch, files=["src/./a.py"])
    with orch.transaction() as conn:
        assert conn.execute("select exclusive_files from scsql.tasks where task_id = %s",
                            (tid,)).fetchone()["exclusive_files"] == ["src/a.py"]


def test_index_takes_paths_spelled_as_they_are_read(scsql_db, tmp_path):
    """scsql.index's prefix and files are keys of sources: relative and
    spelled as _path_parts reads them, so one file has one name. Aliases
    ("./a", "a//b", "a/.") and ".." are refused (SC210); every path the index
    tool produces, odd names included, is accepted and indexed."""
    root = tmp_path / "tree"
    names = ["a.md", "a b/c.md", "...md", ".hidden/x.md", "ü/ñ é.md", "x:y/z.md", "dots.in.name/..x.md",
             "deep/er/still/file.md", "-dash/~tilde.md"]
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"# {name}\n\ntext of {name}\n")
    project = f"spell{random.Random().randrange(10**6)}"
    roles.create_project(scsql_db.admin, project, str(root))
    agent = scsql_db.agent("spell", project)
    report = indexer.index_tree(agent, root, progress=False)
    assert report["failed"] == [] and report["indexed"] == len(names)
    assert indexer.index_tree(agent, root / "deep" / "er", progress=False)["unchanged"] == 1
    h = "0" * 64
    with agent.transaction() as conn:
        stored = {r["path"] for r in conn.execute("select path from scsql.kb_sources").fetchall()}
    assert stored == set(names)
    for prefix, path in (("", "./a.md"), ("", "a//b.md"), ("", "a/."), ("", "a/../b.md"), ("", "../a.md"),
                         ("", "/a.md"), ("", "a/"), ("./deep", "deep/x.md"), ("deep/../deep", "deep/x.md"),
                         ("..", "x.md"), ("/deep", "deep/x.md"), ("deep", "deep/./x.md")):
        with pytest.raises(ScsqlError) as err, agent.transaction() as conn:
            conn.execute("select * from scsql.index(%s, %s)", (prefix, Jsonb([{"path": path, "content_hash": h}])))
        assert err.value.code == "SC210", (prefix, path)
    for prefix in ("", "/", "deep/", "deep"):  # a trailing "/" of the prefix is dropped, as before
        with agent.transaction() as conn:
            conn.execute("select * from scsql.index(%s, %s)", (prefix, Jsonb([{"path": "deep/x.md", "content_hash": h}])))


# -- secrets: one list, one pattern ------------------------------------------------

PEM_AROUND = [
    "-----BEGIN RSA PRIVATE KEY-----{}MIIEowIBAAKCAQEAvx0123\n-----END RSA PRIVATE KEY-----\n",
    "-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED{}MHcCAQEEIIaaaaaaaaaaaaaa\n",
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: x{}\nlQOYBF0aaaaaaaaaaaaaaaaaaaaa\n",
]


def _texts() -> list[str]:
    points = [c for c in range(1, 0x3100)] + [0xfeff, 0xff01, 0xffa0, 0x1f600, 0xe0020, 0x10ffff]
    texts = [t.format(chr(c)) for t in PEM_AROUND for c in points if not 0xd800 <= c <= 0xdfff]
    rng = random.Random(11)
    alphabet = list("-- \n\t\r\x0b\x0c\x1c\x85\xa0\u2028\u3000AaZz09+/=:,KEYPRIVATEBLOCKBEGIN")
    for _ in range(3000):
        t = list(rng.choice(PEM_AROUND).format(rng.choice(["\n", " ", "\u00a0", "\u2029", "", "x"])))
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(t) + 1)
            op = rng.random()
            if op < 0.4 and i < len(t):
                del t[i]
            elif op < 0.7 and i < len(t):
                t[i] = rng.choice(alphabet)
            else:
                t.insert(i, rng.choice(alphabet))
        texts.append("".join(t))
    texts += ["A key file starts with -----BEGIN PRIVATE KEY----- and must never",
              "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n-----END PUBLIC KEY-----\n"]
    return texts


def test_python_and_sql_refuse_exactly_the_same_texts(scsql_db):
    """The index tool compiles the pattern the database enforces (read over
    its connection), and the two engines read it alike: over every character
    of the BMP's first 12,544 code points around a key block's whitespace and
    thousands of mutated key blocks, scsql._holds_private_key (what
    index_text, remember and summarize_session refuse) and the indexer agree
    on every text, with both answers present."""
    texts = _texts()
    agent = scsql_db.agent("pem", scsql_db.project())
    with agent.transaction() as conn:
        secrets = indexer.Secrets.read(conn)
    with scsql_db.connect() as conn:
        in_sql = [r["k"] for r in conn.execute(
            "select scsql._holds_private_key(t) as k from unnest(%s::text[]) with ordinality u(t, i) order by i",
            (texts,)).fetchall()]
    in_python = [secrets.holds_private_key(t) for t in texts]
    differ = [(t[:60], s, p) for t, s, p in zip(texts, in_sql, in_python, strict=True) if s != p]
    assert differ == []
    assert 1000 < sum(in_sql) < len(texts) - 1000


def test_python_and_sql_refuse_exactly_the_same_directories(scsql_db, tmp_path):
    """A directory name is a store of secrets for index_scope (SC214) exactly
    when the indexer skips it as one: case variants, look-alikes (KELVIN SIGN
    for K, fullwidth letters), near misses."""
    root = tmp_path / "proj"
    root.mkdir()
    project = f"secretdirs{random.Random().randrange(10**6)}"
    roles.create_project(scsql_db.admin, project, str(root))
    agent = scsql_db.agent("sdirs", project)
    with agent.transaction() as conn:
        secrets = indexer.Secrets.read(conn)
    assert secrets.secret_dirs == {".ssh", ".gnupg", ".aws", ".azure", ".kube", ".password-store"}
    names = [".ssh", ".SSH", ".Ssh", ".gnupg", ".GnuPG", ".aws", ".AWS", ".azure", ".Azure", ".kube", ".KUBE",
             ".\u212aube", ".password-store", ".Password-Store", "ssh", ".ssh2", ".ssh.d", "..ssh", ".ss h",
             ".\uff53\uff53\uff48", ".aws ", "aws", ".kubé", ".gnupg~", ".docker", "src"]
    in_sql = []
    for name in names:
        try:
            with agent.transaction() as conn:
                conn.execute("select scsql_caller.index_scope(%s)", (f"{root}/{name}/inner",))
            in_sql.append(False)
        except ScsqlError as exc:
            assert exc.code == "SC214", (name, exc)
            in_sql.append(True)
    for name in names:
        (root / name).mkdir()
        (root / name / "notes.md").write_text("# notes\n\ntext\n")
    tree = indexer.scan(root, secrets, root=root)
    skipped = {s["path"] for s in tree.skipped if s["reason"] == indexer.SKIP_SECRET_DIR}
    in_python = [name in skipped for name in names]
    assert in_python == in_sql and [secrets.secret_dir(n) for n in names] == in_sql
    assert 5 < sum(in_sql) < len(names) - 5
