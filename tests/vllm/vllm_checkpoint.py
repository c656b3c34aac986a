"""A small Llama-shaped safetensors checkpoint for the loader tests and bench/loader.py.

Decoder layers are spread over several shards, and the embedding is tied (no ``lm_head.weight``), so
the last stage needs a tensor that is not one of its layers. Tensor contents are random; what the tests
compare is :func:`digest`, which the loader run computes the same way on what vLLM yields.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import torch
from safetensors.torch import save_file

# The loader tests' checkpoint: six decoder layers split 4,2 (not the default 3,3: the partition variable
# must be honoured), and the tensors every stage loads whatever its layers.
LAYERS = 6
PARTITION = (4, 2)
SHARED = {"model.embed_tokens.weight", "model.norm.weight"}


def layer_of(name: str) -> int | None:
    """The decoder layer a checkpoint tensor belongs to, or None for a shared tensor."""
    found = re.match(r"model\.layers\.(\d+)\.", name)
    return int(found.group(1)) if found else None


LAYER_SHAPES = {
    "input_layernorm.weight": ("h",),
    "self_attn.q_proj.weight": ("h", "h"),
    "self_attn.k_proj.weight": ("h", "h"),
    "self_attn.v_proj.weight": ("h", "h"),
    "self_attn.o_proj.weight": ("h", "h"),
    "post_attention_layernorm.weight": ("h",),
    "mlp.gate_proj.weight": ("i", "h"),
    "mlp.up_proj.weight": ("i", "h"),
    "mlp.down_proj.weight": ("h", "i"),
}
VOCAB = 1024


def digest(tensor: torch.Tensor) -> str:
    """Dtype, shape and bytes: equal digests mean bit-identical tensors."""
    data = tensor.detach().contiguous().cpu().view(torch.uint8).numpy().tobytes()
    return hashlib.sha256(f"{tensor.dtype}{tuple(tensor.shape)}".encode() + data).hexdigest()[:24]


def write(out: Path, layers: int, hidden: int, shards: int, seed: int = 0, extra_layers: int = 0,
          pt: bool = False) -> dict[str, dict]:
    """Write ``config.json`` and ``model-0000k-of-0000n.safetensors`` (and with ``pt`` the same shards as
    ``pytorch_model-0000k-of-0000n.bin``); return ``{name: {digest, bytes}}``.
    ``extra_layers`` more layers follow the decoder's ``layers`` in the checkpoint but not in the config,
    as the MTP layers of DeepSeek- and GLM-class checkpoints do."""
    out.mkdir(parents=True, exist_ok=True)
    sizes = {"h": hidden, "i": 4 * hidden}
    gen = torch.Generator().manual_seed(seed)
    tensors = {"model.embed_tokens.weight": torch.randn(VOCAB, hidden, generator=gen),
               "model.norm.weight": torch.randn(hidden, generator=gen)}
    for layer in range(layers + extra_layers):
        for name, shape in LAYER_SHAPES.items():
            dims = [sizes[d] for d in shape]
            tensors[f"model.layers.{layer}.{name}"] = torch.randn(*dims, generator=gen)
    names = list(tensors)
    per_shard = -(-len(names) // shards)  # consecutive tensors per shard, as checkpoints are saved
    for k in range(shards):
        part = {n: tensors[n] for n in names[k * per_shard:(k + 1) * per_shard]}
        save_file(part, str(out / f"model-{k + 1:05d}-of-{shards:05d}.safetensors"))
        if pt:
            torch.save(part, str(out / f"pytorch_model-{k + 1:05d}-of-{shards:05d}.bin"))
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden,
              "intermediate_size": 4 * hidden, "num_attention_heads": 4, "num_key_value_heads": 4,
              "num_hidden_layers": layers, "vocab_size": VOCAB, "max_position_embeddings": 256,
              "torch_dtype": "float32", "rms_norm_eps": 1e-6, "tie_word_embeddings": True}
    (out / "config.json").write_text(json.dumps(config))
    return {n: {"digest": digest(t), "bytes": t.numel() * t.element_size()} for n, t in tensors.items()}
