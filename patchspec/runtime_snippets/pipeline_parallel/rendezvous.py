# SPDX-License-Identifier: Apache-2.0
"""A start-up refusal reaches every rank, whichever stage came up first.

torch's rendezvous waits ``timeout`` (30 minutes by default) for every rank: a stage
that refuses to start (a partition, a setting, the handshake) and exits leaves its peer
waiting on a store nobody serves, or on a world that never completes. At pipeline size
> 1 the worker's start-up (``init_worker_distributed_environment`` and the handshake
after it, see ``handshake.py``) runs under :func:`refusals_shared`:

- A thread connects to the rendezvous store (the ``tcp://`` or ``env://`` address every
  rank is given; global rank 0 serves it) and watches one key. When another rank has
  written its refusal there, this worker logs it as :class:`PipelineHandshakeError`
  naming the refusing rank and its error, and stops. When start-up has not completed
  within ``VLLM_PP_START_UP_TIMEOUT_S`` (600 s by default), it stops
  with the same error naming what it waited for.
- A rank whose start-up raises writes its error to that key before it re-raises. Rank 0
  serves the store (its own, or one it starts for this when it refused before the
  rendezvous) until every rank has read the refusal or the start-up timeout has
  passed, so a stage that starts after the refusing one has gone still hears why.
- Settings that the start-up itself could hang on (``VLLM_HPU_PP_HCCL_WORLD_CHECK``:
  one node all-reducing over HCCL, the other over gloo) are compared with rank 0's
  through the store as soon as it is up; a difference is such a refusal.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import urlparse

import torch.distributed as dist

from ._logging import get_logger
from .errors import PipelineHandshakeError
from .stopping import stop_worker

__all__ = ["refusals_shared", "store_address"]

logger = get_logger(__name__)

REFUSED_KEY = "patchspec/pp/refused"
EARLY_KEY = "patchspec/pp/early"
HEARD_KEY = "patchspec/pp/refusal_heard"
_POLL_S = 0.2
_CLOSE_S = 5.0  # a store call on a live store takes milliseconds


def store_address(init_method: str | None) -> tuple[str, int] | None:
    """The rendezvous store's host and port for torch's ``init_method`` (vLLM passes
    ``tcp://host:port``, or nothing for ``env://``); None for another kind."""
    if init_method is None or init_method.startswith("env://"):
        host, port = os.getenv("MASTER_ADDR"), os.getenv("MASTER_PORT")
        return (host, int(port)) if host and port else None
    url = urlparse(init_method)
    if url.scheme != "tcp" or url.hostname is None or url.port is None:
        return None
    return url.hostname, url.port


class _StartUpWatch:
    """Until ``done``: stop this worker when another rank refused, or when start-up
    outlives ``timeout_s``."""

    def __init__(
        self,
        address: tuple[str, int],
        rank: int,
        world_size: int,
        timeout_s: float,
        early: dict[str, Any],
    ):
        self.done = threading.Event()
        self._address = address
        self._rank = rank
        self._world_size = world_size
        self._early = json.loads(json.dumps(early, sort_keys=True, default=str))
        self._timeout_s = timeout_s
        self._deadline = time.monotonic() + timeout_s
        self._thread = threading.Thread(
            target=self._run, daemon=True, name="PipelineStartUpWatch"
        )
        self._thread.start()

    def close(self) -> None:
        """Start-up ended: stop watching, and let the thread drop its store client
        before the caller goes on (a client still inside a call when the process exits
        and rank 0's store goes away aborted the process: SIGABRT after start-up)."""
        self.done.set()
        self._thread.join(_CLOSE_S)

    def _run(self) -> None:
        host, port = self._address
        _wait_for_port(self._address, self._deadline, self.done)
        try:
            store = dist.TCPStore(
                host,
                port,
                is_master=False,
                wait_for_workers=False,
                timeout=timedelta(seconds=self._timeout_s),
            )
        except RuntimeError as e:
            self._stop(f"no rendezvous store at {host}:{port}: {e}")
            return
        try:
            self._watch(store)
        except RuntimeError as e:  # rank 0's store went away
            self._stop(f"the rendezvous store at {host}:{port} went away: {e}")

    def _watch(self, store: dist.Store) -> None:
        host, port = self._address
        store.set(f"{EARLY_KEY}/{self._rank}", json.dumps(self._early))
        compared = self._rank == 0
        while not self.done.wait(_POLL_S):
            if not compared and store.check([f"{EARLY_KEY}/0"]):
                compared = True
                self._compare_early(store, json.loads(store.get(f"{EARLY_KEY}/0")))
            if store.check([REFUSED_KEY]):
                refusal = json.loads(store.get(REFUSED_KEY))
                heard = store.add(HEARD_KEY, 1)
                if self._rank == 0:  # the store goes with this process
                    _serve_until_heard(store, heard, self._world_size, self._deadline)
                self._stop(
                    f"rank {refusal['rank']} refused to start: "
                    f"{refusal['error']}: {refusal['message']}"
                )
                return
            if time.monotonic() >= self._deadline:
                self._stop(
                    f"not every rank joined at {host}:{port} (is every node's "
                    "vLLM started with the same --nnodes and master address?)"
                )
                return

    def _compare_early(self, store: dist.Store, rank0: dict[str, Any]) -> None:
        """What must match before anything can hang on it (vllm-gaudi's HCCL world
        check runs inside the rendezvous): a difference with rank 0 is refused here,
        for every rank to hear."""
        for name in sorted(self._early.keys() | rank0.keys()):
            here, there = self._early.get(name, "unset"), rank0.get(name, "unset")
            if here != there:
                message = (
                    f"pipeline start-up: rank {self._rank} and rank 0 differ: {name} "
                    f"{here} here, {there} there; give every node the same {name}"
                )
                store.compare_set(
                    REFUSED_KEY,
                    "",
                    json.dumps(
                        {
                            "rank": self._rank,
                            "error": "PipelineHandshakeError",
                            "message": message,
                        }
                    ),
                )
                return

    def _stop(self, why: str) -> None:
        if not self.done.is_set():
            stop_worker(
                PipelineHandshakeError(
                    f"pipeline start-up on rank {self._rank} ended within "
                    f"{self._timeout_s:g} s (VLLM_PP_START_UP_TIMEOUT_S): {why}"
                )
            )


def _wait_for_port(
    address: tuple[str, int], deadline: float, done: threading.Event
) -> None:
    """Until ``address`` accepts a connection: the store's own client backs off for
    seconds between tries, and a refusal should be heard as soon as rank 0 serves it."""
    while not done.is_set() and time.monotonic() < deadline:
        with (
            contextlib.suppress(OSError),
            socket.create_connection(address, timeout=_POLL_S),
        ):
            return
        done.wait(_POLL_S)


def _post(
    address: tuple[str, int],
    rank: int,
    world_size: int,
    error: Exception,
    timeout_s: float,
) -> None:
    """Write ``error`` where every rank's watch reads it; on rank 0, serve it until all
    have read it or ``timeout_s`` has passed."""
    host, port = address
    logger.error(
        "pipeline start-up refused on rank %d: %s: %s; telling the other ranks at "
        "%s:%d",
        rank,
        type(error).__name__,
        error,
        host,
        port,
    )
    timeout = timedelta(seconds=timeout_s)
    store = None
    if rank == 0 and not dist.is_initialized():
        # refused before the rendezvous: nobody serves the store yet
        with contextlib.suppress(RuntimeError):
            store = dist.TCPStore(
                host, port, is_master=True, wait_for_workers=False, timeout=timeout
            )
    if store is None:
        _wait_for_port(address, time.monotonic() + timeout_s, threading.Event())
        store = dist.TCPStore(
            host, port, is_master=False, wait_for_workers=False, timeout=timeout
        )
    refusal = json.dumps(
        {"rank": rank, "error": type(error).__name__, "message": str(error)}
    )
    store.compare_set(REFUSED_KEY, "", refusal)  # the first refusal stays
    heard = store.add(HEARD_KEY, 1)
    if rank != 0:
        return
    logger.info(
        "pipeline start-up: rank 0 serves the refusal until the other %d ranks have "
        "heard it (at most %g s)",
        world_size - 1,
        timeout_s,
    )
    _serve_until_heard(store, heard, world_size, time.monotonic() + timeout_s)


def _serve_until_heard(
    store: dist.Store, heard: int, world_size: int, deadline: float
) -> None:
    while heard < world_size and time.monotonic() < deadline:
        time.sleep(_POLL_S)
        heard = store.add(HEARD_KEY, 0)


@contextlib.contextmanager
def refusals_shared(
    init_method: str | None,
    rank: int,
    world_size: int,
    timeout_s: float,
    early: dict[str, Any] | None = None,
) -> Iterator[None]:
    """Around a worker's start-up at pipeline size > 1 (see the module docstring);
    ``early``: settings compared with rank 0's through the store, before the start-up
    can hang on them."""
    address = store_address(init_method)
    if address is None:
        yield
        return
    watch = _StartUpWatch(address, rank, world_size, timeout_s, early or {})
    try:
        yield
    except Exception as e:
        watch.close()
        try:
            _post(address, rank, world_size, e, timeout_s)
        except RuntimeError as post_error:
            logger.warning(
                "pipeline start-up: the refusal could not reach the other ranks at "
                "%s:%d: %s",
                *address,
                post_error,
            )
        raise
    finally:
        watch.close()
