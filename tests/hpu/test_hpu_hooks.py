"""The runner and graph hooks one by one, in this process: inert at pipeline size 1, and what they hand on."""
from __future__ import annotations

import importlib.util
import itertools
import types

import pytest
import torch

from patchspec.runtime_snippets.pipeline_parallel import (
    non_last_stage_output,
    sent_to_next_stage,
    skip_on_non_last_stage,
    stage_input,
    stage_output,
    take_intermediate_tensors,
)
from patchspec.runtime_snippets.pipeline_parallel.runner import STAGES, Stage


class Runner:
    """The attributes of a runner the hooks read."""

    def __init__(self, pp: int):
        self.parallel_config = types.SimpleNamespace(pipeline_parallel_size=pp)
        self.dtype, self.device = torch.bfloat16, "cpu"


def _runner(pp=1, stage=None):
    runner = Runner(pp)
    if stage is not None:
        STAGES[runner] = stage
    return runner


def test_runner_hooks_return_at_once_at_size_1():
    runner, ids = _runner(), torch.zeros(2, 3, dtype=torch.long)
    assert stage_input(runner, ids, False) is None
    assert sent_to_next_stage(runner, torch.ones(6, 4), ids, False) is False
    assert non_last_stage_output(runner, None, None, None, None, False) is None
    assert skip_on_non_last_stage(lambda r, x: ("ran", x))(runner, 7) == ("ran", 7)
    assert vars(runner).keys() == {"parallel_config", "dtype", "device"} and runner not in STAGES


def test_logits_methods_are_skipped_on_non_last_stages_only():
    calls = []
    warmup_sampler = skip_on_non_last_stage(lambda runner: calls.append(runner) or "sampled")
    first, last = _runner(2, Stage(True, False, None)), _runner(2, Stage(False, True, None))
    assert warmup_sampler(first) is None and calls == []
    assert warmup_sampler(last) == "sampled" and calls == [last]


def test_warmup_input_is_zeros_shaped_by_the_model_without_the_network(patched_import):
    vllm_gaudi = importlib.import_module("vllm_gaudi.v1.worker.hpu_model_runner")
    model = vllm_gaudi.TinyPipelineModel(1, 2)
    runner = _runner(2, Stage(False, True, None))  # a transfer of None: any use of the network raises
    runner.get_model = lambda: model
    got = stage_input(runner, torch.zeros(2, 3, dtype=torch.long), True)
    assert {k: (v.shape, v.dtype, bool(v.any())) for k, v in got.items()} == {
        "hidden_states": ((6, model.HIDDEN), torch.bfloat16, False),
        "residual": ((6, model.HIDDEN), torch.bfloat16, False)}


def test_adapter_kwargs_are_the_original_ones_without_tensors():
    kwargs = {"input_ids": torch.zeros(2, 3), "positions": torch.zeros(2, 3), "intermediate_tensors": None}
    take_intermediate_tensors(kwargs)
    assert list(kwargs) == ["input_ids", "positions"]


@pytest.mark.parametrize("ids_shape", [(2, 3), (6, )])
def test_adapter_rebuilds_intermediate_tensors_like_the_input_ids(patched_import, ids_shape):
    from vllm.sequence import IntermediateTensors
    hidden, residual = torch.randn(6, 4), torch.randn(6, 4)
    kwargs = {"input_ids": torch.zeros(ids_shape), "intermediate_tensors": {"hidden_states": hidden,
                                                                            "residual": residual}}
    take_intermediate_tensors(kwargs)
    got = kwargs["intermediate_tensors"]
    assert isinstance(got, IntermediateTensors)
    assert got["hidden_states"].shape == (*ids_shape, 4)
    assert got["hidden_states"].data_ptr() == hidden.data_ptr()  # a view: no copy outside the graph
    assert torch.equal(got["residual"].reshape(6, 4), residual)


def test_stage_outputs_are_cloned_and_last_stage_outputs_untouched(patched_import):
    from vllm.sequence import IntermediateTensors
    hidden = torch.randn(6, 4)
    assert stage_output(hidden) is hidden
    out = stage_output(IntermediateTensors({"hidden_states": hidden}))
    assert torch.equal(out["hidden_states"], hidden) and out["hidden_states"].data_ptr() != hidden.data_ptr()


def test_intermediate_tensors_iterate_over_their_keys(patched_import, hpu_roots):
    from vllm.sequence import IntermediateTensors
    tensors = IntermediateTensors({"hidden_states": torch.zeros(1), "residual": torch.zeros(1)})
    assert list(tensors) == ["hidden_states", "residual"]
    # the unpatched class: Python's fallback iteration yields None and never stops
    spec = importlib.util.spec_from_file_location("unpatched_sequence", hpu_roots[0] / "vllm/sequence.py")
    unpatched = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(unpatched)
    endless = iter(unpatched.IntermediateTensors({"hidden_states": torch.zeros(1)}))
    assert list(itertools.islice(endless, 1000)) == [None] * 1000
