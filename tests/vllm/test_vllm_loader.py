"""The loader target on vLLM's real safetensors iterator (0.26.0 and 0.30.0): at size 2 each stage reads
and yields only its own decoder layers (partition from VLLM_PP_LAYER_PARTITION) plus the shared tensors,
bit for bit, and no stage reads the MTP-style layer past the decoder (no speculative config); at size 1
nothing changes."""
from __future__ import annotations

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
