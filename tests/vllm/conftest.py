"""The vLLM releases of ``vllm_runs.RELEASES``, pristine and with the spec's vLLM targets applied."""
from __future__ import annotations

from pathlib import Path

import pytest
from vllm_runs import release_roots


@pytest.fixture(scope="session")
def vllm_roots(vllm_release, tmp_path_factory):
    """``vllm_roots("0.30.0")`` -> ``(pristine, patched)`` writable copies, made once per session."""
    made: dict[str, tuple[Path, Path]] = {}

    def roots(version: str) -> tuple[Path, Path]:
        if version not in made:
            base = tmp_path_factory.mktemp(f"vllm-{version}")
            made[version] = release_roots(vllm_release(version), base)
        return made[version]
    return roots
