"""The edges of the command line. A closed stdout ends quietly; a keyword where a name belongs and a byte
that is not UTF-8 are refused at line:col on every verb; a read-only verb while another process holds the
root answers for the committed state and says so; a symlinked install is refused with what to do."""
from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchspec.cli import main
from patchspec.install.state import LOCK_FILE
from tests.state.toy import toy_root, write_spec

REPO = Path(__file__).resolve().parents[2]
PIPE_EXIT = 141


def _closed_stdout(*argv: str) -> subprocess.CompletedProcess:
    """Run patchspec with a stdout whose reader is gone before it starts (``| head -0``)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "patchspec", *argv], stdout=write, stderr=subprocess.PIPE,
                              text=True, timeout=120, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    finally:
        os.close(write)


@pytest.fixture
def toy_pair(tmp_path):
    return toy_root(tmp_path / "root"), write_spec(tmp_path / "spec")


@pytest.mark.parametrize("verb", ["status", "check", "validate", "compile", "diff", "drift"])
def test_a_closed_stdout_ends_quietly(toy_pair, verb):
    root, spec = toy_pair
    argv = {"status": ["status", "--root", str(root)], "validate": ["validate", spec],
            "drift": ["drift", spec, "--root", str(root), "--no-cache"]}.get(verb, [verb, spec, "--root", str(root)])
    done = _closed_stdout(*argv)
    assert done.returncode == PIPE_EXIT and done.stderr == "", (done.returncode, done.stderr)


def _spec_with(tmp_path: Path, spec: str, old: bytes, new: bytes) -> str:
    data = Path(spec).read_bytes()
    assert old in data
    path = tmp_path / "spec" / "edited.yaml"
    path.write_bytes(data.replace(old, new))
    return str(path)


@pytest.mark.parametrize("verb", ["validate", "check", "compile", "diff", "apply"])
@pytest.mark.parametrize("old, new, where, why", [
    pytest.param(b"with: passthrough", b"with: None", ":15:16:", "'None' is a Python keyword, not a name",
                 id="with None"),
    pytest.param(b"_p.stop(self, 1)", b"_p.stop(self, '\xff')", ":10:", "not UTF-8 text (byte 0xff)",
                 id="a 0xff byte in code"),
])
def test_a_bad_name_or_byte_is_refused_at_line_col_on_every_verb(toy_pair, tmp_path, capsys, verb,
                                                                        old, new, where, why):
    root, spec = toy_pair
    edited = _spec_with(tmp_path, spec, old, new)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    argv = [verb, edited] + ([] if verb == "validate" else ["--root", str(root)])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"patchspec: {edited}{where}") and why in err and err.count("\n") == 1, err
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_check_while_another_process_holds_the_root_answers_for_the_committed_state(toy_pair):
    root, spec = toy_pair
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATCHSPEC_FAULT": "12:kill"}
    killed = subprocess.run([sys.executable, "-m", "patchspec", "apply", spec, "--root", str(root)], env=env,
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9                      # stopped mid-commit: the journal is there
    assert (root / ".patchspec" / "journal.json").exists()
    with open(root / LOCK_FILE, "a+") as lock:         # as the writer would hold it while it runs
        fcntl.flock(lock, fcntl.LOCK_EX)
        check = subprocess.run([sys.executable, "-m", "patchspec", "check", spec, "--root", str(root)],
                               env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120)
        status = subprocess.run([sys.executable, "-m", "patchspec", "status", "--root", str(root)],
                                env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                                timeout=120)
    assert check.returncode == 1, check.stdout + check.stderr      # would apply: the committed state
    assert "in progress: another patchspec is applying or unapplying" in check.stdout
    assert status.returncode == 0 and "in progress" in status.stdout and "nothing applied" in status.stdout


def test_a_symlinked_install_is_refused_saying_to_copy(toy_pair, tmp_path, capsys):
    """What ``uv pip install --link-mode=symlink`` lays out: each file a link into uv's cache."""
    root, spec = toy_pair
    shared = tmp_path / "uv-cache" / "pkg"
    shared.mkdir(parents=True)
    for name in ("a.py", "b.py"):
        (shared / name).write_bytes((root / "pkg" / name).read_bytes())
        (root / "pkg" / name).unlink()
        (root / "pkg" / name).symlink_to(shared / name)
    assert main(["check", spec, "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert "pkg/a.py is a symbolic link out of the root" in err and "--link-mode=copy" in err, err


def test_a_read_only_verb_reads_again_when_a_run_commits_while_it_reads(toy_pair):
    """A writer that commits between a reader's first and last read (here: during the first ``compute``)
    must not leave the reader answering from a mix of the two states."""
    from patchspec.cli.present import status_lines
    from patchspec.verbs import reading, writing

    root, spec = toy_pair
    seen = []

    def compute():
        seen.append(status_lines(reading.status(str(root))))
        if len(seen) == 1:
            writing.apply(spec, "auto", str(root))   # the other process's run, committed mid-read
        return seen[-1]

    assert reading.consistent(str(root), compute) == seen[1]
    assert seen[0] == ["nothing applied"] and seen[1][0].startswith("toy: applied for r1")
