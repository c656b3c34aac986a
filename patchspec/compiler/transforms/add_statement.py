"""``add_statement``: new statements at the target's own level, right after it (a module-level name that a
fix adds between two definitions, as upstream put it), each line marked."""
from __future__ import annotations

import ast

import libcst as cst

from patchspec.compiler import pattern, rewrite, scope
from patchspec.compiler.context import TargetContext
from patchspec.compiler.edits import Action, LineEdit, NodeEdit, Place
from patchspec.compiler.kind import Binds, Key, Kind, Live, Resolution

AFTER_TARGET = Action("after-target", Place.AFTER)


def add_statement(ctx: TargetContext, params: dict[str, str]) -> Resolution:
    parsed = pattern.parse(params["code"], "statements")
    marked = rewrite.mark_code(parsed, ctx.marker)
    first = ctx.definition.node
    edits: list[NodeEdit | LineEdit] = []
    for index, stmt in enumerate(marked.body):
        if index == 0 and not isinstance(first, ast.Assign | ast.AnnAssign):
            # after a definition: two blank lines at module level, one in a class, as a formatter puts them
            blank = (cst.EmptyLine(indent=False),) * (2 if not ctx.fragment.header else 1)
            stmt = stmt.with_changes(leading_lines=(*blank, *stmt.leading_lines))
        edits.append(NodeEdit(AFTER_TARGET, ctx.fragment.node, stmt, ctx.owner))
    return first.lineno, edits


def _binds(params: dict[str, str]) -> Binds:
    """The names the statements bind at the target's level: the module's (or the class's)."""
    names = frozenset(n for stmt in ast.parse(pattern.placeholders(params["code"]).strip()).body
                      for n in scope.statement_binds(stmt))
    return Binds(module=names, member=names)


ADD_STATEMENT = Kind("add_statement", "`code` (one or more statements) right after the target definition or "
                     "assignment, at its level: a name a fix adds to a module or class", {"code": Key.REPLACEMENT},
                     add_statement, actions=(AFTER_TARGET,), any_definition=True, binds=_binds, rank=12,
                     live=Live.BINDING)
