"""Inserted code checked like a linter before anything is written.

Each emitted file is compiled (a syntax error, a ``break`` outside a loop or an ``await`` outside an async
function anywhere in it is refused); each inserted fragment must read only names bound where it lands
(the spec's alias, builtins, the target's parameters and locals assigned before the anchor, the module's
globals and imports); a ``yield`` must not turn a plain function into a generator; the alias must not
shadow a name the file or the target binds, and two specs must not share an alias for different packages
in one file. Only the patched definitions are walked, never the whole file, so apply stays fast.
"""
from __future__ import annotations

import ast
import builtins
import difflib
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import libcst as cst

from patchspec.compiler import scope
from patchspec.compiler.edits import LineEdit, NodeEdit, Resolved
from patchspec.compiler.source import SourceFile, split_lines
from patchspec.model import MARKER, Loc

if TYPE_CHECKING:
    from patchspec.compiler.context import Definition
    from patchspec.compiler.kind import Binds
    from patchspec.model import Spec

BUILTINS = frozenset(dir(builtins)) | {"__file__", "__name__", "__doc__", "__spec__", "__package__",
                                       "__loader__", "__builtins__", "__path__"}


@dataclass(frozen=True)
class Problem:
    """One refusal: what is wrong, the spec transform it comes from, and the source line."""

    spec: str
    text: str
    where: Loc | None
    file: str
    line: int | None

    def __str__(self) -> str:
        return f"{self.file}: {self.text}"


def _free_names(tree: ast.AST) -> list[ast.Name]:
    """Names a fragment reads that it does not bind itself (lambda parameters, comprehension targets,
    walrus targets and loop variables of the fragment count as bound)."""
    bound = {a.arg for n in ast.walk(tree) if isinstance(n, ast.Lambda) for a in ast.walk(n.args)
             if isinstance(a, ast.arg)}
    bound |= {name for n in ast.walk(tree) for name in scope.bound_by(n)}   # an ``except E as err`` too
    return [n for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            and n.id not in bound]


def check_aliases(source: SourceFile, specs: list[Spec], locs: dict[str, Loc | None]) -> list[Problem]:
    """Each spec's alias is new to the file, and no two specs use one alias for different packages."""
    found = []
    names = scope.module_names(source.tree) or frozenset()
    by_alias: dict[str, Spec] = {}
    for spec in specs:
        if spec.alias is None:   # no snippets: nothing imported
            continue
        if spec.alias in names:
            found.append(Problem(spec.name, f"the snippet alias {spec.alias} would shadow {spec.alias}, which "
                                 f"{source.path} binds at module level; choose another alias", locs[spec.name],
                                 source.path, None))
        other = by_alias.setdefault(spec.alias, spec)
        if other.snippet_package != spec.snippet_package:
            found.append(Problem(spec.name, f"specs {other.name} and {spec.name} both use the alias {spec.alias} "
                                 f"in {source.path}, for different packages ({other.snippet_package}, "
                                 f"{spec.snippet_package})", locs[spec.name], source.path, None))
    return found


def compile_problem(path: str, text: str, rows: list[Resolved]) -> Problem | None:
    """The emitted file does not compile: pinned on the transform whose marker is on the failing line."""
    try:
        compile(text, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        bad = split_lines(text)[exc.lineno - 1] if exc.lineno else ""
        row = next((r for r in rows if r.edits and f"{MARKER}{r.spec}" in bad and _code_of(r) in bad),
                   next((r for r in rows if r.edits and f"{MARKER}{r.spec}" in bad), rows[0]))
        return Problem(row.spec, f"the patched file would not compile: {exc.msg} (patched line {exc.lineno}: "
                       f"{bad.strip()!r})", row.spec_loc, path, row.line)
    return None


def removed_name_reads(source: SourceFile, text: str, rows: list[Resolved]) -> list[Problem]:
    """A module-level name that a rewrite of its own statement removed (``Resolved.binding``) and the patched
    file still reads: it would raise NameError there. Names bound anywhere else in the file (a local of that
    name) are left alone, so that this never refuses what could run."""
    removers = [r for r in rows if r.binding and r.edits and "." not in r.function]
    if not removers:
        return []
    try:
        tree = ast.parse(text)
    except SyntaxError:   # the compile check reports it
        return []
    before, after = scope.module_names(source.tree), scope.module_names(tree)
    if before is None or after is None:
        return []
    gone = before - after
    bound = {n for node in ast.walk(tree) for n in scope.bound_by(node)}
    bound |= {node.arg for node in ast.walk(tree) if isinstance(node, ast.arg)}
    reads = sorted((n.lineno, n.id) for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                   and n.id in gone and n.id not in bound)
    found = []
    for line, name in reads:
        row = next((r for r in removers if r.function == name), removers[0])
        found.append(Problem(row.spec, f"the patched file still reads {name} at line {line}, which {row.target}#"
                             f"{row.index} removes at module level: NameError there; rewrite that line too",
                             row.spec_loc, source.path, row.line))
    return found


def _code_of(row: Resolved) -> str:
    edit = row.edits[0]
    text = edit.text if isinstance(edit, LineEdit) else cst.Module(body=[]).code_for_node(edit.new)
    return text.split("#")[0].strip()


def unbound_problems(rows: list[tuple[Resolved, Binds]], definitions: dict[tuple[str, str], Definition],
                     sources: dict[str, SourceFile], alias: str | None) -> list[tuple[Resolved, str]]:
    """``(row, what is wrong)`` for the resolved rows of ONE spec whose inserted code would fail where it
    lands: a name bound neither there nor by the spec itself (see ``Binds``: its own ``add_import``, a
    statement it inserts earlier in the same function, a member it adds), a ``yield`` that would turn a
    plain function into a generator, an alias shadowed by a local. Run at resolve time, so that every
    verb (check, compile, apply, drift, profile new) gives this one verdict."""
    ok = [r for r, _binds in rows if r.ok and r.edits]
    binds = {id(r): b for r, b in rows}
    module_cache: dict[str, frozenset[str] | None] = {}
    found: list[tuple[Resolved, str]] = []
    for row in ok:
        definition = definitions.get(row.key)
        if definition is None:
            continue
        if row.file not in module_cache:
            names = scope.module_names(sources[row.file].tree)
            spec_binds = {n for r in ok if r.file == row.file for n in binds[id(r)].module}
            spec_binds |= {n for r in ok if r.file == row.file and r.own and "." not in r.function   # a module-
                           for n in binds[id(r)].here}                                  # level statement rewritten
            module_cache[row.file] = None if names is None else names | spec_binds
        earlier = [(r, binds[id(r)]) for r in ok if r is not row and r.file == row.file]
        own: set[str] = set()   # names the row's own earlier statements bind (a replacement's lines)
        for edit in row.edits:
            fragment = _fragment_ast(edit)
            if fragment is None:
                continue
            found += [(row, text) for text in _check_fragment(row, definition, fragment, edit,
                                                               module_cache[row.file], alias, earlier, own)]
            own |= {n for node in ast.walk(fragment) for n in scope.bound_by(node)}
    return found


def _fragment_ast(edit: NodeEdit | LineEdit) -> ast.Module | None:
    if isinstance(edit, LineEdit):
        return ast.parse(edit.text.strip())
    node = edit.action.lint(edit.new)   # the code the kind's action inserts (None: nothing to read)
    if node is None:
        return None
    text = cst.Module(body=[]).code_for_node(node).strip()
    return ast.parse(f"({text})" if isinstance(node, cst.BaseExpression) else text)   # may span lines


def _position(row: Resolved, edit: NodeEdit | LineEdit) -> tuple[int, int]:
    """Where an insertion runs, in the order of the target's lines: before its anchor, at the head of the
    loop's body, or after the anchor."""
    action = edit.action.name if isinstance(edit, NodeEdit) else "after"
    return row.line or 0, {"before": 0, "body_head": 1}.get(action, 2)


def _check_fragment(row: Resolved, definition: Definition, fragment: ast.Module, edit: NodeEdit | LineEdit,
                    module: frozenset[str] | None, alias: str | None, earlier: list[tuple[Resolved, Binds]],
                    own: set[str]) -> list[str]:
    if fragment.body and isinstance(fragment.body[0], ast.Import | ast.ImportFrom):
        return []
    target = definition.node
    known = set(BUILTINS) | own | ({alias} if alias else set())
    found = []
    if not isinstance(target, scope.SCOPES):   # a module- or class-level assignment (set): module names
        pass
    elif isinstance(target, ast.ClassDef):
        known |= scope.class_names(target, definition.source.tree)
        known |= {n for r, b in earlier if r.function == row.function for n in b.member}
    elif _sets_a_default(definition, edit):   # read where the def runs: the class body, then the module
        cls = _enclosing_class(definition.source.tree, target)
        if cls is not None:
            known |= {n for stmt in cls.body if stmt.lineno < target.lineno
                      for node in scope.walk_scope([stmt]) for n in scope.bound_by(node)}
    else:
        local = _locals_before(target, cast(int, row.line),   # a resolved row has its line
                               after=isinstance(edit, NodeEdit) and edit.action.sees_anchor)
        if alias and alias in _all_locals(target):
            found.append(f"the snippet alias {alias} is also a local name of {row.function}, which "
                         f"would shadow it there; choose another alias")
        known |= local
        here = _position(row, edit)
        known |= {n for r, b in earlier if r.function == row.function
                  for other in r.edits if _position(r, other) < here for n in b.here}
        if any(isinstance(n, ast.Yield | ast.YieldFrom) for n in ast.walk(fragment)) and not _is_generator(target):
            found.append(f"inserted code yields, which would turn {row.function} into a generator")
    for name in _free_names(fragment):
        if name.id in known or (module is None or name.id in module):
            continue
        candidates = sorted(known | (module or set()))
        close = difflib.get_close_matches(name.id, candidates, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        found.append(f"inserted code reads a name not bound before it: {row.function}:{row.line}: "
                     f"{name.id}{hint}")
    return found


def _sets_a_default(definition: Definition, edit: NodeEdit | LineEdit) -> bool:
    """Whether ``edit`` replaces a parameter's default: Python evaluates it when the ``def`` runs, in the
    scope around it, so the function's own parameters and locals are not bound there."""
    node = definition.fragment.node
    if not isinstance(edit, NodeEdit) or not isinstance(node, cst.FunctionDef):
        return False
    params = node.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    return any(p.default is edit.node for p in every)


def _enclosing_class(tree: ast.Module, func: ast.AST) -> ast.ClassDef | None:
    """The class whose body (not a nested function's) holds ``func``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(n is func for n in scope.walk_scope(node.body)):
            return node
    return None


def _locals_before(func: ast.FunctionDef | ast.AsyncFunctionDef, line: int, after: bool) -> set[str]:
    """Parameters and the names bound on lines before ``line`` (up to it, for an insertion after the
    anchor or at the head of a loop's body), nested functions' included: an anchor may sit in one."""
    params = {a.arg for a in ast.walk(func.args) if isinstance(a, ast.arg)}  # a one-line body shares their line
    return params | {name for at, name, _own in _bound_at(func) if at is not None
                     and (at < line or (after and at <= line))}


def _all_locals(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    return {name for _at, name, own in _bound_at(func) if not own}


@functools.lru_cache(maxsize=64)
def _bound_at(func: ast.AST) -> tuple[tuple[int | None, str, bool], ...]:
    """(line, name, whether the function's own name) of every name the function's nodes bind, nested
    functions' included: one walk of a target however many insertions it takes."""
    return tuple((getattr(node, "lineno", None), name, node is func) for node in ast.walk(func)
                 for name in scope.bound_by(node))


def _is_generator(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(n, ast.Yield | ast.YieldFrom) for n in scope.walk_scope(func.body))
