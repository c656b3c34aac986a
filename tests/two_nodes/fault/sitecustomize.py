"""A fault injected into one rank of the two-node tier's engine, in whichever process imports vLLM's runner.

``PATCHSPEC_FAIL_FORWARD=N``: the N-th step with scheduled tokens of pipeline stage 0's model runner fails
once, before its forward (a stand-in for an out-of-memory in a long prefill); only on the global rank
``PATCHSPEC_FAIL_RANK`` when it is set (every rank of stage 0 otherwise). ``PATCHSPEC_FAIL_KIND``: ``raise``
(the default) raises; ``silent`` lets the forward run and its collectives complete, then blocks the rank's
send of that step's tensors to the next stage for good (a rank stuck outside the pipeline's reach), so the
same rank of the next stage times out on its receive. Either writes one event line on stdout first,
``PATCHSPEC {"event": "fault", "at": <monotonic>, "rank": R}`` (node 0's stdout is the harness's pipe).

Put on ``PYTHONPATH`` with tests/e2e/hooks (``e2e_harness.pythonpath``); it wraps vLLM's
``GPUModelRunner.execute_model`` (the CPU runner's too) when ``vllm.v1.worker.gpu_model_runner`` is first
imported, and for ``silent`` the fix's ``StageTransfer.isend`` too.
"""
import json
import os
import sys
import threading
import time

from engine_hook import after_import

TARGET = "vllm.v1.worker.gpu_model_runner"
TRANSFER = "_patchspec_runtime.pipeline_parallel.transfer"
MESSAGE = "injected failure of pipeline stage 0's forward (PATCHSPEC_FAIL_FORWARD)"


def _announce(rank: int) -> None:
    sys.stdout.write("PATCHSPEC " + json.dumps({"event": "fault", "at": time.monotonic(), "rank": rank}) + "\n")
    sys.stdout.flush()


def _wrap(cls, fail_at: int, rank: int | None, silent: list[bool]) -> None:
    original = cls.execute_model
    seen = [0]

    def execute_model(self, scheduler_output, *args, **kwargs):
        import torch.distributed as dist
        from vllm.distributed.parallel_state import get_pp_group

        here = dist.get_rank()
        if (scheduler_output.total_num_scheduled_tokens and get_pp_group().is_first_rank
                and rank in (None, here)):
            seen[0] += 1
            if seen[0] == fail_at:
                if os.environ.get("PATCHSPEC_FAIL_KIND", "raise") == "silent":
                    silent[0] = True  # this step's send blocks
                else:
                    _announce(here)
                    raise RuntimeError(MESSAGE)
        return original(self, scheduler_output, *args, **kwargs)

    cls.execute_model = execute_model


def _silence(cls, silent: list[bool]) -> None:
    original = cls.isend

    def isend(self, *args, **kwargs):
        if silent[0]:
            import torch.distributed as dist

            _announce(dist.get_rank())
            threading.Event().wait()  # never set: the rank stays inside its step
        return original(self, *args, **kwargs)

    cls.isend = isend


if os.environ.get("PATCHSPEC_FAIL_FORWARD"):
    fail_at = int(os.environ["PATCHSPEC_FAIL_FORWARD"])
    fail_rank = int(os.environ["PATCHSPEC_FAIL_RANK"]) if os.environ.get("PATCHSPEC_FAIL_RANK") else None
    silent = [False]
    after_import(TARGET, lambda module: _wrap(module.GPUModelRunner, fail_at, fail_rank, silent))
    after_import(TRANSFER, lambda module: _silence(module.StageTransfer, silent))
