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


def _worker(runner, hooks, first: bool, last: bool):
    """The patched fixture worker over ``runner``, placed in the pipeline as a stage that receives unless
    ``first`` and sends unless ``last`` (registered as whoever builds the stage registers it)."""
    module = importlib.import_module("vllm_gaudi.v1.worker.hpu_worker")
    hooks.STAGES[runner] = hooks.Stage(first, last, transfer=None)
    worker = module.HPUWorker(runner.vllm_config, 0, 0, None)
    worker.model_runner = runner
    return module, worker


# the fixture's device: 1 MiB free, 0.9 of it usable, 0.9 of that for the KV cache
KV_SHARE = int((1 << 20) * 0.9 * 0.9)


@pytest.mark.parametrize("first, last, held", [(True, False, PAYLOAD), (False, True, PAYLOAD),
                                               (False, False, 2 * PAYLOAD)],
                         ids=["stage 0 sends", "last stage receives", "middle stage both"])
def test_the_transfer_s_device_memory_comes_out_of_the_kv_cache(patched_import, first, last, held):
    """KV sizing (``determine_available_memory``) gives the KV cache what the forward's tensors leave: the
    received tensors on a receiving stage, the outputs cloned in the graph on a sending one."""
    hooks = importlib.import_module("_patchspec_runtime.pipeline_parallel.runner")
    _, worker = _worker(_runner(), hooks, first, last)
    assert worker.determine_available_memory() == KV_SHARE - held


def test_a_split_payload_also_holds_the_rank_s_slices_and_the_uneven_rounds_scratch(patched_import,
                                                                                   monkeypatch):
    """At TP 3 the 8 KiB payload (above a 1 KiB split size) is gathered: its 4 KiB tensors do not divide by
    3, so each one's last round goes through a scratch buffer of 3 x its slice."""
    hooks = importlib.import_module("_patchspec_runtime.pipeline_parallel.runner")
    sizes = importlib.import_module("_patchspec_runtime.pipeline_parallel.sizes")
    monkeypatch.setenv("VLLM_HPU_PP_SPLIT_BYTES", "1024")
    runner = _runner(tp=3)
    layout = sizes.plan(dict(runner.get_model().make_empty_intermediate_tensors(64, runner.dtype, "meta").tensors),
                        64, 3, 1024)
    assert layout.parts == 3
    slices = sum(r.slice_bytes for r in layout.rounds)
    scratch = sum(3 * r.slice_bytes for r in layout.rounds if r.length != 3 * r.slice_bytes)
    assert slices >= PAYLOAD // 3 and scratch > 0
    _, worker = _worker(runner, hooks, False, True)
    assert worker.determine_available_memory() == KV_SHARE - PAYLOAD - slices - scratch


def test_a_transfer_that_leaves_no_kv_cache_is_refused_naming_what_is_missing(patched_import, monkeypatch):
    hooks = importlib.import_module("_patchspec_runtime.pipeline_parallel.runner")
    module, worker = _worker(_runner(), hooks, False, True)
    monkeypatch.setattr(module, "FREE_DEVICE_BYTES", 8192)  # 6635.52 bytes for the KV cache
    with pytest.raises(ValueError) as refused:
        worker.determine_available_memory()
    assert str(refused.value) == (
        f"pipeline transfer: a forward of max_num_batched_tokens=64 holds {PAYLOAD} bytes of device memory for "
        f"the stage-to-stage tensors, more than the 6635 left for the KV cache: {PAYLOAD - 6635} bytes missing "
        "before any KV block; lower --max-num-batched-tokens or raise --gpu-memory-utilization")


def test_size_1_sizes_the_kv_cache_as_before(patched_import):
    module = importlib.import_module("vllm_gaudi.v1.worker.hpu_worker")
    worker = module.HPUWorker(_runner(pp=1).vllm_config, 0, 0, None)
    worker.model_runner = _runner(pp=1)
    assert worker.determine_available_memory() == KV_SHARE
