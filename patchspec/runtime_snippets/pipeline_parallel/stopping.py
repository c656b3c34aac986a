# SPDX-License-Identifier: Apache-2.0
"""Ending a worker from a watching thread, when its main thread may be blocked in a
collective or a store wait that no Python exception can interrupt."""

from __future__ import annotations

import os
import signal
import threading

from ._logging import get_logger

__all__ = ["stop_worker"]

logger = get_logger(__name__)

# After SIGTERM, how long the worker may take to exit before it is ended.
_EXIT_GRACE_S = 10.0


def stop_worker(error: Exception) -> None:
    """Log ``error`` and end this process: SIGTERM first (vLLM's worker exits cleanly on
    it), then for good."""
    logger.error("%s: %s; stopping this worker", type(error).__name__, error)
    threading.Timer(_EXIT_GRACE_S, os._exit, args=(1,)).start()
    os.kill(os.getpid(), signal.SIGTERM)
