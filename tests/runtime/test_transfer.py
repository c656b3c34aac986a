"""The stage-to-stage transfer between real processes over gloo on 127.0.0.1.

Each session starts its processes once and runs several scenarios in them (start-up dominates); every
process is joined, or killed, before the session returns.
"""
from __future__ import annotations

import functools
import logging
import os
import queue
import signal
import socket
import struct
import time
import traceback
from datetime import timedelta

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from hypothesis import given, settings
from hypothesis import strategies as st

from patchspec.runtime_snippets.pipeline_parallel import PipelineDesyncError, PipelinePeerError, StageTransfer, wire

SESSION_S = 40.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank, world, tp, port, results, scenarios, env):
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


def _session(scenarios, tp: int, env: dict | None = None) -> dict[str, dict[int, object]]:
    """Run each ``scenario(stage, pp_group, tp_group)`` in turn on PP2 x ``tp`` processes.

    Returns, per scenario name, each rank's return value (or traceback); a killed rank is missing.
    """
    ctx = mp.get_context("forkserver")  # children fork from one server that imported torch and this module
    ctx.set_forkserver_preload([__name__])
    results = ctx.Queue()
    port, world = _free_port(), 2 * tp
    procs = [ctx.Process(target=_entry, args=(r, world, tp, port, results, scenarios, env or {}))
             for r in range(world)]
    for p in procs:
        p.start()
    got: dict[str, dict[int, object]] = {s.__name__: {} for s in scenarios}
    deadline = time.monotonic() + SESSION_S
    try:
        while sum(map(len, got.values())) < world * len(scenarios) and time.monotonic() < deadline:
            try:
                name, rank, value = results.get(timeout=0.2)
                got[name][rank] = value
            except queue.Empty:
                if not any(p.is_alive() for p in procs) and results.empty():
                    break
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
    return _session([_roundtrip, _desync], tp=1, env={"VLLM_HPU_PP_STATS_EVERY": "2"})


@pytest.fixture(scope="module")
def tp2():
    return _session([_roundtrip, _killed, _gather_silent], tp=2, env={"VLLM_HPU_PP_STATS_EVERY": "2"})


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


def _message(tensors: dict[str, torch.Tensor], num_tokens: int, seq: int) -> torch.Tensor:
    """A whole message built by hand from the wire format, for the sender that breaks the rules."""
    layout = wire.plan(tensors, num_tokens, split_parts=1, split_bytes=1 << 62)
    msg = torch.zeros(layout.message_bytes, dtype=torch.uint8)
    layout.write_header(msg[:wire.HEADER_BYTES].view(torch.int64).numpy(), seq)
    for spec, t in zip(layout.specs, tensors.values()):
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
        "silent": ("PipelinePeerError", "receive from rank 0 failed or timed out (1.5 s"),
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
    assert "receive from rank 1 failed or timed out" in error
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
        words[7] = wire.checksum(words)
    return words


@settings(max_examples=500, deadline=None)
@given(_headers())
def test_header_decoder_raises_only_the_named_error(words):
    try:
        seq, layout = wire.decode(words, max_message_bytes=1 << 30)
    except PipelineDesyncError:
        return
    assert seq >= 0 and layout.message_bytes <= 1 << 30
    assert all(s.shape[0] == layout.num_tokens for s in layout.specs)
