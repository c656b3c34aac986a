"""The shipped specs on the real vLLM releases they support (and vllm-gaudi at the ref each profile was
checked at, when its checkout is given): every patched file compiles, apply twice equals apply once,
unapply restores every byte. The default run covers the profiles of ``DEFAULT_VLLM`` (each release's
wheel is ~300 MB); every profile runs with ``-m releases_all``."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchspec.releases import profiles
from patchspec.releases.new_profile import BROKEN_COMMENT
from patchspec.spec import load_spec
from patchspec.verbs import reading, writing
from tests.releases import DEFAULT_VLLM
from tests.verbs.test_apply import tree

REPO = Path(__file__).resolve().parents[2]
SPECS = sorted((REPO / "specs").glob("*.yaml"))


def cases():
    """Every (spec, profile) pair but those the profile records as not holding (``profile new
    --allow-broken``): apply refuses them, which tests/releases checks."""
    for path in SPECS:
        spec = load_spec(path)
        for release in profiles.supported_releases(profiles.releases_dir(path), spec):
            text = profiles.load_profile(profiles.releases_dir(path), release).text
            if f"{BROKEN_COMMENT} {spec.name} " in text:
                continue
            marks = [pytest.mark.releases_all(default=release.lstrip("v") in DEFAULT_VLLM)]
            yield pytest.param(path, release, id=f"{path.stem}-{release}", marks=marks)


@pytest.fixture
def release_root(request, vllm_release, copy_root):
    def make(spec_path: Path, release: str) -> Path:
        roots = [vllm_release(release.lstrip("v"))]
        if os.environ.get("PATCHSPEC_VLLM_GAUDI"):
            ref = profiles.load_profile(profiles.releases_dir(spec_path), release).packages["vllm_gaudi"].ref
            roots.append(request.getfixturevalue("gaudi_release")(ref))
        return copy_root(*roots)
    return make


@pytest.mark.parametrize("spec_path, release", list(cases()))
def test_shipped_spec_round_trip(release_root, spec_path, release):
    root = release_root(spec_path, release)
    before = tree(root)
    result = writing.apply(str(spec_path), release, str(root))
    assert result.changed and result.files
    for rel in result.files:
        compile((root / rel).read_text(), rel, "exec")
    gaudi = bool(os.environ.get("PATCHSPEC_VLLM_GAUDI"))
    assert all(r.target and "vllm_gaudi" in r.file for r in result.skipped) and (not gaudi or not result.skipped)
    once = tree(root)
    assert writing.apply(str(spec_path), release, str(root)).changed is False
    assert tree(root) == once
    assert reading.check(str(spec_path), release, str(root)).code == 0
    writing.unapply(str(spec_path), str(root))
    assert tree(root) == before
