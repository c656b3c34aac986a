# SPDX-License-Identifier: Apache-2.0
"""Start-up checks of the largest stage-to-stage message the configuration allows: its
size on the wire, and the device memory it holds.

A forward carries at most ``max_num_batched_tokens`` tokens (vllm-gaudi's prompt
buckets keep batch x query within it), and each tensor-parallel rank sends and receives
its share of that forward's IntermediateTensors. Both ends refuse a message above
``VLLM_HPU_PP_MAX_MESSAGE_BYTES``; without this check the first long prefill would find
out in production. The stage's first use (the profile run, before the KV cache is
sized) computes that share for the model's own tensors, as meta tensors, and refuses in
one line naming the variable to raise.

The same forward's tensors hold device memory that vllm-gaudi's KV-cache sizing never
sees (``profile_run(initialize_only=True)`` runs no forward, let alone a transfer):
``transfer_device_bytes`` is what the worker takes off the KV cache's share.
"""

from __future__ import annotations

from typing import Any

import torch

from . import envs
from .wire import Layout, plan, rank_message_bytes

__all__ = ["refuse_oversized_forward", "transfer_device_bytes"]

USES = {
    "vllm_gaudi/v1/worker/hpu_model_runner.py": [
        "HPUModelRunner.scheduler_config",
        "HPUModelRunner.get_model()",
        "HPUModelRunner.dtype",
    ],
}


def _largest_forward(runner: Any) -> tuple[int, Any]:
    """``max_num_batched_tokens`` and the model's IntermediateTensors for a forward of
    that many tokens, as meta tensors."""
    tokens = runner.scheduler_config.max_num_batched_tokens
    return tokens, runner.get_model().make_empty_intermediate_tensors(
        batch_size=tokens, dtype=runner.dtype, device=torch.device("meta")
    )


def refuse_oversized_forward(runner: Any, tp_size: int) -> None:
    """Raise ValueError when a forward of ``max_num_batched_tokens`` tokens would send
    one tensor-parallel rank more than ``VLLM_HPU_PP_MAX_MESSAGE_BYTES``."""
    tokens, tensors = _largest_forward(runner)
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


def transfer_device_bytes(
    runner: Any, tp_size: int, receives: bool, sends: bool
) -> int:
    """Device memory one card of a stage holds for the stage-to-stage tensors of a
    forward of ``max_num_batched_tokens`` tokens: on a stage that ``receives``, the
    returned tensors (every rank gets the whole payload) and, while a split payload is
    gathered, the rank's own slices on the device and the scratch of each tensor's
    uneven last round; on a stage that ``sends``, its outputs cloned inside the graph
    (``stage_output``)."""
    tokens, tensors = _largest_forward(runner)
    layout = plan(dict(tensors.tensors), tokens, tp_size, envs.VLLM_HPU_PP_SPLIT_BYTES)
    held = layout.payload_bytes if sends else 0
    if receives:
        held += layout.payload_bytes + _gathered_extra(layout)
    return held


def _gathered_extra(layout: Layout) -> int:
    """What receiving a split payload holds besides the returned tensors."""
    if layout.parts == 1:
        return 0
    slices = sum(r.slice_bytes for r in layout.rounds)
    scratch = sum(
        layout.parts * r.slice_bytes
        for r in layout.rounds
        if not r.fills(layout.parts)
    )
    return slices + scratch
