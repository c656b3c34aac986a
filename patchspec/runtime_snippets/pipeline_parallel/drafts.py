# SPDX-License-Identifier: Apache-2.0
"""Speculative decoding at pipeline size > 1 on the HPU runner: the draft lives on the
last stage only.

Multi-token prediction (MTP, ``num_nextn_predict_layers`` of DeepSeek- and GLM-class
checkpoints) drafts from the last decoder layer's hidden states and shares the
embedding and LM head, all of which only the last stage holds. vllm-gaudi makes its
drafter on every rank (its own note says drafting is for the last rank) and
``load_model`` loads the draft model wherever a drafter exists. Here a non-last stage
drops the drafter before ``load_model`` runs, so it loads no draft layer (the loader
gives the MTP layers to the last stage only, ``loader.py``); the last stage proposes
and verifies as at size 1, after the early return of the non-last stages
(``runner.non_last_stage_output``). Every stage runs the verify step's forwards,
draft tokens + 1 per request, from the same scheduler output, in the buckets
``buckets.py`` prepares for one microbatch. The drafts then need what
``speculative.py`` gives vLLM's runners: each step's drafts go back in that step's
output (``hpu_drafts_with_output``: vllm-gaudi's ``sample_tokens`` keeps its step in
``scheduler_output``), for the engine to take them after that output, and the earlier
stages keep the drafts the last stage accepted (``take_accepted_drafts`` in
vllm-gaudi's ``_update_states``).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from ._logging import get_logger
from .speculative import drafts_with_step_output

__all__ = ["draft_on_last_stage", "hpu_drafts_with_output"]

logger = get_logger(__name__)

USES = {
    "vllm_gaudi/v1/worker/hpu_model_runner.py": [
        "HPUModelRunner.load_model()",
        "HPUModelRunner.drafter",
        "HPUModelRunner.parallel_config",
        "HPUModelRunner.vllm_config",
        "HPUModelRunner.scheduler_output",
        "HPUModelRunner.take_draft_token_ids()",
        "get_pp_group",
    ],
}


def draft_on_last_stage(fn: Callable[..., Any]) -> Callable[..., Any]:
    """For ``wrap`` on ``HPUModelRunner.load_model``: at pipeline size > 1 a non-last
    stage drops the drafter first, so that no draft model is loaded there."""

    @functools.wraps(fn)
    def load_model(runner: Any, *args: Any, **kwargs: Any) -> Any:
        if (
            runner.parallel_config.pipeline_parallel_size > 1
            and hasattr(runner, "drafter")
            and not _last_stage(runner)
        ):
            logger.info(
                "pipeline stage before the last: no draft model (%s), the last stage "
                "drafts",
                type(runner.drafter).__name__,
            )
            del runner.drafter
        return fn(runner, *args, **kwargs)

    return load_model


def hpu_drafts_with_output(fn: Callable[..., Any]) -> Callable[..., Any]:
    """For ``wrap`` on ``HPUModelRunner.sample_tokens``: on the last stage, the drafts
    proposed after this step's sampling go back in the step's output."""
    return drafts_with_step_output(
        fn, _last_stage, lambda runner: runner.scheduler_output is not None
    )


def _last_stage(runner: Any) -> bool:
    """The runner module's own pipeline group says whether this is the last stage."""
    return bool(sys.modules[type(runner).__module__].get_pp_group().is_last_rank)
