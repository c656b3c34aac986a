"""``loop_guard``: one marked statement at the head of the matched loop's body."""
from __future__ import annotations

from typing import cast

import libcst as cst

from patchspec.compiler.context import TargetContext
from patchspec.compiler.edits import Action, NodeEdit, Place, ResolveError, Status, marked
from patchspec.compiler.kind import Key, Kind, Resolution, code_binds


def _head(loop: cst.For | cst.While, news: list[cst.CSTNode]) -> cst.For | cst.While:
    body = cast(cst.IndentedBlock, loop.body)   # loop_guard refuses a one-line body
    return loop.with_changes(body=body.with_changes(body=(*news, *body.body)))


BODY_HEAD = Action("body_head", Place.NODE, apply=_head, sees_anchor=True, stage=2)


def loop_guard(ctx: TargetContext, params: dict[str, str]) -> Resolution:
    ctx.require_function("loop_guard")
    loop = ctx.find_one(params["loop"], "statement", f"loop {params['loop'].strip().splitlines()[0]!r}",
                        (cst.For, cst.While))
    if not isinstance(loop.body, cst.IndentedBlock):
        raise ResolveError(Status.NOT_APPLICABLE, "the loop's body is on its header line", [ctx.line_of(loop)])
    return ctx.line_of(loop), [NodeEdit(BODY_HEAD, loop, marked(params["code"], ctx.marker), ctx.owner)]


LOOP_GUARD = Kind("loop_guard", "inserts `code` as the first statement of the body of the one loop matching "
                  "`loop`", {"loop": Key.STATEMENT_PATTERN, "code": Key.CODE}, loop_guard, binds=code_binds,
                  actions=(BODY_HEAD,), rank=4, local=True)
