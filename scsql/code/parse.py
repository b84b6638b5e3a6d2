"""One source file as definitions and references, with tree-sitter.

The grammars are the tree-sitter project's own wheels (``tree-sitter-python``
and the others of pyproject.toml), each holding its compiled grammar: nothing
is downloaded when a file is parsed. A language is known by the file's
suffix (:data:`LANGUAGES`); a file of another language is text to scsql
(chunks, no symbols). Manifests (pyproject.toml, package.json, Makefile) are
read for the commands they name.

What :func:`parse` returns (:class:`Parsed`), for ``scsql.index_code``:

* definitions: modules (namespaces), classes, interfaces, types, functions,
  methods, macros, constants (module-level UPPER_CASE names in Python), and
  SQL's tables, views, functions and types; each with its kind, name,
  qualified name (``Class.method``; a Go or Rust method is qualified by its
  receiver or impl type), signature (the text up to its body, one line,
  at most 200 characters), line span, and its key (the qualified name, with
  ``#2``, ``#3`` for repeats), by which its enclosing definition is named;
* references: calls (the callee's name and, for ``a.b.f()``, its qualifier
  ``a.b``), inheritance (``class C(B)``, ``extends``, ``implements``, ``impl
  Trait for T``, C++ base classes) and imports (the module as a path key
  ``a/b/c``, the symbol imported and the name it is bound to), each with the
  definition it occurs in and its lines (one row per distinct reference in a
  definition);
* status: ``parsed``, or ``partial`` with the lines where the grammar found
  errors: what parsed around them is kept. Resolving a reference to its
  definition is the database's (sql/70_code.sql).
"""

from __future__ import annotations

import importlib
import json
import re
import threading
import tomllib
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import cache
from pathlib import PurePosixPath
from typing import Any

LANGUAGES = {
    ".py": "python", ".pyi": "python",
    ".js": "javascript", ".jsx": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx",
    ".go": "go", ".rs": "rust", ".java": "java",
    ".c": "c", ".h": "c",
    ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".hxx": "cpp",
    ".sql": "sql",
}
MANIFESTS = {"pyproject.toml", "package.json", "Makefile", "makefile", "GNUmakefile"}
# language -> (module of its grammar wheel, function returning the grammar)
GRAMMARS = {
    "python": ("tree_sitter_python", "language"), "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"), "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"), "java": ("tree_sitter_java", "language"),
    "c": ("tree_sitter_c", "language"), "cpp": ("tree_sitter_cpp", "language"), "sql": ("tree_sitter_sql", "language"),
}
MAX_SIGNATURE = 200
MAX_LINES_PER_REF = 20
MAX_ERROR_LINES = 20

# -- what each language calls a definition, a call, a base -------------------------------
#
# Captures: @def.KIND on a definition with @name on its name (and @scope on
# the type a method is defined for outside it); @call on a call with
# @callee, and @qual on what it is called on; @base on a base class or
# interface (and @qual on its module). Each pattern is compiled on its own
# and one a grammar lacks is left out, so a grammar's new version costs a
# pattern, never the language.

_CALLS_C = [
    "(call_expression function: (identifier) @callee) @call",
    "(call_expression function: (field_expression argument: (_) @qual field: (field_identifier) @callee)) @call",
]
_DEFS_C = [
    "(function_definition declarator: (function_declarator declarator: (identifier) @name)) @def.function",
    "(function_definition declarator: (pointer_declarator declarator: (function_declarator declarator: (identifier) @name))) @def.function",
    "(struct_specifier name: (type_identifier) @name body: (_)) @def.class",
    "(union_specifier name: (type_identifier) @name body: (_)) @def.class",
    "(enum_specifier name: (type_identifier) @name body: (_)) @def.type",
    "(type_definition declarator: (type_identifier) @name) @def.type",
    "(preproc_function_def name: (identifier) @name) @def.macro",
]
_JS_DEFS = [
    "(class_declaration name: (_) @name) @def.class",
    "(class name: (_) @name) @def.class",
    "(function_declaration name: (identifier) @name) @def.function",
    "(generator_function_declaration name: (identifier) @name) @def.function",
    "(method_definition name: (_) @name) @def.method",
    "(variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression)]) @def.function",
]
_TS_DEFS = _JS_DEFS + [
    "(abstract_class_declaration name: (_) @name) @def.class",
    "(interface_declaration name: (_) @name) @def.interface",
    "(type_alias_declaration name: (_) @name) @def.type",
    "(enum_declaration name: (_) @name) @def.type",
    "(method_signature name: (_) @name) @def.method",
    "(abstract_method_signature name: (_) @name) @def.method",
    "(function_signature name: (_) @name) @def.function",
    "(internal_module name: (_) @name) @def.module",
]
_JS_REFS = [
    "(call_expression function: (identifier) @callee) @call",
    "(call_expression function: (member_expression object: (_) @qual property: (property_identifier) @callee)) @call",
    "(new_expression constructor: (identifier) @callee) @call",
    "(new_expression constructor: (member_expression object: (_) @qual property: (property_identifier) @callee)) @call",
    "(class_heritage (identifier) @base)",
    "(class_heritage (extends_clause value: (identifier) @base))",
    "(class_heritage (implements_clause (type_identifier) @base))",
    "(extends_type_clause (type_identifier) @base)",
]
PATTERNS: dict[str, list[str]] = {
    "python": [
        "(class_definition name: (identifier) @name) @def.class",
        "(function_definition name: (identifier) @name) @def.function",
        "(module (expression_statement (assignment left: (identifier) @name) @def.constant))",
        "(call function: (identifier) @callee) @call",
        "(call function: (attribute object: (_) @qual attribute: (identifier) @callee)) @call",
        "(class_definition superclasses: (argument_list (identifier) @base))",
        "(class_definition superclasses: (argument_list (attribute object: (_) @qual attribute: (identifier) @base)))",
    ],
    "javascript": _JS_DEFS + _JS_REFS,
    "typescript": _TS_DEFS + _JS_REFS,
    "tsx": _TS_DEFS + _JS_REFS,
    "go": [
        "(function_declaration name: (identifier) @name) @def.function",
        "(method_declaration receiver: (parameter_list (parameter_declaration type: [(type_identifier) @scope"
        " (pointer_type (type_identifier) @scope) (generic_type type: (type_identifier) @scope)"
        " (pointer_type (generic_type type: (type_identifier) @scope))])) name: (field_identifier) @name) @def.method",
        "(type_spec name: (type_identifier) @name type: (struct_type)) @def.class",
        "(type_spec name: (type_identifier) @name type: (interface_type)) @def.interface",
        "(type_spec name: (type_identifier) @name type: [(type_identifier) (qualified_type) (function_type)"
        " (map_type) (slice_type) (pointer_type) (array_type) (channel_type) (generic_type)]) @def.type",
        "(call_expression function: (identifier) @callee) @call",
        "(call_expression function: (selector_expression operand: (_) @qual field: (field_identifier) @callee)) @call",
        "(field_declaration_list (field_declaration !name type: [(type_identifier) @base (pointer_type (type_identifier) @base)]))",
    ],
    "rust": [
        "(function_item name: (identifier) @name) @def.function",
        "(function_signature_item name: (identifier) @name) @def.function",
        "(struct_item name: (type_identifier) @name) @def.class",
        "(enum_item name: (type_identifier) @name) @def.class",
        "(union_item name: (type_identifier) @name) @def.class",
        "(trait_item name: (type_identifier) @name) @def.interface",
        "(type_item name: (type_identifier) @name) @def.type",
        "(mod_item name: (identifier) @name body: (_)) @def.module",
        "(macro_definition name: (identifier) @name) @def.macro",
        "(impl_item type: [(type_identifier) @name (generic_type type: (type_identifier) @name)"
        " (scoped_type_identifier name: (type_identifier) @name)]) @def.impl",
        "(call_expression function: (identifier) @callee) @call",
        "(call_expression function: (field_expression value: (_) @qual field: (field_identifier) @callee)) @call",
        "(call_expression function: (scoped_identifier path: (_) @qual name: (identifier) @callee)) @call",
        "(macro_invocation macro: (identifier) @callee) @call",
        "(impl_item trait: [(type_identifier) @base (scoped_type_identifier name: (type_identifier) @base)"
        " (generic_type type: (type_identifier) @base)])",
    ],
    "java": [
        "(class_declaration name: (identifier) @name) @def.class",
        "(interface_declaration name: (identifier) @name) @def.interface",
        "(enum_declaration name: (identifier) @name) @def.class",
        "(record_declaration name: (identifier) @name) @def.class",
        "(annotation_type_declaration name: (identifier) @name) @def.interface",
        "(method_declaration name: (identifier) @name) @def.method",
        "(constructor_declaration name: (identifier) @name) @def.method",
        "(method_invocation object: (_) @qual name: (identifier) @callee) @call",
        "(method_invocation !object name: (identifier) @callee) @call",
        "(object_creation_expression type: [(type_identifier) @callee (generic_type (type_identifier) @callee)]) @call",
        "(superclass [(type_identifier) @base (generic_type (type_identifier) @base)])",
        "(super_interfaces (type_list [(type_identifier) @base (generic_type (type_identifier) @base)]))",
        "(extends_interfaces (type_list [(type_identifier) @base (generic_type (type_identifier) @base)]))",
    ],
    "c": _DEFS_C + _CALLS_C,
    "cpp": _DEFS_C + _CALLS_C + [
        "(function_definition declarator: (function_declarator declarator: (field_identifier) @name)) @def.function",
        "(function_definition declarator: (reference_declarator (function_declarator declarator: (identifier) @name))) @def.function",
        "(function_definition declarator: (function_declarator declarator: (qualified_identifier scope: (_) @scope"
        " name: (identifier) @name))) @def.method",
        "(class_specifier name: (type_identifier) @name body: (_)) @def.class",
        "(namespace_definition name: (namespace_identifier) @name) @def.module",
        "(call_expression function: (qualified_identifier scope: (_) @qual name: (identifier) @callee)) @call",
        "(base_class_clause [(type_identifier) @base (qualified_identifier name: (type_identifier) @base)])",
    ],
    "sql": [
        "(create_function (object_reference name: (identifier) @name)) @def.function",
        "(create_table (object_reference name: (identifier) @name)) @def.table",
        "(create_view (object_reference name: (identifier) @name)) @def.view",
        "(create_materialized_view (object_reference name: (identifier) @name)) @def.view",
        "(create_type (object_reference name: (identifier) @name)) @def.type",
        "(invocation (object_reference schema: (identifier) @qual name: (identifier) @callee)) @call",
        "(invocation (object_reference !schema name: (identifier) @callee)) @call",
    ],
}
IMPORTS = {
    "python": "(import_statement) @import (import_from_statement) @import",
    "javascript": "(import_statement) @import", "typescript": "(import_statement) @import",
    "tsx": "(import_statement) @import",
    "go": "(import_spec) @import", "rust": "(use_declaration) @import (mod_item !body) @import",
    "java": "(import_declaration) @import", "c": "(preproc_include) @import", "cpp": "(preproc_include) @import",
}
CONTAINERS = {"class", "interface", "impl"}  # a function defined in one is a method


@dataclass
class Definition:
    kind: str
    name: str
    qualname: str
    signature: str
    line_start: int
    line_end: int
    key: str = ""
    parent: str | None = None
    start: int = 0   # byte offsets, for finding what encloses a reference
    end: int = 0

    def row(self) -> dict[str, Any]:
        return {"key": self.key, "parent": self.parent, "kind": self.kind, "name": self.name,
                "qualname": self.qualname, "signature": self.signature,
                "line_start": self.line_start, "line_end": self.line_end}


@dataclass
class Reference:
    kind: str                 # call, inherit, import
    name: str                 # the callee or base; for an import the module key (a/b/c)
    qualifier: str | None     # a.b of a.b.f(); for an import, the symbol imported
    alias: str | None         # an import's local name
    from_key: str | None
    lines: list[int] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "qualifier": self.qualifier, "alias": self.alias,
                "from": self.from_key, "lines": self.lines[:MAX_LINES_PER_REF], "n": len(self.lines)}


@dataclass
class Parsed:
    language: str | None
    module: str
    status: str = "parsed"    # parsed, partial (errors at error_lines), text (no grammar)
    error_lines: list[int] = field(default_factory=list)
    definitions: list[Definition] = field(default_factory=list)
    references: list[Reference] = field(default_factory=list)

    def payload(self) -> dict[str, Any]:
        """The arguments of scsql.index_code, but for path and content hash."""
        return {"language": self.language, "module": self.module, "status": self.status,
                "error_lines": self.error_lines[:MAX_ERROR_LINES],
                "definitions": [d.row() for d in self.definitions],
                "references": [r.row() for r in self.references]}


def language_of(path: str) -> str | None:
    """The language of the file at PATH (by its suffix), 'manifest' for the
    manifests read for commands, None for a file scsql holds as text."""
    p = PurePosixPath(path)
    if p.name in MANIFESTS:
        return "manifest"
    return LANGUAGES.get(p.suffix.lower())


def module_key(path: str, language: str | None) -> str:
    """How imports name the file: a/b/c for a/b/c.py (a/b for a/b/__init__.py),
    src/util for src/util.ts (and src/util/index.ts), a Go file's directory
    (its package), a Rust or Java file without its suffix; else the path."""
    p = PurePosixPath(path)
    stem = str(p.with_suffix("")) if p.suffix else str(p)
    parent = "" if str(p.parent) == "." else str(p.parent)
    if language == "python":
        return parent if p.stem == "__init__" and parent else stem
    if language in ("javascript", "typescript", "tsx"):
        return parent if p.stem == "index" and parent else stem
    if language == "go":
        return parent
    if language == "rust":
        return parent if p.stem in ("mod", "lib", "main") and parent else stem
    if language == "java":
        return stem
    return path


# -- grammars and queries -------------------------------------------------------

_lock = threading.Lock()


@cache
def _grammar(language: str):
    import tree_sitter

    module, fn = GRAMMARS[language]
    return tree_sitter.Language(getattr(importlib.import_module(module), fn)())


@cache
def _queries(language: str):
    """The language's compiled query of definitions, references and imports,
    and what each of its patterns finds, by pattern index: ("def", its
    @def capture), ("call", None), ("base", None) or ("import", None). One
    query walks the tree once."""
    import tree_sitter

    grammar = _grammar(language)
    kept, roles = [], []
    for pattern in PATTERNS[language]:
        try:
            query = tree_sitter.Query(grammar, pattern)
        except Exception:  # noqa: BLE001 - a node type this grammar's version lacks
            continue
        kept.append(pattern)
        roles += [_role(query)] * query.pattern_count
    query = tree_sitter.Query(grammar, "\n".join([*kept, IMPORTS.get(language, "")]))
    return query, (*roles, *[("import", None)] * (query.pattern_count - len(roles)))


def _role(query) -> tuple[str | None, str | None]:
    """What the matches of QUERY's pattern are, by its capture names."""
    names = [query.capture_name(i) for i in range(query.capture_count)]
    kind = next((n for n in names if n.startswith("def.")), None)
    if kind is not None:
        return "def", kind
    if "call" in names and "callee" in names:
        return "call", None
    return ("base", None) if "base" in names else (None, None)


def _parser(language: str):
    import tree_sitter

    return tree_sitter.Parser(_grammar(language))


# -- parsing ---------------------------------------------------------------------


def tree_of(path: str, text: str, before: tuple[str, Any] | None = None):
    """The grammar's parse of TEXT as the file at PATH, for parse() and
    outline() to share; None for a file of no known language or a manifest.
    BEFORE, the file's text before an edit and its tree (which this edits),
    makes the parse incremental: the grammar parses again only what the
    edit changed, and the tree is the same as a whole parse's."""
    language = language_of(path)
    if language in (None, "manifest"):
        return None
    with _lock:
        _queries(language)
    source = text.encode("utf-8")
    if before is None or before[1] is None:
        return _parser(language).parse(source)
    old_tree = before[1]
    _edit(old_tree, before[0].encode("utf-8"), source)
    return _parser(language).parse(source, old_tree)


def _edit(tree, old: bytes, new: bytes) -> None:
    """Tell TREE, the parse of OLD, that its text is now NEW: the bytes
    between their common prefix and common suffix were replaced."""
    most = min(len(old), len(new))
    lo, hi = 0, most  # the common prefix, by halves (each comparison is one memcmp)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if old[:mid] == new[:mid]:
            lo = mid
        else:
            hi = mid - 1
    start = lo
    lo, hi = 0, most - start  # the common suffix, not overlapping the prefix
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if old[len(old) - mid:] == new[len(new) - mid:]:
            lo = mid
        else:
            hi = mid - 1
    old_end, new_end = len(old) - lo, len(new) - lo

    def point(source: bytes, at: int) -> tuple[int, int]:
        return source.count(b"\n", 0, at), at - (source.rfind(b"\n", 0, at) + 1)

    tree.edit(start_byte=start, old_end_byte=old_end, new_end_byte=new_end, start_point=point(new, start),
              old_end_point=point(old, old_end), new_end_point=point(new, new_end))


def outline(path: str, text: str, tree) -> list | None:
    """The outline of the Python module at PATH (TEXT, parsed as TREE), as
    scsql.memory.indexer.python_outline reads it from the ast; None for
    another language or a parse with errors."""
    if tree is None or language_of(path) != "python" or tree.root_node.has_error:
        return None
    return _python_outline(tree.root_node, text.encode("utf-8"))


def parse(path: str, text: str, tree=None) -> Parsed:
    """The definitions and references of the file at PATH (relative to the
    project root) holding TEXT (TREE: its parse, when tree_of made it
    already); a file of no known language is text."""
    language = language_of(path)
    if language == "manifest":
        return _manifest(path, text)
    parsed = Parsed(language, module_key(path, language))
    if language is None:
        parsed.status = "text"
        return parsed
    source = text.encode("utf-8")
    with _lock:
        query, roles = _queries(language)
    from tree_sitter import QueryCursor

    tree = tree if tree is not None else _parser(language).parse(source)
    root = tree.root_node
    cut = _cutter(source, text)
    defs, refs, imports = _collect(QueryCursor(query).matches(root), roles, cut)
    defs = list({(d.start, d.end, d.name): d for d in defs}.values())
    if language == "sql":
        defs = _sql_definitions(text, defs)
        refs += _sql_calls(text, refs)
    _nest(defs)
    for node in imports:  # at no offset: each is the top level's
        refs += _imports(node, language, parsed.module)
    keys = _place(refs, defs)
    if root.has_error:
        parsed.status = "partial"
        parsed.error_lines = _error_lines(root)
    parsed.definitions = [d for d in defs if d.kind != "impl"]
    parsed.references = _merge(refs, keys)
    return parsed


def _python_outline(root, source: bytes) -> list:
    """A module's top-level functions and classes, a class with its methods,
    as scsql.memory.indexer.python_outline reads them from the ast: from the
    first decorator's line to the last statement's (a comment after it is not
    the definition's)."""
    out = []
    for node in root.named_children:
        top = _outlined(node, source)
        if top is not None:
            first, end, name, definition = top
            methods = []
            if definition.type == "class_definition":
                for child in definition.child_by_field_name("body").named_children:
                    m = _outlined(child, source)
                    if m is not None and m[3].type == "function_definition":
                        methods.append(m[:3])
            out.append((first, end, name, methods))
    return out


def _outlined(node, source: bytes):
    """(first line, last line, name, definition node) of a function or class
    definition, decorated or not; None for any other node."""
    first = node.start_point[0] + 1
    if node.type == "decorated_definition":
        node = node.child_by_field_name("definition")
    if node is None or node.type not in ("function_definition", "class_definition"):
        return None
    last = node
    while last.child_count:
        kids = [k for k in last.children if k.type != "comment" and k.end_byte > k.start_byte]
        if not kids:
            break
        last = kids[-1]
    return first, last.end_point[0] + 1, _text(node.child_by_field_name("name"), source), node


def _error_lines(root) -> list[int]:
    """The first lines where the grammar met an error or a missing token
    (only the subtrees that hold one are walked)."""
    lines: set[int] = set()
    todo = [root]
    while todo and len(lines) < MAX_ERROR_LINES:
        node = todo.pop()
        if node.is_error or node.is_missing:
            lines.add(node.start_point[0] + 1)
            continue
        todo.extend(c for c in reversed(node.children) if c.has_error or c.is_missing)
    return sorted(lines) or [root.start_point[0] + 1]


def _text(node, source: bytes) -> str:
    return source[node.start_byte:node.end_byte].decode("utf-8", "replace")


def _cutter(source: bytes, text: str):
    """(start, end) byte offsets -> the text between them. In an ASCII file a
    byte offset is a character offset: the text is cut from TEXT, SOURCE is
    not decoded."""
    if text.isascii():
        return lambda start, end: text[start:end]
    return lambda start, end: source[start:end].decode("utf-8", "replace")


# A reference before it is placed and merged: (kind, name, qualifier, alias,
# line, byte offset where it occurs, None for an import: the top level's).
_Ref = tuple


def _collect(matches, roles: tuple, cut) -> tuple[list[Definition], list[_Ref], list]:
    """The definitions, calls and bases of the query's MATCHES, and its import
    nodes (in the file's order); CUT gives the text between two byte offsets."""
    defs: list[Definition] = []
    refs: list[_Ref] = []
    imports = []
    for i, caps in matches:
        role, kind = roles[i]
        if role == "call":
            node, callee, qual = caps["call"][0], caps["callee"][0], caps.get("qual")
            refs.append(("call", cut(callee.start_byte, callee.end_byte),
                         _qualifier(cut(qual[0].start_byte, qual[0].end_byte)) if qual else None, None,
                         node.start_point[0] + 1, node.start_byte))
        elif role == "def":
            name = caps.get("name")
            if name is None:
                continue
            name = name[0]
            d = _definition(kind[4:], caps[kind][0], cut(name.start_byte, name.end_byte), cut)
            if d is None:
                continue
            scope = caps.get("scope")
            if scope:
                d.qualname = cut(scope[0].start_byte, scope[0].end_byte).replace("::", ".") + "." + d.name
                d.kind = "method"
            defs.append(d)
        elif role == "base":
            node, qual = caps["base"][0], caps.get("qual")
            refs.append(("inherit", cut(node.start_byte, node.end_byte),
                         _qualifier(cut(qual[0].start_byte, qual[0].end_byte)) if qual else None, None,
                         node.start_point[0] + 1, node.start_byte))
        elif role == "import":
            imports.append(caps["import"][0])
    return defs, refs, imports


_NAME = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*")
_CONSTANT = re.compile(r"[A-Z][A-Z0-9_]*")
_COMMENT_STARTS = ("#", "//", "/*", "*", "--")


def _qualifier(text: str) -> str | None:
    """What a call is made on, as a dotted name (a.b of a.b.f(), self of
    self.f()); ``()`` for an expression that is no name (f().g(), x[0].g()):
    a call on some object, so a method, never the function g beside it."""
    if text.isidentifier() and text.isascii():  # the common case: one plain name
        return text
    text = text.replace("::", ".").replace("->", ".")
    return text if _NAME.fullmatch(text) else "()"


def _definition(kind: str, node, name: str, cut) -> Definition | None:
    if kind == "constant" and not _CONSTANT.fullmatch(name):
        return None
    if len(name) > 200 or not name.strip():
        return None
    start, end = node.start_byte, node.end_byte
    return Definition(kind, name, name, _signature(node, start, end, cut), node.start_point[0] + 1,
                      node.end_point[0] + 1, start=start, end=end)


def _signature(node, start: int, end: int, cut) -> str:
    """The definition's text up to its body, on one line, at most MAX_SIGNATURE characters."""
    body = node.child_by_field_name("body")
    if body is not None and body.start_byte > start:
        end = body.start_byte
    head = cut(start, min(end, start + 2000))
    if body is None:
        cut_at = [i for i in (head.find("{"), head.find("\n")) if i > 0]
        head = head[:min(cut_at)] if cut_at else head
    line = head.rstrip()
    if "\n" in line:
        head = "\n".join(ln for ln in head.split("\n") if not ln.strip().startswith(_COMMENT_STARTS))
    else:  # one line (and blanks, as before a Python body): dropped if it is a comment
        head = "" if line.lstrip().startswith(_COMMENT_STARTS) else line
    head = " ".join(head.split()).rstrip(" :{=")
    return head if len(head) <= MAX_SIGNATURE else head[:MAX_SIGNATURE - 3] + "..."


def _nest(defs: list[Definition]) -> None:
    """Each definition's parent (the innermost one around it), qualified
    name and key; a function in a class, interface or impl is a method."""
    defs.sort(key=lambda d: (d.start, -d.end))
    stack: list[Definition] = []
    seen: dict[str, int] = {}
    for d in defs:
        while stack and stack[-1].end < d.end:
            stack.pop()
        if stack and not (stack[-1].start == d.start and stack[-1].end == d.end):
            parent = stack[-1]
            d.parent = parent.key
            if d.qualname == d.name or d.kind == "method" and "." in d.qualname:
                d.qualname = f"{parent.qualname}.{d.qualname}"
            if d.kind == "function" and parent.kind in CONTAINERS:
                d.kind = "method"
        n = seen[d.qualname] = seen.get(d.qualname, 0) + 1
        d.key = d.qualname if n == 1 else f"{d.qualname}#{n}"
        stack.append(d)
    by_qual = {d.qualname: d.key for d in defs if d.kind != "impl"}
    keys = set(by_qual.values())
    for d in defs:  # a method of an impl block, a Go receiver or C++'s Type::name: its type is its parent
        if d.kind == "method" and "." in d.qualname:
            owner = d.qualname.rsplit(".", 1)[0]
            d.parent = by_qual[owner] if owner in by_qual else d.parent if d.parent in keys else None


def _place(refs: list[_Ref], defs: list[Definition]) -> list[str | None]:
    """Each reference's enclosing definition, by its key (None: the file's top level)."""
    starts = [d.start for d in defs]
    by_key = {d.key: d for d in defs}
    keys: list[str | None] = []
    for r in refs:
        at = r[5]
        if at is None:
            keys.append(None)
            continue
        i = bisect_right(starts, at) - 1
        d = defs[i] if i >= 0 else None
        while d is not None and not (d.start <= at < d.end):
            d = by_key.get(d.parent) if d.parent else None
        if d is None:
            keys.append(None)
        elif d.kind == "impl":
            keys.append(next((x.key for x in defs if x.qualname == d.name and x.kind != "impl"), None)
                        if r[0] == "inherit" else d.parent)
        else:
            keys.append(d.key)
    return keys


def _merge(refs: list[_Ref], keys: list[str | None]) -> list[Reference]:
    """One reference per (kind, name, qualifier, alias, enclosing definition),
    with all its lines; KEYS: each reference's enclosing definition (_place)."""
    out: dict[tuple, list[int]] = {}
    for (kind, name, qualifier, alias, line, _), key in zip(refs, keys):
        k = (kind, name, qualifier, alias, key)
        lines = out.get(k)
        if lines is None:
            out[k] = [line]
        else:
            lines.append(line)
    return [Reference(*k, lines if len(lines) == 1 else sorted(set(lines)))
            for k, lines in out.items() if 0 < len(k[1]) <= 200]


# -- imports ------------------------------------------------------------------------


def _imports(node, language: str, module: str) -> list[_Ref]:
    text = node.text.decode("utf-8", "replace")
    line = node.start_point[0] + 1
    found = _IMPORT_READERS[language](node, text, module)
    return [("import", m[:300], sym, alias, line, None) for m, sym, alias in found if m]


def _py_imports(node, text: str, module: str) -> list[tuple[str, str | None, str | None]]:
    out = []
    if node.type == "import_statement":
        for part in re.split(r",", re.sub(r"^\s*import\s+", "", " ".join(text.split()))):
            m = re.fullmatch(r"\s*([\w.]+)(?:\s+as\s+(\w+))?\s*", part.strip("() \\"))
            if m:
                out.append((m.group(1).replace(".", "/"), None, m.group(2) or m.group(1)))
        return out
    m = re.match(r"\s*from\s+(\.*)([\w.]*)\s+import\s+(.*)", " ".join(text.split()), re.S)
    if not m:
        return out
    dots, name, names = m.groups()
    if dots:
        base = module.split("/")
        base = base[: len(base) - len(dots) + (1 if PurePosixPath(module).name == "__init__" else 0)] \
            if len(dots) <= len(base) else []
        target = "/".join([*base, *(name.split(".") if name else [])])
    else:
        target = name.replace(".", "/")
    for part in names.strip("() ").split(","):
        pm = re.fullmatch(r"\s*(\w+|\*)(?:\s+as\s+(\w+))?\s*", part)
        if pm and pm.group(1) != "*":
            out.append((target, pm.group(1), pm.group(2) or pm.group(1)))
        elif pm:
            out.append((target, None, None))
    return out


def _js_imports(node, text: str, module: str) -> list[tuple[str, str | None, str | None]]:
    src = re.search(r"""from\s+['"]([^'"]+)['"]|^\s*import\s+['"]([^'"]+)['"]""", text)
    if not src:
        return []
    spec = src.group(1) or src.group(2)
    if spec.startswith("."):
        base = PurePosixPath(module).parent if not module.endswith("/") else PurePosixPath(module)
        parts: list[str] = [] if str(base) == "." else list(base.parts)
        for piece in spec.split("/"):
            if piece == "..":
                parts = parts[:-1]
            elif piece not in (".", ""):
                parts.append(piece)
        spec = re.sub(r"\.(m|c)?[jt]sx?$", "", "/".join(parts))
    head = text[: src.start()]
    out = []
    named = re.search(r"\{([^}]*)\}", head)
    if named:
        for part in named.group(1).split(","):
            pm = re.fullmatch(r"\s*(?:type\s+)?([\w$]+)(?:\s+as\s+([\w$]+))?\s*", part)
            if pm:
                out.append((spec, pm.group(1), pm.group(2) or pm.group(1)))
    star = re.search(r"\*\s+as\s+([\w$]+)", head)
    if star:
        out.append((spec, None, star.group(1)))
    default = re.match(r"\s*import\s+(?:type\s+)?([\w$]+)\s*(?:,|from)", head + "from")
    if default and default.group(1) not in ("type",):
        out.append((spec, "default", default.group(1)))
    return out or [(spec, None, None)]


def _go_imports(node, text: str, module: str) -> list[tuple[str, str | None, str | None]]:
    m = re.match(r"\s*([\w.]+)?\s*\"([^\"]+)\"", text)
    if not m:
        return []
    alias = m.group(1) if m.group(1) not in (None, "_", ".") else m.group(2).rsplit("/", 1)[-1]
    return [(m.group(2), None, alias)]


def _rust_imports(node, text: str, module: str) -> list[tuple[str, str | None, str | None]]:
    if node.type == "mod_item":
        m = re.search(r"mod\s+(\w+)", text)
        return [(f"{module}/{m.group(1)}", None, m.group(1))] if m else []
    body = re.sub(r"^\s*(pub(\([^)]*\))?\s+)?use\s+|;\s*$", "", " ".join(text.split()))
    out = []
    for path in _expand_use(body):
        parts = [p for p in path.split("::") if p not in ("crate", "self", "super", "")]
        alias = None
        if parts and " as " in parts[-1]:
            parts[-1], alias = (x.strip() for x in parts[-1].split(" as ", 1))
        if not parts or parts[-1] == "*":
            if parts[:-1]:
                out.append(("/".join(parts[:-1]), None, None))
            continue
        out.append(("/".join(parts[:-1]) or parts[-1], parts[-1] if parts[:-1] else None, alias or parts[-1]))
    return out


def _expand_use(body: str) -> list[str]:
    m = re.match(r"(.*?)::\{(.*)\}$", body)
    if not m:
        return [body]
    prefix, inner = m.groups()
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        cur += ch
    parts.append(cur)
    return [x for p in parts if p.strip() for x in _expand_use(f"{prefix}::{p.strip()}")]


def _java_imports(node, text: str, module: str) -> list[tuple[str, str | None, str | None]]:
    m = re.match(r"\s*import\s+(static\s+)?([\w.]+)(\.\*)?\s*;", text)
    if not m:
        return []
    static, name, star = m.groups()
    parts = name.split(".")
    if star:
        return [("/".join(parts), None, None)]
    if static:
        return [("/".join(parts[:-1]), parts[-1], parts[-1])]
    return [("/".join(parts), None, parts[-1])]


def _c_imports(node, text: str, module: str) -> list[tuple[str, str | None, str | None]]:
    m = re.search(r"#\s*include\s*[<\"]([^>\"]+)[>\"]", text)
    return [(m.group(1), None, None)] if m else []


_IMPORT_READERS = {"python": _py_imports, "javascript": _js_imports, "typescript": _js_imports, "tsx": _js_imports,
                   "go": _go_imports, "rust": _rust_imports, "java": _java_imports, "c": _c_imports,
                   "cpp": _c_imports}


# -- SQL: what the grammar cannot read -------------------------------------------------

_SQL_CREATE = re.compile(
    r"^[ \t]*create\s+(?:or\s+replace\s+)?(?:temp(?:orary)?\s+|unlogged\s+)?(materialized\s+view|function|procedure|"
    r"table|view|type|trigger|sequence)\s+(?:if\s+not\s+exists\s+)?((?:\"?[\w$]+\"?\.)?\"?([\w$]+)\"?)",
    re.IGNORECASE | re.MULTILINE)
_SQL_CALL = re.compile(r"\b([A-Za-z_][\w$]*)\.([A-Za-z_][\w$]*)\s*\(")
# A name followed by "(" that is no call: what a statement creates, or reads or writes.
_SQL_NOT_CALL = re.compile(r"\b(?:function|procedure|table|view|type|on|into|references|from|join|update|index|trigger|"
                           r"sequence|exists|only)\s+$", re.IGNORECASE)
_SQL_KINDS = {"procedure": "function", "materialized view": "view", "trigger": "trigger", "sequence": "sequence"}


def _sql_definitions(text: str, found: list[Definition]) -> list[Definition]:
    """SQL's create statements, read by pattern: PL/pgSQL bodies defeat the
    grammar, so a statement it lost is still found (one it found stays)."""
    have = {(d.name, d.line_start) for d in found}
    line_at, byte_at = _line_index(text), _byte_index(text)
    starts = [(m.start(), m) for m in _SQL_CREATE.finditer(text)]
    out = list(found)
    for i, (pos, m) in enumerate(starts):
        line = line_at(pos)
        name = m.group(3)
        if (name, line) in have:
            continue
        end_pos = starts[i + 1][0] - 1 if i + 1 < len(starts) else len(text)
        body = text[pos:end_pos].rstrip()
        kind = _SQL_KINDS.get(" ".join(m.group(1).lower().split()), m.group(1).lower())
        head = re.split(r"\)\s*(?:returns|as|language|$)|\bas\s*\$|\(\s*$", body, maxsplit=1, flags=re.I)[0]
        sig = " ".join(head.split())
        sig = sig + ")" if sig.count("(") > sig.count(")") else sig
        end = line_at(pos + len(body))
        out.append(Definition(kind, name, name, sig[:MAX_SIGNATURE], line, end, start=byte_at(pos),
                              end=byte_at(pos + len(body))))
    return out


def _sql_calls(text: str, found: list[_Ref]) -> list[_Ref]:
    have = {(r[1], r[4]) for r in found}
    line_at, byte_at = _line_index(text), _byte_index(text)
    out = []
    for m in _SQL_CALL.finditer(text):
        line = line_at(m.start())
        if (m.group(2), line) in have or _SQL_NOT_CALL.search(text, max(0, m.start() - 40), m.start()):
            continue
        out.append(("call", m.group(2), m.group(1), None, line, byte_at(m.start())))
    return out


def _line_index(text: str):
    """Character offset -> 1-based line."""
    breaks = [m.start() for m in re.finditer("\n", text)]
    return lambda pos: bisect_right(breaks, pos - 1) + 1


def _byte_index(text: str):
    """Character offset -> offset in the UTF-8 bytes (tree-sitter's offsets)."""
    if text.isascii():
        return lambda pos: pos
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    byte_starts, acc = [], 0
    for i, s in enumerate(starts):
        byte_starts.append(acc)
        end = starts[i + 1] if i + 1 < len(starts) else len(text)
        acc += len(text[s:end].encode("utf-8"))

    def at(pos: int) -> int:
        i = bisect_right(starts, pos) - 1
        return byte_starts[i] + len(text[starts[i]:pos].encode("utf-8"))
    return at


# -- manifests: the commands a project names ----------------------------------------------


def _manifest(path: str, text: str) -> Parsed:
    """pyproject.toml's scripts, package.json's scripts and bin, a Makefile's
    targets, as definitions of kind script or target (project_card reads them)."""
    parsed = Parsed("manifest", path)
    name = PurePosixPath(path).name
    defs: list[tuple[str, str, str]] = []
    try:
        if name == "pyproject.toml":
            project = tomllib.loads(text).get("project") or {}
            for kind in ("scripts", "gui-scripts"):
                defs += [("script", k, f"{k} = {v}") for k, v in (project.get(kind) or {}).items()]
        elif name == "package.json":
            data = json.loads(text)
            bins = data.get("bin") or {}
            bins = {data.get("name", "bin"): bins} if isinstance(bins, str) else bins
            defs += [("script", k, f"{k}: {v}") for k, v in (data.get("scripts") or {}).items()]
            defs += [("script", k, f"bin {k}: {v}") for k, v in bins.items()]
        else:
            defs += [("target", m.group(1), m.group(0).rstrip(":"))
                     for m in re.finditer(r"^([A-Za-z][\w.-]*)\s*:(?!=)", text, re.M)]
    except (ValueError, AttributeError, TypeError):
        parsed.status = "partial"
        parsed.error_lines = [1]
        return parsed
    lines = text.split("\n")
    for kind, key, sig in defs:
        if not isinstance(key, str) or not key.strip():
            continue
        line = next((i for i, ln in enumerate(lines, 1) if key in ln), 1)
        parsed.definitions.append(Definition(kind, key[:200], key[:200], str(sig)[:MAX_SIGNATURE], line, line, key=key[:200]))
    return parsed


def _serve() -> None:
    """``python -m scsql.code.parse``: read [rel, path] lines, write [rel,
    sha256, payload] lines (sha256 null: unreadable), for Ahead in index.py."""
    import hashlib
    import sys

    for line in sys.stdin:
        rel, full = json.loads(line)
        try:
            with open(full, "rb") as fh:
                data = fh.read()
            out = [rel, hashlib.sha256(data).hexdigest(), parse(rel, data.decode("utf-8")).payload()]
        except (OSError, UnicodeDecodeError, ValueError):
            out = [rel, None, None]
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    _serve()
