"""How apply and check grow: with the number of targets in one file, and with the number of profiles beside
the spec.

Usage: python bench/growth.py [--repeat N]. Everything is generated: a package ``gen`` (one file, one
function per target, with a pip-style dist-info), a spec inserting one statement into each function, and
release profiles beside it of which exactly one matches (``--release auto`` has to tell which). Each verb
runs cold (``bench/cold.py``): as in a fresh ``patchspec`` process. Prints the medians per size; the last line
is key=value figures:

- ``<verb>_targets_slope_ratio``: the cost of one more target between 50 and 100 targets over that between
  1 and 50 (1 for linear growth, 2 for quadratic);
- ``<verb>_profiles_ratio``: the time at 200 profiles over the time at 10 (1 for flat);
- each for wall time (``apply``, ``check``) and for the process's CPU time (``apply_cpu``, ``check_cpu``),
  which another job on a shared machine disturbs less.
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import shutil
import statistics
import tempfile
from pathlib import Path

from cold import cold

from patchspec.verbs import reading, writing

SNIPPETS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "demo_spec" / "snips"
TARGETS = (1, 10, 25, 50, 100)
PROFILES = (10, 50, 100, 200)
PROFILE_TARGETS = 10


def function(index: int) -> str:
    return (f"def f{index}(self, items):\n"
            f"    \"\"\"Function {index}.\"\"\"\n"
            f"    total = 0\n"
            f"    for item in items:\n"
            f"        if item > {index}:\n"
            f"            total += item\n"
            f"    marker_call(total, {index})\n"
            f"    return total\n\n\n")


def make_root(directory: Path, targets: int) -> Path:
    """``gen`` 1.0 installed as pip does: its files, METADATA, top_level.txt and a RECORD of their hashes."""
    files = {"gen/__init__.py": "", "gen/mod.py": "import os\n\n\n" + "".join(function(i) for i in range(targets))}
    dist = "gen-1.0.dist-info"
    files[f"{dist}/METADATA"] = "Metadata-Version: 2.1\nName: gen\nVersion: 1.0\n\n"
    files[f"{dist}/top_level.txt"] = "gen\n"
    record = []
    for rel, text in files.items():
        (directory / rel).parent.mkdir(parents=True, exist_ok=True)
        (directory / rel).write_text(text)
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{rel},sha256={digest},{len(text.encode())}")
    (directory / f"{dist}/RECORD").write_text("\n".join(record + [f"{dist}/RECORD,,"]) + "\n")
    return directory


def make_spec(directory: Path, targets: int, profile_count: int) -> str:
    """The spec, and ``profile_count`` profiles beside it: ``r1`` matches gen 1.0, the others pin 0.x."""
    lines = ["spec: 1", "name: gen", "summary: one insertion per generated function.",
             f"snippets: {{package: demo_snips, alias: _p, path: {SNIPPETS}}}", "targets:"]
    for i in range(targets):
        lines += [f"  - id: t{i}", "    file: gen/mod.py", f"    function: f{i}", "    transforms:",
                  "      - insert_before: {anchor: \"marker_call(...)\", code: \"_p.stop(self, 1)\"}"]
    releases = directory / "releases"
    releases.mkdir(parents=True)
    (directory / "gen.yaml").write_text("\n".join(lines) + "\n")
    fingerprints = "".join(f"      t{i}: '{i:016x}'\n" for i in range(targets))
    for n in range(profile_count):
        name, pin = ("r1", "==1.0") if n == 0 else (f"old{n}", f"==0.{n}")
        (releases / f"{name}.yaml").write_text(f"release: {name}\npackages:\n  gen:\n    versions: '{pin}'\n"
                                               f"    distributions: [gen]\nspecs:\n  gen:\n"
                                               f"    fingerprints:\n{fingerprints}")
    return str(directory / "gen.yaml")


def measure(scratch: Path, name: str, targets: int, profile_count: int, repeat: int) -> dict[str, float]:
    """Medians of apply and then check on a fresh root: wall and CPU seconds."""
    spec = make_spec(scratch / name / "spec", targets, profile_count)
    runs: dict[str, list[float]] = {"apply_s": [], "apply_cpu_s": [], "check_s": [], "check_cpu_s": []}
    for run in range(repeat):
        root = make_root(scratch / name / f"root{run}", targets)
        for verb, timing in (("apply", cold(lambda root=root: writing.apply(spec, "auto", str(root), verify=False))),
                             ("check", cold(lambda root=root: result.append(reading.check(spec, "auto", str(root)))))):
            runs[f"{verb}_s"].append(timing[0])
            runs[f"{verb}_cpu_s"].append(timing[1])
        assert result.pop().code == 0
        shutil.rmtree(root)
    return {key: statistics.median(values) for key, values in runs.items()}


result: list = []


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        by_targets, by_profiles = {}, {}
        for n in TARGETS:
            by_targets[n] = measure(scratch, f"t{n}", n, 1, args.repeat)
            print(f"targets={n} profiles=1 " + _shown(by_targets[n]), flush=True)
        for n in PROFILES:
            by_profiles[n] = measure(scratch, f"p{n}", PROFILE_TARGETS, n, args.repeat)
            print(f"targets={PROFILE_TARGETS} profiles={n} " + _shown(by_profiles[n]), flush=True)
    figures = {}
    for key in ("apply_s", "apply_cpu_s", "check_s", "check_cpu_s"):
        t = {n: row[key] for n, row in by_targets.items()}
        low, high = (t[50] - t[1]) / 49, (t[100] - t[50]) / 50
        name = key.removesuffix("_s")
        figures[f"{name}_per_target_s"] = f"{high:.4f}"
        figures[f"{name}_targets_slope_ratio"] = f"{high / low:.2f}" if low > 0 else "inf"
        figures[f"{name}_profiles_ratio"] = f"{by_profiles[PROFILES[-1]][key] / by_profiles[PROFILES[0]][key]:.2f}"
    print(" ".join(f"{k}={v}" for k, v in figures.items()))


def _shown(row: dict[str, float]) -> str:
    return " ".join(f"{k}={v:.4f}" for k, v in row.items())


if __name__ == "__main__":
    main()
