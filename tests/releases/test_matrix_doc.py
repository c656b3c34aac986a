"""docs/drift.md's release matrix is what scripts/release-matrix.py generates from the profiles now."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchspec.errors import PatchspecError

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "release-matrix.py"


def script():
    spec = importlib.util.spec_from_file_location("release_matrix", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.releases_all
@pytest.mark.gaudi
def test_the_docs_matrix_is_the_generated_one():
    if not os.environ.get("PATCHSPEC_VLLM_GAUDI"):
        pytest.skip("PATCHSPEC_VLLM_GAUDI is not set: the profiles pair vllm-gaudi refs")
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, "docs/drift.md's matrix is stale: run scripts/release-matrix.py\n" + done.stdout \
        + done.stderr


def test_only_the_marked_section_is_replaced():
    m = script()
    doc = f"# Drift\nbefore\n{m.BEGIN}\nold table\n{m.END}\n\n### What each class meant\nhand text\n"
    assert m.replace_section(doc, f"{m.BEGIN}\nnew\n{m.END}") == \
        f"# Drift\nbefore\n{m.BEGIN}\nnew\n{m.END}\n\n### What each class meant\nhand text\n"
    with pytest.raises(PatchspecError, match="markers"):
        m.replace_section("no markers here\n", "x")


@pytest.mark.parametrize("pin, version", [("==0.26.0", "0.26.0"), ("==0.31.*", "0.31.0")])
def test_a_wheel_pin_names_its_release(pin, version):
    from packaging.specifiers import SpecifierSet

    from patchspec.releases.profiles import Pin

    assert script().wheel_version(Pin(SpecifierSet(pin), ())) == version
