"""The start-up guard: vLLM's real ``VllmConfig`` (0.26.0 and 0.30.0) refuses, at size 2, a partition whose
second stage starts on a DeepSeek sparse-attention layer that reuses an earlier layer's indexer, and
names a partition it then accepts."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from transformers import PretrainedConfig
from vllm_runs import RELEASES, result, start

from patchspec.runtime_snippets.pipeline_parallel.partition import RULES, refuse_split_shared_state, valid_partition

# Eight layers, IndexCache every 2nd layer after an offset of 2: layers 2, 4, 6 reuse the indexer.
DSA = {"architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32", "hidden_size": 64,
       "intermediate_size": 128, "moe_intermediate_size": 32, "num_attention_heads": 4,
       "num_key_value_heads": 4, "num_hidden_layers": 8, "vocab_size": 1000, "max_position_embeddings": 512,
       "torch_dtype": "bfloat16", "rms_norm_eps": 1e-6, "kv_lora_rank": 16, "q_lora_rank": 32,
       "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "n_routed_experts": 4,
       "n_shared_experts": 1, "num_experts_per_tok": 2, "first_k_dense_replace": 1, "n_group": 1,
       "topk_group": 1, "index_topk": 64, "index_head_dim": 32, "index_n_heads": 2, "index_topk_freq": 2,
       "index_skip_topk_offset": 2}
REFUSAL = ("NotImplementedError: pipeline stage 1 would start on layer 4 of deepseek_v32, which reuses "
           "state (index_topk) from an earlier layer: use VLLM_PP_LAYER_PARTITION=3,5")
CASES = [(2, None), (2, "3,5"), (1, None), (2, "4,4")]


@pytest.fixture(scope="module", params=RELEASES)
def outcomes(request, vllm_roots, tmp_path_factory):
    """``(stock, patched)``: what each release root says about every case in ``CASES``."""
    model = tmp_path_factory.mktemp("dsa")
    (model / "config.json").write_text(json.dumps(DSA))
    cases = json.dumps([{"model": str(model), "pp": pp, "partition": part} for pp, part in CASES])
    procs = [start(root, "config_run.py", cases) for root in vllm_roots(request.param)]
    return tuple(result(p) for p in procs)


def test_stock_accepts_a_stage_starting_on_a_shared_indexer_layer(outcomes):
    stock, _ = outcomes
    assert stock == [None, None, None, None]


def test_patched_refuses_it_with_one_line_naming_the_layer_and_a_partition(outcomes):
    _, patched = outcomes
    assert patched[0] == REFUSAL
    assert patched[3] == REFUSAL  # 4,4 puts stage 1 on layer 4 as well


def test_patched_accepts_the_partition_it_names_and_size_1(outcomes):
    _, patched = outcomes
    assert patched[1] is None
    assert patched[2] is None


def test_rules_read_the_configs_as_vllm_does():
    freq = PretrainedConfig(index_topk=64, index_topk_freq=2, index_skip_topk_offset=2)
    assert [RULES["index_topk"](freq, layer) for layer in range(6)] == [False, False, True, False, True, False]
    pattern = PretrainedConfig(index_topk=64, index_topk_pattern="FFSSF")
    assert [RULES["index_topk"](pattern, layer) for layer in range(6)] == [False, False, True, True, False, False]
    assert not any(RULES["index_topk"](PretrainedConfig(), layer) for layer in range(6))
    types = PretrainedConfig(indexer_types=["full", "shared", "full", "shared"])
    assert [RULES["indexer_types"](types, layer) for layer in range(4)] == [False, True, False, True]


@pytest.mark.parametrize(("layers", "pp", "shared", "expected"), [
    (8, 2, {2, 4, 6}, [3, 5]),
    (8, 2, set(), [4, 4]),
    (61, 4, {n for n in range(61) if n % 4 != 1}, [13, 16, 16, 16]),
    (4, 3, {2}, [1, 2, 1]),
    (3, 3, {1}, None),
])
def test_valid_partition_is_as_even_as_the_shared_layers_allow(layers, pp, shared, expected):
    got = valid_partition(layers, pp, shared.__contains__)
    assert got == expected
    if got is not None:
        starts = [sum(got[:k]) for k in range(1, pp)]
        assert sum(got) == layers and min(got) >= 1 and not shared.intersection(starts)


# GLM-5.3's layout as the design splits it: 78 decoder layers, IndexCache every 4th layer after the default
# offset of 2; the design runs layers 0-41 on node 0 and 42-77 on node 1.
GLM = PretrainedConfig(model_type="glm_moe_dsa", num_hidden_layers=78, index_topk=2048, index_topk_freq=4)


def test_glm_layout_marks_layer_42_shared_and_the_suggestion_starts_on_a_full_indexer():
    """vLLM's formula (``deepseek_v2.py``: ``max(layer - offset + 1, 0) % freq != 0``) on GLM-5.3's layout: the
    design's 42/36 split starts stage 1 on a shared layer where the indexer runs; the partition the refusal
    names starts it on layer 37, which runs a full indexer."""
    shared = [layer for layer in range(78) if RULES["index_topk"](GLM, layer)]
    assert 42 in shared and 41 not in shared and 37 not in shared
    assert len(shared) == 78 - len(range(1, 78, 4)) - 1
    assert valid_partition(78, 2, lambda layer: RULES["index_topk"](GLM, layer)) == [37, 41]


def test_on_hpu_the_design_split_is_served():
    """vllm-gaudi runs DSA layers as dense MLA and never calls the indexer: nothing is shared, so the
    design's 42/36 split of GLM-5.3 is served on HPU (where the indexer runs, the release tests above show
    the refusal)."""
    model = SimpleNamespace(hf_text_config=GLM, is_multimodal_model=False)
    parallel = SimpleNamespace(pipeline_parallel_size=2)
    assert refuse_split_shared_state(model, parallel, {"glm_moe_dsa": "index_topk"}, device_type="hpu") is None
