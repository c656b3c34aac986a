"""The built wheel on its own: one top-level package, the shipped specs as package data, and a fresh
venv outside the checkout that runs init, apply, check, unapply and the demo."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from patchspec.releases.cache import cache_dir, pypi_root
from tests.verbs.test_apply import tree

REPO = Path(__file__).resolve().parents[2]


def clean_env() -> dict[str, str]:
    """This process's environment without what would let the checkout stand in for the installed wheel."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory):
    work = tmp_path_factory.mktemp("wheel")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(work / "dist"),
                            str(REPO)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (work / "dist").glob("patchspec-*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(work / "venv")], check=True)
    done = subprocess.run([str(work / "venv" / "bin" / "python"), "-m", "pip", "install", "-q",
                           "--disable-pip-version-check", str(wheel)], capture_output=True, text=True,
                          env=clean_env())
    assert done.returncode == 0, done.stderr[-3000:]
    return wheel, work / "venv" / "bin" / "patchspec", work


def run(patchspec: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**clean_env(), "PATCHSPEC_CACHE": str(cache_dir())}
    return subprocess.run([str(patchspec), *argv], capture_output=True, text=True, cwd=cwd, env=env)


def test_the_wheel_publishes_one_top_level_package_with_its_specs(wheel_venv):
    wheel, _, _ = wheel_venv
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/", 1)[0] for n in names} == {"patchspec", wheel.name.split("-")[0] + "-" +
                                                  wheel.name.split("-")[1] + ".dist-info"}
    assert "patchspec/specs/pipeline-parallel.yaml" in names
    assert "patchspec/specs/releases/v0.30.0.yaml" in names
    assert "patchspec/runtime_snippets/pipeline_parallel/transfer.py" in names
    assert "patchspec/schema/output.schema.json" in names


def test_init_apply_unapply_from_the_wheel(wheel_venv, copy_root):
    _, patchspec, work = wheel_venv
    root = copy_root(pypi_root("requests==2.31.0"))
    before = tree(root)
    done = run(patchspec, "init", "my-fix", "--pypi", "requests==2.31.0", "--target",
               "requests/adapters.py:HTTPAdapter.send", "--dir", "fix", cwd=work)
    assert done.returncode == 0, done.stderr
    for verb, code in (("check", 1), ("apply", 0), ("check", 0), ("unapply", 0)):
        done = run(patchspec, verb, "fix/my-fix.yaml", "--root", str(root), cwd=work)
        assert done.returncode == code, (verb, done.stdout, done.stderr)
    assert tree(root) == before


def test_shipped_spec_by_name_and_the_demo_from_the_wheel(wheel_venv, vllm_release, copy_root):
    _, patchspec, work = wheel_venv
    root = copy_root(vllm_release("0.30.0"))
    before = tree(root)
    for verb, code in (("apply", 0), ("check", 0), ("unapply", 0)):
        done = run(patchspec, verb, "pipeline-parallel", "--root", str(root), cwd=work)
        assert done.returncode == code, (verb, done.stdout, done.stderr)
    assert tree(root) == before
    shutil.rmtree(root)
    demo = run(patchspec, "demo", cwd=work)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "round trip: the root is byte-identical to the copy before apply" in demo.stdout
