"""The code meets the ruff configuration in pyproject.toml (line length 120; the runtime snippets keep vLLM's
88), so a change that does not is caught by the test run."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", *args],
                          capture_output=True, text=True, cwd=REPO)


@pytest.fixture(scope="module", autouse=True)
def ruff_installed():
    if subprocess.run([sys.executable, "-m", "ruff", "--version"], capture_output=True).returncode != 0:
        pytest.fail("ruff is not installed: pip install -e .[test]" if shutil.which("pip") else "ruff is missing")


@pytest.mark.parametrize("tree", ["patchspec", "tests", "bench", "scripts"])
def test_the_code_meets_the_ruff_configuration(tree):
    done = _ruff(tree)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_runtime_snippets_keep_vllms_line_width():
    done = _ruff("--line-length", "88", "--select", "E501", "patchspec/runtime_snippets")
    assert done.returncode == 0, done.stdout + done.stderr
