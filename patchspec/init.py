"""``patchspec init``: a new spec that applies as it stands, so that init, edit, apply is the whole start.

From a root (or a release fetched from PyPI) and the functions to patch, it writes:

- ``NAME.yaml``: one target per function, each wrapped by a hook of the snippet package;
- ``runtime_snippets/<package>/__init__.py``: the hooks (each calls the original until you edit it) and
  an empty ``USES`` table for what they will rely on, which ``check`` verifies on every release;
- ``tests/test_<package>.py``: a test of the hooks that runs without the patched package;
- ``releases/<release>.yaml``: the first release profile, drafted by ``profile new``.

Nothing is written when any file exists already or a function is not found.
"""
from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from patchspec.compiler.scope import ACCESSORS
from patchspec.compiler.source import SourceError, SourceFile
from patchspec.errors import PatchspecError
from patchspec.install import installed, shadowed
from patchspec.install.root import Root
from patchspec.model import package_of
from patchspec.releases.new_profile import new_profile
from patchspec.releases.profiles import profile_path


@dataclass(frozen=True)
class Hooked:
    file: str
    function: str
    whole: bool = False   # the hook named by the whole qualified name: the short one is another target's

    @property
    def hook(self) -> str:
        parts = self.function.split(".")
        named = parts if self.whole else parts[-2:] if len(parts) > 1 and parts[-1] in ACCESSORS else parts[-1:]
        return "wrap_" + "_".join(re.sub(r"\W", "_", p).strip("_") for p in named).lower()   # host_setter

    @property
    def target_id(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.function.lower()).strip("-")


def parse_target(text: str, root: Root) -> Hooked:
    """``FILE.py:Qualified.name``, its file by its canonical path under the root (refused when it leaves it)."""
    file, sep, function = text.partition(":")
    if not sep or not file.endswith(".py") or not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", function):
        raise PatchspecError(f"--target {text!r}: expected FILE.py:Qualified.name, e.g. "
                             "requests/sessions.py:Session.send")
    return Hooked(root.canonical(file, "--target"), function)


def scaffold(name: str, root_path: str, targets: list[str], directory: str) -> tuple[list[Path], list[str]]:
    """Write the spec, its snippet package, a test and the first profile; return what was written, and
    the warnings of a target whose source Python may not run (``install.shadowed``)."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", name):
        raise PatchspecError(f"spec name {name!r}: use lower-case letters, digits and dashes")
    root = Root.open(root_path)
    hooked = _distinct_hooks([parse_target(t, root) for t in targets])
    for item in hooked:
        _check_defined(root, item)
    package = name.replace("-", "_")
    out = Path(directory)
    found = installed.scan(root.path)
    packages = sorted({package_of(h.file) for h in hooked})
    first = next((found[p] for p in packages if p in found), None)
    if first is None:
        raise PatchspecError(f"no installed version found under the root for {', '.join(packages)}",
                             file=str(root.path))
    release = f"{first.distribution or first.package}-{first.version}"
    profile = profile_path(out / "releases", release, f"the first profile's name (from {first.source})")
    files = {
        out / f"{name}.yaml": _spec_text(name, package, hooked),
        out / "runtime_snippets" / package / "__init__.py": _snippets_text(name, hooked),
        out / "tests" / f"test_{package}.py": _test_text(package, hooked),
    }
    existing = [str(p) for p in [*files, profile] if p.exists()]
    if existing:
        raise PatchspecError(f"{existing[0]} exists; nothing was written", file=existing[0])
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    try:
        draft = new_profile(release, str(root.path), [str(out / f"{name}.yaml")])
    except BaseException:
        for path in files:
            path.unlink()
        raise
    read = root.read_text
    warned = [w for item in hooked for w in shadowed.warnings(root, item.file, item.function, read)]
    if draft.text is None:   # the profile draft needs a human: say so, never "wrote" it
        warned += [f"the first profile, {draft.path}, was not written: {need}; once the spec holds: patchspec "
                   f"profile new {release} --root {root.path} --spec {out / f'{name}.yaml'}" for need in draft.needs]
        return list(files), list(dict.fromkeys(warned))
    return [*files, draft.path], list(dict.fromkeys(warned))


def _distinct_hooks(hooked: list[Hooked]) -> list[Hooked]:
    """Each target its own hook: two ``__call__`` targets would define one ``wrap_call`` twice, and an edit
    of the first would do nothing (the second definition wins)."""
    short = [h.hook for h in hooked]
    return [Hooked(h.file, h.function, whole=True) if short.count(h.hook) > 1 else h for h in hooked]


def _check_defined(root: Root, item: Hooked) -> None:
    text = root.read_text(item.file)
    if text is None:
        raise PatchspecError(f"--target: {item.file} does not exist under the root", file=str(root.path))
    source = SourceFile(item.file, text)
    try:
        node = source.find(item.function)
    except SourceError as exc:
        raise PatchspecError(str(exc), file=str(root.path / item.file)) from None
    if node is None:
        close = difflib.get_close_matches(item.function, [q for q, _ in source.definitions()], n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise PatchspecError(f"--target: {item.function} is not defined in {item.file}{hint}",
                             file=str(root.path / item.file))
    if isinstance(node, ast.ClassDef):   # a wrap of a class is refused: init drafts wraps only
        methods = [n.name for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        example = f" (e.g. {item.function}.{methods[0]})" if methods else ""
        raise PatchspecError(f"--target: {item.function} is a class, and init drafts a wrap of each target: name "
                             f"a method of it{example}, or add add_method/add_attribute to the spec by hand; "
                             "nothing was written", file=str(root.path / item.file))


def _spec_text(name: str, package: str, hooked: list[Hooked]) -> str:
    data = {
        "spec": 1,
        "name": name,
        "summary": f"TODO: one line on what {name} fixes.",
        "snippets": {"package": package, "alias": "_" + package},
        "targets": [{"id": h.target_id, "file": h.file, "function": h.function,
                     "transforms": [{"wrap": {"with": h.hook}}]} for h in hooked],
    }
    return ("# Drafted by patchspec init. Each target wraps one function with a hook of the snippet package;\n"
            "# see the spec language (insert_before, insert_after, loop_guard, ...) for finer edits.\n"
            + yaml.safe_dump(data, sort_keys=False, width=110))


def _snippets_text(name: str, hooked: list[Hooked]) -> str:
    hooks = "\n\n".join(f'''def {h.hook}(original):
    """Wraps ``{h.function}`` of ``{h.file}``; calls it unchanged until you edit this."""
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        return original(*args, **kwargs)
    return wrapper''' for h in hooked)
    return f'''"""The runtime of the {name} spec: what the patched files call. Imports nothing from patchspec."""
from __future__ import annotations

import functools

# What the hooks rely on in the patched package, checked by `patchspec check` on every release, e.g.
# {{"{hooked[0].file}": ["{hooked[0].function}(a, b)", "SomeClass.attribute"]}}.
USES: dict[str, list[str]] = {{}}


{hooks}
'''


def _test_text(package: str, hooked: list[Hooked]) -> str:
    checks = "\n".join(f'''

def test_{h.hook}_calls_the_original():
    def original(*args, **kwargs):
        return args, kwargs

    assert {package}.{h.hook}(original)(1, key=2) == ((1,), {{"key": 2}})''' for h in hooked)
    return f'''"""Tests of the hooks alone; run with pytest from the spec's directory."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "runtime_snippets"))

import {package}  # noqa: E402
{checks}
'''
