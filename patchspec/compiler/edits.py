"""Edits: what a resolved transform changes, before anything is written.

A ``NodeEdit`` changes one libcst node of a parsed definition; a ``LineEdit`` inserts whole lines after
a line of the file (module imports, class members), where no parse is needed at all.
"""
from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from patchspec.compiler import pattern


@dataclass(frozen=True)
class NodeEdit:
    action: str            # before | after | body_head | decorate | argument
    node: cst.CSTNode      # the node of the fragment it applies to (by identity)
    new: cst.CSTNode       # the statement, decorator or argument to add
    owner: str             # the spec that asked for it


@dataclass(frozen=True)
class LineEdit:
    after_line: int        # 0 = top of file
    text: str              # whole lines, newline-terminated, already indented
    owner: str


class ResolveError(Exception):
    """An anchor that matched zero or several times; ``lines`` are the file lines it matched."""

    def __init__(self, reason: str, what: str, lines: list[int]) -> None:
        self.reason = reason   # missing | ambiguous | target-missing | not-applicable
        self.what = what
        self.lines = lines
        where = f" (lines {', '.join(map(str, lines))})" if lines else ""
        super().__init__(f"{what}: {reason}{where}")


def marked(code: str, marker: str) -> cst.BaseStatement:
    """The one-line statement ``code`` with the spec's marker as its trailing comment."""
    stmt = pattern.parse(code, "code")
    trailing = cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(marker))
    if isinstance(stmt, cst.SimpleStatementLine):
        return stmt.with_changes(trailing_whitespace=trailing, leading_lines=())
    body = getattr(stmt, "body", None)
    if isinstance(body, cst.SimpleStatementSuite):
        return stmt.with_changes(body=body.with_changes(trailing_whitespace=trailing), leading_lines=())
    raise ResolveError("not-applicable", f"code {code!r} must be one line", [])


def marked_line(code: str, marker: str, indent: str, newline: str) -> str:
    return indent + cst.Module(body=[]).code_for_node(marked(code, marker)).rstrip("\n") + newline
