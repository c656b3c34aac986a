"""Generated tokens/s of a real vLLM 0.30.0 CPU engine at pipeline size 2, pipeline-parallel fix vs stock.

32 concurrent greedy requests on the e2e tier's tiny Llama, eager, one run of each: size 1 (the
reference), size 2 stock and size 2 with the pipeline-parallel spec; cpu-pipeline-eager is applied in all
three (without it stock size 2 crashes in eager mode). Everything is unapplied at the end. The last line:
``greedy_match=<k>/<n> top1_match=<k>/<n> pp2_fix_vs_stock=<ratio>`` (size 2 with the fix against size 1;
the ratio is generated tokens/s, fix over stock). Usage: python bench/e2e.py
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
import e2e_harness as h  # noqa: E402

REQUESTS = 32
MAX_TOKENS = 64


def main() -> None:
    env = h.venv()
    root = h.site_packages(env)
    work = Path(tempfile.mkdtemp(prefix="patchspec-bench-e2e-"))
    print(f"logs: {work}", flush=True)
    model = h.write_checkpoint(env, work / "model")
    prompts = h.token_prompts(REQUESTS, 16, 48, seed=2)
    scored = h.token_prompts(REQUESTS, 100, 300, seed=3)
    h.unapply_leftovers(root)
    h.apply(h.EAGER_SPEC, root)
    try:
        runs = {"pp1": h.run_engine(env, model, 1, prompts, MAX_TOKENS, work / "pp1.log", scored=scored),
                "pp2_stock": h.run_engine(env, model, 2, prompts, MAX_TOKENS, work / "pp2_stock.log")}
        h.apply(h.PP_SPEC, root)
        try:
            runs["pp2_fix"] = h.run_engine(env, model, 2, prompts, MAX_TOKENS, work / "pp2_fix.log",
                                           scored=scored)
        finally:
            h.unapply(h.PP_SPEC, root)
    finally:
        h.unapply(h.EAGER_SPEC, root)

    rate = {}
    for name, run in runs.items():
        rate[name] = run["generated"] / run["generate_s"]
        sizes = sorted({s["gen"] for s in run["steps"] if s["ctx"] == 0})
        print(f"{name}: startup {run['startup_s']:.1f} s, {run['generated']} tokens in "
              f"{run['generate_s']:.2f} s = {rate[name]:.0f} tokens/s, {len(run['steps'])} steps, "
              f"decode step sizes {sizes}, turn-taking steps {len(h.turn_taking_steps(run['steps']))}")
    greedy = sum(a == b for a, b in zip(runs["pp1"]["tokens"], runs["pp2_fix"]["tokens"], strict=True))
    agree, total, worst = h.top1_matches(runs["pp1"]["scored"], runs["pp2_fix"]["scored"])
    print(f"largest top-1 logprob difference: {worst:.2e}")
    print(f"greedy_match={greedy}/{REQUESTS} top1_match={agree}/{total} "
          f"pp2_fix_vs_stock={rate['pp2_fix'] / rate['pp2_stock']:.2f}")


if __name__ == "__main__":
    main()
