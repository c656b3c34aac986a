"""One rank of a start-up under ``refusals_shared``, with torch's store as ``init_process_group`` makes it.

``python rendezvous_run.py RANK PORT WORLD_CHECK HANG``: rank 0 serves the rendezvous store and waits for the
other rank, the other rank joins it; then, when ``HANG`` is 1, the start-up blocks as vllm-gaudi's HCCL world
check does when one node runs it and the other does not. Prints ``started`` when the start-up ends (and
names the start-up watch if its thread outlived the start-up).
"""
from __future__ import annotations

import sys
import threading
from datetime import timedelta

import torch.distributed as dist

from patchspec.runtime_snippets.pipeline_parallel.rendezvous import refusals_shared

WAIT_S = 300.0  # upper bound on any wait: the test's order of events ends it long before


def main() -> None:
    rank, port, world_check, hang = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4] == "1"
    with refusals_shared(f"tcp://127.0.0.1:{port}", rank, 2, WAIT_S,
                         {"VLLM_HPU_PP_HCCL_WORLD_CHECK": world_check}):
        store = dist.TCPStore("127.0.0.1", port, 2, rank == 0, timedelta(seconds=WAIT_S))
        if hang:
            threading.Event().wait(WAIT_S)
        # rank 0's store goes with its process: it stays until the other rank is done with it
        if rank == 0:
            store.wait(["done"])
        else:
            store.set("done", "1")
    # a watch thread still inside a store call when the process exits aborts it (SIGABRT after "started")
    running = [t.name for t in threading.enumerate() if t.name == "PipelineStartUpWatch"]
    print("started" + (f" with {running} still running" if running else ""), flush=True)


if __name__ == "__main__":
    main()
