"""Snippet packages: checking that a spec calls them correctly, and the files installed into a root."""
from __future__ import annotations

import keyword
from pathlib import Path

import libcst as cst

from patchspec import runtime_snippets
from patchspec.compiler import pattern, snippet_api
from patchspec.compiler.plan import RUNTIME_PACKAGE
from patchspec.errors import PatchspecError
from patchspec.model import Spec

SNIPPETS_ROOT = Path(runtime_snippets.__file__).resolve().parent
RUNTIME_INIT = f"{RUNTIME_PACKAGE}/__init__.py"
RUNTIME_INIT_TEXT = b'"""Runtime snippets installed by patchspec; removed by `patchspec unapply`."""\n'


def package_dir(spec: Spec) -> Path:
    base = Path(spec.path).resolve().parent / spec.snippet_dir if spec.snippet_dir else SNIPPETS_ROOT
    path = base / spec.snippet_package
    if not (path / "__init__.py").is_file():
        raise PatchspecError(f"snippet package {spec.snippet_package!r} not found under {base}",
                             file=spec.path)
    return path


def read_package(read, spec: Spec):
    """``snippet_api.exports`` or ``declared_uses`` of the spec's package; a broken package is a user error."""
    try:
        return read(package_dir(spec))
    except snippet_api.SnippetError as exc:
        raise PatchspecError(f"snippet package {spec.snippet_package}: {exc}", file=str(exc.path),
                             line=exc.line) from None


def validate(spec: Spec) -> None:
    """The alias is a Python name, every hook a transform names is exported by the snippet package and
    its arguments bind."""
    if not spec.alias.isidentifier() or keyword.iskeyword(spec.alias):
        text = Path(spec.path).read_text(errors="replace").splitlines()
        line = next((i for i, t in enumerate(text, 1) if "alias" in t), None)
        raise PatchspecError(f"snippets alias {spec.alias!r} is not a Python name that code can import as",
                             file=spec.path, line=line)
    exported = read_package(snippet_api.exports, spec)
    for target in spec.targets:
        for t in target.transforms:
            for key, value in t.params.items():
                if key in ("with",):
                    node = cst.parse_expression(f"{spec.alias}.{value}(_)" if t.kind == "wrap"
                                                else f"{spec.alias}.{value}")
                elif key in ("code", "import"):
                    node = pattern.parse(value, "code")
                elif key == "value":
                    node = pattern.parse(value, "expression")
                else:
                    continue
                for name, call in snippet_api.hook_uses(node, spec.alias):
                    where = t.at(key)
                    if name not in exported:
                        raise PatchspecError(
                            f"{target.id} transform {t.index} ({t.kind}): {spec.alias}.{name} is not "
                            f"exported by runtime_snippets/{spec.snippet_package}",
                            file=where.file, line=where.line, col=where.col)
                    problem = call is not None and snippet_api.binding_problem(exported[name], call)
                    if problem:
                        raise PatchspecError(
                            f"{target.id} transform {t.index} ({t.kind}): {spec.alias}.{name}"
                            f"{exported[name]}: {problem}", file=where.file, line=where.line, col=where.col)


def install_files(spec: Spec) -> dict[str, bytes]:
    """Root-relative path → bytes of every file the spec's runtime needs in the patched root."""
    base = package_dir(spec)
    files = {RUNTIME_INIT: RUNTIME_INIT_TEXT}
    for path in sorted(base.rglob("*.py")):
        rel = path.relative_to(base).as_posix()
        files[f"{RUNTIME_PACKAGE}/{spec.snippet_package}/{rel}"] = path.read_bytes()
    return files
