"""The binding check: what a snippet module declares in ``USES`` exists in a release's sources.

``USES`` maps a file (relative to the root) to entries written as Python:

- ``Class.method(a, b, k=None)``: the method exists in the class or a base class defined in the same file,
  and a call with that many positional arguments and those keywords binds to its parameters;
- ``Class(a)``: the class exists and its ``__init__`` takes those arguments;
- ``Class.attribute``: the class (or a same-file base) has it: a method, a class-level name,
  ``self.attribute`` assigned in one of its methods, or ``Class.attribute = ...`` at module level;
- ``function(a, b)``: a module-level function that takes them, or a name the module imports (its
  signature is then another package's and is not checked here);
- ``name``: anything bound at module level.

The other direction (the names inserted code passes to the hooks are bound where it lands) is
``compiler.lint``'s.
"""
from __future__ import annotations

import ast
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING

from patchspec.compiler import scope
from patchspec.compiler.snippet_api import signature
from patchspec.compiler.transforms import KINDS

if TYPE_CHECKING:
    from patchspec.model import Spec


def spec_binds(spec: Spec) -> dict[str, set[str]]:
    """What the spec's own transforms bind, by file: module-level names (``name``) and class members
    (``Class.name``), the ``Binds`` of each kind; a snippet may use them (``USES``) like the file's own."""
    out: dict[str, set[str]] = {}
    for target in spec.targets:
        for transform in target.transforms:
            binds = KINDS[transform.kind].binds(transform.params)
            out.setdefault(target.file, set()).update(
                binds.module | {f"{target.function}.{name}" for name in binds.member})
    return out


def problems(uses: dict[str, list[str]], tree_of: Callable[[str], ast.Module | None],
             added: dict[str, set[str]] | None = None) -> list[str]:
    """Every entry of ``uses`` that the sources do not honour; ``tree_of(rel)`` gives a file's ``ast``
    (None for a missing file), so that a caller that parsed the file already does not parse it again;
    ``added`` is what the spec binds itself (``spec_binds``)."""
    found = []
    for rel, entries in uses.items():
        checked = check(entries, tree_of(rel), (added or {}).get(rel, set()))
        if checked is None:
            found.append(f"{rel}: missing")
            continue
        found += [f"{rel}: {entry}: {p}" for entry, p in checked if p]
    return found


def check(entries: list[str], tree: ast.Module | None,
          added: AbstractSet[str] = frozenset()) -> list[tuple[str, str | None]] | None:
    """Each entry with what the module lacks for it (None: it holds); None for a missing file. A name
    in ``added`` (the spec binds it: ``spec_binds``) holds."""
    if tree is None:
        return None
    module = _Module(tree)
    return [(entry, None if _named(entry) in added else module.problem(entry)) for entry in entries]


def _named(entry: str) -> str:
    """``Class.attr`` or ``name`` of an entry, its call left out."""
    expr = ast.parse(entry, mode="eval").body
    return ast.unparse(expr.func if isinstance(expr, ast.Call) else expr)


def is_mismatch(problem: str) -> bool:
    """The name is there but the call does not bind to its signature (else: the name is missing)."""
    return problem.startswith(NOT_BINDING)


NOT_BINDING = "does not bind to"


def tree_reader(read: Callable[[str], str | None]) -> Callable[[str], ast.Module | None]:
    """``tree_of`` for ``problems`` from a reader of text."""
    def tree_of(rel: str) -> ast.Module | None:
        text = read(rel)
        return None if text is None else ast.parse(text, rel)
    return tree_of


class _Module:

    def __init__(self, tree: ast.Module):
        """The module's bindings as ``compiler.scope`` reads them: its top level (its ``if``/``try``
        blocks too), the last binding of a name winning; and each class's module-level ``Class.attr``."""
        self.tree = tree
        self.defs: dict[str, ast.AST] = {}
        self.imported: set[str] = set()
        for node in scope.level_statements(tree.body):
            names = scope.statement_binds(node)
            if isinstance(node, ast.Import | ast.ImportFrom):
                self.imported |= names
                for name in names:
                    self.defs.pop(name, None)
            else:
                self.defs.update(dict.fromkeys(names, node))
                self.imported -= names

    def problem(self, entry: str) -> str | None:
        expr = ast.parse(entry, mode="eval").body
        call = expr if isinstance(expr, ast.Call) else None
        ref = call.func if call else expr
        if isinstance(ref, ast.Name):
            return self._module_name(ref.id, call)
        if isinstance(ref, ast.Attribute) and isinstance(ref.value, ast.Name):
            cls = self.defs.get(ref.value.id)
            if not isinstance(cls, ast.ClassDef):
                return f"no class {ref.value.id}"
            return self._member(cls, ref.attr, call)
        return "not an entry this check understands"

    def _module_name(self, name: str, call: ast.Call | None) -> str | None:
        node = self.defs.get(name)
        if node is None:
            return None if name in self.imported else f"{name} is not defined or imported"
        if call is None:
            return None
        if isinstance(node, ast.ClassDef):
            init = self._lookup(node, "__init__")
            return _binding(init, call, method=True) if isinstance(init, ast.FunctionDef) else None
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return _binding(node, call, method=False)
        return None

    def _member(self, cls: ast.ClassDef, name: str, call: ast.Call | None) -> str | None:
        found = self._lookup(cls, name)
        if found is None:
            return f"{cls.name} has no {name}"
        if call is not None and isinstance(found, ast.FunctionDef | ast.AsyncFunctionDef):
            static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in found.decorator_list)
            return _binding(found, call, method=not static)
        return None

    def _lookup(self, cls: ast.ClassDef, name: str) -> ast.AST | None:
        """A member of ``cls`` or of its bases defined in this module, in method resolution order."""
        for klass in self._mro(cls):
            for node in klass.body:
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
                    return node
                if isinstance(node, ast.Assign | ast.AnnAssign):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                        return node
            for sub in ast.walk(klass):
                if (isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store) and sub.attr == name
                        and isinstance(sub.value, ast.Name) and sub.value.id == "self"):
                    return sub
            if klass in self.tree.body:
                for attr, stmt, _value in scope.attribute_assignments(self.tree, klass.name):
                    if attr == name:
                        return stmt
        return None

    def _mro(self, cls: ast.ClassDef) -> list[ast.ClassDef]:
        order = [cls]
        for base in cls.bases:
            if isinstance(base, ast.Name) and isinstance(found := self.defs.get(base.id), ast.ClassDef):
                order += [c for c in self._mro(found) if c not in order]
        return order


def _binding(func: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call, method: bool) -> str | None:
    sig = signature(func)
    if method:
        sig = sig.replace(parameters=list(sig.parameters.values())[1:])
    positional = [None] * sum(1 for a in call.args if not isinstance(a, ast.Starred))
    keywords = {k.arg: None for k in call.keywords if k.arg is not None}
    try:
        sig.bind(*positional, **keywords)
    except TypeError as exc:
        return f"{NOT_BINDING} {func.name}{sig}: {exc}"
    return None
