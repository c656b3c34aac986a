"""Roots for the HPU runner tests: vLLM 0.30.0's sources with the fixture vllm_gaudi, pristine and patched."""
from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from hpu_stages import load_sequence
from patchspec import ops

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "specs" / "pipeline-parallel.yaml"
# Our own CPU runner and worker in the shape of vllm-gaudi's. They are kept under other names, so that no
# tracked file has the path of an upstream source, and laid out as ``vllm_gaudi/`` under a root on use.
SHAPE = REPO / "tests" / "fixtures" / "gaudi_shape"
LAYOUT = {"runner.py": "vllm_gaudi/v1/worker/hpu_model_runner.py", "worker.py": "vllm_gaudi/v1/worker/hpu_worker.py"}
PACKAGES = ["vllm_gaudi", "vllm_gaudi/v1", "vllm_gaudi/v1/worker"]


def _fixture_root() -> Path:
    """A read-only root holding the fixture as ``vllm_gaudi/``, made once per content."""
    digest = hashlib.sha256(b"".join((SHAPE / name).read_bytes() for name in sorted(LAYOUT))).hexdigest()[:16]
    root = Path(tempfile.gettempdir()) / f"patchspec-gaudi-fixture-{digest}"
    if not root.is_dir():
        staging = Path(tempfile.mkdtemp(prefix=root.name + ".", dir=root.parent))
        for package in PACKAGES:
            (staging / package).mkdir(parents=True, exist_ok=True)
            (staging / package / "__init__.py").write_text('"""Fixture package in the shape of vllm-gaudi."""\n')
        for name, rel in LAYOUT.items():
            shutil.copyfile(SHAPE / name, staging / rel)
        try:
            os.rename(staging, root)
        except OSError:  # another process made it first
            shutil.rmtree(staging)
    return root


FIXTURE = _fixture_root()


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
    ops.apply(str(SPEC), "v0.30.0", str(patched))
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
