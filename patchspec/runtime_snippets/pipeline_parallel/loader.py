# SPDX-License-Identifier: Apache-2.0
"""Per-stage checkpoint loading: every stage skips the tensors of the layers it does not own before reading.

Stock vLLM reads every checkpoint tensor on every stage and drops the layers the stage does not hold
afterwards. The safetensors iterators ask ``ep_weight_filter.should_skip_weight`` about each name before
reading its tensor, so wrapping it (``skip_unowned_layers``) skips them there. The ``.pt`` iterators load
a file at a time: they map it (``mmap_checkpoint``) and yield only owned tensors
(``owned_weights_only``), so the other stages' storages are never paged in. The numpy cache skips a
name before opening its file (``owns_weight``). A stage owns the decoder layers that ``get_pp_indices``
gives it
(``VLLM_PP_LAYER_PARTITION`` included). Only ``<checkpoint prefix>.layers.<i>.*`` names are skipped:
embeddings, final norm and LM head follow the model's own rules. Layers numbered past the decoder (the
MTP layers of DeepSeek- and GLM-class checkpoints) belong to no stage: without a speculative config the
models drop them after reading, so every stage skips them; speculative decoding, which drafts with them,
loads as before. Multimodal, encoder-decoder and speculative set-ups load every tensor, with one log
line saying why.
"""
from __future__ import annotations

import functools
import os
import re
import zipfile
from collections.abc import Callable, Iterator
from typing import Any

from ._logging import get_logger

__all__ = ["mmap_checkpoint", "owned_layers", "owned_weights_only", "owns_weight", "skip_unowned_layers"]

logger = get_logger(__name__)

# The first "layers.<i>." component of a name: its decoder layer under the checkpoint's own prefix.
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")


def skip_unowned_layers(should_skip_weight: Callable[..., bool]) -> Callable[..., bool]:
    """``wrap`` of ``should_skip_weight``: also skip tensors of decoder layers another stage owns."""
    @functools.wraps(should_skip_weight)
    def should_skip(weight_name: str, *args: Any, **kwargs: Any) -> bool:
        return should_skip_weight(weight_name, *args, **kwargs) or not owns_weight(weight_name)
    return should_skip


def owned_weights_only(
        iterator: Callable[..., Iterator[tuple[str, Any]]]) -> Callable[..., Iterator[tuple[str, Any]]]:
    """``wrap`` of a weight iterator: yield only the tensors this stage owns (all of them at size 1)."""
    @functools.wraps(iterator)
    def owned(*args: Any, **kwargs: Any) -> Iterator[tuple[str, Any]]:
        for name, tensor in iterator(*args, **kwargs):
            if owns_weight(name):
                yield name, tensor
    return owned


def mmap_checkpoint(path: str) -> bool | None:
    """``torch.load``'s ``mmap`` for a ``.pt`` file: mapped when this stage skips layers and the file is a
    zip archive (``torch.save``'s format since torch 1.6; older ones cannot be mapped), so only the
    tensors it keeps are read; else None, torch's default."""
    if owned_layers() is None or not zipfile.is_zipfile(path):
        return None
    return True


def owns_weight(weight_name: str) -> bool:
    """Whether this stage loads ``weight_name``: every name but the decoder layers of other stages and the
    layers past the decoder."""
    owned = owned_layers()
    if owned is None:
        return True
    match = _LAYER.search(weight_name)
    if match is None:
        return True
    layer = int(match.group(1))
    start, end, _ = owned
    return start <= layer < end


def owned_layers() -> tuple[int, int, int] | None:
    """``(start, end, num_layers)`` of this stage's decoder layers, or None to load every tensor."""
    from vllm.config import get_current_vllm_config_or_none
    from vllm.distributed import parallel_state

    config = get_current_vllm_config_or_none()
    if config is None:
        if parallel_state.model_parallel_is_initialized() and parallel_state.get_pp_group().world_size > 1:
            return _load_everything("no vLLM config is current while the weights load")
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
    if config.speculative_config is not None:
        return _load_everything("speculative decoding loads a draft model from the same checkpoint")
    num_layers = getattr(model.hf_text_config, "num_hidden_layers", None)
    if not isinstance(num_layers, int):
        return _load_everything(f"{model.model} declares no num_hidden_layers")
    group = parallel_state.get_pp_group()
    # The partition variable is part of the key: get_pp_indices reads it (and logs) on every call.
    return _stage_range(num_layers, group.rank_in_group, group.world_size,
                        os.environ.get("VLLM_PP_LAYER_PARTITION"))


@functools.lru_cache(maxsize=None)
def _stage_range(num_layers: int, rank: int, size: int, partition: str | None) -> tuple[int, int, int]:
    from vllm.distributed.utils import get_pp_indices

    start, end = get_pp_indices(num_layers, rank, size)
    logger.info("pipeline stage %d/%d reads decoder layers %d-%d of %d from the checkpoint",
                rank, size, start, end - 1, num_layers)
    return start, end, num_layers


@functools.lru_cache(maxsize=None)
def _load_everything(why: str) -> None:
    logger.info("pipeline-parallel: every stage reads the whole checkpoint: %s", why)
