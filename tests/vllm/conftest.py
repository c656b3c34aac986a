"""vLLM 0.26.0 and 0.30.0 sources, pristine and with the spec's vLLM targets applied."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from patchspec import ops

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "specs" / "pipeline-parallel.yaml"


@pytest.fixture(scope="session")
def vllm_roots(vllm_release, tmp_path_factory):
    """``vllm_roots("0.30.0")`` -> ``(pristine, patched)`` writable copies, made once per session."""
    made: dict[str, tuple[Path, Path]] = {}

    def roots(version: str) -> tuple[Path, Path]:
        if version not in made:
            base = tmp_path_factory.mktemp(f"vllm-{version}")
            ignore = shutil.ignore_patterns(".complete")
            pristine = shutil.copytree(vllm_release(version), base / "pristine", ignore=ignore)
            patched = shutil.copytree(pristine, base / "patched")
            ops.apply(str(SPEC), f"v{version}", str(patched), only={"vllm"})
            made[version] = (pristine, patched)
        return made[version]
    return roots
