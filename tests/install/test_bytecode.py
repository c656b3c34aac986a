"""Byte code in line with what apply and unapply write: every ``.pyc`` of a changed file, in each
invalidation mode, after ``python -m compileall`` as distro packages and images ship (issue 20, item 5:
before, every hook was missing under unchecked-hash byte code). The patched code is run as a program runs
it: byte code read, and written where Python writes it."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from patchspec.cli import main
from patchspec.install import bytecode, txn
from tests.state.toy import in_child, points, tree
from tests.verify_toy import PATCHED_OUT, PRISTINE_OUT, run, toy_venv, write_spec

MODES = ("timestamp", "checked-hash", "unchecked-hash")


def _compileall(python: Path, site: Path, mode: str) -> list[Path]:
    subprocess.run([str(python), "-m", "compileall", "-q", "--invalidation-mode", mode, "-o", "0", "-o", "1",
                    str(site / "vpkg")], check=True)
    return sorted((site / "vpkg" / "__pycache__").glob("mod.*.pyc"))


@pytest.mark.parametrize("mode", MODES)
def test_patched_code_runs_over_compiled_byte_code_and_unapply_runs_the_original(tmp_path, mode):
    python, site = toy_venv(tmp_path)
    spec = write_spec(tmp_path / "spec")
    pycs = _compileall(python, site, mode)
    assert [p.name.split(".", 2)[2] for p in pycs] == ["opt-1.pyc", "pyc"]
    assert main(["apply", spec, "--root", str(site)]) == 0
    for flags in ((), ("-O",)):
        assert run(python, *flags) == PATCHED_OUT
    if mode != "timestamp":  # recompiled in the mode it had
        assert [bytecode.mode(p.read_bytes()) for p in pycs] == [mode, mode]
    assert main(["unapply", "vtoy", "--root", str(site)]) == 0
    for flags in ((), ("-O",)):
        assert run(python, *flags) == PRISTINE_OUT
    if mode != "timestamp":
        assert [bytecode.mode(p.read_bytes()) for p in pycs] == [mode, mode]


def test_byte_code_another_interpreter_wrote_is_removed_not_left_stale(tmp_path):
    python, site = toy_venv(tmp_path)
    spec = write_spec(tmp_path / "spec")
    pyc = _compileall(python, site, "unchecked-hash")[1]
    foreign = pyc.with_name("mod.cpython-39.pyc")
    shutil.copy(pyc, foreign)
    assert main(["apply", spec, "--root", str(site)]) == 0
    assert not foreign.exists() and bytecode.mode(pyc.read_bytes()) == "unchecked-hash"


def test_a_kill_in_the_write_puts_the_byte_code_back_with_the_sources(tmp_path):
    """The ``.pyc`` writes are in the journal: killed at its last rename, recover puts back every byte."""
    python, site = toy_venv(tmp_path)
    spec = write_spec(tmp_path / "spec")
    _compileall(python, site, "unchecked-hash")
    trial = tmp_path / "trial"
    shutil.copytree(tmp_path / "venv", trial, symlinks=True)
    trial_site = trial / site.relative_to(tmp_path / "venv")
    renames = [n for n, kind, path in points(["apply", spec, "--root", str(trial_site), "--no-verify"],
                                             tmp_path / "trace") if kind == "rename"]
    assert any(path.endswith(".pyc") for n, kind, path in points(
        ["unapply", "vtoy", "--root", str(trial_site)], tmp_path / "trace2") if kind == "rename")
    before = tree(site)
    assert in_child(["apply", spec, "--root", str(site), "--no-verify"],
                    {txn.FAULT_ENV: f"{renames[-1]}:kill"}) < 0
    assert main(["recover", "--root", str(site)]) == 0
    assert tree(site) == before
    assert run(python) == PRISTINE_OUT


def test_verify_says_when_the_module_runs_stale_unchecked_byte_code(tmp_path, capsys):
    """Byte code put back from before apply (as an image rebuilt from an old layer would): the proof
    sees the module ran another text's byte code."""
    python, site = toy_venv(tmp_path)
    spec = write_spec(tmp_path / "spec")
    pyc = _compileall(python, site, "unchecked-hash")[1]
    old = pyc.read_bytes()
    assert main(["apply", spec, "--root", str(site)]) == 0
    pyc.write_bytes(old)
    capsys.readouterr()
    assert main(["verify", spec, "--root", str(site)]) == 4
    out = capsys.readouterr().out
    assert f"not-live: vtoy send#0 insert_before Session.send in vpkg/mod.py (the module ran stale byte code: " \
           f"{pyc} (unchecked-hash) was compiled from another text)" in out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("where", ["venv", "bare directory"])
def test_unapply_puts_back_the_byte_code_apply_removed_or_replaced_byte_for_byte(tmp_path, mode, where):
    """Before, with no interpreter known for the root (a bare directory) apply removed the hash-based
    ``.pyc`` files of a patched file and unapply left them gone; in a venv unapply compiled them anew
    (not the bytes pip or compileall wrote). Now apply keeps them beside the pristine copy and unapply
    writes them back: the root is the tree it was."""
    python, site = toy_venv(tmp_path)
    spec = write_spec(tmp_path / "spec")
    _compileall(python, site, mode)
    root = site
    if where == "bare directory":
        root = tmp_path / "bare"
        shutil.copytree(site, root, symlinks=True)
    before = tree(root)
    assert main(["apply", spec, "--root", str(root)]) == 0
    if mode != "timestamp":
        assert tree(root) != before and (root / ".patchspec/pristine/vpkg/__pycache__").is_dir()
    assert main(["unapply", "vtoy", "--root", str(root)]) == 0
    assert tree(root) == before
