"""Generated tokens/s of a real vLLM 0.30.0 CPU engine at pipeline size 2, pipeline-parallel fix vs stock,
and whether the two stages compute at the same time.

32 concurrent greedy requests, eager; cpu-pipeline-eager is applied throughout (without it stock size 2
crashes in eager mode) and everything is unapplied at the end. Two checkpoints: the e2e tier's tiny
Llama (hidden 128: a step costs mostly engine overhead) at size 1, size 2 stock and size 2 with the fix;
and the same shape at hidden 1024 (a step costs compute, where overlapping stages can pay) at size 2
stock and fixed. ``--runs N`` repeats the size-2 runs and reports medians.

Each size-2 run records the wall-clock spans of every worker step, model forward, wait for the previous
stage's tensors and sampling call in both worker processes, and of the scheduler's ``schedule`` and
``update_from_output`` in the engine core (``tests/e2e/reads/sitecustomize.py``). From them: the overlap
(time both stages run a forward / time either does) and the per-step breakdown in milliseconds
(``stage_times``). Bubbles: steps that carried every unfinished request, so the other stage had nothing
to do (``e2e_harness.bubble_steps``), over all steps.

The last line: ``greedy_match=<k>/<n> top1_match=<k>/<n> pp2_fix_vs_stock=<ratio>
pp2_fix_vs_stock_h1024=<ratio> overlap=<fraction> bubbles=<fraction> stock_spread=<ratio>`` (size 2
with the fix against size 1 on the tier's model; ratios are generated tokens/s, fix over stock; overlap
and bubbles of the fix at hidden 1024; stock_spread: the fastest of stock's size-2 runs at hidden 128 over
its slowest, how stable the baseline is). Each configuration's line gives every run's tokens/s and steps.
Usage: python bench/e2e.py [--runs N]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
import e2e_harness as h  # noqa: E402

REQUESTS = 32
MAX_TOKENS = 64
WIDE = 1024


def union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def length(spans: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in spans)


def intersect(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def stage_times(result: dict) -> dict:
    """Overlap of the two stages' forwards and the per-step breakdown (milliseconds per step, within the
    generation window): per stage, the forward, the wait for the previous stage's tensors, the rest of
    the worker step (preparing inputs, sending on), the sampling call and the time outside both (waiting
    for the engine core's next step, through the executor's message queues); in the engine core, its
    scheduling and its handling of a step's output."""
    t0, t1 = result["generate_window"]

    def spans(rank: int, kind: str) -> list[tuple[float, float]]:
        return union([(max(s, t0), min(e, t1)) for r, k, s, e in result["timing"]
                      if r == rank and k == kind and e > t0 and s < t1])
    forward = [spans(rank, "forward") for rank in (0, 1)]
    either = length(union(forward[0] + forward[1]))
    out = {"overlap": length(intersect(forward[0], forward[1])) / either if either else 0.0}
    steps = len(spans(0, "step"))
    for rank in (0, 1):
        step, recv, sample = (length(spans(rank, kind)) for kind in ("step", "recv", "sample"))
        parts = {"forward": length(forward[rank]), "recv_wait": recv,
                 "rest_of_step": step - length(forward[rank]) - recv, "sample": sample,
                 "outside": (t1 - t0) - step - sample}
        out[f"stage{rank}"] = {k: 1000 * v / steps for k, v in parts.items()}
    out["core"] = {kind: 1000 * length(spans(-1, kind)) / steps for kind in ("schedule", "update")}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1, help="repeat each size-2 run, report medians")
    args = parser.parse_args()
    env = h.venv()
    root = h.site_packages(env)
    work = Path(tempfile.mkdtemp(prefix="patchspec-bench-e2e-"))
    print(f"logs: {work}", flush=True)
    models = {"h128": h.write_checkpoint(env, work / "h128"),
              f"h{WIDE}": h.write_checkpoint(env, work / f"h{WIDE}", WIDE)}
    prompts = h.token_prompts(REQUESTS, 16, 48, seed=2)
    scored = h.token_prompts(REQUESTS, 100, 300, seed=3)
    runs: dict[str, list[dict]] = {}

    def run(model: str, pp: int, name: str, score: bool = False) -> None:
        key = f"{model} {name}"
        runs.setdefault(key, []).append(h.run_engine(
            env, models[model], pp, prompts, MAX_TOKENS, work / f"{model}_{name}_{len(runs.get(key, []))}.log",
            scored=scored if score else None, timing=pp == 2))

    with h.patched(root) as apply:
        apply(h.EAGER_SPEC)
        run("h128", 1, "pp1", score=True)
        for _ in range(args.runs):
            for model in models:
                run(model, 2, "pp2_stock")
        apply(h.PP_SPEC)
        run("h128", 2, "pp2_fix", score=True)
        for i in range(args.runs):
            if i:
                run("h128", 2, "pp2_fix")
            run(f"h{WIDE}", 2, "pp2_fix")

    rate, overlap, bubbles = {}, {}, {}
    for name, results in runs.items():
        each = [r["generated"] / r["generate_s"] for r in results]
        rate[name] = statistics.median(each)
        line = (f"{name}: {len(results)} run(s), median {rate[name]:.0f} tokens/s (each: "
                f"{', '.join(f'{x:.0f}' for x in each)}), steps {', '.join(str(len(r['steps'])) for r in results)}")
        if "timing" in results[0]:  # size 2
            bubbles[name] = statistics.median(len(h.bubble_steps(r["steps"])) / len(r["steps"]) for r in results)
            line += f", bubbles {bubbles[name]:.3f}"
            times = [stage_times(r) for r in results]
            overlap[name] = statistics.median(t["overlap"] for t in times)
            line += f", overlap {overlap[name]:.2f}"
            line += ", ms per step"
            for part in ("stage0", "stage1", "core"):
                medians = {k: statistics.median(t[part][k] for t in times) for k in times[0][part]}
                line += f"; {part}: " + ", ".join(f"{k} {v:.1f}" for k, v in medians.items())
        print(line, flush=True)
    one, fix = runs["h128 pp1"][0], runs["h128 pp2_fix"][0]
    greedy = sum(a == b for a, b in zip(one["tokens"], fix["tokens"], strict=True))
    agree, total, worst = h.top1_matches(one["scored"], fix["scored"])
    print(f"largest top-1 logprob difference: {worst:.2e}")
    wide = f"h{WIDE} pp2_fix"
    stock = [r["generated"] / r["generate_s"] for r in runs["h128 pp2_stock"]]
    print(f"greedy_match={greedy}/{REQUESTS} top1_match={agree}/{total} "
          f"pp2_fix_vs_stock={rate['h128 pp2_fix'] / rate['h128 pp2_stock']:.2f} "
          f"pp2_fix_vs_stock_h1024={rate[wide] / rate[f'h{WIDE} pp2_stock']:.2f} "
          f"overlap={overlap[wide]:.2f} bubbles={bubbles[wide]:.3f} stock_spread={max(stock) / min(stock):.2f}")


if __name__ == "__main__":
    main()
