# SPDX-License-Identifier: Apache-2.0
"""Async scheduling is decided when the configuration is built, not when a worker
starts.

vLLM's own runners (CPU, CUDA) run async scheduling at pipeline size > 1: the last
stage broadcasts the sampled tokens to the others over the pipeline group's device
group, beside the stage-to-stage transfer, and ``AsyncScheduler`` keeps ``pp`` steps
in flight (the microbatch cap stays off under it). The HPU runner's non-last stages
take the sampled tokens from the scheduler's next step, which async scheduling does not
send: on HPU, vLLM 0.30's unset setting (which it turns on) becomes off with one log
line and an explicit request is refused in one line naming the platform.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._logging import get_logger

if TYPE_CHECKING:
    from vllm.config import VllmConfig

__all__ = ["async_scheduling_off_for_pipeline"]

logger = get_logger(__name__)


def async_scheduling_off_for_pipeline(vllm_config: VllmConfig) -> None:
    """At pipeline size > 1 on HPU: unset async scheduling becomes off; on is refused
    (NotImplementedError, like vLLM's own start-up checks: pydantic would turn a
    ValueError into a many-line report). Elsewhere vLLM resolves it as it does."""
    pp = vllm_config.parallel_config.pipeline_parallel_size
    scheduler_config = vllm_config.scheduler_config
    device = vllm_config.device_config.device_type
    if pp == 1 or device != "hpu" or scheduler_config.async_scheduling is False:
        return
    if scheduler_config.async_scheduling is None:
        logger.info(
            "pipeline_parallel_size=%d: async scheduling off on HPU, the non-last "
            "stages take the sampled tokens from the scheduler",
            pp,
        )
        scheduler_config.async_scheduling = False
        return
    raise NotImplementedError(
        f"--async-scheduling does not work with pipeline_parallel_size={pp} on HPU "
        "(the HPU runner's non-last stages take the sampled tokens from the "
        "scheduler): drop it or pass --no-async-scheduling"
    )
