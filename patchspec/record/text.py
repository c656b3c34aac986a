"""One version of a source file as record reads it: its ``ast``, and the source of any statement or
expression in it as code a spec can carry (libcst renders a statement at indentation zero, string
contents untouched, without the comments and blank lines above it)."""
from __future__ import annotations

import ast
import functools
import textwrap

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from patchspec.compiler.source import SourceFile, span
from patchspec.errors import PatchspecError

DEF_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class Text(SourceFile):
    """A source file as record reads it: the compiler's ``SourceFile``, and the code of its statements."""

    def not_python(self, exc: SyntaxError) -> PatchspecError:
        return PatchspecError(f"not valid Python: {exc.msg}; record reads what Python would run, nothing was "
                              "written", file=self.path, line=exc.lineno, col=exc.offset)

    @functools.cached_property
    def _statements(self) -> dict[tuple[int, int], list[cst.CSTNode]]:
        """libcst statements by where they start (line, column in characters)."""
        try:
            module = cst.parse_module(self.text)
        except cst.ParserSyntaxError as exc:
            raise PatchspecError(f"libcst cannot parse it: {str(exc).splitlines()[0]}; nothing was written",
                                 file=self.path, line=exc.raw_line) from None
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        positions = wrapper.resolve(PositionProvider)
        out: dict[tuple[int, int], list[cst.CSTNode]] = {}
        for node, where in positions.items():
            if isinstance(node, cst.BaseStatement | cst.BaseSmallStatement):
                out.setdefault((where.start.line, where.start.column), []).append(node)
        return out

    def _column(self, line: int, byte_col: int) -> int:
        return len(self.lines[line - 1].encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))

    def code(self, node: ast.AST) -> str:
        """The source of an ``ast`` statement or expression, as one would write it in a spec."""
        if isinstance(node, ast.stmt):
            return self._statement_code(node)
        segment = ast.get_source_segment(self.text, node) or ast.unparse(node)
        return f"({segment})" if "\n" in segment else segment

    def _statement_code(self, node: ast.stmt) -> str:
        decorators: list[ast.expr] = getattr(node, "decorator_list", [])
        line = min([node.lineno] + [d.lineno for d in decorators])
        col = self._column(line, node.col_offset if line == node.lineno else decorators[0].col_offset - 1)
        found = self._statements.get((line, col), [])
        line_node = next((n for n in found if isinstance(n, cst.SimpleStatementLine)), None)
        chosen: cst.CSTNode
        if line_node is not None and len(line_node.body) == 1:
            chosen = line_node.with_changes(leading_lines=(), trailing_whitespace=cst.TrailingWhitespace())
        elif line_node is not None or not found:
            return ast.get_source_segment(self.text, node) or ast.unparse(node)
        else:
            chosen = found[0]
            if isinstance(chosen, cst.BaseCompoundStatement):
                chosen = chosen.with_changes(leading_lines=())
                if isinstance(chosen.body, cst.SimpleStatementSuite):  # ``if c: x  # comment``
                    chosen = chosen.with_changes(body=chosen.body.with_changes(
                        trailing_whitespace=cst.TrailingWhitespace()))
        return cst.Module(body=[]).code_for_node(chosen).strip("\r\n")

    def anchor(self, node: ast.stmt) -> str:
        """The smallest pattern for a statement next to which code goes: a compound statement with one
        block is written by its header (``if c: ...``), anything else in full."""
        blocks = [getattr(node, name, None) for name in ("orelse", "finalbody", "handlers")]
        if isinstance(node, ast.If | ast.For | ast.While | ast.With | ast.AsyncFor | ast.AsyncWith) \
                and not any(blocks):
            first_body = node.body[0]
            header = "".join(self.lines[node.lineno - 1:first_body.lineno - 1]) if first_body.lineno > node.lineno \
                else None
            if header is not None:
                return textwrap.dedent(header).strip() + " ..."
        return self.code(node)

    def lines_of(self, node: ast.stmt | ast.expr) -> tuple[int, int]:
        return span(node)


def dump(node: ast.AST | list) -> str:
    """A node's meaning: its tree without positions (comments and layout are not in it)."""
    if isinstance(node, list):
        return "[" + ", ".join(dump(n) for n in node) + "]"
    return ast.dump(node, annotate_fields=False, include_attributes=False)


def without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[1:]
    return body
