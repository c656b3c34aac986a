# SPDX-License-Identifier: Apache-2.0
"""Async scheduling on vLLM's CPU platform.

``CpuPlatform.check_and_update_config`` set ``async_scheduling = False`` on every CPU
host, after vLLM had resolved it, so ``--async-scheduling`` was dropped without a word
and nothing ran the async path on a CPU. The runner's async copies to the host then ask
``torch.cuda.current_stream()``, which a CPU build of torch refuses; vLLM's own
``current_stream()`` gives the CPU its stream placeholder. The fix is in the spec's
edits alone: this package holds nothing the patched files call.
"""
