"""``guard``: the one run of consecutive statements matching a pattern is put inside a ``try`` or ``with``.

``by`` is the guarding statement, whose body is the single statement ``$$$BODY`` (any ``$$$`` name): the
run takes its place, re-indented, and is not marked (it is upstream's code, unchanged); the guard's own
lines (``try:``, each ``except``/``finally`` clause and its statements, a ``with`` header) are. Other specs'
inserts inside the run go with it into the guard.
"""
from __future__ import annotations

from typing import cast

import libcst as cst

from patchspec.compiler import pattern, rewrite
from patchspec.compiler.context import TargetContext
from patchspec.compiler.edits import Action, LineEdit, NodeEdit, Place, ResolveError, Status
from patchspec.compiler.kind import Key, Kind, Resolution
from patchspec.compiler.rewrite import find_runs, held

# lint reads its own lines; its new node is the try or with statement
GUARD = Action("guard", Place.INSTEAD, lint=lambda new: rewrite.fill_run(cast(cst.BaseCompoundStatement, new), []))
ABSORB = Action("guarded", Place.ABSORB, lint=lambda new: None, anchors=False)


def guard(ctx: TargetContext, params: dict[str, str]) -> Resolution:
    ctx.require_function("guard")
    run = list(pattern.parse(params["statements"], "statements").body)
    what = f"statements {params['statements'].strip().splitlines()[0]!r}"
    if pattern.is_wildcard(run[0]) or pattern.is_wildcard(run[-1]):
        raise ResolveError(Status.NOT_APPLICABLE, f"{what}: a run must begin and end with a statement, not `...`", [])
    found = find_runs(ctx, run)
    place = held(ctx, params["by"])
    if place is not None and all(id(block.body[first]) in place for block, first, _ in found):
        ctx.note("the target already holds the guard")   # the run, if still there, is inside it
        return ctx.definition.node.lineno, []
    if len(found) != 1:
        raise ResolveError(Status.MISSING if not found else Status.AMBIGUOUS, what,
                           [ctx.line_of(b.body[i]) for b, i, _ in found])
    block, first, end = found[0]
    by = pattern.parse(params["by"], "statements").body
    if len(by) != 1 or not isinstance(by[0], cst.Try | cst.TryStar | cst.With) or not rewrite.holds_run(by[0]):
        raise ResolveError(Status.NOT_APPLICABLE, "`by` must be one try or with statement whose body is the "
                                                  "single statement $$$BODY", [])
    marked = rewrite.mark_code(cst.Module(body=by), ctx.marker).body[0]
    edits: list[NodeEdit | LineEdit] = [NodeEdit(GUARD, block.body[first], marked, ctx.owner)]
    edits += [NodeEdit(ABSORB, stmt, cst.Pass(), ctx.owner) for stmt in block.body[first + 1:end]]
    return ctx.line_of(block.body[first]), edits


GUARD_KIND = Kind("guard", "the one run of consecutive statements matching `statements` goes inside `by`, a "
                  "`try` or `with` statement whose body is the single statement `$$$BODY`",
                  {"statements": Key.STATEMENTS_PATTERN, "by": Key.REPLACEMENT}, guard, actions=(GUARD, ABSORB),
                  rewrites=True, rank=11)
