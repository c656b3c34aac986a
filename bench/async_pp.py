"""Generated tokens/s of a real vLLM 0.30.0 CPU engine at pipeline size 2 with async scheduling on against
off, the fix applied (cpu-pipeline-eager, pipeline-parallel and pipeline-transfer), side by side in one run.

32 concurrent greedy requests on the e2e tier's tiny Llama (``--hidden``, 128 by default), eager; the runs
alternate off, on, off, on, ... (``--runs`` pairs) and the medians are compared. Everything is unapplied
at the end. The last line: ``greedy_match=<0|1> async_vs_sync=<ratio> sync_tok_s=<x> async_tok_s=<y>``.
Usage: python bench/async_pp.py [--runs N] [--hidden H]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
import e2e_harness as h  # noqa: E402

REQUESTS = 32
MAX_TOKENS = 32


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="pairs of runs (off, on); medians reported")
    parser.add_argument("--hidden", type=int, default=128)
    args = parser.parse_args()
    env = h.venv()
    root = h.site_packages(env)
    work = Path(tempfile.mkdtemp(prefix="patchspec-bench-async-"))
    print(f"logs: {work}, load {os.getloadavg()[0]:.1f}", flush=True)
    model = h.write_checkpoint(env, work / "model", args.hidden)
    prompts = h.token_prompts(REQUESTS, 16, 48, seed=2)
    runs: dict[bool, list[dict]] = {False: [], True: []}
    h.unapply_leftovers(root)
    applied = []
    try:
        for spec in h.SPECS:
            h.apply(spec, root)
            applied.append(spec)
        for i in range(args.runs):
            for on in (False, True):
                runs[on].append(h.run_engine(env, model, 2, prompts, MAX_TOKENS, work / f"async_{on}_{i}.log",
                                             async_scheduling=on))
    finally:
        for spec in applied:
            h.unapply(spec, root)
    rate = {on: statistics.median(r["generated"] / r["generate_s"] for r in results) for on, results in runs.items()}
    for on, results in runs.items():
        each = ", ".join(f"{r['generated'] / r['generate_s']:.0f}" for r in results)
        print(f"async {'on' if on else 'off'}: {len(results)} run(s), {each} tokens/s")
    same = all(r["tokens"] == runs[False][0]["tokens"] for results in runs.values() for r in results)
    print(f"greedy_match={int(same)} async_vs_sync={rate[True] / rate[False]:.2f} sync_tok_s={rate[False]:.0f} "
          f"async_tok_s={rate[True]:.0f}")


if __name__ == "__main__":
    main()
