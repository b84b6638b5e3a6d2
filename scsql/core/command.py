"""What the commands of ``scsql`` are made with: the parser (``Parser``,
whose commands may add their arguments only when used), the kit each
subsystem adds its commands with (``Commands``), and what several commands
share (``positive_seconds``, ``uri``).

A command is ``fn(ctx, args) -> exit status``: ``ctx`` is its context
(``app.Context``), ``args`` what the parser read. Building the parser
imports no command's implementation and no database driver: a command
imports what it drives when it runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

Command = Callable[[Any, argparse.Namespace], int]  # fn(ctx, args) -> exit status
Populate = Callable[[argparse.ArgumentParser], None]


class Formatter(argparse.HelpFormatter):
    """Help that shows an option's default where its text does not already
    say it (nothing for flags and options without one)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (not action.option_strings or action.default in (None, False, argparse.SUPPRESS)
                or "default" in text or "%(default)" in text):
            return action.help
        return f"{text} (default %(default)s)" if text else "default %(default)s"


class Parser(argparse.ArgumentParser):
    """A parser whose arguments a command may add only when it is used
    (``populate``), so building the parser imports no command's
    implementation."""

    def __init__(self, *a: Any, populate: Populate | None = None, **kw: Any):
        kw.setdefault("formatter_class", Formatter)
        super().__init__(*a, **kw)
        self._populate = populate

    def _complete(self) -> None:
        populate, self._populate = self._populate, None
        if populate is not None:
            populate(self)

    def parse_known_args(self, args=None, namespace=None):
        self._complete()
        return super().parse_known_args(args, namespace)

    def format_usage(self) -> str:
        self._complete()
        return super().format_usage()

    def format_help(self) -> str:
        self._complete()
        return super().format_help()

    def error(self, message: str):
        """argparse's error, plus what a person needs next: a command named
        without its subcommand prints its help; a misspelled command or
        choice gets the nearest ones suggested."""
        import difflib
        import re

        subs = next((a for a in self._actions if isinstance(a, argparse._SubParsersAction)), None)
        if subs is not None and message.startswith("the following arguments are required"):
            self.print_help(sys.stderr)
            self.exit(2, f"{self.prog}: error: name one of its commands: {', '.join(subs.choices)}\n")
        bad = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if bad:
            near = difflib.get_close_matches(bad.group(1), re.findall(r"'([^']*)'", bad.group(2)), n=3)
            if near:
                message = f"{message}; did you mean {' or '.join(map(repr, near))}?"
        super().error(message)


class Commands:
    """The commands of PARSER, as each subsystem adds its own: ``add`` one
    command, ``group`` the subcommands of a command several subsystems
    extend (``scsql hook``, ``queue``, ``install``)."""

    def __init__(self, parser: Parser):
        self._sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(self, name: str, fn: Command, help: str, *, populate: Populate | None = None) -> argparse.ArgumentParser:
        """Add command NAME running FN; POPULATE(parser), when given, adds its
        arguments once the command is parsed or its help printed."""
        p = self._sub.add_parser(name, help=help, description=help, populate=populate)
        p.set_defaults(func=fn)
        return p

    def group(self, name: str, help: str, metavar: str = "COMMAND") -> argparse._SubParsersAction:
        """The subparsers of command NAME: made by the first subsystem that
        adds a subcommand to it, shared by the others. Each subcommand sets
        ``sub_func``, the command it runs."""
        existing = self._sub.choices.get(name)
        if existing is None:
            existing = self.add(name, lambda ctx, args: args.sub_func(ctx, args), help)
            existing.add_subparsers(dest=f"{name}_command", metavar=metavar, required=True)
        return next(a for a in existing._actions if isinstance(a, argparse._SubParsersAction))


def positive_seconds(text: str) -> float:
    """A number of seconds above 0 (argparse type): `--poll 0` would poll
    the database in a busy loop, a negative one fail in select()."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 3600 seconds, got {text}")
    return value


def uri(conninfo: str) -> str:
    """A conninfo string as a postgresql:// URI (for pasting)."""
    from psycopg.conninfo import conninfo_to_dict

    d = conninfo_to_dict(conninfo)
    host = d.pop("host", "")
    port = d.pop("port", None)
    user = d.pop("user", "")
    db = d.pop("dbname", "")
    d.pop("password", None)
    params = {}
    if host.startswith("/"):
        params["host"] = host
        netloc = f"{user}@"
    else:
        netloc = f"{user}@{host}" + (f":{port}" if port else "")
    if port and host.startswith("/") and port != "5432":
        params["port"] = port
    params.update({k: v for k, v in d.items() if v})
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"postgresql://{netloc}/{db}" + (f"?{query}" if query else "")
