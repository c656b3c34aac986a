"""``insert_before`` / ``insert_after``: one marked statement next to the anchor statement."""
from __future__ import annotations

import libcst as cst

from patchspec.compiler.edits import NodeEdit, ResolveError, marked
from patchspec.compiler.transforms.context import TargetContext


def _resolve(action: str, ctx: TargetContext, params: dict[str, str]) -> tuple[int, list[NodeEdit]]:
    ctx.require_function(f"insert_{action}")
    anchor = ctx.find_one(params["anchor"], "statement", f"anchor {params['anchor'].strip()!r}",
                          (cst.BaseStatement,))
    if anchor is ctx.fragment.node:
        raise ResolveError("not-applicable", "the anchor is the target itself", [ctx.line_of(anchor)])
    return ctx.line_of(anchor), [NodeEdit(action, anchor, marked(params["code"], ctx.marker), ctx.owner)]


def insert_before(ctx: TargetContext, params: dict[str, str]):
    return _resolve("before", ctx, params)


def insert_after(ctx: TargetContext, params: dict[str, str]):
    return _resolve("after", ctx, params)
