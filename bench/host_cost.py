"""Per-step host cost of a decode step at pipeline size 2 against size 1, over context length and request count, on
vLLM's real scheduler with the pipeline-parallel spec applied (``tests/vllm/host_cost_run.py``).

For each context (1K to 256K prompt tokens) and request count (4 to 32), every request decoding: the median per
step of the requests scheduled (all at pp 1, half at pp 2), of ``schedule()`` and of pickling its output (what
the executor's message queue does for every worker), the output's bytes, the token ids sent again whole
(``all_token_ids``), and the token ids a runner that keeps only the step's requests in its persistent batch
writes again (vLLM's and vllm-gaudi's ``_update_states`` rule: what the runner side of the fix is to remove).
The ratios are pp 2 against pp 1 of ``schedule_s + pickle_s`` per step (``pp2_vs_pp1_*``) and per request a step
schedules (``per_request_pp2_vs_pp1_*``: a pp 2 step carries half the requests). The last line is key=value
pairs.

Usage: python bench/host_cost.py [--release 0.30.0] [--contexts 1024,32768,262144] [--requests 4,32]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "vllm"))
from vllm_runs import release_roots, result, start  # noqa: E402

from patchspec.releases.cache import pypi_root  # noqa: E402

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
          "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4,
          "num_hidden_layers": 4, "vocab_size": 1000, "max_position_embeddings": 300_000,
          "torch_dtype": "float32", "rms_norm_eps": 1e-6}


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release", default="0.30.0")
    parser.add_argument("--contexts", type=_ints, default=[1024, 32768, 262144])
    parser.add_argument("--requests", type=_ints, default=[4, 32])
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="host-cost-"))
    model = work / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(CONFIG))
    _, fix = release_roots(pypi_root(f"vllm=={args.release}"), work / "roots")
    print(f"vLLM {args.release} with the fix, load {os.getloadavg()[0]:.1f}")
    print("context requests pp scheduled schedule_ms pickle_ms bytes resent readded")
    figures, rows = {}, {}
    for context in args.contexts:  # one process at a time: one heavy run on the machine
        cases = [{"pp": pp, "requests": n, "context": context} for n in args.requests for pp in (1, 2)]
        for row in result(start(fix, "host_cost_run.py", str(model), json.dumps(cases))):
            rows[row["pp"], row["requests"], context] = row
            print(f"{context} {row['requests']} {row['pp']} {row['scheduled']:.0f} {row['schedule_s'] * 1e3:.3f} "
                  f"{row['pickle_s'] * 1e3:.3f} {row['bytes']:.0f} {row['resent']:.0f} {row['readded']:.0f}")
        for n in args.requests:
            one, two = rows[1, n, context], rows[2, n, context]
            cost = [r["schedule_s"] + r["pickle_s"] for r in (one, two)]
            figures[f"pp2_vs_pp1_{context // 1024}k_{n}req"] = f"{cost[1] / cost[0]:.2f}"
            per_request = [c / r["scheduled"] for c, r in zip(cost, (one, two), strict=True)]
            figures[f"per_request_pp2_vs_pp1_{context // 1024}k_{n}req"] = f"{per_request[1] / per_request[0]:.2f}"
            figures[f"readded_pp2_{context // 1024}k_{n}req"] = f"{two['readded']:.0f}"
    print(" ".join(f"{k}={v}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
