"""Records what each pipeline stage of an engine run does, for the e2e tier and bench/e2e.py.

On PYTHONPATH of an engine run with PATCHSPEC_E2E_READS set to a directory: every tensor read through
safetensors' ``safe_open`` appends "<pipeline rank> <tensor name>" to ``<dir>/<pid>.txt``. Reading is
counted where it happens (``get_tensor`` / ``get_slice`` / ``get_tensors``), so a loader that drops a
tensor after reading it still counts it. With PATCHSPEC_E2E_TIMING set to a directory: every call of the
methods in ``_TIMED`` appends "<rank> <kind> <start> <end>" (wall clock) to ``<dir>/<pid>.txt``; the rank
is the worker's pipeline rank, -1 in the engine core (its scheduler). With PATCHSPEC_E2E_ROWS set to a
directory: every ``_update_states`` of a runner appends "<rank> <steady> <added> <removed>": whether the step
was steady (it admits, retires and resumes nothing, and each of its requests ran before) and the rows it
added to and removed from the runner's persistent batches (``InputBatch.add_request``/``remove_request``).
On PYTHONPATH with tests/e2e/hooks (``e2e_harness.pythonpath``).
"""
import os

_DIR = os.environ.get("PATCHSPEC_E2E_READS")


def _note(name: str) -> None:
    from vllm.distributed.parallel_state import get_pp_group

    with open(os.path.join(_DIR, f"{os.getpid()}.txt"), "a") as f:
        f.write(f"{get_pp_group().rank_in_group} {name}\n")


class _CountingHandle:
    def __init__(self, handle):
        self._handle = handle

    def __enter__(self):
        self._handle.__enter__()
        return self

    def __exit__(self, *exc):
        return self._handle.__exit__(*exc)

    def __getattr__(self, name):
        return getattr(self._handle, name)

    def get_tensor(self, name):
        _note(name)
        return self._handle.get_tensor(name)

    def get_slice(self, name):
        _note(name)
        return self._handle.get_slice(name)

    def get_tensors(self):  # safetensors.torch.load_file reads a file with it
        tensors = self._handle.get_tensors()
        for name in tensors:
            _note(name)
        return tensors


if _DIR:
    import safetensors
    import safetensors.torch

    _open = safetensors.safe_open

    def _counting_open(*args, **kwargs):
        return _CountingHandle(_open(*args, **kwargs))

    safetensors.safe_open = safetensors.torch.safe_open = _counting_open


_TIMING = os.environ.get("PATCHSPEC_E2E_TIMING")


def _timed(method, kind: str, rank: int | None):
    """``method`` noting "<rank> <kind> <start> <end>" (wall clock) per call, for bench/e2e.py; a
    ``rank`` of None is the pipeline rank of the worker calling it."""
    import functools
    import time

    @functools.wraps(method)
    def timed(*args, **kwargs):
        start = time.time()
        try:
            return method(*args, **kwargs)
        finally:
            end = time.time()
            if rank is None:
                from vllm.distributed.parallel_state import get_pp_group
                who = get_pp_group().rank_in_group
            else:
                who = rank
            with open(os.path.join(_TIMING, f"{os.getpid()}.txt"), "a") as f:
                f.write(f"{who} {kind} {start:.6f} {end:.6f}\n")
    return timed


# module -> (class, method, kind, rank): a worker's step (receiving from the previous stage, the
# forward, sending on) and its sampling call; within the step, the model forward (the CPU runner
# inherits it) and the wait for the previous stage's tensors (stock's irecv_tensor_dict blocks on
# their metadata, the rest is waited for in sync_and_gather_intermediate_tensors); the engine core's
# scheduling and its handling of a step's output.
_TIMED = {
    "vllm.distributed.parallel_state": [("GroupCoordinator", "irecv_tensor_dict", "recv", None)],
    "vllm.v1.worker.gpu_worker": [("Worker", "execute_model", "step", None),
                                  ("Worker", "sample_tokens", "sample", None)],
    "vllm.v1.worker.gpu_model_runner": [("GPUModelRunner", "_model_forward", "forward", None),
                                        ("GPUModelRunner", "sync_and_gather_intermediate_tensors", "recv",
                                         None)],
    "vllm.v1.core.sched.scheduler": [("Scheduler", "schedule", "schedule", -1),
                                     ("Scheduler", "update_from_output", "update", -1)],
}


def _patch(module) -> None:
    for cls, method, kind, rank in _TIMED[module.__name__]:
        owner = getattr(module, cls)
        setattr(owner, method, _timed(getattr(owner, method), kind, rank))


if _TIMING:
    from engine_hook import after_import

    for _name in _TIMED:
        after_import(_name, _patch)


_ROWS = os.environ.get("PATCHSPEC_E2E_ROWS")


def _count_rows(module) -> None:
    """Counts on the runner module's ``InputBatch`` and ``GPUModelRunner._update_states``."""
    from vllm.distributed.parallel_state import get_pp_group

    counts = {"add_request": 0, "remove_request": 0}

    def counting(name: str):
        method = getattr(module.InputBatch, name)

        def counted(self, *args, **kwargs):
            counts[name] += 1
            return method(self, *args, **kwargs)
        return counted
    for name in counts:
        setattr(module.InputBatch, name, counting(name))
    update, seen = module.GPUModelRunner._update_states, set()

    def update_states(self, scheduler_output, *args, **kwargs):
        counts.update(dict.fromkeys(counts, 0))
        result = update(self, scheduler_output, *args, **kwargs)
        ids = set(scheduler_output.num_scheduled_tokens)
        steady = bool(ids) and ids <= seen and not scheduler_output.scheduled_new_reqs \
            and not scheduler_output.finished_req_ids and not scheduler_output.scheduled_cached_reqs.resumed_req_ids
        seen.update(ids)
        with open(os.path.join(_ROWS, f"{os.getpid()}.txt"), "a") as f:
            f.write(f"{get_pp_group().rank_in_group} {int(steady)} {counts['add_request']} "
                    f"{counts['remove_request']}\n")
        return result
    module.GPUModelRunner._update_states = update_states


if _ROWS:
    from engine_hook import after_import

    after_import("vllm.v1.worker.gpu_model_runner", _count_rows)
