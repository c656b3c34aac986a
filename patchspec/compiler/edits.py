"""Edits: what a resolved transform changes, before anything is written.

A ``NodeEdit`` changes one libcst node of a parsed definition; a ``LineEdit`` inserts whole lines after
a line of the file (module imports, class members), where no parse is needed at all.
"""
from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from patchspec.compiler import pattern
from patchspec.errors import PatchspecError
from patchspec.model import Loc


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


class Place(enum.Enum):
    """Where an edit's new nodes go relative to the node it names."""

    NODE = "node"          # ``Action.apply`` turns the node into another node (an argument added, a value set)
    BEFORE = "before"      # statements before the node, in its block
    AFTER = "after"        # statements after the node, in its block
    INSTEAD = "instead"    # statements in the node's place (none: removed, a marker comment line stays)
    ABSORB = "absorb"      # the node moves into the ``INSTEAD`` statement of the run's first node (a guard)


def _unchanged(node: cst.CSTNode, news: list[cst.CSTNode]) -> cst.CSTNode:
    return node


@dataclass(frozen=True, eq=False)
class Action:
    """What one kind's edit does, for every layer that reads edits: emit applies it, lint reads the code it
    inserts, the conflict check knows what it rewrites or sets. A kind module declares its actions."""

    name: str
    place: Place
    # NODE: (updated node, every new) -> node; the node is of the type the kind's edits name (a call, a
    # parameter, a loop), which the kind's own function takes
    apply: Callable[[Any, list[cst.CSTNode]], cst.CSTNode] = _unchanged
    lint: Callable[[cst.CSTNode], cst.CSTNode | None] = lambda new: new  # the code lint reads (None: none)
    sees_anchor: bool = False   # the inserted code runs after the anchor: names the anchor binds are bound
    rewrites: bool = False      # it replaces or removes upstream code: no other edit may touch that code
    anchors: bool = True        # its node is what the spec matched (a marker or a guarded statement is not)
    stage: int = 0              # NODE actions on one node apply in this order


@dataclass(frozen=True)
class NodeEdit:
    action: Action         # what the edit does (declared by its kind's module)
    node: cst.CSTNode      # the node of the fragment it applies to (by identity)
    new: cst.CSTNode       # the statement, decorator, argument or value to add
    owner: str             # the spec that asked for it


@dataclass(frozen=True)
class LineEdit:
    after_line: int        # 0 = top of file
    text: str              # whole lines, newline-terminated, already indented
    owner: str


@dataclass
class Resolved:
    """One transform of one target, as it resolved on these sources."""

    spec: str
    target: str
    index: int
    kind: str
    file: str
    function: str
    status: Status
    line: int | None = None
    detail: str = ""
    lines: list[int] = field(default_factory=list)
    note: str = ""                   # how the target or anchor was chosen, when that needs saying
    own: bool = False                # it rewrites the target's own statement (a module- or class-level one)
    binding: bool = False            # that statement is an assignment replaced or removed, or a definition
                                     # removed: the module's names show it, not a function's lines
    spec_loc: Loc | None = None      # the transform in the spec file
    edits: list[NodeEdit | LineEdit] = field(default_factory=list, repr=False)
    at: tuple[str, str] | None = None  # its key in Plan.definitions when not (file, function): see ``key``

    @property
    def ok(self) -> bool:
        return self.status == Status.OK

    @property
    def key(self) -> tuple[str, str]:
        """Its definition in ``Plan.definitions``: ``(file, function)``, or ``(file, function@line)`` for
        another definition of a name that a target of the plan already patches (two singledispatch ``_``)."""
        return self.at or (self.file, self.function)



class ResolveError(PatchspecError):
    """An anchor that matched zero or several times; ``lines`` are the file lines it matched. The plan
    keeps it as the transform's status; it never leaves the compiler."""

    def __init__(self, reason: Status, what: str, lines: list[int]) -> None:
        self.reason = reason
        self.what = what
        self.lines = lines
        where = f" (lines {', '.join(map(str, lines))})" if lines else ""
        super().__init__(f"{what}: {reason}{where}")


class ConflictError(PatchspecError):
    """Edits that cannot coexist, or inserted code that would not run: the error's location is the source
    line, ``spec_locations`` the spec's transforms concerned."""

    def __init__(self, message: str, file: str, line: int | None, locations: list[Loc]) -> None:
        super().__init__(message, file=file, line=line)
        self.spec_locations = locations


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


def with_marker(trailing: cst.TrailingWhitespace, marker: str) -> cst.TrailingWhitespace:
    """A line's trailing whitespace with the marker as (or after) its comment."""
    if trailing.comment is not None:
        if marker in trailing.comment.value:
            return trailing
        return trailing.with_changes(comment=cst.Comment(f"{trailing.comment.value}  {marker}"))
    return trailing.with_changes(whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(marker))


def marked_line(code: str, marker: str, indent: str, newline: str) -> str:
    return indent + cst.Module(body=[]).code_for_node(marked(code, marker)).rstrip("\n") + newline
