# SPDX-License-Identifier: Apache-2.0
"""Environment variables of the pipeline-parallel runtime, read when asked (as in
``vllm.envs``).

Values are read at each attribute access, not at import, so a process (or a test) may
set them late.
"""

import os
from typing import Any, Callable

environment_variables: dict[str, Callable[[], Any]] = {
    # Every N messages, tensor-parallel rank 0 of each stage logs its transfer counters;
    # 0 = off.
    "VLLM_HPU_PP_STATS_EVERY": lambda: int(os.getenv("VLLM_HPU_PP_STATS_EVERY", "0")),
    # Seconds a stage-to-stage send, receive or all-gather may take before the peer
    # counts as dead. Generous by default: the first forward of the previous stage may
    # compile HPU graphs.
    "VLLM_HPU_PP_TIMEOUT_S": lambda: float(os.getenv("VLLM_HPU_PP_TIMEOUT_S", "600")),
    # Payloads of at least this many bytes are split across the tensor-parallel ranks.
    "VLLM_HPU_PP_SPLIT_BYTES": lambda: int(
        os.getenv("VLLM_HPU_PP_SPLIT_BYTES", str(1 << 20))
    ),
    # Largest message a stage accepts; the receive buffer reserves (not touches) this
    # much memory.
    "VLLM_HPU_PP_MAX_MESSAGE_BYTES": lambda: int(
        os.getenv("VLLM_HPU_PP_MAX_MESSAGE_BYTES", str(1 << 30))
    ),
    # 1 keeps vllm-gaudi's HCCL all-reduce over the whole world at start-up, for nodes
    # with scale-out links; by default the world is checked over gloo and HCCL only over
    # the tensor-parallel group.
    "VLLM_HPU_PP_HCCL_WORLD_CHECK": lambda: bool(
        int(os.getenv("VLLM_HPU_PP_HCCL_WORLD_CHECK", "0"))
    ),
    # vLLM's own pipeline path (GroupCoordinator.isend/irecv_tensor_dict, the
    # pipeline-transfer spec): seconds a stage-to-stage transfer may take before the
    # peer counts as dead, and the stats interval.
    "VLLM_PP_TRANSFER_TIMEOUT_S": lambda: float(
        os.getenv("VLLM_PP_TRANSFER_TIMEOUT_S", "600")
    ),
    "VLLM_PP_TRANSFER_STATS_EVERY": lambda: int(
        os.getenv("VLLM_PP_TRANSFER_STATS_EVERY", "0")
    ),
}


def __getattr__(name: str) -> Any:
    if name in environment_variables:
        return environment_variables[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
