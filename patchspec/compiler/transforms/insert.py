"""``insert_before`` / ``insert_after``: one marked statement next to the anchor statement."""
from __future__ import annotations

import libcst as cst

from patchspec.compiler.context import TargetContext
from patchspec.compiler.edits import Action, NodeEdit, Place, ResolveError, Status, marked
from patchspec.compiler.kind import Key, Kind, Resolution, code_binds

ACTIONS = {"before": Action("before", Place.BEFORE), "after": Action("after", Place.AFTER, sees_anchor=True)}


def _resolve(action: str, ctx: TargetContext, params: dict[str, str]) -> Resolution:
    ctx.require_function(f"insert_{action}")
    anchor = ctx.find_one(params["anchor"], "statement", f"anchor {params['anchor'].strip()!r}",
                          (cst.BaseStatement,))
    if anchor is ctx.fragment.node:
        raise ResolveError(Status.NOT_APPLICABLE, "the anchor is the target itself", [ctx.line_of(anchor)])
    return ctx.line_of(anchor), [NodeEdit(ACTIONS[action], anchor, marked(params["code"], ctx.marker), ctx.owner)]


KEYS = {"anchor": Key.STATEMENT_PATTERN, "code": Key.CODE}
INSERT_BEFORE = Kind("insert_before", "inserts `code` as the statement before the anchor statement", KEYS,
                     lambda ctx, params: _resolve("before", ctx, params), binds=code_binds,
                     actions=(ACTIONS["before"],), rank=0, local=True)
INSERT_AFTER = Kind("insert_after", "inserts `code` as the statement after the anchor statement", KEYS,
                    lambda ctx, params: _resolve("after", ctx, params), binds=code_binds,
                    actions=(ACTIONS["after"],), rank=1, local=True)
