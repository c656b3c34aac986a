# SPDX-License-Identifier: Apache-2.0
"""Stage-to-stage transfer of a forward's intermediate tensors over gloo (the host
network).

The HPU runner's calls::

    xfer = StageTransfer(get_pp_group(), get_tp_group(), device=device,
                         device_event=torch.hpu.Event, layers=(start, end))
    xfer.begin_step()  # every stage, at each scheduler step that runs forwards
    xfer.post_recv()  # not the first stage: the step's first message may come now
    # not the last stage:
    handle = xfer.isend({"hidden_states": h, "residual": r}, num_tokens, rows)
    handle.wait()  # or xfer.send(...)
    # not the first stage:
    tensors = xfer.recv(num_tokens, rows)
    # a step failed on this stage:
    xfer.abort(error)

``num_tokens`` is the padded batch of the forward and ``rows`` a digest of what fixes
its rows (``wire.rows_digest``: the padded shape, the requests in row order and their
token counts); the receiver checks both, the step and the forward's index in it, and the
sender's last layer against its own. Every mismatch
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
sending it), two per direction (more on a host receiver whose lent buffers are all
alive): the receive buffers reserve
``VLLM_HPU_PP_MAX_MESSAGE_BYTES`` of address space once, so any message fits without a
size handshake, and only the touched pages become memory; the send buffers grow to the
largest message sent (sending from a reserved gigabyte measured up to 150 us slower a
decode message on loopback). What a whole payload of one layout needs of a buffer
(views, addresses, shapes) is made once and reused (``_Route``): a decode message costs
its copies and its gloo call, and a few dozen Python operations.
``recv`` returns one contiguous tensor per key on ``device``, each its own storage at
offset 0, laid out like the zeros a warm-up passes (an HPU graph keyed on its inputs'
layout must not tell them apart) and never on a buffer a later ``recv`` reuses. On a
device a whole payload is copied into new tensors from the host buffer once; on the
host the tensors are the receive buffer's bytes (lent: that buffer is not taken again
while one of them, or a view of one, lives, and the ring adds a buffer when all are
lent); a split payload is all-gathered straight into them. The sender copies its
tensors into a host buffer after the header (gloo sends one buffer per message, and a
message of its own for the header costs more than the copy).

gloo sends a message only once its receive is posted, so the receive is posted as early
as the caller knows it comes (:meth:`StageTransfer.post_recv`: the runner's step start,
vLLM's ``irecv_tensor_dict``). While the message travels, the receiver makes the header
and trailer it has if it repeats the last layout, as decode steps do, and on the host
its tensors; a message equal to them in those bytes is taken as is, any other is
decoded and checked word by word.

No call waits for the whole device. Off the CPU, copies between a host buffer and the
device are queued without blocking and ``device_event`` (the caller's event class, e.g.
``torch.hpu.Event``) marks their end: the sender waits for its copies' event before
handing the buffer to gloo, the receiver waits for an event only when the buffer its
copies read is taken again, two messages later. ``mark_step`` (the graph break of HPU
lazy mode) runs before every collective on the device, as vllm-gaudi's own communicator
does before its collectives.
"""

from __future__ import annotations

import ctypes
import functools
import sys
import time
from collections import deque
from collections.abc import Callable
from datetime import timedelta
from typing import Any, NamedTuple, TypeVar

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
from .notice import FailureNotice
from .stats import TransferStats
from .wire import (
    HEADER_BYTES,
    ROWS_BYTES,
    TAG,
    TRAILER_BYTES,
    Layout,
    Message,
    Round,
    abort_header,
    decode,
    plan,
    read_rows,
    read_trailer,
    size_error,
)

__all__ = ["SendHandle", "StageTransfer", "in_step"]

logger = get_logger(__name__)

_DEPTH = 2  # messages in flight per direction
_ZERO_WORD = bytes(8)  # to clear a received header's magic
_ZERO_TRAILER = bytes(TRAILER_BYTES)
_ROUTES = 256  # cached whole-payload layouts per direction, as wire's caches


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


def _in_use(pieces: tuple[np.ndarray, ...]) -> bool:
    """Whether a tensor lent from ``pieces`` (or a view of one) is alive: its storage
    holds the buffer of its piece until the storage itself is freed."""
    # unlent, a piece is referred to by the tuple, ``piece`` and the argument
    return any(sys.getrefcount(piece) > 3 for piece in pieces)


class _Ring:
    """Host byte buffers used in turn, so the one being read is not the one being
    filled; each keeps the device event of the copies that use it, which taking it again
    waits for. A buffer comes as a tensor (for gloo and the device), as a numpy array of
    the same bytes (host-side work, without torch's per-call cost), as a bytes view (for
    the header words) and as its address. The ring keeps the :class:`_Route` of each
    whole-payload layout it carried, made for its buffers: they are replaced only to
    grow, and the routes with them.

    A ring that ``lends`` (receiving on the host) hands a buffer's bytes to the tensors
    a message is returned in instead of copying them out; a lent buffer is not taken
    again while any of them lives, and a ring whose buffers are all lent adds one."""

    def __init__(self, lends: bool = False):
        self.lends = lends
        self.buffers: list[torch.Tensor] = []
        self.arrays: list[np.ndarray] = []
        self.views: list[memoryview] = []
        self.addresses: list[int] = []
        self.capacity = 0
        self._routes: dict[tuple[int, ...], _Route] = {}
        self._events: list[Any] = []
        self._lent: list[tuple[np.ndarray, ...]] = []
        self._turn = 0
        self._last_route: _Route | None = None

    def take(self, nbytes: int) -> int:
        """The next buffer's index, once the copies that last used it are done and
        nothing lent from it lives; every buffer holds at least ``nbytes``."""
        if nbytes > self.capacity:
            self._grow(nbytes)
        count = len(self.buffers)
        i = self._turn
        while self._lent[i] and _in_use(self._lent[i]):
            i = (i + 1) % count
            if i == self._turn:
                i = self._add()
                break
        # a lending ring has no queued copies: the buffer just used, still in cache,
        # is the next one tried
        self._turn = i if self.lends else (i + 1) % len(self.buffers)
        self._lent[i] = ()
        event = self._events[i]
        if event is not None:
            self._events[i] = None
            event.synchronize()
        return i

    def _grow(self, nbytes: int) -> None:
        # a message in flight keeps its buffer alive (its gloo work holds it), and so
        # does a tensor lent from one; queued device copies only read the receive
        # ring, which grows once, at its first use
        self.buffers, self.arrays, self.views, self.addresses = [], [], [], []
        self._events, self._lent, self._turn = [], [], 0
        self.capacity = nbytes
        for _ in range(_DEPTH):
            self._add()

    def _add(self) -> int:
        buf = torch.empty(self.capacity, dtype=torch.uint8)
        self.buffers.append(buf)
        self.arrays.append(buf.numpy())
        self.views.append(self.arrays[-1].data)
        self.addresses.append(buf.data_ptr())
        self._events.append(None)
        self._lent.append(())
        self._routes.clear()  # a route covers the buffers it was made for
        self._last_route = None
        return len(self.buffers) - 1

    def fence(self, i: int, event: Any) -> None:
        self._events[i] = event

    def lend(self, i: int, route: _Route) -> dict[str, torch.Tensor]:
        """The payload in buffer ``i`` as tensors that own its bytes."""
        self.keep_lent(i, route)
        return route.lend(i)

    def keep_lent(self, i: int, route: _Route) -> None:
        """Buffer ``i`` is not taken again while a tensor lent from it by ``route``
        lives."""
        self._lent[i] = route.host_pieces[i]

    def route(self, layout: Layout) -> _Route:
        """The route of ``layout`` (a layout's header words determine it)."""
        last = self._last_route
        if last is not None and last.layout is layout:  # the cached layout again
            return last
        route = self._routes.get(layout.words)
        if route is None:
            if len(self._routes) >= _ROUTES:
                self._routes.clear()
            route = self._routes[layout.words] = _Route(layout, self)
        self._last_route = route
        return route


class _Route:
    """A whole payload of one layout between its tensors and each buffer of a ring: the
    views, addresses and shapes a message needs, made once, so that a message costs
    its copies and its gloo call and little more. Host-to-host copies go by address
    (``ctypes.memmove``): numpy would need per-call views of every tensor (bf16 has no
    numpy dtype) and torch's ``copy_`` wakes its intra-op thread pool; copies to or
    from a device go through typed views of the buffer, queued."""

    def __init__(self, layout: Layout, ring: _Ring):
        assert layout.parts == 1 and layout.message_bytes <= ring.capacity
        self.layout = layout
        self.keys = tuple(s.key for s in layout.specs)
        self.empties = tuple((s.shape, s.dtype) for s in layout.specs)
        self.sizes = tuple(s.nbytes for s in layout.specs)
        self.data_bytes = sum(self.sizes)
        self.end = HEADER_BYTES + layout.payload_bytes  # where the trailer is
        self.messages = [buf[: layout.message_bytes] for buf in ring.buffers]
        self.addresses = [
            tuple(base + HEADER_BYTES + s.offset for s in layout.specs)
            for base in ring.addresses
        ]
        self.pieces = [
            tuple(
                buf[HEADER_BYTES + s.offset : HEADER_BYTES + s.offset + s.nbytes]
                .view(s.dtype)
                .view(s.shape)
                for s in layout.specs
            )
            for buf in ring.buffers
        ]
        # what a lending ring hands out: one numpy array per tensor and buffer, whose
        # references say whether a tensor made from it lives (see _in_use)
        self.host_pieces = [
            tuple(
                arr[HEADER_BYTES + s.offset : HEADER_BYTES + s.offset + s.nbytes]
                for s in layout.specs
            )
            for arr in (ring.arrays if ring.lends else ())
        ]

    def pack(self, slot: int, tensors: Any, queued: bool) -> None:
        """``tensors`` (in the layout's order) into buffer ``slot``."""
        for t, address, nbytes, piece in zip(
            tensors, self.addresses[slot], self.sizes, self.pieces[slot], strict=True
        ):
            if t.is_cpu:
                src = t.contiguous()  # held while its bytes are copied
                ctypes.memmove(address, src.data_ptr(), nbytes)
            else:
                piece.copy_(t, non_blocking=queued)

    def unpack(
        self, slot: int, device: torch.device, queued: bool
    ) -> dict[str, torch.Tensor]:
        """New tensors on ``device`` (not the host) holding the payload in buffer
        ``slot``."""
        out = {}
        for key, (shape, dtype), piece in zip(
            self.keys, self.empties, self.pieces[slot], strict=True
        ):
            t = out[key] = torch.empty(shape, dtype=dtype, device=device)
            t.copy_(piece, non_blocking=queued)
        return out

    def lend(self, slot: int) -> dict[str, torch.Tensor]:
        """Host tensors on the payload's bytes in buffer ``slot``: each its own
        storage, at offset 0 and of the tensor's size, as ``torch.empty`` makes them,
        but with no copy."""
        out = {}
        for key, (shape, dtype), piece in zip(
            self.keys, self.empties, self.host_pieces[slot], strict=True
        ):
            t = out[key] = torch.empty(0 if piece.size else shape, dtype=dtype)
            if piece.size:  # frombuffer refuses no bytes
                storage = torch.frombuffer(piece, dtype=dtype).untyped_storage()
                t.set_(storage, 0, shape)
        return out


class _Forecast(NamedTuple):
    """The next message, made while its receive is posted, if it repeats the layout of
    the last one (as decode steps do): its exact header and trailer bytes and, lending,
    its tensors. A message equal to it in these bytes is what the full decode would
    accept, so :meth:`StageTransfer.recv` only compares them; any other goes the full
    way."""

    per_message: tuple[int, int, int]  # seq, step, forward
    route: _Route
    header: bytes
    trailer: bytes
    tensors: dict[str, torch.Tensor] | None  # lent, on a host receiver

    def holds(
        self, view: memoryview, per_message: tuple[int, int, int], num_tokens
    ) -> bool:
        route = self.route
        return (
            per_message == self.per_message
            and (num_tokens is None or num_tokens == route.layout.num_tokens)
            and view[:HEADER_BYTES].tobytes() == self.header
            and view[route.end : route.end + TRAILER_BYTES].tobytes() == self.trailer
        )


T = TypeVar("T")


def in_step(
    transfer: StageTransfer,
    starts: bool,
    sends: bool,
    call: Callable[[], T],
    *,
    receives: bool = False,
) -> T:
    """Run one of a stage's per-step calls: ``starts``, it opens a step that runs
    forwards (counted before anything can fail); ``sends``, this stage feeds a next one,
    which an exception is told of (:meth:`StageTransfer.abort`) before it propagates:
    vLLM reports only the last stage's exceptions, and a stage that went on after a
    failed step would feed the next stage the following step's tensors; ``receives``, a
    previous stage feeds this one, and a step that starts posts the receive of its
    first message (:meth:`StageTransfer.post_recv`) while the step prepares.

    No call runs after a failure (the transfer's, or with the transfer's
    :class:`~.notice.FailureNotice` any rank's): it raises that error first, so a
    failed rank never enters the next step's collectives. With a notice, an exception
    of a step the stages take part in is told to every rank, and a step a notice
    interrupted raises the error heard instead of gloo's."""
    transfer.refuse_after_failure()
    notice = transfer.notice
    if notice is not None:
        notice.enter()
    try:
        if starts:
            transfer.begin_step()
            if receives:
                transfer.post_recv()
        return call()
    except BaseException as e:
        named = e if notice is None else notice.named(e)
        if named is not e:  # heard from the rank that failed, which told every rank
            raise named from e
        if notice is not None and (starts or sends) and isinstance(e, Exception):
            notice.announce(e, transfer.step)
        if sends:
            transfer.abort(e)
        raise
    finally:
        if notice is not None:
            notice.leave()


def _stops_on_error(method):
    """Refuse to run after a transfer error, and remember the first one."""

    @functools.wraps(method)
    def guarded(self: StageTransfer, *args, **kwargs):
        self.refuse_after_failure()
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
    ``VLLM_HPU_PP_SPLIT_BYTES`` and ``VLLM_HPU_PP_STATS_EVERY``. ``notice``: this
    process's failure notice (``notice.py``), which :func:`in_step` and the transfer's
    waits heed (None: this transfer's own errors only).
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
        notice: FailureNotice | None = None,
    ):
        self.notice = notice
        self._pp = as_group(pp_group)
        self._tp: GroupView | None = (
            as_group(tp_group) if tp_group is not None else None
        )
        self._parts = self._tp_size  # of a split payload
        self._device = torch.device(device)
        self._device_event = device_event
        self._mark_step = mark_step
        self._first_layer = None if layers is None else layers[0]
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
        self._queued = device_event is not None
        # nothing is queued on the host: the received bytes can be the tensors
        self._received = _Ring(lends=self._device.type == "cpu" and not self._queued)
        self._pending: deque[SendHandle] = deque()
        # torch.distributed's isend/irecv check their arguments on every call; these
        # are checked once, here, and the pipeline group's gloo group is called directly
        self._gloo = self._pp.cpu_group
        self._next = self._pp.next_in_group
        self._prev = self._pp.prev_in_group
        # global ranks, for messages
        self._next_rank = self._pp.ranks[self._next]
        self._prev_rank = self._pp.ranks[self._prev]
        self._sending = f"send to rank {self._next_rank} (stage {self._next})"
        self._receiving = f"receive from rank {self._prev_rank} (stage {self._prev})"
        self._posted: tuple[int, dist.Work, _Forecast | None] | None = None
        self._last_layout: Layout | None = None  # of the last whole message
        self._logs_stats = self._stats_every > 0 and self._tp_rank == 0
        self._broken: Exception | None = None
        self._aborted = False
        self._abort_sent: tuple[dist.Work, Any] | None = None  # kept while in flight
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

    @property
    def pp_group(self) -> GroupView:
        """The pipeline group this transfer talks over."""
        return self._pp

    def refuse_after_failure(self) -> None:
        """Raise the transfer's first error, if it had one."""
        if self._broken is not None:
            raise type(self._broken)(
                f"pipeline transfer stopped by an earlier error: {self._broken}"
            )

    def begin_step(self) -> None:
        """A scheduler step that runs forwards starts: every stage calls this at the
        same point of every such step, so the step counts agree, whatever failed in
        between."""
        self._step += 1
        self._send_forward = self._recv_forward = 0

    def send(
        self, tensors: dict[str, torch.Tensor], num_tokens: int, rows: int = 0
    ) -> None:
        self.isend(tensors, num_tokens, rows).wait()

    @_stops_on_error
    def isend(
        self, tensors: dict[str, torch.Tensor], num_tokens: int, rows: int = 0
    ) -> SendHandle:
        """Queue ``tensors`` for the next stage; they are copied before this returns, so
        may be reused. ``rows``: the forward's rows digest (0: none)."""
        start_s = time.perf_counter()
        layout = plan(
            tensors, num_tokens, self._parts, self._split_bytes, self._last_layer
        )
        if layout.message_bytes > self._max_bytes:
            # the receiver refuses it too; a message larger than its buffer would make
            # its gloo abort, not raise
            raise ValueError(size_error(layout.message_bytes, self._max_bytes))
        seq, step, forward = self._send_seq, self._step, self._send_forward
        if len(self._pending) == _DEPTH:
            self._pending.popleft().wait()
        slot = self._staging.take(layout.message_bytes)
        view = self._staging.views[slot]
        layout.write_header(view, seq, step, forward, rows)
        if layout.parts == 1:
            route = self._staging.route(layout)
            route.pack(slot, tensors.values(), self._queued)
            layout.write_trailer(view, route.end, seq, 0)
            messages = [route.messages[slot]]
        else:
            messages = self._pack_split(slot, tensors, layout, seq)
        if self._queued:
            copied = self._device_event()
            copied.record()
            copied.synchronize()  # these copies only, not the whole device
        works = [self._gloo.send([m], self._next, TAG) for m in messages]
        handle = SendHandle(self, works)
        self._pending.append(handle)
        self._send_seq += 1
        self._send_forward += 1
        self.stats.send_s += time.perf_counter() - start_s
        self._count(layout)
        return handle

    def _pack_split(
        self, slot: int, tensors: dict[str, torch.Tensor], layout: Layout, seq: int
    ) -> list[torch.Tensor]:
        """This rank's rounds of a split payload into buffer ``slot``, after the header
        written there; the messages to send."""
        buf, arr = self._staging.buffers[slot], self._staging.arrays[slot]
        view = self._staging.views[slot]
        sources = [_bytes(t.contiguous()) for t in tensors.values()]
        if all(src.is_cpu for src in sources):
            sources, dst = [src.numpy() for src in sources], arr
        else:
            dst = buf
        messages, begin, pos = [], 0, HEADER_BYTES
        for i, rnd in enumerate(layout.rounds):
            self._pack(dst[pos : pos + rnd.slice_bytes], sources, rnd)
            layout.write_trailer(view, pos + rnd.slice_bytes, seq, i)
            pos += rnd.slice_bytes + TRAILER_BYTES
            messages.append(buf[begin:pos])
            begin = pos
        return messages

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
            work = self._gloo.send(
                [torch.from_numpy(words).view(torch.uint8)], self._next, TAG
            )
            if self.notice is None:
                self._wait(work, f"abort to rank {self._next_rank}")
            else:  # every rank hears the notice: the abort is not waited for
                self._abort_sent = work, words
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
            self._wait(work, self._sending)
        self.stats.send_s += time.perf_counter() - start_s

    @_stops_on_error
    def post_recv(self) -> None:
        """Let the previous stage's next message come now, before :meth:`recv` needs
        it: gloo sends a message only once its receive is posted, so posting it early
        takes the wire time off the receiver's path. A second call before ``recv`` does
        nothing."""
        self._post()

    def _post(self) -> None:
        if self._posted is None:
            ring = self._received
            # a larger message is refused on both ends: the receive buffers hold any
            # other
            slot = ring.take(self._max_bytes)
            work = self._gloo.recv([ring.buffers[slot]], self._prev, TAG)
            forecast = None
            if self._last_layout is not None:  # made while the message travels
                route = ring.route(self._last_layout)
                seq, step, forward = per_message = self._per_message()
                forecast = _Forecast(
                    per_message,
                    route,
                    route.layout.header_bytes(seq, step, forward),
                    route.layout.trailer_bytes(seq, 0),
                    ring.lend(slot, route) if ring.lends else None,
                )
            self._posted = slot, work, forecast

    def _per_message(self) -> tuple[int, int, int]:
        """The sequence number, step and forward the next message must carry."""
        return self._recv_seq, self._step, self._recv_forward

    @_stops_on_error
    def recv(
        self, num_tokens: int | None, rows: int | None = None
    ) -> dict[str, torch.Tensor]:
        """The previous stage's tensors of the next forward, whose padded batch is
        ``num_tokens`` and rows digest ``rows`` (None: whatever the sender says)."""
        start_s = time.perf_counter()
        ring = self._received
        self._post()
        (slot, work, forecast), self._posted = self._posted, None
        self._wait(work, self._receiving)
        view = ring.views[slot]
        # checked once the header is known good; the forecast is made with rows 0
        got_rows = read_rows(view)
        view[ROWS_BYTES[0] : ROWS_BYTES[1]] = _ZERO_WORD
        if forecast is not None and forecast.holds(
            view, self._per_message(), num_tokens
        ):
            route = forecast.route
            layout = route.layout
            # so a later, truncated message cannot pass on these bytes
            view[:8] = _ZERO_WORD
            view[route.end : route.end + TRAILER_BYTES] = _ZERO_TRAILER
            outputs = self._payload(slot, route, forecast.tensors)
        else:
            forecast = None  # its lent tensors, if any, are dropped here
            layout, outputs = self._decode_message(slot, view, num_tokens)
        if rows is not None and got_rows != rows:
            raise PipelineDesyncError(
                f"pipeline transfer: rows (padded shape, requests and their token "
                f"counts) of step {self._step}, forward {self._recv_forward} from rank "
                f"{self._prev_rank}: expected {rows:x}, got {got_rows:x}; the stages "
                "padded the batch differently: give every node the same bucketing "
                "settings and build"
            )
        if self._queued:
            copied = self._device_event()
            copied.record()
            ring.fence(slot, copied)  # waited for two messages later
        self._recv_seq += 1
        self._recv_forward += 1
        self.stats.recv_s += time.perf_counter() - start_s
        self._count(layout)
        return outputs

    def _decode_message(
        self, slot: int, view: memoryview, num_tokens: int | None
    ) -> tuple[Layout, dict[str, torch.Tensor]]:
        """The received message in buffer ``slot``, checked word by word: its layout
        and tensors."""
        ring = self._received
        message = decode(view[:HEADER_BYTES].tobytes(), self._max_bytes)
        view[:8] = _ZERO_WORD  # so a later, truncated message cannot pass on these
        layout = self._expect(message, num_tokens)
        if layout.parts > 1:
            return layout, self._recv_split(slot, message.seq, layout)
        route = ring.route(layout)
        self._check_trailer(view, route.end, message.seq, layout, 0)
        self._last_layout = layout
        return layout, self._payload(slot, route, None)

    def _payload(
        self, slot: int, route: _Route, lent: dict[str, torch.Tensor] | None
    ) -> dict[str, torch.Tensor]:
        """The whole payload in buffer ``slot`` as ``recv`` returns it: on the host the
        tensors ``lent`` already (a forecast's) or lent now, on a device new tensors
        copied from the buffer."""
        ring = self._received
        if not ring.lends:
            self.stats.recv_copied_bytes += route.data_bytes
            return route.unpack(slot, self._device, self._queued)
        if lent is None:
            return ring.lend(slot, route)
        ring.keep_lent(slot, route)
        return lent

    def _recv_split(
        self, slot: int, seq: int, layout: Layout
    ) -> dict[str, torch.Tensor]:
        """Receive the rounds of a split payload, all-gathering each into its tensor
        while the next is on the wire."""
        buf, view = self._received.buffers[slot], self._received.views[slot]
        outputs = {
            s.key: torch.empty(s.shape, dtype=s.dtype, device=self._device)
            for s in layout.specs
        }
        targets = [_bytes(out) for out in outputs.values()]
        gathers, tails, pos = [], [], HEADER_BYTES
        for i, rnd in enumerate(layout.rounds):
            if i:
                self._recv_into(buf[pos:])
            end = pos + rnd.slice_bytes
            self._check_trailer(view, end, seq, layout, i)
            body = buf[pos:end]
            into = targets[rnd.tensor][rnd.start : rnd.start + rnd.length]
            if not rnd.fills(layout.parts):  # the tensor's last, uneven round
                size = layout.parts * rnd.slice_bytes
                scratch = torch.empty(size, dtype=torch.uint8, device=into.device)
                tails.append((into, scratch[: rnd.length]))
                into = scratch
            gathers.append(self._gather(into, body))
            pos = end + TRAILER_BYTES
        start_s = time.perf_counter()
        for work in gathers:
            self._wait(
                work, f"all-gather over tensor-parallel ranks {list(self._tp.ranks)}"
            )
        for into, scratch in tails:
            _copy(into, scratch, self._queued)
            self.stats.recv_copied_bytes += into.numel()
        self.stats.gather_s += time.perf_counter() - start_s
        return outputs

    def _recv_into(self, buf: torch.Tensor) -> None:
        self._wait(self._gloo.recv([buf], self._prev, TAG), self._receiving)

    @staticmethod
    def _check_trailer(
        view: memoryview, end: int, seq: int, layout: Layout, round_index: int
    ) -> None:
        """That the trailer is at byte ``end`` of ``view``, where the header says round
        ``round_index`` ends: the round arrived whole."""
        got, expected = read_trailer(view, end), layout.trailer(seq, round_index)
        # so a later, truncated message cannot pass on these bytes
        view[end : end + TRAILER_BYTES] = _ZERO_TRAILER
        if got != expected:
            raise PipelineDesyncError(
                f"pipeline transfer: message {seq} truncated: expected trailer (magic, "
                f"seq, checksum, round) {expected} at byte {end}, got {got}"
            )

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
        if (
            message.seq != self._recv_seq
            or message.step != self._step
            or message.forward != self._recv_forward
            or (num_tokens is not None and num_tokens != layout.num_tokens)
            or (
                self._first_layer is not None
                and message.last_layer != self._first_layer - 1
            )
        ):
            self._desync(message, num_tokens)
        if layout.parts not in (1, self._tp_size):
            raise PipelineDesyncError(
                f"pipeline transfer: message split in {layout.parts} parts, "
                f"expected 1 or the tensor-parallel size {self._tp_size}"
            )
        return layout

    def _desync(self, message: Message, num_tokens: int | None) -> None:
        """Raise the error naming the first header word that is not what this stage
        expects."""
        layout = message.layout
        assert layout is not None
        last_layer = None if self._first_layer is None else self._first_layer - 1
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

    def _pack(self, dst, sources: list, rnd: Round) -> None:
        """This rank's slice of round ``rnd`` of a split payload into ``dst`` (past the
        data: left as is); numpy arrays from host tensors, torch tensors from a
        device."""
        lo = rnd.start + self._tp_rank * rnd.slice_bytes
        hi = min(lo + rnd.slice_bytes, rnd.start + rnd.length)
        if lo < hi:
            if isinstance(dst, np.ndarray):
                np.copyto(dst[: hi - lo], sources[rnd.tensor][lo:hi])
            else:
                _copy(dst[: hi - lo], sources[rnd.tensor][lo:hi], self._queued)

    def _gather(self, out: torch.Tensor, part: torch.Tensor) -> dist.Work:
        """Start the all-gather of one round over the tensor-parallel group (its device
        group off CPU)."""
        group = self._tp.cpu_group
        if self._device.type != "cpu":
            part, group = (
                part.to(self._device, non_blocking=self._queued),
                self._tp.device_group,
            )
        if self._mark_step is not None:
            self._mark_step()
        return dist.all_gather_into_tensor(out, part, group=group, async_op=True)

    def _wait(self, work: dist.Work, what: str) -> None:
        try:
            work.wait(self._timeout)
        except RuntimeError as e:
            named = e if self.notice is None else self.notice.named(e)
            if named is not e:  # a notice broke the group, or closed it on the peer
                raise named from e
            raise PipelinePeerError(
                f"pipeline transfer: {what} failed or timed out "
                f"({self._timeout.total_seconds():g} s, VLLM_HPU_PP_TIMEOUT_S): {e}"
            ) from e

    def _count(self, layout: Layout) -> None:
        self.stats.count(layout.message_bytes, layout.parts > 1)
        if self._logs_stats and self.stats.messages % self._stats_every == 0:
            logger.info(
                "pipeline transfer, stage %d: %s", self._pp.rank_in_group, self.stats
            )
