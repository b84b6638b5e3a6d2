"""README.md and every page of docs/, tried as a new user would: every shell
and SQL block, in order, as written. The README runs against a fresh embedded
server that its own ``scsql up`` starts in a sandbox (its own HOME,
SCSQL_DATA_DIR and SCSQL_KEYSTORE; ``scsql`` on PATH runs this checkout); each
page of docs/ then runs on a copy of that sandbox as the README left it (the
pages say they continue from the README's tour), so one page never depends on
another and a failure names its page. The copy keeps the sandbox's paths, so
the server, the keys and the default project's root are where they were.

How a page says what to run (a reader sees the first two; the third is an
HTML comment, invisible once rendered):

- A fence's language says what a block is. ``sh``, ``bash``: commands, run one
  line at a time, each by a bash of its own (so no ``cd`` or ``export``), each
  of which must exit 0. ``console``: the lines starting with ``$ `` are such
  commands, the others their output. ``sql``: run by the ``scsql psql ...``
  command the paragraph just before the block names in inline code (``scsql
  psql --agent alice``, ``scsql psql --auditor``), with the block on its
  standard input, as if pasted; psql stops at the first error (ON_ERROR_STOP)
  and exits non-zero. ``text``, ``json``: not commands. Any other language, or
  none, fails the test.
- ``<!-- not run: REASON -->`` on the line before a fence: the block cannot run
  as written in a test (it installs packages, serves until stopped, needs a
  server of your own). Its ``scsql`` lines must still be commands the CLI
  accepts.
- Nothing is substituted: an example that needs an id selects it.

Every relative link between the README and the pages must name a file that
exists and, with ``#anchor``, a heading of that file.

The whole module takes about four minutes on two busy cores: the README and
one server start and stop per page that has a block to run.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from scsql.cli import build_parser

from ..helpers import one_error_line, scsql

REPO = Path(__file__).resolve().parent.parent.parent
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]

COMMANDS = {"sh", "bash", "console"}
SQL = {"sql"}
NOT_COMMANDS = {"text", "json"}
FENCE = re.compile(r"^```\s*([\w-]*)\s*$")
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(?P<why>.+?)\s*-->$")
PSQL = re.compile(r"`(scsql psql\b[^`]*)`")
SHELL_OPERATORS = {"&&", "||", "|", ";", ">", ">>", "<", "2>", "&"}


@dataclass
class Block:
    page: str  # the page's path in the repository
    lang: str
    text: str
    line: int  # of the opening fence, 1-based
    not_run: str | None  # why, when marked <!-- not run: ... -->
    runner: str | None  # for SQL: the scsql psql command of the paragraph before it

    def where(self) -> str:
        return f"{self.page}:{self.line} ({self.lang} block)"

    @property
    def runs(self) -> bool:
        return not self.not_run and self.lang not in NOT_COMMANDS

    def commands(self) -> list[str]:
        """The command lines of a shell or console block (continuation lines joined)."""
        lines = self.text.splitlines()
        if self.lang == "console":
            lines = [ln[2:] for ln in lines if ln.startswith("$ ")]
        out: list[str] = []
        pending = ""
        for ln in lines:
            if ln.rstrip().endswith("\\"):
                pending += ln.rstrip()[:-1] + " "
                continue
            ln = pending + ln
            pending = ""
            if ln.strip() and not ln.lstrip().startswith("#"):
                out.append(ln.strip())
        return out


def page_blocks(text: str, page: str) -> list[Block]:
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start = i
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
        assert end is not None, f"{page}:{start + 1}: a code fence is never closed"
        before = list(lines[:start])
        while before and not before[-1].strip():
            before.pop()
        mark = NOT_RUN.match(before[-1].strip()) if before else None
        if mark:
            before.pop()
            while before and not before[-1].strip():
                before.pop()
        paragraph: list[str] = []
        while before and before[-1].strip() and not before[-1].startswith("```"):
            paragraph.insert(0, before.pop())
        runners = PSQL.findall(" ".join(paragraph))
        blocks.append(Block(page, m.group(1), "\n".join(lines[start + 1:end]) + "\n", start + 1,
                            mark.group("why") if mark else None, runners[-1] if runners else None))
        i = end + 1
    return blocks


def scsql_argv(command: str) -> list[str] | None:
    """The arguments of a shell line that runs scsql (up to its first shell operator), or None."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return None
    words = words[:next((k for k, w in enumerate(words) if w in SHELL_OPERATORS), len(words))]
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):  # VAR=value scsql ...
        words.pop(0)
    return words[1:] if words and words[0] == "scsql" else None


@functools.cache
def _parser():
    return build_parser()[0]


def cli_accepts(argv: list[str]) -> str | None:
    """None when scsql's parser takes these arguments as main() does, else why not."""
    try:
        args, unknown = _parser().parse_known_args(argv)
    except SystemExit:
        return "scsql's argument parser refused it"
    if unknown and not getattr(args, "pass_through", False):
        return f"unrecognized arguments: {' '.join(unknown)}"
    return None


def _name(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


BLOCKS = {_name(p): page_blocks(p.read_text(), _name(p)) for p in PAGES}
RUN_PAGES = [name for name, blocks in BLOCKS.items() if name != "README.md" and any(b.runs for b in blocks)]


def test_every_block_says_what_it_is():
    """Each fence names a known language; each SQL block names the psql that runs it;
    each scsql line of a block not run is still a command the CLI accepts."""
    assert BLOCKS["README.md"], "README.md has no code blocks"
    problems = []
    for b in (b for blocks in BLOCKS.values() for b in blocks):
        if b.lang not in COMMANDS | SQL | NOT_COMMANDS:
            problems.append(f"{b.where()}: fence language {b.lang!r} is none of "
                            f"{sorted(COMMANDS | SQL | NOT_COMMANDS)}")
        if b.lang in NOT_COMMANDS and b.not_run:
            problems.append(f"{b.where()}: a {b.lang} block is never run; drop its 'not run' mark")
        if b.lang in SQL and not b.not_run and not b.runner:
            problems.append(f"{b.where()}: the paragraph before a SQL block must name the "
                            "`scsql psql ...` that runs it")
        if b.lang in COMMANDS:
            for command in b.commands():
                if not b.not_run and re.match(r"^(cd|export|source|\.)\s", command):
                    problems.append(f"{b.where()}: {command!r}: each line runs in a shell of its own, "
                                    "so this would not carry over to the next one")
                argv = scsql_argv(command)
                why = cli_accepts(argv) if argv is not None else None
                if why:
                    problems.append(f"{b.where()}: {command!r}: {why}")
    assert not problems, "\n".join(problems)


# -- links between the pages ---------------------------------------------------------

LINK = re.compile(r"\]\((?!https?:|mailto:)([^)\s]+)\)")


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings (outside code blocks)."""
    out: set[str] = set()
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"^#{1,6}\s+(.*?)\s*$", line)):
            slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
            out.add(slug)
    return out


def test_every_link_between_the_pages_resolves():
    problems = []
    for page in PAGES:
        text = page.read_text()
        prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
        for target in LINK.findall(prose):
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                problems.append(f"{_name(page)}: link to {target}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
                problems.append(f"{_name(page)}: link to {target}: {_name(dest)} has no heading #{anchor}")
    assert not problems, "\n".join(problems)


# -- running the pages ---------------------------------------------------------------


@dataclass
class Machine:
    """The sandbox the README ran in, and a copy of it as the README left it."""

    env: dict[str, str]
    root: Path  # the sandbox: home/, work/, bin/
    snapshot: Path  # the sandbox as the README left it, its server stopped
    readme: str | None  # why the README failed, or None
    ran: int  # commands and SQL blocks of the README that ran

    @property
    def work(self) -> Path:
        return self.root / "work"

    def restore(self) -> None:
        """The sandbox back as the README left it, at the same paths."""
        shutil.rmtree(self.root)
        _copy(self.snapshot, self.root)


def run(command: str, env: dict[str, str], cwd: Path, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-o", "pipefail", "-c", command], env=env, cwd=cwd, input=stdin,
                          capture_output=True, text=True, timeout=600)


def failure(b: Block, command: str, proc: subprocess.CompletedProcess) -> str:
    return (f"{b.where()}: {command!r} exited {proc.returncode}\n"
            f"--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}")


def run_blocks(blocks: list[Block], env: dict[str, str], cwd: Path) -> tuple[int, str | None]:
    """Runs every block that runs, in order, until one fails: (how many ran, the failure or None)."""
    ran = 0
    for b in (b for b in blocks if b.runs):
        if b.lang in SQL:
            proc = run(b.runner, env, cwd, stdin=b.text)
            if proc.returncode != 0 or "ERROR:" in proc.stderr:
                return ran, failure(b, b.runner, proc)
            ran += 1
            continue
        for command in b.commands():
            proc = run(command, env, cwd)
            if proc.returncode != 0:
                return ran, failure(b, command, proc)
            ran += 1
    return ran, None


def _sandbox(root: Path) -> dict[str, str]:
    """A new user's machine: an empty HOME, scsql's data and keys in it, a small
    repository to work in, and ``scsql`` on PATH running this checkout."""
    home, work, bin_dir = root / "home", root / "work", root / "bin"
    for d in (home, work, bin_dir):
        d.mkdir(parents=True)
    (bin_dir / "scsql").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m scsql "$@"\n')
    (bin_dir / "scsql").chmod(0o755)
    shutil.copy(README, work / "README.md")
    (work / "src").mkdir()
    shutil.copy(REPO / "scsql" / "audit" / "encoding.py", work / "src" / "encoding.py")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCSQL_", "PG"))}
    env.update(HOME=str(home), SCSQL_DATA_DIR=str(home / ".local" / "share" / "scsql"),
               SCSQL_KEYSTORE=str(home / "keys"), PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])))
    return env


def _copy(source: Path, dest: Path) -> None:
    """SOURCE copied to DEST with owners and modes (as root, the embedded server's
    files belong to the user it runs as, which must still own the copy)."""
    subprocess.run(["cp", "-a", str(source), str(dest)], check=True)


def _down(env: dict[str, str], cwd: Path) -> None:
    subprocess.run(["scsql", "down"], env=env, cwd=cwd, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    """The README run once in a fresh sandbox, then the sandbox copied with its server stopped."""
    base = tmp_path_factory.mktemp("readme")
    root = base / "sandbox"
    env = _sandbox(root)
    try:
        ran, readme = run_blocks(BLOCKS["README.md"], env, root / "work")
    finally:
        _down(env, root / "work")
    _copy(root, base / "snapshot")
    m = Machine(env, root, base / "snapshot", readme, ran)
    yield m
    _down(env, m.work)


def test_readme_runs_as_written(machine):
    assert machine.readme is None, machine.readme
    assert machine.ran >= 15  # the README is a tour, not a few lines


@pytest.mark.parametrize("page", RUN_PAGES)
def test_page_runs_as_written(machine, page):
    """PAGE's blocks, in order, on the machine as the README's tour left it."""
    if machine.readme is not None:
        pytest.fail("the README did not run as written (test_readme_runs_as_written says why)")
    machine.restore()
    up = run("scsql up", machine.env, machine.work)
    assert up.returncode == 0, up.stderr
    try:
        ran, why = run_blocks(BLOCKS[page], machine.env, machine.work)
    finally:
        _down(machine.env, machine.work)
    assert why is None, why
    assert ran >= 1


# -- what the README promises of the CLI, one by one ---------------------------------


def test_psql_passes_its_own_options_on(scsql_db, tmp_path):
    """scsql psql --agent NAME -f FILE (no --): unknown options are psql's, in order."""
    agent = scsql_db.agent("reader", scsql_db.project())
    sql = tmp_path / "who.sql"
    sql.write_text("select agent from scsql.whoami();\n")
    env = {"SCSQL_DSN": scsql_db.admin, "SCSQL_KEYSTORE": str(tmp_path / "ks")}
    out = scsql("psql", "--agent", agent.name, "-At", "-f", str(sql), env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == agent.name
    dashed = scsql("psql", "--agent", agent.name, "--", "-At", "-c", "select 1", env=env)
    assert (dashed.returncode, dashed.stdout.strip()) == (0, "1"), dashed.stderr
    refused = scsql("psql", "--agent", agent.name, "-At", "-c", "select scsql.verify_chain(1)", env=env)
    assert refused.returncode != 0 and "permission denied" in refused.stderr
    unknown = scsql("status", "--bogus", env=env)
    assert unknown.returncode == 2 and "unrecognized arguments: --bogus" in unknown.stderr


def test_psql_as_the_auditor_reads_and_cannot_write(scsql_db, tmp_path):
    env = {"SCSQL_DSN": scsql_db.admin, "SCSQL_KEYSTORE": str(tmp_path / "ks")}
    who = scsql("psql", "--auditor", "-At", "-c", "select current_user", env=env)
    assert (who.returncode, who.stdout.strip()) == (0, "scsql_auditor"), who.stderr
    chains = scsql("psql", "--auditor", "-At", "-c",
                   "select count(*) from scsql.chains c, scsql.verify_chain(c.chain_id) v", env=env)
    assert chains.returncode == 0, chains.stderr
    write = scsql("psql", "--auditor", "-c", "select scsql.create_project('nope')", env=env)
    assert write.returncode != 0 and "permission denied" in write.stderr
    both = scsql("psql", "--auditor", "--agent", "x", env=env)
    assert both.returncode == 2 and "not allowed with" in both.stderr


def test_checkpoint_export_writes_its_file_and_verify_names_a_missing_one(scsql_db, tmp_path):
    env = {"SCSQL_DSN": scsql_db.admin, "SCSQL_KEYSTORE": str(tmp_path / "ks")}
    missing = tmp_path / "nowhere" / "heads.jsonl"
    line = one_error_line(scsql("verify", "--checkpoints", str(missing), env=env), "SC010")
    assert "no such file" in line and "Traceback" not in line
    assert scsql("checkpoint", "--init", env=env).returncode == 0
    heads = tmp_path / "out" / "heads.jsonl"
    first = scsql("checkpoint", "--export", str(heads), env=env)  # nothing to sign yet: an empty file
    assert first.returncode == 0, first.stderr
    assert heads.is_file() and heads.read_text() == ""
    ok = scsql("verify", "--checkpoints", str(heads), env=env)
    assert ok.returncode == 0, ok.stderr
    not_an_export = tmp_path / "notes.jsonl"
    not_an_export.write_text('{"note": 1}\n')
    one_error_line(scsql("checkpoint", "--export", str(not_an_export), env=env), "SC010")
    with scsql_db.connect() as conn:  # refused before anything was signed
        assert conn.execute("select count(*) as n from scsql.checkpoints()").fetchone()["n"] == 0
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("not json\n")
    one_error_line(scsql("verify", "--checkpoints", str(garbage), env=env), "SC010")
