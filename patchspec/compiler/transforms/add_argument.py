"""``add_argument``: a keyword argument added to the one call matching a pattern."""
from __future__ import annotations

from typing import cast

import libcst as cst

from patchspec.compiler import pattern, scope
from patchspec.compiler.context import TargetContext
from patchspec.compiler.edits import Action, LineEdit, NodeEdit, Place, Resolved, ResolveError, Status
from patchspec.compiler.kind import Key, Kind, Resolution


def _append_args(call: cst.Call, new_args: list[cst.CSTNode]) -> cst.Call:
    """Append keyword arguments in the call's own layout: each new one takes the separator before it."""
    args = list(call.args)
    for new in cast(list[cst.Arg], new_args):   # an ARGUMENT edit's new nodes are arguments
        if not args:
            args.append(new)
            continue
        last = args[-1]
        separator = args[-2].comma if len(args) > 1 and args[-2].comma is not cst.MaybeSentinel.DEFAULT \
            else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        args[-1] = last.with_changes(comma=separator)
        args.append(new.with_changes(comma=last.comma))
    return call.with_changes(args=tuple(args))


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node).strip()


def _slot(row: Resolved, edit: NodeEdit | LineEdit) -> tuple[tuple[object, ...], str]:
    """Two specs adding one keyword to one call must agree on its value."""
    node_edit = cast(NodeEdit, edit)   # an ARGUMENT edit: a node edit, its new node the argument
    new = cast(cst.Arg, node_edit.new)
    return (row.file, id(node_edit.node), f"{cast(cst.Name, new.keyword).value}="), _code(new.value)


MAPPING = "mapping-keyword"   # the rule a spec may acknowledge: it knows the mapping never holds the keyword
ARGUMENT = Action("argument", Place.NODE, apply=_append_args, lint=lambda new: cast(cst.Arg, new).value, stage=1)


def add_argument(ctx: TargetContext, params: dict[str, str]) -> Resolution:
    ctx.require_function("add_argument")
    call = ctx.find_one(params["call"], "expression", f"call {params['call'].strip()!r}", (cst.Call,))
    keyword = params["keyword"]
    if any(arg.keyword is not None and arg.keyword.value == keyword for arg in call.args):
        raise ResolveError(Status.NOT_APPLICABLE, f"the call already passes {keyword}=", [ctx.line_of(call)])
    for spread in (arg for arg in call.args if arg.star == "**"):
        mapping = cst.Module(body=[]).code_for_node(spread.value)
        keys = scope.literal_keys(ctx.definition.node, mapping) if isinstance(spread.value, cst.Name) else None
        if keys is not None and keyword not in keys:
            ctx.note(f"**{mapping} holds only {', '.join(sorted(keys)) or 'no key'} (every key it is given in "
                     f"{ctx.qualname} is a literal): {keyword} cannot arrive twice")
            continue
        ctx.refuse([(MAPPING, f"the call also passes **{mapping}, which may hold {keyword}: it would then arrive "
                              f"twice (TypeError at run time); set it in the mapping instead (an insert before the "
                              f"call, e.g. `{mapping}.setdefault({keyword!r}, ...)`)", [ctx.line_of(call)])])
    arg = cst.Arg(keyword=cst.Name(keyword), value=pattern.parse(params["value"], "expression"),
                  equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                        whitespace_after=cst.SimpleWhitespace("")))
    return ctx.line_of(call), [NodeEdit(ARGUMENT, call, arg, ctx.owner)]


ADD_ARGUMENT = Kind("add_argument", "adds `keyword=value` to the one call in the target that matches the "
                    "`call` pattern", {"call": Key.EXPRESSION_PATTERN, "keyword": Key.IDENTIFIER,
                                       "value": Key.EXPRESSION}, add_argument,
                    actions=(ARGUMENT,), slot=_slot, rank=3, local=True, rules=frozenset({MAPPING}))
