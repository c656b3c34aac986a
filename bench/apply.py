"""apply, check, one plain libcst parse of the touched files, and `patch -p1` of the same change, side by side.

Usage: python bench/apply.py [--repeat N]. The root is vLLM 0.30.0 from PyPI (cached), plus vllm-gaudi
main when PATCHSPEC_VLLM_GAUDI is set. apply runs without its run-time proof; apply and check run cold
(``bench/cold.py``), as in a fresh process; check on the root apply just wrote. Last line: key=value figures
(medians over the repeats), wall time and, as ``*_cpu_s``, the process's CPU time (which another job on a
shared machine disturbs less).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import libcst
from cold import cold

from patchspec.difftext import unified
from patchspec.prepare import prepare
from patchspec.releases.cache import git_tag_root, pypi_root
from patchspec.verbs import reading, writing

REPO = Path(__file__).resolve().parent.parent
SPEC = str(REPO / "specs" / "pipeline-parallel.yaml")


def sources() -> list[Path]:
    roots = [pypi_root("vllm==0.30.0")]
    if os.environ.get("PATCHSPEC_VLLM_GAUDI"):
        roots.append(git_tag_root(Path(os.environ["PATCHSPEC_VLLM_GAUDI"]), "main", "vllm_gaudi"))
    return roots


def fresh_root(scratch: Path, name: str) -> Path:
    root = scratch / name
    for source in sources():
        shutil.copytree(source, root, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".complete"))
    return root


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    figures: dict[str, list[float]] = {"apply_s": [], "check_s": [], "parse_s": [], "patch_s": [],
                                       "apply_cpu_s": [], "check_cpu_s": [], "parse_cpu_s": []}
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        pristine = fresh_root(scratch, "pristine")
        prepared = prepare(SPEC, "v0.30.0", str(pristine))
        diff = "".join(unified(rel, old, new) for rel, old, new in reading.diff_texts(prepared))
        (scratch / "change.diff").write_text(diff)
        touched = [pristine / rel for rel in prepared.plan.files]
        print(f"spec touches {len(touched)} file(s), "
              f"{sum(len(p.read_text().splitlines()) for p in touched)} lines: "
              + ", ".join(p.relative_to(pristine).as_posix() for p in touched))
        for run in range(args.repeat):
            root = fresh_root(scratch, f"apply{run}")
            wall, cpu = cold(lambda root=root: writing.apply(SPEC, "v0.30.0", str(root), verify=False))
            figures["apply_s"].append(wall)
            figures["apply_cpu_s"].append(cpu)
            result = []
            wall, cpu = cold(lambda result=result, root=root: result.append(reading.check(SPEC, "v0.30.0", str(root))))
            figures["check_s"].append(wall)
            figures["check_cpu_s"].append(cpu)
            assert result[0].code == 0, result[0].lines
            texts = [p.read_text() for p in touched]
            wall, cpu = cold(lambda texts=texts: [libcst.parse_module(t) for t in texts])
            figures["parse_s"].append(wall)
            figures["parse_cpu_s"].append(cpu)
            target = fresh_root(scratch, f"patch{run}")
            figures["patch_s"].append(timed(lambda target=target: subprocess.run(
                ["patch", "-p1", "-s", "-i", str(scratch / "change.diff")], cwd=target, check=True)))
            print(f"run {run}: " + " ".join(f"{k}={v[-1]:.3f}" for k, v in figures.items()), flush=True)
    med = {k: statistics.median(v) for k, v in figures.items()}
    print(" ".join(f"{k}={v:.3f}" for k, v in med.items()) + f" apply_vs_parse={med['apply_s'] / med['parse_s']:.2f}"
          f" apply_vs_parse_cpu={med['apply_cpu_s'] / med['parse_cpu_s']:.2f}")


if __name__ == "__main__":
    main()
