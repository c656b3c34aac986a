"""Buckets and warm-up sized for one microbatch at pipeline size 2, left alone at size 1.

Under the scheduler's cap a step holds at most ceil(max_num_seqs / pp) requests. vllm-gaudi's own bucketing
(v0.26.0 and main, every strategy, user-set maxima and a bucket file, with and without contiguous paged
attention) generates decode batch sizes up to max_num_seqs; bounded by the hook, no bucket is larger than
the microbatch, block counts are bounded with the batch where they count per request, and every batch a
step can form still finds a prepared bucket. With speculative decoding (k draft tokens per request) the seed
buckets hold one microbatch and the verify shapes, bs * (1 + k) tokens, follow from them, so every verify
step a microbatch can form finds a prepared bucket (the fixture's bucketing too, for runs without
vllm-gaudi). The patched fixture runner's warm-up, on both stages in real
processes, then runs no decode batch larger than the microbatch.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
from hpu_stages import Pipeline

from tests.hpu.conftest import FIXTURE, REPO

GAUDI_TAGS = ["v0.26.0", "main"]
SIZES = {"max_num_seqs": 64, "max_num_prefill_seqs": 1, "block_size": 128, "max_num_batched_tokens": 2048,
         "max_model_len": 4096, "num_hpu_blocks": 1200}
CAP = 32  # ceil(64 / 2)
PER_REQUEST = 32  # ceil(4096 / 128)
# Our own bucket file, in vllm-gaudi's documented format: one (bs, query, blocks) per line, lists expanded.
BUCKET_FILE = ("([1, 2, 4, 8, 16, 32, 48, 64], 1, [128, 512, 1024, 2048])\n"
               "([1, 2, 4], [128, 256, 512, 1024, 2048], 0)\n")
STRATEGIES = {
    "exp": {"VLLM_BUCKETING_STRATEGY": "exp"},
    "lin": {"VLLM_BUCKETING_STRATEGY": "lin"},
    "pad": {"VLLM_BUCKETING_STRATEGY": "pad"},
    "lin-user-max": {"VLLM_BUCKETING_STRATEGY": "lin", "VLLM_DECODE_BS_BUCKET_MAX": "128",
                     "VLLM_DECODE_BLOCK_BUCKET_MAX": "8192", "VLLM_PROMPT_BS_BUCKET_MAX": "48"},
    "pad-user-max": {"VLLM_BUCKETING_STRATEGY": "pad", "VLLM_DECODE_BS_BUCKET_MAX": "128",
                     "VLLM_PROMPT_BS_BUCKET_MAX": "48"},
    "file": {"VLLM_BUCKETING_FROM_FILE": None},  # set to the file at run time
}
CASES = [(strategy, contiguous, pp) for strategy in STRATEGIES for contiguous in (False, True) for pp in (1, 2)]


@pytest.fixture(scope="module", params=GAUDI_TAGS)
def bucketing(request, gaudi_release, tmp_path_factory):
    """``{case: what vllm-gaudi's bucketing gave}`` for one vllm-gaudi tag."""
    return _bucketed(gaudi_release(request.param), CASES, tmp_path_factory, lambda pp: {"pp": pp})


def _bucketed(root, keys: list, tmp_path_factory, extra) -> dict:
    """``{key: what buckets_run.py gave}`` with ``root`` first on the path, for each key ``(strategy,
    contiguous PA, x)``: its strategy's variables and ``extra(x)`` on the sizes."""
    bucket_file = tmp_path_factory.mktemp("buckets") / "buckets.txt"
    bucket_file.write_text(BUCKET_FILE)
    cases = []
    for strategy, contiguous, x in keys:
        variables = {k: (str(bucket_file) if v is None else v) for k, v in STRATEGIES[strategy].items()}
        variables["VLLM_CONTIGUOUS_PA"] = str(contiguous).lower()
        cases.append({**SIZES, "env": variables, **extra(x)})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(REPO)]), "PYTHONHASHSEED": "0"}
    done = subprocess.run([sys.executable, str(REPO / "tests" / "hpu" / "buckets_run.py"), json.dumps(cases)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    outcomes = json.loads(done.stdout.strip().splitlines()[-1])
    return {key: {k: [tuple(b) for b in v] if isinstance(v, list) else v for k, v in got.items()}
            for key, got in zip(keys, outcomes, strict=True)}


@pytest.mark.parametrize(("strategy", "contiguous"), [c[:2] for c in CASES if c[2] == 2])
def test_stock_buckets_go_up_to_max_num_seqs(bucketing, strategy, contiguous):
    got = bucketing[(strategy, contiguous, 2)]
    assert got["contiguous_pa"] is contiguous
    assert max(bs for bs, _, _ in got["stock"]) >= SIZES["max_num_seqs"]


@pytest.mark.parametrize(("strategy", "contiguous"), [c[:2] for c in CASES if c[2] == 2])
def test_size_2_buckets_hold_one_microbatch(bucketing, strategy, contiguous):
    got = bucketing[(strategy, contiguous, 2)]
    assert max(bs for bs, _, _ in got["bounded"]) == CAP
    assert max(bs for bs, _, _ in got["bounded_prompt"]) <= CAP
    if not contiguous:  # blocks counted per request: at most what that many requests hold
        assert all(blocks <= bs * PER_REQUEST for bs, _, blocks in got["bounded"])
    else:  # the highest block id in use, which other microbatches raise too: kept
        assert max(b for _, _, b in got["bounded"]) == max(b for _, _, b in got["stock"])
    assert len(got["bounded"]) < len(got["stock"])


@pytest.mark.parametrize(("strategy", "contiguous"), [c[:2] for c in CASES if c[2] == 2])
def test_every_batch_a_step_can_form_finds_a_prepared_bucket(bucketing, strategy, contiguous):
    assert bucketing[(strategy, contiguous, 2)]["added_by_lookups"] == 0


@pytest.mark.parametrize(("strategy", "contiguous"), [c[:2] for c in CASES if c[2] == 1])
def test_size_1_keeps_every_bucket(bucketing, strategy, contiguous):
    got = bucketing[(strategy, contiguous, 1)]
    assert got["bounded"] == got["stock"] and got["bounded_prompt"] == got["stock_prompt"]


def _decode_batches(report) -> set[int]:
    return {bs for bs, seq in report.forwards if seq == 1}


def test_patched_warmup_at_size_2_runs_no_decode_batch_above_the_microbatch(hpu_roots):
    with Pipeline(hpu_roots[1], 2) as pipeline:
        warmup = pipeline.run("warmup")
    cap = math.ceil(6 / 2)  # the fixture's max_num_seqs
    assert _decode_batches(warmup[0]) == _decode_batches(warmup[1]) == {1, 2, cap}


def test_patched_warmup_at_size_1_is_the_original(hpu_roots):
    warmups = []
    for root in hpu_roots:
        with Pipeline(root, 1) as pipeline:
            warmups.append(pipeline.run("warmup")[0])
    assert warmups[0].forwards == warmups[1].forwards
    assert _decode_batches(warmups[1]) == {1, 2, 4, 6}


# Speculative decoding: a verify step pads its requests to a seed bucket and runs them as one decode of
# bs * (1 + k) tokens; at size 2 every stage runs those shapes for at most one microbatch of requests.
SPEC_CASES = [(strategy, contiguous, drafts) for strategy in ("exp", "lin", "pad", "file")
              for contiguous in (False, True) for drafts in (1, 3)]


@pytest.fixture(scope="module", params=["fixture", *GAUDI_TAGS])
def spec_bucketing(request, tmp_path_factory):
    """``{case: what the bucketing gave at size 2}``, for the fixture's bucketing (in vllm-gaudi's shape, for
    runs without vllm-gaudi) and for vllm-gaudi's own of each tag."""
    root = FIXTURE if request.param == "fixture" else request.getfixturevalue("gaudi_release")(request.param)
    return _bucketed(root, SPEC_CASES, tmp_path_factory, lambda k: {"pp": 2, "num_speculative_tokens": k})


@pytest.mark.parametrize(("strategy", "contiguous", "drafts"), SPEC_CASES)
def test_verify_shapes_hold_one_microbatch_of_requests_and_their_draft_tokens(spec_bucketing, strategy,
                                                                             contiguous, drafts):
    got = spec_bucketing[(strategy, contiguous, drafts)]
    assert max(bs for bs, _, _ in got["stock_seeds"]) >= SIZES["max_num_seqs"]
    assert max(bs for bs, _, _ in got["bounded_seeds"]) == CAP
    assert max(bs for bs, _, _ in got["bounded"]) == CAP * (1 + drafts)
    assert len(got["bounded"]) < len(got["stock"])


@pytest.mark.parametrize(("strategy", "contiguous", "drafts"), SPEC_CASES)
def test_every_verify_step_a_microbatch_can_form_finds_a_prepared_bucket(spec_bucketing, strategy, contiguous,
                                                                         drafts):
    assert spec_bucketing[(strategy, contiguous, drafts)]["added_by_lookups"] == 0
