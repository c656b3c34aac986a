"""The HPU runner on a pipeline stage.

vllm-gaudi runs a step's forwards in ``HPUModelRunner.sample_tokens``. On a non-last stage that method
returns right after preparing the step (``ran_non_last_stage``) and runs the same padded forwards, each of
which sends its IntermediateTensors to the next stage instead of computing logits
(``sent_to_next_stage``); the scheduler returns the sampled tokens to that stage. A non-first stage
receives the previous stage's tensors before each forward (``stage_input``).

Composition: the early return sits after the KV-connector set-up, so the whole preparation of the step
is the original code on every stage. Another spec that reorders the batch anchors its code before that
point (next to ``_ensure_decodes_first``) and then runs on every stage, so all stages see one batch order;
code anchored after it runs on the last stage only.
"""
from __future__ import annotations

import functools
import sys
from dataclasses import dataclass

import torch

from ._logging import get_logger
from .transfer import StageTransfer

logger = get_logger(__name__)

# What these hooks use of the target release (checked against its sources, see tests): each entry is a
# call whose arguments must bind to the release's definition, or a name that must exist.
USES = {
    "vllm_gaudi/v1/worker/hpu_model_runner.py": [
        "HPUModelRunner._get_model_mm_inputs(token_ids, seq_len, scheduler_output, req_ids)",
        "HPUModelRunner._configure_lora(token_ids, requests, req_ids, is_prompt)",
        "HPUModelRunner._execute_model_generic(token_ids, position_ids, attn_metadata, logits_indices, "
        "kv_caches, lora_logits_mask, lora_mask, inputs_embeds=None, model_mm_kwargs=None, warmup_mode=False)",
        "HPUModelRunner.maybe_wait_for_kv_save()",
        "HPUModelRunner.get_finished_kv_transfers(scheduler_output)",
        "HPUModelRunner.get_model()",
        "HPUModelRunner.parallel_config",
        "HPUModelRunner.requests",
        "HPUModelRunner.kv_caches",
        "HPUModelRunner.device",
        "HPUModelRunner.dtype",
        "shallow_tuple(prefill_data)",
        "htorch",
    ],
}


@dataclass
class Stage:
    """This worker's place in the pipeline and its link to the neighbouring stages."""
    is_first: bool
    is_last: bool
    transfer: StageTransfer


def stage(runner) -> Stage | None:
    """None at pipeline size 1; otherwise the runner's stage, built from vLLM's groups on first use."""
    if runner.parallel_config.pipeline_parallel_size == 1:
        return None
    found = getattr(runner, "_pp_stage", None)
    if found is None:
        found = runner._pp_stage = _stage_from_vllm(torch.device(runner.device))
    return found


def _stage_from_vllm(device: torch.device) -> Stage:
    from vllm.distributed.parallel_state import get_pp_group, get_tp_group
    pp = get_pp_group()
    # received tensors are copied to the device from a reused host buffer: wait before it is reused
    sync = None if device.type == "cpu" else getattr(torch, device.type).synchronize
    transfer = StageTransfer(pp, get_tp_group(), device=device, wait_device=sync)
    logger.info("pipeline stage %d of %d", pp.rank_in_group, pp.world_size)
    return Stage(pp.is_first_rank, pp.is_last_rank, transfer)


def stage_input(runner, token_ids, warmup_mode) -> dict | None:
    """The previous stage's tensors for this forward, as a plain dict (the HPU graph wrapper hashes its
    arguments and only sees plain tensors); zeros of the right shapes during warm-up, which must not wait
    on a peer that is warming up too; None on the first stage."""
    found = stage(runner)
    if found is None or found.is_first:
        return None
    if warmup_mode:
        zeros = runner.get_model().make_empty_intermediate_tensors(batch_size=token_ids.numel(),
                                                                   dtype=runner.dtype, device=runner.device)
        return dict(zeros.tensors)
    return found.transfer.recv(token_ids.numel())


def sent_to_next_stage(runner, output, token_ids, warmup_mode) -> bool:
    """On a non-last stage, send the forward's IntermediateTensors on (not during warm-up) and tell the
    caller to return before the logits, which a non-last stage cannot compute."""
    found = stage(runner)
    if found is None or found.is_last:
        return False
    if not warmup_mode:
        found.transfer.isend({key: _token_major(value, token_ids) for key, value in output.tensors.items()},
                             token_ids.numel())
    return True


def _token_major(tensor, token_ids):
    """``tensor`` with one leading dimension of tokens, as the wire wants it: the model's outputs are laid
    out like its input ids, ``[batch, seq, ...]`` or already flat."""
    if tensor.shape[:token_ids.dim()] == token_ids.shape:
        return tensor.flatten(0, token_ids.dim() - 1)
    return tensor


def ran_non_last_stage(runner, scheduler_output, pd_info, prefill_input_data, decode_input_data,
                       warmup_mode) -> bool:
    """On a non-last stage, run the prepared step's forwards and close the step; the caller returns."""
    found = stage(runner)
    if found is None or found.is_last:
        return False
    _run_forwards(runner, scheduler_output, pd_info, prefill_input_data, decode_input_data, warmup_mode)
    if not warmup_mode:
        runner.maybe_wait_for_kv_save()
        runner.get_finished_kv_transfers(scheduler_output)
    return True


def _run_forwards(runner, scheduler_output, pd_info, prefill_input_data, decode_input_data, warmup_mode):
    """The step's padded forwards in the order of ``sample_tokens``: prefill chunks, data-parallel dummy
    prefills, then the decode batch or else a data-parallel dummy decode."""
    module = sys.modules[type(runner).__module__]  # the helpers the runner's own module uses
    mark_step = module.htorch.core.mark_step
    prefill_data, dummy_prefills = prefill_input_data
    decode_data, dummy_decode = decode_input_data
    if pd_info.prompt_req_ids:
        mark_step()
        for req_id, _, token_ids, position_ids, attn_metadata, logits_indices, _ in zip(
                *module.shallow_tuple(prefill_data)):
            inputs_embeds, model_mm_kwargs = runner._get_model_mm_inputs(token_ids, token_ids.shape[-1],
                                                                         scheduler_output, req_id)
            lora_mask, lora_logits_mask = runner._configure_lora(token_ids, runner.requests, req_id, True)
            _forward(runner, mark_step, token_ids, position_ids, attn_metadata, logits_indices, lora_logits_mask,
                     lora_mask, inputs_embeds=inputs_embeds, model_mm_kwargs=model_mm_kwargs,
                     warmup_mode=warmup_mode)
    if dummy_prefills is not None:
        for _, _, token_ids, position_ids, attn_metadata, logits_indices, _ in zip(
                *module.shallow_tuple(dummy_prefills)):
            _forward(runner, mark_step, token_ids, position_ids, attn_metadata, logits_indices, None, None,
                     warmup_mode=warmup_mode)
    if pd_info.decode_req_ids:
        lora_mask, lora_logits_mask = runner._configure_lora(decode_data.token_ids, runner.requests,
                                                             pd_info.decode_req_ids, False)
        _forward(runner, mark_step, decode_data.token_ids, decode_data.position_ids, decode_data.attn_metadata,
                 decode_data.logits_indices, lora_logits_mask, lora_mask, warmup_mode=warmup_mode)
    elif dummy_decode is not None:
        _forward(runner, mark_step, dummy_decode.token_ids, dummy_decode.position_ids, dummy_decode.attn_metadata,
                 dummy_decode.logits_indices, None, None, warmup_mode=warmup_mode)


def _forward(runner, mark_step, token_ids, position_ids, attn_metadata, logits_indices, lora_logits_mask,
             lora_mask, **kwargs):
    """One forward between graph breaks, as ``sample_tokens`` runs it; its outputs leave through
    ``sent_to_next_stage``."""
    mark_step()
    runner._execute_model_generic(token_ids, position_ids, attn_metadata, logits_indices, runner.kv_caches,
                                  lora_logits_mask, lora_mask, **kwargs)
    mark_step()


def skip_on_non_last_stage(fn):
    """For ``wrap``: a method that computes logits (``warmup_sampler``) does nothing on a non-last stage,
    whose model has no LM head."""
    @functools.wraps(fn)
    def wrapper(runner, *args, **kwargs):
        found = stage(runner)
        if found is not None and not found.is_last:
            logger.debug("%s skipped: not the last pipeline stage", fn.__name__)
            return None
        return fn(runner, *args, **kwargs)
    return wrapper
