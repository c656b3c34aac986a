"""The patched fixture HPU runner at pipeline size 2 over gloo, against the unpatched runner at size 1.

Stages are real processes; the parent schedules like vLLM's engine core. The prompts arrive so that
steps mix prefill chunks and decodes.
"""
from __future__ import annotations

import math

import call_order
import pytest
from hpu_stages import Pipeline, generate, outputs_of

PROMPTS = {"a": [5, 6, 7, 8, 9], "b": [11, 12], "c": [3, 1, 4, 1, 5, 9, 2], "d": [60], "e": [88, 2, 71, 20]}
ARRIVALS = {"c": 2, "d": 3, "e": 3}
OPTIONS = [{}, {"dp_padding": True, "flatten": True}]
SAMPLING = {"_run_sampling", "compute_logits", "warmup_sampler"}


def _reference(root, **options):
    with Pipeline(root, 1, **options) as pipeline:
        pipeline.run("warmup")
        return generate(pipeline, PROMPTS, ARRIVALS)


@pytest.fixture(scope="module", params=OPTIONS, ids=lambda o: ",".join(o) or "plain")
def runs(request, hpu_roots):
    """The unpatched runner at size 1 and the patched one at size 2 (and the patched root)."""
    pristine, patched = hpu_roots
    options = request.param
    with Pipeline(patched, 2, **options) as pipeline:
        # both stages warm up at once, as the nodes do: each returns once its neighbour has warmed up too
        warmup = pipeline.run("warmup")
        steps = generate(pipeline, PROMPTS, ARRIVALS)
    return options, _reference(pristine, **options), patched, warmup, steps


def test_size_1_patched_runs_the_original_path(runs):
    options, original, root, _, _ = runs
    patched = _reference(root, **options)
    assert outputs_of(patched, 0) == outputs_of(original, 0)
    assert [s.reports[0].calls for s in patched] == [s.reports[0].calls for s in original]
    assert [s.reports[0].forwards for s in patched] == [s.reports[0].forwards for s in original]


def test_size_2_samples_the_same_tokens_as_size_1(runs):
    _, original, _, _, steps = runs
    expected = outputs_of(original, 0)
    assert sorted(expected) == sorted(PROMPTS) and all(len(t) == 4 for t in expected.values())
    assert outputs_of(steps, 1) == expected


def test_non_last_stage_never_samples_and_returns_upstreams_empty_output(runs):
    _, _, _, warmup, steps = runs
    assert SAMPLING.isdisjoint(warmup[0].calls)
    assert "warmup_sampler" in warmup[1].calls
    for step in steps[:-1]:  # the last step only retires requests: no forward, no output
        assert step.reports[0].output == "EMPTY_MODEL_RUNNER_OUTPUT"
    for step in steps:
        assert SAMPLING.isdisjoint(step.reports[0].calls), step.reports[0].calls


def test_every_forward_is_received_in_order_and_warmup_sends_nothing(runs):
    _, _, _, warmup, steps = runs
    assert warmup[0].messages == warmup[1].messages == 0
    assert any(warmup[1].forwards), "the warm-up of stage 1 ran a forward on zero tensors"
    sent = 0
    for step in steps:
        first, last = step.reports[0], step.reports[1]
        assert first.forwards == last.forwards  # same padded batches, same order
        sent += len(first.forwards)
        assert first.messages == last.messages == sent


def test_non_last_stage_runs_the_preparation_and_forwards_of_sample_tokens(runs, hpu_roots):
    """The calls stage 0 made, step by step, against the order read from the patched method."""
    options, _, _, _, steps = runs
    source = (hpu_roots[1] / "vllm_gaudi/v1/worker/hpu_model_runner.py").read_text()
    patched = call_order.method(source, "HPUModelRunner", "sample_tokens")
    assert call_order.calls_before_return(patched) == []
    for step in steps[:-1]:  # the last step only retires requests
        dp = options.get("dp_padding", False)
        conditions = call_order.batch_conditions(step.num_prompts, step.num_decodes, dp)
        loops = {"prefill_data": math.ceil(step.num_prompts / 2),
                 "dummy_prefill_input_data_batches_across_dp": int(dp)}
        assert step.reports[0].calls == call_order.non_last_stage_calls(patched, conditions, loops)


def test_stages_that_disagree_on_the_batch_stop_with_a_desync(hpu_roots):
    """Stage 1 is told to run 3 of the prompt's tokens where stage 0 ran 5: the padded batches differ
    (1 x 8 against 1 x 4) and stage 1 raises instead of decoding stage 0's hidden states."""
    step = {"new_reqs": {"a": [1, 2, 3, 4, 5]}}
    with Pipeline(hpu_roots[1], 2) as pipeline:
        first = pipeline.run("step", step | {"num_scheduled_tokens": {"a": 5}}, ranks=[0])
        assert first[0].forwards == [(1, 8)] and first[0].messages == 1
        with pytest.raises(RuntimeError, match="PipelineDesyncError: .*token count.*expected 4, got 8"):
            pipeline.run("step", step | {"num_scheduled_tokens": {"a": 3}}, ranks=[1])


def test_equal_padded_counts_in_other_rows_stop_with_a_desync_not_shifted_rows(hpu_roots):
    """Issue 30, 1: stage 1 merges the step's prompts into one row (vllm-gaudi's merged prefill), stage 0
    pads each in a row of its own: two 3-token prompts are 1 x 8 on stage 1 and 2 x 4 on stage 0, the same
    8 tokens, with b's rows shifted by one. The header's rows digest (padded shape, requests in row order
    and their token counts) stops stage 1 with a named desync instead of decoding b from a's padding."""
    step = {"new_reqs": {"a": [1, 2, 3], "b": [4, 5, 6]}, "num_scheduled_tokens": {"a": 3, "b": 3}}
    with Pipeline(hpu_roots[1], 2, merged_prefill_on=(1,)) as pipeline, pytest.raises(RuntimeError) as raised:
        pipeline.run("step", step)
    assert "PipelineDesyncError: pipeline transfer: rows (padded shape, requests and their token counts) " \
           "of step 1, forward 0 from rank 0: expected " in str(raised.value)


def test_a_failed_warm_up_reports_its_own_error_without_waiting_on_the_next_stage(hpu_roots):
    """Stage 0's warm-up fails while stage 1 posts no receive (it warms up on zeros, or is done): no abort
    is sent, which would wait for that receive until the transfer timeout (5 s here, 240 s by default)
    and only then let the real error out. The error comes with no transfer event before it, and stage 1,
    done with its warm-up, stops with stage 0's error instead of waiting for the warm-up handshake
    (VLLM_PP_START_UP_TIMEOUT_S, 600 s by default)."""
    with Pipeline(hpu_roots[1], 2, timeout_s=5.0, warmup_fails_on=(0,)) as pipeline:
        with pytest.raises(RuntimeError, match="stage 0 failed") as failed:
            pipeline.run("warmup", ranks=[0])
        with pytest.raises(RuntimeError, match="stage 1 failed") as told:
            pipeline.run("warmup", ranks=[1])
    report = str(failed.value)
    assert "MemoryError: out of device memory in graph capture (test)" in report
    log = report.split("log:\n", 1)[1]
    assert "abort" not in log and "timed out" not in log, log
    assert ("PipelineHandshakeError: pipeline warm-up: stage 0 (rank 0) failed its warm-up: MemoryError: out of "
            "device memory in graph capture (test)") in str(told.value)
