"""Records which checkpoint tensors each pipeline stage reads, for the e2e tier's per-stage loading check.

On PYTHONPATH of an engine run with PATCHSPEC_E2E_READS set to a directory: every tensor read through
safetensors' ``safe_open`` appends "<pipeline rank> <tensor name>" to ``<dir>/<pid>.txt``. Reading is
counted where it happens (``get_tensor`` / ``get_slice``), so a loader that drops a tensor after reading
it still counts it.
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


if _DIR:
    import safetensors
    import safetensors.torch

    _open = safetensors.safe_open

    def _counting_open(*args, **kwargs):
        return _CountingHandle(_open(*args, **kwargs))

    safetensors.safe_open = safetensors.torch.safe_open = _counting_open
