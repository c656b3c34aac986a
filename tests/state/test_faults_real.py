"""The fault tier on a real root: the files the shipped pipeline-parallel spec patches in vLLM 0.30.0 from
PyPI (with its dist-info) and the gaudi-shaped fixture as ``vllm_gaudi/``, so CI runs it without a
vllm-gaudi checkout. By default, one point of each kind for every file the spec patches, killed
(SIGKILL) and interrupted (SIGINT), then recovered; one point of each kind is also followed by apply and
unapply. ``-m faults_exhaustive`` runs every point of apply and unapply, each followed by every writing
verb."""
from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from patchspec.compiler.snippet_api import declared_uses
from patchspec.errors import PatchspecError
from patchspec.install import txn
from patchspec.install.root import Root
from patchspec.install.state import locked
from patchspec.snippets import PackageFiles, package_dir
from patchspec.spec import load_spec
from patchspec.verbs import writing
from tests.gaudi_shape import fixture_root
from tests.state.toy import points, tree

REPO = Path(__file__).resolve().parents[2]
SPEC = str(REPO / "specs" / "pipeline-parallel.yaml")
RELEASE = "v0.30.0"


def _vllm_files() -> list[str]:
    """The vLLM files the spec patches and those its snippets' USES name (the binding check reads them)."""
    spec = load_spec(SPEC)
    named = {t.file for t in spec.targets} | set(declared_uses(PackageFiles(package_dir(spec))))
    return sorted(rel for rel in named if rel.startswith("vllm/"))


VLLM_FILES = _vllm_files()


@pytest.fixture(scope="module")
def real(vllm_release, tmp_path_factory):
    """``(fresh, pristine tree, patched tree)``; ``fresh("pristine" | "patched")`` copies a root."""
    release = vllm_release("0.30.0")
    base = tmp_path_factory.mktemp("real")
    pristine = base / "pristine"
    for rel in VLLM_FILES:
        (pristine / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(release / rel, pristine / rel)
    for dist in release.glob("*.dist-info"):
        shutil.copytree(dist, pristine / dist.name)
    shutil.copytree(fixture_root(), pristine, dirs_exist_ok=True)
    patched = shutil.copytree(pristine, base / "patched")
    writing.apply(SPEC, RELEASE, str(patched))
    copies = iter(range(10**6))

    def fresh(which: str) -> Path:
        return shutil.copytree(pristine if which == "pristine" else patched, base / f"copy{next(copies)}")
    return fresh, tree(pristine), tree(patched)


def _argv(verb: str, root: Path) -> list[str]:
    return ["apply", SPEC, "--release", RELEASE, "--root", str(root)] if verb == "apply" else \
        ["unapply", "pipeline-parallel", "--root", str(root)]


def _writes(verb: str, root: Path, monkeypatch) -> dict[str, bytes | None]:
    """What the verb hands the writer on this root (computed once: the children below only write)."""
    captured = {}
    monkeypatch.setattr(txn, "commit", lambda r, writes: captured.update(writes))
    writing.apply(SPEC, RELEASE, str(root)) if verb == "apply" else writing.unapply("pipeline-parallel", str(root))
    monkeypatch.undo()
    return captured


def _commit_in_child(root: Path, writes, env: dict[str, str]) -> int:
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.environ.update(env)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            with locked(Root.open(root), 5):  # as the verb holds it
                txn.commit(Root.open(root), writes)
        except KeyboardInterrupt:
            code = 130
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _one_of_each_kind_per_file(found):
    """The first point of each kind for each file: the patched files, their pristine copies, the kept old
    files, the record, the journal, one snippet file (the toy tier covers every snippet file's points)."""
    seen, out = set(), []
    for number, kind, path in found:
        key = (kind, path.removesuffix(txn.TMP_SUFFIX))
        if "/_patchspec_runtime/pipeline_parallel/" in key[1] and not key[1].endswith("/__init__.py"):
            continue
        if key not in seen:
            seen.add(key)
            out.append((number, kind, path))
    return out


def _writing_verb(verb: str, root: Path) -> None:
    try:
        writing.apply(SPEC, RELEASE, str(root)) if verb == "apply" else \
            writing.unapply("pipeline-parallel", str(root)) if verb == "unapply" else writing.recover(str(root))
    except PatchspecError as exc:
        assert verb == "unapply" and "is not applied" in str(exc)


def _run(real, verb, tmp_path, monkeypatch, exhaustive: bool):
    fresh, pristine, patched = real
    start = "pristine" if verb == "apply" else "patched"
    before = pristine if verb == "apply" else patched
    writes = _writes(verb, fresh(start), monkeypatch)
    found = points(_argv(verb, fresh(start)), tmp_path / "trace")
    chosen = found if exhaustive else _one_of_each_kind_per_file(found)
    followed = set()
    for number, kind, path in chosen:
        where = f"{verb} point {number}/{len(found)} ({kind} {path})"
        for action, expected in (("int", 130), ("kill", -9)):
            root = fresh(start)
            assert _commit_in_child(root, writes, {txn.FAULT_ENV: f"{number}:{action}"}) == expected, where
            if action == "int":
                assert tree(root) == before, where
                continue
            follow = ("apply", "unapply", "recover") if exhaustive or kind not in followed else ("recover",)
            followed.add(kind)
            for verb_after in follow:
                copy = shutil.copytree(root, tmp_path / f"after-{number}-{verb_after}")
                _writing_verb(verb_after, copy)
                assert tree(copy) in (pristine, patched), f"{where}, then {verb_after}"
                if tree(copy) == patched:
                    writing.unapply("pipeline-parallel", str(copy))
                assert tree(copy) == pristine, f"{where}, then {verb_after}, then unapply"
                shutil.rmtree(copy)
            shutil.rmtree(root)
    return len(found), len(chosen)


@pytest.mark.parametrize("verb", ["apply", "unapply"])
def test_real_root_kill_points(real, verb, tmp_path, monkeypatch):
    total, run = _run(real, verb, tmp_path, monkeypatch, exhaustive=False)
    assert run >= 6 * 3 and run <= total


@pytest.mark.faults_exhaustive
@pytest.mark.parametrize("verb", ["apply", "unapply"])
def test_real_root_every_kill_point(real, verb, tmp_path, monkeypatch):
    _run(real, verb, tmp_path, monkeypatch, exhaustive=True)
