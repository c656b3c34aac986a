"""The runners' persistent batch across microbatches (issue 29, item 1), on the patched fixture runner's two
stages in real processes: the microbatches take turns, as under the scheduler's cap.

A step that neither admits nor retires a request adds and removes no row of the persistent batch: every
running request stays resident in its microbatch's batch (vllm-gaudi's ``_update_states`` rule alone, or
``VLLM_PP_BATCH_PER_MICROBATCH=0``, removes the other microbatch's rows and adds this one's back every
step). The tokens are those of the unpatched runner at size 1 on the same schedule.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hpu_stages import Pipeline, generate, outputs_of

from patchspec.verbs import writing
from tests.hpu.conftest import REPO, SPEC, build_root

PROMPTS = {"a": [5, 6, 7, 8, 9], "b": [11, 12], "c": [3, 1, 4, 1, 5, 9, 2], "d": [60], "e": [88, 2, 71, 20],
           "f": [7, 7]}
ARRIVALS = {"a": 0, "b": 0, "c": 1, "d": 1, "e": 4, "f": 5}  # e, f join later, one per microbatch
MAX_TOKENS = 8


def _run(root, pp: int, **options):
    with Pipeline(root, pp, **options) as pipeline:
        return generate(pipeline, PROMPTS, ARRIVALS, max_tokens=MAX_TOKENS, microbatches=2)


def steady(steps) -> list:
    """Steps that admit no request and retire none, all of whose requests ran before."""
    seen: set = set()
    out = []
    for step in steps:
        scheduled = set(step.payload["num_scheduled_tokens"])
        if scheduled and scheduled <= seen and not step.payload["new_reqs"] and not step.payload["finished_req_ids"]:
            out.append(step)
        seen |= scheduled
    return out


@pytest.fixture(scope="module")
def runs(hpu_roots):
    pristine, patched = hpu_roots
    return {"size1": _run(pristine, 1), "size2": _run(patched, 2),
            "size2_one_batch": _run(patched, 2, env={"VLLM_PP_BATCH_PER_MICROBATCH": "0"})}


def test_size_2_with_one_batch_per_microbatch_samples_the_size_1_tokens(runs):
    expected = outputs_of(runs["size1"], 0)
    assert sorted(expected) == sorted(PROMPTS) and all(len(t) == MAX_TOKENS for t in expected.values())
    assert outputs_of(runs["size2"], 1) == outputs_of(runs["size2_one_batch"], 1) == expected


@pytest.mark.parametrize("rank", [0, 1])
def test_a_steady_step_adds_and_removes_no_row_at_size_2(runs, rank):
    steps = steady(runs["size2"])
    assert len(steps) >= 10
    assert [s.reports[rank].rows for s in steps] == [[]] * len(steps)


@pytest.mark.parametrize("rank", [0, 1])
def test_one_batch_rewrites_the_other_microbatch_s_rows_every_steady_step(runs, rank):
    """The measure can fail: the runner's own rule writes rows in every steady step."""
    steps = steady(runs["size2_one_batch"])
    assert len(steps) >= 10
    assert all(any(op == "add" for op, _ in s.reports[rank].rows) for s in steps)
    assert all(any(op == "remove" for op, _ in s.reports[rank].rows) for s in steps)


def test_rows_leave_only_when_requests_finish(runs):
    """Over the whole run at size 2 each request's row is added once (when it joins) and removed once (when it
    finishes): no request moved between the microbatches here."""
    rows = [row for step in runs["size2"] for row in step.reports[0].rows]
    assert sorted(r for op, r in rows if op == "add") == sorted(PROMPTS)
    assert sorted(r for op, r in rows if op == "remove") == sorted(PROMPTS)


# --- vllm-gaudi's own InputBatch and _update_states, fed by vLLM's real scheduler (PATCHSPEC_VLLM_GAUDI) ---

GAUDI_PAIRS = [("v0.26.0", "0.26.0"), ("main", "0.30.0")]  # vllm-gaudi tag, the vLLM release its profile pairs
CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
          "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4,
          "num_hidden_layers": 4, "vocab_size": 1000, "max_position_embeddings": 4096,
          "torch_dtype": "float32", "rms_norm_eps": 1e-6}


@pytest.fixture(scope="module", params=GAUDI_PAIRS, ids=[tag for tag, _ in GAUDI_PAIRS])
def gaudi_steps(request, gaudi_release, vllm_release, tmp_path_factory):
    """Per scheduler step at pipeline size 2, stage 0's and the last stage's rows (gaudi_batches_run.py), with
    the spec applied, with ``VLLM_PP_BATCH_PER_MICROBATCH=0``, and with 3 n-gram drafts per step."""
    tag, release = request.param
    base = tmp_path_factory.mktemp(f"gaudi-{tag}")
    root = build_root(base / "root", vllm_release(release), gaudi_release(tag))
    writing.apply(str(SPEC), f"v{release}", str(root))
    model = base / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(CONFIG))
    out = {}
    runs = (("fix", {}, "0"), ("one_batch", {"VLLM_PP_BATCH_PER_MICROBATCH": "0"}, "0"), ("drafts", {}, "3"))
    for name, env, drafts in runs:
        done = subprocess.run([sys.executable, str(REPO / "tests" / "hpu" / "gaudi_batches_run.py"), str(model), "2",
                               drafts],
                              env={**os.environ, **env, "PYTHONHASHSEED": "0", "HF_HUB_OFFLINE": "1",
                                   "PYTHONPATH": os.pathsep.join([str(root), str(REPO / "tests" / "vllm")])},
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-4000:]
        out[name] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.parametrize("stage", [0, 1])
def test_vllm_gaudis_batch_adds_and_removes_no_row_in_a_steady_step_at_size_2(gaudi_steps, stage):
    steady = [s["stages"][stage] for s in gaudi_steps["fix"] if s["steady"]]
    assert len(steady) >= 20
    assert [(s["added"], s["removed"]) for s in steady] == [(0, 0)] * len(steady)


def test_vllm_gaudis_runner_holds_each_step_s_requests_with_their_tokens(gaudi_steps):
    for run in gaudi_steps.values():
        assert all(stage["holds_the_step"] for step in run for stage in step["stages"])
        assert all(step["stages"][0]["tokens_ok"] for step in run)


def test_vllm_gaudis_one_batch_rewrites_rows_every_steady_step(gaudi_steps):
    """The measure can fail: vllm-gaudi's own rule removes and adds the microbatch's rows every step."""
    steady = [s["stages"][0] for s in gaudi_steps["one_batch"] if s["steady"]]
    assert len(steady) >= 20
    assert all(s["added"] >= 4 and s["removed"] >= 4 for s in steady)


def test_vllm_gaudis_earlier_stage_keeps_the_drafts_the_last_stage_accepted(gaudi_steps):
    """Speculative decoding at size 2 without async scheduling (vllm-gaudi's only speculative mode): the
    scheduler sends stage 0 a request's tokens from ``num_computed_tokens`` on, so the drafts the last stage
    accepted are never sent; vllm-gaudi's ``_update_states`` lost them from the request's record (failed
    before: 8 of 14 steps on main), and a row written again from it fed stage 0 wrong tokens."""
    run = gaudi_steps["drafts"]
    assert sum(step["stages"][0]["behind"] for step in run) > 0  # the scenario reaches the case
    assert all(step["stages"][0]["state_ok"] and step["stages"][0]["tokens_ok"] for step in run)
    assert all(stage["holds_the_step"] for step in run for stage in step["stages"])
