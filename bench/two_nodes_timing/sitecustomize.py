"""Stage-to-stage timing for bench/two_nodes.py, on PYTHONPATH of the engine's processes.

With ``PATCHSPEC_BENCH_TIMING`` set to a directory, once vLLM's worker module is imported: every
``isend_tensor_dict`` of the pipeline group notes ``send <t>``, and every received IntermediateTensors
notes ``recv <t0> <t1> <t2> <t3>`` when the worker first waits for it (``t0``: the worker's
``irecv_tensor_dict`` call; ``t1``: that call returned; ``t2``: the worker first waits for the tensors;
``t3``: they are there), in ``<dir>/<pid>.txt``. Times are ``time.monotonic()``, one clock
for both namespaces of the machine. The same hooks time stock vLLM and the pipeline-transfer spec.
On ``PYTHONPATH`` with tests/e2e/hooks (``e2e_harness.pythonpath``).
"""
import os
import time

from engine_hook import after_import

_DIR = os.environ.get("PATCHSPEC_BENCH_TIMING")
_WORKER = "vllm.v1.worker.gpu_worker"


def _note(*fields) -> None:
    with open(os.path.join(_DIR, f"{os.getpid()}.txt"), "a") as f:
        f.write(" ".join(map(str, fields)) + "\n")


def _patch(worker) -> None:
    from vllm.distributed import parallel_state as ps

    isend, irecv = ps.GroupCoordinator.isend_tensor_dict, ps.GroupCoordinator.irecv_tensor_dict
    wait = worker.AsyncIntermediateTensors.wait_for_comm
    posted: list[tuple[float, float]] = []

    def isend_tensor_dict(self, *args, **kwargs):
        if self is ps._PP:
            _note("send", time.monotonic())
        return isend(self, *args, **kwargs)

    def irecv_tensor_dict(self, *args, **kwargs):
        if self is not ps._PP:
            return irecv(self, *args, **kwargs)
        start = time.monotonic()
        result = irecv(self, *args, **kwargs)
        posted.append((start, time.monotonic()))
        return result

    def wait_for_comm(self):
        first = not object.__getattribute__(self, "_comm_waited")
        start = time.monotonic()
        wait(self)
        if first and posted:
            _note("recv", *posted.pop(0), start, time.monotonic())

    ps.GroupCoordinator.isend_tensor_dict = isend_tensor_dict
    ps.GroupCoordinator.irecv_tensor_dict = irecv_tensor_dict
    worker.AsyncIntermediateTensors.wait_for_comm = wait_for_comm


if _DIR:
    after_import(_WORKER, _patch)
