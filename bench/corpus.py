"""The corpus: real packages from PyPI patched wherever their top-level names reach, each change checked
against what the package's own program runs (tests/corpus/harness.py; the list is tests/corpus/packages.toml).

Usage: nice -n 10 python bench/corpus.py [--only NAME ...] [--slice] [--work DIR] [--shard I/N]. Prints
one line per package, the classes found with one example each, and last the totals as key=value; each
package's tally is saved in the work directory, and `--report WORK ...` reports saved tallies (of shards
run at once, or a run cut short) without running anything.
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
    parser.add_argument("--most", type=int, help="judge at most this many transforms of a package, an even sample "
                        "of those generated (the proof's cost grows with them)")
    parser.add_argument("--shard", default="1/1", help="I/N: every Nth package from the Ith (run N at once)")
    parser.add_argument("--report", nargs="+", metavar="WORK", help="run nothing: report the tallies that runs "
                        "with these --work directories saved (of one package, the last directory's)")
    args = parser.parse_args()
    index, count = (int(n) for n in args.shard.split("/"))
    chosen = [p for p in harness.packages() if (not args.only or p.name in args.only) and (p.slice or not args.slice)]
    chosen = chosen[index - 1::count]
    start = time.monotonic()
    if args.report:
        tallies = harness.saved([Path(w) for w in args.report])
        total = harness.totals(tallies)
    else:
        with tempfile.TemporaryDirectory(prefix="corpus-") as tmp:
            tallies, total = harness.run_all(chosen, Path(args.work or tmp), log=lambda s: print(s, flush=True),
                                             most=args.most)
    for line in harness.report(tallies, total):
        print(line)
    seconds = total.seconds if args.report else time.monotonic() - start
    figures = {"packages": len(tallies), **harness.counts_total(total),
               "classes": len(total.classes), "seconds": round(seconds)}
    print(" ".join(f"{k}={v}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
