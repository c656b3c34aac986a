"""vllm-gaudi's own bucketing (``vllm_gaudi.extension.bucketing``) of one release, stock and bounded to the
microbatch by the pipeline-parallel hook; prints one JSON document.

``python buckets_run.py CASES_JSON`` with a vllm-gaudi root first on ``sys.path`` (no vLLM needed). A case
is ``{"env": {...}, "max_num_seqs": n, "pp": size}`` plus the manager's sizes and, for speculative
decoding, ``num_speculative_tokens`` (the lookups are then a verify step's: a seed bucket for its requests,
then one decode of their tokens); ``env`` selects the strategy and user-set maxima as vllm-gaudi reads them
(``VLLM_BUCKETING_STRATEGY``, ``VLLM_CONTIGUOUS_PA``, ``VLLM_DECODE_BS_BUCKET_MAX``,
``VLLM_BUCKETING_FROM_FILE``, ...). vllm-gaudi's runtime configuration is
built afresh for each case, as a new process would build it, with the hardware set to ``cpu``.
"""
from __future__ import annotations

import json
import math
import os
import sys

from patchspec.runtime_snippets.pipeline_parallel.buckets import bound_buckets_to_microbatch


def bucketing_manager(case: dict):
    """vllm-gaudi's manager for ``case``'s sizes, its buckets generated."""
    from vllm_gaudi.extension.bucketing.common import HPUBucketingManager

    manager = HPUBucketingManager()
    manager.initialize(max_num_seqs=case["max_num_seqs"], max_num_prefill_seqs=case["max_num_prefill_seqs"],
                       block_size=case["block_size"], max_num_batched_tokens=case["max_num_batched_tokens"],
                       max_model_len=case["max_model_len"],
                       num_speculative_tokens=case.get("num_speculative_tokens", 0))
    manager.num_hpu_blocks = case["num_hpu_blocks"]
    manager.generate_prompt_buckets()
    manager.generate_decode_buckets()
    return manager


def run(case: dict) -> dict:
    from vllm_gaudi.extension import runtime

    saved = dict(os.environ)
    os.environ.update(case["env"])
    runtime.clear_config()
    try:
        contiguous = runtime.get_config(hw="cpu").use_contiguous_pa
        stock = bucketing_manager(case)
        bounded = bucketing_manager(case)
        bound_buckets_to_microbatch(bounded, case["pp"], contiguous)
        # every batch a step can form, as large as a stock bucket allowed, looked up in the bounded buckets
        cap = math.ceil(case["max_num_seqs"] / case["pp"])
        per_request = math.ceil(case["max_model_len"] / case["block_size"])
        prepared = len(bounded.decode_buckets)
        drafts = case.get("num_speculative_tokens", 0)
        for bs, _, blocks in stock.seed_decode_buckets if drafts else stock.decode_buckets:
            bs = min(bs, cap)
            blocks = blocks if contiguous else min(blocks, bs * per_request)
            if drafts:  # a verify step, as the runner pads it: its requests to a seed, then bs * (1 + k)
                padded = bounded.find_decode_bucket(bs, blocks, True)[0]
                bounded.find_decode_bucket(padded * (1 + drafts), blocks if contiguous else blocks * (1 + drafts))
            else:
                bounded.find_decode_bucket(bs, blocks)
        return {"contiguous_pa": contiguous, "stock": stock.decode_buckets,
                "bounded": bounded.decode_buckets[:prepared],
                "stock_seeds": stock.seed_decode_buckets or [], "bounded_seeds": bounded.seed_decode_buckets or [],
                "stock_prompt": stock.prompt_buckets, "bounded_prompt": bounded.prompt_buckets,
                "added_by_lookups": len(bounded.decode_buckets) - prepared}
    finally:
        os.environ.clear()
        os.environ.update(saved)


def main() -> None:
    print(json.dumps([run(case) for case in json.loads(sys.argv[1])]))


if __name__ == "__main__":
    main()
