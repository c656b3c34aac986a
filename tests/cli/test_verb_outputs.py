"""Every verb's output on the shipped specs stays byte-identical across a refactor of the layers: every verb
of the table (``cli.verbs.VERBS``) runs here, and a verb added to the table fails the test until it does.

The input is fixed: the shipped specs, their snippets and the gaudi-shaped fixture as they were at commit
``PINNED`` (read from the repository's history, so that a later change to a spec does not move it), the
files of vLLM 0.30.0 from PyPI that those specs patch or whose names their snippets use, with its
dist-info, and the fixture as ``vllm_gaudi/``. A run of every verb (JSON
envelope, and the lines a person reads where the verb writes nothing) is compared with
``tests/data/verb_outputs.json``, which was written by this same test (``PATCHSPEC_RECORD_OUTPUTS=1``) on the
code before the layers were moved (re-record it on main before a refactor when a verb's output changes on
purpose); paths under the root, the work directory and the repository are
replaced by ``<ROOT>``, ``<WORK>`` and ``<REPO>``. The drift cache is this run's own (a cached row keeps
the spec path of the run that filled it).
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest

from patchspec.cli import main
from patchspec.cli.verbs import VERBS
from patchspec.compiler.snippet_api import declared_uses
from patchspec.snippets import PackageFiles, package_dir
from patchspec.spec import load_spec
from tests.gaudi_shape import LAYOUT, PACKAGES

REPO = Path(__file__).resolve().parents[2]
EXPECTED = Path(__file__).resolve().parents[1] / "data" / "verb_outputs.json"
SPECS = ["pipeline-parallel", "pipeline-transfer", "cpu-pipeline-eager"]
RELEASE = "v0.30.0"
PINNED = "a3bc21a"   # main before the layers moved


def _named_files(spec_path: Path) -> set[str]:
    spec = load_spec(str(spec_path))
    return {t.file for t in spec.targets} | set(declared_uses(PackageFiles(package_dir(spec))))


@pytest.fixture(scope="module")
def work(vllm_release, tmp_path_factory):
    """``(root, work)``: the fixed root, and a work directory holding a copy of the shipped specs."""
    release = vllm_release("0.30.0")
    base = tmp_path_factory.mktemp("outputs")
    pinned = base / "pinned"
    pinned.mkdir()
    done = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", "-o", str(base / "pinned.tar"), PINNED,
                           "patchspec/specs", "patchspec/runtime_snippets", "tests/fixtures/gaudi_shape"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"no git history to read the specs at {PINNED} from: {done.stderr.strip()}")
    with tarfile.open(base / "pinned.tar") as archive:
        archive.extractall(pinned, filter="data")
    specs = shutil.copytree(pinned / "patchspec" / "specs", base / "work" / "specs")
    shutil.copytree(pinned / "patchspec" / "runtime_snippets", base / "work" / "runtime_snippets")
    root = base / "root"
    named = set().union(*(_named_files(specs / f"{name}.yaml") for name in SPECS))
    for rel in sorted(r for r in named if r.startswith("vllm/")):
        if (release / rel).is_file():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(release / rel, root / rel)
    for dist in release.glob("*.dist-info"):
        shutil.copytree(dist, root / dist.name)
    for package in PACKAGES:
        (root / package).mkdir(parents=True, exist_ok=True)
        (root / package / "__init__.py").write_text('"""Fixture package in the shape of vllm-gaudi."""\n')
    shape = pinned / "tests" / "fixtures" / "gaudi_shape"
    for name, rel in LAYOUT.items():
        if (shape / name).is_file():   # the fixture's files of then
            shutil.copyfile(shape / name, root / rel)
    return root, base / "work"


SCRATCH = re.compile(re.escape(str(Path(tempfile.gettempdir()) / "patchspec-demo-")) + r"[\w-]+")


def _run(argv: list[str], replace: dict[str, str]) -> dict:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    text = {"exit": int(code), "stdout": out.getvalue(), "stderr": err.getvalue()}
    for name in ("stdout", "stderr"):
        for path, placeholder in replace.items():
            text[name] = text[name].replace(path, placeholder)
        text[name] = SCRATCH.sub("<DEMO>", text[name])   # demo's scratch root
    return text


def _verb_of(argv: list[str]):
    """The row of the verb table an argument list runs (``profile new`` is a group and its action)."""
    return next(v for v in VERBS if v.name.split() == argv[:len(v.name.split())])


def verbs_not_run(argvs: list[list[str]], verbs=None) -> list[str]:
    """The verbs of the table (``VERBS``) that none of ``argvs`` runs: a verb added to the table is one
    until the session runs it."""
    verbs = VERBS if verbs is None else verbs
    run = {v.name for argv in argvs for v in verbs if v.name.split() == argv[:len(v.name.split())]}
    return sorted(v.name for v in verbs if v.name not in run)


def _session(root: Path, work: Path) -> dict[str, dict]:
    """Every verb, in an order that leaves the root as it was, each run as ``--json`` and (read-only
    verbs) as lines."""
    replace = {str(root): "<ROOT>", str(work): "<WORK>", str(REPO): "<REPO>"}
    spec = {name: str(work / "specs" / f"{name}.yaml") for name in SPECS}
    at = ["--release", RELEASE, "--root", str(root)]
    runs: list[tuple[str, list[str], bool]] = []
    for name in SPECS:
        runs += [(f"validate {name}", ["validate", spec[name]], True),
                 (f"check {name} before", ["check", spec[name], *at], True),
                 (f"compile {name}", ["compile", spec[name], *at, "-o", str(work / "out" / name)], True),
                 (f"diff {name}", ["diff", spec[name], *at, "--color", "never"], True),
                 (f"drift {name}", ["drift", spec[name], "--release", RELEASE, "--root", str(root)], True),
                 (f"drift {name} baseline", ["drift", spec[name], "--release", RELEASE, "--root", str(root),
                                             "--baseline", str(root)], True),
                 (f"matrix {name}", ["matrix", spec[name], "--release", RELEASE, "--root", str(root)], True)]
    runs += [("matrix markdown", ["matrix", spec["pipeline-parallel"], "--release", RELEASE, "--root", str(root),
                                  "--markdown"], True),
             ("status empty", ["status", "--root", str(root)], True),
             ("demo", ["demo", "--pypi", "vllm==0.30.0", "--spec", spec["pipeline-parallel"]], True),
             ("recover nothing", ["recover", "--root", str(root)], False),
             ("apply pipeline-parallel", ["apply", spec["pipeline-parallel"], *at], False),
             ("apply cpu-pipeline-eager", ["apply", spec["cpu-pipeline-eager"], *at], False),
             ("apply cpu-pipeline-eager again", ["apply", spec["cpu-pipeline-eager"], *at], False),
             ("apply pipeline-transfer", ["apply", spec["pipeline-transfer"], *at], False),
             ("check pipeline-parallel applied", ["check", spec["pipeline-parallel"], *at], True),
             ("check cpu-pipeline-eager applied", ["check", spec["cpu-pipeline-eager"], *at], True),
             ("check pipeline-transfer applied", ["check", spec["pipeline-transfer"], *at], True),
             ("drift pipeline-transfer applied", ["drift", spec["pipeline-transfer"], "--release", RELEASE,
                                                  "--root", str(root)], True),
             ("status applied", ["status", "--root", str(root)], True),
             ("verify pipeline-transfer without an interpreter", ["verify", "pipeline-transfer", "--root", str(root)],
              False),
             ("unapply pipeline-parallel", ["unapply", "pipeline-parallel", "--root", str(root)], False),
             ("unapply cpu-pipeline-eager", ["unapply", "cpu-pipeline-eager", "--root", str(root)], False),
             ("status after unapply", ["status", "--root", str(root)], True),
             ("forget pipeline-transfer", ["forget", spec["pipeline-transfer"], "--root", str(root)], False),
             ("unapply not applied", ["unapply", "pipeline-transfer", "--root", str(root)], False),
             ("check missing spec", ["check", str(work / "nope.yaml"), *at], False),
             ("profile new", ["profile", "new", "v9.9.9", "--root", str(root), "--spec", spec["pipeline-parallel"],
                              "--from", RELEASE, "--allow-broken"], False),
             ("init", ["init", "fix-step", "--root", str(root), "--target",
                       "vllm/v1/worker/cpu_model_runner.py:CPUModelRunner.warming_up_model",
                       "--dir", str(work / "init")], False),
             ("record nothing edited", ["record", "fix-none", "--root", str(root), "--dir", str(work / "record")],
              False)]
    assert not verbs_not_run([argv for _, argv, _ in runs]), verbs_not_run([argv for _, argv, _ in runs])
    out = {}
    for label, argv, readable in runs:
        if _verb_of(argv).json:
            out[label] = {"json": _run([*argv, "--json"], replace)}
        if readable or not _verb_of(argv).json:
            out.setdefault(label, {})["lines"] = _run(argv, replace)
    return out


def test_every_verb_prints_what_it_printed_before_the_layers_moved(work, tmp_path, monkeypatch):
    root, directory = work
    monkeypatch.setenv("PATCHSPEC_CACHE", str(tmp_path / "cache"))  # a drift cache of this run only
    got = _session(root, directory)
    if os.environ.get("PATCHSPEC_RECORD_OUTPUTS"):
        EXPECTED.parent.mkdir(exist_ok=True)
        EXPECTED.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(EXPECTED.read_text())
    for label in sorted(set(want) & set(got)):
        for form in want[label]:
            for part in ("exit", "stdout", "stderr"):
                assert got[label][form][part] == want[label][form][part], f"{label} ({form}) {part}"
    assert sorted(got) == sorted(want)
