"""One error tree: every error the compiler raises is a ``PatchspecError`` with its location, and what
reaches the command line is one line, exit 2 (check: exit 4), never an internal error (exit 3)."""
from __future__ import annotations

import ast
import importlib
import json
from pathlib import Path

import pytest

import patchspec
from patchspec.cli import main
from patchspec.compiler import edits, pattern, snippet_api, source
from patchspec.errors import PatchspecError
from tests.state.toy import SNIPS, pip_install, tree

# A class member added inside a function that another transform of the same file rewrites: the line
# insertion falls inside the rewritten definition.
SOURCE = "def target(self):\n    class Local:\n        x = 1\n    return Local\n"
SPEC = f"""spec: 1
name: inside
summary: A class member inside a rewritten definition.
snippets: {{package: demo_snips, alias: _p, path: {SNIPS}}}
targets:
  - id: member
    file: pkg/a.py
    function: target.Local
    transforms:
      - add_attribute: {{name: y, value: "2"}}
  - id: body
    file: pkg/a.py
    function: target
    transforms:
      - insert_before: {{anchor: "return Local", code: "_p.stop(self, 1)"}}
"""


@pytest.fixture
def inside(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    pip_install(root, "1.0")
    (root / "pkg" / "a.py").write_text(SOURCE)
    (tmp_path / "spec" / "releases").mkdir(parents=True)
    (tmp_path / "spec" / "releases" / "r1.yaml").write_text("release: r1\npackages: {pkg: '==1.0'}\n")
    (tmp_path / "spec" / "inside.yaml").write_text(SPEC)
    return root, str(tmp_path / "spec" / "inside.yaml")


def test_a_line_insertion_inside_a_rewritten_definition_is_one_line_not_an_internal_error(inside, capsys):
    root, spec = inside
    before = tree(root)
    assert main(["apply", spec, "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("patchspec: pkg/a.py:3: a line added after line 3"), err
    assert "nothing was written" in err and "internal error" not in err
    assert tree(root) == before


def test_check_says_the_same_insertion_is_a_conflict(inside, capsys):
    root, spec = inside
    assert main(["check", spec, "--root", str(root), "--json"]) == 4
    results = json.loads(capsys.readouterr().out)["results"]
    assert [r["detail"] for r in results if r["type"] == "conflict"] == [
        "a line added after line 3 (a class member or an import) falls inside the definition at lines 1-4 that "
        "another transform rewrites: they cannot both apply"]


@pytest.mark.parametrize("error", [edits.ResolveError, edits.ConflictError, pattern.PatternError,
                                   source.SourceError, source.TargetNotLive, source.TargetAmbiguous,
                                   snippet_api.SnippetError])
def test_every_compiler_error_is_a_patchspec_error(error):
    assert issubclass(error, PatchspecError)


def test_a_conflict_carries_its_source_line_and_the_spec_places():
    exc = edits.ConflictError("they cannot both apply", "pkg/a.py", 3, [])
    assert (exc.file, exc.line, exc.spec_locations, str(exc)) == \
        ("pkg/a.py", 3, [], "pkg/a.py:3: they cannot both apply")


def test_every_error_patchspec_declares_is_a_patchspec_error():
    """``install/interpreter.ProbeError`` was an ``Exception`` of its own, outside the error tree (a private
    one, a step's own control flow, never leaves its module)."""
    package = Path(patchspec.__file__).parent
    declared = []
    for path in sorted(package.rglob("*.py")):
        if {"runtime_snippets", "specs"} & set(path.parts):
            continue
        names = [node.name for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                 if isinstance(node, ast.ClassDef) and not node.name.startswith("_")
                 and any(getattr(b, "id", getattr(b, "attr", "")).endswith(("Error", "Exception")) for b in node.bases)]
        if names:
            module = importlib.import_module(".".join(path.relative_to(package.parent).with_suffix("").parts))
            declared += [getattr(module, name) for name in names]
    assert len(declared) >= 8
    assert [cls.__qualname__ for cls in declared if not issubclass(cls, PatchspecError)] == []
