"""The stage-to-stage wire format: one message per forward and tensor-parallel part, no pickle.

The payload is every tensor's bytes at a 64-byte aligned offset, in the sender's key order. A whole
payload goes as one gloo message ``header | payload | trailer``. A payload split over ``parts``
tensor-parallel ranks goes in rounds of ``parts * SLICE_BYTES``: in each round every rank sends its
slice, ``header | slice | trailer`` first and ``slice | trailer`` after, so that the receiving stage
all-gathers one round while the next is still on the wire.

- header: 64 int64 words. ``magic, version, seq, num_tokens, payload_bytes, parts, num_tensors,
  checksum``, then per tensor ``key id, dtype id, ndim, dims...``, then zeros. ``checksum`` (FNV-1a of
  the other 63 words) makes a corrupted shape an error rather than a wrong view.
- trailer: ``magic, seq, checksum, round``. gloo accepts a message shorter than the posted buffer and
  does not say how long it was, so the trailer where the header says the slice ends proves it complete.

Keys and dtypes travel as indexes into fixed tables known to both stages, so a peer can make the
decoder raise :class:`PipelineDesyncError` and nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch

from .errors import PipelineDesyncError

MAGIC = 0x50505F4750495045  # "PP_GPIPE"
VERSION = 1
HEADER_WORDS = 64
HEADER_BYTES = HEADER_WORDS * 8
TRAILER_BYTES = 32
SLICE_BYTES = 1 << 20  # per rank and round of a split payload
ALIGN = 64
MAX_DIMS = 4
MAX_PARTS = 64
_FIXED = 8
_CHECKSUM = 7

# What vLLM 0.30.0 models put in IntermediateTensors: hidden_states and residual (all decoder models),
# per_layer_inputs (gemma4), aux_hidden_states_<i> (EAGLE-3 targets, EagleModelMixin.AUX_HIDDEN_STATE_KEY).
KEYS: tuple[str, ...] = ("hidden_states", "residual", "per_layer_inputs",
                         *(f"aux_hidden_states_{i}" for i in range(8)))
DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.bfloat16, torch.float16, torch.float64,
                                   torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool)
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
class Header:
    seq: int
    num_tokens: int
    parts: int
    specs: tuple[TensorSpec, ...]
    payload_bytes: int
    checksum: int

    @cached_property
    def rounds(self) -> tuple[Round, ...]:
        if self.parts == 1:
            return (Round(0, self.payload_bytes),)
        step = self.parts * SLICE_BYTES
        return tuple(Round(start, _align(-(-min(step, self.payload_bytes - start) // self.parts)))
                     for start in range(0, max(self.payload_bytes, 1), step))

    @property
    def message_bytes(self) -> int:
        """All a rank sends for this message: the header and every round's slice and trailer."""
        return HEADER_BYTES + sum(r.slice_bytes + TRAILER_BYTES for r in self.rounds)

    @property
    def gathered_bytes(self) -> int:
        """The all-gathered size: the payload, and the padding of the last round's slices."""
        last = self.rounds[-1]
        return last.start + self.parts * last.slice_bytes

    def trailer(self, round_index: int) -> list[int]:
        return [MAGIC, self.seq, self.checksum, round_index]


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def checksum(words: list[int]) -> int:
    h = 0xCBF29CE484222325
    for i, w in enumerate(words):
        if i != _CHECKSUM:
            h = ((h ^ (w & _M64)) * 0x100000001B3) & _M64
    return h >> 1  # fits a non-negative int64


def _layout(entries: list[tuple[str, torch.dtype, tuple[int, ...]]]) -> tuple[tuple[TensorSpec, ...], int]:
    specs, offset = [], 0
    for key, dtype, shape in entries:
        numel = 1
        for d in shape:
            numel *= d
        nbytes = numel * dtype.itemsize
        specs.append(TensorSpec(key, dtype, shape, offset, nbytes))
        offset = _align(offset + nbytes)
    return tuple(specs), offset


def _words(seq: int, num_tokens: int, parts: int, specs: tuple[TensorSpec, ...], payload_bytes: int) -> list[int]:
    words = [MAGIC, VERSION, seq, num_tokens, payload_bytes, parts, len(specs), 0]
    for s in specs:
        words += [_KEY_IDS[s.key], _DTYPE_IDS[s.dtype], len(s.shape), *s.shape]
    return words + [0] * (HEADER_WORDS - len(words))


def plan(tensors: dict[str, torch.Tensor], num_tokens: int, seq: int,
         split_parts: int, split_bytes: int) -> tuple[Header, list[int]]:
    """The header of an outgoing message and its words; raises ``ValueError`` for what cannot be sent.

    The payload goes in ``split_parts`` parts when it has at least ``split_bytes`` bytes, else whole.
    """
    entries = []
    for key, t in tensors.items():
        if key not in _KEY_IDS:
            raise ValueError(f"pipeline transfer: unknown tensor key {key!r}; known keys: {', '.join(KEYS)}")
        if t.dtype not in _DTYPE_IDS:
            raise ValueError(f"pipeline transfer: {key!r} has unsupported dtype {t.dtype}")
        if not 1 <= t.dim() <= MAX_DIMS or t.shape[0] != num_tokens:
            raise ValueError(f"pipeline transfer: {key!r} has shape {tuple(t.shape)}; "
                             f"want 1 to {MAX_DIMS} dims, the first being num_tokens={num_tokens}")
        entries.append((key, t.dtype, tuple(t.shape)))
    if not entries or _FIXED + sum(3 + len(e[2]) for e in entries) > HEADER_WORDS:
        raise ValueError(f"pipeline transfer: {len(entries)} tensors do not fit a {HEADER_WORDS}-word header")
    specs, payload_bytes = _layout(entries)
    parts = split_parts if payload_bytes >= split_bytes else 1
    words = _words(seq, num_tokens, parts, specs, payload_bytes)
    words[_CHECKSUM] = checksum(words)
    return Header(seq, num_tokens, parts, specs, payload_bytes, words[_CHECKSUM]), words


def decode(words: list[int], max_message_bytes: int) -> Header:
    """Parse and check a received header; anything malformed raises :class:`PipelineDesyncError`."""
    def bad(what: str, expected, got):
        raise PipelineDesyncError(f"pipeline transfer: bad header {what}: expected {expected}, got {got}")

    if len(words) != HEADER_WORDS:
        bad("length", HEADER_WORDS, len(words))
    magic, version, seq, num_tokens, payload_bytes, parts, count, check = words[:_FIXED]
    if magic != MAGIC:
        bad("magic", hex(MAGIC), hex(magic & _M64))
    if version != VERSION:
        bad("protocol version", VERSION, version)
    if check != checksum(words):
        bad("checksum", hex(checksum(words)), hex(check & _M64))
    if seq < 0 or num_tokens < 1 or not 1 <= parts <= MAX_PARTS or not 1 <= count <= len(KEYS):
        bad("fields", "seq>=0, num_tokens>=1, 1<=parts<=64, 1<=tensors<=11",
            f"seq={seq} num_tokens={num_tokens} parts={parts} tensors={count}")
    entries, i = [], _FIXED
    for _ in range(count):
        if i + 3 > HEADER_WORDS:
            bad("tensor table", f"at most {HEADER_WORDS} words", "more")
        key_id, dtype_id, ndim = words[i:i + 3]
        if not 0 <= key_id < len(KEYS) or not 0 <= dtype_id < len(DTYPES) or not 1 <= ndim <= MAX_DIMS:
            bad("tensor entry", "known key, known dtype, 1-4 dims", f"key={key_id} dtype={dtype_id} ndim={ndim}")
        shape = tuple(words[i + 3:i + 3 + ndim])
        if len(shape) != ndim or shape[0] != num_tokens or any(not 0 <= d <= max_message_bytes for d in shape):
            bad(f"shape of {KEYS[key_id]}", f"{ndim} dims starting with num_tokens={num_tokens}", shape)
        if any(KEYS[key_id] == e[0] for e in entries):
            bad("tensor table", "distinct keys", f"{KEYS[key_id]} twice")
        entries.append((KEYS[key_id], DTYPES[dtype_id], shape))
        i += 3 + ndim
    if any(words[i:]):
        bad("padding", "zeros after the tensor table", words[i:])
    specs, expected_bytes = _layout(entries)
    if payload_bytes != expected_bytes:
        bad("payload size", expected_bytes, payload_bytes)
    if payload_bytes > max_message_bytes:
        bad("payload size", f"at most {max_message_bytes} bytes (VLLM_HPU_PP_MAX_MESSAGE_BYTES)", payload_bytes)
    header = Header(seq, num_tokens, parts, specs, payload_bytes, check)
    if header.message_bytes > max_message_bytes:
        bad("message size", f"at most {max_message_bytes} bytes (VLLM_HPU_PP_MAX_MESSAGE_BYTES)",
            header.message_bytes)
    return header
