"""``wrap``: decorate the target with a snippet that receives the original function.

The decorator goes innermost, so the target's own decorators still apply to what the snippet returns,
and the original stays reachable (``functools.wraps`` sets ``__wrapped__``). Several specs may wrap one
function: the first in stacking order is innermost (it wraps the original, the next wraps that).
"""
from __future__ import annotations

from typing import cast

import libcst as cst

from patchspec.compiler.context import TargetContext
from patchspec.compiler.edits import Action, NodeEdit, Place
from patchspec.compiler.kind import Hook, Key, Kind, Live, Resolution


def _decorate(func: cst.FunctionDef, news: list[cst.CSTNode]) -> cst.FunctionDef:
    # stacking order: the first spec's decorator is innermost, it wraps the original
    return func.with_changes(decorators=(*func.decorators, *reversed(news)))   # news: the Decorators


DECORATE = Action("decorate", Place.NODE, apply=_decorate, lint=lambda new: None, stage=0)


def wrap(ctx: TargetContext, params: dict[str, str]) -> Resolution:
    ctx.require_function("wrap")
    func = ctx.fragment.node
    decorator = cst.Decorator(
        # a kind with a hook has a snippet package, so an alias (the spec's check)
        decorator=cst.Attribute(value=cst.Name(cast(str, ctx.alias)), attr=cst.Name(params["with"])),
        trailing_whitespace=cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "),
                                                   comment=cst.Comment(ctx.marker)),
    )
    return ctx.line_of(func), [NodeEdit(DECORATE, func, decorator, ctx.owner)]


WRAP = Kind("wrap", "decorates the target with `@alias.<with>` (innermost): the snippet receives the original "
            "function and returns the function to call; the original stays reachable as `__wrapped__`",
            {"with": Key.HOOK}, wrap, hook=Hook.DECORATOR, actions=(DECORATE,), rank=2, live=Live.WRAPPED, local=True)
