"""``add_method`` / ``add_attribute``: one marked assignment at the end of a class body.

The line goes after the class's last statement, at the indentation of its first: no parse needed. A
method is preceded by a blank line when the class separates its methods so. A class whose body shares
its header's line (``class K: pass``) is parsed and given a block, so the member lands inside it.
"""
from __future__ import annotations

import ast

from patchspec.compiler.edits import LineEdit, NodeEdit, marked, marked_line
from patchspec.compiler.transforms.context import TargetContext
from patchspec.compiler.transforms.kind import Hook, Key, Kind, Live


def _member(kind: str, ctx: TargetContext, name: str, value: str, method: bool):
    ctx.require_class(kind)
    cls = ctx.definition.node
    code = f"{name} = {value}"
    if ctx.fragment_is_one_line():
        return cls.lineno, [NodeEdit("member", ctx.fragment.node, marked(code, ctx.marker), ctx.owner)]
    line = marked_line(code, ctx.marker, ctx.source.body_indent(cls), ctx.source.newline)
    if method and _spaced_methods(ctx, cls):
        line = ctx.source.newline + line
    return cls.lineno, [LineEdit(cls.body[-1].end_lineno, line, ctx.owner)]


def _spaced_methods(ctx: TargetContext, cls: ast.ClassDef) -> bool:
    """Whether a blank line comes before the class's methods (after the first statement)."""
    starts = [min([n.lineno] + [d.lineno for d in n.decorator_list]) for n in cls.body[1:]
              if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    return bool(starts) and all(not ctx.source.lines[s - 2].strip() for s in starts)


def add_method(ctx: TargetContext, params: dict[str, str]):
    return _member("add_method", ctx, params["name"], f"{ctx.alias}.{params['with']}", True)


def add_attribute(ctx: TargetContext, params: dict[str, str]):
    return _member("add_attribute", ctx, params["name"], params["value"], False)


ADD_METHOD = Kind("add_method", "on a class target: `name = alias.<with>` at the end of the class body "
                  "(a blank line before it where the class's methods are separated by one)",
                  {"name": Key.IDENTIFIER, "with": Key.HOOK}, add_method, on_class=True, hook=Hook.METHOD,
                  live=Live.CLASS_MEMBER)
ADD_ATTRIBUTE = Kind("add_attribute", "on a class target: `name = value` at the end of the class body",
                     {"name": Key.IDENTIFIER, "value": Key.EXPRESSION}, add_attribute, on_class=True,
                     live=Live.CLASS_MEMBER)
