"""One stage of the warm-up handshake over vllm-gaudi's own bucketing (``vllm_gaudi.extension.bucketing``);
prints one JSON document: per case, ``"ok"`` or the refusal.

``python warm_up_run.py RANK PORT CASES_JSON`` with a vllm-gaudi root first on ``sys.path`` (no vLLM
needed). A case is ``{"name": ..., "env": [env of rank 0, env of rank 1], "sizes": [sizes of rank 0, of rank
1]}``: each rank builds vllm-gaudi's runtime configuration afresh under its own environment (hardware
``cpu``), generates its buckets with its own sizes and shakes hands with the other rank over gloo on
127.0.0.1, on a fresh group per case.
"""
from __future__ import annotations

import json
import os
import sys
from datetime import timedelta

import torch.distributed as dist
from buckets_run import bucketing_manager

from patchspec.runtime_snippets.pipeline_parallel import handshake as hs
from patchspec.runtime_snippets.pipeline_parallel.errors import PipelineHandshakeError


def run(rank: int, case: dict) -> str:
    from vllm_gaudi.extension import runtime

    saved = dict(os.environ)
    os.environ.update(case["env"][rank])
    runtime.clear_config()
    try:
        runtime.get_config(hw="cpu")
        settings = hs.warmed_up_settings(bucketing_manager(case["sizes"][rank]), None)
        hs.handshake(dist.new_group([0, 1]), 1, None, 60, settings, phase="warm-up")
        return "ok"
    except PipelineHandshakeError as e:
        return str(e)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def main() -> None:
    rank, port, cases = int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=timedelta(seconds=120))
    try:
        print(json.dumps({case["name"]: run(rank, case) for case in cases}))
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
