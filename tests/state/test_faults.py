"""The fault tier: a kill (SIGKILL) and a Ctrl-C (SIGINT) at every write point of apply and of unapply,
in a child process, then each writing verb. After every one the root is pristine or fully patched, and
unapply brings it back byte for byte. The points are numbered by the writer's fault hook, so each is
reached deterministically (see ``patchspec.install.txn``)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from patchspec.errors import PatchspecError
from patchspec.install import txn
from patchspec.verbs import reading, writing
from tests.state.toy import in_child, points, tree


def _follow_up(verb: str, root: Path, spec: str) -> None:
    """One writing verb after the interruption; unapply of a spec that recovery rolled back is refused."""
    if verb == "apply":
        writing.apply(spec, "auto", str(root))
    elif verb == "unapply":
        try:
            writing.unapply("toy", str(root))
        except PatchspecError as exc:
            assert "is not applied" in str(exc)
    else:
        writing.recover(str(root))


@pytest.fixture
def states(toy, tmp_path):
    """The toy root pristine and patched (as trees), and a way to get a fresh copy of either."""
    root, spec = toy
    pristine = tree(root)
    patched_root = tmp_path / "patched"
    shutil.copytree(root, patched_root)
    writing.apply(spec, "auto", str(patched_root))
    copies = iter(range(10**6))

    def fresh(which: str) -> Path:
        dest = tmp_path / f"copy{next(copies)}"
        shutil.copytree(root if which == "pristine" else patched_root, dest)
        return dest
    return spec, pristine, tree(patched_root), fresh


@pytest.mark.parametrize("verb", ["apply", "unapply"])
def test_every_kill_point_is_recoverable(states, tmp_path, verb):
    spec, pristine, patched, fresh = states
    start = "pristine" if verb == "apply" else "patched"
    argv = lambda root: ["apply", spec, "--root", str(root)] if verb == "apply" \
        else ["unapply", "toy", "--root", str(root)]
    found = points(argv(fresh(start)), tmp_path / "trace")
    assert {kind for _, kind, _ in found} >= ({"create", "write", "fsync", "rename", "commit", "journal"}
                                              | ({"link", "mkdir"} if verb == "apply" else {"unlink"}))
    before, after = (pristine, patched) if verb == "apply" else (patched, pristine)
    for number, kind, path in found:
        where = f"{verb} point {number} ({kind} {path})"
        # Ctrl-C: the verb rolls back in the process, says so and exits 130; the root is as before.
        root = fresh(start)
        assert in_child(argv(root), {txn.FAULT_ENV: f"{number}:int"}) == 130, where
        assert tree(root) == before, where
        # SIGKILL: read-only verbs answer for the root as it was, writing nothing; each writing verb
        # then finishes from a pristine or fully patched root.
        killed = fresh(start)
        assert in_child(argv(killed), {txn.FAULT_ENV: f"{number}:kill"}) == -9, where
        left = tree(killed)
        status = reading.status(str(killed))
        assert (status.code, bool([r for r in status.results if r.type == "recovery"])) == \
            ((1, True) if (killed / txn.JOURNAL).exists() else (0, False)), where
        assert tree(killed) == left, where
        for follow in ("apply", "unapply", "recover"):
            root = fresh(start)
            shutil.rmtree(root)
            shutil.copytree(killed, root)
            _follow_up(follow, root, spec)
            assert tree(root) in (pristine, patched), f"{where}, then {follow}"
            if tree(root) == patched:
                writing.unapply("toy", str(root))
            assert tree(root) == pristine, f"{where}, then {follow}, then unapply"


def test_enospc_at_every_point_leaves_nothing(states, tmp_path):
    """A full disk (or an immutable file: EPERM) at any point: one line, every file put back, no temporary
    file and no new directory left."""
    spec, pristine, patched, fresh = states
    found = points(["apply", spec, "--root", str(fresh("pristine"))], tmp_path / "trace")
    for number, kind, path in found:
        for action in ("enospc", "eperm"):
            root = fresh("pristine")
            assert in_child(["apply", spec, "--root", str(root)], {txn.FAULT_ENV: f"{number}:{action}"}) == 2
            assert tree(root) == pristine, f"{action} at point {number} ({kind} {path})"


def test_the_env_hook_stops_a_real_cli_process(states, tmp_path):
    """The same hook from a plain ``python -m patchspec`` process, killed at the 4th rename of apply (the
    point where, before the journal, vllm/config/model.py was lost for good)."""
    import os
    import subprocess
    import sys

    spec, pristine, patched, fresh = states
    root = fresh("pristine")
    renames = [n for n, kind, _ in points(["apply", spec, "--root", str(fresh("pristine"))], tmp_path / "t")
               if kind == "rename"]
    env = {**os.environ, txn.FAULT_ENV: f"{renames[3]}:kill"}
    done = subprocess.run([sys.executable, "-m", "patchspec", "apply", spec, "--root", str(root)], env=env,
                          cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True)
    assert done.returncode == -9
    recovered = subprocess.run([sys.executable, "-m", "patchspec", "recover", "--root", str(root)],
                               cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True)
    assert recovered.returncode == 0 and recovered.stdout.startswith("recovered: rolled back"), recovered
    assert tree(root) == pristine
