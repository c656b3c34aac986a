"""The start-up guard: vLLM's real ``VllmConfig`` (0.26.0 and 0.30.0) refuses, at size 2, a partition whose
second stage starts on a DeepSeek sparse-attention layer that reuses an earlier layer's indexer, and
names a partition it then accepts."""
from __future__ import annotations

import json

import pytest
from transformers import PretrainedConfig

from patchspec.runtime_snippets.pipeline_parallel.partition import RULES, valid_partition
from vllm_runs import RELEASES, result, start

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
