"""Snippet packages: checking that a spec calls them correctly, and the files installed into a root."""
from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import libcst as cst

from patchspec.compiler import pattern, snippet_api
from patchspec.compiler.kind import Hook
from patchspec.compiler.plan import RUNTIME_PACKAGE
from patchspec.compiler.source import SourceFile
from patchspec.compiler.transforms import KINDS
from patchspec.errors import PatchspecError
from patchspec.install.root import Root
from patchspec.model import Spec

T = TypeVar("T")

RUNTIME_INIT = f"{RUNTIME_PACKAGE}/__init__.py"
RUNTIME_INIT_TEXT = b'"""Runtime snippets installed by patchspec; removed by `patchspec unapply`."""\n'


def package_dir(spec: Spec) -> Path:
    """The spec's snippet package: under ``snippets.path`` (relative to the spec), else under
    ``runtime_snippets/`` beside the spec or beside its parent directory (a repository's specs/ folder)."""
    package = spec.snippet_package
    if package is None:
        raise PatchspecError("the spec has no snippet package (no `snippets:`)", file=spec.path)
    here = Path(spec.path).resolve().parent
    bases = ([here / spec.snippet_dir] if spec.snippet_dir
             else [here / "runtime_snippets", here.parent / "runtime_snippets"])
    for base in bases:
        if (base / package / "__init__.py").is_file():
            return base / package
    tried = " or ".join(str(b / package / "__init__.py") for b in bases)
    where = spec.snippets_loc
    raise PatchspecError(f"snippet package {package!r} not found: no {tried}", file=spec.path,
                         line=where.line if where else None, col=where.col if where else None)


@dataclass(frozen=True)
class PackageFiles:
    """A snippet package on disk, as the compiler reads it (``snippet_api.PackageSource``)."""

    root: Path

    def read(self, path: Path) -> str:
        return path.read_text(encoding="utf-8")

    def is_file(self, path: Path) -> bool:
        return path.is_file()

    def files(self) -> list[Path]:
        return sorted(self.root.rglob("*.py"))


def read_package(read: Callable[[snippet_api.PackageSource], dict[str, T]], spec: Spec) -> dict[str, T]:
    """``snippet_api.exports`` or ``declared_uses`` of the spec's package; a broken package is a user error."""
    if spec.snippet_package is None:
        return {}
    try:
        return read(PackageFiles(package_dir(spec)))
    except snippet_api.SnippetError as exc:
        raise PatchspecError(f"snippet package {spec.snippet_package}: {exc.message}", file=str(exc.path),
                             line=exc.line) from None


def validate(spec: Spec) -> None:
    """Every hook a transform names is exported by the snippet package, its arguments bind, and its
    signature fits its use (a decorator takes the one function; a method's first parameter the instance);
    the alias is a name, not a keyword, since the spec loaded (``spec.build_spec``)."""
    if spec.snippet_package is None or spec.alias is None:   # the schema asks for both or neither
        _no_hooks(spec)
        return
    exported = read_package(snippet_api.exports, spec)
    for target in spec.targets:
        for t in target.transforms:
            kind = KINDS[t.kind]
            for key, value in t.params.items():
                node: cst.CSTNode
                if key == kind.hook_key:
                    node = cst.parse_expression(f"{spec.alias}.{value}(_)" if kind.hook is Hook.DECORATOR
                                                else f"{spec.alias}.{value}")
                elif key in kind.code_keys:
                    node = pattern.parse(value, kind.code_keys[key])
                else:
                    continue
                where = t.at(key)
                for name, call in snippet_api.hook_uses(node, spec.alias):
                    if name not in exported:
                        raise PatchspecError(
                            f"{target.id} transform {t.index} ({t.kind}): {spec.alias}.{name} is not "
                            f"exported by {package_dir(spec) / '__init__.py'}",
                            file=where.file, line=where.line, col=where.col)
                    problem = call is not None and snippet_api.binding_problem(exported[name], call)
                    if not problem and key == kind.hook_key and kind.hook is Hook.METHOD:
                        problem = snippet_api.method_problem(exported[name])
                    if problem:
                        raise PatchspecError(
                            f"{target.id} transform {t.index} ({t.kind}): {spec.alias}.{name}"
                            f"{exported[name]}: {problem}", file=where.file, line=where.line, col=where.col)


def _no_hooks(spec: Spec) -> None:
    """A spec without ``snippets:`` names no hook."""
    for target in spec.targets:
        for t in target.transforms:
            key = KINDS[t.kind].hook_key
            if key in t.params:
                where = t.at(key)
                raise PatchspecError(f"{target.id} transform {t.index} ({t.kind}) names a hook, so the spec needs "
                                     f"`snippets:` (package and alias)", file=where.file, line=where.line,
                                     col=where.col)


def install_files(spec: Spec) -> dict[str, bytes]:
    """Root-relative path → bytes of every file the spec's runtime needs in the patched root."""
    if spec.snippet_package is None:
        return {}
    base = package_dir(spec)
    files = {RUNTIME_INIT: RUNTIME_INIT_TEXT}
    for path in sorted(base.rglob("*.py")):
        rel = path.relative_to(base).as_posix()
        files[f"{RUNTIME_PACKAGE}/{spec.snippet_package}/{rel}"] = path.read_bytes()
    return files


def imports(spec: Spec) -> list[tuple[str, str, int]]:
    """``(module, file, line)`` of every import the snippet package runs when it is imported: the
    unconditional module-level ones of each file (not under ``if``/``try``, where an import may be
    optional, nor in functions, which run only when called); relative ones named absolutely."""
    if spec.snippet_package is None:
        return []
    base = package_dir(spec)
    out = []
    for path in sorted(base.rglob("*.py")):
        rel = path.relative_to(base)
        package = [RUNTIME_PACKAGE, spec.snippet_package, *rel.parent.parts]
        try:
            tree = snippet_api.parse_source(path.read_bytes(), str(path))
        except SyntaxError as exc:
            raise PatchspecError(f"snippet file is not valid Python: {exc.msg}", file=str(path),
                                 line=exc.lineno) from None
        for stmt in tree.body:
            if isinstance(stmt, ast.Import):
                out += [(a.name, str(path), stmt.lineno) for a in stmt.names]
            elif isinstance(stmt, ast.ImportFrom) and stmt.module != "__future__":
                if stmt.level:
                    anchor = ".".join(package[:len(package) - stmt.level + 1])
                    out.append((f"{anchor}.{stmt.module}" if stmt.module else anchor, str(path), stmt.lineno))
                elif stmt.module:   # an absolute import names its module
                    out.append((stmt.module, str(path), stmt.lineno))
    return out


def package_requires(spec: Spec, sources: Mapping[str, SourceFile]) -> set[str]:
    """Top-level modules the files the spec patches import unconditionally at module level: the package
    already needs them, so a snippet importing one adds no failure that importing the package would not
    have (vLLM's files import torch; a root holding only vLLM's files has no torch either). ``sources``:
    the plan's files as it parsed them (their pristine text)."""
    names: set[str] = set()
    for rel in sorted({t.file for t in spec.targets} & set(sources)):
        for stmt in sources[rel].tree.body:
            if isinstance(stmt, ast.Import):
                names.update(a.name.split(".")[0] for a in stmt.names)
            elif isinstance(stmt, ast.ImportFrom) and not stmt.level and stmt.module:
                names.add(stmt.module.split(".")[0])
    return names


def unresolved_imports(spec: Spec, root: Root, find_missing,
                       sources: Mapping[str, SourceFile]) -> list[tuple[str, str, int]]:
    """The imports of ``imports`` that resolve neither in the root (with the snippet package installed
    in it) nor through ``find_missing`` (top-level names -> those the root's interpreter cannot find),
    leaving out those the patched files import themselves (``package_requires``)."""
    own = f"{RUNTIME_PACKAGE}.{spec.snippet_package}"
    outside, missing = [], []
    for module, file, line in imports(spec):
        top, *rest = module.split(".")
        if top == RUNTIME_PACKAGE:
            mine = module == own or module.startswith(own + ".")
            if not mine or not _module_in(package_dir(spec), module.split(".")[2:]):
                missing.append((module, file, line))
        elif root.has_package(top):
            if not _module_in(root.path / top, rest):
                missing.append((module, file, line))
        else:
            outside.append((module, file, line))
    gone = set(find_missing(sorted({m.split(".")[0] for m, _, _ in outside}))) if outside else set()
    if gone:
        gone -= package_requires(spec, sources)
    return sorted(missing + [i for i in outside if i[0].split(".")[0] in gone], key=lambda i: (i[1], i[2]))


def _module_in(base: Path, parts: list[str]) -> bool:
    """Whether dotted ``parts`` under package directory ``base`` name a module or package."""
    if not parts:
        return base.is_dir() or base.with_suffix(".py").is_file()
    path = base.joinpath(*parts)
    return (path / "__init__.py").is_file() or path.with_suffix(".py").is_file() or path.is_dir()


def check_imports(spec: Spec, root: Root, find_missing, sources: Mapping[str, SourceFile]) -> None:
    """Refuse, in one line, a snippet package whose import would fail in the patched root."""
    missing = unresolved_imports(spec, root, find_missing, sources)
    if missing:
        module, file, line = missing[0]
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        where = getattr(find_missing, "where", "its interpreter")
        raise PatchspecError(f"snippet package {spec.snippet_package} imports {module}, which is neither under "
                             f"the root nor installed for {where}{more}: importing any patched module "
                             "would fail; install it or drop the import; nothing was written", file=file, line=line)
