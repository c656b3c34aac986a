"""The proof of a drafted spec: compiled on the text it applies to, it gives the changed text's tree.

Both trees are compared without what only marks or binds the patch: the snippet import, docstrings
(record leaves them as the release has them), and the place of a definition or import the change adds
(``add_method`` appends to the class, ``add_import`` follows the leading imports). Code the draft moved
into the snippet module is read back from there: ``name = _alias.hook`` is the hook's definition, an
import from the snippet module is the statement that defines the name there.
"""
from __future__ import annotations

import ast
import copy

from patchspec.compiler.plan import RUNTIME_PACKAGE, emit, resolve
from patchspec.errors import PatchspecError
from patchspec.record.targets import _member_key, locate
from patchspec.record.text import DEF_TYPES, Text, dump
from patchspec.spec import load_spec

RUNTIME = RUNTIME_PACKAGE


def compile_texts(spec_path: str, texts: dict[str, str]) -> dict[str, str]:
    """The spec's patched text of each file, compiled on ``texts`` (refused as the compiler refuses)."""
    spec = load_spec(spec_path)
    packages = {t.package for t in spec.targets}
    plan = resolve([spec], texts.get, lambda package: package in packages)
    if plan.errors:
        first = plan.errors[0]
        raise PatchspecError(f"the draft does not resolve on the text it was recorded from: {first.target}#"
                             f"{first.index} {first.kind}: {first.detail}; nothing was written", file=spec_path)
    out = emit(plan, [spec])
    if plan.problems:
        raise PatchspecError(f"the draft's code is refused where it lands: {plan.problems[0].text}; nothing was "
                             "written", file=spec_path)
    return out


def expected_text(old: Text, new: Text, qualnames: list[str]) -> str:
    """The old text with each named definition (or name) as the new text has it; a definition the old text
    lacks is appended to its class, or to the module; one the new text lacks is gone."""
    lines = list(old.lines)
    edits: list[tuple[int, int, list[str]]] = []
    appended: list[tuple[int, list[str]]] = []
    for qualname in qualnames:
        after = locate(new, qualname)
        before = locate(old, qualname)
        if after is None:   # removed by the change
            if before is not None:
                edits.append((*old.lines_of(before), []))
            continue
        start, end = new.lines_of(after)
        body = [line if line.endswith(("\n", "\r")) else line + "\n" for line in new.lines[start - 1:end]]
        if before is not None:
            edits.append((*old.lines_of(before), body))
        else:
            scope = qualname.rpartition(".")[0]
            owner = locate(old, scope) if scope else None
            appended.append((old.lines_of(owner)[1] if owner is not None else len(lines), body))
    for start, end, body in sorted(edits, reverse=True):
        lines[start - 1:end] = body
    for at, body in sorted(appended, reverse=True):
        shift = sum(len(b) - (e - s + 1) for s, e, b in edits if s <= at)
        if lines and not lines[-1].endswith(("\n", "\r")):
            lines[-1] += "\n"
        lines[at + shift:at + shift] = body
    return "".join(lines)


def difference(compiled: str, expected: str, pristine: str, snippet: str | None, alias: str, path: str) -> str | None:
    """Where the compiled text and the expected text differ in meaning, or None."""
    snippet_defs = _defined(ast.parse(snippet)) if snippet else {}
    base = ast.parse(pristine)
    got = _normal(ast.parse(compiled), base, snippet_defs, alias)
    want = _normal(ast.parse(expected), base, {}, alias)
    if dump(got) == dump(want):
        return None
    for a, b in zip(got.body, want.body, strict=False):   # past the shorter one, the counts below say it
        if dump(a) != dump(b):
            return f"{path}:{getattr(b, 'lineno', '?')}: compiled {ast.unparse(a).splitlines()[0]!r}, the change has " \
                   f"{ast.unparse(b).splitlines()[0]!r}"
    return f"{path}: the compiled text has {len(got.body)} statements, the change {len(want.body)}"


def _defined(tree: ast.Module) -> dict[str, ast.stmt]:
    out: dict[str, ast.stmt] = {}
    for stmt in tree.body:
        if isinstance(stmt, DEF_TYPES):
            out[stmt.name] = stmt
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            out[stmt.targets[0].id] = stmt
    return out


def _normal(tree: ast.Module, pristine: ast.Module, snippet: dict[str, ast.stmt], alias: str) -> ast.Module:
    tree = copy.deepcopy(tree)
    tree.body = _scope(tree.body, pristine.body, snippet, alias)
    return tree


def _scope(body: list[ast.stmt], pristine: list[ast.stmt], snippet: dict[str, ast.stmt], alias: str) -> list[ast.stmt]:
    known = {_member_key(s) for s in pristine}
    by_key = {_member_key(s): s for s in pristine}
    kept, added = [], []
    for stmt in body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module == RUNTIME:
            continue
        if isinstance(stmt, ast.ImportFrom) and (stmt.module or "").startswith(RUNTIME + "."):
            moved = [copy.deepcopy(snippet[a.name]) for a in stmt.names if a.name in snippet]
            added += moved
            continue
        hook = _hook(stmt, alias)
        if hook is not None and hook[1] in snippet:
            definition = copy.deepcopy(snippet[hook[1]])
            if isinstance(definition, DEF_TYPES):   # an assignment has no name of its own to take
                definition.name = hook[0]
            stmt = definition
        stmt = _MovedValues(snippet, alias).visit(stmt)
        if isinstance(stmt, DEF_TYPES):
            _strip_docstring(stmt)
            if isinstance(stmt, ast.ClassDef):
                inner = by_key.get(_member_key(stmt))
                stmt.body = _scope(stmt.body, inner.body if isinstance(inner, ast.ClassDef) else [], snippet, alias)
        if _member_key(stmt) is not None and _member_key(stmt) not in known and \
                isinstance(stmt, (*DEF_TYPES, ast.Import, ast.ImportFrom, ast.Assign)):
            added.append(stmt)
        else:
            kept.append(stmt)
    if kept and isinstance(kept[0], ast.Expr) and isinstance(kept[0].value, ast.Constant):
        kept = kept[1:]
    return kept + sorted(added, key=dump)


def _hook(stmt: ast.stmt, alias: str) -> tuple[str, str] | None:
    """``name = _alias.hook`` (what add_method writes): (name, hook)."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
            and isinstance(stmt.value, ast.Attribute) and isinstance(stmt.value.value, ast.Name) \
            and stmt.value.value.id == alias:
        return stmt.targets[0].id, stmt.value.attr
    return None


class _MovedValues(ast.NodeTransformer):
    """``_alias.NAME()`` where the snippet function NAME only returns a value: that value."""

    def __init__(self, snippet: dict[str, ast.stmt], alias: str) -> None:
        self.snippet, self.alias = snippet, alias

    def visit_Call(self, node: ast.Call) -> ast.AST:
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == self.alias \
                and not node.args and not node.keywords:
            moved = self.snippet.get(func.attr)
            if isinstance(moved, ast.FunctionDef) and len(moved.body) == 1 and isinstance(moved.body[0], ast.Return) \
                    and moved.body[0].value is not None:
                return copy.deepcopy(moved.body[0].value)
        return self.generic_visit(node)


def _strip_docstring(node: ast.AST) -> None:
    for inner in ast.walk(node):
        if isinstance(inner, DEF_TYPES) and inner.body and isinstance(inner.body[0], ast.Expr) \
                and isinstance(inner.body[0].value, ast.Constant) and isinstance(inner.body[0].value.value, str):
            inner.body = inner.body[1:] or [ast.Pass()]
