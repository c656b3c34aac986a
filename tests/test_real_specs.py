"""The shipped specs on the real vLLM releases they support (and vllm-gaudi, when its checkout is given):
every patched file compiles, apply twice equals apply once, unapply restores every byte."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchspec import ops, profiles
from patchspec.spec import load_spec
from tests.test_apply import tree

REPO = Path(__file__).resolve().parent.parent
SPECS = sorted((REPO / "specs").glob("*.yaml"))
# The vllm-gaudi source paired with each profile (no 0.25 or 0.30 tag of vllm-gaudi is reachable).
GAUDI_TAG = {"v0.24.0": "v0.24.0", "v0.25.0": "v0.24.0", "v0.26.0": "v0.26.0", "v0.27.0": "v0.27.0rc0",
             "v0.30.0": "main"}


def cases():
    for path in SPECS:
        for release in profiles.supported_releases(profiles.releases_dir(path), load_spec(path)):
            yield pytest.param(path, release, id=f"{path.stem}-{release}")


@pytest.fixture
def release_root(request, vllm_release, copy_root):
    def make(release: str) -> Path:
        roots = [vllm_release(release.lstrip("v"))]
        if os.environ.get("PATCHSPEC_VLLM_GAUDI"):
            roots.append(request.getfixturevalue("gaudi_release")(GAUDI_TAG[release]))
        return copy_root(*roots)
    return make


@pytest.mark.parametrize("spec_path, release", list(cases()))
def test_shipped_spec_round_trip(release_root, spec_path, release):
    root = release_root(release)
    before = tree(root)
    result = ops.apply(str(spec_path), release, str(root))
    assert result.changed and result.files
    for rel in result.files:
        compile((root / rel).read_text(), rel, "exec")
    gaudi = bool(os.environ.get("PATCHSPEC_VLLM_GAUDI"))
    assert all(r.target and "vllm_gaudi" in r.file for r in result.skipped) and (not gaudi or not result.skipped)
    once = tree(root)
    assert ops.apply(str(spec_path), release, str(root)).changed is False
    assert tree(root) == once
    assert ops.check(str(spec_path), release, str(root)).code == 0
    ops.unapply(str(spec_path), str(root))
    assert tree(root) == before
