# SPDX-License-Identifier: Apache-2.0
"""Stage-to-stage transfer of a forward's intermediate tensors over gloo (the host
network).

The HPU runner's calls::

    xfer = StageTransfer(get_pp_group(), get_tp_group(), device=device,
                         wait_device=sync)
    # not the last stage:
    handle = xfer.isend({"hidden_states": h, "residual": r}, num_tokens)
    handle.wait()  # or xfer.send(...)
    # not the first stage:
    tensors = xfer.recv(num_tokens)

``num_tokens`` is the padded batch of the forward; the receiver checks it against the
sender's. Every mismatch raises :class:`PipelineDesyncError`, a dead or silent peer
:class:`PipelinePeerError` within ``VLLM_HPU_PP_TIMEOUT_S``; after either, every later
call raises too. Nothing is returned on error.

Each pipeline rank talks to the same tensor-parallel rank of the neighbour stage over
the pipeline group's gloo group (vLLM's pipeline groups are built that way). Payloads of
``VLLM_HPU_PP_SPLIT_BYTES`` or more go in tensor-parallel parts, one per connection, and
the receiving stage all-gathers them on its tensor-parallel device group (HCCL on
Gaudi): with per-flow limited NICs, several streams carry more. Smaller payloads go
whole from every rank rather than from one rank plus a local broadcast: one hop and no
collective on the decode path (``bench/transfer.py`` compares the two); the price is
TP-size times the bytes on the NIC, which per-flow limits do not charge.

Host buffers are reused (allocating a large message's buffer costs about as much as
sending it): the receive buffer reserves ``VLLM_HPU_PP_MAX_MESSAGE_BYTES`` of address
space once, so any message fits without a size handshake, and only the touched pages
become memory.
``recv`` returns one fresh, contiguous tensor per key on ``device``, laid out like the
zeros a warm-up passes (an HPU graph keyed on its inputs' layout must not tell them
apart) and never a view of a buffer a later ``recv`` reuses. ``wait_device`` (the
caller's, e.g. a stream synchronize) runs before ``recv`` returns, since the host buffer
is reused afterwards. ``mark_step`` (the graph break of HPU lazy mode) runs before every
collective on the device, as vllm-gaudi's own communicator does before its collectives.
"""

from __future__ import annotations

from collections import deque
import functools
import time
from datetime import timedelta
from typing import Callable

import numpy as np
import torch
import torch.distributed as dist

from . import envs
from ._logging import get_logger
from .errors import PipelineDesyncError, PipelinePeerError
from .groups import GroupView, as_group
from .stats import TransferStats
from .wire import HEADER_BYTES, TAG, TRAILER_BYTES, Layout, decode, plan

__all__ = ["SendHandle", "StageTransfer"]

logger = get_logger(__name__)

_DEPTH = 2  # messages in flight per direction


def _copy(dst: torch.Tensor, src: torch.Tensor) -> None:
    """Copy bytes; host to host with numpy: torch's ``copy_`` wakes its intra-op thread
    pool, which on a busy host can cost more than the whole transfer."""
    if src.is_cpu and dst.is_cpu:
        np.copyto(dst.numpy(), src.numpy())
    else:
        dst.copy_(src)


class _Ring:
    """Host byte buffers used in turn and grown as needed, so the one being read is not
    the one being filled."""

    def __init__(self):
        self._buffers: list[torch.Tensor | None] = [None] * _DEPTH
        self._turn = 0

    def take(self, nbytes: int) -> torch.Tensor:
        i, self._turn = self._turn, (self._turn + 1) % _DEPTH
        buf = self._buffers[i]
        if buf is None or buf.numel() < nbytes:
            buf = self._buffers[i] = torch.empty(nbytes, dtype=torch.uint8)
        return buf[:nbytes]


def _stops_on_error(method):
    """Refuse to run after a desync or a lost peer, and remember the first such
    error."""

    @functools.wraps(method)
    def guarded(self: StageTransfer, *args, **kwargs):
        if self._broken is not None:
            raise type(self._broken)(
                f"pipeline transfer stopped by an earlier error: {self._broken}"
            )
        try:
            return method(self, *args, **kwargs)
        except (PipelineDesyncError, PipelinePeerError) as e:
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
    returns tensors; ``wait_device``: called before ``recv`` returns when that is not
    the CPU; ``mark_step``: called before each tensor-parallel all-gather (the runner
    passes it on HPU only). ``timeout_s``, ``split_bytes`` and ``stats_every`` override
    ``VLLM_HPU_PP_TIMEOUT_S``, ``VLLM_HPU_PP_SPLIT_BYTES`` and
    ``VLLM_HPU_PP_STATS_EVERY``.
    """

    def __init__(
        self,
        pp_group,
        tp_group=None,
        *,
        device: torch.device | str = "cpu",
        wait_device: Callable[[], None] | None = None,
        mark_step: Callable[[], None] | None = None,
        timeout_s: float | None = None,
        split_bytes: int | None = None,
        stats_every: int | None = None,
    ):
        self._pp = as_group(pp_group)
        self._tp: GroupView | None = (
            as_group(tp_group) if tp_group is not None else None
        )
        self._device = torch.device(device)
        self._wait_device = wait_device
        self._mark_step = mark_step
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
        self._staging = _Ring()
        self._received = _Ring()
        self._gathered = _Ring()
        self._pending: deque[SendHandle] = deque()
        self._next_rank = self._pp.ranks[
            self._pp.next_in_group
        ]  # global ranks, for messages
        self._prev_rank = self._pp.ranks[self._pp.prev_in_group]
        self._broken: Exception | None = None
        self.stats = TransferStats()

    @property
    def _tp_size(self) -> int:
        return self._tp.world_size if self._tp else 1

    @property
    def _tp_rank(self) -> int:
        return self._tp.rank_in_group if self._tp else 0

    def send(self, tensors: dict[str, torch.Tensor], num_tokens: int) -> None:
        self.isend(tensors, num_tokens).wait()

    @_stops_on_error
    def isend(self, tensors: dict[str, torch.Tensor], num_tokens: int) -> SendHandle:
        """Queue ``tensors`` for the next stage; they are copied before this returns, so
        may be reused."""
        start_s = time.perf_counter()
        layout, seq = (
            plan(tensors, num_tokens, self._tp_size, self._split_bytes),
            self._send_seq,
        )
        if (
            layout.message_bytes > self._max_bytes
        ):  # the receiver's gloo would abort on it, not raise
            raise ValueError(
                f"pipeline transfer: a {layout.message_bytes}-byte message exceeds "
                f"VLLM_HPU_PP_MAX_MESSAGE_BYTES={self._max_bytes}"
            )
        if len(self._pending) == _DEPTH:
            self._pending.popleft().wait()
        buf = self._staging.take(layout.message_bytes)
        layout.write_header(buf[:HEADER_BYTES].view(torch.int64).numpy(), seq)
        part = self._tp_rank if layout.parts > 1 else 0
        works, begin, pos = [], 0, HEADER_BYTES
        for i, rnd in enumerate(layout.rounds):
            self._pack(
                buf[pos : pos + rnd.slice_bytes],
                tensors,
                layout,
                rnd.start + part * rnd.slice_bytes,
            )
            pos += rnd.slice_bytes + TRAILER_BYTES
            buf[pos - TRAILER_BYTES : pos].view(torch.int64).numpy()[:] = (
                layout.trailer(seq, i)
            )
            works.append(
                dist.isend(
                    buf[begin:pos],
                    group=self._pp.cpu_group,
                    group_dst=self._pp.next_in_group,
                    tag=TAG,
                )
            )
            begin = pos
        handle = SendHandle(self, works)
        self._pending.append(handle)
        self._send_seq += 1
        self.stats.send_s += time.perf_counter() - start_s
        self._count(layout)
        return handle

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
        buf = self._received.take(self._max_bytes)
        self._recv_into(buf)
        seq, layout = decode(
            buf[:HEADER_BYTES].view(torch.int64).tolist(), self._max_bytes
        )
        self._expect(seq, layout, num_tokens)
        if layout.parts == 1:
            payload = self._round_body(buf, HEADER_BYTES, seq, layout, 0)
        else:
            payload = self._recv_split(buf, seq, layout)
        tensors = {
            spec.key: self._owned(
                payload[spec.offset : spec.offset + spec.nbytes], spec.dtype, spec.shape
            )
            for spec in layout.specs
        }
        if self._wait_device is not None:
            self._wait_device()
        self._recv_seq += 1
        self.stats.recv_s += time.perf_counter() - start_s
        self._count(layout)
        return tensors

    def _owned(
        self, data: torch.Tensor, dtype: torch.dtype, shape: tuple[int, ...]
    ) -> torch.Tensor:
        """A new contiguous tensor on the device holding ``data``'s bytes: its own
        storage, offset 0."""
        out = torch.empty(shape, dtype=dtype, device=self._device)
        _copy(out.view(-1).view(torch.uint8), data)
        return out

    def _recv_split(self, buf: torch.Tensor, seq: int, layout: Layout) -> torch.Tensor:
        """Receive the rounds of a split payload, all-gathering each while the next is
        on the wire."""
        out = self._gather_buffer(layout)
        gathers, pos = [], HEADER_BYTES
        for i, rnd in enumerate(layout.rounds):
            if i:
                self._recv_into(buf[pos:])
            body = self._round_body(buf, pos, seq, layout, i)
            gathers.append(
                self._gather(
                    out[rnd.start : rnd.start + layout.parts * rnd.slice_bytes], body
                )
            )
            pos += rnd.slice_bytes + TRAILER_BYTES
        start_s = time.perf_counter()
        for work in gathers:
            self._wait(
                work, f"all-gather over tensor-parallel ranks {list(self._tp.ranks)}"
            )
        self.stats.gather_s += time.perf_counter() - start_s
        return out[: layout.payload_bytes]

    def _recv_into(self, buf: torch.Tensor) -> None:
        self._wait(
            dist.irecv(
                buf, group=self._pp.cpu_group, group_src=self._pp.prev_in_group, tag=TAG
            ),
            f"receive from rank {self._prev_rank}",
        )

    def _round_body(
        self, buf: torch.Tensor, pos: int, seq: int, layout: Layout, round_index: int
    ) -> torch.Tensor:
        """The slice of a round that starts at ``pos``, once the trailer after it proves
        it complete."""
        end = pos + layout.rounds[round_index].slice_bytes
        trailer = buf[end : end + TRAILER_BYTES].view(torch.int64).numpy()
        got, expected = trailer.tolist(), layout.trailer(seq, round_index)
        trailer[:] = 0  # so a later, truncated message cannot pass on these bytes
        if got != expected:
            raise PipelineDesyncError(
                f"pipeline transfer: message {seq} truncated: expected trailer (magic, "
                f"seq, checksum, round) {expected} at byte {end}, got {got}"
            )
        return buf[pos:end]

    def _expect(self, seq: int, layout: Layout, num_tokens: int | None) -> None:
        for what, expected, got in (
            ("sequence number", self._recv_seq, seq),
            ("token count (padded batch)", num_tokens, layout.num_tokens),
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

    def _pack(
        self,
        dst: torch.Tensor,
        tensors: dict[str, torch.Tensor],
        layout: Layout,
        start: int,
    ) -> None:
        """Copy the payload bytes from offset ``start`` on into ``dst`` (past the
        payload: left as is)."""
        stop = start + dst.numel()
        for spec, t in zip(layout.specs, tensors.values()):
            lo, hi = max(spec.offset, start), min(spec.offset + spec.nbytes, stop)
            if lo < hi:
                src = t.contiguous().view(-1).view(torch.uint8)
                _copy(
                    dst[lo - start : hi - start],
                    src[lo - spec.offset : hi - spec.offset],
                )

    def _gather_buffer(self, layout: Layout) -> torch.Tensor:
        """Where a split payload is all-gathered: reused on CPU, fresh (the caching
        allocator's) on a device."""
        if self._device.type == "cpu":
            return self._gathered.take(layout.gathered_bytes)
        return torch.empty(
            layout.gathered_bytes, dtype=torch.uint8, device=self._device
        )

    def _gather(self, out: torch.Tensor, part: torch.Tensor) -> dist.Work:
        """Start the all-gather of one round over the tensor-parallel group (its device
        group off CPU)."""
        group = self._tp.cpu_group
        if self._device.type != "cpu":
            part, group = (
                part.to(self._device, non_blocking=True),
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
