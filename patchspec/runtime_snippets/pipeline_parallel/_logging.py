"""Loggers under vLLM's ``vllm`` logger, so they use its handlers and format without importing vLLM."""
import logging


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger("vllm.patchspec." + name.rsplit(".", 1)[-1])
