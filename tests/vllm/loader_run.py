"""One pipeline stage running one of vLLM's real weight iterators; prints one JSON document.

``python loader_run.py CHECKPOINT RANK SIZE PORT [ITERATOR]`` with a release root first on ``sys.path``;
ITERATOR is ``safetensors`` (default), ``pt`` (the checkpoint's ``*.bin`` files) or ``npcache`` (vLLM's
numpy cache of them, made by the first stage before the turns). The stage
joins a gloo world of SIZE processes on 127.0.0.1:PORT through vLLM's own ``init_distributed_environment``
and ``initialize_model_parallel``, then the stages take turns: each drops the checkpoint from the page
cache and iterates every shard. Two counts of what it read: the tensors safetensors handed out (the
sitecustomize of tests/e2e/reads records each ``get_tensor``/``get_slice`` in ``PATCHSPEC_E2E_READS``),
and the checkpoint pages resident afterwards (``mincore``): what the kernel read from disk, read-ahead
included (safetensors maps the files, so no Python file object sees those reads).
"""
from __future__ import annotations

import ctypes
import json
import mmap
import os
import sys
import time
from pathlib import Path

import torch.distributed as dist

from vllm_checkpoint import digest

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]


def drop_cached(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def resident_bytes(path: Path) -> int:
    """Bytes of ``path`` in the page cache (whole pages; the last one counts in full)."""
    size = path.stat().st_size
    pages = -(-size // mmap.PAGESIZE)
    vec = (ctypes.c_ubyte * pages)()
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY) as view:
        anchor = ctypes.c_char.from_buffer(view)
        try:
            if _libc.mincore(ctypes.addressof(anchor), size, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore failed")
        finally:
            del anchor
    return sum(v & 1 for v in vec) * mmap.PAGESIZE


def iterator(kind: str, checkpoint: Path) -> tuple[list[Path], object]:
    """The files whose pages count as read, and a function returning a fresh weight iterator."""
    from vllm.model_executor.model_loader import weight_utils

    if kind == "safetensors":
        files = sorted(checkpoint.glob("*.safetensors"))
        return files, lambda: weight_utils.safetensors_weights_iterator([str(f) for f in files], False)
    bins = [str(f) for f in sorted(checkpoint.glob("*.bin"))]
    if kind == "pt":
        return [Path(f) for f in bins], lambda: weight_utils.pt_weights_iterator(bins, False)
    make = lambda: weight_utils.np_cache_weights_iterator(str(checkpoint), None, str(checkpoint), bins, False)  # noqa: E731
    return [f for f in (checkpoint / "np").glob("*") if f.suffix != ".json"], make


def load_stage(files: list[Path], make) -> dict:
    for f in files:
        drop_cached(f)
    cached_before = sum(resident_bytes(f) for f in files)
    began = time.perf_counter()
    loaded = dict(make())
    seconds = time.perf_counter() - began
    tensors = {name: digest(t) for name, t in loaded.items()}
    notes = Path(os.environ["PATCHSPEC_E2E_READS"]) / f"{os.getpid()}.txt"
    read = [line.split(" ", 1)[1] for line in notes.read_text().splitlines()] if notes.exists() else []
    return {"tensors": tensors, "read": read, "disk_bytes": sum(resident_bytes(f) for f in files),
            "cached_before": cached_before, "seconds": seconds}


def main() -> None:
    checkpoint, rank, size, port = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    kind = sys.argv[5] if len(sys.argv) > 5 else "safetensors"
    from vllm.config import DeviceConfig, ModelConfig, ParallelConfig, VllmConfig, set_current_vllm_config
    from vllm.distributed.parallel_state import init_distributed_environment, initialize_model_parallel

    config = VllmConfig(model_config=ModelConfig(model=str(checkpoint), skip_tokenizer_init=True),
                        device_config=DeviceConfig(device="cpu"),
                        parallel_config=ParallelConfig(pipeline_parallel_size=size))
    with set_current_vllm_config(config):
        init_distributed_environment(world_size=size, rank=rank, local_rank=rank, backend="gloo",
                                     distributed_init_method=f"tcp://127.0.0.1:{port}")
        initialize_model_parallel(pipeline_model_parallel_size=size, backend="gloo")
        if kind == "npcache" and rank == 0:
            for _ in iterator(kind, checkpoint)[1]():  # the cache is made on first use, from every tensor
                pass
        dist.barrier()
        files, make = iterator(kind, checkpoint)
        for turn in range(size):  # one stage at a time: the page cache is shared
            if turn == rank:
                report = load_stage(files, make)
            dist.barrier()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
