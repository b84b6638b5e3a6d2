"""docs/reference.md, generated from the database's catalogue: every public
function of schema scsql (its signature, the roles that may call it and its
``COMMENT ON FUNCTION``), grouped by the sql/ file that defines it, and the
error catalogue (``scsql.error_codes``).

A function's comment is read as the MCP tool list reads it
(:func:`scsql.core.registry.read_comment`): the first paragraph is what the
function does, the ``p_name (spec): ...`` lines its arguments, a ``hidden:``
line why it is left out of the default tool list, and the rest the details.
Where the details say again what the first paragraph says, the function's
section shows the details only; the first sentence is in the table of its
file either way.

tests/ops/test_reference.py renders this from a freshly migrated database and
fails when the committed docs/reference.md differs;
``SCSQL_WRITE_REFERENCE=1 python -m pytest tests/ops/test_reference.py`` writes it.
Against a migrated server of your own: ``python -m scsql.ops.reference DSN``
prints it.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import Any

from ..core.migrate import Source
from ..core.registry import read_comment

REGENERATE = "SCSQL_WRITE_REFERENCE=1 python -m pytest tests/ops/test_reference.py"

FUNCTIONS = """
select p.proname::text as name, p.prokind = 'p' as procedure,
       pg_catalog.pg_get_function_arguments(p.oid) as arguments,
       pg_catalog.pg_get_function_result(p.oid) as result,
       coalesce(pg_catalog.obj_description(p.oid, 'pg_proc'), '') as comment,
       array(select distinct a.grantee::regrole::text
               from pg_catalog.aclexplode(p.proacl) a
              where a.privilege_type = 'EXECUTE' and a.grantee <> 0
                and a.grantee <> 'scsql_owner'::regrole
              order by 1) as roles,
       -- a tool exactly when scsql_caller.api() lists it for an agent
       (p.prokind = 'f' and pg_catalog.has_function_privilege('scsql_agent', p.oid, 'execute')
        and not pg_catalog.has_function_privilege('scsql_worker', p.oid, 'execute')) as tool
  from pg_catalog.pg_proc p
 where p.pronamespace = 'scsql'::regnamespace and p.proname !~ '^_' and p.prokind in ('f', 'p')
 order by p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid)
"""

ERRORS = "select code, name, raised_by, meaning from scsql.error_codes order by code collate \"C\""
BREAKS = ("select kind, found_by, excusable, meaning from scsql.chain_break_kinds"
          " order by found_by, kind collate \"C\"")

ROLE_NAMES = {"scsql_agent": "agents", "scsql_admin": "administrators",
              "scsql_auditor": "the auditor", "scsql_worker": "the worker"}

_DEFINES = re.compile(r"create\s+(?:or\s+replace\s+)?(?:function|procedure)\s+scsql\.(\w+)\s*\(", re.I)
_SENTENCE_END = re.compile(r"(?<=[\w)\]\"'`][.!?])\s+(?=[A-Z(`])")  # not after "..."
_WORD = re.compile(r"[a-z0-9_]{3,}")
_WHO_WORDS = {"administrators", "agents", "auditor", "worker", "the", "and", "only"}  # "Administrators only."


@dataclass(frozen=True)
class Function:
    name: str
    procedure: bool
    arguments: str
    result: str | None
    comment: str
    roles: list[str]
    tool: bool


@dataclass(frozen=True)
class Group:
    file: str  # sql/NN_name.sql
    about: str  # the first sentence of the file's header comment
    functions: list[Function]


def first_sentence(text: str) -> str:
    return _SENTENCE_END.split(text.strip(), maxsplit=1)[0]


def header(text: str) -> str:
    """The first sentence of a SQL file's leading comment."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("--") or not line[2:].strip():
            break
        lines.append(line[2:].strip())
    return first_sentence(" ".join(lines))


def groups(functions: list[Function], source: Source | None = None) -> list[Group]:
    """FUNCTIONS by the sql/ file that defines each, in the files' order; a
    function no file defines by name comes last, under "elsewhere"."""
    files = [f for f in (source or Source()).api() if f.name.startswith("sql/")]
    home = {}
    for f in files:
        for name in _DEFINES.findall(f.text):
            home.setdefault(name, f.name)
    out = []
    for f in files:
        members = [fn for fn in functions if home.get(fn.name) == f.name]
        if members:
            out.append(Group(f.name, header(f.text), members))
    rest = [fn for fn in functions if fn.name not in home]
    if rest:
        out.append(Group("elsewhere", "Functions no file of sql/ defines by name.", rest))
    return out


def split_top(text: str) -> list[str]:
    """TEXT split at its commas outside parentheses, brackets and quotes."""
    parts, depth, quote, start = [], 0, None, 0
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    return parts + [tail] if tail else parts


def _listed(items: list[str], width: int = 90) -> str:
    one_line = ", ".join(items)
    if len(one_line) <= width:
        return one_line
    return "\n" + ",\n".join(f"  {item}" for item in items) + "\n"


def signature(fn: Function) -> str:
    """The function as psql's \\df shows it, an argument a line when long; OUT
    arguments are shown as what it returns."""
    args = split_top(fn.arguments)
    outs = [a.removeprefix("OUT ") for a in args if a.startswith("OUT ")]
    ins = [a.removeprefix("IN ") for a in args if not a.startswith("OUT ")]
    head = f"{'procedure ' if fn.procedure else ''}scsql.{fn.name}({_listed(ins)})"
    if fn.procedure or not fn.result:
        return head
    m = re.fullmatch(r"TABLE\((.*)\)", fn.result, re.S)
    if m:
        result = f"TABLE({_listed(split_top(m.group(1)))})"
    elif outs:
        result = f"{'SETOF ' if fn.result.startswith('SETOF ') else ''}({_listed(outs)})"
    else:
        result = fn.result
    return f"{head}\nreturns {result}"


def prose(text: str) -> str:
    """Comment text as Markdown prose: what would read as an HTML tag is escaped."""
    return text.replace("&", "&amp;").replace("<", "&lt;")


def cell(text: str) -> str:
    return prose(text).replace("|", "\\|").replace("\n", " ")


def anchor(fn: Function) -> str:
    return f"scsql{fn.name}"


def details(comment: str) -> tuple[str, str]:
    """(lead, details) of a comment: its first paragraph, and what is neither that,
    an argument line nor a hidden line."""
    lines = comment.strip().split("\n")
    cut = next((i for i, line in enumerate(lines) if not line.strip()), len(lines))
    rest = []
    for line in lines[cut:]:
        parsed = read_comment("lead\n\n" + line)  # one line, read as the tool list reads it
        if not parsed.args and parsed.hidden is None:
            rest.append(line)
    return " ".join(x.strip() for x in lines[:cut]), "\n".join(rest).strip()


def restates(lead: str, more: str) -> bool:
    """Whether MORE says again what LEAD says: most of the lead's words are in it."""
    words = set(_WORD.findall(lead.lower()))
    return bool(words) and len(words & set(_WORD.findall(more.lower()))) >= 0.6 * len(words)


def _and(items: list[str]) -> str:
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else "".join(items)


def who(fn: Function) -> str:
    names = [ROLE_NAMES[r] for r in ROLE_NAMES if r in fn.roles] + [f"`{r}`" for r in fn.roles if r not in ROLE_NAMES]
    text = "Called by " + (_and(names) or "its owner only")
    if fn.tool:
        hidden = read_comment(fn.comment).hidden
        text += f"; the MCP tool `{fn.name}`" + (f", left out of the default tool list ({hidden})" if hidden else "")
    return text + "."


def summary(comment: str) -> str:
    """The first sentence of what a function does, past a sentence that only names who may call it."""
    lead = details(comment)[0]
    first = first_sentence(lead)
    if set(_WORD.findall(first.lower())) <= _WHO_WORDS:
        lead = lead[len(first):].strip() or first
    return first_sentence(lead)


def function_section(fn: Function) -> list[str]:
    lead, more = details(fn.comment)
    out = [f"### scsql.{fn.name}", "", "```text", signature(fn), "```", "", prose(who(fn)), ""]
    if lead and not (more and restates(lead, more)):
        out += [prose(lead), ""]
    args = read_comment(fn.comment).args
    if args:
        out += [f"- `{name}`" + (f" ({spec})" if spec else "") + f": {prose(doc)}"
                for name, (spec, doc) in args.items()] + [""]
    if more:
        out += [prose(more), ""]
    return out


def group_section(group: Group) -> list[str]:
    out = [f"## {group.file}", "", prose(group.about), "", "| function | what it does |", "| --- | --- |"]
    out += [f"| [{fn.name}](#{anchor(fn)}) | {cell(summary(fn.comment))} |"
            for fn in group.functions]
    out.append("")
    for fn in group.functions:
        out += function_section(fn)
    return out


def errors_section(errors: list[dict[str, Any]], functions: list[Function]) -> list[str]:
    out = ["## Errors", "",
           "Every error scsql raises: `select * from scsql.error_codes order by code`, or `scsql errors`. "
           "The same code and name reach psql, the CLI and MCP clients. *Raised by* says where: "
           "the database, or the client (the Python layer). *Named by* lists the functions "
           "whose comments name the code.", "",
           "| code | name | raised by | meaning | named by |", "| --- | --- | --- | --- | --- |"]
    for e in errors:
        named = [f"[{fn.name}](#{anchor(fn)})" for fn in functions
                 if re.search(rf"\b{re.escape(e['code'])}\b", fn.comment)]
        out.append(f"| {e['code']} | `{e['name']}` | {e['raised_by']} | {cell(e['meaning'])} | {', '.join(named)} |")
    return out + [""]


def breaks_section(kinds: list[dict[str, Any]]) -> list[str]:
    out = ["## Chain breaks", "",
           "Every kind of break `scsql verify` and `scsql.verify_chain` report: "
           "`select * from scsql.chain_break_kinds`. *Found by* says which verifier finds it: both, or "
           "`scsql verify` alone (the client: signatures, keys, exported checkpoints and rows of no chain). An acknowledged "
           "quarantine excuses only the breaks marked *excusable*: those an agent can cause through the API.", "",
           "| kind | found by | excusable | meaning |", "| --- | --- | --- | --- |"]
    out += [f"| `{k['kind']}` | {k['found_by']} | {'yes' if k['excusable'] else 'no'} | {cell(k['meaning'])} |"
            for k in kinds]
    return out + [""]


def render(conn, source: Source | None = None) -> str:
    """docs/reference.md of the database CONN is connected to (an administrator's connection)."""
    functions = [Function(**row) for row in _rows(conn, FUNCTIONS)]
    errors = _rows(conn, ERRORS)
    grouped = groups(functions, source)
    out = ["# Reference", "",
           "Every public function of schema `scsql`, by the file of `sql/` that defines it, every "
           "error code and every kind of chain break. Generated from the database's catalogue by `scsql/ops/reference.py`: "
           "each function's signature, the roles that may call it and its `COMMENT ON FUNCTION` "
           "(what `\\df+ scsql.*` shows in psql). Do not edit it by hand; after changing a "
           f"function or an error code, regenerate it with `{REGENERATE}`.", ""]
    out += [f"- [{g.file}](#{re.sub(r'[^a-z0-9_-]', '', g.file.lower())}): "
            + ", ".join(f"[{fn.name}](#{anchor(fn)})" for fn in g.functions) for g in grouped]
    out += ["- [Errors](#errors)", "- [Chain breaks](#chain-breaks)", ""]
    for g in grouped:
        out += group_section(g)
    out += errors_section(errors, functions)
    out += breaks_section(_rows(conn, BREAKS))
    return "\n".join(out).rstrip("\n") + "\n"


def _rows(conn, query: str) -> list[dict[str, Any]]:
    cur = conn.execute(query)
    names = [c.name for c in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def main(argv: list[str] | None = None) -> int:
    import psycopg

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m scsql.ops.reference DSN  (an administrator's connection)", file=sys.stderr)
        return 2
    with psycopg.connect(args[0]) as conn:
        sys.stdout.write(render(conn))
    return 0


if __name__ == "__main__":
    sys.exit(main())
