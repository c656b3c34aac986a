"""``--target FILE:NAME`` of ``record`` and ``init`` names a file under the root (issue 28, item 7): one
that leaves it is refused in one line saying so, before anything is read or fetched. Before, ``record
--target ../out/victim.py:f`` said "no installed file differs" and never that the path leaves the root."""
from __future__ import annotations

import pytest

from tests.hostile.arena import arena, one_line, run

TARGETS = {"up and out": ("../outside/victim.py", "leaves the root"),
           "absolute": (None, "is an absolute path"),
           "through a link": ("linked/a.py", "linked is a symbolic link out of the root")}


@pytest.mark.parametrize("verb", [["record", "fix"], ["record", "fix", "--from", "pkg==2.0"], ["init", "fix"]])
@pytest.mark.parametrize("target", TARGETS)
def test_a_target_out_of_the_root_is_refused_naming_the_path(tmp_path, capsys, verb, target):
    ground = arena(tmp_path)
    (ground.root / "linked").symlink_to(ground.outside / "pkg", target_is_directory=True)
    rel, why = TARGETS[target]
    rel = rel or str(ground.outside / "victim.py")
    code, err = run(capsys, *verb, "--root", str(ground.root), "--target", f"{rel}:f", "--dir", str(tmp_path / "fix"))
    assert code == 2 and f"--target {rel!r}" in one_line(err) and why in err, err
    assert not (tmp_path / "fix").exists()
    ground.untouched()
