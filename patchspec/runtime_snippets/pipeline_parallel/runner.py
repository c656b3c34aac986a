# SPDX-License-Identifier: Apache-2.0
"""The HPU runner on a pipeline stage.

vllm-gaudi runs a step's forwards in ``HPUModelRunner.sample_tokens``. On a non-last
stage that method returns right after preparing the step (``non_last_stage_output``): it
runs the same padded forwards, each of which sends its IntermediateTensors to the next
stage instead of computing logits (``sent_to_next_stage``), closes the step's
KV-connector work as the full method does, and returns what upstream vLLM's non-last
ranks return: an output carrying only the KV-connector results, which vLLM's
``KVOutputAggregator`` needs from every worker. The scheduler returns the sampled tokens
to that stage. A non-first stage receives the previous stage's tensors before each
forward (``stage_input``).

Composition: the early return sits after the KV-connector set-up, so the whole
preparation of the step is the original code on every stage. Another spec that reorders
the batch anchors its code before that point (next to ``_ensure_decodes_first``) and
then runs on every stage, so all stages see one batch order; code anchored after it runs
on the last stage only.
"""

from __future__ import annotations

import functools
import sys
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

from . import envs
from ._logging import get_logger
from .handshake import handshake, stage_layers, warmed_up_settings
from .notice import StageWatch, breakable, failure_notice
from .readiness import serve_stage
from .sizes import refuse_oversized_forward, transfer_device_bytes
from .transfer import StageTransfer, in_step
from .wire import requests_digest, rows_digest

__all__ = [
    "STAGES",
    "Stage",
    "aborts_next_stage",
    "counted_step",
    "handshake_after_warm_up",
    "kv_cache_bytes_less_transfer",
    "non_last_stage_output",
    "sent_to_next_stage",
    "skip_on_non_last_stage",
    "stage",
    "stage_input",
]

logger = get_logger(__name__)

# What these hooks use of the target release (checked against its sources, see tests):
# each entry is a call whose arguments must bind to the release's definition, or a name
# that must exist.
USES = {
    "vllm_gaudi/v1/worker/hpu_model_runner.py": [
        "HPUModelRunner._get_model_mm_inputs("
        "token_ids, seq_len, scheduler_output, req_ids)",
        "HPUModelRunner._configure_lora(token_ids, requests, req_ids, is_prompt)",
        "HPUModelRunner._execute_model_generic("
        "token_ids, position_ids, attn_metadata, logits_indices, "
        "kv_caches, lora_logits_mask, lora_mask, inputs_embeds=None, "
        "model_mm_kwargs=None, warmup_mode=False)",
        "HPUModelRunner.maybe_wait_for_kv_save()",
        "HPUModelRunner.get_finished_kv_transfers(scheduler_output)",
        "HPUModelRunner.get_model()",
        "HPUModelRunner.parallel_config",
        "HPUModelRunner.requests",
        "HPUModelRunner.input_batch",
        "HPUModelRunner.kv_caches",
        "HPUModelRunner.device",
        "HPUModelRunner.dtype",
        "HPUModelRunner.vllm_config",
        "HPUModelRunner.warmup_mode",
        "HPUModelRunner.bucketing_manager",
        "shallow_tuple(prefill_data)",
        "htorch",
        "has_kv_transfer_group",
        "get_kv_transfer_group",
    ],
    "vllm/v1/outputs.py": [
        "ModelRunnerOutput.with_kv_conn_output_only(kv_connector_output)",
        "KVConnectorOutput(finished_sending=None, finished_recving=None)",
    ],
    "vllm/distributed/kv_transfer/kv_connector/v1/base.py": [
        "KVConnectorBase_V1.clear_connector_metadata()",
    ],
}


@dataclass
class Stage:
    """This worker's place in the pipeline and its link to the neighbouring stages."""

    is_first: bool
    is_last: bool
    transfer: StageTransfer
    # the step's scheduled token counts (counted_step) and, once its first forward
    # asked, the digest of its requests in row order (:func:`forward_rows`)
    scheduled: dict[str, int] | None = None
    requests_step: int = -1
    requests: int = 0


# Each runner's stage, built from vLLM's groups on first use (or registered by whoever
# built it).
STAGES: weakref.WeakKeyDictionary[Any, Stage] = weakref.WeakKeyDictionary()


def stage(runner: Any) -> Stage | None:
    """None at pipeline size 1; otherwise the runner's stage."""
    if runner.parallel_config.pipeline_parallel_size == 1:
        return None
    found = STAGES.get(runner)
    if found is None:
        refuse_oversized_forward(runner, runner.parallel_config.tensor_parallel_size)
        found = STAGES[runner] = _stage_from_vllm(runner)
    return found


def kv_cache_bytes_less_transfer(runner: Any, cache_size_bytes: float) -> float:
    """For ``HPUWorker.determine_available_memory``, right after it sizes the KV
    cache's share: that share less the device memory the stage's transfer holds for the
    largest forward (``transfer_device_bytes``), which the profile run never allocates.
    Refuses in one line, naming how much is missing, when the transfer alone does not
    fit."""
    found = stage(runner)
    if found is None:
        return cache_size_bytes
    tp_size = runner.parallel_config.tensor_parallel_size
    need = transfer_device_bytes(
        runner, tp_size, receives=not found.is_first, sends=not found.is_last
    )
    if need >= cache_size_bytes:
        tokens = runner.scheduler_config.max_num_batched_tokens
        left = int(cache_size_bytes)
        raise ValueError(
            f"pipeline transfer: a forward of max_num_batched_tokens={tokens} holds "
            f"{need} bytes of device memory for the stage-to-stage tensors, more "
            f"than the {left} left for the KV cache: {need - left} bytes missing "
            "before any KV block; lower "
            "--max-num-batched-tokens or raise --gpu-memory-utilization"
        )
    logger.info(
        "pipeline transfer: %d bytes of device memory held back from the KV cache for "
        "the stage-to-stage tensors",
        need,
    )
    return cache_size_bytes - need


def _helpers(runner: Any) -> ModuleType:
    """The runner's own module, whose imports (``htorch``, ``shallow_tuple``, the
    KV-transfer accessors) the hooks use, so that they run with whatever the runner runs
    with."""
    return sys.modules[type(runner).__module__]


def _stage_from_vllm(runner: Any) -> Stage:
    from vllm.distributed.parallel_state import (
        get_pp_group,
        get_tp_group,
        get_world_group,
    )

    pp, tp, device = get_pp_group(), get_tp_group(), torch.device(runner.device)
    # copies between host buffers and the device are queued and marked by an event (no
    # device-wide sync); HPU lazy mode breaks the graph before each collective, as
    # vllm-gaudi's communicator does
    event = None if device.type == "cpu" else getattr(torch, device.type).Event
    mark_step = _helpers(runner).htorch.core.mark_step if device.type == "hpu" else None
    layers = stage_layers(runner.vllm_config, pp.rank_in_group, pp.world_size)
    notice = failure_notice(get_world_group(), breakable(pp) + breakable(tp))
    transfer = StageTransfer(
        pp,
        tp,
        device=device,
        device_event=event,
        mark_step=mark_step,
        layers=None if layers is None else layers[:2],
        notice=notice,
    )
    logger.info("pipeline stage %d of %d", pp.rank_in_group, pp.world_size)
    # the next stage's death stops this worker at once (vLLM's executor hears only
    # from the last stage)
    StageWatch(pp, (pp.rank_in_group + 1) % pp.world_size, notice)
    return Stage(pp.is_first_rank, pp.is_last_rank, transfer)


def counted_step(fn: Callable[..., Any]) -> Callable[..., Any]:
    """For ``wrap`` on ``HPUModelRunner.execute_model``: every stage counts a step that
    runs forwards (tokens scheduled, not warm-up) here, before anything of it can fail,
    so the step each message names agrees between the stages; an exception on a
    non-last stage aborts the next stage's step."""

    @functools.wraps(fn)
    def execute_model(runner: Any, scheduler_output: Any, *args: Any, **kwargs: Any):
        found = stage(runner)
        if found is None:
            return fn(runner, scheduler_output, *args, **kwargs)
        warmup_mode = kwargs.get("warmup_mode", args[0] if args else False)
        starts = bool(scheduler_output.total_num_scheduled_tokens) and not warmup_mode
        if starts:
            found.scheduled = scheduler_output.num_scheduled_tokens
        # warm-up and profiling: the next stage posts no receive, an abort would
        # wait for one until the transfer timeout before the error got out
        return in_step(
            found.transfer,
            starts,
            starts and not found.is_last,
            lambda: fn(runner, scheduler_output, *args, **kwargs),
            receives=not found.is_first,
        )

    return execute_model


def aborts_next_stage(fn: Callable[..., Any]) -> Callable[..., Any]:
    """For ``wrap`` on ``HPUModelRunner.sample_tokens``, where the step's forwards run:
    an exception on a non-last stage aborts the next stage's step (vLLM's worker loop
    reports only the last stage's exceptions). Not in warm-up or profiling
    (``execute_model(..., warmup_mode=True)`` before): the next stage posts no receive
    there, so the abort would hold the real error back for the transfer timeout."""

    @functools.wraps(fn)
    def sample_tokens(runner: Any, *args: Any, **kwargs: Any):
        found = stage(runner)
        if found is None or found.is_last or runner.warmup_mode:
            return fn(runner, *args, **kwargs)
        return in_step(found.transfer, False, True, lambda: fn(runner, *args, **kwargs))

    return sample_tokens


def stage_input(
    runner: Any, token_ids: torch.Tensor, warmup_mode: bool
) -> dict[str, torch.Tensor] | None:
    """The previous stage's tensors for this forward, as a plain dict (the HPU graph
    wrapper hashes its arguments and only sees plain tensors); zeros of the right shapes
    during warm-up, which must not wait on a peer that is warming up too; None on the
    first stage."""
    found = stage(runner)
    if found is None or found.is_first:
        return None
    if warmup_mode:
        zeros = runner.get_model().make_empty_intermediate_tensors(
            batch_size=token_ids.numel(), dtype=runner.dtype, device=runner.device
        )
        return dict(zeros.tensors)
    rows = forward_rows(runner, found, token_ids)
    return found.transfer.recv(token_ids.numel(), rows)


def forward_rows(runner: Any, found: Stage, token_ids: torch.Tensor) -> int:
    """The rows digest of a forward of ``token_ids`` (its padded shape) in the current
    step: with the step's requests in the order the runner's batch holds them and their
    token counts, as both stages must have them (``wire.rows_digest``)."""
    step = found.transfer.step
    if found.requests_step != step:
        scheduled = found.scheduled or {}
        found.requests = requests_digest(
            [
                (req_id, scheduled.get(req_id, 0))
                for req_id in runner.input_batch.req_ids
                if req_id is not None
            ]
        )
        found.requests_step = step
    return rows_digest(tuple(token_ids.shape), found.requests)


def sent_to_next_stage(
    runner: Any, output: Any, token_ids: torch.Tensor, warmup_mode: bool
) -> bool:
    """On a non-last stage, send the forward's IntermediateTensors on (not during
    warm-up) and tell the caller to return before the logits, which a non-last stage
    cannot compute."""
    found = stage(runner)
    if found is None or found.is_last:
        return False
    if not warmup_mode:
        found.transfer.isend(
            {
                key: _token_major(value, token_ids)
                for key, value in output.tensors.items()
            },
            token_ids.numel(),
            forward_rows(runner, found, token_ids),
        )
    return True


def _token_major(tensor: torch.Tensor, token_ids: torch.Tensor) -> torch.Tensor:
    """``tensor`` with one leading dimension of tokens, as the wire wants it: the
    model's outputs are laid out like its input ids, ``[batch, seq, ...]`` or already
    flat."""
    if tensor.shape[: token_ids.dim()] == token_ids.shape:
        return tensor.flatten(0, token_ids.dim() - 1)
    return tensor


def non_last_stage_output(
    runner: Any,
    scheduler_output: Any,
    pd_info: Any,
    prefill_input_data: tuple,
    decode_input_data: tuple,
    warmup_mode: bool,
) -> Any:
    """On a non-last stage, run the prepared step's forwards, close the step as
    ``sample_tokens`` does and return upstream's non-last-rank output (the caller
    returns it); None elsewhere (the caller goes on)."""
    found = stage(runner)
    if found is None or found.is_last:
        return None
    from vllm.v1.outputs import KVConnectorOutput, ModelRunnerOutput

    module = _helpers(runner)
    _run_forwards(
        runner,
        module,
        scheduler_output,
        pd_info,
        prefill_input_data,
        decode_input_data,
        warmup_mode,
    )
    finished_sending, finished_recving = set[str](), set[str]()
    if not warmup_mode:
        runner.maybe_wait_for_kv_save()
        finished_sending, finished_recving = runner.get_finished_kv_transfers(
            scheduler_output
        )
    kv_connector_output = KVConnectorOutput(
        finished_sending=finished_sending, finished_recving=finished_recving
    )
    if module.has_kv_transfer_group():
        module.get_kv_transfer_group().clear_connector_metadata()
    return ModelRunnerOutput.with_kv_conn_output_only(kv_connector_output)


def _run_forwards(
    runner: Any,
    module: ModuleType,
    scheduler_output: Any,
    pd_info: Any,
    prefill_input_data: tuple,
    decode_input_data: tuple,
    warmup_mode: bool,
) -> None:
    """The step's padded forwards in the order of ``sample_tokens``: prefill chunks,
    data-parallel dummy prefills, then the decode batch or else a data-parallel dummy
    decode."""
    mark_step = module.htorch.core.mark_step
    prefill_data, dummy_prefills = prefill_input_data
    decode_data, dummy_decode = decode_input_data
    if pd_info.prompt_req_ids:
        mark_step()
        for req_id, _, token_ids, position_ids, attn_metadata, logits_indices, _ in zip(
            *module.shallow_tuple(prefill_data), strict=True
        ):
            inputs_embeds, model_mm_kwargs = runner._get_model_mm_inputs(
                token_ids, token_ids.shape[-1], scheduler_output, req_id
            )
            lora_mask, lora_logits_mask = runner._configure_lora(
                token_ids, runner.requests, req_id, True
            )
            _forward(
                runner,
                mark_step,
                token_ids,
                position_ids,
                attn_metadata,
                logits_indices,
                lora_logits_mask,
                lora_mask,
                inputs_embeds=inputs_embeds,
                model_mm_kwargs=model_mm_kwargs,
                warmup_mode=warmup_mode,
            )
    if dummy_prefills is not None:
        for _, _, token_ids, position_ids, attn_metadata, logits_indices, _ in zip(
            *module.shallow_tuple(dummy_prefills), strict=True
        ):
            _forward(
                runner,
                mark_step,
                token_ids,
                position_ids,
                attn_metadata,
                logits_indices,
                None,
                None,
                warmup_mode=warmup_mode,
            )
    if pd_info.decode_req_ids:
        lora_mask, lora_logits_mask = runner._configure_lora(
            decode_data.token_ids, runner.requests, pd_info.decode_req_ids, False
        )
        _forward(
            runner,
            mark_step,
            decode_data.token_ids,
            decode_data.position_ids,
            decode_data.attn_metadata,
            decode_data.logits_indices,
            lora_logits_mask,
            lora_mask,
            warmup_mode=warmup_mode,
        )
    elif dummy_decode is not None:
        _forward(
            runner,
            mark_step,
            dummy_decode.token_ids,
            dummy_decode.position_ids,
            dummy_decode.attn_metadata,
            dummy_decode.logits_indices,
            None,
            None,
            warmup_mode=warmup_mode,
        )


def _forward(
    runner: Any,
    mark_step: Callable[[], None],
    token_ids: torch.Tensor,
    position_ids: torch.Tensor,
    attn_metadata: Any,
    logits_indices: torch.Tensor,
    lora_logits_mask: Any,
    lora_mask: Any,
    **kwargs: Any,
) -> None:
    """One forward between graph breaks, as ``sample_tokens`` runs it; its outputs leave
    through ``sent_to_next_stage``."""
    mark_step()
    runner._execute_model_generic(
        token_ids,
        position_ids,
        attn_metadata,
        logits_indices,
        runner.kv_caches,
        lora_logits_mask,
        lora_mask,
        **kwargs,
    )
    mark_step()


def handshake_after_warm_up(fn: Callable[..., Any]) -> Callable[..., Any]:
    """For ``wrap`` on ``HPUModelRunner.warmup_model``: at pipeline size > 1, once the
    buckets are final and warmed up, shake hands with the neighbour stages again
    (``handshake.warmed_up_settings``: bucket lists, vllm-gaudi's settings, the
    checkpoint), so that a stage returns from warm-up only when its neighbours have
    warmed up alike; a warm-up that raises tells them first, so that they stop with
    its error instead of waiting for a handshake that never comes."""

    @functools.wraps(fn)
    def warmup_model(runner: Any, *args: Any, **kwargs: Any) -> Any:
        found = stage(runner)
        if found is None:
            return fn(runner, *args, **kwargs)
        pp = found.transfer.pp_group
        tp_size = runner.parallel_config.tensor_parallel_size
        layers = stage_layers(runner.vllm_config, pp.rank_in_group, pp.world_size)
        timeout_s = envs.VLLM_PP_START_UP_TIMEOUT_S
        try:
            result = fn(runner, *args, **kwargs)
        except BaseException as e:
            reason = f"{type(e).__name__}: {e}"
            try:
                handshake(
                    pp, tp_size, layers, timeout_s, phase="warm-up", failure=reason
                )
            except RuntimeError as told:  # never raised over the warm-up's own error
                logger.warning("pipeline warm-up: neighbours not told: %s", told)
            raise
        settings = warmed_up_settings(runner.bucketing_manager, runner.vllm_config)
        handshake(pp, tp_size, layers, timeout_s, settings, phase="warm-up")
        if pp.ranks[pp.rank_in_group] % tp_size == 0:  # the node's first rank
            serve_stage(pp.rank_in_group, pp.world_size, ready=True)
        return result

    return warmup_model


def skip_on_non_last_stage(fn: Callable[..., Any]) -> Callable[..., Any]:
    """For ``wrap``: a method that computes logits (``warmup_sampler``) does nothing on
    a non-last stage, whose model has no LM head."""

    @functools.wraps(fn)
    def wrapper(runner: Any, *args: Any, **kwargs: Any) -> Any:
        found = stage(runner)
        if found is not None and not found.is_last:
            logger.debug("%s skipped: not the last pipeline stage", fn.__name__)
            return None
        return fn(runner, *args, **kwargs)

    return wrapper
