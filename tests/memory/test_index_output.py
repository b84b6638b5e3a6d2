"""What `scsql index` prints (a summary: files indexed, unchanged, skipped by
reason; each skipped file only with -v), `scsql index --embed` (the queue
embedded inline, with the worker's drained line), and code chunks that are
never fragments: on real files of the standard library, and on a large dict
literal."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from scsql.core import roles
from scsql.memory import indexer


def _tree(root: Path) -> Path:
    (root / "pkg" / "__pycache__").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("def f():\n    return 1\n")
    for i in range(5):
        (root / "pkg" / "__pycache__" / f"m{i}.cpython-311.pyc").write_bytes(b"\x00\x01compiled")
    (root / ".env").write_text("TOKEN=x\n")
    (root / "notes.md").write_text("# Notes\n\nAbout the parser.\n")
    return root


def _scsql(scsql_db, *args, embed="none"):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCSQL_")}
    env.update(SCSQL_DSN=scsql_db.admin, SCSQL_AGENT_DSN=scsql_db.app, SCSQL_KEYSTORE=str(scsql_db.keystore.directory),
               SCSQL_EMBED=embed, PYTHONPATH=str(Path(__file__).resolve().parent.parent.parent))
    return subprocess.run([sys.executable, "-m", "scsql", *args], env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def test_index_prints_a_summary_and_lists_skipped_files_only_with_v(scsql_db, tmp_path):
    root = _tree(tmp_path / "proj")
    roles.create_project(scsql_db.admin, "outp", str(root))
    agent = scsql_db.agent("outp", "outp")
    out = _scsql(scsql_db, "index", str(root), "--agent", agent.name)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        f"scsql: indexed 2 file(s) (2 chunks), 0 unchanged, 0 removed, 0 failed; root {root}",
        "scsql: skipped 6: 5 binary, 1 secret file name (-v lists them)"]
    assert ".pyc" not in out.stderr and ".env" not in out.stderr
    out = _scsql(scsql_db, "index", str(root), "--agent", agent.name, "-v")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith("scsql: indexed 0 file(s) (0 chunks), 2 unchanged")
    assert out.stdout.splitlines()[1] == "scsql: skipped 6: 5 binary, 1 secret file name"
    listed = sorted(line.split()[1].rstrip(":") for line in out.stderr.splitlines() if line.startswith("  skipped"))
    assert listed == [".env", *(f"pkg/__pycache__/m{i}.cpython-311.pyc" for i in range(5))]


def test_index_embed_embeds_inline_and_says_the_queue_is_drained(scsql_db, tmp_path):
    root = _tree(tmp_path / "proj")
    roles.create_project(scsql_db.admin, "outq", str(root))
    agent = scsql_db.agent("outq", "outq")
    out = _scsql(scsql_db, "index", str(root), "--agent", agent.name, "--embed", embed="default")
    assert out.returncode == 0, out.stderr
    assert "scsql: embed queue drained: 2 done in" in out.stderr
    assert "chunk/s" not in out.stderr  # no progress bar in a pipe
    with agent.transaction() as conn:
        status = conn.execute("select embedded, pending_embeddings from scsql.memory_status()").fetchone()
    assert (status["embedded"], status["pending_embeddings"]) == (2, 0)


def _sizes(text: str, spans) -> list[int]:
    lines = text.split("\n")
    return [indexer._chars(lines, s["start"], s["end"]) for s in spans]


def _chunk_chars(scsql_db) -> int:
    """The database's chunk size, as the indexer reads it (once per connection)."""
    return scsql_db.agent("rules", scsql_db.project()).rules().chunk_chars


def test_code_chunks_of_real_files_are_never_fragments(scsql_db):
    """Every chunk of a standard-library module with more than one chunk is at
    least a third of the database's chunk size (unless a neighbour is one line
    longer than a chunk) and at most that size, and the chunks follow each other."""
    most = _chunk_chars(scsql_db)
    least = indexer.min_chunk_chars(most)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    names = ["json/decoder.py", "json/encoder.py", "argparse.py", "dataclasses.py", "string.py", "textwrap.py",
             "shlex.py", "ast.py", "tokenize.py", "locale.py", "pprint.py", "csv.py"]
    small = []
    checked = 0
    for name in names:
        text = (stdlib / name).read_text(encoding="utf-8")
        spans = indexer.spans_for(name, text, most)
        assert spans, name
        assert all(a["end"] < b["start"] for a, b in zip(spans, spans[1:], strict=False)), name
        sizes = _sizes(text, spans)
        lines = text.split("\n")
        assert all(size <= most or s["start"] == s["end"] for s, size in zip(spans, sizes, strict=True))
        if len(spans) > 1:
            checked += len(spans)
            small += [(name, s) for s, size in zip(spans, sizes, strict=True) if size < least
                      and max(len(ln) for ln in lines[s["start"] - 1 : s["end"]]) < most]
    assert checked > 300
    assert small == []


def test_a_large_dict_literal_is_split_evenly_not_into_a_fragment(scsql_db):
    most = _chunk_chars(scsql_db)
    entries = "".join(f'    "key_{i:03d}": "value number {i}",\n' for i in range(56))  # about 1,900 characters
    text = f"import os\n\nTABLE = {{\n{entries}}}\n\n\ndef lookup(key):\n    return TABLE[key]\n"
    spans = indexer.spans_for("table.py", text, most)
    sizes = _sizes(text, spans)
    assert len(spans) == 2 and min(sizes) >= indexer.min_chunk_chars(most) and max(sizes) <= most
    assert spans[-1]["end"] == len(text.split("\n")) - 1  # lookup joined the last piece of the literal
    assert spans[-1]["anchor"] == "lookup"


def test_code_chunks_follow_the_databases_chunk_size(scsql_db, tmp_path):
    """The chunk size is the database's (scsql_caller.chunk_chars), read once
    per connection: with a smaller one, scsql index packs code into smaller chunks."""
    with scsql_db.connect(autocommit=True) as conn:  # this test's database only
        conn.execute("create or replace function scsql_caller.chunk_chars() returns integer "
                     "language sql immutable parallel safe as $$ select 900 $$")
    root = (tmp_path / "proj").resolve()
    root.mkdir()
    body = "".join(f"    total = total + {k} * value  # step {k} of the sum\n" for k in range(3))
    (root / "steps.py").write_text("".join(f"def step_{i}(value):\n    total = 0\n{body}    return total\n\n\n"
                                           for i in range(12)))
    project = scsql_db.project()
    roles.set_project_root(scsql_db.admin, project, str(root))
    agent = scsql_db.agent("chunks", project)
    assert agent.rules().chunk_chars == 900
    indexer.index_tree(agent, root, progress=False)
    with agent.transaction() as conn:
        sizes = [r["n"] for r in conn.execute("select char_length(content) as n from scsql.kb_chunks order by seq")]
    assert len(sizes) > 1 and max(sizes) <= 900 and min(sizes) >= indexer.min_chunk_chars(900)
    assert max(sizes) > 600  # small definitions were packed up to the size, not left alone
