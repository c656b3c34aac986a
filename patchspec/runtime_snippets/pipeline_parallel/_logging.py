# SPDX-License-Identifier: Apache-2.0
"""Loggers under vLLM's ``vllm`` logger, so they use its handlers and format without
importing vLLM."""

import logging

__all__ = ["get_logger"]


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger("vllm.patchspec." + name.rsplit(".", 1)[-1])
