"""The command line's own start-up: ``patchspec --version`` against a bare ``python -c pass``.

Usage: python bench/startup.py [--repeat N]. Both run in this interpreter (the same ``site``), the CLI from
this checkout (``python -m patchspec --version`` with it first on ``PYTHONPATH``), alternating, N times each.
Last line: key=value figures (medians, seconds); the target is ``startup_vs_bare <= 8``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    bare, cli = [], []
    for _ in range(args.repeat):
        bare.append(timed([sys.executable, "-c", "pass"], env))
        cli.append(timed([sys.executable, "-m", "patchspec", "--version"], env))
    b, c = statistics.median(bare), statistics.median(cli)
    print(f"load={os.getloadavg()[0]:.2f} runs={args.repeat}")
    print(f"bare_s={b:.4f} startup_s={c:.4f} startup_vs_bare={c / b:.2f}")


if __name__ == "__main__":
    main()
