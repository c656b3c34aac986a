"""Async scheduling at pipeline size 2 is settled when vLLM's real ``VllmConfig`` (0.26.0 and 0.30.0) is
built, before ``__post_init__`` resolves an unset flag to on: on HPU unset becomes off with one log line
and an explicit ``--async-scheduling`` is refused in one line naming the platform; vLLM's own runners (CPU
here) and size 1 are left as stock resolves them."""
from __future__ import annotations

import json

import pytest
from vllm_runs import RELEASES, result, start

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
          "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4,
          "num_hidden_layers": 4, "vocab_size": 1000, "max_position_embeddings": 512,
          "torch_dtype": "float32", "rms_norm_eps": 1e-6}
# (pipeline size, --async-scheduling given as, device)
CASES = [(2, None, "cpu"), (2, True, "cpu"), (2, False, "cpu"), (1, None, "cpu"), (1, True, "cpu"),
         (2, None, "hpu"), (2, True, "hpu"), (1, True, "hpu")]
WHY = ("pipeline_parallel_size=2: async scheduling off on HPU, the non-last stages take the sampled tokens "
       "from the scheduler")
REFUSAL = ("NotImplementedError: --async-scheduling does not work with pipeline_parallel_size=2 on HPU, the "
           "non-last stages take the sampled tokens from the scheduler: drop it or pass --no-async-scheduling")


@pytest.fixture(scope="module", params=RELEASES)
def outcomes(request, vllm_roots, tmp_path_factory):
    model = tmp_path_factory.mktemp("llama")
    (model / "config.json").write_text(json.dumps(CONFIG))
    cases = json.dumps([{"model": str(model), "pp": pp, "partition": None, "async": flag, "device": device}
                        for pp, flag, device in CASES])
    procs = [start(root, "config_run.py", cases) for root in vllm_roots(request.param)]
    return dict(zip(CASES, zip(*(result(p) for p in procs), strict=True), strict=True))


def test_stock_turns_async_scheduling_on_at_size_2_unless_told_not_to(outcomes):
    stock = {case: got for case, (got, _) in outcomes.items()}
    assert stock[(2, None, "cpu")] == {"async": True, "log": []}
    assert stock[(2, True, "cpu")] == {"async": True, "log": []}


def test_patched_turns_it_off_at_size_2_on_hpu_with_one_line_saying_why(outcomes):
    _, patched = outcomes[(2, None, "hpu")]
    assert patched == {"async": False, "log": [WHY]}


def test_patched_refuses_an_explicit_request_on_hpu_at_config_time_naming_the_platform(outcomes):
    _, patched = outcomes[(2, True, "hpu")]
    assert patched == REFUSAL


@pytest.mark.parametrize("case", [(2, None, "cpu"), (2, True, "cpu"), (2, False, "cpu"), (1, None, "cpu"),
                                  (1, True, "cpu"), (1, True, "hpu")])
def test_patched_leaves_vllm_s_own_runners_and_size_1_as_stock_resolves_them(outcomes, case):
    """Async scheduling at size 2 on the CPU engine is built, not refused (before: off, or refused)."""
    stock, patched = outcomes[case]
    assert patched == stock
    if case[2] == "cpu":
        assert stock["async"] is (case[1] is not False)


NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1}
# (pipeline size, --async-scheduling given as), with n-gram drafts on CPU
SPECULATIVE_CASES = [(1, True), (1, None), (2, True), (2, None)]
ONLY_SOME_DRAFTS = "async scheduling is only supported with EAGLE/MTP/Draft Model"


@pytest.fixture(scope="module")
def speculative_outcomes(vllm_roots, tmp_path_factory):
    """vLLM 0.30.0 (the CPU engine tier's release), stock and patched."""
    model = tmp_path_factory.mktemp("llama")
    (model / "config.json").write_text(json.dumps(CONFIG))
    cases = json.dumps([{"model": str(model), "pp": pp, "partition": None, "async": flag, "speculative": NGRAM}
                        for pp, flag in SPECULATIVE_CASES])
    procs = [start(root, "config_run.py", cases) for root in vllm_roots("0.30.0")]
    return dict(zip(SPECULATIVE_CASES, zip(*(result(p) for p in procs), strict=True), strict=True))


@pytest.mark.parametrize("pp", [1, 2])
def test_n_gram_drafts_under_async_scheduling_are_refused_by_stock_at_every_size(speculative_outcomes, pp):
    """Async scheduling with speculative decoding at size 2 is what stock vLLM 0.30 allows at size 1: not
    with n-gram drafts (an explicit flag is refused, an unset one resolves to off). The fix keeps that."""
    stock, patched = speculative_outcomes[(pp, True)]
    assert isinstance(stock, str) and ONLY_SOME_DRAFTS in stock
    assert patched == stock
    stock, patched = speculative_outcomes[(pp, None)]
    assert stock["async"] is False and patched["async"] is False


# Drafts vLLM 0.30 allows under async scheduling: a draft model (the tiny model drafts for itself) and the
# tensor n-gram drafter. (pipeline size, --async-scheduling given as, method)
ASYNC_DRAFT_CASES = [(2, None, "draft_model"), (2, True, "draft_model"), (2, False, "draft_model"),
                     (1, None, "draft_model"), (1, False, "draft_model"),
                     (2, None, "ngram_gpu"), (2, False, "ngram_gpu"), (1, None, "ngram_gpu")]
DRAFTS_STAY = "async scheduling off with speculative decoding, the drafts stay on the last stage"  # before
NGRAM_GPU_REFUSAL = ("NotImplementedError: speculative method ngram_gpu does not work with pipeline_parallel_size=2 "
                     "(every stage trims its drafts by counts only the last stage has): use method ngram")


@pytest.fixture(scope="module")
def async_draft_outcomes(vllm_roots, tmp_path_factory):
    """vLLM 0.30.0, stock and patched."""
    model = tmp_path_factory.mktemp("llama")
    (model / "config.json").write_text(json.dumps(CONFIG))
    drafts = {"draft_model": {"method": "draft_model", "model": str(model), "num_speculative_tokens": 3},
              "ngram_gpu": {**NGRAM, "method": "ngram_gpu"}}
    cases = json.dumps([{"model": str(model), "pp": pp, "partition": None, "async": flag,
                         "speculative": drafts[method]} for pp, flag, method in ASYNC_DRAFT_CASES])
    procs = [start(root, "config_run.py", cases) for root in vllm_roots("0.30.0")]
    return dict(zip(ASYNC_DRAFT_CASES, zip(*(result(p) for p in procs), strict=True), strict=True))


@pytest.mark.parametrize("flag", [None, True])
def test_a_draft_model_under_async_scheduling_at_size_2_stays_on_as_stock_resolves_it(async_draft_outcomes, flag):
    """The last stage sends the earlier ones its drafts after each step (async_drafts.py): a draft model at
    size 2 runs under async scheduling as vLLM resolves it, unset or asked for, with no line turning it off
    (before, unset became off with DRAFTS_STAY and an explicit request was refused)."""
    stock, patched = async_draft_outcomes[(2, flag, "draft_model")]
    assert stock["async"] is True
    assert isinstance(patched, dict), patched
    assert patched["async"] is True and not any(DRAFTS_STAY in line for line in patched["log"])


def test_a_draft_model_at_size_2_without_async_scheduling_stays_as_stock_resolves_it(async_draft_outcomes):
    """Without async scheduling a draft model at size 2 failed on the last stage once a request preempted
    while its step was out took that step's drafts (an index out of bounds in the proposer; seen in the CPU
    engine with a tight KV cache), and was refused at start-up. The drafts now go only to requests the output
    left caught up (tests/vllm/test_vllm_scheduler.py): at sizes 2 and 1 as stock."""
    for pp in (2, 1):
        stock, patched = async_draft_outcomes[(pp, False, "draft_model")]
        assert isinstance(stock, dict) and stock["async"] is False
        assert patched == stock


def test_ngram_gpu_at_size_2_is_refused_naming_the_method_that_works(async_draft_outcomes):
    for flag in (None, False):
        stock, patched = async_draft_outcomes[(2, flag, "ngram_gpu")]
        assert isinstance(stock, dict), stock
        assert isinstance(patched, str) and patched.startswith(NGRAM_GPU_REFUSAL), patched


@pytest.mark.parametrize("method", ["draft_model", "ngram_gpu"])
def test_drafts_under_async_scheduling_at_size_1_stay_as_stock_resolves_them(async_draft_outcomes, method):
    stock, patched = async_draft_outcomes[(1, None, method)]
    assert stock["async"] is True and patched == stock
