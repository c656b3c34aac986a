# SPDX-License-Identifier: Apache-2.0
"""vLLM's CPU runner without Triton: the rejection sampler's C++ kernels.

vLLM 0.30 wraps the rejection sampler's four Triton kernels in dispatchers
(``triton_kernel_dispatcher_with_warmup``) that capture the kernel object when
``rejection_sampler.py`` is imported. ``CPUModelRunner._postprocess_triton`` then
rebinds the module's kernel names to the C++ fallbacks of ``cpu_triton_utils`` but
leaves the dispatchers' ``kernel`` on the placeholder ``triton.jit`` (it does set it
for the EAGLE helpers), so the first speculative step fails with "Cannot inspect
kernel parameters for function". vLLM 0.31 registers the fallbacks with the
dispatchers itself (``CpuPlatform.register_triton_kernel_overrides``).
Hooks import vLLM lazily: they are imported while vLLM's own modules are.
"""

from __future__ import annotations

__all__ = ["bind_rejection_kernels"]

# dispatcher in vllm.v1.sample.rejection_sampler -> its kernel in cpu_triton_utils
REJECTION_DISPATCHERS = {
    "_rejection_greedy_sample": "rejection_greedy_sample_kernel",
    "_rejection_random_sample": "rejection_random_sample_kernel",
    "_expand": "expand_kernel",
    "_sample_recovered_tokens": "sample_recovered_tokens_kernel",
}


def bind_rejection_kernels() -> None:
    """After the runner rebinds the module's kernel names: give each dispatcher the
    C++ kernel the name now holds."""
    import vllm.utils.cpu_triton_utils as cpu_tl
    import vllm.v1.sample.rejection_sampler as rejection_sampler

    for dispatcher, kernel in REJECTION_DISPATCHERS.items():
        getattr(rejection_sampler, dispatcher).kernel = getattr(cpu_tl, kernel)
