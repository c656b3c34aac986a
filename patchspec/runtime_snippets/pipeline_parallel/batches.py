# SPDX-License-Identifier: Apache-2.0
"""One persistent batch per microbatch on every stage's runner (``_update_states`` of
vLLM's ``GPUModelRunner``, which the CPU runner inherits, and of vllm-gaudi's
``HPUModelRunner``).

A runner's persistent batch assumes that consecutive steps carry mostly the same
requests: ``_update_states`` removes the rows of the requests a step does not schedule
and adds back, whole, those it schedules again. Under the scheduler's microbatch cap
the ``pp`` microbatches take turns, so every step removed the other microbatch's rows
and wrote this one's token rows again (prompt and output, O(context) per request),
refreshing the sampling metadata as well: a per-step host cost that grows with
context, the cost vllm-gaudi's own comment in ``_update_states`` warns of.

Here each runner keeps ``pp`` batches, as vLLM's v0 engine kept state per virtual
engine. Before ``_update_states`` runs, the runner's ``input_batch`` becomes the batch
that holds most of the step's requests (the scheduler's cap keeps a request in one
microbatch), and the original code then finds every scheduled request resident: it
writes the step's new tokens only. A request leaves the batches when it finishes or is
preempted or resumed, and moves (one row written) when the scheduler puts it in
another microbatch. Every stage makes the same choices from the same scheduler output,
so the stages keep one row order.

Only at pipeline size > 1 without async scheduling (whose steps are not microbatches
and whose runners carry the previous step's rows), on vllm-gaudi's runner and on vLLM's
runner where no CUDA graph captured the batch's block table (CPU, or
``enforce_eager``). ``VLLM_PP_BATCH_PER_MICROBATCH=0`` keeps the runner's one batch.
Each further batch is made as the runner's own was (``remembers_arguments`` on
``InputBatch.__init__`` keeps its arguments), with logits processors of its own: host
memory for ``max_num_seqs x max_model_len`` token ids, and the block tables, per
further microbatch.
"""

from __future__ import annotations

import functools
import inspect
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from . import envs
from ._logging import get_logger

__all__ = ["batch_per_microbatch", "remembers_arguments"]

logger = get_logger(__name__)

USES = {
    "vllm_gaudi/v1/worker/hpu_input_batch.py": [
        "InputBatch.remove_request(req_id)",
        "InputBatch.condense(empty_req_indices)",
        "InputBatch.refresh_sampling_metadata()",
        "InputBatch.req_id_to_index",
        "InputBatch.req_type",
    ],
    "vllm/v1/worker/gpu_input_batch.py": [
        "InputBatch.remove_request(req_id)",
        "InputBatch.condense()",
        "InputBatch.refresh_metadata()",
        "InputBatch.req_id_to_index",
    ],
}


@dataclass
class _Batches:
    """A runner's batches, the first its own, and those changed while another was in
    use (their next step must copy the sampling tensors again)."""

    pp: int
    batches: list[Any]
    dirty: set[int] = field(default_factory=set)


# Each runner's batches, made on its first step at pipeline size > 1.
_RUNNERS: weakref.WeakKeyDictionary[Any, _Batches] = weakref.WeakKeyDictionary()
_WARNED: weakref.WeakSet[Any] = weakref.WeakSet()
# What each input batch was made with: (positional, keyword arguments).
_ARGUMENTS: weakref.WeakKeyDictionary[Any, tuple[tuple, dict]] = (
    weakref.WeakKeyDictionary()
)


def batch_per_microbatch(fn: Callable[..., Any]) -> Callable[..., Any]:
    """For ``wrap`` on a runner's ``_update_states``: at pipeline size > 1, put the
    batch holding the step's requests in ``runner.input_batch`` first (above)."""

    @functools.wraps(fn)
    def _update_states(runner: Any, scheduler_output: Any, *args: Any, **kwargs: Any):
        state = _batches(runner)
        if state is None:
            return fn(runner, scheduler_output, *args, **kwargs)
        chosen = _select(state, runner, scheduler_output)
        _leave(state, chosen, scheduler_output)
        runner.input_batch = state.batches[chosen]
        changed = fn(runner, scheduler_output, *args, **kwargs)
        if chosen in state.dirty:
            state.dirty.discard(chosen)
            # vllm-gaudi's answer tells sample_tokens whether to copy the sampling
            # tensors of the batch's rows again; vLLM's batch tracks that itself
            if changed is False:
                return True
        return changed

    return _update_states


def _batches(runner: Any) -> _Batches | None:
    """The runner's batches, or None where the runner keeps its one batch."""
    if runner.parallel_config.pipeline_parallel_size == 1:
        return None
    if (
        runner.scheduler_config.async_scheduling
        or not envs.VLLM_PP_BATCH_PER_MICROBATCH
    ):
        return None
    state = _RUNNERS.get(runner)
    if state is not None and any(b is runner.input_batch for b in state.batches):
        return state
    if state is None and not _batch_may_move(runner):
        return None
    # first use, or the runner made itself a new batch (warm-up's larger one, or the
    # one it re-initialises for the KV cache's block sizes): start over from it
    own = runner.input_batch
    pp = runner.parallel_config.pipeline_parallel_size
    if own not in _ARGUMENTS:
        if runner not in _WARNED:
            _WARNED.add(runner)
            logger.warning(
                "pipeline_parallel_size=%d: one persistent batch for all microbatches "
                "(each step writes the other microbatch's rows again): the runner's "
                "batch was not made by the patched InputBatch constructor",
                pp,
            )
        return None
    if state is None:
        logger.info(
            "pipeline_parallel_size=%d: one persistent batch per microbatch", pp
        )
    copies = [_empty_like(own, runner) for _ in range(pp - 1)]
    state = _RUNNERS[runner] = _Batches(pp, [own, *copies])
    return state


def _batch_may_move(runner: Any) -> bool:
    """vLLM's CUDA graphs read the block table of the batch they were captured with;
    HPU graphs take the step's tensors as inputs."""
    if torch.device(runner.device).type in ("cpu", "hpu"):
        return True
    return bool(runner.model_config.enforce_eager)


def remembers_arguments(fn: Callable[..., Any]) -> Callable[..., Any]:
    """For ``wrap`` on ``InputBatch.__init__`` (vLLM's and vllm-gaudi's): keep what
    a batch was made with, so that a runner can make more like it."""

    @functools.wraps(fn)
    def __init__(batch: Any, *args: Any, **kwargs: Any) -> None:
        fn(batch, *args, **kwargs)
        _ARGUMENTS[batch] = (args, kwargs)

    return __init__


def _empty_like(batch: Any, runner: Any) -> Any:
    """A new batch made as ``batch`` was (its sizes, devices and block sizes), with
    logits processors of its own: theirs hold per-row state. vllm-gaudi's
    per-request types stay one mapping, as for its one batch."""
    args, kwargs = _ARGUMENTS[batch]
    made = inspect.signature(type(batch)).bind(*args, **kwargs)
    if "logitsprocs" in inspect.signature(type(batch)).parameters:
        made.arguments["logitsprocs"] = _logits_processors(runner, made.arguments)
    new = type(batch)(*made.args, **made.kwargs)
    if hasattr(batch, "req_type"):
        new.req_type = batch.req_type
    return new


def _logits_processors(runner: Any, arguments: dict[str, Any]) -> Any:
    """What the runner builds for its batch: vLLM's built-in processors and the
    model's own (``--logits-processors``)."""
    from vllm.utils.torch_utils import PIN_MEMORY
    from vllm.v1.sample.logits_processor import build_logitsprocs

    return build_logitsprocs(
        runner.vllm_config,
        arguments["device"],
        getattr(runner, "pin_memory", PIN_MEMORY),
        runner.is_pooling_model,
        runner.vllm_config.model_config.logits_processors,
    )


def _select(state: _Batches, runner: Any, scheduler_output: Any) -> int:
    """The batch holding most of the step's requests; on a tie the one with the fewest
    rows the step does not schedule (an empty one for a new microbatch), then the
    first. A step that schedules nothing (the engine sends one while every request is
    in flight) gets an empty batch, made when none is (the runner removes every row the
    step does not schedule), up to ``pp`` more than the microbatches."""
    batches = state.batches
    scheduled = scheduler_output.num_scheduled_tokens

    def score(i: int) -> tuple[int, int, int]:
        held = batches[i].req_id_to_index
        resident = sum(1 for req_id in scheduled if req_id in held)
        return resident, resident - len(held), -i

    chosen = max(range(len(batches)), key=score)
    if (
        not scheduled
        and batches[chosen].req_id_to_index
        and len(batches) < 2 * state.pp
    ):
        batches.append(_empty_like(batches[0], runner))
        return len(batches) - 1
    return chosen


def _leave(state: _Batches, chosen: int, scheduler_output: Any) -> None:
    """Rows that may not stay: a finished, preempted or resumed request's in every
    batch (a resumed one starts over in the chosen batch through the runner's own
    path), and a scheduled request's in the batches the step does not use."""
    finished = set(scheduler_output.finished_req_ids)
    finished |= set(getattr(scheduler_output, "preempted_req_ids", None) or ())
    resumed = set(scheduler_output.scheduled_cached_reqs.resumed_req_ids)
    gone = finished | resumed
    for i, batch in enumerate(state.batches):
        held = batch.req_id_to_index
        leaving = [r for r in gone if r in held]
        if i == chosen:  # the runner's own path removes the finished rows
            leaving = [r for r in leaving if r not in finished]
        else:
            leaving += [
                r
                for r in scheduler_output.num_scheduled_tokens
                if r in held and r not in gone
            ]
        if leaving:
            _evict(batch, sorted(leaving))
            state.dirty.add(i)


def _evict(batch: Any, req_ids: Iterable[str]) -> None:
    """Remove the requests' rows as the runner's ``_update_states`` does: remove, close
    the gaps, refresh the sampling metadata."""
    removed = [
        i for req_id in req_ids if (i := batch.remove_request(req_id)) is not None
    ]
    if not removed:
        return
    if hasattr(batch, "refresh_metadata"):  # vLLM's: removals tracked in the batch
        batch.condense()
        batch.refresh_metadata()
    else:  # vllm-gaudi's: the gaps are passed in, largest first
        batch.condense(sorted(removed, reverse=True))
        batch.refresh_sampling_metadata()
