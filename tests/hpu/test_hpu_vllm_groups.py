"""The worker start-up hook and the runner's stage on vLLM's own process groups (vLLM 0.30.0's
``parallel_state`` on CPU, gloo), pipeline 2 x tensor parallel 2 in four processes: the checks pass, each
rank finds its stage, and a stage's tensors (the same on its tensor-parallel ranks, as after their
all-reduce) reach the next stage whole for a decode and split across the tensor-parallel ranks for a
prefill.
"""
from __future__ import annotations

import importlib
import traceback
import types

import pytest
import torch
from hpu_stages import run_world, start_tp2_rank

WORLD = 4
SIZES = {"decode": 8, "prefill": 8192}  # tokens; 8192 x 64 x 4 bytes x 2 keys = 4 MiB: split


def _payload(num_tokens: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(num_tokens)
    return {"hidden_states": torch.randn(num_tokens, 64, generator=gen),
            "residual": torch.randn(num_tokens, 64, generator=gen)}


def _rank_main(root, rank, port, results, done):
    try:
        parallel_state, config_module, config = start_tp2_rank(root, rank, port)
        snippets = importlib.import_module("_patchspec_runtime.pipeline_parallel")
        runner_hooks = importlib.import_module("_patchspec_runtime.pipeline_parallel.runner")
        current = config_module.VllmConfig(device_config=config_module.DeviceConfig(device="cpu"))
        with config_module.set_current_vllm_config(current):
            checked = snippets.checked_world_without_hccl(config, parallel_state.ensure_model_parallel_initialized,
                                                          parallel_state.get_tp_group)
        factory = importlib.import_module("vllm.model_executor.models.utils").make_empty_intermediate_tensors_factory
        model = types.SimpleNamespace(make_empty_intermediate_tensors=factory(["hidden_states", "residual"], 64))
        runner = type("Runner", (), {"parallel_config": config.parallel_config, "device": "cpu", "dtype": torch.float32,
                                     "scheduler_config": types.SimpleNamespace(max_num_batched_tokens=SIZES["prefill"]),
                                     "get_model": lambda self: model, "vllm_config": config})()
        stage = runner_hooks.stage(runner)
        # on CPU no HPU graph break before the all-gather of a split payload
        assert stage.transfer._mark_step is None
        same = {}
        for name, num_tokens in SIZES.items():
            if stage.is_first:
                stage.transfer.send(_payload(num_tokens), num_tokens)
            else:
                got, want = stage.transfer.recv(num_tokens), _payload(num_tokens)
                same[name] = all(torch.equal(got[k], want[k]) for k in want)
        results.put((rank, (checked, stage.is_first, stage.is_last, same, stage.transfer.stats.split_messages)))
    except BaseException:
        results.put((rank, traceback.format_exc()))
    done.wait()  # each stage watches the next one: a rank gone early would stop its peer before it reports


def test_stage_and_start_up_on_vllm_process_groups(hpu_roots):
    pytest.importorskip("psutil", reason="vLLM's test requirements (scripts/vllm-test-requirements.txt)")
    got = run_world(WORLD, _rank_main, str(hpu_roots[1]))
    both = {"decode": True, "prefill": True}
    assert got == {0: (True, True, False, {}, 1), 1: (True, True, False, {}, 1),
                   2: (True, False, True, both, 1), 3: (True, False, True, both, 1)}
