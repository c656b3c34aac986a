"""One pipeline stage loading a checkpoint the ways vLLM can; prints one JSON document.

``python loader_run.py CHECKPOINT RANK SIZE PORT [KIND,KIND...]`` with a release root first on
``sys.path``. KIND is ``safetensors`` (default: the lazy iterator, called directly) or one of
:data:`KINDS`, each loaded through vLLM's real ``DefaultModelLoader._get_weights_iterator`` (the file
list included) with its load config: the multithreaded safetensors iterator, the eager and prefetch
strategies, the ``.pt`` iterators on the checkpoint's ``*.bin`` files, the numpy cache of them (made
by the first stage before the turns), and fastsafetensors and instanttensor, whose readers need CUDA:
vLLM's iterators for those two run as they are, with the libraries' device readers replaced by CPU
readers of every tensor of every file handed to them (``on_cpu_readers``), as theirs read on the
device, so what is measured is the file list vLLM hands them.

The stage joins a gloo world of SIZE processes on 127.0.0.1:PORT through vLLM's own
``init_distributed_environment`` and ``initialize_model_parallel``, then for each kind the stages take
turns: each drops the checkpoint from the page cache and loads every tensor. Two counts of what it
read: the tensors safetensors handed out (the sitecustomize of tests/e2e/reads records each
``get_tensor``/``get_slice`` in ``PATCHSPEC_E2E_READS``), and the checkpoint pages resident
afterwards (``mincore``): what the kernel read from disk, read-ahead included (safetensors maps the
files, so no Python file object sees those reads).
"""
from __future__ import annotations

import ctypes
import json
import mmap
import os
import sys
import threading
import time
import types
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


# Kind -> (LoadConfig keywords, allow_patterns_overrides of the source).
KINDS = {
    "multithread": ({"load_format": "safetensors",
                     "model_loader_extra_config": {"enable_multithread_load": True}}, None),
    "eager": ({"load_format": "safetensors", "safetensors_load_strategy": "eager"}, None),
    "prefetch": ({"load_format": "safetensors", "safetensors_load_strategy": "prefetch"}, None),
    "pt": ({"load_format": "hf"}, ["*.bin"]),
    "pt-multithread": ({"load_format": "hf", "model_loader_extra_config": {"enable_multithread_load": True}},
                       ["*.bin"]),
    "npcache": ({"load_format": "npcache"}, None),
    "fastsafetensors": ({"load_format": "fastsafetensors"}, None),
    "instanttensor": ({"load_format": "instanttensor"}, None),
}


class ParallelLoader:
    """fastsafetensors' loader (it reads on a CUDA device), on the CPU: every tensor of every file."""

    def __init__(self, pg, hf_weights_files: list[str], **kwargs) -> None:
        self.files = hf_weights_files

    def iterate_weights(self):
        from safetensors.torch import load_file

        for path in self.files:
            yield from load_file(path).items()

    def close(self) -> None:
        pass


class InstantTensorFiles(ParallelLoader):
    """What instanttensor's ``safe_open`` returns (it reads on a CUDA device), on the CPU."""

    def __init__(self, files: list[str], **kwargs) -> None:
        super().__init__(None, files)
        self.total_tensor_size = sum(os.path.getsize(f) for f in files)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def tensors(self):
        return self.iterate_weights()


def on_cpu_readers(weights):
    """Runs vLLM's fastsafetensors or instanttensor iterator with only their device readers replaced:
    the libraries are the classes above, and the platform answers as CUDA device 0 meanwhile (the
    iterators check for it and name the device)."""
    from vllm.platforms import current_platform

    fastsafetensors = types.ModuleType("fastsafetensors")
    fastsafetensors.parallel_loader = types.ModuleType("fastsafetensors.parallel_loader")
    fastsafetensors.parallel_loader.ParallelLoader = ParallelLoader
    instanttensor = types.ModuleType("instanttensor")
    instanttensor.safe_open = InstantTensorFiles
    sys.modules.update({"fastsafetensors": fastsafetensors, "instanttensor": instanttensor,
                        "fastsafetensors.parallel_loader": fastsafetensors.parallel_loader})
    current_platform.is_cuda = lambda: True
    current_platform.current_device = lambda: 0
    try:
        yield from weights
    finally:
        del current_platform.is_cuda, current_platform.current_device


def iterator(kind: str, checkpoint: Path) -> tuple[list[Path], object]:
    """The files whose pages count as read, and a function returning a fresh weight iterator."""
    if kind == "safetensors":
        from vllm.model_executor.model_loader import weight_utils

        files = sorted(checkpoint.glob("*.safetensors"))
        return files, lambda: weight_utils.safetensors_weights_iterator([str(f) for f in files], False)
    from vllm.config import LoadConfig
    from vllm.model_executor.model_loader import default_loader

    config, patterns = KINDS[kind]
    loader = default_loader.DefaultModelLoader(LoadConfig(**config))
    source = default_loader.DefaultModelLoader.Source(str(checkpoint), None, allow_patterns_overrides=patterns)
    if kind == "npcache":
        files = [f for f in (checkpoint / "np").glob("*") if f.suffix != ".json"]
    else:
        files = sorted(checkpoint.glob("*.bin" if kind.startswith("pt") else "*.safetensors"))
    if kind in ("fastsafetensors", "instanttensor"):
        return files, lambda: on_cpu_readers(loader._get_weights_iterator(source))
    return files, lambda: loader._get_weights_iterator(source)


def record_prefetches() -> list[str]:
    """The names of the files vLLM's prefetch strategy pages in, in the order it starts them (its
    ``_prefetch_checkpoint`` is looked up at each call, so wrapping the module's name sees them all)."""
    from vllm.model_executor.model_loader import weight_utils

    seen: list[str] = []
    prefetch = weight_utils._prefetch_checkpoint

    def recorded(path, *args, **kwargs):
        seen.append(Path(path).name)
        return prefetch(path, *args, **kwargs)
    weight_utils._prefetch_checkpoint = recorded
    return seen


def load_stage(files: list[Path], make, prefetched: list[str]) -> dict:
    for f in files:
        drop_cached(f)
    cached_before = sum(resident_bytes(f) for f in files)
    began = time.perf_counter()
    loaded = dict(make())
    for thread in threading.enumerate():  # prefetch pages files in on threads of its own
        if "_run_prefetch" in thread.name:
            thread.join()
    seconds = time.perf_counter() - began
    tensors = {name: digest(t) for name, t in loaded.items()}
    notes = Path(os.environ["PATCHSPEC_E2E_READS"]) / f"{os.getpid()}.txt"
    read = [line.split(" ", 1)[1] for line in notes.read_text().splitlines()] if notes.exists() else []
    notes.unlink(missing_ok=True)
    report = {"tensors": tensors, "read": read, "disk_bytes": sum(resident_bytes(f) for f in files),
              "cached_before": cached_before, "seconds": seconds, "prefetched": sorted(prefetched)}
    prefetched.clear()
    return report


def speculative(model):
    """The ``SpeculativeConfig`` that ``LOADER_RUN_SPECULATIVE`` (its keywords, JSON) asks for, or None. The
    draft's own parallel config is made at size 1, as vLLM 0.30 makes it for every target size (0.26 makes it
    at the target's and refuses an MTP draft at size 2)."""
    keywords = os.environ.get("LOADER_RUN_SPECULATIVE")
    if not keywords:
        return None
    from vllm.config import ParallelConfig, SpeculativeConfig

    return SpeculativeConfig(target_model_config=model, target_parallel_config=ParallelConfig(),
                             **json.loads(keywords))


def main() -> None:
    checkpoint, rank, size, port = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    kinds = (sys.argv[5] if len(sys.argv) > 5 else "safetensors").split(",")
    from vllm.config import DeviceConfig, ModelConfig, ParallelConfig, VllmConfig, set_current_vllm_config
    from vllm.distributed.parallel_state import init_distributed_environment, initialize_model_parallel

    model = ModelConfig(model=str(checkpoint), skip_tokenizer_init=True)
    config = VllmConfig(model_config=model, device_config=DeviceConfig(device="cpu"),
                        parallel_config=ParallelConfig(pipeline_parallel_size=size),
                        speculative_config=speculative(model))
    with set_current_vllm_config(config):
        init_distributed_environment(world_size=size, rank=rank, local_rank=rank, backend="gloo",
                                     distributed_init_method=f"tcp://127.0.0.1:{port}")
        initialize_model_parallel(pipeline_model_parallel_size=size, backend="gloo")
        if "npcache" in kinds and rank == 0:
            for _ in iterator("npcache", checkpoint)[1]():  # the cache is made on first use, from every tensor
                pass
        dist.barrier()
        report = {}
        prefetched = record_prefetches()
        for kind in kinds:
            files, make = iterator(kind, checkpoint)
            for turn in range(size):  # one stage at a time: the page cache is shared
                if turn == rank:
                    report[kind] = load_stage(files, make, prefetched)
                dist.barrier()
    print(json.dumps(report if len(kinds) > 1 else report[kinds[0]]))


if __name__ == "__main__":
    main()
