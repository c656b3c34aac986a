"""Shared fixtures: real release roots (cached), and the vllm-gaudi checkout when one is given."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from patchspec.releases.cache import git_tag_root, pypi_root

REPO = Path(__file__).resolve().parent.parent
GAUDI_ENV = "PATCHSPEC_VLLM_GAUDI"


@pytest.fixture(scope="session")
def vllm_release():
    """``vllm_release("0.30.0")``: a read-only cached root holding ``vllm/`` and its dist-info."""
    return lambda version: pypi_root(f"vllm=={version}")


@pytest.fixture(scope="session")
def gaudi_release():
    """``gaudi_release("v0.26.0")``: a read-only cached root holding ``vllm_gaudi/`` at that tag.

    Skips when ``PATCHSPEC_VLLM_GAUDI`` (a vllm-gaudi git directory) is not set.
    """
    git_dir = os.environ.get(GAUDI_ENV)
    if not git_dir:
        pytest.skip(f"{GAUDI_ENV} is not set: no vllm-gaudi checkout to read")
    return lambda tag: git_tag_root(Path(git_dir), tag, "vllm_gaudi")


@pytest.fixture
def copy_root(tmp_path):
    """Copy one or more read-only roots into one writable root and return it."""
    def make(*roots: Path) -> Path:
        dest = tmp_path / "root"
        for root in roots:
            shutil.copytree(root, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".complete"))
        return dest
    return make


@pytest.fixture
def toy(tmp_path):
    """``(root, spec)``: the toy package 1.0 installed as pip lays it out, and the two-file toy spec."""
    from tests.state.toy import toy_root, write_spec

    return toy_root(tmp_path / "toy-root"), write_spec(tmp_path / "toy-spec")


OPT_IN = ("faults_exhaustive", "releases_all", "record_all", "corpus", "two_nodes_all", "e2e_all")


def pytest_collection_modifyitems(config, items):
    """``faults_exhaustive`` and ``releases_all`` are opt-in: each runs only when ``-m`` names it, except
    the representative slice marked ``default=True`` (``-m releases_all`` selects it with the rest)."""
    chosen = config.getoption("-m") or ""
    for marker in OPT_IN:
        if marker in chosen:
            continue
        skip = pytest.mark.skip(reason=f"opt-in: run with -m {marker}")
        for item in items:
            mark = item.get_closest_marker(marker)
            if mark is not None and not mark.kwargs.get("default"):
                item.add_marker(skip)
