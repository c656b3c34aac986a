"""Worker start-up of the patched fixture worker in real processes over gloo.

``CHECK_DEVICE='meta'`` makes the original world check (an all-reduce over every rank, then ``item()``)
fail, as the HCCL one does between nodes without scale-out links: a start-up that passes did not run it.
"""
from __future__ import annotations

import importlib
import os
import queue
import traceback
import types

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp
from hpu_stages import START_S, free_port, import_root

from patchspec.runtime_snippets.pipeline_parallel import checked_world_without_hccl

RELEASE = "release"  # every rank of the scenario has reported: tear the world down


def _worker_main(root, rank, inbox, results):
    """Runs start-up scenarios one after another: each a fresh world of the first ``pp * tp`` ranks."""
    import_root(root)
    runner_module = importlib.import_module("vllm_gaudi.v1.worker.hpu_model_runner")
    worker_module = importlib.import_module("vllm_gaudi.v1.worker.hpu_worker")
    worker_module.CHECK_DEVICE = "meta"
    while (scenario := inbox.get()) is not None:
        port, pp, tp, dp, env = scenario
        os.environ.update(env)
        try:
            parallel = runner_module.ParallelConfig(pipeline_parallel_size=pp, tensor_parallel_size=tp,
                                                    data_parallel_size=dp, pp_rank=rank // tp)
            worker = worker_module.HPUWorker(runner_module.VllmConfig(parallel_config=parallel), rank, rank,
                                             f"tcp://127.0.0.1:{port}")
            worker.init_device()
            results.put((rank, "ok", worker_module.get_tp_group().ranks))
        except Exception as exc:  # the outcome under test
            results.put((rank, "error", f"{type(exc).__name__}: {exc}"))
        except BaseException:
            results.put((rank, "crash", traceback.format_exc()))
        finally:
            # no rank tears its world down before every rank of the scenario has reported: a rank that failed
            # fast closed its connections while another was still connecting (CI under load: "Gloo
            # connectFullMesh failed ... Connection closed by peer")
            assert inbox.get() == RELEASE
            for name in env:
                del os.environ[name]
            if dist.is_initialized():
                dist.destroy_process_group()


@pytest.fixture(scope="module")
def start_up(hpu_roots):
    """``start_up(pp, tp, dp=1, env=None)``: each rank's outcome of the patched worker's start-up."""
    ctx = mp.get_context("spawn")
    results, inboxes = ctx.Queue(), [ctx.Queue() for _ in range(4)]
    procs = [ctx.Process(target=_worker_main, args=(str(hpu_roots[1]), r, inboxes[r], results), daemon=True)
             for r in range(4)]
    for p in procs:
        p.start()

    def run(pp, tp, dp=1, env=None) -> dict[int, tuple[str, object]]:
        scenario, world, got = (free_port(), pp, tp, dp, env or {}), pp * tp, {}
        for r in range(world):
            inboxes[r].put(scenario)
        try:
            while len(got) < world:
                rank, what, value = results.get(timeout=START_S)
                assert what != "crash", value
                got[rank] = (what, value)
        except queue.Empty:
            raise TimeoutError(f"ranks {sorted(set(range(world)) - set(got))} did not start") from None
        finally:
            for r in range(world):
                inboxes[r].put(RELEASE)
        return got

    yield run
    for inbox in inboxes:
        inbox.put(None)
    for p in procs:
        p.join(10)
        if p.is_alive():
            p.kill()


def test_pipeline_start_up_does_not_run_the_world_device_check(start_up):
    got = start_up(pp=2, tp=2)
    assert got == {0: ("ok", [0, 1]), 1: ("ok", [0, 1]), 2: ("ok", [2, 3]), 3: ("ok", [2, 3])}


def test_hccl_world_check_variable_keeps_the_original_check(start_up):
    got = start_up(pp=2, tp=1, env={"VLLM_HPU_PP_HCCL_WORLD_CHECK": "1"})
    assert all(what == "error" and "meta" in value for what, value in got.values()), got


def test_size_1_runs_the_original_check(start_up):
    got = start_up(pp=1, tp=2)
    assert all(what == "error" and "meta" in value for what, value in got.values()), got


def test_gloo_world_check_reports_a_world_of_the_wrong_size(start_up):
    got = start_up(pp=2, tp=1, dp=2)
    assert all(v == ("error", "RuntimeError: distributed start-up check over the world (gloo): expected 4 ranks, "
                              "got 2") for v in got.values()), got


def _config(pp, async_scheduling):
    return types.SimpleNamespace(
        parallel_config=types.SimpleNamespace(pipeline_parallel_size=pp, tensor_parallel_size=1,
                                              data_parallel_size=1, world_size=pp),
        scheduler_config=types.SimpleNamespace(async_scheduling=async_scheduling),
        device_config=types.SimpleNamespace(device="cpu"))


def test_size_1_returns_at_once():
    assert not dist.is_initialized()  # a collective here would raise
    assert checked_world_without_hccl(_config(1, True), None, None) is False
