"""Roots for the HPU runner tests: vLLM 0.30.0's sources with the fixture vllm_gaudi, pristine and patched."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from hpu_stages import load_sequence

from patchspec.verbs import writing
from tests.gaudi_shape import fixture_root

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "specs" / "pipeline-parallel.yaml"
FIXTURE = fixture_root()


def build_root(dest: Path, *sources: Path) -> Path:
    for source in sources:
        shutil.copytree(source, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".complete"))
    return dest


@pytest.fixture(scope="session")
def hpu_roots(vllm_release, tmp_path_factory) -> tuple[Path, Path]:
    """``(pristine, patched)``; the patched one has the spec applied for v0.30.0."""
    vllm = vllm_release("0.30.0")
    pristine = build_root(tmp_path_factory.mktemp("pristine") / "root", vllm, FIXTURE)
    patched = build_root(tmp_path_factory.mktemp("patched") / "root", pristine)
    writing.apply(str(SPEC), "v0.30.0", str(patched))
    return pristine, patched


@pytest.fixture
def patched_import(hpu_roots, monkeypatch):
    """For one test: the patched root importable, with its ``vllm/sequence.py`` loaded alone as
    ``vllm.sequence`` (the vllm package itself can be imported only once per process)."""
    root = hpu_roots[1]
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setitem(sys.modules, "vllm.sequence", load_sequence(root))
    yield root
    for name in [n for n in sys.modules if n.split(".")[0] in ("vllm_gaudi", "_patchspec_runtime")]:
        del sys.modules[name]
