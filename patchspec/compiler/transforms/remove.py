"""``remove``: the one statement matching a pattern is taken out; a marker comment line stays in its place
(a marked ``pass`` when it was the only statement of its block), so check and the journal find it."""
from __future__ import annotations

import ast

import libcst as cst

from patchspec.compiler import pattern, scope
from patchspec.compiler.context import TargetContext
from patchspec.compiler.edits import Action, NodeEdit, Place, ResolveError, Status
from patchspec.compiler.kind import Binds, Key, Kind, Resolution
from patchspec.compiler.rewrite import find_rewritten

REMOVED = Action("remove", Place.INSTEAD, rewrites=True, lint=lambda new: None)


def remove(ctx: TargetContext, params: dict[str, str]) -> Resolution:
    text = params["statement"]
    what = f"statement {text.strip().splitlines()[0]!r}"
    node, _bound = find_rewritten(ctx, text, what)   # gone is anchor-missing: removed or changed, drift cannot tell
    if not isinstance(node, cst.BaseStatement):
        node = ctx.definition.statement_of(node)
        if not isinstance(node, cst.SimpleStatementLine) or len(node.body) != 1:
            raise ResolveError(Status.NOT_APPLICABLE, f"{what} is part of a statement, not a whole one",
                               [ctx.line_of(node)])
    line = cst.EmptyLine(indent=True, comment=cst.Comment(f"{ctx.marker} (removed)"))
    return ctx.line_of(node), [NodeEdit(REMOVED, node, line, ctx.owner)]


def _unbinds(params: dict[str, str]) -> Binds:
    """A removed statement no longer binds what it assigned (at its level)."""
    stmt = ast.parse(pattern.placeholders(params["statement"]).strip()).body[0]
    return Binds(unbinds=frozenset(scope.statement_binds(stmt)))


REMOVE = Kind("remove", "the one statement matching `statement` is removed; a marker comment line stays in its "
              "place (a marked `pass` when it was its block's only statement)", {"statement": Key.REWRITE_PATTERN},
              remove, actions=(REMOVED,), rewrites=True, binds=_unbinds, rank=9, any_definition=True,
              live_cases=(("code_lines", "remove"), ("binding", "remove of such a statement")))
