"""With ``PATCHSPEC_FAIL_FORWARD=N`` (on node 0 only), the N-th step with scheduled tokens of pipeline
stage 0's model runner raises once, before its forward: a stand-in for an out-of-memory in a long prefill.

Put on ``PYTHONPATH`` with tests/e2e/hooks (``e2e_harness.pythonpath``); it wraps vLLM's
``GPUModelRunner.execute_model`` (the CPU runner's too) when ``vllm.v1.worker.gpu_model_runner`` is first
imported, in whichever process imports it.
"""
import os

from engine_hook import after_import

TARGET = "vllm.v1.worker.gpu_model_runner"
MESSAGE = "injected failure of pipeline stage 0's forward (PATCHSPEC_FAIL_FORWARD)"


def _wrap(cls, fail_at: int) -> None:
    original = cls.execute_model
    seen = [0]

    def execute_model(self, scheduler_output, *args, **kwargs):
        from vllm.distributed.parallel_state import get_pp_group

        if scheduler_output.total_num_scheduled_tokens and get_pp_group().is_first_rank:
            seen[0] += 1
            if seen[0] == fail_at:
                raise RuntimeError(MESSAGE)
        return original(self, scheduler_output, *args, **kwargs)

    cls.execute_model = execute_model


if os.environ.get("PATCHSPEC_FAIL_FORWARD"):
    fail_at = int(os.environ["PATCHSPEC_FAIL_FORWARD"])
    after_import(TARGET, lambda module: _wrap(module.GPUModelRunner, fail_at))
