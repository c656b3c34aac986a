"""A KV connector at pipeline size 2: the patched fixture runner's non-last stage and a real vLLM worker
output go through vLLM's real ``KVOutputAggregator``; prints one JSON document.

``python kv_connector_run.py ROOT MODEL_DIR STORAGE_DIR`` with ROOT (a vLLM release with the patched
fixture as ``vllm_gaudi``) first on ``sys.path``. This process is stage 0: the fixture runner, whose
KV-connector calls go to a real ``ExampleConnector``. Stage 1, the last, is a fixture stage process
(``hpu_stages``) that receives stage 0's tensors and samples. The output of the last rank is what
upstream's worker code returns for a step with a connector (``kv_connector_no_forward``), from a second
connector. The connector is vLLM's example one reporting each finished request's KV as saved, as a
connector that saves in the background does (the example saves synchronously and reports nothing), so
that a request finishes only when every worker has reported it.
"""
from __future__ import annotations

import importlib
import json
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from hpu_stages import TIMEOUT_S, _stage_main, free_port

BLOCK = 16
# (scheduled tokens, new requests, tokens computed before the step, finished requests) of each step:
# two prompts, then "a" decodes while "b" is finished.
STEPS = [({"a": 3, "b": 3}, {"a": [1, 2, 3], "b": [4, 5, 6]}, {}, set()),
         ({"a": 1}, {}, {"a": 3}, {"b"})]


def _connectors(model_dir: str, storage: str):
    """The vLLM config and two worker-side connectors (one per stage) of the saving example connector."""
    from vllm.config import DeviceConfig, KVTransferConfig, ModelConfig, ParallelConfig, VllmConfig
    from vllm.distributed.kv_transfer.kv_connector.v1 import KVConnectorRole
    from vllm.distributed.kv_transfer.kv_connector.v1.example_connector import ExampleConnector
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec

    class SavingExampleConnector(ExampleConnector):
        def get_finished(self, finished_req_ids):
            return set(finished_req_ids) or None, None

    config = VllmConfig(
        model_config=ModelConfig(model=model_dir, skip_tokenizer_init=True, dtype="float32", max_model_len=256),
        device_config=DeviceConfig(device="cpu"), parallel_config=ParallelConfig(pipeline_parallel_size=2),
        kv_transfer_config=KVTransferConfig(kv_connector="ExampleConnector", kv_role="kv_both",
                                            kv_connector_extra_config={"shared_storage_path": storage}))
    spec = FullAttentionSpec(block_size=BLOCK, num_kv_heads=1, head_size=1, dtype=torch.float32)
    kv = KVCacheConfig(num_blocks=16, kv_cache_tensors=[], kv_cache_groups=[KVCacheGroupSpec(["layer"], spec)])
    return config, [SavingExampleConnector(config, KVConnectorRole.WORKER, kv) for _ in range(2)]


def _sets(kv_output) -> dict:
    if kv_output is None:
        return {"sending": None, "recving": None}
    return {"sending": sorted(kv_output.finished_sending or ()), "recving": sorted(kv_output.finished_recving or ())}


def main() -> None:
    root, model_dir, storage = sys.argv[1:4]
    ctx = mp.get_context("spawn")
    inbox, outbox, port = ctx.Queue(), ctx.Queue(), free_port()
    last = ctx.Process(target=_stage_main, args=(root, 1, 2, port, inbox, outbox, {}), daemon=True)
    last.start()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=2,
                            timeout=timedelta(seconds=TIMEOUT_S * 10))
    try:
        print(json.dumps(run(root, model_dir, storage, inbox, outbox)))
    finally:
        inbox.put(None)
        last.join(TIMEOUT_S)
        dist.destroy_process_group()


def run(root, model_dir, storage, inbox, outbox) -> dict:
    from vllm.distributed.kv_transfer import kv_transfer_state
    from vllm.distributed.kv_transfer.kv_connector.utils import KVOutputAggregator
    from vllm.distributed.kv_transfer.kv_connector.v1.example_connector import ExampleConnectorMetadata
    from vllm.v1.core.sched.output import SchedulerOutput as VllmSchedulerOutput
    from vllm.v1.worker.kv_connector_model_runner_mixin import KVConnectorModelRunnerMixin

    fixture = importlib.import_module("vllm_gaudi.v1.worker.hpu_model_runner")
    hooks = importlib.import_module("_patchspec_runtime.pipeline_parallel.runner")
    parallel = fixture.ParallelConfig(pipeline_parallel_size=2, pp_rank=0)
    runner = fixture.HPUModelRunner(fixture.VllmConfig(parallel_config=parallel))
    hooks.STAGES[runner] = hooks.Stage(True, False, hooks.StageTransfer(dist.group.WORLD, timeout_s=TIMEOUT_S))
    config, (stage_connector, worker_connector) = _connectors(model_dir, storage)
    aggregator = KVOutputAggregator.from_connector(worker_connector, world_size=2)
    assert outbox.get(timeout=TIMEOUT_S * 10)[1] == "ready"
    report, sampled = [], {}
    for scheduled, new, computed, finished in STEPS:
        payload = dict(num_scheduled_tokens=scheduled, new_reqs=new, num_computed_tokens=computed,
                       finished_req_ids=finished, new_token_ids={r: t for r, t in sampled.items() if r in computed})
        inbox.put(("step", payload))
        kv_transfer_state._KV_CONNECTOR_AGENT = stage_connector  # what ensure_kv_transfer_initialized sets
        runner.execute_model(fixture.SchedulerOutput(**payload, kv_connector_metadata=ExampleConnectorMetadata()))
        stage_output = runner.sample_tokens(None)
        cleared = not stage_connector.has_connector_metadata()
        # read now: the aggregator writes into the output of the last rank, which may be the same object
        stage = {"stage_output": type(stage_output).__name__, "stage_sampled": getattr(stage_output, "req_ids", None),
                 "stage_kv": _sets(getattr(stage_output, "kv_connector_output", None))}
        rank, kind, last = outbox.get(timeout=TIMEOUT_S)
        assert (rank, kind) == (1, "step"), last
        sampled = last.output
        kv_transfer_state._KV_CONNECTOR_AGENT = worker_connector
        step = VllmSchedulerOutput.make_empty()
        step.finished_req_ids, step.kv_connector_metadata = set(finished), ExampleConnectorMetadata()
        worker_output = KVConnectorModelRunnerMixin.kv_connector_no_forward(step, config)
        try:
            aggregated = _sets(aggregator.aggregate([stage_output, worker_output], output_rank=1).kv_connector_output)
        except AssertionError as e:
            aggregated = f"AssertionError: {e}"
        report.append(stage | {"metadata_cleared": cleared, "aggregated": aggregated, "last_sampled": sorted(sampled)})
    return {"steps": report}


if __name__ == "__main__":
    main()
