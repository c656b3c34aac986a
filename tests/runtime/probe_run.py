"""One pipeline stage for the probe tests: ``python probe_run.py RANK GLOO_PORT`` (``VLLM_PP_PROBE_PORT`` in
the environment). Joins a two-rank gloo world on 127.0.0.1, shakes hands with the other stage as a worker's
start-up does, serves its readiness, prints ``serving`` and lives until its stdin closes."""
from __future__ import annotations

import os
import sys
from datetime import timedelta

import torch.distributed as dist

from patchspec.runtime_snippets.pipeline_parallel import handshake, readiness


def main() -> None:
    rank, port = int(sys.argv[1]), sys.argv[2]
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=timedelta(seconds=120))
    handshake.handshake(dist.group.WORLD, 1, (3 * rank, 3 * rank + 3, 6), 60, {"--max-num-seqs": 8})
    readiness.serve_stage(rank, 2, ready=True)
    print("serving", flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
