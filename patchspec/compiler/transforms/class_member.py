"""``add_method`` / ``add_attribute``: one marked assignment at the end of a class body.

The line goes after the class's last statement, at the indentation of its first: no parse needed. A
method is preceded by a blank line when the class separates its methods so. A class whose body shares
its header's line (``class K: pass``) is parsed and given a block, so the member lands inside it.
"""
from __future__ import annotations

import ast
from typing import cast

import libcst as cst

from patchspec.compiler import scope
from patchspec.compiler.context import TargetContext
from patchspec.compiler.edits import Action, LineEdit, NodeEdit, Place, Resolved, marked, marked_line
from patchspec.compiler.kind import Binds, Hook, Key, Kind, Live, Resolution


def _append(cls: cst.ClassDef, news: list[cst.CSTNode]) -> cst.ClassDef:
    body = cast(cst.IndentedBlock, cls.body)   # a one-line class body is given a block (the fragment)
    return cls.with_changes(body=body.with_changes(body=(*body.body, *news)))


MEMBER = Action("member", Place.NODE, apply=_append, stage=3)


def _slot(row: Resolved, edit: NodeEdit | LineEdit) -> tuple[tuple[object, ...], str]:
    """Two specs adding one member to one class must agree on its value."""
    text = edit.text if isinstance(edit, LineEdit) else cst.Module(body=[]).code_for_node(edit.new).strip()
    name, _, value = text.split("#")[0].strip().partition("=")
    return (row.file, row.function, f"{row.function}.{name.strip()}"), value.strip()


def _member(kind: str, ctx: TargetContext, name: str, value: str, method: bool) -> Resolution:
    ctx.require_class(kind)
    cls = cast(ast.ClassDef, ctx.definition.node)   # required above
    _refuse_existing(kind, ctx, cls, name, method)
    code = f"{name} = {value}"
    if ctx.fragment_is_one_line():
        return cls.lineno, [NodeEdit(MEMBER, ctx.fragment.node, marked(code, ctx.marker), ctx.owner)]
    line = marked_line(code, ctx.marker, ctx.source.body_indent(cls), ctx.source.newline)
    if method and _spaced_methods(ctx, cls):
        line = ctx.source.newline + line
    return cls.lineno, [LineEdit(cast(int, cls.body[-1].end_lineno), line, ctx.owner)]   # ast sets it


CAPTURED, EXISTING = "captured-default", "existing-member"   # the rules a spec may acknowledge (``Kind.rules``)
REWRITE = "change an existing binding with the rewrite kinds `set` (a value) or `replace` (a definition)"


def _refuse_existing(kind: str, ctx: TargetContext, cls: ast.ClassDef, name: str, method: bool) -> None:
    """A member added at the end of the class body runs after everything the body already did: a name
    the body read earlier keeps the old value there, and a name it binds already is silently replaced."""
    broken = []
    captured = scope.class_reads_before(cls, name)
    if captured is not None:
        node, what = captured
        where = (f"`set` on the target {ctx.qualname}.{name}" if scope.level_bindings(cls.body, name)
                 else f"the rewrite kind `set` where {name} is bound")
        broken.append((CAPTURED, f"{cls.name}'s body reads {name} at line {node.lineno} ({what}) before an added "
                       f"{name} would run: that line keeps the old value; change the value in place with {where}",
                       [node.lineno]))
    bound = [(b.line, b.describe()) for b in scope.level_bindings(cls.body, name)]
    if cls in ctx.source.tree.body:
        bound += [(stmt.lineno, f"`{scope.statement_text(stmt)}`")
                  for attr, stmt, _value in scope.attribute_assignments(ctx.source.tree, cls.name) if attr == name]
    if method:
        bound += [(n.lineno, f"`self.{name} = ...` in a method, which hides a method of that name")
                  for n in ast.walk(cls) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
                  and n.attr == name and isinstance(n.value, ast.Name) and n.value.id == "self"]
    if bound:
        line, what = min(bound)
        broken.append((EXISTING, f"{cls.name} already binds {name} at line {line} ({what}): {kind} would "
                       f"silently replace it; {REWRITE}", [line]))
    ctx.refuse(broken)


def _spaced_methods(ctx: TargetContext, cls: ast.ClassDef) -> bool:
    """Whether a blank line comes before the class's methods (after the first statement)."""
    starts = [min([n.lineno] + [d.lineno for d in n.decorator_list]) for n in cls.body[1:]
              if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    return bool(starts) and all(not ctx.source.lines[s - 2].strip() for s in starts)


def add_method(ctx: TargetContext, params: dict[str, str]) -> Resolution:
    return _member("add_method", ctx, params["name"], f"{ctx.alias}.{params['with']}", True)


def add_attribute(ctx: TargetContext, params: dict[str, str]) -> Resolution:
    return _member("add_attribute", ctx, params["name"], params["value"], False)


ADD_METHOD = Kind("add_method", "on a class target: `name = alias.<with>` at the end of the class body "
                  "(a blank line before it where the class's methods are separated by one)",
                  {"name": Key.IDENTIFIER, "with": Key.HOOK}, add_method, on_class=True, hook=Hook.METHOD,
                  binds=lambda params: Binds(member=frozenset({params["name"]})), actions=(MEMBER,), slot=_slot, rank=5,
                  live=Live.CLASS_MEMBER, rules=frozenset({CAPTURED, EXISTING}))
ADD_ATTRIBUTE = Kind("add_attribute", "on a class target: `name = value` at the end of the class body",
                     {"name": Key.IDENTIFIER, "value": Key.EXPRESSION}, add_attribute, on_class=True,
                     binds=lambda params: Binds(member=frozenset({params["name"]})), actions=(MEMBER,), slot=_slot,
                     rank=6, live=Live.CLASS_MEMBER, rules=frozenset({CAPTURED, EXISTING}))
