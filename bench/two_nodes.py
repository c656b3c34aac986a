"""Two-node deployment at hidden 1024: the project's transfer against vLLM's stock tensor dicts, and pp 2
against pp 1 on one node.

The two-node tier's topology (tests/two_nodes: network namespaces, a 1 Gbit/s veth with the serving
guide's ``quickack 1`` route, one core per node, node 1 headless), a 4-layer Llama at hidden 1024 (a
decode step of 16 requests moves 128 KiB, a prefill chunk megabytes). Three runs, one each: pp 1 on node
0 alone (its one core), pp 2 with cpu-pipeline-eager and pipeline-parallel (stock ``isend_tensor_dict``:
pickled metadata and one gloo send per tensor), and pp 2 with pipeline-transfer added. Tokens/s are
generated tokens over the generation's wall time; the stage-to-stage latency of a step is from the later
of the send and the receiver's ``irecv_tensor_dict`` to the tensors being there
(bench/two_nodes_timing), averaged over the generation's steps. That latency holds the receiver's own
preparation of the step whenever the sender is early (the tensors are needed only once the inputs are
prepared), so the time the receiving worker is blocked on the transfer is reported beside it: inside
``irecv_tensor_dict`` (stock receives the pickled metadata there) plus inside the first wait for the
tensors.

Last line: ``greedy_match=K/N top1_match=K/N transfer_vs_stock=R pp2_vs_pp1=R step_latency_vs_stock=R
step_latency_median_vs_stock=R recv_blocked_vs_stock=R`` (matches: pp 2 with the transfer against pp 1;
transfer_vs_stock and pp2_vs_pp1: tokens/s ratios; step_latency_vs_stock: mean latency, transfer over
stock; step_latency_median_vs_stock: the same of the per-message medians, which one slow step does not
move; recv_blocked_vs_stock: the median blocked time per message, transfer over stock). Usage: python
bench/two_nodes.py (as root).
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests" / "e2e"), str(HERE.parent / "tests" / "two_nodes")]
import e2e_harness as h  # noqa: E402
import two_nodes_harness as t  # noqa: E402

HIDDEN = 1024
REQUESTS = 32
MAX_TOKENS = 192


def latencies(timing: Path, window: list[float]) -> tuple[list[float], list[float]]:
    """Per message of the generation window: the receive's end minus the later of send and receive start,
    and the time the receiver was blocked on it."""
    sends, recvs = [], []
    for file in timing.glob("*.txt"):
        for line in file.read_text().splitlines():
            kind, *times = line.split()
            (sends if kind == "send" else recvs).append([float(x) for x in times])
    sends.sort()
    recvs.sort()
    pairs = [(sent, recv) for (sent,), recv in zip(sends, recvs, strict=False) if window[0] <= sent <= window[1]]
    return ([done - max(sent, posted) for sent, (posted, _, _, done) in pairs],
            [(returned - posted) + (done - waited) for _, (posted, returned, waited, done) in pairs])


def main() -> None:
    missing = t.missing_tools()
    if missing:
        raise SystemExit(f"bench/two_nodes.py needs {', '.join(missing)}")
    env, work, model = h.bench_work("two-nodes", HIDDEN)
    python, root = env / "bin" / "python", h.site_packages(env)
    request = {"model": str(model), "prompts": h.token_prompts(REQUESTS, 16, 48, seed=2),
               "scored": h.token_prompts(REQUESTS, 100, 300, seed=3), "max_tokens": MAX_TOKENS}
    runs: dict[str, dict] = {}

    def run(name: str, **extra) -> None:
        timing = work / name / "timing"
        timing.mkdir(parents=True)
        out = t.run_deployment(python, {**request, **extra}, work / name, {
            "PATCHSPEC_BENCH_TIMING": str(timing), "PYTHONPATH": h.pythonpath(HERE / "two_nodes_timing"),
            "VLLM_PP_TRANSFER_STATS_EVERY": "0"})
        result = out["events"]["result"]
        result["latencies"], result["blocked"] = (
            ([], []) if extra.get("single") else latencies(timing, result["generate_window"]))
        runs[name] = result

    t.remove_stale()
    try:
        with h.patched(root) as apply:
            for spec in (h.EAGER_SPEC, h.PP_SPEC):
                apply(spec)
            run("pp1", single=True)
            run("pp2_stock")
            apply(h.TRANSFER_SPEC)
            run("pp2_transfer")
    finally:
        t.remove()

    rate, latency, median, blocked = {}, {}, {}, {}
    for name, result in runs.items():
        rate[name] = result["generated"] / result["generate_s"]
        lat = result["latencies"]
        latency[name] = sum(lat) / len(lat) if lat else float("nan")
        median[name] = statistics.median(lat) if lat else float("nan")
        blocked[name] = statistics.median(result["blocked"]) if lat else float("nan")
        print(f"{name}: startup {result['startup_s']:.1f} s, {result['generated']} tokens in "
              f"{result['generate_s']:.2f} s = {rate[name]:.1f} tokens/s, {result['steps']} steps"
              + (f", stage-to-stage {latency[name] * 1e3:.2f} ms mean, {median[name] * 1e3:.2f} ms median over "
                 f"{len(lat)} messages, receiver blocked {blocked[name] * 1e3:.3f} ms median" if lat else ""),
              flush=True)
    one, fix = runs["pp1"], runs["pp2_transfer"]
    greedy = sum(a == b for a, b in zip(one["tokens"], fix["tokens"], strict=True))
    agree, total, worst = h.top1_matches(one["scored"], fix["scored"])
    print(f"largest top-1 logprob difference: {worst:.2e}")
    print(f"greedy_match={greedy}/{REQUESTS} top1_match={agree}/{total} "
          f"transfer_vs_stock={rate['pp2_transfer'] / rate['pp2_stock']:.2f} "
          f"pp2_vs_pp1={rate['pp2_transfer'] / rate['pp1']:.2f} "
          f"step_latency_vs_stock={latency['pp2_transfer'] / latency['pp2_stock']:.2f} "
          f"step_latency_median_vs_stock={median['pp2_transfer'] / median['pp2_stock']:.2f} "
          f"recv_blocked_vs_stock={blocked['pp2_transfer'] / blocked['pp2_stock']:.2f}")


if __name__ == "__main__":
    main()
