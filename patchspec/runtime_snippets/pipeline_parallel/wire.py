# SPDX-License-Identifier: Apache-2.0
"""The stage-to-stage wire format: one message per forward and tensor-parallel part, no
pickle.

A whole payload (every tensor's bytes at a 64-byte aligned offset, in the sender's key
order) goes as one gloo message ``header | payload | trailer``. A payload split over
``parts`` tensor-parallel ranks goes tensor by tensor in rounds of at most ``parts *
SLICE_BYTES`` of one tensor: in each round every rank sends its slice, ``header | slice
| trailer`` first and ``slice | trailer`` after, so that the receiving stage all-gathers
one round straight into the tensor it returns while the next round is on the wire.

- header: 64 int64 words. ``magic, version, seq, step, forward, rows, kind,
  num_tokens, payload_bytes, parts, num_tensors, last_layer, checksum``, then per
  tensor ``key id, dtype id, ndim, dims...``, then zeros. ``seq`` counts messages,
  ``step`` and ``forward`` name the forward (the scheduler step, counted alike on every
  stage, and the forward's index in it), ``rows`` is a digest of what fixes the rows of
  the forward (:func:`rows_digest`: the padded batch shape, the requests in row order
  and their token counts; 0: not given), ``last_layer`` is the sender's last decoder
  layer. ``checksum`` (FNV-1a of every word but seq, step, forward, rows and itself)
  makes a corrupted shape an error rather than a wrong view; leaving the per-message
  words out lets both ends cache the :class:`Layout` of a batch shape. Version 3 added
  ``rows``: two stages that pad the same token count in different rows (one bucket of
  1 x 1024 against 2 x 512) would otherwise read each other's rows shifted.
- an abort (``kind`` ABORT) is a header alone: ``num_tokens`` and ``num_tensors`` 0,
  ``payload_bytes`` the length of the UTF-8 reason held in the words after the fixed
  ones. A stage whose step failed sends it instead of that step's tensors.
- trailer: ``magic, seq, checksum, round``. gloo accepts a message shorter than the
  posted buffer and does not say how long it was, so the trailer where the header says
  the slice ends proves it complete.

Both ends compare the same quantity with ``VLLM_HPU_PP_MAX_MESSAGE_BYTES``: the bytes of
one rank's message (:func:`rank_message_bytes`), never the whole payload, which a split
message spreads over the tensor-parallel ranks.

Keys and dtypes travel as indexes into fixed tables known to both stages, so a peer can
make the decoder raise :class:`PipelineDesyncError` and nothing else.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

import numpy as np
import torch

from .errors import PipelineDesyncError

MAGIC = 0x50505F4750495045  # "PP_GPIPE"
VERSION = 3
HEADER_WORDS = 64
HEADER_BYTES = HEADER_WORDS * 8
TRAILER_BYTES = 32
SLICE_BYTES = 1 << 20  # per rank and round of a split payload (a multiple of ALIGN)
# gloo message tag: other point-to-point traffic on the pipeline group never matches
# ours
TAG = 0x5050
ALIGN = 64
MAX_DIMS = 4
MAX_PARTS = 64
DATA, ABORT = 0, 1
_SEQ, _STEP, _FORWARD, _ROWS, _KIND = 2, 3, 4, 5, 6
_TOKENS, _PAYLOAD, _PARTS, _COUNT, _LAST_LAYER, _CHECKSUM = 7, 8, 9, 10, 11, 12
_FIXED = 13
# out of the checksum and of cached layouts
_PER_MESSAGE = (_SEQ, _STEP, _FORWARD, _ROWS)
_PER_MESSAGE_BYTES = (_SEQ * 8, (_ROWS + 1) * 8)  # where they are in a header
ROWS_BYTES = (_ROWS * 8, (_ROWS + 1) * 8)  # where the rows digest is in a header
_NOT_SUMMED = (*_PER_MESSAGE, _CHECKSUM)
# the per-message words and a trailer, packed into and read from a buffer's bytes in
# place (numpy views cost more per message than the few words they touch)
_PER_MESSAGE_WORDS = struct.Struct("<4q")
_ROWS_WORD = struct.Struct("<q")
_TRAILER = struct.Struct("<4q")
MAX_REASON_BYTES = (HEADER_WORDS - _FIXED) * 8

# What vLLM 0.30.0 models put in IntermediateTensors: hidden_states and residual (all
# decoder models), per_layer_inputs (gemma4), aux_hidden_states_<i> (EAGLE-3 targets,
# EagleModelMixin.AUX_HIDDEN_STATE_KEY).
KEYS: tuple[str, ...] = (
    "hidden_states",
    "residual",
    "per_layer_inputs",
    *(f"aux_hidden_states_{i}" for i in range(8)),
)
DTYPES: tuple[torch.dtype, ...] = (
    torch.float32,
    torch.bfloat16,
    torch.float16,
    torch.float64,
    torch.int64,
    torch.int32,
    torch.int8,
    torch.uint8,
    torch.bool,
)
_KEY_IDS = {k: i for i, k in enumerate(KEYS)}
_DTYPE_IDS = {d: i for i, d in enumerate(DTYPES)}
_M64 = (1 << 64) - 1


@dataclass(frozen=True)
class TensorSpec:
    key: str
    dtype: torch.dtype
    shape: tuple[int, ...]
    offset: int  # in a whole payload
    nbytes: int


@dataclass(frozen=True)
class Round:
    """One message part of every rank: ``length`` bytes from byte ``start`` of tensor
    ``tensor`` (-1: of the whole payload), ``slice_bytes`` of them per rank."""

    tensor: int
    start: int
    length: int
    slice_bytes: int

    def fills(self, parts: int) -> bool:
        """Whether the ranks' slices, gathered, are exactly the round's bytes."""
        return self.length == parts * self.slice_bytes


@dataclass(frozen=True)
class Layout:
    """A data message but its per-message words: the same for every forward of one
    batch shape, so cached."""

    num_tokens: int
    parts: int
    last_layer: int
    specs: tuple[TensorSpec, ...]
    payload_bytes: int
    words: tuple[int, ...]  # the header, with seq, step and forward 0
    rounds: tuple[Round, ...]
    # all one rank sends: the header and every round's slice and trailer
    message_bytes: int
    header: bytes = field(compare=False, repr=False)  # ``words`` as int64 bytes

    def write_header(
        self,
        out: np.ndarray | memoryview,
        seq: int,
        step: int = 0,
        forward: int = 0,
        rows: int = 0,
    ) -> None:
        """The header of message ``seq``, forward ``forward`` of ``step`` whose rows
        digest is ``rows``, into the first ``HEADER_BYTES`` of ``out`` (a writable array
        or bytes view)."""
        view = out if isinstance(out, memoryview) else memoryview(out).cast("B")
        view[:HEADER_BYTES] = self.header
        _PER_MESSAGE_WORDS.pack_into(view, _SEQ * 8, seq, step, forward, rows)

    def header_bytes(self, seq: int, step: int, forward: int, rows: int = 0) -> bytes:
        """The header of message ``seq``, forward ``forward`` of ``step``."""
        out = bytearray(HEADER_BYTES)
        self.write_header(memoryview(out), seq, step, forward, rows)
        return bytes(out)

    def trailer(self, seq: int, round_index: int) -> tuple[int, ...]:
        return (MAGIC, seq, self.words[_CHECKSUM], round_index)

    def trailer_bytes(self, seq: int, round_index: int) -> bytes:
        return _TRAILER.pack(*self.trailer(seq, round_index))

    def write_trailer(
        self, out: memoryview, offset: int, seq: int, round_index: int
    ) -> None:
        """The trailer of round ``round_index`` of message ``seq`` at byte ``offset``
        of ``out`` (bytes)."""
        _TRAILER.pack_into(out, offset, *self.trailer(seq, round_index))


def read_rows(view: memoryview) -> int:
    """The rows digest of the header at the start of ``view`` (bytes)."""
    return _ROWS_WORD.unpack_from(view, ROWS_BYTES[0])[0]


def rows_digest(shape: Sequence[int], requests: int) -> int:
    """What fixes the rows of one forward, as a header word: the padded batch's shape
    (``(batch, seq)``: 1 x 1024 and 2 x 512 hold the same token count in other rows)
    and ``requests``, the digest of the step's requests in row order with their token
    counts (:func:`requests_digest`). Never 0 (0 means not given)."""
    packed = struct.pack(f"<q{len(shape)}q", requests, *shape)
    h = hashlib.blake2b(packed, digest_size=8)
    return (int.from_bytes(h.digest(), "little") >> 1) or 1


def requests_digest(requests: Sequence[tuple[str, int]]) -> int:
    """A digest of ``(request id, tokens this step)`` in the order the batch's rows
    hold them."""
    h = hashlib.blake2b(digest_size=8)
    for req_id, tokens in requests:
        h.update(f"{req_id}\0{tokens}\0".encode())
    return int.from_bytes(h.digest(), "little") >> 1


def read_trailer(view: memoryview, offset: int) -> tuple[int, ...]:
    """The four trailer words at byte ``offset`` of ``view``."""
    return _TRAILER.unpack_from(view, offset)


class Message(NamedTuple):
    """A decoded header: a data message's ``layout``, or an abort's ``reason`` (a
    tuple: one is made per received message)."""

    seq: int
    step: int
    forward: int
    rows: int
    last_layer: int
    layout: Layout | None
    reason: str | None = None


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def checksum(words) -> int:
    h = 0xCBF29CE484222325
    for i, w in enumerate(words):
        if i not in _NOT_SUMMED:
            h = ((h ^ (w & _M64)) * 0x100000001B3) & _M64
    return h >> 1  # fits a non-negative int64


def _specs(entries) -> tuple[tuple[TensorSpec, ...], int]:
    """Each tensor's place in a whole payload, and the payload size."""
    specs, offset = [], 0
    for key, dtype, shape in entries:
        numel = 1
        for d in shape:
            numel *= d
        nbytes = numel * dtype.itemsize
        specs.append(TensorSpec(key, dtype, shape, offset, nbytes))
        offset = _align(offset + nbytes)
    return tuple(specs), offset


def _split_bytes_per_rank(specs: tuple[TensorSpec, ...], parts: int) -> int:
    """What one rank sends of a split message, counted without listing its rounds."""
    step, total = parts * SLICE_BYTES, HEADER_BYTES
    for s in specs:
        full, rest = divmod(s.nbytes, step)
        total += full * (SLICE_BYTES + TRAILER_BYTES)
        if rest:
            total += _align(-(-rest // parts)) + TRAILER_BYTES
    return total


def _rounds(specs: tuple[TensorSpec, ...], parts: int) -> tuple[Round, ...]:
    step, rounds = parts * SLICE_BYTES, []
    for i, s in enumerate(specs):
        for start in range(0, s.nbytes, step):
            length = min(step, s.nbytes - start)
            rounds.append(Round(i, start, length, _align(-(-length // parts))))
    return tuple(rounds)


def _layout(
    specs: tuple[TensorSpec, ...],
    payload_bytes: int,
    num_tokens: int,
    parts: int,
    last_layer: int,
    max_message_bytes: int | None,
    words: tuple[int, ...] | None = None,
) -> Layout:
    """The layout of a payload in ``parts``; ``words``: the received header (else it is
    made here). Larger than ``max_message_bytes`` per rank: an error, found before the
    rounds are listed."""
    if words is None:
        header = [MAGIC, VERSION, 0, 0, 0, 0, DATA, num_tokens, payload_bytes, parts]
        header += [len(specs), last_layer, 0]
        for s in specs:
            header += [_KEY_IDS[s.key], _DTYPE_IDS[s.dtype], len(s.shape), *s.shape]
        header += [0] * (HEADER_WORDS - len(header))
        header[_CHECKSUM] = checksum(header)
        words = tuple(header)
    message_bytes = (
        HEADER_BYTES + payload_bytes + TRAILER_BYTES
        if parts == 1
        else _split_bytes_per_rank(specs, parts)
    )
    if max_message_bytes is not None and message_bytes > max_message_bytes:
        raise ValueError(size_error(message_bytes, max_message_bytes))
    rounds = (
        (Round(-1, 0, payload_bytes, payload_bytes),)
        if parts == 1
        else _rounds(specs, parts)
    )
    return Layout(
        num_tokens,
        parts,
        last_layer,
        specs,
        payload_bytes,
        words,
        rounds,
        message_bytes,
        np.array(words, dtype=np.int64).tobytes(),
    )


def size_error(message_bytes: int, max_message_bytes: int) -> str:
    """The one line for a message one rank may not send or receive."""
    return (
        f"pipeline transfer: a forward's message of {message_bytes} bytes per "
        f"tensor-parallel rank exceeds VLLM_HPU_PP_MAX_MESSAGE_BYTES="
        f"{max_message_bytes}: raise it on every node"
    )


def rank_message_bytes(
    tensors: dict[str, torch.Tensor],
    num_tokens: int,
    split_parts: int,
    split_bytes: int,
) -> int:
    """What one tensor-parallel rank sends to (and its peer receives from) the
    neighbouring stage for a forward of ``tensors`` (meta tensors will do: only shapes
    and dtypes are read): the quantity both ends compare with
    ``VLLM_HPU_PP_MAX_MESSAGE_BYTES``."""
    return plan(tensors, num_tokens, split_parts, split_bytes).message_bytes


def plan(
    tensors: dict[str, torch.Tensor],
    num_tokens: int,
    split_parts: int,
    split_bytes: int,
    last_layer: int = -1,
) -> Layout:
    """The layout of an outgoing message; raises ``ValueError`` for what cannot be sent.

    The payload goes in ``split_parts`` parts when it has at least ``split_bytes``
    bytes, else whole. ``last_layer``: the sender's last decoder layer (-1: unknown).
    """
    return _plan(
        tuple((k, t.dtype, tuple(t.shape)) for k, t in tensors.items()),
        num_tokens,
        split_parts,
        split_bytes,
        last_layer,
    )


@lru_cache(maxsize=256)
def _plan(
    entries, num_tokens: int, split_parts: int, split_bytes: int, last_layer: int
) -> Layout:
    for key, dtype, shape in entries:
        if key not in _KEY_IDS:
            raise ValueError(
                f"pipeline transfer: unknown tensor key {key!r}; "
                f"known keys: {', '.join(KEYS)}"
            )
        if dtype not in _DTYPE_IDS:
            raise ValueError(
                f"pipeline transfer: {key!r} has unsupported dtype {dtype}"
            )
        if not 1 <= len(shape) <= MAX_DIMS or shape[0] != num_tokens:
            raise ValueError(
                f"pipeline transfer: {key!r} has shape {shape}; "
                f"want 1 to {MAX_DIMS} dims, the first being num_tokens={num_tokens}"
            )
    if not entries or _FIXED + sum(3 + len(e[2]) for e in entries) > HEADER_WORDS:
        raise ValueError(
            f"pipeline transfer: {len(entries)} tensors do not fit a "
            f"{HEADER_WORDS}-word header"
        )
    if not 1 <= split_parts <= MAX_PARTS:
        raise ValueError(
            f"pipeline transfer: {split_parts} tensor-parallel parts; at most "
            f"{MAX_PARTS}"
        )
    specs, payload_bytes = _specs(entries)
    split = split_parts > 1 and payload_bytes >= max(split_bytes, 1)
    return _layout(
        specs, payload_bytes, num_tokens, split_parts if split else 1, last_layer, None
    )


def abort_header(seq: int, step: int, forward: int, last_layer: int, reason: str):
    """The 64 words of an abort: message ``seq`` says forward ``forward`` of ``step``
    failed for ``reason`` (cut to what the header holds)."""
    text = reason.encode("utf-8", "replace")[:MAX_REASON_BYTES]
    words = np.zeros(HEADER_WORDS, dtype=np.int64)
    words[:_LAST_LAYER] = [MAGIC, VERSION, 0, 0, 0, 0, ABORT, 0, len(text), 0, 0]
    words[_LAST_LAYER], words[_CHECKSUM] = last_layer, 0
    words[_FIXED:].view(np.uint8)[: len(text)] = np.frombuffer(text, dtype=np.uint8)
    words[_CHECKSUM] = checksum(words.tolist())
    words[_SEQ], words[_STEP], words[_FORWARD] = seq, step, forward
    return words


def decode(
    header: bytes | np.ndarray | Sequence[int], max_message_bytes: int
) -> Message:
    """The message a received header announces (its ``HEADER_BYTES`` bytes, as the
    receiver reads them, or its ``HEADER_WORDS`` int64 words); anything malformed
    raises :class:`PipelineDesyncError`."""
    if not isinstance(header, bytes):
        words = np.asarray(header, dtype=np.int64)
        if words.shape != (HEADER_WORDS,):
            _bad("length", HEADER_WORDS, words.size)
        header = words.tobytes()
    elif len(header) != HEADER_BYTES:
        _bad("length", HEADER_BYTES, len(header))
    seq, step, forward, rows = _PER_MESSAGE_WORDS.unpack_from(header, _SEQ * 8)
    lo, hi = _PER_MESSAGE_BYTES
    # the header's bytes but the per-message words: one cache entry per batch shape
    layout = _decode(header[:lo] + header[hi:], max_message_bytes)
    if min(seq, step, forward) < 0:
        for what, value in (
            ("sequence number", seq),
            ("step", step),
            ("forward", forward),
        ):
            if value < 0:
                _bad(what, ">= 0", value)
    if isinstance(layout, str):
        (last_layer,) = struct.unpack_from("<q", header, _LAST_LAYER * 8)
        return Message(seq, step, forward, rows, last_layer, None, layout)
    return Message(seq, step, forward, rows, layout.last_layer, layout)


def _bad(what: str, expected, got):
    raise PipelineDesyncError(
        f"pipeline transfer: bad header {what}: expected {expected}, got {got}"
    )


@lru_cache(maxsize=256)
def _decode(key: bytes, max_message_bytes: int) -> Layout | str:
    """A data message's layout, or an abort's reason, from the bytes of its header
    without the per-message words."""
    lo, hi = _PER_MESSAGE_BYTES
    header = key[:lo] + bytes(hi - lo) + key[lo:]  # the per-message words 0
    words = tuple(np.frombuffer(header, dtype=np.int64).tolist())
    magic, version = words[0], words[1]
    kind, num_tokens, payload_bytes, parts, count = words[_KIND:_LAST_LAYER]
    last_layer, check = words[_LAST_LAYER], words[_CHECKSUM]
    if magic != MAGIC:
        _bad("magic", hex(MAGIC), hex(magic & _M64))
    if version != VERSION:
        _bad("protocol version", VERSION, version)
    if check != checksum(words):
        _bad("checksum", hex(checksum(words)), hex(check & _M64))
    if last_layer < -1:
        _bad("last layer", ">= -1", last_layer)
    if kind == ABORT:
        if (num_tokens, parts, count) != (0, 0, 0) or not (
            0 <= payload_bytes <= MAX_REASON_BYTES
        ):
            _bad("abort", f"a reason of <= {MAX_REASON_BYTES} bytes", words[:_FIXED])
        text = np.array(words[_FIXED:], dtype=np.int64).view(np.uint8)[:payload_bytes]
        return text.tobytes().decode("utf-8", "replace")
    if kind != DATA:
        _bad("kind", f"{DATA} (data) or {ABORT} (abort)", kind)
    if num_tokens < 1 or not 1 <= parts <= MAX_PARTS or not 1 <= count <= len(KEYS):
        _bad(
            "fields",
            f"num_tokens>=1, 1<=parts<={MAX_PARTS}, 1<=tensors<={len(KEYS)}",
            f"num_tokens={num_tokens} parts={parts} tensors={count}",
        )
    entries, i = [], _FIXED
    for _ in range(count):
        if i + 3 > HEADER_WORDS:
            _bad("tensor table", f"at most {HEADER_WORDS} words", "more")
        key_id, dtype_id, ndim = words[i : i + 3]
        if (
            not 0 <= key_id < len(KEYS)
            or not 0 <= dtype_id < len(DTYPES)
            or not 1 <= ndim <= MAX_DIMS
        ):
            _bad(
                "tensor entry",
                "known key, known dtype, 1-4 dims",
                f"key={key_id} dtype={dtype_id} ndim={ndim}",
            )
        shape = words[i + 3 : i + 3 + ndim]
        if (
            len(shape) != ndim
            or shape[0] != num_tokens
            or any(not 0 <= d <= MAX_PARTS * max_message_bytes for d in shape)
        ):
            _bad(
                f"shape of {KEYS[key_id]}",
                f"{ndim} dims starting with num_tokens={num_tokens}",
                shape,
            )
        if any(KEYS[key_id] == e[0] for e in entries):
            _bad("tensor table", "distinct keys", f"{KEYS[key_id]} twice")
        entries.append((KEYS[key_id], DTYPES[dtype_id], tuple(shape)))
        i += 3 + ndim
    if any(words[i:]):
        _bad("padding", "zeros after the tensor table", words[i:])
    specs, expected_bytes = _specs(entries)
    if payload_bytes != expected_bytes:
        _bad("payload size", expected_bytes, payload_bytes)
    try:
        return _layout(
            specs, payload_bytes, num_tokens, parts, last_layer, max_message_bytes,
            words,
        )
    except ValueError as e:
        raise PipelineDesyncError(str(e)) from None
