"""``scsql bench retrieval --dataset code``: a docstring-to-code retrieval
dataset built in the run from Python's standard library, the way
CodeSearchNet built its queries.

Every public function of the library's modules (a top-level ``def``, or a
method of a public top-level class, whose name does not start with ``_``)
that has a docstring is a candidate. Its query is the docstring's first
sentence (up to the first blank line or the first period followed by a
space, whitespace collapsed); its only relevant document is the function's
source with the docstring removed. As CodeSearchNet did, it drops queries of
fewer than 3 words and functions of fewer than 3 lines, and here also every
query two functions share (which would have two right answers).

The selection is deterministic: candidates are ordered by the sha256 of
their qualified name and the first ``size`` taken; a quarter of them (by
the same hash) are train queries, the rest test. The dataset is written as
a BEIR directory (corpus.jsonl, queries.jsonl, qrels/{train,test}.tsv), so
``scsql bench retrieval`` runs it as it runs SciFact (``retrieval._run_code``).
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import sysconfig
import textwrap
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

SKIP_DIRS = {"test", "tests", "idlelib", "site-packages", "__pycache__", "lib2to3", "turtledemo", "__phello__"}
DEFAULT_SIZE = 500


@dataclass(frozen=True)
class Pair:
    doc_id: str  # module.qualname
    query: str
    code: str


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def modules(root: Path) -> list[tuple[str, Path]]:
    """(dotted module name, path) of the .py files under ROOT, sorted, outside tests and vendored trees."""
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if SKIP_DIRS & set(rel.parts[:-1]) or any(p.startswith("_") and p != "__init__.py" for p in rel.parts):
            continue
        name = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
        out.append((name, path))
    return out


def first_sentence(doc: str) -> str:
    """A docstring's first sentence, whitespace collapsed."""
    para = re.split(r"\n\s*\n", doc.strip(), maxsplit=1)[0]
    para = " ".join(para.split())
    m = re.search(r"(?<!\be\.g)(?<!\bi\.e)\.(\s|$)", para)
    return (para[: m.start() + 1] if m else para).strip()


def without_docstring(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The function's source (decorators included, dedented) with its docstring statement removed."""
    doc = node.body[0]
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    end = node.end_lineno or node.lineno
    if doc.end_lineno is None or len(node.body) < 2:
        return None  # nothing but a docstring
    kept = lines[start - 1 : doc.lineno - 1] + lines[doc.end_lineno : end]
    return textwrap.dedent("\n".join(kept)).strip("\n")


def functions(module: str, path: Path) -> list[Pair]:
    try:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return []
    lines = text.split("\n")
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.append((node.name, node))
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            found += [(f"{node.name}.{m.name}", m) for m in node.body
                      if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)]
    out = []
    for qualname, node in found:
        if qualname.rsplit(".", 1)[-1].startswith("_"):
            continue
        doc = ast.get_docstring(node)
        if not doc:
            continue
        query = first_sentence(doc)
        code = without_docstring(lines, node)
        if code is None or len(query.split()) < 3 or len(code.splitlines()) < 3:
            continue
        out.append(Pair(f"{module}.{qualname}", query, code))
    return out


def _rank(doc_id: str) -> str:
    return hashlib.sha256(doc_id.encode()).hexdigest()


def build(root: Path | None = None, size: int = DEFAULT_SIZE) -> list[Pair]:
    """The dataset's pairs (see the module docstring), at most SIZE, in a fixed order."""
    pairs: dict[str, Pair] = {}
    for module, path in modules(root or stdlib_root()):
        for p in functions(module, path):
            pairs.setdefault(p.doc_id, p)
    shared = Counter(" ".join(p.query.lower().split()) for p in pairs.values())
    unique = [p for p in pairs.values() if shared[" ".join(p.query.lower().split())] == 1]
    return sorted(unique, key=lambda p: _rank(p.doc_id))[:size]


def is_train(doc_id: str) -> bool:
    return int(_rank(doc_id)[-2:], 16) % 4 == 0


def write_beir(pairs: list[Pair], directory: Path) -> Path:
    """Write PAIRS as a BEIR dataset (query id = document id) in DIRECTORY; returns it."""
    (directory / "qrels").mkdir(parents=True, exist_ok=True)
    with (directory / "corpus.jsonl").open("w") as f:
        for p in pairs:
            f.write(json.dumps({"_id": p.doc_id, "title": "", "text": f"```python\n{p.code}\n```"}) + "\n")
    with (directory / "queries.jsonl").open("w") as f:
        for p in pairs:
            f.write(json.dumps({"_id": p.doc_id, "text": p.query}) + "\n")
    for split in ("train", "test"):
        with (directory / "qrels" / f"{split}.tsv").open("w") as f:
            f.write("query-id\tcorpus-id\tscore\n")
            for p in pairs:
                if is_train(p.doc_id) == (split == "train"):
                    f.write(f"{p.doc_id}\t{p.doc_id}\t1\n")
    return directory
