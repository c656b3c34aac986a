# SPDX-License-Identifier: Apache-2.0
"""vLLM's CPU runner without Triton: the speculative decoding C++ kernels.

vLLM 0.30 wraps the rejection sampler's four Triton kernels, and the EAGLE step's
slot-mapping kernel (the draft-model and EAGLE proposers' every step), in
dispatchers (``triton_kernel_dispatcher_with_warmup``) that capture the kernel
object when their module is imported. ``CPUModelRunner._postprocess_triton`` then
rebinds the modules' kernel names to the C++ fallbacks of ``cpu_triton_utils`` but
leaves those dispatchers' ``kernel`` on the placeholder ``triton.jit`` (it does set
it for the other EAGLE helpers), so the first speculative step fails with "Cannot
inspect kernel parameters for function". The dispatchers bind their inputs to the
kernel's parameters by name: the EAGLE step's fallback names its stride ``stride``
where the dispatcher passes ``block_table_stride``, so it gets one under that name.
vLLM 0.31 registers the fallbacks with the dispatchers itself
(``CpuPlatform.register_triton_kernel_overrides``).
Hooks import vLLM lazily: they are imported while vLLM's own modules are.
"""

from __future__ import annotations

import torch

__all__ = ["bind_speculative_kernels"]

# dispatcher in vllm.v1.sample.rejection_sampler -> its kernel in cpu_triton_utils
REJECTION_DISPATCHERS = {
    "_rejection_greedy_sample": "rejection_greedy_sample_kernel",
    "_rejection_random_sample": "rejection_random_sample_kernel",
    "_expand": "expand_kernel",
    "_sample_recovered_tokens": "sample_recovered_tokens_kernel",
}


def bind_speculative_kernels() -> None:
    """After the runner rebinds the modules' kernel names: give each dispatcher the
    C++ kernel the name now holds."""
    import vllm.utils.cpu_triton_utils as cpu_tl
    import vllm.v1.sample.rejection_sampler as rejection_sampler
    import vllm.v1.spec_decode.utils as spec_decode_utils

    for dispatcher, kernel in REJECTION_DISPATCHERS.items():
        getattr(rejection_sampler, dispatcher).kernel = getattr(cpu_tl, kernel)
    spec_decode_utils._eagle_step_slot_mapping_metadata.kernel = cpu_tl._FuncWrapper(
        _eagle_step_slot_mapping_metadata
    )


def _eagle_step_slot_mapping_metadata(
    positions: torch.Tensor,
    block_table: torch.Tensor,
    block_table_stride: int,
    seq_lens: torch.Tensor,
    out_clamped_positions: torch.Tensor,
    out_slot_mapping: torch.Tensor,
    block_size: int,
    max_model_len: int,
    n_blocks_per_req: int,
    PAD_ID: int,
    batch_size: int,
) -> None:
    """The EAGLE step's C++ fallback under the parameter names its dispatcher binds."""
    import vllm.utils.cpu_triton_utils as cpu_tl

    cpu_tl._eagle_step_slot_mapping_metadata_kernel_impl(
        positions,
        block_table,
        block_table_stride,
        seq_lens,
        out_clamped_positions,
        out_slot_mapping,
        block_size,
        max_model_len,
        n_blocks_per_req,
        PAD_ID,
        batch_size,
    )
