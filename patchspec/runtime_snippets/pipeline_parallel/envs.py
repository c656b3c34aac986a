# SPDX-License-Identifier: Apache-2.0
"""Environment variables of the pipeline-parallel runtime, read when asked (as in
``vllm.envs``).

Values are read at each attribute access, not at import, so a process (or a test) may
set them late.

Transfer timeouts default to a share of vLLM's ``VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS``
(the executor's bound on one step, 300 s by default), so that a silent peer stops the
waiting stage with the transfer's named error while vLLM still waits for that stage's
answer; ``startup.py`` refuses an explicit value that leaves it no room.
"""

import os
from collections.abc import Callable
from typing import Any

# The share of vLLM's step timeout a stage may wait on its neighbour: the rest covers
# the step queued ahead of the waiting one on that stage and the error's way back.
RPC_TIMEOUT_SHARE = 0.8


def rpc_timeout_s() -> float:
    """vLLM's ``VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS``, as vLLM reads it."""
    from vllm import envs as vllm_envs

    return float(vllm_envs.VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS)


def _transfer_timeout_s(name: str) -> float:
    value = os.getenv(name)
    if value is not None:
        return float(value)
    return RPC_TIMEOUT_SHARE * rpc_timeout_s()


environment_variables: dict[str, Callable[[], Any]] = {
    # Every N messages, tensor-parallel rank 0 of each stage logs its transfer counters;
    # 0 = off.
    "VLLM_HPU_PP_STATS_EVERY": lambda: int(os.getenv("VLLM_HPU_PP_STATS_EVERY", "0")),
    # Seconds a stage-to-stage send, receive or all-gather may take before the peer
    # counts as dead; by default RPC_TIMEOUT_SHARE of VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS
    # (240 s at vLLM's default). First-forward graph compiles of the previous stage need
    # more: raise VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS and this follows (docs/serving.md).
    "VLLM_HPU_PP_TIMEOUT_S": lambda: _transfer_timeout_s("VLLM_HPU_PP_TIMEOUT_S"),
    # Seconds a worker's start-up at pipeline size > 1 (rendezvous, groups, handshake)
    # may take before it stops, naming what it waited for: the nodes must start within
    # it of each other. A refusal on another rank stops it at once (rendezvous.py).
    "VLLM_PP_START_UP_TIMEOUT_S": lambda: float(
        os.getenv("VLLM_PP_START_UP_TIMEOUT_S", "600")
    ),
    # Seconds a rank may stay inside a step after a failure anywhere in the pipeline
    # (its own, or one another rank told it of) before it is stopped: long enough for
    # the output rank to report the error to vLLM (notice.py).
    "VLLM_PP_FAILURE_GRACE_S": lambda: float(
        os.getenv("VLLM_PP_FAILURE_GRACE_S", "5")
    ),
    # Payloads of at least this many bytes are split across the tensor-parallel ranks.
    "VLLM_HPU_PP_SPLIT_BYTES": lambda: int(
        os.getenv("VLLM_HPU_PP_SPLIT_BYTES", str(1 << 20))
    ),
    # Largest message a stage accepts; each of the two receive buffers reserves (not
    # touches) this much memory.
    "VLLM_HPU_PP_MAX_MESSAGE_BYTES": lambda: int(
        os.getenv("VLLM_HPU_PP_MAX_MESSAGE_BYTES", str(1 << 30))
    ),
    # 1 keeps vllm-gaudi's HCCL all-reduce over the whole world at start-up, for nodes
    # with scale-out links; by default the world is checked over gloo and HCCL only over
    # the tensor-parallel group.
    "VLLM_HPU_PP_HCCL_WORLD_CHECK": lambda: bool(
        int(os.getenv("VLLM_HPU_PP_HCCL_WORLD_CHECK", "0"))
    ),
    # 0 keeps a runner's one persistent batch at pipeline size > 1 (each step then
    # writes the other microbatch's rows again); by default one batch per microbatch
    # (batches.py). Every stage must use the same: the handshake compares it.
    "VLLM_PP_BATCH_PER_MICROBATCH": lambda: bool(
        int(os.getenv("VLLM_PP_BATCH_PER_MICROBATCH", "1"))
    ),
    # vLLM's own pipeline path (GroupCoordinator.isend/irecv_tensor_dict, the
    # pipeline-transfer spec): seconds a stage-to-stage transfer may take before the
    # peer counts as dead (defaulting as VLLM_HPU_PP_TIMEOUT_S does), and the stats
    # interval.
    "VLLM_PP_TRANSFER_TIMEOUT_S": lambda: _transfer_timeout_s(
        "VLLM_PP_TRANSFER_TIMEOUT_S"
    ),
    "VLLM_PP_TRANSFER_STATS_EVERY": lambda: int(
        os.getenv("VLLM_PP_TRANSFER_STATS_EVERY", "0")
    ),
    # The port each node's first rank serves its stage's readiness on once the stage
    # has shaken hands (probe.py, for an orchestrator's probes); unset: none.
    "VLLM_PP_PROBE_PORT": lambda: (
        int(os.environ["VLLM_PP_PROBE_PORT"])
        if os.getenv("VLLM_PP_PROBE_PORT")
        else None
    ),
    # The address it listens on (the pod's every address by default).
    "VLLM_PP_PROBE_HOST": lambda: os.getenv("VLLM_PP_PROBE_HOST", "0.0.0.0"),
}


def __getattr__(name: str) -> Any:
    if name in environment_variables:
        return environment_variables[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
