# SPDX-License-Identifier: Apache-2.0
"""The stage-to-stage wire format: one message per forward and tensor-parallel part, no
pickle.

The payload is every tensor's bytes at a 64-byte aligned offset, in the sender's key
order. A whole payload goes as one gloo message ``header | payload | trailer``. A
payload split over ``parts`` tensor-parallel ranks goes in rounds of ``parts *
SLICE_BYTES``: in each round every rank sends its slice, ``header | slice | trailer``
first and ``slice | trailer`` after, so that the receiving stage all-gathers one round
while the next is still on the wire.

- header: 64 int64 words. ``magic, version, seq, num_tokens, payload_bytes, parts,
  num_tensors, checksum``, then per tensor ``key id, dtype id, ndim, dims...``, then
  zeros. ``checksum`` (FNV-1a of the words but seq and itself) makes a corrupted shape
  an error rather than a wrong view; leaving seq out lets both ends cache the
  :class:`Layout` of a batch shape (seq is checked on its own, and is in the trailer).
- trailer: ``magic, seq, checksum, round``. gloo accepts a message shorter than the
  posted buffer and does not say how long it was, so the trailer where the header says
  the slice ends proves it complete.

Keys and dtypes travel as indexes into fixed tables known to both stages, so a peer can
make the decoder raise :class:`PipelineDesyncError` and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import torch

from .errors import PipelineDesyncError

MAGIC = 0x50505F4750495045  # "PP_GPIPE"
VERSION = 1
HEADER_WORDS = 64
HEADER_BYTES = HEADER_WORDS * 8
TRAILER_BYTES = 32
SLICE_BYTES = 1 << 20  # per rank and round of a split payload
# gloo message tag: other point-to-point traffic on the pipeline group never matches
# ours
TAG = 0x5050
ALIGN = 64
MAX_DIMS = 4
MAX_PARTS = 64
_SEQ = 2
_CHECKSUM = 7
_FIXED = 8

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
    offset: int
    nbytes: int


@dataclass(frozen=True)
class Round:
    start: int  # payload offset of the round
    slice_bytes: int  # what each part carries in it (the whole payload when not split)


@dataclass(frozen=True)
class Layout:
    """A message but its sequence number: the same for every forward of one batch shape,
    so cached."""

    num_tokens: int
    parts: int
    specs: tuple[TensorSpec, ...]
    payload_bytes: int
    words: tuple[int, ...]  # the header, with seq 0
    rounds: tuple[Round, ...]
    message_bytes: (
        int  # all one rank sends: the header and every round's slice and trailer
    )
    # the all-gathered size: the payload and the padding of the last round's slices
    gathered_bytes: int
    header: np.ndarray = field(compare=False, repr=False)  # ``words`` as int64

    def write_header(self, out: np.ndarray, seq: int) -> None:
        """The header of message ``seq`` into ``out`` (64 int64)."""
        out[:] = self.header
        out[_SEQ] = seq

    def trailer(self, seq: int, round_index: int) -> list[int]:
        return [MAGIC, seq, self.words[_CHECKSUM], round_index]


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def checksum(words) -> int:
    h = 0xCBF29CE484222325
    for i, w in enumerate(words):
        if i != _SEQ and i != _CHECKSUM:
            h = ((h ^ (w & _M64)) * 0x100000001B3) & _M64
    return h >> 1  # fits a non-negative int64


def _specs(entries) -> tuple[tuple[TensorSpec, ...], int]:
    """Each tensor's place in the payload, and the payload size."""
    specs, offset = [], 0
    for key, dtype, shape in entries:
        numel = 1
        for d in shape:
            numel *= d
        nbytes = numel * dtype.itemsize
        specs.append(TensorSpec(key, dtype, shape, offset, nbytes))
        offset = _align(offset + nbytes)
    return tuple(specs), offset


def _layout(
    specs: tuple[TensorSpec, ...],
    payload_bytes: int,
    num_tokens: int,
    parts: int,
    words: tuple[int, ...] | None = None,
) -> Layout:
    """The layout of a payload in ``parts``; ``words``: the received header (else it is
    made here)."""
    if words is None:
        header = [MAGIC, VERSION, 0, num_tokens, payload_bytes, parts, len(specs), 0]
        for s in specs:
            header += [_KEY_IDS[s.key], _DTYPE_IDS[s.dtype], len(s.shape), *s.shape]
        header += [0] * (HEADER_WORDS - len(header))
        header[_CHECKSUM] = checksum(header)
        words = tuple(header)
    if parts == 1:
        rounds = (Round(0, payload_bytes),)
    else:
        step = parts * SLICE_BYTES
        rounds = tuple(
            Round(start, _align(-(-min(step, payload_bytes - start) // parts)))
            for start in range(0, max(payload_bytes, 1), step)
        )
    return Layout(
        num_tokens,
        parts,
        specs,
        payload_bytes,
        words,
        rounds,
        HEADER_BYTES + sum(r.slice_bytes + TRAILER_BYTES for r in rounds),
        rounds[-1].start + parts * rounds[-1].slice_bytes,
        np.array(words, dtype=np.int64),
    )


def plan(
    tensors: dict[str, torch.Tensor],
    num_tokens: int,
    split_parts: int,
    split_bytes: int,
) -> Layout:
    """The layout of an outgoing message; raises ``ValueError`` for what cannot be sent.

    The payload goes in ``split_parts`` parts when it has at least ``split_bytes``
    bytes, else whole.
    """
    return _plan(
        tuple((k, t.dtype, tuple(t.shape)) for k, t in tensors.items()),
        num_tokens,
        split_parts,
        split_bytes,
    )


@lru_cache(maxsize=256)
def _plan(entries, num_tokens: int, split_parts: int, split_bytes: int) -> Layout:
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
    specs, payload_bytes = _specs(entries)
    return _layout(
        specs,
        payload_bytes,
        num_tokens,
        split_parts if payload_bytes >= split_bytes else 1,
    )


def decode(words: list[int], max_message_bytes: int) -> tuple[int, Layout]:
    """The sequence number and layout of a received header; anything malformed raises
    :class:`PipelineDesyncError`."""
    if len(words) != HEADER_WORDS:
        _bad("length", HEADER_WORDS, len(words))
    layout = _decode(
        tuple(words[:_SEQ]) + (0,) + tuple(words[_SEQ + 1 :]), max_message_bytes
    )
    if words[_SEQ] < 0:
        _bad("sequence number", ">= 0", words[_SEQ])
    return words[_SEQ], layout


def _bad(what: str, expected, got):
    raise PipelineDesyncError(
        f"pipeline transfer: bad header {what}: expected {expected}, got {got}"
    )


@lru_cache(maxsize=256)
def _decode(words: tuple[int, ...], max_message_bytes: int) -> Layout:
    magic, version, _, num_tokens, payload_bytes, parts, count, check = words[:_FIXED]
    if magic != MAGIC:
        _bad("magic", hex(MAGIC), hex(magic & _M64))
    if version != VERSION:
        _bad("protocol version", VERSION, version)
    if check != checksum(words):
        _bad("checksum", hex(checksum(words)), hex(check & _M64))
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
            or any(not 0 <= d <= max_message_bytes for d in shape)
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
    if payload_bytes > max_message_bytes:
        _bad(
            "payload size",
            f"at most {max_message_bytes} bytes (VLLM_HPU_PP_MAX_MESSAGE_BYTES)",
            payload_bytes,
        )
    layout = _layout(specs, payload_bytes, num_tokens, parts, words)
    if layout.message_bytes > max_message_bytes:
        _bad(
            "message size",
            f"at most {max_message_bytes} bytes (VLLM_HPU_PP_MAX_MESSAGE_BYTES)",
            layout.message_bytes,
        )
    return layout
