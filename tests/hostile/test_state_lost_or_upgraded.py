"""Damage that is not hostile (issue 28, item 8): a state record deleted while marked files stay on disk,
and a root a package manager upgraded under a patch. Before, ``check`` exited 4 on the first (want 2: apply
refuses it), and ``unapply --force`` wrote the old release's bytes over the files the new release
installed on the second, saying nothing of it (the root then mixed 2.0's metadata with 1.0's files)."""
from __future__ import annotations

import re
import shutil

import pytest

from patchspec.cli import main
from patchspec.compiler.plan import RUNTIME_PACKAGE
from patchspec.install.root import STATE_DIR
from patchspec.install.state import LOCK_FILE, PRISTINE_DIR, STATE_FILE, pristine_path
from tests.hostile.arena import arena, one_line, run
from tests.state.toy import RELEASES, pip_install, tree


def test_a_lost_state_record_is_refused_by_check_and_apply_naming_the_pristine_copy(tmp_path, capsys):
    ground = arena(tmp_path, "applied")
    (ground.root / STATE_FILE).unlink()
    before = _ours_kept(ground.root)
    for argv in (["check", ground.spec], ["apply", ground.spec, "--no-verify"]):
        code, err = run(capsys, *argv, "--root", str(ground.root))
        assert code == 2 and "pkg/a.py: carries a patchspec marker but no state record lists it" in one_line(err)
        assert f"({ground.root / pristine_path('pkg/a.py')} is this one's)" in err, err
    code, err = run(capsys, "unapply", "toy", "--root", str(ground.root))
    assert code == 2 and "spec toy is not applied to this root" in one_line(err)
    assert _ours_kept(ground.root) == before
    pristine = ground.root / PRISTINE_DIR        # what the refusal says to do gives every byte back
    for copy in pristine.rglob("*.py"):
        shutil.copy(copy, ground.root / copy.relative_to(pristine))
    shutil.rmtree(ground.root / STATE_DIR)
    shutil.rmtree(ground.root / RUNTIME_PACKAGE)
    assert ground.pristine() == {}
    assert main(["apply", ground.spec, "--root", str(ground.root), "--no-verify"]) == 0
    ground.untouched()


def _ours_kept(root) -> dict:
    """The root's tree but the lock, which the verbs take and leave no trace of."""
    return {rel: entry for rel, entry in tree(root).items() if rel != LOCK_FILE}


@pytest.mark.parametrize("force", [True, False])
@pytest.mark.parametrize("how", ["no hashes in the new RECORD", "a file edited after the upgrade"])
def test_unapply_never_writes_the_old_release_over_a_newer_one(tmp_path, capsys, how, force):
    ground = arena(tmp_path, "applied")
    pip_install(ground.root, "2.0")
    record = ground.root / "pkg-2.0.dist-info" / "RECORD"
    if how == "no hashes in the new RECORD":     # as an installer that records no hashes leaves it
        record.write_text(re.sub(r",sha256=[^,]*,", ",,", record.read_text()))
    else:
        (ground.root / "pkg/a.py").write_text(RELEASES["2.0"]["pkg/a.py"] + "# a local change\n")
    upgraded = {rel: (ground.root / rel).read_bytes() for rel in RELEASES["2.0"]}
    argv = ["unapply", "toy", "--root", str(ground.root)] + (["--force"] if force else [])
    assert main(argv) == 0
    out = capsys.readouterr().out
    for rel in ("pkg/a.py", "pkg/b.py"):
        assert f"left as it is (replaced by pkg 2.0); record dropped: {rel}" in out, out
    assert {rel: (ground.root / rel).read_bytes() for rel in RELEASES["2.0"]} == upgraded
    assert not (ground.root / ".patchspec").exists() and not (ground.root / "_patchspec_runtime").exists()
    ground.untouched()
