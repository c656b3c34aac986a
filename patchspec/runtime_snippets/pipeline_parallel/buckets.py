# SPDX-License-Identifier: Apache-2.0
"""vllm-gaudi's shape buckets sized for one microbatch.

Under the scheduler's cap (``scheduler.py``) a step has at most ceil(max_num_seqs / pp)
requests, but vllm-gaudi generates its buckets from ``max_num_seqs``: every bucketing
strategy (exponential, linear, padding-aware, a bucket file) and user-set maxima
(``VLLM_DECODE_BS_BUCKET_MAX``, ``VLLM_DECODE_BLOCK_BUCKET_MAX``, ...) give decode batch
sizes, and block counts for them, that no step reaches; warm-up runs and captures each
on every stage. ``HPUModelRunner.warmup_model`` calls this right after the decode
buckets are generated, before any is warmed up.

Each bucket's batch size becomes at most the cap, and, where blocks are counted per
request (not with contiguous paged attention, whose block count is the highest block id
in use, which the other microbatches' requests raise too), its block count at most what
that many requests can hold, as vllm-gaudi's own ``correct_for_max_model_len`` bounds
it. So every batch a step can form still finds a bucket, as it did before.

With speculative decoding vllm-gaudi pads a verify step's requests to a seed bucket
(``seed_decode_buckets``) and runs it as one decode of ``bs * (1 + k)`` tokens, k the
draft tokens per request, from the spec-decode buckets it derives from the seeds
(``generate_spec_decode_buckets``). Bounding those like the seeds would cut a verify
of more than ``cap / (1 + k)`` requests off its bucket (a graph compiled in serving,
on every stage). So the seeds are bounded to the microbatch and the spec-decode
buckets derived again from them by vllm-gaudi's own method: verify shapes up to
``cap * (1 + k)`` tokens, the shapes the earlier stages run too.
"""

from __future__ import annotations

import math
from typing import Any

from ._logging import get_logger

__all__ = ["bound_buckets_to_microbatch"]

logger = get_logger(__name__)

USES = {
    "vllm_gaudi/v1/worker/hpu_model_runner.py": [
        "HPUModelRunner.bucketing_manager",
        "HPUModelRunner.parallel_config",
        "HPUModelRunner.use_contiguous_pa",
    ],
    "vllm_gaudi/extension/bucketing/common.py": [
        "HPUBucketingManager.max_num_seqs",
        "HPUBucketingManager.max_model_len",
        "HPUBucketingManager.block_size",
        "HPUBucketingManager.prompt_buckets",
        "HPUBucketingManager.decode_buckets",
        "HPUBucketingManager._fallback_max_ctx",
        "HPUBucketingManager.num_speculative_tokens",
        "HPUBucketingManager.seed_decode_buckets",
        "HPUBucketingManager.generate_spec_decode_buckets(seed_decode_buckets)",
    ],
}

Bucket = tuple[int, int, int]


def bound_buckets_to_microbatch(
    manager: Any, pipeline_parallel_size: int, use_contiguous_pa: bool
) -> None:
    """At pipeline size > 1, bound ``manager``'s generated prompt and decode buckets
    (batch, query, blocks) to one microbatch; at size 1 leave them as generated."""
    if pipeline_parallel_size == 1:
        return
    cap = math.ceil(manager.max_num_seqs / pipeline_parallel_size)
    per_request = math.ceil(manager.max_model_len / manager.block_size)

    def decode(bucket: Bucket) -> Bucket:
        bs, query, blocks = bucket
        bs = min(bs, cap)
        return bs, query, blocks if use_contiguous_pa else min(blocks, bs * per_request)

    before = len(manager.decode_buckets)
    manager.prompt_buckets = sorted(
        {(min(bs, cap), query, blocks) for bs, query, blocks in manager.prompt_buckets}
    )
    if manager.num_speculative_tokens:
        seeds = manager.seed_decode_buckets
        manager.seed_decode_buckets = sorted(set(map(decode, seeds)))
        manager.decode_buckets = manager.generate_spec_decode_buckets(
            manager.seed_decode_buckets
        )
    else:
        manager.decode_buckets = sorted(set(map(decode, manager.decode_buckets)))
    manager._fallback_max_ctx = max((b[2] for b in manager.decode_buckets), default=0)
    logger.info(
        "pipeline_parallel_size=%d: buckets for at most %d requests per step, %d "
        "decode buckets instead of %d",
        pipeline_parallel_size,
        cap,
        len(manager.decode_buckets),
        before,
    )
