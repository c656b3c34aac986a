"""The drift watch (scripts/drift-watch.sh, which the GitHub workflow runs) against a local index: a
directory of small vllm wheels built from real releases' files, so the test does not depend on what
PyPI publishes next. A made-up next release that drops the scheduler's anchor must fail the watch."""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from patchspec import snippets
from patchspec.compiler import snippet_api
from patchspec.releases import profiles
from patchspec.releases.cache import pypi_root
from patchspec.spec import SHIPPED, load_spec

REPO = Path(__file__).resolve().parents[2]
ANCHOR = "while req_index < len(self.running) and token_budget > 0:"


def spec_files() -> set[str]:
    files = set()
    for path in SHIPPED.glob("*.yaml"):
        spec = load_spec(path)
        files |= {t.file for t in spec.targets} | {c.file for c in spec.obsolete_when}
        files |= set(snippets.read_package(snippet_api.declared_uses, spec))  # drift checks the bindings too
        for release in profiles.supported_releases(profiles.releases_dir(path), spec):
            profile = profiles.load_profile(profiles.releases_dir(path), release)
            for overrides in ((profile.specs or {}).get(spec.name, {}).get("overrides") or {}).values():
                files.add(overrides.get("file", ""))
    return {f for f in files if f.startswith("vllm/")}


def small_wheel(index: Path, version: str, source: str, edit=None) -> None:
    """A wheel named vllm-VERSION holding only the files the shipped specs (and their snippets) read, from
    release SOURCE."""
    root = pypi_root(f"vllm=={source}")
    with zipfile.ZipFile(index / f"vllm-{version}-py3-none-any.whl", "w") as wheel:
        for rel in sorted(spec_files()):
            if (root / rel).is_file():
                text = (root / rel).read_text()
                wheel.writestr(rel, edit(rel, text) if edit else text)
        info = f"vllm-{version}.dist-info"
        wheel.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n\n")
        wheel.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"vllm-{version}.dist-info/top_level.txt", "vllm\n")
        wheel.writestr(f"vllm-{version}.dist-info/RECORD", "")


def watch(tmp_path: Path, index: Path) -> tuple[int, str, str]:
    summary = tmp_path / "summary.md"
    summary.unlink(missing_ok=True)
    env = {**os.environ, "PATCHSPEC_CACHE": str(tmp_path / "cache"), "PIP_NO_INDEX": "1",
           "PIP_FIND_LINKS": str(index), "GITHUB_STEP_SUMMARY": str(summary), "PATCHSPEC_PYTHON": sys.executable,
           "PATCHSPEC_WATCH_SINCE": "0.26.0", "PYTHONPATH": str(REPO)}
    done = subprocess.run(["bash", str(REPO / "scripts" / "drift-watch.sh"), "pipeline-parallel:vllm"],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    return done.returncode, summary.read_text(), done.stderr


@pytest.fixture
def index(tmp_path, vllm_release):
    index = tmp_path / "index"
    index.mkdir()
    small_wheel(index, "0.26.0", "0.26.0")
    small_wheel(index, "0.30.0", "0.30.0")
    return index


def test_the_watch_passes_while_the_newest_release_takes_the_specs(tmp_path, index):
    code, summary, err = watch(tmp_path, index)
    assert code == 0, err + summary
    assert "## pipeline-parallel on the newest vllm (drift exit 0)" in summary
    assert ("unchanged: scheduler-running-cap#0 loop_guard Scheduler.schedule at vllm/v1/core/sched/scheduler.py"
            in summary)
    assert "| vllm-0.26.0 (v0.26.0) | vllm-0.30.0 (v0.30.0) |" in summary


def test_the_watch_fails_when_a_new_release_breaks_an_anchor(tmp_path, index):
    def drop_anchor(rel: str, text: str) -> str:
        return text.replace(ANCHOR, "while token_budget > 0 and req_index < len(self.running):") \
            if rel.endswith("sched/scheduler.py") else text
    small_wheel(index, "0.34.0", "0.33.0", drop_anchor)
    code, summary, err = watch(tmp_path, index)
    assert code == 1, err + summary
    assert "pipeline-parallel: the newest vllm breaks the spec" in err
    assert "## pipeline-parallel on the newest vllm (drift exit 4)" in summary
    assert "anchor-missing: scheduler-running-cap#0 loop_guard Scheduler.schedule" in summary
    assert "| vllm-0.26.0 (v0.26.0) | vllm-0.30.0 (v0.30.0) | vllm-0.34.0 (v0.33.0) |" in summary
