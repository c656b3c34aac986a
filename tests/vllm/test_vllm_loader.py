"""The loader target on vLLM's real safetensors iterator (0.26.0 and 0.30.0): at size 2 each stage reads
and yields only its own decoder layers (partition from VLLM_PP_LAYER_PARTITION) plus the shared tensors,
bit for bit, and no stage reads the MTP-style layer past the decoder (no speculative config); at size 1
nothing changes. With MTP drafting the last stage reads the MTP layer too, the other stage still not."""
from __future__ import annotations

import json

import pytest
from vllm_checkpoint import LAYERS, PARTITION, SHARED, layer_of, write
from vllm_runs import RELEASES, result, start_stages


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    out = tmp_path_factory.mktemp("checkpoint")
    return out, write(out, layers=LAYERS, hidden=128, shards=3, extra_layers=1)


@pytest.fixture(scope="module", params=RELEASES)
def runs(request, vllm_roots, checkpoint, tmp_path_factory):
    """Per release: ``{"stages": [rank 0, rank 1] patched at size 2, "stock": size 1, "patched": size 1}``."""
    pristine, patched = vllm_roots(request.param)
    env = {"VLLM_PP_LAYER_PARTITION": ",".join(map(str, PARTITION))}
    reads = tmp_path_factory.mktemp("reads")
    stages = start_stages(patched, checkpoint[0], 2, reads / "stages", env)
    singles = [start_stages(root, checkpoint[0], 1, reads / name, env)[0]
               for name, root in (("stock", pristine), ("patched", patched))]
    return {"stages": [result(p) for p in stages], "stock": result(singles[0]), "patched": result(singles[1])}


def owned(rank: int) -> set[int]:
    start = sum(PARTITION[:rank])
    return set(range(start, start + PARTITION[rank]))


@pytest.mark.parametrize("rank", [0, 1])
def test_each_stage_yields_its_layers_and_the_shared_tensors_bit_identical(runs, checkpoint, rank):
    expected = {n: v["digest"] for n, v in checkpoint[1].items() if n in SHARED or layer_of(n) in owned(rank)}
    assert runs["stages"][rank]["tensors"] == expected


@pytest.mark.parametrize("rank", [0, 1])
def test_each_stage_reads_only_its_share(runs, checkpoint, rank):
    sizes = {n: v["bytes"] for n, v in checkpoint[1].items()}
    got = runs["stages"][rank]
    assert sorted(got["read"]) == sorted(got["tensors"])
    share = sum(sizes[n] for n in got["read"])
    layer_bytes = sum(b for n, b in sizes.items() if layer_of(n) is not None and layer_of(n) < LAYERS)
    shared_bytes = sum(sizes[n] for n in SHARED)
    assert share == shared_bytes + layer_bytes * PARTITION[rank] // LAYERS
    assert share < sum(sizes.values())


def test_size_1_identical_to_unpatched(runs, checkpoint):
    everything = {n: v["digest"] for n, v in checkpoint[1].items()}
    assert runs["stock"]["tensors"] == everything
    assert list(runs["patched"]["tensors"].items()) == list(runs["stock"]["tensors"].items())
    assert sorted(runs["patched"]["read"]) == sorted(runs["stock"]["read"]) == sorted(everything)


def test_no_stage_reads_the_layer_past_the_decoder(runs):
    """Stock reads it on every stage and the model drops it; without a speculative config no stage needs it."""
    assert any(layer_of(n) == LAYERS for n in runs["stock"]["read"])
    for stage in runs["stages"]:
        assert all(layer_of(n) != LAYERS for n in stage["read"])


# MTP drafting (DeepSeek-V3 shape: one MTP layer numbered past the decoder, num_nextn_predict_layers 1): the
# last stage drafts, so it reads the MTP layer beside its own; the other stage reads neither.
MTP = {"method": "mtp", "num_speculative_tokens": 1}
DEEPSEEK = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 128,
            "intermediate_size": 512, "moe_intermediate_size": 64, "num_attention_heads": 4,
            "num_key_value_heads": 4, "num_hidden_layers": LAYERS, "num_nextn_predict_layers": 1,
            "n_routed_experts": 4, "n_shared_experts": 1, "num_experts_per_tok": 2, "first_k_dense_replace": 1,
            "kv_lora_rank": 16, "q_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8,
            "v_head_dim": 16, "vocab_size": 1024, "max_position_embeddings": 256, "torch_dtype": "float32",
            "rms_norm_eps": 1e-6, "n_group": 1, "topk_group": 1, "topk_method": "noaux_tc",
            "scoring_func": "sigmoid"}


@pytest.fixture(scope="module", params=RELEASES)
def mtp_runs(request, vllm_roots, tmp_path_factory):
    """Per release, the two stages of the patched loader at size 2 with an MTP speculative config."""
    out = tmp_path_factory.mktemp("mtp-checkpoint")
    tensors = write(out, layers=LAYERS, hidden=128, shards=3, extra_layers=1)
    (out / "config.json").write_text(json.dumps(DEEPSEEK))
    env = {"VLLM_PP_LAYER_PARTITION": ",".join(map(str, PARTITION)), "LOADER_RUN_SPECULATIVE": json.dumps(MTP)}
    stages = start_stages(vllm_roots(request.param)[1], out, 2, tmp_path_factory.mktemp("reads"), env)
    return tensors, [result(p) for p in stages]


@pytest.mark.parametrize("rank", [0, 1])
def test_with_mtp_drafting_only_the_last_stage_reads_the_mtp_layer(mtp_runs, rank):
    tensors, stages = mtp_runs
    mtp = {LAYERS} if rank == 1 else set()
    expected = {n: v["digest"] for n, v in tensors.items() if n in SHARED or layer_of(n) in owned(rank) | mtp}
    assert stages[rank]["tensors"] == expected
    assert sorted(stages[rank]["read"]) == sorted(expected)
