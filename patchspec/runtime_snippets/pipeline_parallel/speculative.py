# SPDX-License-Identifier: Apache-2.0
"""Speculative decoding at pipeline size > 1 on vLLM's own runners (CPU, CUDA): the
draft on the last stage only.

The runner builds its drafter, and the rejection sampler that verifies the drafts, on
the last pipeline stage only (``GPUModelRunner.__init__``: the drafts read the last
stage's hidden states or its sampled tokens). The earlier stages need no drafter: the
scheduler sends every stage the step's draft tokens, so each runs the verify shapes
(draft tokens + 1 per request) and forwards their hidden states, and the last stage
verifies, drafts again and returns the accepted tokens in the normal output. Three
things stood in the way:

- ``_build_attention_metadata`` reads ``self.drafter`` on every stage whenever a
  speculative config is set, so the first stage's first step failed with "object has
  no attribute 'drafter'": those reads ask ``drafts_here``, the constructor's condition.
- The drafts reached the scheduler before the step they continue. Without async
  scheduling the engine keeps ``pp`` steps in flight and takes the workers' drafts
  after scheduling each step (``EngineCore.post_step``), when the step whose sampled
  tokens they continue has not come back yet: the scheduler then scheduled a request
  in flight again with the drafts as tokens, and took the drafts of whichever step the
  last stage sampled last. Here the last stage puts each step's drafts in that step's
  output (``drafts_with_output``), and the engine hands them to the scheduler right
  after it has taken that output in (``take_drafts_of_output``), as it does at size 1,
  to the requests that output left caught up (not to one preempted meanwhile).
- The stages that do not sample learn a request's tokens from the scheduler, which sends
  the tokens from ``num_computed_tokens`` on: a step's accepted drafts were never sent,
  so those stages' copy of the request lost them (and a row written again from it, when
  a request changes batch, fed the model the wrong tokens). They are the first of the
  drafts that stage ran in the request's previous step: ``take_accepted_drafts`` keeps
  those and appends the accepted ones before the step's own tokens.

Inert at pipeline size 1, without a speculative config and under async scheduling
(whose runners draft and verify on the workers, and whose stages get the sampled tokens
from the last stage). vllm-gaudi's runner has the same two faults (MTP, which it runs
without async scheduling only): ``drafts.py`` gives its ``sample_tokens`` the first
fix and its ``_update_states`` calls ``take_accepted_drafts`` at the same statement.
Hooks import vLLM lazily: they are imported while vLLM's own modules are.
"""

from __future__ import annotations

import dataclasses
import functools
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.v1.core.sched.scheduler import Scheduler

__all__ = [
    "drafts_here",
    "drafts_ride_with_outputs",
    "drafts_with_output",
    "drafts_with_step_output",
    "pipelined_drafts",
    "take_accepted_drafts",
    "take_drafts_of_output",
]

USES = {
    "vllm/v1/worker/gpu_model_runner.py": [
        "GPUModelRunner.speculative_config",
        "GPUModelRunner.vllm_config",
        "GPUModelRunner.execute_model_state",
        "GPUModelRunner.take_draft_token_ids()",
        "GPUModelRunner.requests",
        "GPUModelRunner.input_batch",
    ],
    "vllm/distributed/parallel_state.py": [
        "get_pp_group()",
        "GroupCoordinator.is_last_rank",
    ],
    "vllm/v1/core/sched/scheduler.py": [
        "Scheduler.update_draft_token_ids(draft_token_ids)",
        "Scheduler.requests",
    ],
    "vllm/v1/request.py": [
        "Request.num_computed_tokens",
        "Request.num_tokens",
    ],
    "vllm/v1/outputs.py": [
        "DraftTokenIds.req_ids",
        "DraftTokenIds.draft_token_ids",
    ],
    "vllm/v1/worker/gpu_input_batch.py": [
        "InputBatch.req_id_to_index",
        "InputBatch.num_tokens_no_spec",
        "InputBatch.token_ids_cpu",
        "InputBatch.is_token_ids",
        "CachedRequestState.output_token_ids",
        "CachedRequestState.num_tokens",
    ],
}

# The attribute of a step's ModelRunnerOutput that carries the last stage's drafts.
DRAFTS = "pp_draft_token_ids"
# Per runner of a stage that does not sample: the drafts each request's last step ran.
_RAN_DRAFTS: weakref.WeakKeyDictionary[Any, dict[str, list[int]]] = (
    weakref.WeakKeyDictionary()
)


def drafts_here(runner: Any) -> bool:
    """Whether ``runner`` has a drafter: a speculative config and the last pipeline
    stage (every rank at pipeline size 1), as ``GPUModelRunner.__init__`` decides."""
    from vllm.distributed.parallel_state import get_pp_group

    return bool(runner.speculative_config) and get_pp_group().is_last_rank


def pipelined_drafts(vllm_config: VllmConfig) -> bool:
    """Pipeline size > 1 and a speculative config: the drafts are made on the last
    stage and the earlier stages run them."""
    return (
        vllm_config.parallel_config.pipeline_parallel_size > 1
        and vllm_config.speculative_config is not None
    )


def drafts_ride_with_outputs(vllm_config: VllmConfig) -> bool:
    """Pipelined drafts without async scheduling: each step's drafts come back in its
    output, not through ``take_draft_token_ids``."""
    return pipelined_drafts(vllm_config) and not (
        vllm_config.scheduler_config.async_scheduling
    )


def drafts_with_output(fn: Callable[..., Any]) -> Callable[..., Any]:
    """For ``wrap`` on ``GPUModelRunner.sample_tokens``: on the last stage, the drafts
    proposed after this step's sampling go back in the step's output."""
    return drafts_with_step_output(
        fn, drafts_here, lambda runner: runner.execute_model_state is not None
    )


def drafts_with_step_output(
    fn: Callable[..., Any],
    last_stage: Callable[[Any], bool],
    step_out: Callable[[Any], bool],
) -> Callable[..., Any]:
    """``fn`` (a runner's ``sample_tokens``) that, on the stage ``last_stage`` names
    and when ``step_out`` says a step waits for its sampling, sets the drafts proposed
    after it on its output. The runner's own ``take_draft_token_ids`` gives them."""

    @functools.wraps(fn)
    def sample_tokens(runner: Any, *args: Any, **kwargs: Any) -> Any:
        if not (drafts_ride_with_outputs(runner.vllm_config) and last_stage(runner)):
            return fn(runner, *args, **kwargs)
        sampled = step_out(runner)
        output = fn(runner, *args, **kwargs)
        if sampled:
            setattr(output, DRAFTS, runner.take_draft_token_ids())
        return output

    return sample_tokens


def take_drafts_of_output(scheduler: Scheduler, model_output: Any) -> None:
    """Right after the engine has taken a step's output in: its drafts to the scheduler,
    which schedules them with the tokens they continue.

    Only the drafts of requests the output left caught up (``num_computed_tokens`` one
    short of ``num_tokens``, as after any step at size 1). A request preempted while
    the step was out gets the step's tokens all the same (vLLM's stale output) but has
    nothing computed, or, resumed since, a prefill in flight: given the drafts, it was
    scheduled again with them while that prefill was out, with fewer tokens than drafts
    (the proposer then read past its indexes)."""
    drafts = getattr(model_output, DRAFTS, None)
    if drafts is None:
        return
    kept = [
        (req_id, tokens)
        for req_id, tokens in zip(drafts.req_ids, drafts.draft_token_ids, strict=True)
        if (request := scheduler.requests.get(req_id)) is not None
        and request.num_computed_tokens == request.num_tokens - 1
    ]
    scheduler.update_draft_token_ids(
        dataclasses.replace(
            drafts,
            req_ids=[req_id for req_id, _ in kept],
            draft_token_ids=[tokens for _, tokens in kept],
        )
    )


def take_accepted_drafts(
    runner: Any, scheduler_output: Any, is_last_rank: bool
) -> None:
    """In ``_update_states``, before the cached requests take this step's tokens: on a
    stage that does not sample (``is_last_rank``, the method's own), append to each
    request the drafts its previous step ran that the last stage accepted
    (``num_computed_tokens`` went past the tokens the stage holds by that many), then
    keep this step's drafts for the next. vLLM's and vllm-gaudi's runners alike."""
    if is_last_rank or not drafts_ride_with_outputs(runner.vllm_config):
        return
    ran = _RAN_DRAFTS.setdefault(runner, {})
    for req_id in scheduler_output.finished_req_ids:
        ran.pop(req_id, None)
    cached = scheduler_output.scheduled_cached_reqs
    batch = runner.input_batch
    computed_tokens = cached.num_computed_tokens
    for req_id, computed in zip(cached.req_ids, computed_tokens, strict=True):
        drafts = ran.pop(req_id, ())
        state = runner.requests[req_id]
        count = computed - state.num_tokens
        if not drafts or count <= 0 or req_id in cached.resumed_req_ids:
            continue
        accepted = drafts[:count]
        state.output_token_ids.extend(accepted)
        row = batch.req_id_to_index.get(req_id)
        if row is not None:
            start = batch.num_tokens_no_spec[row]
            batch.token_ids_cpu[row, start : start + len(accepted)] = accepted
            # vllm-gaudi's batch keeps no is_token_ids
            if (is_token_ids := getattr(batch, "is_token_ids", None)) is not None:
                is_token_ids[row, start : start + len(accepted)] = True
            batch.num_tokens_no_spec[row] = start + len(accepted)
    ran.update(scheduler_output.scheduled_spec_decode_tokens)
