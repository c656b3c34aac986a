# SPDX-License-Identifier: Apache-2.0
"""Start-up check of the largest stage-to-stage message the configuration allows.

A forward carries at most ``max_num_batched_tokens`` tokens (vllm-gaudi's prompt
buckets keep batch x query within it), and each tensor-parallel rank sends and receives
its share of that forward's IntermediateTensors. Both ends refuse a message above
``VLLM_HPU_PP_MAX_MESSAGE_BYTES``; without this check the first long prefill would find
out in production. The stage's first use (the profile run, before the KV cache is
sized) computes that share for the model's own tensors, as meta tensors, and refuses in
one line naming the variable to raise.
"""

from __future__ import annotations

from typing import Any

import torch

from . import envs
from .wire import rank_message_bytes

__all__ = ["refuse_oversized_forward"]

USES = {
    "vllm_gaudi/v1/worker/hpu_model_runner.py": [
        "HPUModelRunner.scheduler_config",
        "HPUModelRunner.get_model()",
        "HPUModelRunner.dtype",
    ],
}


def refuse_oversized_forward(runner: Any, tp_size: int) -> None:
    """Raise ValueError when a forward of ``max_num_batched_tokens`` tokens would send
    one tensor-parallel rank more than ``VLLM_HPU_PP_MAX_MESSAGE_BYTES``."""
    tokens = runner.scheduler_config.max_num_batched_tokens
    tensors = runner.get_model().make_empty_intermediate_tensors(
        batch_size=tokens, dtype=runner.dtype, device=torch.device("meta")
    )
    need = rank_message_bytes(
        dict(tensors.tensors), tokens, tp_size, envs.VLLM_HPU_PP_SPLIT_BYTES
    )
    limit = envs.VLLM_HPU_PP_MAX_MESSAGE_BYTES
    if need > limit:
        raise ValueError(
            f"pipeline transfer: a forward of max_num_batched_tokens={tokens} sends "
            f"{need} bytes per tensor-parallel rank ({', '.join(tensors.tensors)}), "
            f"above VLLM_HPU_PP_MAX_MESSAGE_BYTES={limit}: set it to {need} or more on "
            "every node, or lower --max-num-batched-tokens"
        )
