"""Time from a failure to both nodes' exit, per case of the two-node tier at tensor parallelism 2 per node.

The two-node tier's topology (tests/two_nodes: network namespaces, a 1 Gbit/s veth, one core per node, node 1
headless), cpu-pipeline-eager, pipeline-parallel and pipeline-transfer applied, and each failure case of
``two_nodes_harness.CASES``: rank 1 of stage 0 raising in its forward, node 1's worker of tensor-parallel rank
1 killed, node 0 killed, a receive timeout on rank 1 of the last stage (rank 1 of stage 0 silent; the transfer
timeout is 10 s there, and counts in its time). From the fault (the kill, or the fault hook's event) to the end
of each node's last process, ``--runs`` runs of each case (in turn: case a, case b, ..., then again).

Last line: ``<case>_node0_s=S <case>_node1_s=S <case>_both_s=S ...``, the medians over the runs (both: the
later of the two; ``nan`` for a node whose processes outlived the tier's wait, and in a median that has one).
Usage: python bench/kill_to_exit.py [--runs N] [CASE ...] (as root).
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests" / "e2e"), str(HERE.parent / "tests" / "two_nodes")]
import e2e_harness as h  # noqa: E402
import two_nodes_harness as t  # noqa: E402

ENV = {"VLLM_PP_TRANSFER_TIMEOUT_S": "20", "VLLM_PP_START_UP_TIMEOUT_S": "300"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("cases", nargs="*", metavar="CASE", help=f"of {', '.join(t.CASES)} (default: all)")
    args = parser.parse_args()
    args.cases = args.cases or list(t.CASES)
    unknown = [name for name in args.cases if name not in t.CASES]
    if unknown:
        parser.error(f"no case {', '.join(unknown)}; cases: {', '.join(t.CASES)}")
    missing = t.missing_tools()
    if missing:
        raise SystemExit(f"bench/kill_to_exit.py needs {', '.join(missing)}")
    env, work, model = h.bench_work("kill-to-exit")
    python, root = env / "bin" / "python", h.site_packages(env)
    request = {"model": str(model), "prompts": h.token_prompts(12, 8, 40, seed=0), "scored": [], "max_tokens": 24}
    hooks = {**ENV, "PYTHONPATH": h.pythonpath(t.HERE / "fault")}
    t.remove_stale()
    seconds: dict[str, list[tuple[float, float]]] = {name: [] for name in args.cases}
    try:
        with h.patched(root) as apply:
            for spec in h.SPECS:
                apply(spec)
            for i in range(args.runs):
                for name in args.cases:
                    out = t.run_case(python, request, work / f"{name}_{i}", t.CASES[name], hooks)
                    fault = t.fault_at(out)
                    node0, node1 = (math.nan if fault is None or out["exited"][n] is None else out["exited"][n] - fault
                                    for n in (0, 1))
                    seconds[name].append((node0, node1))
                    print(f"{name} run {i + 1}: node 0 exited {node0:.1f} s and node 1 {node1:.1f} s after the fault, "
                          f"processes left {out['left']}", flush=True)
    finally:
        t.remove()
    figures = []
    for name, runs in seconds.items():
        both = [max(a, b) if not (math.isnan(a) or math.isnan(b)) else math.nan for a, b in runs]
        for key, values in (("node0", [a for a, _ in runs]), ("node1", [b for _, b in runs]), ("both", both)):
            median = math.nan if any(map(math.isnan, values)) else statistics.median(values)
            figures.append(f"{name}_{key}_s={median:.1f}")
    print(" ".join(figures))


if __name__ == "__main__":
    main()
