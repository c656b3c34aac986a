# SPDX-License-Identifier: Apache-2.0
"""Start-up refusals at pipeline size > 1, when the configuration is built
(``VllmConfig.__post_init__``), before any worker starts or any weight is read.

- What the HPU runner's pipeline hooks do not handle yet: pooling models (vllm-gaudi
  calls the model without the previous stage's tensors), multimodal models (the
  vision encoder and ``embed_input_ids`` run on every stage, whose embedding is missing
  past the first) and speculative decoding other than MTP (MTP drafts on the last
  stage: ``drafts.py``, ``loader.py``, ``buckets.py``, ``speculative.py``): an EAGLE or
  draft model loads its own checkpoint, which the per-stage loader would split by the
  target's layers. vLLM's own runners are left alone.
- A transfer timeout that vLLM's step timeout would hide: when a stage waits on a
  silent neighbour for longer than vLLM's executor waits for the step, the engine fails
  with "RPC call to sample_tokens timed out" and the transfer's named error never
  reaches the log. The transfer may wait ``envs.RPC_TIMEOUT_SHARE`` of the step timeout.

Each refusal is one line (NotImplementedError, like vLLM's own start-up checks:
pydantic would turn a ValueError into a many-line report) saying what to do.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

from . import envs

if TYPE_CHECKING:
    from vllm.config import VllmConfig

__all__ = ["refuse_at_startup"]

USES = {
    "vllm/config/vllm.py": [
        "VllmConfig.model_config",
        "VllmConfig.parallel_config",
        "VllmConfig.device_config",
        "VllmConfig.speculative_config",
    ],
    "vllm/config/speculative.py": ["SpeculativeConfig.method"],
    "vllm/config/model.py": [
        "ModelConfig.runner_type",
        "ModelConfig.is_multimodal_model",
        "ModelConfig.architecture",
    ],
}


def refuse_at_startup(vllm_config: VllmConfig) -> None:
    """At pipeline size > 1: refuse what the pipeline cannot serve correctly."""
    pp = vllm_config.parallel_config.pipeline_parallel_size
    if pp == 1:
        return
    on_hpu = vllm_config.device_config.device_type == "hpu"
    if on_hpu and (reason := _unhandled_on_hpu(vllm_config)) is not None:
        raise NotImplementedError(
            f"pipeline_parallel_size={pp} on HPU does not handle {reason} yet: serve "
            "it with --pipeline-parallel-size 1"
        )
    _refuse_hidden_transfer_timeout(
        "VLLM_HPU_PP_TIMEOUT_S" if on_hpu else "VLLM_PP_TRANSFER_TIMEOUT_S"
    )


def _unhandled_on_hpu(vllm_config: VllmConfig) -> str | None:
    model = vllm_config.model_config
    if model is not None and model.runner_type == "pooling":
        return (
            f"pooling models ({model.architecture}: the model runs without the "
            "previous stage's tensors)"
        )
    if model is not None and model.is_multimodal_model:
        return (
            f"multimodal models ({model.architecture}: the vision encoder and "
            "embed_input_ids run on every stage)"
        )
    speculative = vllm_config.speculative_config
    if speculative is not None and speculative.method != "mtp":
        return (
            f"speculative decoding (method {speculative.method}: only MTP, drafted on "
            "the last stage, is built)"
        )
    return None


def _refuse_hidden_transfer_timeout(name: str) -> None:
    """An explicit transfer timeout must leave vLLM's step timeout room to report it
    (the default always does)."""
    if os.getenv(name) is None:
        return
    transfer, rpc = getattr(envs, name), envs.rpc_timeout_s()
    if transfer <= envs.RPC_TIMEOUT_SHARE * rpc:
        return
    needed = math.ceil(transfer / envs.RPC_TIMEOUT_SHARE)
    raise NotImplementedError(
        f"{name}={transfer:g} is not below {envs.RPC_TIMEOUT_SHARE:.0%} of "
        f"VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS={rpc:g}: vLLM's step timeout would end "
        "the run before the transfer's error; raise VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS "
        f"to {needed} or more, or lower {name}"
    )
