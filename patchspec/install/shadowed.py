"""What Python may run instead of a target's source, seen statically: a compiled module beside the
``.py`` (an accelerator, mypyc, Cython: Python imports it first), and a package above the module that
binds the target's name in a ``try``/``except`` (or ``if``) import (an accelerator with a pure fallback),
and a module beside it that chooses the same way between the target's module and another (yarl's
``_quoting.py`` between ``_quoting_c`` and ``_quoting_py``).
``init``, ``compile``, ``check`` and ``apply`` warn of both; the run-time proof shows which one runs."""
from __future__ import annotations

import ast
import posixpath
from collections.abc import Callable, Sequence

from patchspec.compiler import scope
from patchspec.install.root import Root

COMPILED = (".so", ".pyd")


def warnings(root: Root, rel: str, qualname: str, read: Callable[[str], str | None]) -> list[str]:
    """One line per way ``rel``'s ``qualname`` may not be what runs (``read``: rel -> pristine text)."""
    top = qualname.split(".")[0]
    return (compiled_siblings(root, rel) + fallback_bindings(rel, top, read, sibling_modules(root, rel))
            + fallback_aliases(rel, top, read))


def sibling_modules(root: Root, rel: str) -> list[str]:
    """The other ``.py`` modules of ``rel``'s package (its ``__init__`` is read as a package above)."""
    folder, name = posixpath.split(rel)
    if not folder or not (root.path / folder).is_dir():
        return []
    return sorted(posixpath.join(folder, p.name) for p in (root.path / folder).iterdir()
                  if p.suffix == ".py" and p.name not in (name, "__init__.py") and p.is_file())


def compiled_siblings(root: Root, rel: str) -> list[str]:
    folder, name = posixpath.split(rel)
    stem = name.removesuffix(".py")
    if stem == "__init__" or not (root.path / folder).is_dir():
        return []
    found = sorted(p.name for p in (root.path / folder).iterdir()
                   if p.name.startswith(stem + ".") and p.name.endswith(COMPILED))
    return [f"{rel}: {posixpath.join(folder, f)} is a compiled module beside it: Python imports that, not "
            f"{name}, so no patch of its source runs there (verify shows what runs)" for f in found]


def fallback_bindings(rel: str, name: str, read: Callable[[str], str | None],
                      siblings: Sequence[str] = ()) -> list[str]:
    """A package above ``rel``, or a module beside it (``siblings``), binding ``name`` in more than one
    branch (``try``/``except``, ``if``), one of them an import from ``rel``'s module: in the other branch,
    callers of that module's name do not reach ``rel``."""
    module = rel.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
    parts = module.split(".")
    places = [("/".join(parts[:depth]) + "/__init__.py", ".".join(parts[:depth]), ".".join(parts[:depth]))
              for depth in range(len(parts) - 1, 0, -1)]
    places += [(sibling, ".".join(parts[:-1] + [posixpath.basename(sibling).removesuffix(".py")]),
                ".".join(parts[:-1])) for sibling in siblings]
    out = []
    for path, owner, package in places:   # package: what the file's relative imports start from
        tree = _tree(read(path))
        if tree is None:
            continue
        bindings = [b for b in scope.level_bindings(tree.body, name) if b.path]
        mine = [b for b in bindings if _imports_from(b.node, package, module)]
        others = sorted((b for b in bindings if b not in mine), key=_type_checking)   # one that runs first
        if mine and others:
            other = others[0]
            out.append(f"{path}:{other.line}: {owner}.{name} is bound in {scope.label(other.path)} by "
                       f"{other.describe()}, and from {module} only in {scope.label(mine[0].path)} (line "
                       f"{mine[0].line}): when the other branch runs, callers of {owner}.{name} do not reach "
                       f"{rel} (verify shows which runs)")
    return out


def _type_checking(binding: scope.Binding) -> bool:
    """The binding sits under ``if TYPE_CHECKING:``, which never runs (immutables' ``from ._map import Map``
    for the type checker, beside the ``try`` that imports it)."""
    return any(key[0] == "if" and text in ("if TYPE_CHECKING", "if typing.TYPE_CHECKING")
               for _, key, text in binding.path)


def _tree(text: str | None) -> ast.Module | None:
    """The module in ``text``; None when there is none or Python cannot parse it (the plan says why)."""
    if not text:
        return None
    try:
        return ast.parse(text)
    except (SyntaxError, RecursionError, MemoryError):
        return None


def fallback_aliases(rel: str, name: str, read: Callable[[str], str | None]) -> list[str]:
    """``rel`` itself binding another name to ``name`` only in some branches and by an import in another
    (pyrsistent's ``pvector = python_pvector`` / ``from pvectorc import pvector``): where the import runs,
    callers of that name do not reach ``name``."""
    tree = _tree(read(rel))
    if tree is None:
        return []
    aliases = {t.id for stmt in scope.level_statements(tree.body) if isinstance(stmt, ast.Assign)
               and isinstance(stmt.value, ast.Name) and stmt.value.id == name
               for t in stmt.targets if isinstance(t, ast.Name) and t.id != name}
    out = []
    for alias in sorted(aliases):
        bindings = scope.level_bindings(tree.body, alias)
        mine = [b for b in bindings if isinstance(b.node, ast.Assign) and isinstance(b.node.value, ast.Name)
                and b.node.value.id == name]
        imports = [b for b in bindings if isinstance(b.node, ast.Import | ast.ImportFrom)]
        if mine and imports:
            other = imports[0]
            out.append(f"{rel}:{other.line}: {alias} is bound in {scope.label(other.path)} by {other.describe()}, "
                       f"and to {name} only in {scope.label(mine[0].path)} (line {mine[0].line}): when the import "
                       f"runs, callers of {alias} do not reach {name} (verify shows which runs)")
    return out + chosen_aliases(rel, tree, name)


def chosen_aliases(rel: str, tree: ast.Module, name: str) -> list[str]:
    """``rel`` binding another name to ``c_x or name`` (``c_x if c_x else name``), where ``c_x`` is an
    import (stdlib json's ``scanstring = c_scanstring or py_scanstring``): where the import runs, callers
    of that name do not reach ``name``."""
    out = []
    for stmt in scope.level_statements(tree.body):
        if not (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.BoolOp | ast.IfExp)
                and name in _choices(stmt.value)):
            continue
        imported = [(other, b) for other in dict.fromkeys(_choices(stmt.value)) if other != name
                    for b in scope.level_bindings(tree.body, other) if isinstance(b.node, ast.Import | ast.ImportFrom)]
        aliases = [t.id for t in stmt.targets if isinstance(t, ast.Name) and t.id != name]
        if imported and aliases:
            (other, first), alias = imported[0], aliases[0]
            out.append(f"{rel}:{stmt.lineno}: {alias} is bound to `{ast.unparse(stmt.value)}`, and {other} is "
                       f"bound in {scope.label(first.path)} by {first.describe()} (line {first.line}): when the "
                       f"import runs, callers of {alias} do not reach {name} (verify shows which runs)")
    return out


def _choices(value: ast.expr) -> list[str]:
    """The names an expression may evaluate to: a name, either side of ``or``, either branch of ``if``."""
    if isinstance(value, ast.Name):
        return [value.id]
    if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.Or):
        return [n for part in value.values for n in _choices(part)]
    if isinstance(value, ast.IfExp):
        return _choices(value.body) + _choices(value.orelse)
    return []


def _imports_from(node: ast.stmt, package: str, module: str) -> bool:
    if not isinstance(node, ast.ImportFrom):
        return False
    base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
    source = ".".join([*base, *(node.module.split(".") if node.module else [])])
    return source == module
