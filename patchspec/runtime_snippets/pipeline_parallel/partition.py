# SPDX-License-Identifier: Apache-2.0
"""Start-up guard: no stage may start on a layer that reuses state computed by an
earlier layer.

DeepSeek sparse attention can share its indexer: a "shared" layer reuses the top-k
positions of the last layer that ran a full indexer. That state never crosses a stage
boundary, so a stage starting on a shared layer would read nothing. The spec declares
which model families share state and how their config says so
(``ModelConfig.verify_with_parallel_config`` passes them here); this refuses such a
partition with one line naming the layer and a partition that works. Only where the
indexer runs: vllm-gaudi runs DSA layers as dense MLA and never calls it (v0.26.0
``attention/oot_mla.py``, main ``platform.py``), so on HPU every partition is served.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PretrainedConfig
    from vllm.config import ModelConfig, ParallelConfig

__all__ = ["RULES", "refuse_split_shared_state", "valid_partition"]


def _index_topk_shared(config: PretrainedConfig, layer: int) -> bool:
    """DeepSeek V3.2 IndexCache (``index_topk_pattern``, else ``index_topk_freq`` after
    an offset)."""
    if not hasattr(config, "index_topk"):
        return False
    pattern = getattr(config, "index_topk_pattern", None)
    if pattern is not None:
        return layer < len(pattern) and pattern[layer] == "S"
    freq = getattr(config, "index_topk_freq", 1)
    offset = getattr(config, "index_skip_topk_offset", 2)
    return max(layer - offset + 1, 0) % freq != 0


def _indexer_types_shared(config: PretrainedConfig, layer: int) -> bool:
    """Per-layer ``indexer_types``: "shared" reuses the most recent "full" indexer."""
    types = getattr(config, "indexer_types", None) or ()
    return layer < len(types) and types[layer] == "shared"


RULES = {"index_topk": _index_topk_shared, "indexer_types": _indexer_types_shared}


# Devices whose attention backends run DSA layers without their indexer.
_DENSE_DSA_DEVICES = frozenset({"hpu"})


def refuse_split_shared_state(
    model_config: ModelConfig,
    parallel_config: ParallelConfig,
    families: dict[str, str],
    device_type: str | None = None,
) -> None:
    """Refuse a partition where a stage of this text-only model would start on a
    state-reusing layer.

    ``families`` maps a config ``model_type`` to the name of its rule in ``RULES``;
    ``device_type``: the platform's (vLLM's ``current_platform``) unless given.
    NotImplementedError, like vLLM's own check beside the call: pydantic would wrap a
    ValueError into a many-line report."""
    pp = parallel_config.pipeline_parallel_size
    config = model_config.hf_text_config
    rule = families.get(getattr(config, "model_type", None))
    if pp == 1 or rule is None or model_config.is_multimodal_model:
        return
    if device_type is None:
        from vllm.platforms import current_platform

        device_type = current_platform.device_type
    if device_type in _DENSE_DSA_DEVICES:
        return
    from vllm.distributed.utils import get_pp_indices

    num_layers = config.num_hidden_layers
    shared = RULES[rule]
    for rank in range(1, pp):
        start, _ = get_pp_indices(num_layers, rank, pp)
        if shared(config, start):
            partition = valid_partition(
                num_layers, pp, lambda layer: shared(config, layer)
            )
            fix = (
                "no partition avoids it"
                if partition is None
                else "use VLLM_PP_LAYER_PARTITION=" + ",".join(map(str, partition))
            )
            raise NotImplementedError(
                f"pipeline stage {rank} would start on layer {start} of "
                f"{config.model_type}, "
                f"which reuses state ({rule}) from an earlier layer: {fix}"
            )


def valid_partition(
    num_layers: int, pp: int, shared: Callable[[int], bool]
) -> list[int] | None:
    """Layer counts per stage, as even as possible, whose stages all start on a layer
    not ``shared``."""
    starts = [layer for layer in range(1, num_layers) if not shared(layer)]
    bounds = [0]
    for rank in range(1, pp):
        ideal = round(rank * num_layers / pp)
        # Each later stage needs a start of its own after this one.
        room = [s for s in starts if s > bounds[-1]]
        room = room[: len(room) - (pp - 1 - rank)]
        if not room:
            return None
        bounds.append(min(room, key=lambda s: (abs(s - ideal), s)))
    bounds.append(num_layers)
    return [b - a for a, b in itertools.pairwise(bounds)]
