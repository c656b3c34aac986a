"""One source file of a release, and the pieces of it the compiler parses with libcst.

A whole-file libcst parse of a 7,000-line runner costs seconds; Python's own ``ast`` finds a definition
in a tenth of that. So the compiler locates each target with ``ast`` and hands libcst only the lines of
that definition (a *fragment*), then splices the regenerated lines back. Everything outside the
targeted definitions is never parsed by libcst and is kept byte for byte.
"""
from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

import libcst as cst

DefNode = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


class SourceError(ValueError):
    """A source file that cannot be read as Python, or a definition that is not where it should be."""


@dataclass
class SourceFile:
    path: str
    text: str

    @functools.cached_property
    def lines(self) -> list[str]:
        return self.text.splitlines(keepends=True)

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

    def find(self, qualname: str) -> DefNode | None:
        """The class or function definition named ``Outer.inner`` at module or class level."""
        scope: list[ast.stmt] = self.tree.body
        found: DefNode | None = None
        for part in qualname.split("."):
            found = next((n for n in scope if isinstance(n, DefNode) and n.name == part), None)
            if found is None:
                return None
            scope = found.body
        return found

    def definitions(self) -> list[tuple[str, DefNode]]:
        """Every function and class reachable by a qualified name, with that name."""
        out: list[tuple[str, DefNode]] = []

        def walk(body: list[ast.stmt], prefix: str) -> None:
            for node in body:
                if isinstance(node, DefNode):
                    out.append((prefix + node.name, node))
                    walk(node.body, prefix + node.name + ".")

        walk(self.tree.body, "")
        return out

    def fragment(self, node: DefNode) -> "Fragment":
        return Fragment.parse(self, node)

    def import_line(self) -> int:
        """The line after which module-level imports go: after the leading imports (or the docstring)."""
        after = 0
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


def span(node: DefNode) -> tuple[int, int]:
    """First and last line (1-based, inclusive) of a definition, decorators included."""
    start = min([node.lineno] + [d.lineno for d in node.decorator_list])
    return start, node.end_lineno


@dataclass
class Fragment:
    """The lines of one definition, parsed by libcst on their own (under an ``if True:`` if indented)."""

    source: SourceFile
    start: int
    end: int
    module: cst.Module
    header: str

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
        return cls(source, start, end, module, header)

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
