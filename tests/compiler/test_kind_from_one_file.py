"""Adding a transform kind is one file: a throwaway kind written to a temporary directory is discovered
in the transforms package and runs through validate, apply, check, drift and unapply like a shipped one,
with no other file of patchspec touched (the schema and the registry come from its descriptor)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from patchspec import spec as spec_module
from patchspec.cli import kind_docs, main
from patchspec.compiler import transforms
from tests.state.toy import toy_root, tree

KIND = '''
"""``swap_call``: the one call matching a pattern calls another function (a throwaway kind)."""
import libcst as cst

from patchspec.compiler.edits import Action, NodeEdit, Place
from patchspec.compiler.kind import Key, Kind
from patchspec.compiler.rewrite import marker_edit

SWAP = Action("swap-call", Place.NODE, apply=lambda call, news: call.with_changes(func=news[0]),
              rewrites=True)


def swap_call(ctx, params):
    ctx.require_function("swap_call")
    call = ctx.find_one(params["call"], "expression", f"call {params['call']!r}", (cst.Call,))
    return ctx.line_of(call), [NodeEdit(SWAP, call, cst.Name(params["to"]), ctx.owner), marker_edit(ctx, call)]


SWAP_CALL = Kind("swap_call", "the one call matching `call` calls `to` instead",
                 {"call": Key.EXPRESSION_PATTERN, "to": Key.IDENTIFIER}, swap_call, actions=(SWAP,), rewrites=True)
'''

SPEC = """spec: 1
name: swap
summary: Call the checked function.
targets:
  - id: a
    file: pkg/a.py
    function: target
    transforms:
      - swap_call: {call: "marker_call(...)", to: checked_call}
"""


@pytest.fixture
def throwaway_kind(tmp_path, monkeypatch):
    kinds = tmp_path / "kinds"
    kinds.mkdir()
    (kinds / "swap_call.py").write_text(KIND)
    monkeypatch.setattr(transforms, "__path__", [*transforms.__path__, str(kinds)])
    for name, kind in transforms.discover().items():
        if name not in transforms.KINDS:
            monkeypatch.setitem(transforms.KINDS, name, kind)
    spec_module.schema.cache_clear()
    yield transforms.KINDS["swap_call"]
    spec_module.schema.cache_clear()


def test_a_kind_from_one_file_is_in_the_schema_the_docs_and_verify(throwaway_kind):
    schema = json.loads(kind_docs.schema_text(kind_docs.SCHEMA.read_text(encoding="utf-8")))
    assert schema["$defs"]["transform"]["properties"]["swap_call"]["required"] == ["call", "to"]
    assert throwaway_kind.docs_row in kind_docs.generated()[kind_docs.SPEC_LANGUAGE]
    code_lines = next(row for row in kind_docs.verify_table().splitlines() if row.startswith("| `CODE_LINES`"))
    assert "guard, swap_call |" in code_lines    # checked by its lines, the default of Kind.live
    assert all(kind_docs.generated()[path] != path.read_text(encoding="utf-8") for path in kind_docs.generated())


def test_a_kind_from_one_file_runs_through_every_verb(throwaway_kind, tmp_path, capsys):
    assert throwaway_kind.name in spec_module.schema()["$defs"]["transform"]["propertyNames"]["enum"]
    root = toy_root(tmp_path / "root")
    (root / "pkg" / "a.py").write_text("def checked_call(n):\n    return -n\n\n\n"
                                       "def marker_call(n):\n    return n\n\n\n"
                                       "def target(self):\n    x = 1\n    return marker_call(1)\n")
    spec_dir = tmp_path / "spec"
    (spec_dir / "releases").mkdir(parents=True)
    (spec_dir / "releases" / "r1.yaml").write_text("release: r1\npackages: {pkg: '==1.0'}\n")
    spec = spec_dir / "swap.yaml"
    spec.write_text(SPEC)
    before = tree(root)
    at = ["--release", "r1", "--root", str(root)]
    assert main(["validate", str(spec)]) == 0
    assert main(["check", str(spec), *at]) == 1
    assert main(["apply", str(spec), *at]) == 0
    assert "checked_call(1)  # patchspec: swap" in (root / "pkg" / "a.py").read_text()
    run = subprocess.run([sys.executable, "-c", "from pkg.a import target; print(target(None))"], cwd=root,
                         capture_output=True, text=True, env={"PYTHONDONTWRITEBYTECODE": "1"})
    assert run.stdout.strip() == "-1", run.stderr
    assert main(["check", str(spec), *at]) == 0
    assert main(["drift", str(spec), "--release", "r1", "--root", str(root)]) == 1   # no fingerprint recorded
    assert "unrecorded" in capsys.readouterr().out
    assert main(["unapply", "swap", "--root", str(root)]) == 0
    assert tree(root) == before
    capsys.readouterr()


def test_a_kind_s_bad_key_is_refused_by_the_schema_its_descriptor_made(throwaway_kind, tmp_path, capsys):
    spec = tmp_path / "bad.yaml"
    spec.write_text(SPEC.replace("to: checked_call", "into: checked_call"))
    assert main(["validate", str(spec)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'into'" in err and "not allowed" in err, err
