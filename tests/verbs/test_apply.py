"""apply / unapply / check / diff on real vLLM releases, with the demo spec of tests/fixtures."""
from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from patchspec.cli import main
from patchspec.errors import PatchspecError
from patchspec.install import txn
from patchspec.install.root import Root
from patchspec.install.state import locked
from patchspec.prepare import prepare
from patchspec.verbs import reading, writing

FIXTURES = Path(__file__).parents[1] / "fixtures" / "demo_spec"
DEMO = str(FIXTURES / "demo.yaml")
RELEASES = ["0.26.0", "0.30.0"]


def tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(params=RELEASES)
def release_root(request, vllm_release, copy_root):
    root = copy_root(vllm_release(request.param))
    return root, f"v{request.param}"


def test_apply_compiles_and_unapply_restores_every_byte(release_root):
    root, release = release_root
    before = tree(root)
    result = writing.apply(DEMO, release, str(root))
    assert result.changed and result.files == ["vllm/sequence.py", "vllm/v1/core/sched/scheduler.py"]
    for rel in result.files:
        text = (root / rel).read_text()
        assert "# patchspec: demo" in text
        compile(text, rel, "exec")
    assert (root / "_patchspec_runtime/demo_snips/__init__.py").is_file()
    assert reading.check(DEMO, release, str(root)).code == 0
    writing.unapply(DEMO, str(root))
    assert tree(root) == before
    assert not (root / ".patchspec").exists() and not (root / "_patchspec_runtime").exists()


def test_apply_twice_equals_apply_once(release_root):
    root, release = release_root
    writing.apply(DEMO, release, str(root))
    once = tree(root)
    assert writing.apply(DEMO, release, str(root)).changed is False
    assert tree(root) == once


def test_check_states(release_root, capsys):
    root, release = release_root
    assert main(["check", DEMO, "--release", release, "--root", str(root)]) == 1
    assert "would-apply: demo sequence-iter#0 add_method IntermediateTensors in vllm/sequence.py" in \
        capsys.readouterr().out
    writing.apply(DEMO, release, str(root))
    assert main(["check", DEMO, "--release", release, "--root", str(root)]) == 0
    assert "applied: demo sequence-iter#0 add_method IntermediateTensors in vllm/sequence.py" in \
        capsys.readouterr().out
    target = root / "vllm/sequence.py"
    target.write_text(target.read_text() + "# edited by hand\n")
    assert main(["check", DEMO, "--release", release, "--root", str(root)]) == 4
    out = capsys.readouterr().out
    assert "edited: demo sequence-iter#0 add_method IntermediateTensors in vllm/sequence.py" in out
    assert "applied: demo scheduler-loop#0" in out


def test_unapply_refuses_edited_file_unless_forced(release_root, capsys):
    root, release = release_root
    before = tree(root)
    writing.apply(DEMO, release, str(root))
    target = root / "vllm/sequence.py"
    target.write_text(target.read_text() + "# edited\n")
    edited = tree(root)
    assert main(["unapply", DEMO, "--root", str(root)]) == 2
    assert "vllm/sequence.py" in capsys.readouterr().err
    assert tree(root) == edited
    assert main(["unapply", DEMO, "--root", str(root), "--force"]) == 0
    assert tree(root) == before


def test_failure_on_second_file_leaves_first_untouched(release_root, monkeypatch, tmp_path):
    """A full disk at the rename of the second file, after the first is in place: every file put back."""
    root, release = release_root
    before = tree(root)
    monkeypatch.setenv(txn.TRACE_ENV, str(tmp_path / "trace"))
    writing.apply(DEMO, release, str(root))
    writing.unapply(DEMO, str(root))
    monkeypatch.delenv(txn.TRACE_ENV)
    renames = [line.split()[0] for line in (tmp_path / "trace").read_text().splitlines()
               if line.split()[1] == "rename" and line.endswith(("sequence.py", "scheduler.py"))]
    monkeypatch.setenv(txn.FAULT_ENV, f"{renames[-1]}:enospc")  # apply's points come first in the trace
    with pytest.raises(PatchspecError, match="every file was put back"):
        writing.apply(DEMO, release, str(root))
    assert tree(root) == before


def test_diff_is_a_plain_patch_for_patch_and_git_apply(release_root, tmp_path, capsys):
    root, release = release_root
    assert main(["diff", DEMO, "--release", release, "--root", str(root), "--color", "never"]) == 0
    diff = capsys.readouterr().out
    assert diff.startswith("diff --git a/vllm/sequence.py b/vllm/sequence.py\n")
    (tmp_path / "change.diff").write_text(diff)
    by_patch = tmp_path / "by_patch"
    by_git = tmp_path / "by_git"
    shutil.copytree(root, by_patch)
    shutil.copytree(root, by_git)
    subprocess.run(["patch", "-p1", "-s", "-i", str(tmp_path / "change.diff")], cwd=by_patch, check=True)
    subprocess.run(["git", "apply", str(tmp_path / "change.diff")], cwd=by_git, check=True)
    writing.apply(DEMO, release, str(root))
    applied = {k: v for k, v in tree(root).items() if not k.startswith(".patchspec/")}
    assert tree(by_patch) == applied
    assert tree(by_git) == applied


def test_release_auto_reads_dist_info(vllm_release, copy_root):
    root = copy_root(vllm_release("0.30.0"))
    assert prepare(DEMO, "auto", str(root)).release == "v0.30.0"


def test_two_appliers_one_waits_then_fails_clearly(release_root):
    root, release = release_root
    before = tree(root)
    with locked(Root.open(root), timeout=1), pytest.raises(PatchspecError, match="holds the lock"):
        writing.apply(DEMO, release, str(root), lock_timeout=0.3)
    assert {k: v for k, v in tree(root).items() if not k.startswith(".patchspec")} == before


def test_concurrent_cli_applies_one_patches_other_sees_applied(release_root):
    root, release = release_root
    cmd = ["python", "-m", "patchspec", "apply", DEMO, "--release", release, "--root", str(root)]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    joined = "".join(o[0] for o in outs)
    assert joined.count("patched:") == 2 and joined.count("already applied") == 2


def test_check_finds_a_partial_apply_without_state(release_root, capsys):
    """Marked lines in a file the state record does not list: someone copied patched files by hand. check
    refuses it as apply does (exit 2, one line), saying how to get the pristine file back."""
    root, release = release_root
    writing.apply(DEMO, release, str(root))
    patched = (root / "vllm/sequence.py").read_bytes()
    writing.unapply(DEMO, str(root))
    (root / "vllm/sequence.py").write_bytes(patched)
    assert main(["check", DEMO, "--release", release, "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "vllm/sequence.py: carries a patchspec marker but no state record lists it" in err
    assert "reinstall the package" in err


def test_diff_colour_on_request_and_validate(release_root, capsys):
    root, release = release_root
    assert main(["diff", DEMO, "--release", release, "--root", str(root), "--color", "always"]) == 0
    coloured = capsys.readouterr().out
    assert "\033[32m+    __iter__ = _demo.iter_keys  # patchspec: demo\033[0m" in coloured
    assert main(["validate", DEMO]) == 0
    assert capsys.readouterr().out == "valid: demo: 2 targets, 3 transforms\n"
