"""Any rank's failure ends every rank of every stage on the HPU runner's path, named (issue 30, items 2
and 3): vLLM 0.30.0's own process groups on CPU (gloo), pipeline 2 x tensor parallel 2 in four processes,
each rank's stage built by the runner hook from vLLM's groups, each step through the runner's own wraps
(``counted_step``, ``stage_input``, ``sent_to_next_stage``) around a forward whose tensor-parallel
all-reduce runs on vLLM's tensor-parallel group. Rank 2, the first rank of the last stage, is vLLM's
output rank: the multiproc executor reads only its response, so what it raises is what vLLM reports.

Before notice.py: rank 1's failure reached rank 3 only (the abort on its own connection), rank 0 stayed
in the all-reduce rank 1 never joined and rank 2 in its receive; the silent case left rank 2 in the
all-reduce with rank 3: in both no result came from ranks 0 and 2 until the test's deadline.
"""
from __future__ import annotations

import importlib
import os
import threading
import traceback
import types

import pytest
import torch
from hpu_stages import run_world, start_tp2_rank

WORLD = 4
TOKENS = 8
HIDDEN = 64
LONG_S = "120"  # no timeout or grace ends these runs: only the notice can
SHORT_S = "3"  # the transfer timeout of the silent case (a receive no message ever completes)
NEVER_TAG = 0x7777


def _payload() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(TOKENS)
    return {"hidden_states": torch.randn(TOKENS, HIDDEN, generator=gen),
            "residual": torch.randn(TOKENS, HIDDEN, generator=gen)}


def _runner(parallel_state, config_module, snippets, config):
    """A runner as far as the hooks read one, on vLLM's groups (set up by the start-up hook)."""
    current = config_module.VllmConfig(device_config=config_module.DeviceConfig(device="cpu"))
    with config_module.set_current_vllm_config(current):
        snippets.checked_world_without_hccl(config, parallel_state.ensure_model_parallel_initialized,
                                            parallel_state.get_tp_group)
    factory = importlib.import_module("vllm.model_executor.models.utils").make_empty_intermediate_tensors_factory
    model = types.SimpleNamespace(make_empty_intermediate_tensors=factory(["hidden_states", "residual"], HIDDEN))
    return type("Runner", (), {"parallel_config": config.parallel_config, "device": "cpu", "dtype": torch.float32,
                               "scheduler_config": types.SimpleNamespace(max_num_batched_tokens=TOKENS),
                               "get_model": lambda self: model, "vllm_config": config,
                               "input_batch": types.SimpleNamespace(req_ids=["r"])})()


def _rank_main(root, case, rank, port, results, done):
    try:
        os.environ.update(VLLM_PP_FAILURE_GRACE_S=LONG_S,
                          VLLM_HPU_PP_TIMEOUT_S=SHORT_S if case == "silent" and rank == 3 else LONG_S)
        parallel_state, config_module, config = start_tp2_rank(root, rank, port)
        snippets = importlib.import_module("_patchspec_runtime.pipeline_parallel")
        hooks = importlib.import_module("_patchspec_runtime.pipeline_parallel.runner")
        dist = importlib.import_module("torch.distributed")
        runner = _runner(parallel_state, config_module, snippets, config)
        stage = hooks.stage(runner)
        # every rank has built its stage (its notice listener and stage watch) before any step runs, as
        # vLLM's start-up orders it: else stage 0's failure can break a group the last stage is still using
        dist.barrier(group=parallel_state.get_world_group().cpu_group)
        tp = parallel_state.get_tp_group()
        token_ids = torch.zeros(TOKENS, dtype=torch.int64)
        steps, ran = [0], threading.Event()
        failing = 2 if case == "raises" else 1  # the silent case fails its first step: no timeout before it
        last = failing + 1

        def all_reduce():
            one = torch.ones(1)
            dist.all_reduce(one, group=tp.device_group)

        def stuck():
            dist.irecv(torch.empty(1), group=tp.device_group, group_src=1 - tp.rank_in_group, tag=NEVER_TAG).wait()

        def execute_model(runner, scheduler_output, warmup_mode=False):
            """The forwards of one step as the patched runner runs them: receive, compute, send."""
            steps[0] += 1
            if steps[0] == last:
                ran.set()
            hooks.stage_input(runner, token_ids, False)
            if steps[0] == failing and case == "raises" and rank == 1:
                raise torch.OutOfMemoryError("out of device memory in a long prefill (test)")
            if steps[0] == failing and case == "silent" and rank == 1:
                stuck()
            elif not (case == "silent" and rank == 0):  # in the silent case rank 0 has no peer to reduce with
                all_reduce()
            hooks.sent_to_next_stage(runner, types.SimpleNamespace(tensors=_payload()), token_ids, False)

        step = hooks.counted_step(execute_model)
        scheduled = types.SimpleNamespace(total_num_scheduled_tokens=TOKENS, num_scheduled_tokens={"r": TOKENS})
        events = []
        for n in range(1, last + 1):
            if n == last and stage.transfer.notice.failed is None:
                stage.transfer.notice.heard.wait(float(LONG_S))  # the order under test, not a time
            try:
                step(runner, scheduled)
                events.append(f"step {n} returned")
            except Exception as e:  # noqa: BLE001 - what vLLM's worker loop would report or drop
                events.append(f"step {n} {'ran and raised' if n == last and ran.is_set() else 'raised'} "
                              f"{type(e).__name__}: {e}")
        results.put((rank, events))
    except BaseException:
        results.put((rank, traceback.format_exc()))
    done.wait()  # every rank stays until the test has every result: a rank gone early is a dead stage
    os._exit(0)


def _run(hpu_roots, case: str) -> dict[int, list[str]]:
    pytest.importorskip("psutil", reason="vLLM's test requirements (scripts/vllm-test-requirements.txt)")
    return run_world(WORLD, _rank_main, str(hpu_roots[1]), case)


def test_rank_1_of_stage_0_raising_ends_every_rank_and_the_output_rank_names_it(hpu_roots):
    got = _run(hpu_roots, "raises")
    origin = "rank 1 in step 2 failed: OutOfMemoryError: out of device memory in a long prefill (test)"
    assert got[1] == ["step 1 returned", "step 2 raised OutOfMemoryError: out of device memory in a long prefill "
                      "(test)", got[1][2]]
    # rank 0 in the all-reduce rank 1 never joined
    assert got[0][:2] == ["step 1 returned", f"step 2 raised PipelineAbortError: pipeline rank 0 stopped: {origin}"]
    # the last stage runs behind stage 0: the notice finds it in step 2's receive, or still inside step 1
    for rank in (2, 3):
        first = _first_raised(got[rank])
        assert first in (0, 1) and got[rank][:first] == ["step 1 returned"] * first, got
        assert got[rank][first].startswith(f"step {first + 1} raised PipelineAbortError: "), got
        assert "OutOfMemoryError" in got[rank][first], got
    assert got[2][_first_raised(got[2])].endswith(f"pipeline rank 2 stopped: {origin}"), got
    for rank in range(WORLD):  # no rank enters another step after its failure
        assert all(e.startswith(f"step {n} raised Pipeline")
                   for n, e in enumerate(got[rank], 1) if n > _first_raised(got[rank]) + 1), got[rank]
        assert got[rank][-1].startswith("step 3 raised Pipeline"), got[rank]


def _first_raised(events: list[str]) -> int:
    return next(i for i, e in enumerate(events) if " raised " in e)


def test_a_receive_timeout_on_rank_1_of_the_last_stage_ends_every_rank_and_the_output_rank_names_it(hpu_roots):
    got = _run(hpu_roots, "silent")
    assert got[3][0].startswith("step 1 raised PipelinePeerError: pipeline transfer: receive from rank 1 "
                                "(stage 0) failed or timed out"), got
    heard = "PipelinePeerError: pipeline rank {} stopped: rank 3 in step 1 failed: PipelinePeerError: pipeline " \
            "transfer: receive from rank 1"
    for rank in (1, 2):  # rank 1 in its stuck collective; the output rank in the all-reduce with rank 3
        assert got[rank][0].startswith("step 1 raised " + heard.format(rank)), got
    # rank 0's tensors went out before anything failed, or it heard first and never started the step
    assert got[0][0] == "step 1 returned" or got[0][0].startswith("step 1 raised " + heard.format(0)), got
    for rank in range(WORLD):  # no rank enters the next step
        assert got[rank][1].startswith("step 2 raised Pipeline"), got[rank]
