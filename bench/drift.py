"""Benchmark: ``patchspec drift`` over a whole release root, cold and with a warm cache.

Cold: an empty drift cache (every target file parsed and fingerprinted); warm: the cache filled by the
cold run (files read and hashed only). The root is vLLM 0.30.0's wheel, plus vllm-gaudi main when
PATCHSPEC_VLLM_GAUDI names its git directory. The last line is ``key=value`` figures.

    python bench/drift.py [--spec specs/pipeline-parallel.yaml] [--root DIR] [--runs 3]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from patchspec.releases import cache, report  # noqa: E402


def release_root(work: Path) -> Path:
    """vLLM 0.30.0 (and vllm-gaudi main when a checkout is given) merged into one root."""
    parts = [cache.pypi_root("vllm==0.30.0")]
    if os.environ.get("PATCHSPEC_VLLM_GAUDI"):
        parts.append(cache.git_tag_root(Path(os.environ["PATCHSPEC_VLLM_GAUDI"]), "main", "vllm_gaudi"))
    root = work / "root"
    for part in parts:
        shutil.copytree(part, root, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".complete"))
    return root


def timed(spec: str, root: str) -> tuple[float, report.DriftResult]:
    start = time.perf_counter()
    result = report.drift(spec, root)
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default=str(REPO / "specs" / "pipeline-parallel.yaml"))
    parser.add_argument("--root", help="a release root (default: vLLM 0.30.0 [+ vllm-gaudi main])")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        root = args.root or str(release_root(work))
        cold, warm = [], []
        for run in range(args.runs):
            os.environ["PATCHSPEC_CACHE"] = str(work / f"cache-{run}")  # an empty drift cache
            seconds, result = timed(args.spec, root)
            cold.append(seconds)
            warm += [timed(args.spec, root)[0] for _ in range(3)]
    counts = {}
    for row in result.rows:
        counts[row.drift] = counts.get(row.drift, 0) + 1
    files = len({r.file for r in result.rows if r.drift != "not-checked"})
    cold_s, warm_s = statistics.median(cold), statistics.median(warm)
    print(f"spec {Path(args.spec).name}: {len(result.rows)} transforms in {files} file(s) of {root}; "
          f"release {result.release}; {counts}")
    print(f"cold (empty cache): {cold_s:.3f} s  warm (cached by file hash): {warm_s:.3f} s  "
          f"(median of {len(cold)} and {len(warm)} runs; the first cold run, in a fresh process: "
          f"{cold[0]:.3f} s)")
    print(f"cold_s={cold_s:.3f} first_cold_s={cold[0]:.3f} warm_s={warm_s:.3f} "
          f"cold_vs_warm={cold_s / warm_s:.1f} "
          f"transforms={len(result.rows)} files={files} exit={result.code}")


if __name__ == "__main__":
    main()
