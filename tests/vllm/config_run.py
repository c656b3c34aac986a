"""Builds ``VllmConfig``s as ``vllm serve`` does at start-up; prints one JSON document.

``python config_run.py CASES_JSON`` with a release root first on ``sys.path``; a case is
``{"model": dir, "pp": size, "partition": "3,5" or null}``. For each case the output holds null when the
configuration is accepted, else the exception's type and message.
"""
from __future__ import annotations

import json
import os
import sys


def build(model: str, pp: int, partition: str | None) -> str | None:
    from vllm.config import DeviceConfig, ModelConfig, ParallelConfig, VllmConfig

    os.environ.pop("VLLM_PP_LAYER_PARTITION", None)
    if partition is not None:
        os.environ["VLLM_PP_LAYER_PARTITION"] = partition  # vllm.envs reads it when asked
    try:
        VllmConfig(model_config=ModelConfig(model=model, skip_tokenizer_init=True),
                   device_config=DeviceConfig(device="cpu"),
                   parallel_config=ParallelConfig(pipeline_parallel_size=pp))
    except Exception as e:  # noqa: BLE001 - the test compares what start-up says
        return f"{type(e).__name__}: {e}"
    return None


def main() -> None:
    print(json.dumps([build(c["model"], c["pp"], c["partition"]) for c in json.loads(sys.argv[1])]))


if __name__ == "__main__":
    main()
