"""The warm-up handshake over vllm-gaudi's own bucketing (v0.26.0 and main), two stages over gloo.

Each stage pads a step with its own bucketing manager (``bucketing/common.py``), so two stages whose
settings give different bucket lists pad one batch to different shapes. After warm-up the stages compare
vllm-gaudi's user settings as its runtime configuration read them and digests of the final lists: a
setting that differs is refused on both stages by its name, with both values; lists that differ with the
same settings (other sizes) by the list.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hpu_stages import free_port

from tests.hpu.conftest import REPO

SIZES = {"max_num_seqs": 64, "max_num_prefill_seqs": 1, "block_size": 128, "max_num_batched_tokens": 2048,
         "max_model_len": 4096, "num_hpu_blocks": 1200}
LIN = {"VLLM_BUCKETING_STRATEGY": "lin"}
CASES = [
    {"name": "same", "env": [LIN, LIN], "sizes": [SIZES, SIZES]},
    {"name": "setting", "env": [{**LIN, "VLLM_PROMPT_SEQ_BUCKET_MAX": "1024"},
                                {**LIN, "VLLM_PROMPT_SEQ_BUCKET_MAX": "2048"}], "sizes": [SIZES, SIZES]},
    # merged prefill on one node: vllm-gaudi then batches up to max_num_seqs prompts per prefill
    {"name": "lists", "env": [LIN, LIN], "sizes": [SIZES, {**SIZES, "max_num_prefill_seqs": 64}]},
]


@pytest.fixture(scope="module", params=["v0.26.0", "main"])
def refusals(request, gaudi_release) -> list[dict]:
    root = gaudi_release(request.param)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(REPO)]), "PYTHONHASHSEED": "0"}
    port = free_port()
    stages = [subprocess.Popen([sys.executable, str(REPO / "tests" / "hpu" / "warm_up_run.py"), str(rank),
                                str(port), json.dumps(CASES)], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for rank in (0, 1)]
    try:
        done = [stage.communicate(timeout=600) for stage in stages]
    finally:
        for stage in stages:
            if stage.poll() is None:
                stage.kill()
                stage.wait()
    for stage, (_, err) in zip(stages, done, strict=True):
        assert stage.returncode == 0, err[-4000:]
    return [json.loads(out.strip().splitlines()[-1]) for out, _ in done]


def test_the_same_settings_pass(refusals):
    assert [got["same"] for got in refusals] == ["ok", "ok"]


def test_a_bucketing_setting_that_differs_is_refused_on_both_stages_by_name_with_both_values(refusals):
    for stage, other, here, there in ((0, 1, 1024, 2048), (1, 0, 2048, 1024)):
        assert refusals[stage]["setting"] == (
            f"pipeline warm-up: stage {stage} and stage {other} (rank {other}) differ: VLLM_PROMPT_SEQ_BUCKET_MAX "
            f"{here} here, {there} there; give every node the same VLLM_PROMPT_SEQ_BUCKET_MAX")


def test_bucket_lists_that_differ_under_the_same_settings_are_refused_on_both_stages(refusals):
    for stage, other in ((0, 1), (1, 0)):
        got = refusals[stage]["lists"]
        head = f"pipeline warm-up: stage {stage} and stage {other} (rank {other}) differ: prompt buckets "
        assert got.startswith(head) and got.endswith(" there; give every node the same bucketing settings "
                                                     "and bucket file"), got
    # each side names its own list first
    mine = refusals[0]["lists"].split("prompt buckets ")[1].split(" here, ")[0]
    assert refusals[1]["lists"].split(" here, ")[1].startswith(mine)
