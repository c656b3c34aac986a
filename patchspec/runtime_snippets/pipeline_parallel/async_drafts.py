# SPDX-License-Identifier: Apache-2.0
"""Drafts under async scheduling at pipeline size > 1 on vLLM's own runners (CPU,
CUDA): the last stage sends every stage what the next step's inputs need.

Under async scheduling the scheduler schedules a step before the previous one's outcome
is known: every request with placeholder drafts, all counted computed. The runner that
drafted fills them in on the device: ``_prepare_input_ids`` scatters the previous
step's next token and drafts into the inputs, and the deferred correction takes the
rejected drafts back from ``num_computed_tokens``. At size 2 the earlier stages run
the same inputs but hold neither drafter nor sampler, and stock vLLM sends them the
sampled tokens only (``[requests, 1]``, asserted, before the drafts exist): its first
speculative step failed that assertion.

Here the last stage sends, after drafting, each request's next token (what stock
sends) and then its drafts and its count of valid sampled tokens, over the pipeline
group's device group, in the order the earlier stages post the receives; those wait
for both before ``_update_states`` and set them where a drafting runner keeps its own
(``_draft_token_ids``, ``valid_sampled_token_count_cpu`` and its event, the device
copy for the correction on the device). Both ends skip a step whose requests all
discard their samples, as stock does, each by its own ``discard_request_mask``.

That mask compares a request's tokens with the scheduler's count. An earlier stage's
copy of a request's output grows by a placeholder per step and by the drafts counted
accepted in advance; the last stage cuts its copy back to the scheduler's count every
step, the others did not, so after a few steps an earlier stage took every request for
a prefill still under way and skipped a receive the last stage sent: both waited on
each other from then on. They cut back the same way (``align_stage_outputs``).

Inert at pipeline size 1, without a speculative config, without async scheduling, and
on HPU (refused there, ``async_scheduling.py``).
Hooks import vLLM lazily: they are imported while vLLM's own modules are.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from .speculative import pipelined_drafts

if TYPE_CHECKING:
    from vllm.config import VllmConfig

__all__ = [
    "align_stage_outputs",
    "drafts_cross_stages",
    "receive_drafts",
    "send_drafts",
    "take_stage_drafts",
    "tokens_after_drafts",
]

USES = {
    "vllm/v1/worker/gpu_model_runner.py": [
        "GPUModelRunner.vllm_config",
        "GPUModelRunner.execute_model_state",
        "GPUModelRunner.num_spec_tokens",
        "GPUModelRunner._draft_token_ids",
        "GPUModelRunner.prev_num_spec_tokens",
        "GPUModelRunner.valid_sampled_token_count_cpu",
        "GPUModelRunner.valid_sampled_token_count_event",
        "GPUModelRunner.valid_sampled_token_count_gpu",
        "GPUModelRunner.use_async_spec_decode",
        "GPUModelRunner._is_all_reqs_chunked_prefill()",
        "GPUModelRunner._get_valid_sampled_token_count()",
        "GPUModelRunner.input_batch",
        "GPUModelRunner.device",
    ],
    "vllm/v1/worker/gpu_input_batch.py": [
        "InputBatch.prev_sampled_token_ids",
        "InputBatch.num_reqs",
        "InputBatch.num_tokens_no_spec",
        "InputBatch.num_prompt_tokens",
        "CachedRequestState.output_token_ids",
    ],
    "vllm/distributed/parallel_state.py": [
        "get_pp_group()",
        "GroupCoordinator.is_last_rank",
        "GroupCoordinator.rank",
        "GroupCoordinator.last_rank",
        "GroupCoordinator.device_group",
    ],
}

# Per runner of an earlier stage: the posted receive of the drafts and counts.
_PENDING: weakref.WeakKeyDictionary[Any, tuple[torch.Tensor, Any]] = (
    weakref.WeakKeyDictionary()
)


def drafts_cross_stages(vllm_config: VllmConfig) -> bool:
    """Pipelined drafts (``speculative.pipelined_drafts``) under async scheduling."""
    return pipelined_drafts(vllm_config) and bool(
        vllm_config.scheduler_config.async_scheduling
    )


def tokens_after_drafts(fn: Callable[..., Any]) -> Callable[..., Any]:
    """For ``wrap`` on ``GPUModelRunner._pp_broadcast_prev_sampled_token_ids``: with
    drafts, the last stage sends the next tokens after drafting (``send_drafts``), not
    the sampled rows before it."""

    @functools.wraps(fn)
    def _pp_broadcast_prev_sampled_token_ids(runner: Any, *args: Any, **kwargs: Any):
        if drafts_cross_stages(runner.vllm_config):
            return None
        return fn(runner, *args, **kwargs)

    return _pp_broadcast_prev_sampled_token_ids


def send_drafts(fn: Callable[..., Any]) -> Callable[..., Any]:
    """For ``wrap`` on ``GPUModelRunner.sample_tokens``: on the last stage, after the
    step's sampling and drafting, its next tokens, then its drafts and valid counts."""

    @functools.wraps(fn)
    def sample_tokens(runner: Any, *args: Any, **kwargs: Any) -> Any:
        from vllm.distributed.parallel_state import get_pp_group

        if not drafts_cross_stages(runner.vllm_config):
            return fn(runner, *args, **kwargs)
        pp = get_pp_group()
        sampled = runner.execute_model_state is not None
        output = fn(runner, *args, **kwargs)
        if pp.is_last_rank and sampled and not runner._is_all_reqs_chunked_prefill():
            next_tokens, drafts_and_counts = _stage_drafts(runner)
            group = pp.device_group
            torch.distributed.broadcast(next_tokens, src=pp.rank, group=group)
            torch.distributed.broadcast(drafts_and_counts, src=pp.rank, group=group)
        return output

    return sample_tokens


def _stage_drafts(runner: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """The last stage's next token per request ``[requests, 1]`` and its drafts with
    the count of valid sampled tokens ``[requests, drafts + 1]``, int32."""
    num_reqs = runner.input_batch.num_reqs
    next_tokens = runner.input_batch.prev_sampled_token_ids
    drafts = runner._draft_token_ids
    counts = runner._get_valid_sampled_token_count()
    assert next_tokens is not None and isinstance(drafts, torch.Tensor), (
        "async scheduling with drafts: the last stage proposed no drafts"
    )
    assert drafts.shape == (num_reqs, runner.num_spec_tokens), (
        f"drafts of shape {tuple(drafts.shape)}, expected "
        f"({num_reqs}, {runner.num_spec_tokens})"
    )
    packed = torch.empty(
        (num_reqs, runner.num_spec_tokens + 1), dtype=torch.int32, device=drafts.device
    )
    packed[:, :-1] = drafts
    packed[:, -1] = torch.tensor(counts, dtype=torch.int32)
    return next_tokens.to(torch.int32), packed


def receive_drafts(fn: Callable[..., Any]) -> Callable[..., Any]:
    """For ``wrap`` on the runner's receive of the previous step's sampled tokens
    (``_pp_receive_prev_sampled_token_ids_to_input_batch``): after stock posts the
    receive of the next tokens, post that of the drafts and counts, which the last
    stage sends next."""

    @functools.wraps(fn)
    def _pp_receive_prev_sampled_token_ids_to_input_batch(runner: Any) -> None:
        from vllm.distributed.parallel_state import get_pp_group

        fn(runner)
        if not drafts_cross_stages(runner.vllm_config):
            return
        runner._draft_token_ids = None
        runner.valid_sampled_token_count_gpu = None
        if runner._is_all_reqs_chunked_prefill():
            return
        pp = get_pp_group()
        packed = torch.empty(
            (runner.input_batch.num_reqs, runner.num_spec_tokens + 1),
            dtype=torch.int32,
            device=runner.device,
        )
        work = torch.distributed.broadcast(
            packed, src=pp.last_rank, group=pp.device_group, async_op=True
        )
        _PENDING[runner] = (packed, work)

    return _pp_receive_prev_sampled_token_ids_to_input_batch


def take_stage_drafts(runner: Any) -> None:
    """In ``_update_states``, before the cached requests take their new counts: on an
    earlier stage, wait for the last stage's drafts and counts and set them where a
    drafting runner keeps its own."""
    pending = _PENDING.pop(runner, None)
    if pending is None:
        return
    packed, work = pending
    work.wait()
    num_reqs = packed.shape[0]
    runner._draft_token_ids = packed[:, :-1]
    runner.prev_num_spec_tokens = runner.num_spec_tokens
    # a column of the received rows: contiguous for the device kernels that read it
    counts = packed[:, -1].contiguous()
    runner.valid_sampled_token_count_cpu[:num_reqs].copy_(counts)
    runner.valid_sampled_token_count_event.record()
    if runner.use_async_spec_decode:
        runner.valid_sampled_token_count_gpu = counts.to(runner.device)


def align_stage_outputs(
    runner: Any, state: Any, row: int | None, num_output_tokens: int
) -> None:
    """In ``_update_states``, per cached request after it took its new counts: on an
    earlier stage, cut the request's output back to the scheduler's count, as the
    last stage does."""
    from vllm.distributed.parallel_state import get_pp_group

    if (
        not drafts_cross_stages(runner.vllm_config)
        or get_pp_group().is_last_rank
        or num_output_tokens >= len(state.output_token_ids)
    ):
        return
    del state.output_token_ids[num_output_tokens:]
    if row is not None:
        batch = runner.input_batch
        batch.num_tokens_no_spec[row] = batch.num_prompt_tokens[row] + num_output_tokens
