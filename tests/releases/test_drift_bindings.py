"""The names a spec's snippets use (their ``USES``) are rows of drift, matrix and profile new: a release
that lacks one, or whose signature the snippets' call does not bind to, is broken there by name."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from patchspec.cli import main
from tests.state.toy import SNIPS, SPEC, toy_root, write_spec

USES = '''USES = {
    "pkg/a.py": ["target(s)", "Helper"],
    "pkg/b.py": ["target(s, t)"],
    "other/x.py": ["thing"],
}
'''


@pytest.fixture
def spec(tmp_path):
    """The toy spec, its snippet package declaring what it uses in pkg (and in a package never installed)."""
    snips = tmp_path / "snips"
    shutil.copytree(SNIPS, snips)
    (snips / "demo_snips" / "uses.py").write_text(USES)
    path = Path(write_spec(tmp_path / "spec"))
    path.write_text(SPEC.replace(str(SNIPS), str(snips)))
    return str(path)


def test_drift_names_each_binding_that_does_not_hold(tmp_path, spec, capsys):
    root = toy_root(tmp_path / "root")
    assert main(["drift", spec, "--root", str(root), "--no-cache"]) == 4
    out = capsys.readouterr().out
    assert "binding-missing: the snippets use Helper in pkg/a.py: Helper is not defined or imported" in out
    assert "binding-mismatch: the snippets use target(s, t) in pkg/b.py: does not bind to target(self)" in out
    assert "target(s) in pkg/a.py" not in out and "thing" not in out  # bound, and not checked: no row
    assert "1 binding-mismatch, 1 binding-missing, 2 unrecorded; exit 4" in out


def test_matrix_rows_say_which_binding_fails_on_which_root(tmp_path, spec, capsys):
    lacking = toy_root(tmp_path / "lacking")
    having = toy_root(tmp_path / "having")
    (having / "pkg" / "a.py").write_text((having / "pkg" / "a.py").read_text() + "\n\nclass Helper:\n    pass\n")
    for cached in (["--no-cache"], []):  # computed, then read back from the cache
        assert main(["matrix", spec, "--root", str(lacking), "--root", str(having), "--markdown", *cached]) == 4
        rows = capsys.readouterr().out.splitlines()[2:]
        assert rows[2:] == ["| Helper in pkg/a.py | uses | binding-missing | bound |",
                            "| target(s, t) in pkg/b.py | uses | binding-mismatch | binding-mismatch |"]


def test_profile_new_checks_bindings_and_allow_broken_names_them(tmp_path, spec, capsys):
    root = toy_root(tmp_path / "root")
    assert main(["profile", "new", "r9", "--root", str(root), "--spec", spec]) == 4
    out = capsys.readouterr().out
    assert "needs a human: toy: binding-missing: the snippets use Helper in pkg/a.py" in out
    assert "nothing written" in out
    assert main(["profile", "new", "r9", "--root", str(root), "--spec", spec, "--allow-broken"]) == 4
    text = (Path(spec).parent / "releases" / "r9.yaml").read_text()
    assert "): toy uses Helper in pkg/a.py: binding-missing\n" in text
    assert "): toy uses target(s, t) in pkg/b.py: binding-mismatch\n" in text


def test_check_names_the_bindings_when_an_anchor_fails_too(tmp_path, spec, capsys):
    root = toy_root(tmp_path / "root")
    (root / "pkg" / "a.py").write_text("def target(self):\n    x = 1\n")
    assert main(["check", spec, "--root", str(root)]) == 4
    out = capsys.readouterr().out
    assert "missing: toy a#0 insert_before target in pkg/a.py" in out
    assert "binding: pkg/a.py: Helper: Helper is not defined or imported" in out


def test_binding_rows_fit_the_json_envelope(tmp_path, spec, capsys):
    from tests.cli.test_cli import run_json

    root = toy_root(tmp_path / "root")
    code, document = run_json(capsys, "drift", spec, "--root", str(root), "--no-cache")
    uses = [r for r in document["results"] if r.get("kind") == "uses"]
    assert code == 4 and {(r["target"], r["drift"]) for r in uses} == {
        ("Helper in pkg/a.py", "binding-missing"), ("target(s, t) in pkg/b.py", "binding-mismatch")}
    code, document = run_json(capsys, "matrix", spec, "--root", str(root), "--no-cache")
    rows = [r for r in document["results"] if r["type"] == "matrix-row" and r["kind"] == "uses"]
    assert code == 4 and [r["cells"] for r in rows] == [["binding-missing"], ["binding-mismatch"]]
