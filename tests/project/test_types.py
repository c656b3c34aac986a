"""The code meets the mypy configuration in pyproject.toml (``patchspec/`` but its runtime snippets; strict on
``compiler/`` and ``install/``), so a change that breaks a type is caught by the test run, as ruff's rules are."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _mypy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mypy", *args], capture_output=True, text=True, cwd=REPO)


@pytest.fixture(scope="module", autouse=True)
def mypy_installed():
    if _mypy("--version").returncode != 0:
        pytest.fail(f"mypy is not installed in {sys.executable}: pip install -e .[test] (or pip install mypy "
                    "types-PyYAML)")


def test_patchspec_meets_the_mypy_configuration():
    # the files and options are pyproject.toml's; no cache, so a stale one cannot hide an error
    done = _mypy("--no-incremental", "--cache-dir", "/dev/null")
    assert done.returncode == 0, done.stdout + done.stderr
