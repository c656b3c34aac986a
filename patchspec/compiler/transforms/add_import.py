"""``add_import``: a module-level import after the file's leading imports."""
from __future__ import annotations

from patchspec.compiler.edits import LineEdit, marked_line
from patchspec.compiler.transforms.context import TargetContext


def add_import(ctx: TargetContext, params: dict[str, str]):
    after = ctx.source.import_line()
    line = marked_line(params["import"], ctx.marker, "", ctx.source.newline)
    return after + 1, [LineEdit(after, line, ctx.owner)]
