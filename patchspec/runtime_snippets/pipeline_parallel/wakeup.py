# SPDX-License-Identifier: Apache-2.0
"""A remote reader of vLLM's ``MessageQueue`` that wakes up when the queue is shut down.

With nodes > 1 the executor on the leader node reads the last stage's output through a
remote (zmq) queue, in one ``poll`` of up to ``VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS`` (300
s). When a worker on the leader node dies, vLLM's worker monitor shuts the queues down,
but ``shutdown`` only wakes local readers, so the engine keeps waiting for the full
timeout before it fails its requests. Wrapped, ``dequeue`` of a remote reader polls in
slices and raises once the queue is shut down: the engine fails as soon as its executor
does. Local readers are untouched.
"""

from __future__ import annotations

import functools
import time

__all__ = ["woken_on_shutdown"]

_SLICE_MS = 200


def woken_on_shutdown(fn):
    """For ``wrap`` on ``MessageQueue.dequeue``."""

    @functools.wraps(fn)
    def dequeue(self, timeout: float | None = None, indefinite: bool = False):
        if self._is_local_reader or not self._is_remote_reader:
            return fn(self, timeout, indefinite)
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.remote_socket.poll(timeout=_SLICE_MS):
            if self.shutting_down:
                raise RuntimeError(
                    "message queue shut down while waiting for a remote worker's "
                    "message "
                    "(the executor is shutting down: a worker died; see the log above)"
                )
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError
        return fn(
            self,
            None if deadline is None else max(0.0, deadline - time.monotonic()),
            indefinite,
        )

    return dequeue
