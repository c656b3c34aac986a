"""Start-up refusals on vLLM's real ``VllmConfig`` (0.26.0 and 0.30.0), built as ``vllm serve`` builds it.

At pipeline size 2 on HPU, pooling, multimodal and speculative-decoding configurations other than MTP are
refused in one line naming the reason (MTP is built as stock builds it); on vLLM's own runners (CPU here)
and at size 1 they are built as stock builds them. The transfer timeouts default below vLLM's step timeout
(``VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS``), so that the transfer's named error reaches the log first, and an
explicit one that is not is refused in one line naming the variable to raise.
"""
from __future__ import annotations

import json

import pytest
from vllm_runs import RELEASES, result, start

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
         "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4,
         "num_hidden_layers": 4, "vocab_size": 1000, "max_position_embeddings": 512,
         "torch_dtype": "float32", "rms_norm_eps": 1e-6}
# A multimodal architecture whose vLLM module imports without optional packages (torchvision,
# mistral_common) in the test venv.
PALIGEMMA = {"architectures": ["PaliGemmaForConditionalGeneration"], "model_type": "paligemma",
             "image_token_index": 999, "torch_dtype": "float32", "projection_dim": 64, "hidden_size": 64,
             "text_config": {"model_type": "gemma", "hidden_size": 64, "intermediate_size": 128,
                             "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 16,
                             "num_hidden_layers": 4, "vocab_size": 1000, "max_position_embeddings": 512},
             "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 32, "intermediate_size": 64,
                               "num_attention_heads": 2, "num_hidden_layers": 2, "image_size": 32,
                               "patch_size": 8, "projection_dim": 64}}
NGRAM = {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 3, "prompt_lookup_min": 1}
# MTP drafting (DeepSeek-V3 with one MTP layer): the last stage drafts (drafts.py), so it is served on HPU.
DEEPSEEK = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 64,
            "intermediate_size": 128, "moe_intermediate_size": 32, "num_attention_heads": 4,
            "num_key_value_heads": 4, "num_hidden_layers": 4, "num_nextn_predict_layers": 1,
            "n_routed_experts": 4, "n_shared_experts": 1, "num_experts_per_tok": 2, "first_k_dense_replace": 1,
            "kv_lora_rank": 16, "q_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8,
            "v_head_dim": 16, "vocab_size": 1000, "max_position_embeddings": 512, "torch_dtype": "float32",
            "rms_norm_eps": 1e-6, "n_group": 1, "topk_group": 1, "topk_method": "noaux_tc",
            "scoring_func": "sigmoid"}
MTP = {"method": "mtp", "num_speculative_tokens": 1}
KINDS = {
    "pooling": ("llama", {"runner": "pooling"}),
    "multimodal": ("paligemma", {}),
    "speculative": ("llama", {"speculative": NGRAM}),
    "mtp": ("deepseek", {"speculative": MTP}),
    "text": ("llama", {}),
}
REFUSALS = {
    "pooling": "NotImplementedError: pipeline_parallel_size=2 on HPU does not handle pooling models "
               "(LlamaForCausalLM: the model runs without the previous stage's tensors) yet: serve it with "
               "--pipeline-parallel-size 1",
    "multimodal": "NotImplementedError: pipeline_parallel_size=2 on HPU does not handle multimodal models "
                  "(PaliGemmaForConditionalGeneration: the vision encoder and embed_input_ids run on every "
                  "stage) yet: serve it with --pipeline-parallel-size 1",
    "speculative": "NotImplementedError: pipeline_parallel_size=2 on HPU does not handle speculative decoding "
                   "(method ngram: only MTP, drafted on the last stage, is built) yet: serve it with "
                   "--pipeline-parallel-size 1",
}
KIND_CASES = [(kind, device, pp) for kind in KINDS for device, pp in (("hpu", 2), ("hpu", 1), ("cpu", 2))]
# (device, environment): the defaults, vLLM's step timeout raised for 600 s first-forward compiles, and an
# explicit transfer timeout against the default and the raised step timeout
TIMEOUT_CASES = [
    ("hpu", {}),
    ("hpu", {"VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": "750"}),
    ("hpu", {"VLLM_HPU_PP_TIMEOUT_S": "600"}),
    ("hpu", {"VLLM_HPU_PP_TIMEOUT_S": "600", "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": "750"}),
    ("cpu", {"VLLM_PP_TRANSFER_TIMEOUT_S": "600"}),
    ("cpu", {"VLLM_PP_TRANSFER_TIMEOUT_S": "20", "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": "45"}),
]


@pytest.fixture(scope="module", params=RELEASES)
def outcomes(request, vllm_roots, tmp_path_factory):
    """``{case: (stock, patched)}`` for every case of ``KIND_CASES`` and ``TIMEOUT_CASES``."""
    models = {}
    for name, config in (("llama", LLAMA), ("paligemma", PALIGEMMA), ("deepseek", DEEPSEEK)):
        models[name] = tmp_path_factory.mktemp(name)
        (models[name] / "config.json").write_text(json.dumps(config))
    cases = []
    for kind, device, pp in KIND_CASES:
        model, extra = KINDS[kind]
        cases.append({"model": str(models[model]), "pp": pp, "partition": None, "device": device, **extra})
    for device, env in TIMEOUT_CASES:
        cases.append({"model": str(models["llama"]), "pp": 2, "partition": None, "device": device, "env": env,
                      "timeouts": True})
    keys = KIND_CASES + [(device, json.dumps(env)) for device, env in TIMEOUT_CASES]
    stock, patched = vllm_roots(request.param)
    # the stock root has no snippets to read timeouts from: it only says whether it accepts each case
    runs = [start(stock, "config_run.py", json.dumps([{k: v for k, v in c.items() if k != "timeouts"}
                                                      for c in cases])),
            start(patched, "config_run.py", json.dumps(cases))]
    return dict(zip(keys, zip(*(result(p) for p in runs), strict=True), strict=True))


@pytest.mark.parametrize("kind", sorted(REFUSALS))
def test_stock_builds_the_configuration_on_hpu_at_size_2(outcomes, kind):
    stock, _ = outcomes[(kind, "hpu", 2)]
    assert stock is None


@pytest.mark.parametrize("kind", sorted(REFUSALS))
def test_patched_refuses_it_at_size_2_on_hpu_in_one_line_naming_the_reason(outcomes, kind):
    _, patched = outcomes[(kind, "hpu", 2)]
    assert patched == REFUSALS[kind]


@pytest.mark.parametrize(("kind", "device", "pp"), [c for c in KIND_CASES if c[0] != "mtp" and
                                                      (c[1:] != ("hpu", 2) or c[0] == "text")])
def test_patched_builds_the_rest_as_stock_does(outcomes, kind, device, pp):
    stock, patched = outcomes[(kind, device, pp)]
    assert stock is None and patched is None


VLLM_MTP_REFUSAL = "NotImplementedError: Pipeline parallelism is not supported for this model."


@pytest.mark.parametrize(("device", "pp"), [("hpu", 2), ("hpu", 1), ("cpu", 2)])
def test_mtp_drafting_is_built_as_stock_builds_it_on_hpu_at_size_2(outcomes, device, pp):
    """vLLM 0.26 gives the draft the target's pipeline size and refuses an MTP draft at size 2 itself (its
    MTP models do not implement SupportsPP); 0.30 gives it size 1 and builds it, and so does the fix on HPU,
    whose runner drafts on the last stage (refused before: the drafts' hand-off was not built for HPU)."""
    stock, patched = outcomes[("mtp", device, pp)]
    if stock is not None:
        assert pp == 2 and stock.startswith(VLLM_MTP_REFUSAL)
    assert patched == stock


def _timeouts(outcomes, device, env):
    return outcomes[(device, json.dumps(env))]


def test_default_transfer_timeouts_end_before_vllms_step_timeout(outcomes):
    stock, patched = _timeouts(outcomes, "hpu", {})
    assert stock is None
    assert patched == {"rpc": 300, "VLLM_HPU_PP_TIMEOUT_S": 240.0, "VLLM_PP_TRANSFER_TIMEOUT_S": 240.0}


def test_raising_vllms_step_timeout_raises_the_transfer_timeouts_with_it(outcomes):
    _, patched = _timeouts(outcomes, "hpu", {"VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": "750"})
    assert patched == {"rpc": 750, "VLLM_HPU_PP_TIMEOUT_S": 600.0, "VLLM_PP_TRANSFER_TIMEOUT_S": 600.0}


def test_an_explicit_transfer_timeout_vllm_would_hide_is_refused_naming_what_to_raise(outcomes):
    stock, patched = _timeouts(outcomes, "hpu", {"VLLM_HPU_PP_TIMEOUT_S": "600"})
    assert stock is None
    assert patched == ("NotImplementedError: VLLM_HPU_PP_TIMEOUT_S=600 is not below 80% of "
                       "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS=300: vLLM's step timeout would end the run before "
                       "the transfer's error; raise VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS to 750 or more, or lower "
                       "VLLM_HPU_PP_TIMEOUT_S")
    _, cpu = _timeouts(outcomes, "cpu", {"VLLM_PP_TRANSFER_TIMEOUT_S": "600"})
    assert cpu.startswith("NotImplementedError: VLLM_PP_TRANSFER_TIMEOUT_S=600 is not below 80% of ")


def test_an_explicit_transfer_timeout_with_room_is_kept(outcomes):
    _, patched = _timeouts(outcomes, "hpu", {"VLLM_HPU_PP_TIMEOUT_S": "600",
                                             "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": "750"})
    assert patched["VLLM_HPU_PP_TIMEOUT_S"] == 600.0
    _, two_nodes = _timeouts(outcomes, "cpu", {"VLLM_PP_TRANSFER_TIMEOUT_S": "20",
                                               "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": "45"})
    assert two_nodes == {"rpc": 45, "VLLM_HPU_PP_TIMEOUT_S": 36.0, "VLLM_PP_TRANSFER_TIMEOUT_S": 20.0}
