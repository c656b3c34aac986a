"""Issue 20: validate, compile, check, apply and profile new give one verdict on one spec and root. What
the compiler finds only in the patched file (a snippet alias the file binds, a file that would not
compile) refuses ``profile new`` as it refuses compile."""
from __future__ import annotations

from pathlib import Path

import pytest

from patchspec.cli import main
from tests.state.toy import toy_root, write_spec


@pytest.mark.parametrize("a_py, code, why", [
    pytest.param("_p = 0\n\ndef target(self):\n    x = 1\n    marker_call(1)\n", "_p.stop(self, 1)",
                 "the snippet alias _p would shadow _p", id="an alias the file binds"),
    pytest.param("def target(self):\n    x = 1\n    marker_call(1)\n", "break",
                 "the patched file would not compile", id="a break outside a loop"),
])
def test_profile_new_refuses_what_compile_refuses(tmp_path, capsys, a_py, code, why):
    root = toy_root(tmp_path / "root")
    (root / "pkg" / "a.py").write_text(a_py)
    spec = write_spec(tmp_path / "spec")
    Path(spec).write_text(Path(spec).read_text().replace('code: "_p.stop(self, 1)"', f'code: "{code}"'))
    verdicts = {}
    for argv in (["validate", spec, "--root", str(root)], ["compile", spec, "--root", str(root)],
                 ["check", spec, "--root", str(root)], ["apply", spec, "--root", str(root)],
                 ["profile", "new", "r3", "--root", str(root), "--spec", spec]):
        code_ = main(argv)
        out = capsys.readouterr()
        verdicts[argv[0]] = (code_ != 0, why in out.out + out.err)
    assert verdicts == dict.fromkeys(verdicts, (True, True)), verdicts
    assert not (Path(spec).parent / "releases" / "r3.yaml").exists()
