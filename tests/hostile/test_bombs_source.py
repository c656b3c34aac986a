"""An installed file too deep for Python's parser (a target holding an expression of 20,000 terms): each
verb says so in one line, at the file, instead of an internal error (RecursionError, exit 3)."""
from __future__ import annotations

from patchspec.cli import main
from tests.state.toy import toy_root, tree, write_spec

DEEP = "def target(self):\n    x = " + "1+" * 20_000 + "1\n    return 2\n"
WHY = "pkg/b.py: an expression in it is nested too deep for Python's own parser: patchspec does not patch this file"


def test_check_and_apply_refuse_a_target_file_too_deep_to_parse(tmp_path, capsys):
    spec = write_spec(tmp_path / "spec")
    root = toy_root(tmp_path / "root")
    (root / "pkg" / "b.py").write_text(DEEP)
    before = tree(root)
    assert main(["check", spec, "--release", "r1", "--root", str(root)]) == 4
    out = capsys.readouterr().out
    assert f"unparsable: toy b#0 wrap target in pkg/b.py ({WHY})" in out
    assert main(["apply", spec, "--release", "r1", "--root", str(root)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and WHY in err and "nothing was written" in err
    assert tree(root) == before
