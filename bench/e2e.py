"""Generated tokens/s of a real vLLM 0.30.0 CPU engine at pipeline size 2, pipeline-parallel fix vs stock.

32 concurrent greedy requests, eager, one run of each; cpu-pipeline-eager is applied throughout (without
it stock size 2 crashes in eager mode) and everything is unapplied at the end. Two checkpoints: the e2e
tier's tiny Llama (hidden 128: a step costs mostly engine overhead) at size 1, size 2 stock and size 2
with the fix; and the same shape at hidden 1024 (a step costs compute, where overlapping stages can pay)
at size 2 stock and fixed. The last line: ``greedy_match=<k>/<n> top1_match=<k>/<n>
pp2_fix_vs_stock=<ratio>`` for the tier's model (size 2 with the fix against size 1; the ratio is
generated tokens/s, fix over stock). Usage: python bench/e2e.py
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
import e2e_harness as h  # noqa: E402

REQUESTS = 32
MAX_TOKENS = 64
WIDE = 1024


def main() -> None:
    env = h.venv()
    root = h.site_packages(env)
    work = Path(tempfile.mkdtemp(prefix="patchspec-bench-e2e-"))
    print(f"logs: {work}", flush=True)
    models = {"h128": h.write_checkpoint(env, work / "h128"),
              f"h{WIDE}": h.write_checkpoint(env, work / f"h{WIDE}", WIDE)}
    prompts = h.token_prompts(REQUESTS, 16, 48, seed=2)
    scored = h.token_prompts(REQUESTS, 100, 300, seed=3)
    runs: dict[str, dict] = {}

    def run(model: str, pp: int, name: str, score: bool = False) -> None:
        runs[f"{model} {name}"] = h.run_engine(env, models[model], pp, prompts, MAX_TOKENS,
                                               work / f"{model}_{name}.log", scored=scored if score else None)

    h.unapply_leftovers(root)
    h.apply(h.EAGER_SPEC, root)
    try:
        run("h128", 1, "pp1", score=True)
        for model in models:
            run(model, 2, "pp2_stock")
        h.apply(h.PP_SPEC, root)
        try:
            run("h128", 2, "pp2_fix", score=True)
            run(f"h{WIDE}", 2, "pp2_fix")
        finally:
            h.unapply(h.PP_SPEC, root)
    finally:
        h.unapply(h.EAGER_SPEC, root)

    rate = {}
    for name, result in runs.items():
        rate[name] = result["generated"] / result["generate_s"]
        sizes = sorted({s["gen"] for s in result["steps"] if s["ctx"] == 0})
        print(f"{name}: startup {result['startup_s']:.1f} s, {result['generated']} tokens in "
              f"{result['generate_s']:.2f} s = {rate[name]:.0f} tokens/s, {len(result['steps'])} steps, "
              f"decode step sizes {sizes}, turn-taking steps {len(h.turn_taking_steps(result['steps']))}")
    one, fix = runs["h128 pp1"], runs["h128 pp2_fix"]
    greedy = sum(a == b for a, b in zip(one["tokens"], fix["tokens"], strict=True))
    agree, total, worst = h.top1_matches(one["scored"], fix["scored"])
    print(f"largest top-1 logprob difference: {worst:.2e}")
    print(f"h{WIDE}: pp2_fix_vs_stock={rate[f'h{WIDE} pp2_fix'] / rate[f'h{WIDE} pp2_stock']:.2f}")
    print(f"greedy_match={greedy}/{REQUESTS} top1_match={agree}/{total} "
          f"pp2_fix_vs_stock={rate['h128 pp2_fix'] / rate['h128 pp2_stock']:.2f}")


if __name__ == "__main__":
    main()
