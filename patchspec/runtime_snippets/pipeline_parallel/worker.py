# SPDX-License-Identifier: Apache-2.0
"""Worker start-up at pipeline size > 1.

vllm-gaudi checks the distributed world with an HCCL all-reduce over every rank, which
fails between nodes without RoCE scale-out links (the pipeline stages talk over the host
network instead). The world check runs over gloo, and the HCCL check over the node-local
tensor-parallel group. ``VLLM_HPU_PP_HCCL_WORLD_CHECK=1`` keeps the original check, for
nodes that have scale-out links.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from . import envs
from ._logging import get_logger

if TYPE_CHECKING:
    from vllm.config import VllmConfig

__all__ = ["check_group_sum", "checked_world_without_hccl"]

logger = get_logger(__name__)

USES = {
    "vllm_gaudi/v1/worker/hpu_worker.py": [
        "ensure_model_parallel_initialized("
        "tensor_model_parallel_size, pipeline_model_parallel_size)",
        "get_tp_group()",
    ],
}


def checked_world_without_hccl(
    vllm_config: VllmConfig,
    ensure_model_parallel_initialized: Callable[[int, int], None],
    get_tp_group: Callable[[], Any],
) -> bool:
    """In ``init_worker_distributed_environment`` before its HCCL world check: at
    pipeline size > 1 run the checks here, set up the model-parallel groups and tell the
    caller to return. The caller passes its module's own vLLM functions, so that this
    runs with whatever that module uses."""
    parallel_config = vllm_config.parallel_config
    if parallel_config.pipeline_parallel_size == 1:
        return False
    if envs.VLLM_HPU_PP_HCCL_WORLD_CHECK:
        return False
    expected = parallel_config.world_size * parallel_config.data_parallel_size
    world = dist.new_group(backend="gloo")
    check_group_sum(world, torch.device("cpu"), expected, "world (gloo)")
    dist.destroy_process_group(world)
    ensure_model_parallel_initialized(
        parallel_config.tensor_parallel_size, parallel_config.pipeline_parallel_size
    )
    tp = get_tp_group()
    check_group_sum(
        tp.device_group,
        torch.device(vllm_config.device_config.device),
        tp.world_size,
        "tensor-parallel group",
    )
    logger.info(
        "distributed world checked over gloo, device collectives over the "
        "tensor-parallel group"
    )
    return True


def check_group_sum(
    group: dist.ProcessGroup, device: torch.device, expected: int, what: str
) -> None:
    """All-reduce a one over ``group`` on ``device``; every rank must answer."""
    one = torch.ones(1, device=device)
    dist.all_reduce(one, group=group)
    got = int(one.item())
    if got != expected:
        raise RuntimeError(
            f"distributed start-up check over the {what}: expected {expected} ranks, "
            f"got {got}"
        )
