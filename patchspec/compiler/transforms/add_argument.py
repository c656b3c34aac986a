"""``add_argument``: a keyword argument added to the one call matching a pattern."""
from __future__ import annotations

import libcst as cst

from patchspec.compiler import pattern
from patchspec.compiler.edits import NodeEdit, ResolveError
from patchspec.compiler.transforms.context import TargetContext


def add_argument(ctx: TargetContext, params: dict[str, str]):
    ctx.require_function("add_argument")
    call = ctx.find_one(params["call"], "expression", f"call {params['call'].strip()!r}", (cst.Call,))
    keyword = params["keyword"]
    if any(arg.keyword is not None and arg.keyword.value == keyword for arg in call.args):
        raise ResolveError("not-applicable", f"the call already passes {keyword}=", [ctx.line_of(call)])
    arg = cst.Arg(keyword=cst.Name(keyword), value=pattern.parse(params["value"], "expression"),
                  equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                        whitespace_after=cst.SimpleWhitespace("")))
    return ctx.line_of(call), [NodeEdit("argument", call, arg, ctx.owner)]
