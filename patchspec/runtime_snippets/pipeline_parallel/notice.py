# SPDX-License-Identifier: Apache-2.0
"""Any rank's failure ends every rank of every stage, named.

vLLM's executor hears only from its output rank (the first rank of the last stage):
another rank's exception is logged and dropped, and its peers are left inside the
failed step, in a transfer receive or a tensor-parallel collective that nobody
completes, until ``VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS`` ends the run with an unnamed
"RPC call timed out". So, at pipeline size > 1:

- A rank whose step fails tells every other rank of the world (:meth:`announce`), on
  the world's gloo group and a tag of its own, from a thread (the failure is raised at
  once). Every rank listens with a receive from any source, posted again after each
  notice, from the moment its stage is built.
- A rank that hears it keeps it (:attr:`FailureNotice.error`) and interrupts itself:
  each of its gloo groups the step may wait in (the transfer's, the tensor-parallel
  ones) is broken (a timed-out operation ends a gloo context, and every operation
  pending on it fails at once), and the transfer and :func:`in_step` raise the heard
  error in place of gloo's. On the output rank that is the error vLLM reports. A
  break closes the connections of the broken groups, so a rank whose peer broke one
  may see it close before the same notice reaches it: a closed connection waits for
  the notice a moment (:meth:`FailureNotice.named`) before it is taken for the cause.
- No step starts after a failure (:meth:`refuse`): a failed or told rank never enters
  the next step's collectives.
- ``VLLM_PP_FAILURE_GRACE_S`` after the failure every rank that has not been shut
  down by then stops, logging the error: one still inside its step (in a device
  collective no Python can interrupt: HCCL on Gaudi, the CPU's shared-memory
  all-reduce) and an idle one alike. A stage cannot serve without the others, and on a
  node without the engine (``--headless``) nothing else would end its workers: vLLM's
  engine shuts down only its own node's.
- Each stage watches its neighbours' connections (:class:`StageWatch`): the next
  stage's on a stage that sends, the previous stage's on one that receives, so a stage
  whose neighbour died stops even while idle between steps.
"""

from __future__ import annotations

import contextlib
import json
import threading
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from . import envs
from ._logging import get_logger
from .errors import (
    PipelineAbortError,
    PipelineDesyncError,
    PipelineHandshakeError,
    PipelinePeerError,
    PipelineTransferError,
)
from .stopping import stop_worker

__all__ = ["FailureNotice", "StageWatch", "breakable", "failure_notice"]

logger = get_logger(__name__)

NOTICE_TAG = 0x5053
_BREAK_TAG = 0x5054  # never sent on: a receive on it only times out
NOTICE_BYTES = 1024  # the notice's JSON, padded; a longer reason is cut
_LISTEN_FOREVER = timedelta(days=30)
_BREAK_AFTER = timedelta(milliseconds=1)
# Never sent on: a receive posted on it ends only when the peer's connection does.
_WATCH_TAG = 0x5051
_ANNOUNCE_BEFORE_STOP_S = 1.0
# a closed connection waits this long for the notice that may explain it
_NOTICE_AFTER_CLOSE_S = 2.0
# errors a notice keeps the class of; any other arrives as PipelineAbortError
_NAMED = {
    cls.__name__: cls
    for cls in (
        PipelineAbortError,
        PipelineDesyncError,
        PipelineHandshakeError,
        PipelinePeerError,
    )
}

_NOTICE: FailureNotice | None = None


def breakable(group: Any) -> list[tuple[dist.ProcessGroup, int]]:
    """A vLLM ``GroupCoordinator``'s (or a torch group's) gloo groups a step may wait
    in, each with another member to time a receive out from; none for a group of one."""
    if group is None:
        return []
    groups = (
        [group.cpu_group, group.device_group]
        if hasattr(group, "cpu_group")
        else [group]
    )
    out = []
    for g in dict.fromkeys(groups):
        size, me = dist.get_world_size(g), dist.get_rank(g)
        if size > 1 and dist.get_backend(g) == "gloo":
            out.append((g, (me + 1) % size))
    return out


def closed_connection(error: BaseException) -> bool:
    """``error`` is gloo's for a peer's connection that closed or broke (not a timeout,
    not an error of the step's own code): a rank breaking its groups on a notice causes
    it, so the notice that explains it is on its way."""
    text = str(error)
    return type(error) is RuntimeError and "gloo" in text and "Timed out" not in text


class FailureNotice:
    """This process's side of the failure notice; see the module docstring.

    ``world``: a gloo group of every rank of the world (vLLM's world group's
    ``cpu_group``); ``groups``: what :func:`breakable` returns for the groups this
    rank's steps wait in; ``notice_wait_s``: how long a closed connection waits for a
    notice before it is taken for the cause (see :meth:`named`)."""

    def __init__(
        self,
        world: dist.ProcessGroup,
        groups: list[tuple[dist.ProcessGroup, int]],
        grace_s: float | None = None,
        notice_wait_s: float = _NOTICE_AFTER_CLOSE_S,
    ):
        self._world = world
        self._groups = groups
        self._rank = dist.get_rank()
        self._others = [
            r for r in dist.get_process_group_ranks(world) if r != self._rank
        ]
        self._grace_s = envs.VLLM_PP_FAILURE_GRACE_S if grace_s is None else grace_s
        self.notice_wait_s = notice_wait_s
        self._lock = threading.Lock()
        self._depth = 0  # steps (in_step calls) this rank's main thread is inside
        self.error: PipelineTransferError | None = None  # heard from another rank
        self.failed: BaseException | None = None  # this rank's own failure
        self.heard = threading.Event()
        self.sent = (
            threading.Event()
        )  # this rank's notice went to every rank that lives
        self.closing = False
        threading.Thread(
            target=self._listen, daemon=True, name="PipelineFailureNotice"
        ).start()

    @property
    def ending(self) -> bool:
        """A failure happened here or was heard: the run is ending."""
        return self.failed is not None or self.error is not None

    def enter(self) -> None:
        """The main thread enters a step (refused after a failure); a notice heard from
        now on interrupts it."""
        with self._lock:
            self.refuse()
            self._depth += 1

    def leave(self) -> None:
        with self._lock:
            self._depth -= 1

    def refuse(self) -> None:
        """Raise the heard error, or this rank's own, if either happened."""
        if self.error is not None:
            raise type(self.error)(str(self.error))
        if self.failed is not None:
            raise PipelineAbortError(
                "pipeline transfer: no step runs after this rank's failure: "
                f"{type(self.failed).__name__}: {self.failed}"
            )

    def named(self, error: BaseException) -> BaseException:
        """What to raise for ``error``, which ended a step: the heard error, if one
        interrupted it. A rank that hears a notice breaks its groups, which closes its
        peers' connections, and a peer may see its connection close before the same
        notice reaches it: an error that is a closed connection waits for the notice
        (``notice_wait_s``) before it is taken for the cause."""
        if closed_connection(error) and not self.ending:
            self.heard.wait(self.notice_wait_s)
        return error if self.error is None else type(self.error)(str(self.error))

    def announce(self, error: BaseException, step: int | None = None) -> None:
        """This rank failed: tell every other rank (once, and not when the failure is
        the heard one). The sends run in a thread; the caller raises at once."""
        with self._lock:
            if self.ending:
                return
            self.failed = error
        payload = json.dumps(
            {
                "rank": self._rank,
                "step": step,
                "error": type(error).__name__,
                "message": str(error)[: NOTICE_BYTES // 2],
            }
        ).encode()[: NOTICE_BYTES - 8]
        words = torch.zeros(NOTICE_BYTES, dtype=torch.uint8)
        words[: len(payload)] = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
        threading.Thread(
            target=self._send,
            args=(words,),
            daemon=True,
            name="PipelineFailureAnnounce",
        ).start()
        self._arm(error)

    def _send(self, words: torch.Tensor) -> None:
        works = []
        for rank in self._others:
            try:
                works.append((rank, dist.isend(words, rank, self._world, NOTICE_TAG)))
            except RuntimeError as e:
                logger.warning("pipeline failure notice to rank %d failed: %s", rank, e)
        for rank, work in works:
            try:
                work.wait(_LISTEN_FOREVER)
            except RuntimeError as e:  # that rank is gone too
                logger.warning("pipeline failure notice to rank %d failed: %s", rank, e)
        self.sent.set()

    def _listen(self) -> None:
        buf = torch.empty(NOTICE_BYTES, dtype=torch.uint8)
        while True:
            try:
                work = dist.irecv(buf, None, self._world, NOTICE_TAG)
                work.wait(_LISTEN_FOREVER)
            except RuntimeError as e:
                if not self.closing and not self.ending:
                    logger.warning("pipeline failure notice stopped listening: %s", e)
                return
            raw = bytes(buf.numpy()).rstrip(b"\0")
            self._hear(json.loads(raw.decode(errors="replace")))

    def _hear(self, notice: dict) -> None:
        cls = _NAMED.get(notice["error"], PipelineAbortError)
        where = f"rank {notice['rank']}" + (
            "" if notice["step"] is None else f" in step {notice['step']}"
        )
        error = cls(
            f"pipeline rank {self._rank} stopped: {where} failed: "
            f"{notice['error']}: {notice['message']}"
        )
        with self._lock:
            if self.ending:
                return
            self.error = error
            inside = self._depth > 0
        logger.error("%s: %s", type(error).__name__, error)
        self.heard.set()
        if inside:  # an idle rank is refused at its next step: nothing to interrupt
            for group, peer in self._groups:
                _break(group, peer)
        self._arm(error)

    def _arm(self, error: BaseException) -> None:
        timer = threading.Timer(self._grace_s, self._stop_after_grace, args=(error,))
        timer.daemon = True
        timer.start()

    def _stop_after_grace(self, error: BaseException) -> None:
        """The run ended ``grace_s`` ago: stop, unless shut down meanwhile."""
        if self.closing:
            return
        with self._lock:
            where = "still inside the step" if self._depth > 0 else "idle"
        stop_worker(
            PipelineAbortError(
                f"{where} {self._grace_s:g} s after the pipeline's failure "
                f"(VLLM_PP_FAILURE_GRACE_S): {type(error).__name__}: {error}"
            )
        )


class StageWatch:
    """A receive from a neighbour stage (``stage``: the next one or the previous one)
    that no message ever completes: it fails when that stage's connection closes.
    Unless the run is ending already (a notice broke the group) or the group is being
    destroyed (``closing``), this rank then tells every other rank and stops: vLLM's
    executor, which hears only from the last stage, fails the engine at once when a
    worker of its own node dies (with ``wakeup.py``), instead of after
    ``VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS``; a headless node whose engine's node died
    ends too."""

    def __init__(self, group: Any, stage: int, notice: FailureNotice | None):
        self.closing = False
        self._stage = stage
        self._notice = notice
        self._work = dist.irecv(
            torch.empty(1, dtype=torch.int64),
            group=getattr(group, "cpu_group", group),
            group_src=stage,
            tag=_WATCH_TAG,
        )
        threading.Thread(
            target=self._run, daemon=True, name="PipelineStageWatch"
        ).start()

    def _run(self) -> None:
        try:
            self._work.wait(_LISTEN_FOREVER)
        except RuntimeError as e:
            notice = self._notice
            # a rank that heard a notice breaks its groups: wait for that notice here
            # too before taking a closed connection for a dead stage
            if self.closing or (
                notice is not None
                and (notice.heard.wait(notice.notice_wait_s) or notice.ending)
            ):
                return
            error = PipelinePeerError(
                f"pipeline transfer: pipeline stage {self._stage} is gone "
                f"(its connection closed): {e}"
            )
            if notice is not None:
                notice.announce(error)
                notice.sent.wait(_ANNOUNCE_BEFORE_STOP_S)
            stop_worker(error)


def _break(group: dist.ProcessGroup, peer: int) -> None:
    """End ``group``'s gloo context: every operation pending on it fails now."""
    with contextlib.suppress(RuntimeError):  # the wait times out: that is the break
        group.recv([torch.empty(1, dtype=torch.uint8)], peer, _BREAK_TAG).wait(
            _BREAK_AFTER
        )


def failure_notice(
    world: Any, groups: list[tuple[dist.ProcessGroup, int]]
) -> FailureNotice:
    """The process's notice, made on first use (one listener per process)."""
    global _NOTICE
    if _NOTICE is None:
        _NOTICE = FailureNotice(getattr(world, "cpu_group", world), groups)
    return _NOTICE
