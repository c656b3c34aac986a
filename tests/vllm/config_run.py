"""Builds ``VllmConfig``s as ``vllm serve`` does at start-up; prints one JSON document.

``python config_run.py CASES_JSON`` with a release root first on ``sys.path``; a case is
``{"model": dir, "pp": size, "partition": "3,5" or null}``, optionally with ``"async": true/false/null``
(the ``--[no-]async-scheduling`` flag; null: not given), and optionally ``"device"`` (default ``"cpu"``),
``"runner"`` (``--runner``), ``"speculative"`` (``SpeculativeConfig`` keywords) and ``"env"`` (variables set for
this case only), ``"timeouts": true`` (then an accepted case gives the step and transfer timeouts). For each
case the output holds the exception's
type and message when the configuration is refused; when it is accepted, null, or for a case with
``"async"`` the resolved ``async_scheduling`` and the messages the pipeline-parallel hooks logged.
"""
from __future__ import annotations

import json
import logging
import os
import sys


class Messages(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def build(case: dict):
    saved = dict(os.environ)
    os.environ.pop("VLLM_PP_LAYER_PARTITION", None)
    if case["partition"] is not None:
        os.environ["VLLM_PP_LAYER_PARTITION"] = case["partition"]  # vllm.envs reads it when asked
    os.environ.update(case.get("env", {}))
    try:
        return _build(case)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _build(case: dict):
    from vllm.config import DeviceConfig, ModelConfig, ParallelConfig, SchedulerConfig, SpeculativeConfig, VllmConfig

    model = ModelConfig(model=case["model"], skip_tokenizer_init=True,
                        **({"runner": case["runner"]} if "runner" in case else {}))
    extra = {}
    parallel = ParallelConfig(pipeline_parallel_size=case["pp"])
    if "async" in case:
        extra["scheduler_config"] = SchedulerConfig(max_model_len=model.max_model_len,
                                                        is_encoder_decoder=False, async_scheduling=case["async"])
    hooks = logging.getLogger("vllm.patchspec")
    messages = Messages()
    hooks.addHandler(messages)
    hooks.setLevel(logging.DEBUG)
    try:
        if "speculative" in case:  # as EngineArgs.create_speculative_config makes it
            extra["speculative_config"] = SpeculativeConfig(target_model_config=model,
                                                            target_parallel_config=parallel, **case["speculative"])
        config = VllmConfig(model_config=model, device_config=DeviceConfig(device=case.get("device", "cpu")),
                            parallel_config=parallel, **extra)
    except Exception as e:  # noqa: BLE001 - the test compares what start-up says
        return f"{type(e).__name__}: {e}"
    finally:
        hooks.removeHandler(messages)
    if "async" in case:
        return {"async": config.scheduler_config.async_scheduling, "log": messages.messages}
    if case.get("timeouts"):
        return _timeouts()
    return None


def _timeouts() -> dict:
    """The step timeout vLLM's executor applies and the transfer timeouts the patched root's snippets
    would use, as this process's environment sets them."""
    from _patchspec_runtime.pipeline_parallel import envs
    from vllm import envs as vllm_envs
    return {"rpc": vllm_envs.VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS,
            **{name: getattr(envs, name) for name in ("VLLM_HPU_PP_TIMEOUT_S", "VLLM_PP_TRANSFER_TIMEOUT_S")}}


def main() -> None:
    print(json.dumps([build(case) for case in json.loads(sys.argv[1])]))


if __name__ == "__main__":
    main()
