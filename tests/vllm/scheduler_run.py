"""Drives vLLM's real scheduler the way the engine core's batch queue does; prints one JSON document.

Run as ``python scheduler_run.py MODEL_DIR SCENARIOS_JSON`` with a release root (patched or not) first
on ``sys.path``: each test process imports exactly one vLLM. A scenario is
``{"pp": N, "async": bool, "max_seqs": M}``, with ``"max_active": A`` for vLLM's
``max_num_active_seqs`` (0.31 on) and ``"requests": [[prompt length, max tokens], ...]`` for other
requests than ``REQUESTS`` (the model length and KV blocks grow to hold them), ``"drafts": K`` for n-gram
speculative decoding with K draft tokens and ``"blocks": B`` for a KV cache of B blocks (fewer than the
requests need: some are preempted);
the queue holds ``pp`` steps in flight, schedules the next while earlier ones are out, and feeds model
outputs back oldest first. The "model" samples a token derived from the request and its length, so two
runs that schedule the same work produce the same tokens. With drafts it accepts a number of each step's
drafts derived the same way, and proposes K new ones with every output; they reach the scheduler right
after that output, through the pipeline-parallel snippet where it is installed (the patched engine's
hand-off), else as they come.
"""
from __future__ import annotations

import json
import sys
import traceback
from collections import deque
from pathlib import Path

import torch
from vllm.config import (
    CacheConfig,
    DeviceConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
    SpeculativeConfig,
    VllmConfig,
)
from vllm.sampling_params import SamplingParams
from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from vllm.v1.outputs import DraftTokenIds, ModelRunnerOutput
from vllm.v1.request import Request
from vllm.v1.structured_output import StructuredOutputManager

BLOCK = 16
BLOCKS = 256
# (prompt length, max tokens) of each request: uneven, so requests finish at different steps.
REQUESTS = [(8, 6), (13, 9), (5, 4), (21, 7), (9, 9), (17, 5)]


def build(model_dir: str, pp: int, async_scheduling: bool, max_seqs: int, max_active: int | None,
          requests: list, batched: int = 1024, block: int = BLOCK, drafts: int = 0,
          blocks: int | None = None) -> Scheduler:
    max_len = max(256, max(prompt + tokens for prompt, tokens in requests))
    # every request's blocks at once, and the block pool's null block (without it the last request is preempted)
    blocks = blocks or max(BLOCKS, 1 + sum(-(-(prompt + tokens) // block) for prompt, tokens in requests))
    model = ModelConfig(model=model_dir, skip_tokenizer_init=True, dtype="float32", max_model_len=max_len)
    active = {} if max_active is None else {"max_num_active_seqs": max_active}
    parallel = ParallelConfig(pipeline_parallel_size=pp)
    speculative = SpeculativeConfig(method="ngram", num_speculative_tokens=drafts, prompt_lookup_max=3,
                                    prompt_lookup_min=1, target_model_config=model,
                                    target_parallel_config=parallel) if drafts else None
    vllm_config = VllmConfig(
        model_config=model,
        scheduler_config=SchedulerConfig(max_num_seqs=max_seqs, max_num_batched_tokens=batched, max_model_len=max_len,
                                         is_encoder_decoder=False, async_scheduling=False, **active),
        cache_config=CacheConfig(block_size=block, enable_prefix_caching=False),
        device_config=DeviceConfig(device="cpu"),
        parallel_config=parallel,
        speculative_config=speculative,
    )
    vllm_config.cache_config.num_gpu_blocks = blocks
    # Set after the config is built: the patched config refuses async scheduling at pipeline size > 1,
    # and what is tested here is that the scheduler's own targets leave an async schedule as it was.
    vllm_config.scheduler_config.async_scheduling = async_scheduling
    spec = FullAttentionSpec(block_size=block, num_kv_heads=1, head_size=1, dtype=torch.float32)
    kv = KVCacheConfig(num_blocks=blocks, kv_cache_tensors=[], kv_cache_groups=[KVCacheGroupSpec(["layer"], spec)])
    cls = AsyncScheduler if async_scheduling else Scheduler
    return cls(vllm_config=vllm_config, kv_cache_config=kv,
               structured_output_manager=StructuredOutputManager(vllm_config), block_size=block)


def sampled(req_id: str, length: int) -> int:
    return 100 + (sum(map(ord, req_id)) * 31 + length) % 800


def run(model_dir: str, pp: int, async_scheduling: bool, max_seqs: int, max_active: int | None = None,
        requests: list = REQUESTS, drafts: int = 0, blocks: int | None = None) -> dict:
    scheduler = build(model_dir, pp, async_scheduling, max_seqs, max_active, requests, drafts=drafts, blocks=blocks)
    for i, (prompt, max_tokens) in enumerate(requests):
        params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
        scheduler.add_request(Request(f"r{i}", list(range(1, prompt + 1)), params, None))
    lengths = {f"r{i}": prompt for i, (prompt, _) in enumerate(requests)}
    tokens: dict[str, list[int]] = {}
    steps, running, in_flight_twice, outputs, resent, overdrafted = [], [], [], [], [], []
    draft_tokens = accepted_tokens = preempted = stale_drafts = 0
    queue: deque = deque()
    while scheduler.has_requests() or queue:
        if scheduler.has_requests() and len(queue) < pp:
            out = scheduler.schedule()
            ids = sorted(out.num_scheduled_tokens)
            in_flight = {r for earlier in queue for r in earlier.num_scheduled_tokens}
            in_flight_twice += sorted(in_flight.intersection(ids))
            # a request scheduled with as many drafts as tokens or more: the runner has no token to verify them
            overdrafted += [r for r in ids
                            if len(out.scheduled_spec_decode_tokens.get(r, ())) >= out.num_scheduled_tokens[r]]
            preempted += len(out.preempted_req_ids or ())
            steps.append(ids)
            running.append(len(scheduler.running))
            outputs.append(repr(out) if requests is REQUESTS else "")
            # token ids sent again: a cached request's whole list, for workers that may not hold it
            resent.append(sum(map(len, out.scheduled_cached_reqs.all_token_ids.values())))
            queue.appendleft(out)
            if len(queue) < pp:
                continue
        out = queue.pop()
        ids = list(out.num_scheduled_tokens)
        new = []
        for r in ids:
            scheduled_drafts = len(out.scheduled_spec_decode_tokens.get(r, ()))
            accepted = sampled(r, lengths[r]) % (scheduled_drafts + 1)
            draft_tokens, accepted_tokens = draft_tokens + scheduled_drafts, accepted_tokens + accepted
            new.append([sampled(r, lengths[r] + j) for j in range(accepted + 1)])
            lengths[r] += accepted + 1
        result = ModelRunnerOutput(req_ids=ids, req_id_to_index={r: i for i, r in enumerate(ids)},
                                   sampled_token_ids=new)
        for engine_outputs in scheduler.update_from_output(out, result).values():
            for o in engine_outputs.outputs:
                tokens.setdefault(o.request_id, []).extend(o.new_token_ids)
        if drafts:
            # drafts for a request the output did not leave caught up (preempted, or re-prefilling, meanwhile)
            stale_drafts += sum(1 for r in ids if (q := scheduler.requests.get(r)) is not None
                                and not q.is_finished() and q.num_computed_tokens != q.num_tokens - 1)
            hand_drafts(scheduler, result, DraftTokenIds(ids, [[sampled(r, lengths[r] + j) for j in range(drafts)]
                                                                for r in ids]))
    return {"steps": steps, "running": running, "in_flight_twice": in_flight_twice, "tokens": tokens,
            "outputs": outputs, "resent": resent, "overdrafted": overdrafted, "draft_tokens": draft_tokens,
            "accepted_tokens": accepted_tokens, "preempted": preempted, "stale_drafts": stale_drafts}


def hand_drafts(scheduler: Scheduler, result: ModelRunnerOutput, drafts: DraftTokenIds) -> None:
    """A step's drafts to the scheduler right after its output: through the patched engine's hand-off where
    the pipeline-parallel snippets are installed, else as they come."""
    try:
        from _patchspec_runtime.pipeline_parallel import speculative
    except ImportError:
        scheduler.update_draft_token_ids(drafts)
        return
    setattr(result, speculative.DRAFTS, drafts)
    speculative.take_drafts_of_output(scheduler, result)


def outcome(model_dir: str, scenario: dict) -> dict:
    """A scenario's run; one with drafts may break the scheduler's own checks (``{"failed": what}``)."""
    args = (model_dir, scenario["pp"], scenario["async"], scenario["max_seqs"], scenario.get("max_active"),
            scenario.get("requests", REQUESTS), scenario.get("drafts", 0), scenario.get("blocks"))
    if not scenario.get("drafts"):
        return run(*args)
    try:
        return run(*args)
    except AssertionError:
        frame = traceback.extract_tb(sys.exc_info()[2])[-1]
        return {"failed": f"{Path(frame.filename).name}:{frame.lineno}: {frame.line}"}


def main() -> None:
    model_dir, scenarios = sys.argv[1], json.loads(sys.argv[2])
    results = [outcome(model_dir, s) for s in scenarios]
    print(json.dumps(results))


if __name__ == "__main__":
    main()
