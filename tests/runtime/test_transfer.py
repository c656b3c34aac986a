"""The stage-to-stage transfer between real processes over gloo on 127.0.0.1.

Each session starts its processes once and runs several scenarios in them (start-up dominates); every
process is joined, or killed, before the session returns.
"""
from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import queue
import signal
import socket
import struct
import time
import traceback
import types
from datetime import timedelta

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from hypothesis import given, settings
from hypothesis import strategies as st

from patchspec.runtime_snippets.pipeline_parallel import (
    PipelineAbortError,
    PipelineDesyncError,
    PipelineHandshakeError,
    PipelinePeerError,
    StageTransfer,
    handshake,
    wire,
)
from patchspec.runtime_snippets.pipeline_parallel.transfer import in_step

SESSION_S = 40.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank, world, tp, port, results, released, scenarios, env):
    os.environ.update(env, GLOO_SOCKET_IFNAME="lo")  # gloo on 127.0.0.1 only
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=SESSION_S))
    pp_groups = [dist.new_group([t, t + tp]) for t in range(tp)]
    tp_groups = [dist.new_group(list(range(s * tp, s * tp + tp))) for s in range(2)]
    stage, t = divmod(rank, tp)
    for scenario in scenarios:
        try:
            value = scenario(stage, pp_groups[t], tp_groups[stage] if tp > 1 else None)
        except BaseException:
            value = traceback.format_exc()
        results.put((scenario.__name__, rank, value))
    # no rank's exit closes a connection before every rank has reported: a peer's exit is a scenario's
    # event (one kills itself), never the end of a faster rank's session
    released.wait(SESSION_S)


def _session(scenarios, tp: int, env: dict | None = None) -> dict[str, dict[int, object]]:
    """Run each ``scenario(stage, pp_group, tp_group)`` in turn on PP2 x ``tp`` processes.

    Returns, per scenario name, each rank's return value (or traceback); a killed rank is missing.
    """
    ctx = mp.get_context("forkserver")  # children fork from one server that imported torch and this module
    ctx.set_forkserver_preload([__name__])
    results, released = ctx.Queue(), ctx.Event()
    port, world = _free_port(), 2 * tp
    procs = [ctx.Process(target=_entry, args=(r, world, tp, port, results, released, scenarios, env or {}))
             for r in range(world)]
    for p in procs:
        p.start()
    got: dict[str, dict[int, object]] = {s.__name__: {} for s in scenarios}

    def reported(rank: int) -> bool:  # all its results are in, or it is gone
        return all(rank in g for g in got.values()) or not procs[rank].is_alive()

    deadline = time.monotonic() + SESSION_S
    try:
        while not all(map(reported, range(world))) and time.monotonic() < deadline:
            try:
                name, rank, value = results.get(timeout=0.2)
                got[name][rank] = value
            except queue.Empty:
                pass
        while not results.empty():  # what a rank put just before it ended
            name, rank, value = results.get()
            got[name][rank] = value
        released.set()
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    return got


def _tensor(shape, dtype, seed) -> torch.Tensor:
    """Random bits of ``dtype`` (NaNs and all), so equality below is bit equality."""
    numel = 1
    for d in shape:
        numel *= d
    g = torch.Generator().manual_seed(seed)
    raw = torch.randint(0, 256, (numel * dtype.itemsize,), dtype=torch.uint8, generator=g)
    return raw.view(dtype).view(shape)


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.reshape(-1).view(torch.uint8),
                                                                    b.reshape(-1).view(torch.uint8))


@pytest.fixture(scope="module")
def tp1():
    # _desync last: its silent peer ends with the pipeline connection closed
    return _session([_roundtrip, _repeated_layouts, _skipped_forward, _aborted_step, _layers, _device_events,
                     _handshakes, _warm_up_handshakes, _rows, _desync], tp=1, env={"VLLM_HPU_PP_STATS_EVERY": "2"})


@pytest.fixture(scope="module")
def tp2():
    return _session([_roundtrip, _in_place, _killed, _gather_silent], tp=2,
                    env={"VLLM_HPU_PP_STATS_EVERY": "2"})


# (num_tokens, {key: (trailing dims, dtype)}): decode-sized and >= 1 MiB, sizes odd on purpose.
CASES = [
    (32, {"hidden_states": ((256,), torch.bfloat16), "residual": ((256,), torch.bfloat16)}),
    (7, {"hidden_states": ((33,), torch.float16), "per_layer_inputs": ((3, 5), torch.float32),
         "aux_hidden_states_0": ((1,), torch.int64)}),
    (1031, {"hidden_states": ((517,), torch.float32), "residual": ((517,), torch.bfloat16)}),
    (2053, {"hidden_states": ((129,), torch.int64), "aux_hidden_states_3": ((3,), torch.float16)}),
    (1, {"residual": ((5,), torch.bfloat16)}),
]


def _case(i: int) -> tuple[int, dict[str, torch.Tensor]]:
    num_tokens, keys = CASES[i]
    return num_tokens, {k: _tensor((num_tokens, *dims), dtype, seed=100 * i + j)
                        for j, (k, (dims, dtype)) in enumerate(keys.items())}


def _layout(t: torch.Tensor) -> tuple:
    """What an HPU graph wrapper can tell apart in an input tensor, storage size included."""
    return (t.shape, t.dtype, t.stride(), t.storage_offset(), t.is_contiguous(), t.device,
            t.untyped_storage().nbytes())


def _roundtrip(stage, pp_group, tp_group):
    """Stage 0 sends every case (alternately with isend); stage 1 checks the bits, that each tensor is laid
    out like a warm-up's zeros and owns its storage, and that all it received stays valid."""
    logging.getLogger("vllm").setLevel(logging.INFO)
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger("vllm.patchspec.transfer").addHandler(handler)
    mark_steps = []
    xfer = StageTransfer(pp_group, tp_group, timeout_s=20, mark_step=lambda: mark_steps.append(1))
    report, layouts, storages, rounds = [], [], set(), 0
    if stage == 0:
        handles = []
        for i in range(len(CASES)):
            num_tokens, tensors = _case(i)
            if i % 2:
                xfer.send(tensors, num_tokens)
            else:
                handles.append(xfer.isend(tensors, num_tokens))
                tensors.clear()  # the sender may drop or reuse its tensors once isend returns
        for h in handles:
            h.wait()
    else:
        received = []
        for i in range(len(CASES)):
            num_tokens, expected = _case(i)
            got = xfer.recv(num_tokens)
            received.append(got)
            report.append(list(got) == list(expected) and all(_same_bits(got[k], expected[k]) for k in expected))
            layouts.append(all(_layout(got[k]) == _layout(torch.zeros_like(expected[k])) for k in expected))
            storages.update(t.untyped_storage().data_ptr() for t in got.values())
            layout = wire.plan(expected, num_tokens, xfer._tp_size, xfer._split_bytes)
            rounds += len(layout.rounds) if layout.parts > 1 else 0
        report.append(all(_same_bits(got[k], _case(i)[1][k]) for i, got in enumerate(received) for k in got))
    return {"ok": report, "split": xfer.stats.split_messages, "stats_logs": len(records), "layouts": layouts,
            "storages": len(storages), "mark_steps": len(mark_steps), "gather_rounds": rounds}


@pytest.mark.parametrize("tp", [1, 2])
def test_roundtrip_is_bit_identical(tp, request):
    got = request.getfixturevalue(f"tp{tp}")["_roundtrip"]
    assert len(got) == 2 * tp, got
    for rank, result in got.items():
        assert isinstance(result, dict), f"rank {rank}:\n{result}"
        stage, tp_rank = divmod(rank, tp)
        if stage == 1:
            # every case bit for bit, and at the end every earlier result still (nothing was reused)
            assert result["ok"] == [True] * (len(CASES) + 1)
        # the two >= 1 MiB cases are split when there is more than one TP rank, the rest never
        assert result["split"] == (2 if tp > 1 else 0)
        # VLLM_HPU_PP_STATS_EVERY=2 and 5 messages: TP rank 0 logs twice, other TP ranks never
        assert result["stats_logs"] == (2 if tp_rank == 0 else 0)


@pytest.mark.parametrize("tp", [1, 2])
def test_received_tensors_are_owned_and_laid_out_like_warmup_zeros(tp, request):
    """Shape, dtype, stride, storage offset, contiguity, device and storage size equal those of
    ``torch.zeros`` (what vLLM's ``make_empty_intermediate_tensors`` gives the warm-up); no two received
    tensors, in one message or across messages, share a storage."""
    got = request.getfixturevalue(f"tp{tp}")["_roundtrip"]
    for rank in range(tp, 2 * tp):
        assert got[rank]["layouts"] == [True] * len(CASES)
        assert got[rank]["storages"] == sum(len(keys) for _, keys in CASES)


def test_mark_step_runs_before_each_all_gather_and_only_then(tp1, tp2):
    """Given a ``mark_step``, the receiving stage calls it once per all-gather round of a split payload;
    whole payloads and the sending stage issue no collective and never call it."""
    for rank, result in tp2["_roundtrip"].items():
        assert result["mark_steps"] == result["gather_rounds"], (rank, result)
        assert result["mark_steps"] > 0 if rank >= 2 else result["mark_steps"] == 0
    assert [r["mark_steps"] for r in tp1["_roundtrip"].values()] == [0, 0]


# Which case each message has: layouts repeated (the transfer keeps what a layout needs of each host buffer)
# and interleaved, each message with other bits.
REPEATED = [0, 0, 1, 0, 0, 4, 1, 1, 0]


def _repeated_layouts(stage, pp_group, tp_group):
    """Stage 0 sends REPEATED (alternately with isend, dropping its tensors); stage 1 reports, per message,
    whether its bits and layout are right, then whether every message received is still intact."""
    xfer = StageTransfer(pp_group, timeout_s=20)

    def message(k: int) -> tuple[int, dict[str, torch.Tensor]]:
        num_tokens, keys = CASES[REPEATED[k]]
        return num_tokens, {key: _tensor((num_tokens, *dims), dtype, seed=1000 + 10 * k + j)
                            for j, (key, (dims, dtype)) in enumerate(keys.items())}

    if stage == 0:
        handles = []
        for k in range(len(REPEATED)):
            num_tokens, tensors = message(k)
            if k % 2:
                handles.append(xfer.isend(tensors, num_tokens))
                tensors.clear()
            else:
                xfer.send(tensors, num_tokens)
        for h in handles:
            h.wait()
        return None
    received, report = [], []
    for k in range(len(REPEATED)):
        num_tokens, expected = message(k)
        got = xfer.recv(num_tokens)
        received.append(got)
        report.append(list(got) == list(expected) and all(
            _same_bits(got[key], expected[key]) and _layout(got[key]) == _layout(torch.zeros_like(expected[key]))
            for key in expected))
    report.append(all(_same_bits(got[key], message(k)[1][key]) for k, got in enumerate(received) for key in got))
    return report, len({t.untyped_storage().data_ptr() for got in received for t in got.values()})


def test_messages_of_repeated_layouts_arrive_whole_in_new_tensors_that_stay_valid(tp1):
    """Layouts repeat and interleave, as decode and prefill batches do: each message's bits arrive in tensors
    laid out like warm-up zeros, none shares a storage, and none changes when later messages arrive."""
    report, storages = tp1["_repeated_layouts"][1]
    assert report == [True] * (len(REPEATED) + 1)
    assert storages == sum(len(CASES[i][1]) for i in REPEATED)


def _message(tensors: dict[str, torch.Tensor], num_tokens: int, seq: int, forward: int = 0) -> torch.Tensor:
    """A whole message built by hand from the wire format, for the sender that breaks the rules."""
    layout = wire.plan(tensors, num_tokens, split_parts=1, split_bytes=1 << 62)
    msg = torch.zeros(layout.message_bytes, dtype=torch.uint8)
    layout.write_header(msg[:wire.HEADER_BYTES].view(torch.int64).numpy(), seq, forward=forward)
    for spec, t in zip(layout.specs, tensors.values(), strict=True):
        start = wire.HEADER_BYTES + spec.offset
        msg[start:start + spec.nbytes].copy_(t.reshape(-1).view(torch.uint8))
    msg[-wire.TRAILER_BYTES:].view(torch.int64).copy_(torch.tensor(layout.trailer(seq, 0)))
    return msg


def _desync(stage, pp_group, tp_group):
    """One scenario per fresh StageTransfer pair; the receiver reports what each bad recv raised."""
    n, tensors = _case(0)
    peer = 1 - stage
    if stage == 0:
        xfer = StageTransfer(pp_group, timeout_s=20)
        try:
            xfer.send({"bogus": tensors["hidden_states"]}, n)
        except ValueError as e:  # refused on the sender, nothing sent, transfer still usable
            unknown_key = str(e)
        for _ in range(3):  # skipped: the receiver loses message 1
            xfer.send(tensors, n)
        StageTransfer(pp_group, timeout_s=20).send(tensors, n)  # repeated: seq 0 twice
        StageTransfer(pp_group, timeout_s=20).send(tensors, n)
        StageTransfer(pp_group, timeout_s=20).send({k: v[:n // 2] for k, v in tensors.items()}, n // 2)  # tokens
        bad_magic = _message(tensors, n, 0)
        bad_magic[:8].view(torch.int64).fill_(0x0BADC0DE)
        dist.send(bad_magic, group=pp_group, group_dst=peer, tag=wire.TAG)
        dist.send(_message(tensors, n, 0)[:-100].clone(), group=pp_group, group_dst=peer, tag=wire.TAG)  # truncated
        dist.barrier()  # silent until the receiver has timed out (which closes the pipeline connection)
        return {"unknown_key": unknown_key}

    def outcome(xfer: StageTransfer, num_tokens: int = n):
        """(error type, message, whether recv returned, what a second recv raised, seconds)."""
        start = time.monotonic()
        try:
            xfer.recv(num_tokens)
        except (PipelineDesyncError, PipelinePeerError) as e:
            try:
                xfer.recv(num_tokens)
                after = "recv after the error returned"
            except type(e) as again:
                after = str(again)
            return type(e).__name__, str(e), False, after, time.monotonic() - start
        return None, "", True, "", time.monotonic() - start

    report = {}
    xfer = StageTransfer(pp_group, timeout_s=20)
    report["first_ok"] = _same_bits(xfer.recv(n)["residual"], tensors["residual"])
    dist.recv(torch.empty(1 << 20, dtype=torch.uint8), group=pp_group, group_src=peer, tag=wire.TAG)  # lose message 1
    report["skipped"] = outcome(xfer)
    xfer = StageTransfer(pp_group, timeout_s=20)
    xfer.recv(n)
    report["repeated"] = outcome(xfer)
    report["tokens"] = outcome(StageTransfer(pp_group, timeout_s=20))
    report["magic"] = outcome(StageTransfer(pp_group, timeout_s=20))
    report["truncated"] = outcome(StageTransfer(pp_group, timeout_s=20))
    report["silent"] = outcome(StageTransfer(pp_group, timeout_s=1.5))
    dist.barrier()
    return report


def test_desync_and_silent_peer_raise_named_errors(tp1):
    got = tp1["_desync"]
    assert isinstance(got.get(0), dict), got.get(0)
    assert "unknown tensor key 'bogus'" in got[0]["unknown_key"]
    report = got.get(1)
    assert isinstance(report, dict), report
    assert report["first_ok"]
    expected = {
        "skipped": ("PipelineDesyncError", "sequence number from rank 0: expected 1, got 2"),
        "repeated": ("PipelineDesyncError", "sequence number from rank 0: expected 1, got 0"),
        "tokens": ("PipelineDesyncError", f"token count (padded batch) from rank 0: expected {CASES[0][0]}, "
                                          f"got {CASES[0][0] // 2}"),
        "magic": ("PipelineDesyncError", "bad header magic: expected 0x50505f4750495045, got 0xbadc0de"),
        "truncated": ("PipelineDesyncError", "message 0 truncated"),
        "silent": ("PipelinePeerError", "receive from rank 0 (stage 0) failed or timed out (1.5 s"),
    }
    for name, (error, text) in expected.items():
        kind, message, returned, after, _ = report[name]
        assert (kind, returned) == (error, False), (name, report[name])
        assert text in message, (name, message)
        assert after.startswith("pipeline transfer stopped by an earlier error"), (name, after)
    assert 1.4 < report["silent"][4] < 5.0


def _killed(stage, pp_group, tp_group):
    """Decode-sized messages on every pipeline pair; the last sender dies after three."""
    n, tensors = _case(0)
    xfer = StageTransfer(pp_group, tp_group, timeout_s=8)
    if stage == 0:
        for i in range(4):
            if i == 3 and tp_group is not None and dist.get_rank(tp_group) == dist.get_world_size(tp_group) - 1:
                os.kill(os.getpid(), signal.SIGKILL)
            xfer.send(tensors, n)
        return None
    received = [_same_bits(xfer.recv(n)["hidden_states"], tensors["hidden_states"]) for _ in range(3)]
    start = time.monotonic()
    try:
        xfer.recv(n)
        error = "returned"
    except PipelinePeerError as e:
        error = str(e)
    return received, error, time.monotonic() - start


def _gather_silent(stage, pp_group, tp_group):
    """After _killed (rank 1 is gone): a split message reaches rank 2, whose TP peer never all-gathers."""
    n, tensors = _case(2)
    rank = dist.get_rank()
    if rank == 0:  # sends its part only: no collective on the sending side
        StageTransfer(pp_group, tp_group, timeout_s=20).send(tensors, n)
    elif rank == 3:
        time.sleep(4)  # alive and silent
    else:
        start = time.monotonic()
        try:
            StageTransfer(pp_group, tp_group, timeout_s=1.5).recv(n)
            error = "returned"
        except PipelinePeerError as e:
            error = str(e)
        return error, time.monotonic() - start
    return None


def test_silent_tensor_parallel_peer_raises_within_timeout(tp2):
    error, elapsed = tp2["_gather_silent"][2]
    assert "all-gather over tensor-parallel ranks [2, 3] failed or timed out (1.5 s" in error
    assert elapsed < 5.0


def test_killed_peer_raises_within_timeout(tp2):
    got = tp2["_killed"]
    assert sorted(got) == [0, 2, 3]  # rank 1 was killed before reporting
    assert got[2] == ([True] * 3, "returned", got[2][2])
    received, error, elapsed = got[3]
    assert received == [True] * 3
    assert "receive from rank 1 (stage 0) failed or timed out" in error
    assert elapsed < 8.0


@functools.cache
def _valid_words(i: int) -> tuple[int, ...]:
    num_tokens, tensors = _case(i)
    words = np.zeros(wire.HEADER_WORDS, dtype=np.int64)
    wire.plan(tensors, num_tokens, split_parts=2, split_bytes=1 << 20).write_header(words, seq=i)
    return tuple(words.tolist())


_HEADERS = st.integers(0, len(CASES) - 1).map(lambda i: list(_valid_words(i)))
_RANDOM = st.binary(min_size=wire.HEADER_BYTES, max_size=wire.HEADER_BYTES).map(
    lambda b: list(struct.unpack(f"<{wire.HEADER_WORDS}q", b)))
_WORD = st.one_of(st.integers(-(1 << 63), (1 << 63) - 1), st.integers(-2, 70))


@st.composite
def _headers(draw):
    """Valid headers with some words replaced, and random ones; half of them with a matching checksum."""
    words = draw(st.one_of(_HEADERS, _RANDOM))
    for index, value in draw(st.lists(st.tuples(st.integers(0, wire.HEADER_WORDS - 1), _WORD), max_size=4)):
        words[index] = value
    if draw(st.booleans()):
        words[11] = wire.checksum(words)
    return words


@settings(max_examples=500, deadline=None)
@given(_headers())
def test_header_decoder_raises_only_the_named_error(words):
    try:
        message = wire.decode(words, max_message_bytes=1 << 30)
    except PipelineDesyncError:
        return
    assert min(message.seq, message.step, message.forward) >= 0
    if message.layout is None:  # an abort
        assert isinstance(message.reason, str)
        return
    layout = message.layout
    assert layout.message_bytes <= 1 << 30
    assert all(s.shape[0] == layout.num_tokens for s in layout.specs)


# ----------------------------------------------------------------------------- one size rule (issue 22, 1)

def _prefill_tensors(num_tokens: int, hidden: int) -> dict[str, torch.Tensor]:
    """bf16 hidden_states and residual of a forward, as meta tensors: only shapes and dtypes are read."""
    return {k: torch.empty(num_tokens, hidden, dtype=torch.bfloat16, device="meta")
            for k in ("hidden_states", "residual")}


@pytest.mark.parametrize("num_tokens, hidden", [(43_691, 6144), (65_536, 6144), (16_385, 16384)])
def test_split_prefill_over_a_gib_is_accepted_by_the_receiver_at_tp8(num_tokens, hidden):
    """The fix card's TP 8: 2 x tokens x hidden x 2 bytes over 1 GiB (above 43,690 tokens at hidden 6144,
    16,384 at 16384). Each rank sends an eighth, which the sender accepts; the receiver compares the same
    per-rank quantity with VLLM_HPU_PP_MAX_MESSAGE_BYTES (it used to compare the whole payload and stop
    with "bad header payload size")."""
    limit = 1 << 30
    tensors = _prefill_tensors(num_tokens, hidden)
    layout = wire.plan(tensors, num_tokens, split_parts=8, split_bytes=1 << 20, last_layer=41)
    assert layout.parts == 8 and layout.payload_bytes > limit >= layout.message_bytes
    assert wire.rank_message_bytes(tensors, num_tokens, 8, 1 << 20) == layout.message_bytes
    words = np.zeros(wire.HEADER_WORDS, dtype=np.int64)
    layout.write_header(words, seq=5, step=3, forward=1)
    message = wire.decode(words.tolist(), max_message_bytes=limit)
    assert (message.seq, message.step, message.forward, message.last_layer) == (5, 3, 1, 41)
    assert message.layout == layout


def test_a_rank_message_over_the_limit_is_refused_on_both_ends():
    """Past 1 GiB per rank (TP 8, hidden 6144: above 349,525 tokens) both ends refuse, in one line naming
    the variable to raise; the sender before anything is sent."""
    limit, num_tokens = 1 << 30, 350_000
    tensors = _prefill_tensors(num_tokens, 6144)
    layout = wire.plan(tensors, num_tokens, split_parts=8, split_bytes=1 << 20)
    assert layout.message_bytes > limit
    words = np.zeros(wire.HEADER_WORDS, dtype=np.int64)
    layout.write_header(words, seq=0)
    with pytest.raises(PipelineDesyncError, match="per tensor-parallel rank exceeds "
                                                  "VLLM_HPU_PP_MAX_MESSAGE_BYTES=1073741824: raise it"):
        wire.decode(words.tolist(), max_message_bytes=limit)
    assert wire.size_error(layout.message_bytes, limit).startswith(
        f"pipeline transfer: a forward's message of {layout.message_bytes} bytes per tensor-parallel rank")


# ----------------------------------------------------------------------------- step identity, abort (issue 22, 2)

def _skipped_forward(stage, pp_group, tp_group):
    """Stage 0's step 2 fails before it sends and no abort reaches stage 1 (say the abort itself was lost);
    step 3 has the same padded token count, as consecutive chunks of one long prompt do."""
    n, tensors = _case(0)
    xfer = StageTransfer(pp_group, timeout_s=20)
    if stage == 0:
        xfer.begin_step()
        xfer.send(tensors, n)  # step 1
        xfer.begin_step()  # step 2: its forward raised before the send
        xfer.begin_step()
        xfer.send({k: v.flip(0) for k, v in tensors.items()}, n)  # step 3
        return None
    xfer.begin_step()
    first = _same_bits(xfer.recv(n)["hidden_states"], tensors["hidden_states"])
    xfer.begin_step()
    try:
        xfer.recv(n)
        return first, "step 3's tensors taken as step 2's"
    except PipelineDesyncError as e:
        return first, str(e)


def test_a_step_skipped_on_stage_0_is_a_named_error_not_shifted_tensors(tp1):
    """The message and token counts match (seq 1, the same padded batch); the step named in the header
    does not, so stage 1 stops instead of decoding step 3's hidden states as step 2's."""
    first, error = tp1["_skipped_forward"][1]
    assert first
    assert error == "pipeline transfer: step from rank 0: expected 2, got 3"


def _aborted_step(stage, pp_group, tp_group):
    """Step 2 of stage 0 sends its first forward, then runs out of memory in the second (a long prefill);
    the per-step call is made through ``in_step``, as the runner's and the worker's wrappers make it."""
    n, tensors = _case(0)
    xfer = StageTransfer(pp_group, timeout_s=20)
    if stage == 0:
        def forwards():
            xfer.send(tensors, n)
            raise torch.OutOfMemoryError("HPU out of memory while allocating 2.00 GiB")

        in_step(xfer, True, True, lambda: xfer.send(tensors, n))
        # vLLM's worker loop logs a non-output rank's exception and goes on with the next step
        with contextlib.suppress(torch.OutOfMemoryError):
            in_step(xfer, True, True, forwards)
        try:
            in_step(xfer, True, True, lambda: xfer.send(tensors, n))
            return "step 3 sent"
        except PipelineAbortError as e:
            return str(e)
    in_step(xfer, True, False, lambda: xfer.recv(n))
    received = []
    start = time.monotonic()
    try:
        in_step(xfer, True, False, lambda: [received.append(xfer.recv(n)) for _ in range(2)])
        error = "returned"
    except PipelineAbortError as e:
        error = str(e)
    return error, len(received), time.monotonic() - start


def test_an_exception_on_stage_0_aborts_stage_1_at_once(tp1):
    """Stage 1 gets step 2's first forward, then the abort in place of the second: a named error at once
    (the timeout is 20 s), with the reason; stage 0 refuses to send step 3 afterwards."""
    error, received, elapsed = tp1["_aborted_step"][1]
    assert error == ("pipeline transfer: the previous stage (rank 0) failed in step 2, forward 1, and "
                     "aborted: OutOfMemoryError: HPU out of memory while allocating 2.00 GiB")
    assert received == 1
    assert elapsed < 10.0
    assert tp1["_aborted_step"][0] == ("pipeline transfer stopped by an earlier error: pipeline transfer: "
                                       "this stage aborted step 2: OutOfMemoryError: HPU out of memory "
                                       "while allocating 2.00 GiB")


# ----------------------------------------------------------------------------- stage boundary (issue 22, 3)

def _layers(stage, pp_group, tp_group):
    """Node 0 reads VLLM_PP_LAYER_PARTITION=4,2 (stage 0: layers 0-3), node 1 reads 3,3 (stage 1: 3-5)."""
    n, tensors = _case(0)
    if stage == 0:
        StageTransfer(pp_group, timeout_s=20, layers=(0, 4)).send(tensors, n)
        StageTransfer(pp_group, timeout_s=20, layers=(0, 3)).send(tensors, n)
        return None
    try:
        StageTransfer(pp_group, timeout_s=20, layers=(3, 6)).recv(n)
        wrong = "layer 3 run twice"
    except PipelineDesyncError as e:
        wrong = str(e)
    right = StageTransfer(pp_group, timeout_s=20, layers=(3, 6)).recv(n)
    return wrong, _same_bits(right["residual"], tensors["residual"])


def test_stages_that_overlap_their_layers_stop_on_the_first_message(tp1):
    wrong, right = tp1["_layers"][1]
    assert wrong == "pipeline transfer: sender's last layer from rank 0: expected 2, got 3"
    assert right


def _handshakes(stage, pp_group, tp_group):
    """Start-up handshakes, each on a fresh pipeline group, with one thing different on stage 1."""
    from patchspec.runtime_snippets.pipeline_parallel import handshake as hs

    cases = {
        "same": ((0, 3, 6), (3, 6, 6)),
        "partition": ((0, 4, 6), (3, 6, 6)),  # 4,2 on node 0, 3,3 on node 1
        "model": ((0, 3, 6), (4, 8, 8)),
        "build": ((0, 3, 6), (3, 6, 6)),
        "version": ((0, 3, 6), (3, 6, 6)),
        "max_num_seqs": ((0, 3, 6), (3, 6, 6)),
        "bucketing": ((0, 3, 6), (3, 6, 6)),
        "timeout": ((0, 3, 6), (3, 6, 6)),
    }
    # what start_up_settings gives on each node: one setting different per case, on stage 1
    base = {"--max-num-seqs": 64, "--block-size": 128, "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": 300}
    different = {"max_num_seqs": {"--max-num-seqs": 128}, "bucketing": {"VLLM_PROMPT_SEQ_BUCKET_MAX": "1024"},
                 "timeout": {"VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": 750}}
    out = {}
    for name, layers in cases.items():
        group = dist.new_group([0, 1])
        saved = hs.build_id, hs.VERSION
        if stage == 1 and name == "build":
            hs.build_id = lambda: 0x5EED  # another build of the fix
        if stage == 1 and name == "version":
            hs.VERSION = wire.VERSION - 1  # a node still on the previous wire format
        settings = {**base, **(different.get(name, {}) if stage == 1 else {})}
        try:
            hs.handshake(group, 1, layers[stage], timeout_s=20, settings=settings)
            out[name] = "ok"
        except PipelineHandshakeError as e:
            out[name] = str(e)
        finally:
            hs.build_id, hs.VERSION = saved
    return out


def test_handshake_refuses_different_partitions_builds_and_versions_on_both_stages(tp1):
    got = tp1["_handshakes"]
    build = handshake.build_id()
    for stage, other in ((0, 1), (1, 0)):
        out = got[stage]
        head = f"pipeline start-up: stage {stage} and stage {other} (rank {other}) differ: "
        assert out["same"] == "ok"
        assert out["partition"] == head + ("stage 0 runs layers 0-3, stage 1 starts at layer 3; set the same "
                                           "VLLM_PP_LAYER_PARTITION on every node")
        assert out["model"].startswith(head + "num_layers ")
        mine, theirs = (build, 0x5EED) if stage == 0 else (0x5EED, build)
        assert out["build"] == head + (f"build {mine:x} here, {theirs:x} there (the snippet package or a file "
                                       "patchspec patched); apply the same specs with the same patchspec on every "
                                       "node (patchspec status on each lists what is applied)")
        assert out["version"].startswith(head + "wire version ")
        for name, setting, here, there in (("max_num_seqs", "--max-num-seqs", 64, 128),
                                           ("bucketing", "VLLM_PROMPT_SEQ_BUCKET_MAX", "unset", "1024"),
                                           ("timeout", "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", 300, 750)):
            if stage == 1:
                here, there = there, here
            assert out[name] == head + f"{setting} {here} here, {there} there; give every node the same {setting}"


# ----------------------------------------------------------------------------- after warm-up (issue 30, 1)

def _checkpoint(directory: str, files: dict[str, int]) -> str:
    """A checkpoint of safetensors files written by hand (8-byte header length, JSON header, data):
    ``{name: seed}``, each one tensor of 64 KiB whose bytes follow from its seed, and an index."""
    os.makedirs(directory, exist_ok=True)
    for name, seed in files.items():
        data = _tensor((32768,), torch.bfloat16, seed).view(torch.uint8).numpy().tobytes()
        header = json.dumps({"w": {"dtype": "BF16", "shape": [32768], "data_offsets": [0, len(data)]}}).encode()
        with open(os.path.join(directory, name), "wb") as f:
            f.write(struct.pack("<Q", len(header)) + header + data)
    index = {"weight_map": {f"layers.{i}.w": name for i, name in enumerate(["a.safetensors", "b.safetensors"])}}
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f)
    return directory


def _warm_up_handshakes(stage, pp_group, tp_group):
    """Warm-up handshakes, each on a fresh pipeline group: the final bucket lists and the checkpoint each
    stage loaded, with one thing different on stage 1 (or stage 0's warm-up failed)."""
    import tempfile

    from patchspec.runtime_snippets.pipeline_parallel import handshake as hs

    home = tempfile.mkdtemp(prefix=f"ckpt-{stage}-")
    both = _checkpoint(os.path.join(home, "both"), {"a.safetensors": 1, "b.safetensors": 2})
    own = _checkpoint(os.path.join(home, "own"), {"b.safetensors": 2})  # only the file stage 1 reads
    tuned = _checkpoint(os.path.join(home, "tuned"), {"a.safetensors": 1, "b.safetensors": 3})
    buckets = {"prompt_buckets": [(1, 128, 0), (2, 128, 0)], "decode_buckets": [(1, 1, 128), (2, 1, 128)]}
    cases = {  # name: stage 1's (buckets, checkpoint); stage 0 has (buckets, both)
        "same": (buckets, both),
        "own files": (buckets, own),
        "buckets": ({**buckets, "decode_buckets": [(1, 1, 128), (4, 1, 128)]}, both),
        "weights": (buckets, tuned),
        "failed": (buckets, both),
    }
    out = {}
    for name, (theirs, checkpoint) in cases.items():
        group = dist.new_group([0, 1])
        manager = types.SimpleNamespace(**(buckets if stage == 0 else theirs))
        config = types.SimpleNamespace(model_config=types.SimpleNamespace(model=both if stage == 0 else checkpoint))
        failure = "MemoryError: out of device memory in graph capture" if name == "failed" and stage == 0 else None
        try:
            hs.handshake(group, 1, None, 20, hs.warmed_up_settings(manager, config), phase="warm-up",
                         failure=failure)
            out[name] = "ok"
        except PipelineHandshakeError as e:
            out[name] = str(e)
        if failure is not None:  # it went on at once; what it sent arrives while its process lives
            for work in hs._FAILURE_SENDS:
                work.wait(timedelta(seconds=20))
    return out


def test_warm_up_handshake_refuses_other_bucket_lists_and_weights_on_both_stages(tp1):
    got = tp1["_warm_up_handshakes"]
    lists = ["2 buckets, digest " + handshake.hashlib.sha256(json.dumps(b).encode()).hexdigest()[:16]
             for b in ([[1, 1, 128], [2, 1, 128]], [[1, 1, 128], [4, 1, 128]])]
    for stage, other in ((0, 1), (1, 0)):
        out = got[stage]
        head = f"pipeline warm-up: stage {stage} and stage {other} (rank {other}) differ: "
        assert out["same"] == out["own files"] == "ok"
        here, there = lists if stage == 0 else lists[::-1]
        assert out["buckets"] == head + (f"decode buckets {here} here, {there} there; give every node the same "
                                         "bucketing settings and bucket file")
        assert out["weights"].startswith(head + "model weights (weights file b.safetensors) ")
        assert out["weights"].endswith("; give every node the same checkpoint (--model, --revision)")
    assert got[0]["failed"] == "ok"  # told stage 1 and went on to raise its own error
    assert got[1]["failed"] == ("pipeline warm-up: stage 0 (rank 0) failed its warm-up: MemoryError: out of "
                                "device memory in graph capture")


def test_checkpoint_identity_reads_a_few_blocks_and_compares_what_both_hold(tmp_path):
    from patchspec.runtime_snippets.pipeline_parallel import weights

    both = weights.checkpoint_identity(_model(_checkpoint(str(tmp_path / "both"), {"a.safetensors": 1,
                                                                                   "b.safetensors": 2})))
    own = weights.checkpoint_identity(_model(_checkpoint(str(tmp_path / "own"), {"b.safetensors": 2})))
    assert sorted(both["files"]) == ["a.safetensors", "b.safetensors"] and both["index"] == own["index"]
    assert weights.first_difference(both, own) is None
    # one byte changed in the last sampled block of b's 64 KiB of data
    path = tmp_path / "own" / "b.safetensors"
    data = bytearray(path.read_bytes())
    data[-65536 // weights.SAMPLES] ^= 1
    path.write_bytes(bytes(data))
    changed = weights.checkpoint_identity(_model(str(tmp_path / "own")))
    assert weights.first_difference(both, changed)[0] == "weights file b.safetensors"
    assert weights.checkpoint_identity(_model(str(tmp_path / "missing"))) is None
    assert weights.checkpoint_identity(_model(str(tmp_path / "both"), load_format="dummy")) is None


def _model(path: str, **config):
    """What the identity reads of vLLM's ModelConfig."""
    return types.SimpleNamespace(model=path, **config)


# ----------------------------------------------------------------------------- rows of a forward (issue 30, 1)

# Two 500-token prompts: merged prefill pads them to one row of 1024 on one node, 2 x 512 on the other.
_REQUESTS = wire.requests_digest([("a", 500), ("b", 500)])
_MERGED, _SPLIT = wire.rows_digest((1, 1024), _REQUESTS), wire.rows_digest((2, 512), _REQUESTS)


def _rows(stage, pp_group, tp_group):
    """Stage 0 sends forwards of 1024 tokens laid out 1 x 1024; stage 1 expects 2 x 512, the same padded
    count: on the first message (decoded in full) and on a repeated layout (the forecast path)."""
    n = 1024
    tensors = {"hidden_states": _tensor((n, 8), torch.bfloat16, seed=7)}
    if stage == 0:
        StageTransfer(pp_group, timeout_s=20).send(tensors, n, _MERGED)
        xfer = StageTransfer(pp_group, timeout_s=20)
        xfer.send(tensors, n, _SPLIT)
        xfer.send(tensors, n, _MERGED)
        return None
    out = []
    for expected in ([_SPLIT], [_SPLIT, _SPLIT]):
        xfer = StageTransfer(pp_group, timeout_s=20)
        try:
            out.append([_same_bits(xfer.recv(n, rows)["hidden_states"], tensors["hidden_states"])
                        for rows in expected])
        except PipelineDesyncError as e:
            out.append(str(e))
    return out


def test_equal_padded_counts_in_other_rows_are_a_named_desync(tp1):
    first, repeated = tp1["_rows"][1]
    head = "pipeline transfer: rows (padded shape, requests and their token counts) of step 0, forward "
    tail = "from rank 0: expected {:x}, got {:x}; the stages padded the batch differently: give every node " \
           "the same bucketing settings and build"
    assert first == head + "0 " + tail.format(_SPLIT, _MERGED)
    assert repeated == head + "1 " + tail.format(_SPLIT, _MERGED)
    assert _MERGED != _SPLIT and 0 not in (_MERGED, _SPLIT)


def test_rows_digest_tells_apart_order_counts_and_shape():
    base = wire.rows_digest((2, 512), wire.requests_digest([("a", 500), ("b", 500)]))
    assert base == wire.rows_digest((2, 512), wire.requests_digest([("a", 500), ("b", 500)]))
    for other in (wire.rows_digest((2, 512), wire.requests_digest([("b", 500), ("a", 500)])),
                  wire.rows_digest((2, 512), wire.requests_digest([("a", 501), ("b", 499)])),
                  wire.rows_digest((4, 256), wire.requests_digest([("a", 500), ("b", 500)]))):
        assert other != base


def test_build_covers_every_file_the_state_record_names(tmp_path):
    """A spec applied on one node only changes a patched file of vLLM, not the snippet package: the build
    digest reads the root's state record and differs; a record naming a path outside the root is not
    followed."""
    root = tmp_path / "root"
    (root / ".patchspec").mkdir(parents=True)
    (root / "vllm").mkdir()
    (root / "vllm" / "sched.py").write_text("order = 'fifo'\n")
    (tmp_path / "outside.py").write_text("secret\n")
    record = {"files": {"vllm/sched.py": {}, "../outside.py": {}}}
    (root / ".patchspec" / "state.json").write_text(json.dumps(record))
    first = handshake._patched_files(root)
    (root / "vllm" / "sched.py").write_text("order = 'lifo'\n")
    assert first == [("vllm/sched.py", b"order = 'fifo'\n")]
    assert handshake._patched_files(root) == [("vllm/sched.py", b"order = 'lifo'\n")]
    (root / ".patchspec" / "state.json").write_text("{not json")
    assert handshake._patched_files(root) == []


# ----------------------------------------------------------------------------- no device-wide sync (issue 22, 4)

class _CountedEvent:
    """What the runner passes as ``device_event`` (``torch.hpu.Event`` on a Gaudi), counting its calls;
    on CPU the copies it marks are finished when made."""
    log: list[tuple[str, int]] = []

    def __init__(self):
        self.index = sum(1 for call, _ in self.log if call == "new")
        self.log.append(("new", self.index))

    def record(self):
        self.log.append(("record", self.index))

    def synchronize(self):
        self.log.append(("synchronize", self.index))


def _device_events(stage, pp_group, tp_group):
    """Six forwards with an event class given on both stages; each stage reports the event calls made
    during each of its transfer calls."""
    n, tensors = _case(0)
    xfer = StageTransfer(pp_group, timeout_s=20, device_event=_CountedEvent)
    per_call = []
    _CountedEvent.log.clear()
    for _ in range(6):
        start = len(_CountedEvent.log)
        if stage == 0:
            xfer.send(tensors, n)
        else:
            xfer.recv(n)
        per_call.append(_CountedEvent.log[start:])
    return per_call


def test_received_forwards_wait_for_no_device_sync_only_for_buffer_reuse(tp1):
    """The receiver queues its copies to the device and records one event per message; it waits for an
    event only when the host buffer the copies read is taken again, two messages later, and then for that
    message's event. The sender waits for its own copies' event (they must be on the host before gloo
    sends them), never for more. There is no device-wide synchronize left to call."""
    received = tp1["_device_events"][1]
    assert received[0] == [("new", 0), ("record", 0)]
    assert received[1] == [("new", 1), ("record", 1)]
    for k in range(2, 6):
        assert received[k] == [("synchronize", k - 2), ("new", k), ("record", k)], k
    sent = tp1["_device_events"][0]
    for k, calls in enumerate(sent):
        assert calls == [("new", k), ("record", k), ("synchronize", k)], k
    assert "wait_device" not in StageTransfer.__init__.__code__.co_varnames


# ----------------------------------------------------------------------------- receive in place (issue 22, 6)

IN_PLACE = [
    (2048, {"hidden_states": ((512,), torch.bfloat16), "residual": ((512,), torch.bfloat16)}),  # 2 MiB each
    (1031, {"hidden_states": ((517,), torch.float32), "residual": ((517,), torch.bfloat16)}),  # odd sizes
]


def _in_place(stage, pp_group, tp_group):
    """Split messages: the bytes copied into the received tensors after they arrived."""
    xfer = StageTransfer(pp_group, tp_group, timeout_s=20)
    out = []
    for i, (n, keys) in enumerate(IN_PLACE):
        tensors = {k: _tensor((n, *dims), dtype, seed=7 * i + j) for j, (k, (dims, dtype)) in enumerate(keys.items())}
        if stage == 0:
            xfer.send(tensors, n)
            continue
        before = xfer.stats.recv_copied_bytes
        got = xfer.recv(n)
        layout = wire.plan(tensors, n, 2, 1 << 20)
        tails = sum(r.length for r in layout.rounds if not r.fills(2))
        out.append((all(_same_bits(got[k], tensors[k]) for k in tensors), xfer.stats.recv_copied_bytes - before,
                    tails, layout.parts))
    return out


def test_split_receive_gathers_into_the_returned_tensors(tp2):
    """A split payload is all-gathered straight into the tensors recv returns: nothing is copied after it
    arrives, but for a tensor whose last round does not divide by the tensor-parallel size (that tail goes
    through a scratch buffer of at most TP x 1 MiB)."""
    for rank in (2, 3):
        (even_ok, even_copied, even_tails, parts), (odd_ok, odd_copied, odd_tails, _) = tp2["_in_place"][rank]
        assert even_ok and odd_ok and parts == 2
        assert even_copied == 0 and even_tails == 0
        assert 0 < odd_copied == odd_tails < 2 * 2 * (1 << 20)


# ----------------------------------------------------------------------------- the decode message's cost (issue 22)

def _posted_receive(stage, pp_group, tp_group):
    """Stage 1 opens a step through ``in_step(receives=True)``, as the runner does, and only then waits for
    stage 0 to say its send finished; gloo sends a message only once its receive is posted, so that word
    comes only if the step's start posted the receive."""
    n, tensors = _case(0)
    done = torch.zeros(1, dtype=torch.int64)
    if stage == 0:
        xfer = StageTransfer(pp_group, timeout_s=5)
        in_step(xfer, True, True, lambda: xfer.send(tensors, n))
        dist.send(done, group=pp_group, group_dst=1, tag=0x77)
        return None
    xfer = StageTransfer(pp_group, timeout_s=20)
    in_step(xfer, True, False, lambda: None, receives=True)
    try:
        dist.irecv(done, group=pp_group, group_src=0, tag=0x77).wait(timedelta(seconds=8))
    except RuntimeError as e:
        return f"stage 0's send did not finish before recv was called: {e}"
    return _same_bits(xfer.recv(n)["hidden_states"], tensors["hidden_states"])


def _lent_buffers(stage, pp_group, tp_group):
    """Six decode-sized messages, each with other bits. Stage 1 keeps the first message, only a view of the
    second's hidden states, nothing of the next three, and the sixth; it reports what was copied after
    arrival and whether what it kept still holds its bits."""
    n, keys = CASES[0]

    def message(k: int) -> dict[str, torch.Tensor]:
        return {key: _tensor((n, *dims), dtype, seed=500 + 10 * k + j) for j, (key, (dims, dtype)) in
                enumerate(keys.items())}

    xfer = StageTransfer(pp_group, timeout_s=20)
    if stage == 0:
        for k in range(6):
            xfer.send(message(k), n)
        return None
    first = xfer.recv(n)
    view = xfer.recv(n)["hidden_states"][1:]
    for _ in range(3):
        xfer.recv(n)
    last = xfer.recv(n)
    kept = (all(_same_bits(first[key], message(0)[key]) for key in keys)
            and _same_bits(view, message(1)["hidden_states"][1:])
            and all(_same_bits(last[key], message(5)[key]) for key in keys))
    layouts = all(_layout(t) == _layout(torch.zeros_like(t)) for t in (*first.values(), *last.values()))
    return kept, layouts, xfer.stats.recv_copied_bytes


def _forecast_misses(stage, pp_group, tp_group):
    """After a message of one layout, the receiver expects the next to repeat it; a truncated message and
    one with a bad magic, of that layout, still raise their named errors."""
    n, tensors = _case(0)
    peer = 1 - stage
    if stage == 0:
        StageTransfer(pp_group, timeout_s=20).send(tensors, n)
        dist.send(_message(tensors, n, 1, 1)[:-100].clone(), group=pp_group, group_dst=peer, tag=wire.TAG)
        StageTransfer(pp_group, timeout_s=20).send(tensors, n)
        bad_magic = _message(tensors, n, 1, 1)
        bad_magic[:8].view(torch.int64).fill_(0x0BADC0DE)
        dist.send(bad_magic, group=pp_group, group_dst=peer, tag=wire.TAG)
        return None
    errors = []
    for _ in range(2):
        xfer = StageTransfer(pp_group, timeout_s=20)
        xfer.recv(n)
        try:
            xfer.recv(n)
            errors.append("returned")
        except PipelineDesyncError as e:
            errors.append(str(e))
    return errors


@pytest.fixture(scope="module")
def decode_path():
    return _session([_posted_receive, _lent_buffers, _forecast_misses], tp=1)


def test_a_receive_posted_at_the_step_s_start_lets_the_message_travel_before_recv(decode_path):
    assert decode_path["_posted_receive"][1] is True


def test_a_host_receiver_keeps_the_received_bytes_and_never_reuses_a_buffer_a_tensor_lives_on(decode_path):
    """Nothing is copied out of the receive buffer on the host; what stage 1 kept, a view of a dropped
    tensor included, keeps its bits while later messages arrive, laid out like a warm-up's zeros."""
    kept, layouts, copied = decode_path["_lent_buffers"][1]
    assert (kept, layouts, copied) == (True, True, 0)


def test_a_message_of_the_expected_layout_is_still_checked_word_by_word(decode_path):
    truncated, magic = decode_path["_forecast_misses"][1]
    assert "message 1 truncated" in truncated
    assert "bad header magic: expected 0x50505f4750495045, got 0xbadc0de" in magic


def test_a_peer_on_wire_version_2_is_refused_by_the_version_check():
    """Version 3 added the rows digest: a version-2 header (no rows word) is refused by name, not read
    with its fields one word off."""
    n, tensors = _case(0)
    words = np.frombuffer(wire.plan(tensors, n, 1, 1 << 62).header_bytes(0, 0, 0), dtype=np.int64).copy()
    words[1] = 2
    with pytest.raises(PipelineDesyncError, match="bad header protocol version: expected 3, got 2"):
        wire.decode(words.tobytes(), 1 << 30)
