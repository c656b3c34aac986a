# SPDX-License-Identifier: Apache-2.0
"""Hooks of the requests-audit example spec: a record of what a patched requests sends.

Imported by requests' own modules while they load: it imports nothing from requests.
"""
from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["LENGTHS", "SENT", "elapsed_ms", "note_length", "traced_send"]

SENT: list[dict[str, Any]] = []
LENGTHS: list[tuple[str, int]] = []


def traced_send(send: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps ``Session.send``: each request sent is recorded with its status and duration."""

    @functools.wraps(send)
    def wrapper(self: Any, request: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        response = send(self, request, **kwargs)
        SENT.append({"method": request.method, "url": request.url, "status": response.status_code,
                     "seconds": time.perf_counter() - start})
        logger.debug("%s %s -> %s", request.method, request.url, response.status_code)
        return response

    return wrapper


def note_length(request: Any, length: int) -> None:
    """Called where ``PreparedRequest.prepare_content_length`` sets the header from the body's length."""
    LENGTHS.append((request.url, length))


def elapsed_ms(self: Any) -> float:
    """``Response.elapsed_ms()``: the time between sending and the response's headers, in milliseconds."""
    return self.elapsed.total_seconds() * 1000.0
