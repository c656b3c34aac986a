"""What a snippet package offers, read statically: exported functions and their signatures.

A package's ``__init__.py`` defines or re-exports (``from .mod import name``) its hooks. Reading them with
``ast`` instead of importing keeps ``validate`` free of the package's runtime dependencies. The compiler
reads no file itself: the package's files come through the ``PackageSource`` it is given.
"""
from __future__ import annotations

import ast
import functools
import inspect
from pathlib import Path
from typing import Protocol, cast

import libcst as cst

from patchspec.errors import PatchspecError


class SnippetError(PatchspecError):
    """A snippet package that cannot be read: a syntax error, or a ``USES`` table that is not a literal."""

    def __init__(self, message: str, path: Path, line: int | None) -> None:
        super().__init__(message, file=str(path), line=line)
        self.path = path


class PackageSource(Protocol):
    """A snippet package's files, as the compiler reads them."""

    @property
    def root(self) -> Path:                 # the package's directory
        ...

    def read(self, path: Path) -> str:      # a file's text (OSError, UnicodeDecodeError as reading raises)
        ...

    def is_file(self, path: Path) -> bool:
        ...

    def files(self) -> list[Path]:          # every ``.py`` file of the package, sorted
        ...


@functools.lru_cache(maxsize=256)
def parse_source(source: str | bytes, filename: str) -> ast.Module:
    """``ast.parse``, once per text: a verb reads the snippet package's files for its exports, its ``USES``
    and its imports. The tree is shared: read it, never change it."""
    return ast.parse(source, filename)


def _parse(source: PackageSource, path: Path) -> ast.Module:
    try:
        return parse_source(source.read(path), str(path))
    except SyntaxError as exc:
        raise SnippetError(f"not valid Python: {exc.msg}", path, exc.lineno) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SnippetError(f"cannot read: {exc}", path, None) from None


def exports(source: PackageSource) -> dict[str, inspect.Signature]:
    init = source.root / "__init__.py"
    found: dict[str, inspect.Signature] = {}
    for stmt in _parse(source, init).body:
        if isinstance(stmt, ast.FunctionDef):
            found[stmt.name] = signature(stmt)
        elif isinstance(stmt, ast.ImportFrom) and stmt.level == 1 and stmt.module:
            module = source.root / (stmt.module.replace(".", "/") + ".py")
            defs = _module_defs(source, module)
            for alias in stmt.names:
                if alias.name in defs:
                    found[alias.asname or alias.name] = defs[alias.name]
    return found


def _module_defs(source: PackageSource, path: Path) -> dict[str, inspect.Signature]:
    if not source.is_file(path):
        return {}
    tree = _parse(source, path)
    return {n.name: signature(n) for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> inspect.Signature:
    """The signature of a function read from source: names, kinds, and whether a default exists."""
    a = node.args
    params = []
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for index, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
        kind = inspect.Parameter.POSITIONAL_ONLY if index < len(a.posonlyargs) \
            else inspect.Parameter.POSITIONAL_OR_KEYWORD
        params.append(inspect.Parameter(arg.arg, kind, default=inspect.Parameter.empty if default is None else ...))
    if a.vararg:
        params.append(inspect.Parameter(a.vararg.arg, inspect.Parameter.VAR_POSITIONAL))
    for arg, default in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        params.append(inspect.Parameter(arg.arg, inspect.Parameter.KEYWORD_ONLY,
                                        default=inspect.Parameter.empty if default is None else ...))
    if a.kwarg:
        params.append(inspect.Parameter(a.kwarg.arg, inspect.Parameter.VAR_KEYWORD))
    return inspect.Signature(params)


def declared_uses(source: PackageSource) -> dict[str, list[str]]:
    """The package's ``USES`` tables merged: root-relative file → what its hooks need there (see
    ``compiler.bindings``). A module declares it as a literal ``USES = {...}`` at module level."""
    merged: dict[str, list[str]] = {}
    for path in source.files():
        for stmt in _parse(source, path).body:
            if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == "USES"):
                for rel, entries in _uses_table(stmt, path).items():
                    merged.setdefault(rel, []).extend(entries)
    return merged


def _uses_table(stmt: ast.Assign, path: Path) -> dict[str, list[str]]:
    """``USES = {"file.py": ["entry", ...]}``, each entry a Python expression (see ``compiler.bindings``)."""
    try:
        table = ast.literal_eval(stmt.value)
    except ValueError:
        table = None
    ok = isinstance(table, dict) and all(
        isinstance(rel, str) and isinstance(entries, list) and all(isinstance(e, str) for e in entries)
        for rel, entries in table.items())
    if not ok:
        raise SnippetError("USES must be a literal dict of file path -> list of strings", path, stmt.lineno)
    for entries in table.values():
        for entry in entries:
            try:
                ast.parse(entry, mode="eval")
            except SyntaxError:
                raise SnippetError(f"USES entry {entry!r} is not a Python expression", path, stmt.lineno) from None
    return cast(dict[str, list[str]], table)   # its shape is checked above


def hook_uses(node: cst.CSTNode, alias: str) -> list[tuple[str, cst.Call | None]]:
    """Every ``alias.name`` the code refers to, with the call around it when it is called."""
    uses: list[tuple[str, cst.Call | None]] = []

    class Visitor(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            name = _hook_name(call.func, alias)
            if name:
                uses.append((name, call))

        def visit_Attribute(self, attr: cst.Attribute) -> None:
            name = _hook_name(attr, alias)
            if name and not any(u[1] is not None and u[1].func is attr for u in uses):
                uses.append((name, None))

    node.visit(Visitor())
    return uses


def _hook_name(node: cst.CSTNode, alias: str) -> str | None:
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == alias:
        return node.attr.value
    return None


def binding_problem(signature: inspect.Signature, call: cst.Call) -> str | None:
    """Why the call's arguments would not bind to the signature, or None when they would."""
    if any(arg.star for arg in call.args):
        return None  # *args / **kwargs: cannot tell statically
    positional = [object() for arg in call.args if arg.keyword is None]
    keywords = {arg.keyword.value: object() for arg in call.args if arg.keyword is not None}
    try:
        signature.bind(*positional, **keywords)
    except TypeError as exc:
        return str(exc)
    return None


def method_problem(signature: inspect.Signature) -> str | None:
    """Why a function bound as a method could not receive the instance as its first argument."""
    first = next(iter(signature.parameters.values()), None)
    if first is None or first.kind not in (inspect.Parameter.POSITIONAL_ONLY,
                                           inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                           inspect.Parameter.VAR_POSITIONAL):
        return "used as a method, its first parameter must take the instance (self)"
    return None
