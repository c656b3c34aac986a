# SPDX-License-Identifier: Apache-2.0
"""Per-stage checkpoint loading: each stage skips the tensors of the layers it does
not own before reading them.

Stock vLLM reads every checkpoint tensor on every stage and drops the layers the
stage does not hold afterwards. The hooks, from the earliest:

- ``owned_files``: where the default loader forms its list of safetensors files,
  drop the files that hold no tensor this stage owns (read from their headers).
  Every safetensors iterator and strategy takes that list: lazy, eager, prefetch,
  multithreaded, fastsafetensors, instanttensor.
- Within a file that holds owned and other tensors: the lazy iterator asks
  ``ep_weight_filter.should_skip_weight`` about each name before reading it
  (``skip_unowned_layers``); the multithreaded one reads the owned tensors only
  (``owned_tensors``); the eager strategy reads the owned byte spans only
  (``owned_bytes``), and so does prefetch (``prefetched_owned_spans``), whose
  files are shared out among the ranks of the stage (``prefetch_share``).
  fastsafetensors and instanttensor read each file they are given whole.
- The ``.pt`` iterators load a file at a time: they map it (``mmap_checkpoint``)
  and yield only owned tensors (``owned_weights_only``), so the other stages'
  storages are never paged in. The numpy cache skips a name before opening its
  file (``owns_weight``).

A stage owns the decoder layers that ``get_pp_indices`` gives it
(``VLLM_PP_LAYER_PARTITION`` included). Only ``<prefix>.layers.<i>.*`` names are
skipped: embeddings, final norm and LM head follow the model's own rules. Layers
numbered past the decoder (the MTP layers of DeepSeek- and GLM-class checkpoints)
belong to no stage without a speculative config (the models drop them after reading,
so every stage skips them). With MTP drafting (``method`` "mtp") they, and the names
under an ``mtp`` prefix (Qwen3-Next, MiMo), belong to the last stage, which drafts
(``drafts.py``), and to no other. Multimodal, encoder-decoder and other speculative
set-ups (a draft with a checkpoint of its own) load every tensor, with one log line
saying why.
"""

from __future__ import annotations

import functools
import io
import json
import os
import re
import struct
import zipfile
from collections.abc import Callable, Iterator
from typing import IO, Any

from ._logging import get_logger

__all__ = [
    "mmap_checkpoint",
    "owned_bytes",
    "owned_files",
    "owned_layers",
    "owned_tensors",
    "owned_weights_only",
    "owns_weight",
    "prefetch_share",
    "prefetched_owned_spans",
    "skip_unowned_layers",
]

logger = get_logger(__name__)

# The first "layers.<i>." component of a name: its decoder layer under the
# checkpoint's own prefix.
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")
# A component naming a multi-token-prediction module ("mtp.layers.0.", "mtp_layers.").
_MTP = re.compile(r"(?:^|\.)mtp[._]")


def skip_unowned_layers(
    should_skip_weight: Callable[..., bool],
) -> Callable[..., bool]:
    """``wrap`` of ``should_skip_weight``: also skip the tensors of decoder layers
    another stage owns."""

    @functools.wraps(should_skip_weight)
    def should_skip(weight_name: str, *args: Any, **kwargs: Any) -> bool:
        return should_skip_weight(weight_name, *args, **kwargs) or not owns_weight(
            weight_name
        )

    return should_skip


def owned_weights_only(
    iterator: Callable[..., Iterator[tuple[str, Any]]],
) -> Callable[..., Iterator[tuple[str, Any]]]:
    """``wrap`` of a weight iterator: yield only the tensors this stage owns (all
    of them at size 1)."""

    @functools.wraps(iterator)
    def owned(*args: Any, **kwargs: Any) -> Iterator[tuple[str, Any]]:
        for name, tensor in iterator(*args, **kwargs):
            if owns_weight(name):
                yield name, tensor

    return owned


def mmap_checkpoint(path: str) -> bool | None:
    """``torch.load``'s ``mmap`` for a ``.pt`` file: mapped when this stage skips
    layers and the file is a zip archive (``torch.save``'s format since torch 1.6;
    older ones cannot be mapped), so only the tensors it keeps are read; else None,
    torch's default."""
    if owned_layers() is None or not zipfile.is_zipfile(path):
        return None
    return True


def owned_files(files: list[str], use_safetensors: bool) -> list[str]:
    """The checkpoint files this stage opens: with safetensors, those whose header
    names a tensor it owns; every file otherwise (``.bin`` files are filtered
    tensor by tensor)."""
    if not use_safetensors or owned_layers() is None:
        return files
    kept = [f for f in files if any(owns_weight(n) for n in _header(f)[0])]
    if len(kept) < len(files):
        logger.info(
            "pipeline stage opens %d of %d checkpoint files", len(kept), len(files)
        )
    return kept


def owned_tensors(path: str) -> dict[str, Any] | None:
    """What ``safetensors.torch.load_file`` returns, the other stages' tensors
    left unread; None when this stage owns the whole file."""
    if _owned_spans(path) is None:
        return None
    from safetensors.torch import safe_open

    with safe_open(path, framework="pt", device="cpu") as f:
        names = [name for name in f.keys() if owns_weight(name)]  # noqa: SIM118
        return {name: f.get_tensor(name) for name in names}


def owned_bytes(f: IO[bytes]) -> IO[bytes]:
    """The open safetensors file as the eager strategy reads it whole: unchanged
    when this stage owns every tensor in it, else a buffer in the same format
    holding only the tensors it owns, read from their byte spans alone."""
    if owned_layers() is None:
        return f
    header, base, metadata = _header(f.name)
    owned = sorted(
        (spec["data_offsets"], name)
        for name, spec in header.items()
        if owns_weight(name)
    )
    if len(owned) == len(header):
        return f
    new_header: dict[str, Any] = {"__metadata__": metadata} if metadata else {}
    data = bytearray()
    for (start, end), name in owned:
        f.seek(base + start)
        new_header[name] = {
            **header[name],
            "data_offsets": [len(data), len(data) + end - start],
        }
        data += f.read(end - start)
    encoded = json.dumps(new_header).encode()
    encoded += b" " * (-len(encoded) % 8)
    return io.BytesIO(struct.pack("<Q", len(encoded)) + encoded + data)


def prefetched_owned_spans(file_path: str, block_size: int) -> bool:
    """Prefetch into the page cache only the byte spans of the tensors this stage
    owns, in blocks of ``block_size``; False (prefetch the whole file) when it
    owns the whole file."""
    spans = _owned_spans(file_path)
    if spans is None:
        return False
    with open(file_path, "rb") as f:
        for start, end in spans:
            f.seek(start)
            while start < end and (block := f.read(min(block_size, end - start))):
                start += len(block)
    return True


def prefetch_share(rank: int, world_size: int) -> tuple[int, int]:
    """``(rank, world_size)`` that prefetch shares the sorted file list out by. Stock
    shares it among every rank, which assumes every rank has the same list; with
    ``owned_files`` each stage has its own, so its files are shared among the ranks
    of that stage (its tensor-parallel group), which between them cover all."""
    if owned_layers() is None:
        return rank, world_size
    from vllm.distributed import parallel_state

    group = parallel_state.get_tp_group()
    return group.rank_in_group, group.world_size


def owns_weight(weight_name: str) -> bool:
    """Whether this stage loads ``weight_name``: every name but the decoder layers
    of other stages and the layers past the decoder, which only a stage that drafts
    with them loads (as the names of MTP modules)."""
    owned = owned_layers()
    if owned is None:
        return True
    start, end, num_layers, drafts = owned
    if drafts is not None and _MTP.search(weight_name):
        return drafts
    match = _LAYER.search(weight_name)
    if match is None:
        return True
    layer = int(match.group(1))
    if layer >= num_layers:
        return bool(drafts)
    return start <= layer < end


def owned_layers() -> tuple[int, int, int, bool | None] | None:
    """``(start, end, num_layers, drafts)`` of this stage: its decoder layers, and
    with MTP drafting whether it loads the MTP layers (None without it); or None to
    load every tensor."""
    from vllm.config import get_current_vllm_config_or_none
    from vllm.distributed import parallel_state

    config = get_current_vllm_config_or_none()
    if config is None:
        if (
            parallel_state.model_parallel_is_initialized()
            and parallel_state.get_pp_group().world_size > 1
        ):
            return _load_everything("no vLLM config is current while weights load")
        return None
    if config.parallel_config.pipeline_parallel_size == 1:
        return None
    if not parallel_state.model_parallel_is_initialized():
        return _load_everything("the pipeline-parallel group is not initialized")
    model = config.model_config
    if model.is_multimodal_model:
        return _load_everything(f"{model.model} is multimodal")
    if model.is_encoder_decoder:
        return _load_everything(f"{model.model} is an encoder-decoder model")
    speculative = config.speculative_config
    if speculative is not None and speculative.method != "mtp":
        return _load_everything(
            f"speculative decoding ({speculative.method}) may load a draft model "
            "from a checkpoint of its own"
        )
    num_layers = getattr(model.hf_text_config, "num_hidden_layers", None)
    if not isinstance(num_layers, int):
        return _load_everything(f"{model.model} declares no num_hidden_layers")
    group = parallel_state.get_pp_group()
    # The partition variable is part of the key: get_pp_indices reads it (and
    # logs) on every call.
    return _stage_range(
        num_layers,
        group.rank_in_group,
        group.world_size,
        os.environ.get("VLLM_PP_LAYER_PARTITION"),
        speculative is not None,
    )


def _owned_spans(path: str) -> list[tuple[int, int]] | None:
    """The file byte spans of the tensors this stage owns in a safetensors file,
    in file order with adjacent ones merged; None when it owns every tensor."""
    if owned_layers() is None:
        return None
    header, base, _ = _header(path)
    spans = sorted(
        spec["data_offsets"] for name, spec in header.items() if owns_weight(name)
    )
    if len(spans) == len(header):
        return None
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and merged[-1][1] == base + start:
            merged[-1] = (merged[-1][0], base + end)
        else:
            merged.append((base + start, base + end))
    return merged


def _header(path: str) -> tuple[dict[str, Any], int, dict[str, str] | None]:
    """A safetensors file's tensor entries, where its data starts and its
    metadata; only the header is read."""
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
    return header, 8 + size, header.pop("__metadata__", None)


@functools.cache
def _stage_range(
    num_layers: int, rank: int, size: int, partition: str | None, mtp: bool
) -> tuple[int, int, int, bool | None]:
    from vllm.distributed.utils import get_pp_indices

    start, end = get_pp_indices(num_layers, rank, size)
    drafts = rank == size - 1 if mtp else None
    logger.info(
        "pipeline stage %d/%d reads decoder layers %d-%d of %d from the checkpoint%s",
        rank,
        size,
        start,
        end - 1,
        num_layers,
        " and the MTP layers" if drafts else "",
    )
    return start, end, num_layers, drafts


@functools.cache
def _load_everything(why: str) -> None:
    logger.info("pipeline-parallel: every stage reads the whole checkpoint: %s", why)
