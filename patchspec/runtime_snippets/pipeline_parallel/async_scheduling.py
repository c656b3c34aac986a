# SPDX-License-Identifier: Apache-2.0
"""Async scheduling is decided when the configuration is built, not when a worker
starts.

A non-last stage takes the tokens the last stage sampled from the scheduler's next step;
under async scheduling the scheduler does not send them. vLLM 0.30 turns async
scheduling on whenever the user left it unset, so ``VllmConfig.__post_init__`` calls
this just before it resolves the setting: unset becomes off with one log line, an
explicit request is refused with one line naming the flag.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._logging import get_logger

if TYPE_CHECKING:
    from vllm.config import VllmConfig

__all__ = ["async_scheduling_off_for_pipeline"]

logger = get_logger(__name__)


def async_scheduling_off_for_pipeline(vllm_config: VllmConfig) -> None:
    """At pipeline size > 1: unset async scheduling becomes off; on is refused
    (NotImplementedError, like vLLM's own start-up checks: pydantic would turn a
    ValueError into a many-line report)."""
    pp = vllm_config.parallel_config.pipeline_parallel_size
    scheduler_config = vllm_config.scheduler_config
    if pp == 1 or scheduler_config.async_scheduling is False:
        return
    if scheduler_config.async_scheduling is None:
        logger.info(
            "pipeline_parallel_size=%d: async scheduling off, the non-last stages "
            "take the sampled tokens from the scheduler",
            pp,
        )
        scheduler_config.async_scheduling = False
        return
    raise NotImplementedError(
        f"--async-scheduling does not work with pipeline_parallel_size={pp} here (the "
        "non-last stages take the sampled tokens from the scheduler): drop it or pass "
        "--no-async-scheduling"
    )
