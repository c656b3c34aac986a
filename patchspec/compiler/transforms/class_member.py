"""``add_method`` / ``add_attribute``: one marked assignment at the end of a class body.

The line goes after the class's last statement, at the indentation of its first: no parse needed.
"""
from __future__ import annotations

from patchspec.compiler.edits import LineEdit, marked_line
from patchspec.compiler.transforms.context import TargetContext


def _member(kind: str, ctx: TargetContext, name: str, value: str):
    ctx.require_class(kind)
    cls = ctx.definition.node
    line = marked_line(f"{name} = {value}", ctx.marker, ctx.source.body_indent(cls), ctx.source.newline)
    return cls.lineno, [LineEdit(cls.body[-1].end_lineno, line, ctx.owner)]


def add_method(ctx: TargetContext, params: dict[str, str]):
    return _member("add_method", ctx, params["name"], f"{ctx.alias}.{params['with']}")


def add_attribute(ctx: TargetContext, params: dict[str, str]):
    return _member("add_attribute", ctx, params["name"], params["value"])
