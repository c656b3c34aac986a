"""``set``: a new value for an existing binding, in place, where Python reads it.

With neither ``parameter`` nor ``name``, the target itself is a module- or class-level assignment
(``Retry.DEFAULT_REMOVE_HEADERS_ON_REDIRECT``, ``_IDNA_TABLE``); with ``parameter``, the default of that
parameter of the target function; with ``name``, the one assignment of that name in the target's body. A
default that captured a class-level name is read when the class body runs, so setting the name in place
also sets the default. The value already there is nothing to do: drift calls that transform obsolete.
"""
from __future__ import annotations

import ast
from typing import cast

import libcst as cst
import libcst.matchers as m

from patchspec.compiler import pattern
from patchspec.compiler.context import TargetContext
from patchspec.compiler.edits import Action, NodeEdit, Place, ResolveError, Status, with_marker
from patchspec.compiler.fingerprint import tokens
from patchspec.compiler.kind import Key, Kind, Live, Resolution
from patchspec.compiler.rewrite import EXPRESSION, marker_edit


def _mark_parameter(param: cst.Param, news: list[cst.CSTNode]) -> cst.Param:
    """The marker at the end of the parameter's own line (after its comma), so that a diff of a signature laid
    out one parameter a line shows that line alone as changed."""
    comma = cast(cst.Comma, param.comma)   # a line break after it (``_line_ends_after``): a comma
    space = cast(cst.ParenthesizedWhitespace, comma.whitespace_after)
    return param.with_changes(comma=comma.with_changes(whitespace_after=space.with_changes(
        first_line=with_marker(space.first_line, cast(cst.Comment, news[0]).value))))


MARK_PARAMETER = Action("mark-parameter", Place.NODE, apply=_mark_parameter, stage=9, lint=lambda new: None,
                        anchors=False)


def _line_ends_after(param: cst.Param) -> bool:
    """Whether a line break follows the parameter's comma: its line is its own to mark."""
    comma = param.comma
    return isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace)


def _marker(ctx: TargetContext, value: cst.BaseExpression) -> NodeEdit:
    param = ctx.definition.ancestors(value)[0] if ctx.definition.ancestors(value) else None
    if isinstance(param, cst.Param) and param.default is value and _line_ends_after(param):
        return NodeEdit(MARK_PARAMETER, param, cst.Comment(ctx.marker), ctx.owner)
    return marker_edit(ctx, value)


def _value_node(ctx: TargetContext, params: dict[str, str]) -> tuple[cst.BaseExpression, str]:
    node = ctx.fragment.node
    if "parameter" in params and "name" in params:
        raise ResolveError(Status.NOT_APPLICABLE, "set takes `parameter` or `name`, not both", [])
    if "parameter" in params:
        ctx.require_function("set with `parameter`")
        wanted = params["parameter"]
        signature = cast(cst.FunctionDef, node).params   # a function (required above)
        every = [*signature.posonly_params, *signature.params, *signature.kwonly_params]
        found = [p for p in every if p.name.value == wanted]
        if not found:
            raise ResolveError(Status.MISSING, f"parameter {wanted} of {ctx.qualname}", [])
        default = found[0].default
        if default is None:
            raise ResolveError(Status.NOT_APPLICABLE, f"parameter {wanted} of {ctx.qualname} has no default",
                               [ctx.line_of(node)])
        return default, f"the default of {wanted}"
    if "name" in params:
        wanted = params["name"]
        assigned = [*ctx.definition.find(m.Assign(targets=[m.AssignTarget(target=m.Name(wanted))])),
                    *ctx.definition.find(m.AnnAssign(target=m.Name(wanted), value=m.DoNotCare()))]
        if len(assigned) != 1:
            raise ResolveError(Status.MISSING if not assigned else Status.AMBIGUOUS, f"assignment of {wanted}",
                               [ctx.line_of(ctx.definition.statement_of(n)) for n in assigned])
        value = cast(cst.Assign | cst.AnnAssign, assigned[0]).value
        if value is None:   # ``x: int`` (the AnnAssign matcher takes any value, none too)
            raise ResolveError(Status.NOT_APPLICABLE, f"{wanted} is annotated but never assigned in "
                                                      f"{ctx.qualname}", [ctx.line_of(assigned[0])])
        return value, wanted
    if not isinstance(ctx.definition.node, ast.Assign | ast.AnnAssign):
        raise ResolveError(Status.NOT_APPLICABLE, f"set needs `parameter` or `name` on {ctx.qualname}, which is a "
                                                  f"definition, not an assignment", [])
    # an assignment's fragment is its statement line, the assignment its one statement
    stmt = cast(cst.Assign | cst.AnnAssign, cast(cst.SimpleStatementLine, node).body[0])
    if stmt.value is None:
        raise ResolveError(Status.NOT_APPLICABLE, f"{ctx.qualname} is annotated but never assigned", [])
    return stmt.value, ctx.qualname


def set_value(ctx: TargetContext, params: dict[str, str]) -> Resolution:
    value, what = _value_node(ctx, params)
    new = pattern.parse(params["value"], "expression")
    line = ctx.line_of(ctx.definition.statement_of(value))
    if list(tokens(new)) == list(tokens(value)):
        ctx.note(f"{what} is that value already")
        return line, []
    return line, [NodeEdit(EXPRESSION, value, new, ctx.owner), _marker(ctx, value)]


SET = Kind("set", "a new value for an existing binding: the target's own assignment (a module- or class-level "
           "name), with `parameter` that parameter's default, with `name` the one assignment of that name in "
           "the target", {"value": Key.EXPRESSION, "parameter": Key.IDENTIFIER, "name": Key.IDENTIFIER},
           set_value, optional=frozenset({"parameter", "name"}), rewrites=True, any_definition=True, rank=10,
           live=Live.BINDING, live_cases=(("code_lines", "set with `name`"), ("default", "set with `parameter`"),
                                          ("binding", "set of a module- or class-level name")))
