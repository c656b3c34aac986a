# SPDX-License-Identifier: Apache-2.0
"""Stage-to-stage transfer of a forward's intermediate tensors over gloo (the host
network).

The HPU runner's calls::

    xfer = StageTransfer(get_pp_group(), get_tp_group(), device=device,
                         device_event=torch.hpu.Event, layers=(start, end))
    xfer.begin_step()  # every stage, at each scheduler step that runs forwards
    # not the last stage:
    handle = xfer.isend({"hidden_states": h, "residual": r}, num_tokens)
    handle.wait()  # or xfer.send(...)
    # not the first stage:
    tensors = xfer.recv(num_tokens)
    # a step failed on this stage:
    xfer.abort(error)

``num_tokens`` is the padded batch of the forward; the receiver checks it, the step and
the forward's index in it, and the sender's last layer against its own. Every mismatch
raises :class:`PipelineDesyncError`, an abort of the previous stage
:class:`PipelineAbortError`, a dead or silent peer :class:`PipelinePeerError` within
``VLLM_HPU_PP_TIMEOUT_S``; after any of them, every later call raises too. Nothing is
returned on error.

Each pipeline rank talks to the same tensor-parallel rank of the neighbour stage over
the pipeline group's gloo group (vLLM's pipeline groups are built that way). Payloads of
``VLLM_HPU_PP_SPLIT_BYTES`` or more go in tensor-parallel parts, one per connection, and
the receiving stage all-gathers them on its tensor-parallel device group (HCCL on
Gaudi): with per-flow limited NICs, several streams carry more. Smaller payloads go
whole from every rank rather than from one rank plus a local broadcast: one hop and no
collective on the decode path (``bench/transfer.py`` compares the two); the price is
TP-size times the bytes on the NIC, which per-flow limits do not charge.

Host buffers are reused (allocating a large message's buffer costs about as much as
sending it), two per direction: the receive buffer reserves
``VLLM_HPU_PP_MAX_MESSAGE_BYTES`` of address space once, so any message fits without a
size handshake, and only the touched pages become memory.
``recv`` returns one fresh, contiguous tensor per key on ``device``, laid out like the
zeros a warm-up passes (an HPU graph keyed on its inputs' layout must not tell them
apart) and never a view of a buffer a later ``recv`` reuses. A whole payload is copied
into them from the host buffer once; a split payload is all-gathered straight into them.

No call waits for the whole device. Off the CPU, copies between a host buffer and the
device are queued without blocking and ``device_event`` (the caller's event class, e.g.
``torch.hpu.Event``) marks their end: the sender waits for its copies' event before
handing the buffer to gloo, the receiver waits for an event only when the buffer its
copies read is taken again, two messages later. ``mark_step`` (the graph break of HPU
lazy mode) runs before every collective on the device, as vllm-gaudi's own communicator
does before its collectives.
"""

from __future__ import annotations

import functools
import time
from collections import deque
from datetime import timedelta
from typing import Any, Callable, TypeVar

import numpy as np
import torch
import torch.distributed as dist

from . import envs
from ._logging import get_logger
from .errors import (
    PipelineAbortError,
    PipelineDesyncError,
    PipelinePeerError,
    PipelineTransferError,
)
from .groups import GroupView, as_group
from .stats import TransferStats
from .wire import (
    HEADER_BYTES,
    TAG,
    TRAILER_BYTES,
    Layout,
    Message,
    abort_header,
    decode,
    plan,
    size_error,
)

__all__ = ["SendHandle", "StageTransfer", "in_step"]

logger = get_logger(__name__)

_DEPTH = 2  # messages in flight per direction


def _copy(dst: torch.Tensor, src: torch.Tensor, queued: bool) -> None:
    """Copy bytes; host to host with numpy: torch's ``copy_`` wakes its intra-op thread
    pool, which on a busy host can cost more than the whole transfer. ``queued``: a
    copy across devices is queued, and the caller waits for an event after it."""
    if src.is_cpu and dst.is_cpu:
        np.copyto(dst.numpy(), src.numpy())
    else:
        dst.copy_(src, non_blocking=queued)


def _bytes(t: torch.Tensor) -> torch.Tensor:
    """A contiguous tensor's storage as flat bytes."""
    return t.view(-1).view(torch.uint8)


class _Ring:
    """Host byte buffers used in turn and grown as needed, so the one being read is not
    the one being filled; each keeps the device event of the copies that use it, which
    taking it again waits for. A buffer comes as a tensor (for gloo and the device) and
    as a numpy array of the same bytes (host-side work, without torch's per-call
    cost)."""

    def __init__(self):
        self._buffers: list[torch.Tensor | None] = [None] * _DEPTH
        self._arrays: list[np.ndarray | None] = [None] * _DEPTH
        self._events: list[Any] = [None] * _DEPTH
        self._turn = 0

    def take(self, nbytes: int) -> tuple[int, torch.Tensor, np.ndarray]:
        i, self._turn = self._turn, (self._turn + 1) % _DEPTH
        event, self._events[i] = self._events[i], None
        if event is not None:
            event.synchronize()
        buf = self._buffers[i]
        if buf is None or buf.numel() < nbytes:
            buf = self._buffers[i] = torch.empty(nbytes, dtype=torch.uint8)
            self._arrays[i] = buf.numpy()
        return i, buf[:nbytes], self._arrays[i]

    def fence(self, i: int, event: Any) -> None:
        self._events[i] = event


T = TypeVar("T")


def in_step(
    transfer: StageTransfer, starts: bool, sends: bool, call: Callable[[], T]
) -> T:
    """Run one of a stage's per-step calls: ``starts``, it opens a step that runs
    forwards (counted before anything can fail); ``sends``, this stage feeds a next one,
    which an exception is told of (:meth:`StageTransfer.abort`) before it propagates:
    vLLM reports only the last stage's exceptions, and a stage that went on after a
    failed step would feed the next stage the following step's tensors."""
    if starts:
        transfer.begin_step()
    try:
        return call()
    except BaseException as e:
        if sends:
            transfer.abort(e)
        raise


def _stops_on_error(method):
    """Refuse to run after a transfer error, and remember the first one."""

    @functools.wraps(method)
    def guarded(self: StageTransfer, *args, **kwargs):
        if self._broken is not None:
            raise type(self._broken)(
                f"pipeline transfer stopped by an earlier error: {self._broken}"
            )
        try:
            return method(self, *args, **kwargs)
        except PipelineTransferError as e:
            self._broken = e
            raise

    return guarded


class SendHandle:
    """A message in flight; ``wait()`` returns once gloo has sent it, and may be called
    again. A handle nobody waits for is waited for by the ``isend`` two messages later
    (its buffer is reused then)."""

    def __init__(self, transfer: StageTransfer, works: list[dist.Work]):
        self._transfer = transfer
        self._works = works

    def wait(self) -> None:
        works, self._works = self._works, []
        if works:
            self._transfer._finish_send(works)


class StageTransfer:
    """Sends to the next pipeline stage and receives from the previous one; see the
    module docstring.

    ``pp_group`` and ``tp_group`` are vLLM ``GroupCoordinator`` objects or torch process
    groups (``tp_group=None``: no tensor parallelism). ``device``: where ``recv``
    returns tensors; ``device_event``: makes an event (``record()``,
    ``synchronize()``) that marks the end of queued copies between host and device
    (None: copies are waited for as they are made, as on the CPU); ``mark_step``:
    called before each tensor-parallel all-gather (the runner passes it on HPU only);
    ``layers``: this stage's decoder layers ``(start, end)``, checked against the
    sender's last layer (None: not known, not checked). ``timeout_s``,
    ``split_bytes`` and ``stats_every`` override ``VLLM_HPU_PP_TIMEOUT_S``,
    ``VLLM_HPU_PP_SPLIT_BYTES`` and ``VLLM_HPU_PP_STATS_EVERY``.
    """

    def __init__(
        self,
        pp_group,
        tp_group=None,
        *,
        device: torch.device | str = "cpu",
        device_event: Callable[[], Any] | None = None,
        mark_step: Callable[[], None] | None = None,
        layers: tuple[int, int] | None = None,
        timeout_s: float | None = None,
        split_bytes: int | None = None,
        stats_every: int | None = None,
    ):
        self._pp = as_group(pp_group)
        self._tp: GroupView | None = (
            as_group(tp_group) if tp_group is not None else None
        )
        self._device = torch.device(device)
        self._device_event = device_event
        self._mark_step = mark_step
        self._layers = layers
        self._last_layer = -1 if layers is None else layers[1] - 1
        timeout = envs.VLLM_HPU_PP_TIMEOUT_S if timeout_s is None else timeout_s
        self._timeout = timedelta(seconds=timeout)
        self._split_bytes = (
            envs.VLLM_HPU_PP_SPLIT_BYTES if split_bytes is None else split_bytes
        )
        self._stats_every = (
            envs.VLLM_HPU_PP_STATS_EVERY if stats_every is None else stats_every
        )
        self._max_bytes = envs.VLLM_HPU_PP_MAX_MESSAGE_BYTES
        self._send_seq = 0
        self._recv_seq = 0
        self._step = 0
        self._send_forward = 0
        self._recv_forward = 0
        self._staging = _Ring()
        self._received = _Ring()
        self._pending: deque[SendHandle] = deque()
        # global ranks, for messages
        self._next_rank = self._pp.ranks[self._pp.next_in_group]
        self._prev_rank = self._pp.ranks[self._pp.prev_in_group]
        self._broken: Exception | None = None
        self._aborted = False
        self.stats = TransferStats()

    @property
    def _tp_size(self) -> int:
        return self._tp.world_size if self._tp else 1

    @property
    def _tp_rank(self) -> int:
        return self._tp.rank_in_group if self._tp else 0

    @property
    def step(self) -> int:
        return self._step

    def begin_step(self) -> None:
        """A scheduler step that runs forwards starts: every stage calls this at the
        same point of every such step, so the step counts agree, whatever failed in
        between."""
        self._step += 1
        self._send_forward = self._recv_forward = 0

    def send(self, tensors: dict[str, torch.Tensor], num_tokens: int) -> None:
        self.isend(tensors, num_tokens).wait()

    @_stops_on_error
    def isend(self, tensors: dict[str, torch.Tensor], num_tokens: int) -> SendHandle:
        """Queue ``tensors`` for the next stage; they are copied before this returns, so
        may be reused."""
        start_s = time.perf_counter()
        layout = plan(
            tensors, num_tokens, self._tp_size, self._split_bytes, self._last_layer
        )
        if layout.message_bytes > self._max_bytes:
            # the receiver refuses it too; a message larger than its buffer would make
            # its gloo abort, not raise
            raise ValueError(size_error(layout.message_bytes, self._max_bytes))
        seq, step, forward = self._send_seq, self._step, self._send_forward
        if len(self._pending) == _DEPTH:
            self._pending.popleft().wait()
        _, buf, arr = self._staging.take(layout.message_bytes)
        layout.write_header(arr[:HEADER_BYTES].view(np.int64), seq, step, forward)
        sources = [_bytes(t.contiguous()) for t in tensors.values()]
        if all(src.is_cpu for src in sources):
            sources, dst = [src.numpy() for src in sources], arr
        else:
            dst = buf
        part = self._tp_rank if layout.parts > 1 else 0
        bounds, pos = [], HEADER_BYTES
        for i, rnd in enumerate(layout.rounds):
            self._pack(dst[pos : pos + rnd.slice_bytes], sources, layout, rnd, part)
            pos += rnd.slice_bytes + TRAILER_BYTES
            arr[pos - TRAILER_BYTES : pos].view(np.int64)[:] = layout.trailer(seq, i)
            bounds.append(pos)
        if self._device_event is not None:
            copied = self._device_event()
            copied.record()
            copied.synchronize()  # these copies only, not the whole device
        works, begin = [], 0
        for end in bounds:
            works.append(
                dist.isend(
                    buf[begin:end],
                    group=self._pp.cpu_group,
                    group_dst=self._pp.next_in_group,
                    tag=TAG,
                )
            )
            begin = end
        handle = SendHandle(self, works)
        self._pending.append(handle)
        self._send_seq += 1
        self._send_forward += 1
        self.stats.send_s += time.perf_counter() - start_s
        self._count(layout)
        return handle

    def abort(self, error: BaseException | str) -> None:
        """This stage's step failed: tell the next stage, instead of the step's tensors,
        so that it stops now with :class:`PipelineAbortError`; later sends are refused.
        Sent once; a failure to send it is logged, never raised over ``error``."""
        if self._aborted:
            return
        self._aborted = True
        reason = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        words = abort_header(
            self._send_seq, self._step, self._send_forward, self._last_layer, reason
        )
        try:
            self._wait(
                dist.isend(
                    torch.from_numpy(words).view(torch.uint8),
                    group=self._pp.cpu_group,
                    group_dst=self._pp.next_in_group,
                    tag=TAG,
                ),
                f"abort to rank {self._next_rank}",
            )
        except (PipelineTransferError, RuntimeError) as e:
            logger.warning("pipeline transfer: could not send the abort: %s", e)
        if self._broken is None:
            self._broken = PipelineAbortError(
                f"pipeline transfer: this stage aborted step {self._step}: {reason}"
            )

    @_stops_on_error
    def _finish_send(self, works: list[dist.Work]) -> None:
        start_s = time.perf_counter()
        for work in works:
            self._wait(work, f"send to rank {self._next_rank}")
        self.stats.send_s += time.perf_counter() - start_s

    @_stops_on_error
    def recv(self, num_tokens: int | None) -> dict[str, torch.Tensor]:
        """The previous stage's tensors of the next forward, whose padded batch is
        ``num_tokens`` (None: whatever the sender says)."""
        start_s = time.perf_counter()
        slot, buf, arr = self._received.take(self._max_bytes)
        self._recv_into(buf)
        header = arr[:HEADER_BYTES].view(np.int64)
        message = decode(header.tolist(), self._max_bytes)
        header[0] = 0  # so a later, truncated message cannot pass on these bytes
        layout = self._expect(message, num_tokens)
        outputs = [
            torch.empty(s.shape, dtype=s.dtype, device=self._device)
            for s in layout.specs
        ]
        queued = self._device_event is not None
        if layout.parts == 1:
            end = self._round_end(arr, HEADER_BYTES, message.seq, layout, 0)
            payload = arr[HEADER_BYTES:end] if self._device.type == "cpu" else buf
            base = 0 if self._device.type == "cpu" else HEADER_BYTES
            for spec, out in zip(layout.specs, outputs):
                piece = payload[base + spec.offset : base + spec.offset + spec.nbytes]
                if isinstance(piece, np.ndarray):
                    np.copyto(_bytes(out).numpy(), piece)
                else:
                    _copy(_bytes(out), piece, queued)
            self.stats.recv_copied_bytes += sum(s.nbytes for s in layout.specs)
        else:
            self._recv_split(buf, arr, message.seq, layout, outputs)
        if queued:
            copied = self._device_event()
            copied.record()
            self._received.fence(slot, copied)  # waited for two messages later
        self._recv_seq += 1
        self._recv_forward += 1
        self.stats.recv_s += time.perf_counter() - start_s
        self._count(layout)
        return {spec.key: out for spec, out in zip(layout.specs, outputs)}

    def _recv_split(
        self,
        buf: torch.Tensor,
        arr: np.ndarray,
        seq: int,
        layout: Layout,
        outputs: list[torch.Tensor],
    ) -> None:
        """Receive the rounds of a split payload, all-gathering each into its tensor
        while the next is on the wire."""
        targets = [_bytes(out) for out in outputs]
        gathers, tails, pos = [], [], HEADER_BYTES
        for i, rnd in enumerate(layout.rounds):
            if i:
                self._recv_into(buf[pos:])
            body = buf[pos : self._round_end(arr, pos, seq, layout, i)]
            into = targets[rnd.tensor][rnd.start : rnd.start + rnd.length]
            if not rnd.fills(layout.parts):  # the tensor's last, uneven round
                size = layout.parts * rnd.slice_bytes
                scratch = torch.empty(size, dtype=torch.uint8, device=into.device)
                tails.append((into, scratch[: rnd.length]))
                into = scratch
            gathers.append(self._gather(into, body))
            pos += rnd.slice_bytes + TRAILER_BYTES
        start_s = time.perf_counter()
        for work in gathers:
            self._wait(
                work, f"all-gather over tensor-parallel ranks {list(self._tp.ranks)}"
            )
        for into, scratch in tails:
            _copy(into, scratch, self._device_event is not None)
            self.stats.recv_copied_bytes += into.numel()
        self.stats.gather_s += time.perf_counter() - start_s

    def _recv_into(self, buf: torch.Tensor) -> None:
        self._wait(
            dist.irecv(
                buf, group=self._pp.cpu_group, group_src=self._pp.prev_in_group, tag=TAG
            ),
            f"receive from rank {self._prev_rank}",
        )

    def _round_end(
        self, arr: np.ndarray, pos: int, seq: int, layout: Layout, round_index: int
    ) -> int:
        """Where the slice of a round that starts at ``pos`` ends, once the trailer
        after it proves it complete."""
        end = pos + layout.rounds[round_index].slice_bytes
        trailer = arr[end : end + TRAILER_BYTES].view(np.int64)
        got, expected = trailer.tolist(), layout.trailer(seq, round_index)
        trailer[:] = 0  # so a later, truncated message cannot pass on these bytes
        if got != expected:
            raise PipelineDesyncError(
                f"pipeline transfer: message {seq} truncated: expected trailer (magic, "
                f"seq, checksum, round) {expected} at byte {end}, got {got}"
            )
        return end

    def _expect(self, message: Message, num_tokens: int | None) -> Layout:
        """The message's layout, if it is the one this stage expects next."""
        if message.reason is not None:
            raise PipelineAbortError(
                f"pipeline transfer: the previous stage (rank {self._prev_rank}) "
                f"failed in step {message.step}, forward {message.forward}, and "
                f"aborted: {message.reason}"
            )
        layout = message.layout
        assert layout is not None
        last_layer = None if self._layers is None else self._layers[0] - 1
        for what, expected, got in (
            ("sequence number", self._recv_seq, message.seq),
            ("step", self._step, message.step),
            ("forward in step", self._recv_forward, message.forward),
            ("token count (padded batch)", num_tokens, layout.num_tokens),
            ("sender's last layer", last_layer, message.last_layer),
        ):
            if expected is not None and expected != got:
                raise PipelineDesyncError(
                    f"pipeline transfer: {what} from rank {self._prev_rank}: "
                    f"expected {expected}, got {got}"
                )
        if layout.parts not in (1, self._tp_size):
            raise PipelineDesyncError(
                f"pipeline transfer: message split in {layout.parts} parts, "
                f"expected 1 or the tensor-parallel size {self._tp_size}"
            )
        return layout

    def _pack(self, dst, sources: list, layout: Layout, rnd: Any, part: int) -> None:
        """This rank's slice of round ``rnd`` into ``dst`` (past the data: left as is);
        numpy arrays from host tensors, torch tensors from a device."""
        queued = self._device_event is not None
        copy = np.copyto if isinstance(dst, np.ndarray) else functools.partial(
            _copy, queued=queued
        )
        if rnd.tensor < 0:  # the whole payload
            for spec, src in zip(layout.specs, sources):
                copy(dst[spec.offset : spec.offset + spec.nbytes], src)
            return
        lo = rnd.start + part * rnd.slice_bytes
        hi = min(lo + rnd.slice_bytes, rnd.start + rnd.length)
        if lo < hi:
            copy(dst[: hi - lo], sources[rnd.tensor][lo:hi])

    def _gather(self, out: torch.Tensor, part: torch.Tensor) -> dist.Work:
        """Start the all-gather of one round over the tensor-parallel group (its device
        group off CPU)."""
        group = self._tp.cpu_group
        if self._device.type != "cpu":
            part, group = (
                part.to(self._device, non_blocking=self._device_event is not None),
                self._tp.device_group,
            )
        if self._mark_step is not None:
            self._mark_step()
        return dist.all_gather_into_tensor(out, part, group=group, async_op=True)

    def _wait(self, work: dist.Work, what: str) -> None:
        try:
            work.wait(self._timeout)
        except RuntimeError as e:
            raise PipelinePeerError(
                f"pipeline transfer: {what} failed or timed out "
                f"({self._timeout.total_seconds():g} s, VLLM_HPU_PP_TIMEOUT_S): {e}"
            ) from e

    def _count(self, layout: Layout) -> None:
        self.stats.count(layout.message_bytes, layout.parts > 1)
        if (
            self._stats_every > 0
            and self._tp_rank == 0
            and self.stats.messages % self._stats_every == 0
        ):
            logger.info(
                "pipeline transfer, stage %d: %s", self._pp.rank_in_group, self.stats
            )
