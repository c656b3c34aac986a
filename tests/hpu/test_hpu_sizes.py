"""The start-up size rule: the stage's first use refuses, in one line naming the variable to raise, a
configuration whose largest forward (``max_num_batched_tokens`` tokens of the model's IntermediateTensors)
would send one tensor-parallel rank more than ``VLLM_HPU_PP_MAX_MESSAGE_BYTES``; a configuration within it
starts. On the patched fixture runner (its model's own ``make_empty_intermediate_tensors``)."""
from __future__ import annotations

import importlib

import pytest

# the fixture's forward: 64 tokens x 16 floats x 2 tensors = 8 KiB of payload, plus the wire's framing
PAYLOAD = 64 * 16 * 4 * 2


def _runner(pp: int = 2, tp: int = 1):
    module = importlib.import_module("vllm_gaudi.v1.worker.hpu_model_runner")
    parallel = module.ParallelConfig(pipeline_parallel_size=pp, tensor_parallel_size=tp, pp_rank=pp - 1)
    return module.HPUModelRunner(module.VllmConfig(parallel_config=parallel))


def test_first_use_refuses_a_forward_above_the_per_rank_limit(patched_import, monkeypatch):
    hooks = importlib.import_module("_patchspec_runtime.pipeline_parallel.runner")
    monkeypatch.setenv("VLLM_HPU_PP_MAX_MESSAGE_BYTES", str(PAYLOAD))
    with pytest.raises(ValueError) as refused:
        hooks.stage(_runner())
    message = str(refused.value)
    assert "\n" not in message
    need = int(message.split(" sends ")[1].split(" bytes")[0])
    assert need > PAYLOAD  # the payload and the wire's header and trailer
    assert message == (f"pipeline transfer: a forward of max_num_batched_tokens=64 sends {need} bytes per "
                       f"tensor-parallel rank (hidden_states, residual), above VLLM_HPU_PP_MAX_MESSAGE_BYTES="
                       f"{PAYLOAD}: set it to {need} or more on every node, or lower --max-num-batched-tokens")


def test_the_limit_is_per_rank_and_the_variable_it_names_is_enough(patched_import, monkeypatch):
    sizes = importlib.import_module("_patchspec_runtime.pipeline_parallel.sizes")
    monkeypatch.setenv("VLLM_HPU_PP_MAX_MESSAGE_BYTES", str(PAYLOAD))
    with pytest.raises(ValueError, match="sends") as refused:
        sizes.refuse_oversized_forward(_runner(), 1)
    need = int(str(refused.value).split(" sends ")[1].split(" bytes")[0])
    monkeypatch.setenv("VLLM_HPU_PP_MAX_MESSAGE_BYTES", str(need))
    sizes.refuse_oversized_forward(_runner(), 1)  # what the line says to set is enough
    # split over 4 tensor-parallel ranks (the payload is above the split size), each rank's share fits
    monkeypatch.setenv("VLLM_HPU_PP_SPLIT_BYTES", "1024")
    monkeypatch.setenv("VLLM_HPU_PP_MAX_MESSAGE_BYTES", str(PAYLOAD // 2))
    sizes.refuse_oversized_forward(_runner(tp=4), 4)


def test_size_1_builds_no_stage_and_checks_nothing(patched_import, monkeypatch):
    hooks = importlib.import_module("_patchspec_runtime.pipeline_parallel.runner")
    monkeypatch.setenv("VLLM_HPU_PP_MAX_MESSAGE_BYTES", "1")
    assert hooks.stage(_runner(pp=1)) is None
