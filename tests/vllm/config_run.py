"""Builds ``VllmConfig``s as ``vllm serve`` does at start-up; prints one JSON document.

``python config_run.py CASES_JSON`` with a release root first on ``sys.path``; a case is
``{"model": dir, "pp": size, "partition": "3,5" or null}``, optionally with ``"async": true/false/null``
(the ``--[no-]async-scheduling`` flag; null: not given). For each case the output holds the exception's
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
    from vllm.config import DeviceConfig, ModelConfig, ParallelConfig, SchedulerConfig, VllmConfig

    os.environ.pop("VLLM_PP_LAYER_PARTITION", None)
    if case["partition"] is not None:
        os.environ["VLLM_PP_LAYER_PARTITION"] = case["partition"]  # vllm.envs reads it when asked
    model = ModelConfig(model=case["model"], skip_tokenizer_init=True)
    scheduler = {}
    if "async" in case:
        scheduler["scheduler_config"] = SchedulerConfig(max_model_len=model.max_model_len,
                                                        is_encoder_decoder=False, async_scheduling=case["async"])
    hooks = logging.getLogger("vllm.patchspec")
    messages = Messages()
    hooks.addHandler(messages)
    hooks.setLevel(logging.DEBUG)
    try:
        config = VllmConfig(model_config=model, device_config=DeviceConfig(device="cpu"),
                            parallel_config=ParallelConfig(pipeline_parallel_size=case["pp"]), **scheduler)
    except Exception as e:  # noqa: BLE001 - the test compares what start-up says
        return f"{type(e).__name__}: {e}"
    finally:
        hooks.removeHandler(messages)
    if "async" in case:
        return {"async": config.scheduler_config.async_scheduling, "log": messages.messages}
    return None


def main() -> None:
    print(json.dumps([build(case) for case in json.loads(sys.argv[1])]))


if __name__ == "__main__":
    main()
