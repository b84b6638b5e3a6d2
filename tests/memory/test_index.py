"""Indexing a project tree: .gitignore, binaries, symbolic links that leave
the root, chunking by headings and by definitions, incremental runs that
touch only what changed, deleted files unindexed, and the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from psycopg.types.json import Jsonb

from scsql.memory import indexer
from scsql.core import roles
from scsql.core.errors import ScsqlError

PY = textwrap.dedent('''\
    """A module."""
    import os

    CONSTANT = 3


    # Verifies the chain.
    @decorated
    def verify_chain(rows):
        return all(rows)


    class Store:
        def put(self, key):
            return key
''')


def rooted(scsql_db, root: Path) -> str:
    """A project whose root directory is ROOT (index reads only below a root)."""
    name = f"r{abs(hash(str(root))) % 10**8}"
    roles.create_project(scsql_db.admin, name, str(root))
    return name


def q(agent, sql, *args):
    with agent.transaction() as conn:
        return conn.execute(sql, args).fetchall()


def make_tree(root: Path) -> Path:
    (root / ".git" / "info").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".git" / "info" / "exclude").write_text("secret.txt\n")
    (root / ".gitignore").write_text("*.log\nbuild/\n!keep.log\n")
    (root / "README.md").write_text("# Project\n\nIntro text.\n\n## Install\n\nRun pip install.\n")
    (root / "app.log").write_text("ignored log\n")
    (root / "keep.log").write_text("kept log line about telescopes\n")
    (root / "secret.txt").write_text("excluded by .git/info/exclude\n")
    (root / "build").mkdir()
    (root / "build" / "out.js").write_text("function built() {}\n")
    (root / "src").mkdir()
    (root / "src" / "chain.py").write_text(PY)
    (root / "src" / "hmac_chain.ts").write_text(
        "import x from 'y';\n\n// Checks every link.\nexport function verifyChain(rows) {\n  return true;\n}\n\n"
        "export class Ledger {\n  add() {}\n}\n")
    (root / "src" / ".gitignore").write_text("generated/\n")
    (root / "src" / "generated").mkdir()
    (root / "src" / "generated" / "g.py").write_text("x = 1\n")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (root / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    return root


def test_scan_honours_gitignore_and_skips_binaries_and_escaping_links(scsql_db, tmp_path):
    root = make_tree(tmp_path / "proj")
    outside = tmp_path / "outside.md"
    outside.write_text("# secret outside the root\n")
    os.symlink(outside, root / "escape.md")
    os.symlink(tmp_path, root / "escape_dir")
    os.symlink(root / "README.md", root / "alias.md")  # inside the root: fine
    with scsql_db.connect() as conn:
        secrets = indexer.Secrets.read(conn)
    tree = indexer.scan(root / "src", secrets)
    assert tree.root == root and tree.prefix == "src"
    assert sorted(f.rel for f in tree.files) == ["src/.gitignore", "src/chain.py", "src/hmac_chain.ts"]
    full = indexer.scan(root, secrets)
    assert sorted(f.rel for f in full.files) == [
        ".gitignore", "README.md", "alias.md", "keep.log", "src/.gitignore", "src/chain.py", "src/hmac_chain.ts"]
    skipped = {s["path"]: s["reason"] for s in full.skipped}
    assert skipped == {"escape.md": "symbolic link leaves the project root",
                       "escape_dir": "symbolic link leaves the project root",
                       "logo.png": "binary", "latin1.txt": "binary"}
    import hashlib
    readme = next(f for f in full.files if f.rel == "README.md")
    assert readme.sha256 == hashlib.sha256((root / "README.md").read_bytes()).hexdigest()
    with pytest.raises(ScsqlError):
        indexer.scan(root / "README.md", secrets)


def test_a_hard_link_to_a_file_outside_the_root_is_skipped_and_reported(scsql_db, tmp_path):
    """A hard link inside the root to a file elsewhere (another user's
    notes, a token file) was read and indexed like any file of the project.
    A hard link cannot be told from the file it names, so every file with
    more than one name is skipped, with its reason in the report."""
    agent = scsql_db.agent("idxlink", rooted(scsql_db, tmp_path / "proj"))
    root = make_tree(tmp_path / "proj")
    outside = tmp_path / "elsewhere" / "notes.md"
    outside.parent.mkdir()
    outside.write_text("# private notes\n\nthe deploy passphrase hint is orange zebra\n")
    os.link(outside, root / "linked.md")
    (root / "src" / "twin.py").write_text("x = 2\n")
    os.link(root / "src" / "twin.py", root / "twin_again.py")  # both names inside: still one file, two names
    report = indexer.index_tree(agent, root, progress=False)
    assert q(agent, "select * from scsql.search('orange zebra')") == []
    reason = indexer.SKIP_HARD_LINK
    assert {s["path"]: s["reason"] for s in report["skipped"] if s["reason"] == reason} == {
        "linked.md": reason, "src/twin.py": reason, "twin_again.py": reason}
    assert report["skipped_counts"][reason] == 3 and report["failed"] == []
    assert not {"linked.md", "src/twin.py", "twin_again.py"} & {r["path"] for r in q(agent, "select path from scsql.kb_sources")}
    # A file linked after the scan and before it is read is refused when it is read.
    (root / "late.md").write_text("# late\n\nplain text\n")
    tree = indexer.prepare(agent, root)
    assert "late.md" in {f.rel for f in tree.files}
    (root / "late.md").unlink()
    os.link(outside, root / "late.md")
    with agent.transaction() as conn:
        actions = conn.execute("select path, action from scsql.index(%s, %s)",
                               (tree.prefix, Jsonb(tree.manifest()))).fetchall()
    late = indexer.index_files(agent, tree, actions, progress=False)
    assert late["failed"] == [{"path": "late.md", "error": reason}]
    assert q(agent, "select * from scsql.search('orange zebra')") == []


def test_python_is_chunked_by_top_level_definitions():
    spans = indexer.python_spans(PY, 1500)
    lines = PY.split("\n")
    got = [(s["anchor"], lines[s["start"] - 1].strip()) for s in spans]
    assert got == [(None, '"""A module."""'), ("verify_chain", "# Verifies the chain."), ("Store", "class Store:")]
    big = "class Big:\n" + "\n".join(f"    def m{i}(self):\n        return '{'x' * 80}'\n" for i in range(30))
    anchors = [s["anchor"] for s in indexer.python_spans(big, 1500)]  # a class over the chunk size: its methods
    assert anchors[0] == "Big" and anchors[1:4] == ["Big.m0", "Big.m1", "Big.m2"] and len(anchors) == 31
    assert indexer.python_spans("def broken(:\n", 1500) is None


def test_other_code_uses_the_definition_heuristic():
    ts = "import x from 'y';\n\n// Checks every link.\nexport function verifyChain(rows) {\n  return true;\n}\n\n" \
         "export class Ledger {\n  add() {}\n}\n"
    spans = indexer.code_spans(ts)
    assert [(s["anchor"], s["start"], s["end"]) for s in spans] == [
        (None, 1, 1), ("verifyChain", 3, 6), ("Ledger", 8, 10)]
    sql = "-- the table\ncreate table scsql.things (id int);\n\ncreate or replace function scsql.f() returns int\n" \
          "language sql as $$ select 1 $$;\n"
    assert [s["anchor"] for s in indexer.code_spans(sql)] == ["scsql.things", "scsql.f"]
    assert indexer.spans_for("notes.md", "# a\n", 1500) is None


def test_index_tree_is_incremental_and_unindexes_deleted_files(scsql_db, tmp_path):
    agent = scsql_db.agent("idx", rooted(scsql_db, tmp_path / "proj"))
    root = make_tree(tmp_path / "proj")
    first = indexer.index_tree(agent, root, progress=False)
    assert (first["files"], first["indexed"], first["unchanged"], first["removed"], first["failed"]) == (
        6, 6, 0, [], [])
    sources = {r["path"]: r for r in q(agent, "select path, kind, updated_at, n_chunks from scsql.kb_sources")}
    assert set(sources) == {".gitignore", "README.md", "keep.log", "src/.gitignore", "src/chain.py",
                            "src/hmac_chain.ts"}
    # Chunks by heading and by definition, with anchors and line spans; definitions
    # this small share one chunk (small neighbours merge up to the chunk size) that names them.
    chunks = q(agent, "select s.path, c.anchor, c.line_start, c.line_end from scsql.kb_chunks c "
                      "join scsql.kb_sources s using (project_id, source_id) order by s.path, c.seq")
    by_path: dict[str, list] = {}
    for c in chunks:
        by_path.setdefault(c["path"], []).append((c["anchor"], c["line_start"], c["line_end"]))
    assert by_path["README.md"] == [("Project", 1, 3), ("Install", 5, 7)]
    assert by_path["src/chain.py"] == [("verify_chain, Store", 1, 15)]
    assert by_path["src/hmac_chain.ts"] == [("verifyChain, Ledger", 1, 10)]
    hit = q(agent, "select * from scsql.search('verifyChain')")[0]
    assert (hit["source_path"], hit["anchor"], hit["line_start"], hit["line_end"]) == ("src/hmac_chain.ts",
                                                                                     "verifyChain, Ledger", 1, 10)
    # Second run: nothing changed, nothing written.
    again = indexer.index_tree(agent, root, progress=False)
    assert (again["indexed"], again["unchanged"], again["removed"]) == (0, 6, [])
    assert {r["path"]: r["updated_at"] for r in q(agent, "select path, updated_at from scsql.kb_sources")} == {
        p: s["updated_at"] for p, s in sources.items()}
    # One file changed, one deleted, one added.
    (root / "README.md").write_text("# Project\n\nIntro text, now about telescopes.\n")
    (root / "keep.log").unlink()
    (root / "src" / "new.py").write_text("def fresh():\n    return 'new'\n")
    third = indexer.index_tree(agent, root, progress=False)
    assert (third["indexed"], third["unchanged"], third["removed"]) == (2, 4, ["keep.log"])
    assert [h["source_path"] for h in q(agent, "select * from scsql.search('telescopes')")] == ["README.md"]
    # A run on a subdirectory touches nothing outside it.
    (root / "src" / "new.py").unlink()
    sub = indexer.index_tree(agent, root / "src", progress=False)
    assert (sub["files"], sub["removed"]) == (3, ["src/new.py"])
    assert "README.md" in {r["path"] for r in q(agent, "select path from scsql.kb_sources")}


def test_a_file_that_cannot_be_indexed_is_reported_and_the_rest_go_on(scsql_db, tmp_path):
    agent = scsql_db.agent("idx2", rooted(scsql_db, tmp_path / "p"))
    root = tmp_path / "p"
    root.mkdir()
    (root / "ok.md").write_text("# fine\n\ntext\n")
    (root / "ctrl.md").write_text("control \x01 characters are indexed as text\n")
    (root / "blank.md").write_text("   \n\n")  # whitespace only: not a source
    (root / "invisible.md").write_text("\u200b\u200b\n")  # only zero-width characters: empty once normalized
    report = indexer.index_tree(agent, root, progress=False)
    assert report["indexed"] == 2 and [f["path"] for f in report["failed"]] == ["invisible.md"]
    assert "SC201" in report["failed"][0]["error"]
    assert {r["path"] for r in q(agent, "select path from scsql.kb_sources")} == {"ok.md", "ctrl.md"}


def test_cli_index_is_quiet_in_a_pipe(scsql_db, tmp_path):
    agent = scsql_db.agent("idxcli", rooted(scsql_db, tmp_path / "proj"))
    root = make_tree(tmp_path / "proj")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCSQL_")}
    env.update(SCSQL_DSN=scsql_db.admin, SCSQL_AGENT_DSN=scsql_db.app, SCSQL_KEYSTORE=str(scsql_db.keystore.directory),
               SCSQL_EMBED="none", PYTHONPATH=str(Path(__file__).resolve().parent.parent.parent))
    proc = subprocess.run([sys.executable, "-m", "scsql", "index", str(root), "--agent", agent.name],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("scsql: indexed 6 file(s)")
    assert "indexing" not in proc.stderr and "it/s" not in proc.stderr  # no progress bar in a pipe
    assert "logo.png" not in proc.stderr and "2 binary" in proc.stdout  # skipped files: counted; -v lists them
    proc = subprocess.run([sys.executable, "-m", "scsql", "search", "verifyChain", "--agent", agent.name],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0 and "src/hmac_chain.ts:1-10 [verifyChain, Ledger]" in proc.stdout.splitlines()[0]


def test_an_edit_stores_again_only_the_chunks_it_changed(scsql_db):
    """A file indexed again keeps the chunks its new text makes again (their
    ids, postings and embeddings), also those an edit above them moved, which
    take their new places; it stores the others. Chunks, terms, frequencies
    and statistics are those a fresh index of the new text gives."""
    funcs = [f"def step_{i}(value):\n" + "".join(f"    value = value * {k} + {i}  # stage {k}\n" for k in range(30))
             + "    return value\n" for i in range(6)]
    before, after = "\n\n".join(funcs), "\n\n".join(funcs[:3] + ["def added(x):\n    return x\n"] + funcs[3:5])
    edited, fresh = scsql_db.agent("edited", scsql_db.project()), scsql_db.agent("fresh", scsql_db.project())

    def index(agent, text):
        with agent.transaction() as conn:
            conn.execute("select * from scsql.index_text('src/steps.py', %s, 'file', null, 'standard', %s)",
                         (text, Jsonb(indexer.spans_for("src/steps.py", text, agent.rules().chunk_chars))))
            return conn.execute("select c.seq, c.chunk_id, c.anchor from scsql.kb_chunks c order by c.seq").fetchall()

    first = index(edited, before)
    second = index(edited, after)
    assert len(first) == 6 and [r["anchor"] for r in second] == ["step_0", "step_1", "step_2, added", "step_3", "step_4"]
    assert [r["chunk_id"] for r in second[:2]] == [r["chunk_id"] for r in first[:2]]  # kept in place
    assert second[2]["chunk_id"] not in {r["chunk_id"] for r in first}  # changed: stored anew
    assert [r["chunk_id"] for r in second[3:]] == [r["chunk_id"] for r in first[3:5]]  # moved down: kept
    after = after.replace("def step_1", "\n\n\ndef step_1")  # lines added above the chunks after the first
    third = index(edited, after)
    assert [r["chunk_id"] for r in third] == [r["chunk_id"] for r in second]
    index(fresh, after)

    def state(agent):
        with agent.transaction() as conn:
            return (conn.execute("select n_chunks, total_len, n_file_chunks, published_chunks, published_len "
                                 "from scsql.memory_state").fetchone(),
                    conn.execute("select term, df, published_df from scsql.kb_terms where df > 0 order by term").fetchall(),
                    conn.execute("select s.n_chunks from scsql.kb_sources s").fetchall(),
                    conn.execute("select c.seq, c.n_terms, c.chunk_hash, t.term, p.tf from scsql.kb_postings p "
                                 "join scsql.kb_chunks c using (project_id, chunk_id) "
                                 "join scsql.kb_terms t using (project_id, term_id) order by 1, 4").fetchall(),
                    conn.execute("select seq, anchor, line_start, line_end, char_start, char_end, content, chunk_hash "
                                 "from scsql.kb_chunks order by seq").fetchall())
    assert state(edited) == state(fresh)
