"""The corpus: real packages from PyPI patched wherever their top-level names reach, each change checked
against what the package's own program runs (tests/corpus/harness.py; the list is tests/corpus/packages.toml).

Usage: nice -n 10 python bench/corpus.py [--only NAME ...] [--slice] [--work DIR]. Prints one line per
package, the classes of what went wrong with one example each, and last the totals as key=value.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.corpus import harness  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", action="append", default=[], help="a package's name (repeatable)")
    parser.add_argument("--slice", action="store_true", help="only the packages the default test run takes")
    parser.add_argument("--work", help="where the roots are copied and patched (default: a temporary directory)")
    args = parser.parse_args()
    chosen = [p for p in harness.packages() if (not args.only or p.name in args.only) and (p.slice or not args.slice)]
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="corpus-") as tmp:
        tallies, total = harness.run_all(chosen, Path(args.work or tmp), log=lambda s: print(s, flush=True))
    for line in harness.report(tallies, total):
        print(line)
    figures = {"packages": len(tallies), **harness.counts_total(total),
               "classes": len(total.classes), "seconds": round(time.monotonic() - start)}
    print(" ".join(f"{k}={v}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
