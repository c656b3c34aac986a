"""``add_argument``: a keyword argument added to the one call matching a pattern."""
from __future__ import annotations

import libcst as cst

from patchspec.compiler import pattern
from patchspec.compiler.edits import NodeEdit, ResolveError, Status
from patchspec.compiler.transforms.context import TargetContext
from patchspec.compiler.transforms.kind import Key, Kind


def add_argument(ctx: TargetContext, params: dict[str, str]):
    ctx.require_function("add_argument")
    call = ctx.find_one(params["call"], "expression", f"call {params['call'].strip()!r}", (cst.Call,))
    keyword = params["keyword"]
    if any(arg.keyword is not None and arg.keyword.value == keyword for arg in call.args):
        raise ResolveError(Status.NOT_APPLICABLE, f"the call already passes {keyword}=", [ctx.line_of(call)])
    spread = next((arg for arg in call.args if arg.star == "**"), None)
    if spread is not None:
        mapping = cst.Module(body=[]).code_for_node(spread.value)
        raise ResolveError(Status.NOT_APPLICABLE, f"the call also passes **{mapping}, which may hold {keyword}: "
                           f"it would then arrive twice (TypeError at run time); set it in the mapping instead "
                           f"(an insert before the call, e.g. `{mapping}.setdefault({keyword!r}, ...)`)",
                           [ctx.line_of(call)])
    arg = cst.Arg(keyword=cst.Name(keyword), value=pattern.parse(params["value"], "expression"),
                  equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                        whitespace_after=cst.SimpleWhitespace("")))
    return ctx.line_of(call), [NodeEdit("argument", call, arg, ctx.owner)]


ADD_ARGUMENT = Kind("add_argument", "adds `keyword=value` to the one call in the target that matches the "
                    "`call` pattern", {"call": Key.EXPRESSION_PATTERN, "keyword": Key.IDENTIFIER,
                                       "value": Key.EXPRESSION}, add_argument)
