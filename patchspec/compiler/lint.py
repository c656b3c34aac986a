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
from dataclasses import dataclass

import libcst as cst

from patchspec.compiler.edits import LineEdit, NodeEdit
from patchspec.compiler.source import SourceFile, split_lines
from patchspec.model import Loc

BUILTINS = frozenset(dir(builtins)) | {"__file__", "__name__", "__doc__", "__spec__", "__package__",
                                       "__loader__", "__builtins__", "__path__"}
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


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


def _module_names(source: SourceFile) -> frozenset[str] | None:
    """Names the module binds at its top level (inside ``if``/``try``/``with`` blocks too); None when a
    star import makes that unknowable."""
    names: set[str] = set()
    for node in _walk_scope(source.tree.body):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return None
        names |= _bound_by(node)
    return frozenset(names)


def _walk_scope(body: list[ast.stmt]):
    """Every node of one scope: nested functions and classes are yielded, their insides are not."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, SCOPES):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _bound_by(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
        return {node.id}
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, ast.ExceptHandler) and node.name:
        return {node.name}
    if isinstance(node, ast.Global | ast.Nonlocal):
        return set(node.names)
    if isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:
        return {node.name}
    if isinstance(node, ast.arg):
        return {node.arg}
    return set()


def _free_names(tree: ast.AST) -> list[ast.Name]:
    """Names a fragment reads that it does not bind itself (lambda parameters, comprehension targets,
    walrus targets and loop variables of the fragment count as bound)."""
    bound = {a.arg for n in ast.walk(tree) if isinstance(n, ast.Lambda) for a in ast.walk(n.args)
             if isinstance(a, ast.arg)}
    bound |= {name for n in ast.walk(tree) for name in _bound_by(n)}
    return [n for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            and n.id not in bound]


def check_aliases(source: SourceFile, specs: list, locs: dict[str, Loc | None]) -> list[Problem]:
    """Each spec's alias is new to the file, and no two specs use one alias for different packages."""
    found = []
    names = _module_names(source) or frozenset()
    by_alias: dict[str, object] = {}
    for spec in specs:
        if spec.alias is None:
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


def compile_problem(path: str, text: str, rows: list) -> Problem | None:
    """The emitted file does not compile: pinned on the transform whose marker is on the failing line."""
    try:
        compile(text, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        bad = split_lines(text)[exc.lineno - 1] if exc.lineno else ""
        row = next((r for r in rows if r.edits and f"# patchspec: {r.spec}" in bad and _code_of(r) in bad),
                   next((r for r in rows if r.edits and f"# patchspec: {r.spec}" in bad), rows[0]))
        return Problem(row.spec, f"the patched file would not compile: {exc.msg} (patched line {exc.lineno}: "
                       f"{bad.strip()!r})", row.spec_loc, path, row.line)
    return None


def _code_of(row) -> str:
    edit = row.edits[0]
    text = edit.text if isinstance(edit, LineEdit) else cst.Module(body=[]).code_for_node(edit.new)
    return text.split("#")[0].strip()


def fragment_problems(source: SourceFile, definitions: dict, rows: list, alias: dict[str, str]) -> list[Problem]:
    """Names, yields and alias shadowing of every inserted fragment of one file's rows."""
    module = _module_names(source) if any(r.edits for r in rows) else frozenset()
    found = []
    for row in rows:
        definition = definitions.get((row.file, row.function))
        if definition is None:
            continue
        earlier: set[str] = set()   # names the row's earlier statements bind (a replacement's lines)
        for edit in row.edits:
            fragment = _fragment_ast(edit)
            if fragment is None:
                continue
            found += _check_fragment(row, definition.node, fragment, edit, module, alias[row.spec], earlier)
            earlier |= {n for node in ast.walk(fragment) for n in _bound_by(node)}
    return found


def _fragment_ast(edit) -> ast.AST | None:
    if isinstance(edit, LineEdit):
        return ast.parse(edit.text.strip())
    node = edit.action.lint(edit.new)
    if node is None:
        return None
    return ast.parse(_code(node))


def _code(node: cst.CSTNode) -> str:
    """A node's code as a module on its own: an expression in parentheses, so that it may span lines."""
    text = cst.Module(body=[]).code_for_node(node).strip()
    return f"({text})" if isinstance(node, cst.BaseExpression) else text


def _check_fragment(row, target: ast.AST, fragment: ast.AST, edit, module, alias: str | None,
                    earlier: set[str] = frozenset()) -> list[Problem]:
    def problem(text: str) -> Problem:
        return Problem(row.spec, text, row.spec_loc, row.file, row.line)

    if fragment.body and isinstance(fragment.body[0], ast.Import | ast.ImportFrom):
        return []
    known = set(BUILTINS) | ({alias} if alias else set()) | earlier
    found = []
    if not isinstance(target, SCOPES):
        pass   # a module- or class-level assignment: module names only
    elif isinstance(target, ast.ClassDef):
        known |= {n for stmt in target.body for node in _walk_scope([stmt]) for n in _bound_by(node)}
    else:
        local = _locals_before(target, row.line, after=isinstance(edit, NodeEdit) and edit.action.sees_anchor)
        if alias and alias in _all_locals(target):
            found.append(problem(f"the snippet alias {alias} is also a local name of {row.function}, which "
                                 f"would shadow it there; choose another alias"))
        known |= local
        if any(isinstance(n, ast.Yield | ast.YieldFrom) for n in ast.walk(fragment)) and not _is_generator(target):
            found.append(problem(f"inserted code yields, which would turn {row.function} into a generator"))
    for name in _free_names(fragment):
        if name.id in known or (module is None or name.id in module):
            continue
        candidates = sorted(known | (module or set()))
        close = difflib.get_close_matches(name.id, candidates, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        found.append(problem(f"inserted code reads a name not bound before it: {row.function}:{row.line}: "
                             f"{name.id}{hint}"))
    return found


def _locals_before(func: ast.AST, line: int, after: bool) -> set[str]:
    """Parameters and the names bound on lines before ``line`` (up to it, for an insertion after the
    anchor or at the head of a loop's body), nested functions' included: an anchor may sit in one."""
    params = {a.arg for a in ast.walk(func.args) if isinstance(a, ast.arg)}  # a one-line body shares their line
    return params | {name for node in ast.walk(func) if (at := getattr(node, "lineno", None)) is not None
                     and (at < line or (after and at <= line)) for name in _bound_by(node)}


def _all_locals(func: ast.AST) -> set[str]:
    return {name for node in ast.walk(func) if node is not func for name in _bound_by(node)}


def _is_generator(func: ast.AST) -> bool:
    return any(isinstance(n, ast.Yield | ast.YieldFrom) for n in _walk_scope(func.body))
