"""Edits: what a resolved transform changes, before anything is written.

A ``NodeEdit`` changes one libcst node of a parsed definition; a ``LineEdit`` inserts whole lines after
a line of the file (module imports, class members), where no parse is needed at all.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

import libcst as cst

from patchspec.compiler import pattern


class Status(enum.StrEnum):
    """How one transform resolved on one release's sources."""

    OK = "ok"
    SKIPPED = "skipped"                  # its package is not under the root (or not selected)
    MISSING = "missing"                  # the anchor matches nothing
    AMBIGUOUS = "ambiguous"              # the anchor matches several times
    TARGET_MISSING = "target-missing"
    TARGET_AMBIGUOUS = "target-ambiguous"  # defined in several branches, no ``branch`` chosen
    NOT_LIVE = "not-live"                # the definition is not the live binding of its name (rebound)
    UNBOUND = "unbound-name"             # inserted code reads a name not bound where it lands
    NOT_APPLICABLE = "not-applicable"
    UNPARSABLE = "unparsable"


@dataclass(frozen=True)
class NodeEdit:
    action: str            # before | after | body_head | decorate | argument | member
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

    def __init__(self, reason: Status, what: str, lines: list[int]) -> None:
        self.reason = reason
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
    raise ResolveError(Status.NOT_APPLICABLE, f"code {code!r} must be one line", [])


def marked_line(code: str, marker: str, indent: str, newline: str) -> str:
    return indent + cst.Module(body=[]).code_for_node(marked(code, marker)).rstrip("\n") + newline
