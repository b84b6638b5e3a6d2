"""``scsql import claude [PATH ...]``: backfill past Claude Code sessions.

Each transcript becomes the hook events its session would have sent
(``transcript.to_events``: SessionStart, the prompts, a PostToolUse or
PostToolUseFailure per tool call with its original time, SessionEnd), and
``handlers.capture`` writes them as the hooks' own rows, marked as imported,
in one transaction per transcript. Every event carries a stable id (from the
message's uuid or the tool_use_id), so importing again adds nothing. A
malformed line is skipped and counted, never fatal.

Without PATH: the transcripts of sessions started in this directory (or
``--project-dir``), under ``~/.claude/projects/<the directory, "/" as "-">/``
(HOME honoured).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.command import Commands

# The transcript reader is imported by the functions that read, not when the
# command is registered (every scsql command builds the parser).


@dataclass
class Report:
    files: int = 0
    sessions: int = 0
    prompts: int = 0
    tool_calls: int = 0
    failures: int = 0            # tool calls that failed
    unanswered: int = 0          # tool uses without a result: nothing to import
    malformed: int = 0           # lines skipped
    failed: list[dict[str, str]] = field(default_factory=list)   # files that could not be read or written
    # What this import stored (not counted in a dry run): the rows a session
    # already stored, by the hooks or an earlier import, are not stored again.
    new_sessions: int = 0
    new_prompts: int = 0
    new_tool_calls: int = 0
    already_imported: int = 0    # sessions stored before this import

    def add(self, other: Report) -> None:
        for k in ("files", "sessions", "prompts", "tool_calls", "failures", "unanswered", "malformed",
                  "new_sessions", "new_prompts", "new_tool_calls", "already_imported"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.failed += other.failed

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def line(self, dry_run: bool = False) -> str:
        if dry_run:
            text = (f"scsql: would import {self.sessions} session(s), {self.prompts} prompt(s), "
                    f"{self.tool_calls} tool call(s) ({self.failures} failed) from {self.files} transcript(s); "
                    f"{self.malformed} malformed line(s) skipped")
        else:
            text = (f"scsql: imported {self.new_sessions} new session(s), {self.new_prompts} new prompt(s), "
                    f"{self.new_tool_calls} new tool call(s) from {self.files} transcript(s), "
                    f"{self.already_imported} session(s) already imported; "
                    f"{self.malformed} malformed line(s) skipped")
        if self.unanswered:
            text += f", {self.unanswered} tool use(s) without a result"
        if self.failed:
            text += f"; {len(self.failed)} transcript(s) failed"
        return text


def default_paths(project_dir: str | os.PathLike | None = None) -> list[Path]:
    """The directories holding the transcripts of sessions started in
    PROJECT_DIR (default: the current directory)."""
    from . import transcript

    return transcript.project_dirs(project_dir or os.getcwd())


def convert(path: str | os.PathLike, report: Report | None = None,
            progress: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
    """One transcript's hook events (``transcript.to_events``), adding its counts to REPORT."""
    from . import transcript

    report = report if report is not None else Report()
    stats, counts = transcript.ReadStats(), transcript.EventStats()
    events = transcript.to_events(path, stats, counts, progress)
    report.files += 1
    report.malformed += stats.malformed
    report.sessions += counts.sessions
    report.prompts += counts.prompts
    report.tool_calls += counts.tool_calls
    report.failures += counts.failures
    report.unanswered += counts.unanswered
    return events


def import_files(agent: Any, files: Iterable[Path], *, progress: bool | None = None,
                 dry_run: bool = False) -> Report:
    """Import each transcript in FILES as AGENT, one transaction per transcript
    (``handlers.capture``); a file that cannot be read or written is reported
    in ``failed`` and the others go on. ``progress``: a bar on stderr (None:
    only on a terminal). ``dry_run``: convert and count, write nothing."""
    import psycopg
    from tqdm import tqdm

    from ..core.errors import ScsqlError, from_psycopg

    files = list(files)
    report = Report()
    capture = None
    if not dry_run:
        from . import handlers

        capture = handlers.capture
    total = sum(_size(f) for f in files)
    bar = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc="import",
               disable=(None if progress is None else not progress), dynamic_ncols=True, leave=False)
    try:
        for f in files:
            one = Report()
            try:
                events = convert(f, one, bar.update)
                if events and capture is not None:
                    stored = capture(agent, events)
                    one.already_imported = stored.found_sessions
                    one.new_sessions = stored.new_sessions
                    one.new_prompts = stored.prompts
                    one.new_tool_calls = stored.tool_calls
                report.add(one)
            except OSError as exc:
                report.failed.append({"path": str(f), "error": exc.strerror or str(exc)})
            except (ScsqlError, psycopg.Error) as exc:  # this transcript is not written; the next may be
                err = from_psycopg(exc) if isinstance(exc, psycopg.Error) else exc
                report.failed.append({"path": str(f), "error": str(err)})
    finally:
        bar.close()
    return report


def _size(f: Path) -> int:
    try:
        return f.stat().st_size
    except OSError:
        return 0


# -- the command ----------------------------------------------------------------


def cmd_import_claude(ctx, args) -> int:
    from . import transcript

    if args.paths:
        missing = [p for p in args.paths if not Path(p).exists()]
        if missing:
            print(f"scsql: error: no such file or directory: {', '.join(missing)}", file=sys.stderr)
            return 1
        roots = [Path(p) for p in args.paths]
    else:
        project = Path(args.project_dir or os.getcwd()).absolute()
        roots = default_paths(project)
        if not roots:  # nothing to import is not a failure
            print(f"scsql: no Claude Code transcripts of sessions in {project} under {transcript.projects_dir()}; "
                  f"nothing imported (name transcripts or their directories as PATH)")
            return 0
    files = transcript.transcript_files(roots)
    agent = None if args.dry_run else ctx.open_agent(args.agent)
    try:
        report = import_files(agent, files, progress=False if args.quiet or args.json else None, dry_run=args.dry_run)
    finally:
        if agent is not None:
            agent.db.close()
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        print(report.line(args.dry_run))
        for f in report.failed:
            print(f"  failed  {f['path']}: {f['error']}", file=sys.stderr)
    return 1 if report.failed else 0


def register(commands: Commands) -> None:
    p = commands.add("import", lambda ctx, args: p.print_help() or 2, "backfill scsql from an agent's past sessions")
    isub = p.add_subparsers(dest="source", metavar="SOURCE", required=True)
    c = isub.add_parser("claude", help="import Claude Code transcripts (default: this project's, under ~/.claude/projects)",
                        description="Backfill sessions, prompts, tool calls, summaries and the conversations' text "
                                    "from Claude Code transcripts, as the rows the hooks write, marked as imported "
                                    "with their original times. Importing again adds nothing.")
    c.set_defaults(func=cmd_import_claude)
    c.add_argument("paths", nargs="*", metavar="PATH", help="transcript files (.jsonl) or directories of them")
    c.add_argument("--agent", help="the agent the sessions are imported as (required)")
    c.add_argument("--project-dir", help="without PATH: the project whose transcripts to import (default: the "
                                         "current directory)")
    c.add_argument("--dry-run", action="store_true", help="read and count, write nothing")
    c.add_argument("--json", action="store_true", help="print the report as JSON")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
