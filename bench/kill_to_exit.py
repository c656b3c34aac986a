"""Time from a failure to both nodes' exit, per case of the two-node tier at tensor parallelism 2 per node.

The two-node tier's topology (tests/two_nodes: network namespaces, a 1 Gbit/s veth, one core per node, node 1
headless), cpu-pipeline-eager, pipeline-parallel and pipeline-transfer applied, and each failure case of
``two_nodes_harness.CASES``: rank 1 of stage 0 raising in its forward, node 1's worker of tensor-parallel rank
1 killed, node 0 killed, a receive timeout on rank 1 of the last stage (rank 1 of stage 0 silent; the transfer
timeout is 10 s there, and counts in its time). From the fault (the kill, or the fault hook's event) to the end
of each node's last process, one run each.

Last line: ``<case>_node0_s=S <case>_node1_s=S <case>_both_s=S ...`` (both: the later of the two; ``nan`` for
a node whose processes outlived the tier's wait). Usage: python bench/kill_to_exit.py [CASE ...] (as root).
"""
from __future__ import annotations

import math
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests" / "e2e"), str(HERE.parent / "tests" / "two_nodes")]
import e2e_harness as h  # noqa: E402
import two_nodes_harness as t  # noqa: E402

ENV = {"VLLM_PP_TRANSFER_TIMEOUT_S": "20", "VLLM_PP_START_UP_TIMEOUT_S": "300"}


def main() -> None:
    missing = t.missing_tools()
    if missing:
        raise SystemExit(f"bench/kill_to_exit.py needs {', '.join(missing)}")
    names = sys.argv[1:] or list(t.CASES)
    unknown = [name for name in names if name not in t.CASES]
    if unknown:
        raise SystemExit(f"bench/kill_to_exit.py: no case {', '.join(unknown)}; cases: {', '.join(t.CASES)}")
    env = h.venv()
    python, root = env / "bin" / "python", h.site_packages(env)
    work = Path(tempfile.mkdtemp(prefix="patchspec-bench-kill-to-exit-"))
    print(f"logs: {work}", flush=True)
    model = h.write_checkpoint(env, work / "model")
    request = {"model": str(model), "prompts": h.token_prompts(12, 8, 40, seed=0), "scored": [], "max_tokens": 24}
    hooks = {**ENV, "PYTHONPATH": h.pythonpath(t.HERE / "fault")}
    t.remove_stale()
    h.unapply_leftovers(root)
    applied, figures = [], {}
    try:
        for spec in h.SPECS:
            h.apply(spec, root)
            applied.append(spec)
        for name in names:
            out = t.run_case(python, request, work / name, t.CASES[name], hooks)
            fault = t.fault_at(out)
            seconds = {rank: float("nan") if fault is None or at is None else at - fault
                       for rank, at in out["exited"].items()}
            both = float("nan") if any(map(math.isnan, seconds.values())) else max(seconds.values())
            figures[name] = (seconds[0], seconds[1], both)
            print(f"{name}: node 0 exited {seconds[0]:.1f} s and node 1 {seconds[1]:.1f} s after the fault, "
                  f"processes left {out['left']}", flush=True)
    finally:
        for spec in applied:
            h.unapply(spec, root)
        t.remove()
    print(" ".join(f"{name}_node0_s={a:.1f} {name}_node1_s={b:.1f} {name}_both_s={c:.1f}"
                   for name, (a, b, c) in figures.items()))


if __name__ == "__main__":
    main()
