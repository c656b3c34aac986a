"""``add_import``: a module-level import after the file's leading imports, unless the file has it."""
from __future__ import annotations

import ast

from patchspec.compiler import scope
from patchspec.compiler.context import TargetContext
from patchspec.compiler.edits import LineEdit, marked_line
from patchspec.compiler.kind import Binds, Key, Kind, Live, Resolution


def add_import(ctx: TargetContext, params: dict[str, str]) -> Resolution:
    wanted = ast.dump(ast.parse(params["import"].strip()).body[0])
    for stmt in ctx.source.tree.body:
        if isinstance(stmt, ast.Import | ast.ImportFrom) and ast.dump(stmt) == wanted:
            ctx.note(f"already imported at line {stmt.lineno}")
            return stmt.lineno, []
    after = ctx.source.import_line()
    line = marked_line(params["import"], ctx.marker, "", ctx.source.newline)
    return after + 1, [LineEdit(after, line, ctx.owner)]


ADD_IMPORT = Kind("add_import", "a module-level import statement, added after the leading imports (any "
                  "target in the file); none when the file has that very import already",
                  {"import": Key.CODE}, add_import, any_target=True,
                  binds=lambda params: Binds(module=frozenset(scope.statement_binds(
                      ast.parse(params["import"].strip()).body[0]))), rank=7, live=Live.MODULE_NAME)
