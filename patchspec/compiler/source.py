"""One source file of a release, and the pieces of it the compiler parses with libcst.

A whole-file libcst parse of a 7,000-line runner costs seconds; Python's own ``ast`` finds a definition
in a tenth of that. So the compiler locates each target with ``ast`` and hands libcst only the lines of
that definition (a *fragment*), then splices the regenerated lines back. Everything outside the
targeted definitions is never parsed by libcst and is kept byte for byte.
"""
from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass

import libcst as cst

DefNode = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
Binding = ast.Assign | ast.AnnAssign   # a module- or class-level name a target may name (``set``)
# The line model of Python's tokenizer (and so of ast and libcst): only CR, LF and CRLF end a line. A form
# feed or U+2028 is not a line break, though ``str.splitlines`` takes it for one.
_COOKIE = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*[-\w.]+")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def split_lines(text: str) -> list[str]:
    """``text`` as lines with their endings, split where Python's tokenizer splits."""
    return _LINE.findall(text)


class SourceError(ValueError):
    """A source file that cannot be read as Python, or a definition that is not where it should be."""


class TargetAmbiguous(SourceError):
    """A name defined in several branches (``if``/``else``, ``try``/``except``) with no ``branch`` chosen."""

    def __init__(self, message: str, lines: list[int]) -> None:
        super().__init__(message)
        self.lines = lines


@dataclass(frozen=True)
class Located:
    """The live definition of a qualified name, and how it was chosen (for the plan line)."""

    node: DefNode
    note: str = ""


@dataclass
class SourceFile:
    path: str
    text: str

    @functools.cached_property
    def lines(self) -> list[str]:
        return split_lines(self.text)

    @functools.cached_property
    def newline(self) -> str:
        first = self.lines[0] if self.lines else "\n"
        return "\r\n" if first.endswith("\r\n") else "\n"

    @functools.cached_property
    def tree(self) -> ast.Module:
        try:
            return ast.parse(self.text, filename=self.path)
        except SyntaxError as exc:
            raise SourceError(f"{self.path}:{exc.lineno}: not valid Python: {exc.msg}") from None

    def find(self, qualname: str, branch: str | None = None) -> DefNode | None:
        """The live definition named ``Outer.inner`` at module or class level (see ``locate``)."""
        located = self.locate(qualname, branch)
        return located.node if located else None

    def locate(self, qualname: str, branch: str | None = None) -> Located | None:
        """The definition of ``Outer.inner`` that is live at run time: ``@overload`` stubs are skipped, a
        later definition at the same level (or an enclosing one) replaces an earlier one, and definitions
        inside ``if``/``try`` blocks are found. When several branches define the name, ``branch`` picks
        one (``if <test>``, ``else``, ``try``, ``except <type>``, ``finally``: its innermost block);
        without it that is a ``TargetAmbiguous``."""
        scope: list[ast.stmt] = self.tree.body
        notes: list[str] = []
        found: DefNode | None = None
        parts = qualname.split(".")
        for index, part in enumerate(parts):
            candidates = list(_candidates(scope, part, ()))
            if not candidates and index == len(parts) - 1:   # no definition: a name the level assigns
                candidates = list(_candidates(scope, part, (), bindings=True))
            defined = [c for c in candidates if c[0] is not None]
            stubs = len(candidates) - len(defined)
            live = [(n, path) for n, path in defined
                    if not any(o.lineno > n.lineno and _encloses(opath, path) for o, opath in defined)]
            replaced = len(defined) - len(live)
            if branch is not None and len(live) > 1:
                live = [(n, path) for n, path in live
                        if (path[-1][1] if path else ("top level", "")) == branch_key(branch)]
            if not live:
                if candidates and branch is not None:
                    raise TargetAmbiguous(f"{part} has no definition in a branch {branch!r}",
                                          [n.lineno for n, _ in candidates if n is not None])
                return None
            if len(live) > 1:
                listed = ", ".join(f"{_label(path)} (line {n.lineno})" for n, path in live)
                raise TargetAmbiguous(f"{part} is defined in several branches: {listed}; choose one with "
                                      f"`branch:`", [n.lineno for n, _ in live])
            found = live[0][0]
            if stubs:
                notes.append(f"{stubs} @overload stub{'s' if stubs > 1 else ''} of {part} skipped")
            if replaced:
                notes.append(f"{part} is defined {replaced + 1} times; the last at its level (line "
                             f"{found.lineno}) is live")
            if live[0][1]:
                notes.append(f"{part} in branch {_label(live[0][1])}")
            scope = getattr(found, "body", [])
        return Located(found, "; ".join(notes)) if found else None

    def definitions(self) -> list[tuple[str, DefNode]]:
        """Every function and class reachable by a qualified name (inside ``if``/``try`` blocks too),
        with that name; ``@overload`` stubs left out."""
        out: list[tuple[str, DefNode]] = []

        def walk(body: list[ast.stmt], prefix: str) -> None:
            for node in _defs(body):
                if not _is_overload(node):
                    out.append((prefix + node.name, node))
                    walk(node.body, prefix + node.name + ".")

        walk(self.tree.body, "")
        return out

    def fragment(self, node: DefNode) -> "Fragment":
        return Fragment.parse(self, node)

    def import_line(self) -> int:
        """The line after which module-level imports go: after the leading imports (or the docstring), and
        never above a shebang or coding cookie (which must stay on the first two lines)."""
        after = 0
        for index, line in enumerate(self.lines[:2]):
            if line.startswith("#!") or _COOKIE.match(line):
                after = index + 1
        for index, stmt in enumerate(self.tree.body):
            is_doc = (index == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
                      and isinstance(stmt.value.value, str))
            if is_doc or isinstance(stmt, ast.Import | ast.ImportFrom):
                after = stmt.end_lineno
            else:
                break
        return after

    def body_indent(self, node: ast.ClassDef) -> str:
        first = self.lines[node.body[0].lineno - 1]
        return first[: len(first) - len(first.lstrip())]


# The blocks a definition is nested in: (id of the if/try statement, key of the block, its label).
Path = tuple[tuple[int, tuple[str, str], str], ...]


def _blocks(stmt: ast.stmt) -> list[tuple[tuple[str, str], str, list[ast.stmt]]]:
    """The blocks of a module- or class-level ``if``/``try``: key (see ``branch_key``), label, body."""
    if isinstance(stmt, ast.If):
        return [(("if", ast.dump(stmt.test)), f"if {ast.unparse(stmt.test)}", stmt.body),
                (("else", ""), "else", stmt.orelse)]
    if isinstance(stmt, ast.Try | ast.TryStar):
        handlers = [(("except", ast.dump(h.type) if h.type else ""),
                     f"except {ast.unparse(h.type)}" if h.type else "except", h.body) for h in stmt.handlers]
        return [(("try", ""), "try", stmt.body), *handlers, (("else", ""), "else", stmt.orelse),
                (("finally", ""), "finally", stmt.finalbody)]
    return []


def branch_key(text: str) -> tuple[str, str]:
    """``if TYPE_CHECKING`` → ("if", dump of the test): compared as trees, so layout does not matter."""
    if text.strip() == "top level":
        return "top level", ""
    word, _, rest = text.strip().rstrip(":").partition(" ")
    word = "if" if word == "elif" else word
    try:
        return word, ast.dump(ast.parse(rest.strip(), mode="eval").body) if rest.strip() else ""
    except SyntaxError:
        return word, rest.strip()


def _label(path: Path) -> str:
    return path[-1][2] if path else "top level"


def _encloses(outer: Path, inner: Path) -> bool:
    """Whether a definition on ``outer`` runs whenever one on ``inner`` does (``outer`` is a prefix)."""
    return inner[:len(outer)] == outer


def _candidates(body: list[ast.stmt], name: str, path: Path, bindings: bool = False):
    """(definition or None for an ``@overload`` stub, its branch path) of every definition of ``name``;
    with ``bindings``, of every assignment of that one name instead."""
    for stmt in body:
        if bindings and _assigns(stmt, name):
            yield stmt, path
        elif not bindings and isinstance(stmt, DefNode) and stmt.name == name:
            yield (None if _is_overload(stmt) else stmt), path
        for key, label, block in _blocks(stmt):
            yield from _candidates(block, name, path + ((id(stmt), key, label),), bindings)


def _assigns(stmt: ast.stmt, name: str) -> bool:
    """``name = ...`` or ``name: T = ...`` (one target, a plain name)."""
    if isinstance(stmt, ast.Assign):
        return len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == name
    return isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name


def _defs(body: list[ast.stmt]):
    for stmt in body:
        if isinstance(stmt, DefNode):
            yield stmt
        for _key, _label_text, block in _blocks(stmt):
            yield from _defs(block)


def _is_overload(node: DefNode) -> bool:
    """``@overload`` / ``@typing.overload``: a stub for type checkers that the next definition replaces."""
    return any((isinstance(d, ast.Name) and d.id == "overload")
               or (isinstance(d, ast.Attribute) and d.attr == "overload") for d in node.decorator_list)


def block_of(suite: cst.SimpleStatementSuite) -> cst.IndentedBlock:
    """``class K: pass`` → the same statements as an indented block, so that edits land inside the body
    (an insertion after a one-line body would otherwise land at the level of its header)."""
    lines = [cst.SimpleStatementLine(body=[s.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)])
             for s in suite.body]
    lines[-1] = lines[-1].with_changes(trailing_whitespace=suite.trailing_whitespace)
    return cst.IndentedBlock(body=lines)


def span(node: DefNode) -> tuple[int, int]:
    """First and last line (1-based, inclusive) of a definition, decorators included."""
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])
    return start, node.end_lineno


@dataclass
class Fragment:
    """The lines of one definition, parsed by libcst on their own (under an ``if True:`` if indented)."""

    source: SourceFile
    start: int
    end: int
    module: cst.Module
    header: str
    one_line: bool = False   # the body shared the header's line and was given a block of its own

    @classmethod
    def parse(cls, source: SourceFile, node: DefNode) -> "Fragment":
        start, end = span(node)
        text = "".join(source.lines[start - 1:end])
        indented = text[:1] in (" ", "\t")
        header = "if True:" + source.newline if indented else ""
        if text and not text.endswith(("\n", "\r")):
            text += source.newline
        try:
            module = cst.parse_module(header + text)
        except cst.ParserSyntaxError as exc:
            raise SourceError(f"{source.path}:{start}: libcst cannot parse this definition: "
                              f"{str(exc).splitlines()[0]}") from None
        node = module.body[0].body.body[0] if header else module.body[0]
        if not isinstance(node.body, cst.SimpleStatementSuite):
            return cls(source, start, end, module, header)
        expanded = node.with_changes(body=block_of(node.body))
        module = module.deep_replace(node, expanded) if header else module.with_changes(body=[expanded])
        return cls(source, start, end, module, header, one_line=True)

    @property
    def node(self) -> cst.FunctionDef | cst.ClassDef:
        first = self.module.body[0]
        return first.body.body[0] if self.header else first

    def render(self, module: cst.Module) -> str:
        """The lines that replace this fragment's lines in the file."""
        code = module.code[len(self.header):]
        original_end = self.source.lines[self.end - 1]
        if not original_end.endswith(("\n", "\r")):
            code = code[: -len(self.source.newline)]
        return code
