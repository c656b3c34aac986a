"""Every row of ``table.py`` on the real release it names: the vLLM wheel, with its paired vllm-gaudi
source when ``PATCHSPEC_VLLM_GAUDI`` is set. Per shipped spec, ``patchspec check --release auto`` (run as
a user runs it) must pick the row's profile, exit 1 when no target of a package under the root breaks,
else 4 naming exactly the row's broken targets; ``apply`` must then refuse by name and write nothing.
A ``breaks`` key that is no target id of the spec is a snippet binding: it must be named in a
``binding:`` line. The default run covers ``DEFAULT_VLLM``; every row runs with ``-m releases_all``.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchspec.errors import PatchspecError
from patchspec.install import installed
from patchspec.releases import profiles
from patchspec.releases.cache import git_tag_root, pypi_root
from patchspec.spec import load_spec
from tests.releases import DEFAULT_VLLM
from tests.releases.table import ROWS, Outcome, Release

REPO = Path(__file__).resolve().parents[2]
SPECS = sorted((REPO / "specs").glob("*.yaml"))
HOLDING = {"would-apply", "applied", "skipped"}


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "patchspec", *argv], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO)


def digest(root: Path) -> str:
    sha = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        sha.update(path.relative_to(root).as_posix().encode() + b"\0")
        if path.is_file():
            sha.update(hashlib.sha256(path.read_bytes()).digest())
    return sha.hexdigest()


def verify(spec_path: Path, outcome: Outcome, root: Path) -> None:
    """``outcome`` holds for ``spec_path`` on ``root`` (a pristine root of the row's release)."""
    spec = load_spec(spec_path)
    found = installed.scan(root)
    check = run("check", str(spec_path), "--root", str(root))
    said = check.stdout + check.stderr
    if outcome.profile is None:
        assert check.returncode == 2 and len(check.stderr.splitlines()) == 1, said
        assert not check.stdout, said
        if "obsolete" in outcome.why.lower():
            drift = run("drift", str(spec_path), "--root", str(root), "--no-cache")
            rows = [line for line in drift.stdout.splitlines()[:-1] if not line.startswith("not-checked:")]
            assert rows and all(line.startswith("obsolete:") for line in rows), drift.stdout
        return
    picked = profiles.select_release(profiles.releases_dir(spec_path), found, spec, str(root))
    assert picked == outcome.profile, said
    ids = {t.id for t in spec.targets}
    present = {t.id for t in spec.targets if (root / t.package).is_dir()}
    want = {k for k in outcome.breaks if k in present}
    bindings = {k for k in outcome.breaks if k not in ids}
    broken = {line.split()[2].split("#")[0] for line in check.stdout.splitlines()
              if line.split(":", 1)[0] not in HOLDING and not line.startswith("binding:")}
    assert broken == want, said
    binding_lines = [line for line in check.stdout.splitlines() if line.startswith("binding:")]
    assert all(any(key in line for line in binding_lines) for key in bindings), said
    assert bool(binding_lines) == bool(bindings), said
    assert check.returncode == (4 if want or bindings else 1), said
    if want or bindings:
        before = digest(root)
        apply = run("apply", str(spec_path), "--root", str(root))
        assert apply.returncode == 2 and len(apply.stderr.splitlines()) == 1, apply.stderr
        assert any(key in apply.stderr for key in want | bindings), apply.stderr
        assert digest(root) == before


def rows():
    for row in ROWS:
        marks = [pytest.mark.releases_all(default=row.vllm in DEFAULT_VLLM)]
        yield pytest.param(row, id=row.vllm, marks=marks)


@pytest.fixture
def release_root(copy_root):
    def make(row: Release) -> Path:
        parts = [pypi_root(f"vllm=={row.vllm}")]
        if os.environ.get("PATCHSPEC_VLLM_GAUDI"):
            parts.append(git_tag_root(Path(os.environ["PATCHSPEC_VLLM_GAUDI"]), row.gaudi, "vllm_gaudi"))
        return copy_root(*parts)
    return make


@pytest.mark.parametrize("row", list(rows()))
def test_release_row(release_root, row):
    root = release_root(row)
    for spec_path in SPECS:
        name = load_spec(spec_path).name
        assert name in row.specs, f"the row of vllm {row.vllm} says nothing of spec {name}"
        verify(spec_path, row.specs[name], root)


# The test's own logic, on the toy package: a release that takes the spec, one that breaks it, one with
# no profile; and a row that misreads the broken release must fail.

def toy_release(dest: Path, version: str, a_text: str | None = None) -> Path:
    from tests.state.toy import RELEASES

    files = {**RELEASES["1.0"], f"pkg-{version}.dist-info/METADATA": f"Name: pkg\nVersion: {version}\n",
             f"pkg-{version}.dist-info/top_level.txt": "pkg\n"}
    if a_text is not None:
        files["pkg/a.py"] = a_text
    for rel, text in files.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(text)
    return dest


@pytest.fixture
def toy_rows(tmp_path):
    from tests.state.toy import write_spec

    spec = Path(write_spec(tmp_path / "spec"))
    holds = toy_release(tmp_path / "holds", "1.0")
    broken = toy_release(tmp_path / "broken", "3.0", "def target(self):\n    x = 3\n")
    unpaired = toy_release(tmp_path / "unpaired", "5.0")
    assert run("profile", "new", "r3", "--root", str(broken), "--spec", str(spec), "--allow-broken").returncode == 4
    return spec, holds, broken, unpaired


def test_the_row_check_on_toy_releases(toy_rows):
    spec, holds, broken, unpaired = toy_rows
    verify(spec, Outcome("r1"), holds)
    verify(spec, Outcome("r3", breaks={"a": "the call the anchor names is gone"}), broken)
    verify(spec, Outcome(None, why="no profile: 5.0 is not supported"), unpaired)


@pytest.mark.parametrize("outcome", [Outcome("r3"), Outcome("r3", breaks={"b": "misread"}), Outcome("r1"),
                                     Outcome(None)])
def test_a_row_that_misreads_the_release_fails(toy_rows, outcome):
    spec, _, broken, _ = toy_rows
    with pytest.raises((AssertionError, PatchspecError)):
        verify(spec, outcome, broken)
