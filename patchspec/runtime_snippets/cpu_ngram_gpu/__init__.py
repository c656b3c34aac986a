# SPDX-License-Identifier: Apache-2.0
"""vLLM's CPU runner with the tensor n-gram drafter (``method: ngram_gpu``).

``ngram_gpu`` is the n-gram method vLLM lets run under async scheduling (0.30 refuses
the plain ``ngram`` there), and its proposer is torch code that runs on any device.
Three CUDA-only calls stop it on a CPU host before the first draft: the runner pins
two staging buffers with ``pin_memory=True`` (vLLM's ``PIN_MEMORY`` says whether
pinning is available, as the runner's other buffers use it), the proposer pins each
new request's token row, and its copy of the valid draft counts asks
``torch.cuda.current_stream()`` where vLLM's own ``current_stream()`` gives the CPU
its stream placeholder (the runner's own async copies: ``cpu-async-scheduling``).
Hooks import vLLM lazily: they are imported while vLLM's own modules are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["pinned"]


def pinned(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` in pinned memory where the platform has it, else as it is (a CPU
    host's copy to the CPU "device" needs no staging)."""
    from vllm.utils.torch_utils import PIN_MEMORY

    return tensor.pin_memory() if PIN_MEMORY else tensor
