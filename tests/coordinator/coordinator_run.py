"""One rank of a two-stage gloo world on vLLM's real ``GroupCoordinator``; prints one JSON document.

Run as ``python coordinator_run.py SCENARIO RANK PORT OUT_DIR`` with a vLLM release root (pristine, or
with the pipeline-transfer spec applied) first on ``sys.path``. The world is vLLM's own:
``init_distributed_environment`` + ``initialize_model_parallel(pipeline_model_parallel_size=2)`` over gloo
on 127.0.0.1. Stage 0 sends and stage 1 receives exactly as ``Worker.execute_model`` does: the sender
keeps the handles of ``isend_tensor_dict`` and waits them a step later, the receiver wraps what
``irecv_tensor_dict`` returns in ``AsyncIntermediateTensors`` and the runner's
``sync_and_gather_intermediate_tensors`` reads it with the step's padded token count.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import sys
import threading
import time
from importlib import metadata
from types import SimpleNamespace

import torch
from packaging import version
from vllm.distributed import parallel_state as ps
from vllm.v1.worker.gpu_model_runner import GPUModelRunner
from vllm.v1.worker.gpu_worker import AsyncIntermediateTensors

HIDDEN = 64
STEPS = [(8, 1), (33, 2), (1, 3), (8, 4), (129, 5), (2, 6)]  # (padded tokens, seed) of each step
WAIT_S = 60.0  # upper bound on any wait for the other rank


def step_tensors(num_tokens: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"hidden_states": torch.randn(num_tokens, HIDDEN, generator=g),
            "residual": torch.randn(num_tokens, HIDDEN, generator=g).to(torch.bfloat16)}


def digest(tensors: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256()
    for key, t in tensors.items():
        h.update(f"{key}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


class Runner:
    """What the runner does with received tensors: ``sync_and_gather_intermediate_tensors``, which the
    spec's ``runner-expected-tokens`` target patches, on a stand-in runner object."""

    def __init__(self):
        from vllm.config import CompilationConfig, ParallelConfig

        self._sync = GPUModelRunner.sync_and_gather_intermediate_tensors
        self.intermediate_tensors = None
        self.vllm_config = SimpleNamespace(compilation_config=CompilationConfig(),
                                           parallel_config=ParallelConfig(pipeline_parallel_size=2))

    def consume(self, received, num_tokens: int) -> dict[str, torch.Tensor]:
        from vllm.sequence import IntermediateTensors

        self.intermediate_tensors = IntermediateTensors(
            {"hidden_states": torch.zeros(256, HIDDEN), "residual": torch.zeros(256, HIDDEN, dtype=torch.bfloat16)})
        return dict(self._sync(self, num_tokens, received, True).tensors)


def receive(runner: Runner, num_tokens: int) -> dict[str, torch.Tensor]:
    tensor_dict, handles, postprocess = ps.get_pp_group().irecv_tensor_dict(all_gather_group=ps.get_tp_group(),
                                                                         all_gather_tensors={})
    return runner.consume(AsyncIntermediateTensors(tensor_dict, comm_handles=handles,
                                                   comm_postprocess=postprocess), num_tokens)


def send(tensors: dict[str, torch.Tensor]) -> list:
    """The handles the worker keeps to wait a step later: 0.30 lets the coordinator reap the first (the
    metadata's), 0.26 returns the tensor sends only."""
    handles = ps.get_pp_group().isend_tensor_dict(tensors, all_gather_group=ps.get_tp_group(),
                                                  all_gather_tensors={})
    return handles[1:] if version.parse(metadata.version("vllm")) >= version.parse("0.30") else handles


def counting_recv_object() -> list[int]:
    """Counts ``recv_object`` calls (stock sends every tensor dict's metadata through it, pickled)."""
    calls = [0]
    original = ps.GroupCoordinator.recv_object

    def recv_object(self, src):
        calls[0] += 1
        return original(self, src)

    ps.GroupCoordinator.recv_object = recv_object
    return calls


def log_lines() -> list[str]:
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    logging.getLogger("vllm").addHandler(handler)
    return lines


def roundtrip(stage: int) -> dict:
    """Every step's tensors across, bit for bit, then a step whose padded count the stages disagree on.
    The world group's tensor dicts (not the PP group) keep vLLM's own path."""
    calls, lines = counting_recv_object(), log_lines()
    out: dict = {"digests": [], "error": None}
    if stage == 0:
        pending: list = []
        for num_tokens, seed in STEPS:
            for handle in pending:  # the worker waits the previous step's sends first
                handle.wait()
            tensors = step_tensors(num_tokens, seed)
            out["digests"].append(digest(tensors))
            pending = send(tensors)
        ps.get_world_group().send_tensor_dict({"probe": torch.arange(4)})
        for handle in send(step_tensors(16, 99)):  # a step ahead: the stage behind expects 8
            handle.wait()
    else:
        runner = Runner()
        for num_tokens, _ in STEPS:
            out["digests"].append(digest(receive(runner, num_tokens)))
        out["world_probe"] = ps.get_world_group().recv_tensor_dict()["probe"].tolist()
        try:
            out["out_of_step"] = digest(receive(runner, 8))
        except Exception as e:  # noqa: BLE001 - reported to the test
            out["error"] = f"{type(e).__name__}: {e}"
    out["recv_object_calls"] = calls[0]
    out["stats_lines"] = [line for line in lines if line.startswith("pipeline transfer, stage")]
    return out


def silent_then_dead(stage: int) -> dict:
    """Stage 0 sends one step and goes quiet: stage 1's next receive must end within the transfer's
    timeout. Stage 1 then dies, and stage 0, idle, must notice (its watch) and stop."""
    out: dict = {}
    if stage == 0:
        stopped = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stopped.set())
        lines = log_lines()
        for handle in send(step_tensors(8, 1)):
            handle.wait()
        sent = time.monotonic()
        out["stopped"] = stopped.wait(WAIT_S)
        out["stopped_after_s"] = time.monotonic() - sent
        out["errors"] = [line for line in lines if "PipelinePeerError" in line]
        return out
    runner = Runner()
    out["digest"] = digest(receive(runner, 8))
    started = time.monotonic()
    try:
        receive(runner, 8)
    except Exception as e:  # noqa: BLE001 - reported to the test
        out["error"] = f"{type(e).__name__}: {e}"
    out["error_after_s"] = time.monotonic() - started
    print(json.dumps(out), flush=True)
    os._exit(0)  # dies without closing anything, as a killed node does


def injected(path: str) -> bytes:
    """A pickle whose loading creates ``path``."""
    return b"c__builtin__\nopen\n(V" + path.encode() + b"\nVw\ntR."


def injection(stage: int, out_dir: str) -> dict:
    """Someone who reaches the pipeline group's port sends a pickle where the receiver expects a tensor
    dict: stock unpickles it (the file appears), the transfer refuses the message."""
    marker = os.path.join(out_dir, "unpickled")
    out: dict = {}
    if stage == 0:
        data = torch.frombuffer(bytearray(injected(marker)), dtype=torch.uint8)
        pp = ps.get_pp_group()
        if not hasattr(type(pp).isend_tensor_dict, "__wrapped__"):  # stock: the metadata's own framing
            torch.distributed.send(torch.tensor([data.numel()]), dst=pp.ranks[1], group=pp.cpu_group)
            torch.distributed.send(data, dst=pp.ranks[1], group=pp.cpu_group)
        else:  # the transfer's tag, padded to a header's size, so the message is taken
            from _patchspec_runtime.pipeline_parallel import wire
            frame = torch.zeros(wire.HEADER_BYTES + 64, dtype=torch.uint8)
            frame[:data.numel()] = data
            torch.distributed.send(frame, dst=pp.ranks[1], group=pp.cpu_group, tag=wire.TAG)
        return out
    try:
        receive(Runner(), 8)
    except Exception as e:  # noqa: BLE001 - reported to the test
        out["error"] = f"{type(e).__name__}: {e}"
    out["unpickled"] = os.path.exists(marker)
    return out


def stock_silent(stage: int) -> dict:
    """Stock: stage 0 sends nothing more; stage 1's receive is still blocked after ``STOCK_WAIT_S``."""
    if stage == 0:
        return {}
    receiver = threading.Thread(target=lambda: receive(Runner(), 8), daemon=True)
    started = time.monotonic()
    receiver.start()
    receiver.join(float(os.environ["STOCK_WAIT_S"]))
    return {"still_blocked": receiver.is_alive(), "waited_s": time.monotonic() - started}


def stock(stage: int, out_dir: str) -> dict:
    """Stock vLLM in one world: the round trip, the injected pickle, then a silent peer."""
    return {"roundtrip": roundtrip(stage), "injection": injection(stage, out_dir), "silent": stock_silent(stage)}


def queue_shutdown(stage: int) -> dict:
    """A remote reader of vLLM's ``MessageQueue`` (how the leader node reads another node's worker)
    waiting when the queue is shut down, as vLLM's worker monitor does when a worker dies: with the spec
    the wait ends at once; stock it lasts its whole timeout."""
    from vllm.distributed.device_communicators.shm_broadcast import MessageQueue

    world = ps.get_world_group().cpu_group
    mq = MessageQueue(1, 0, connect_ip="127.0.0.1") if stage == 0 else None
    handle = [mq.export_handle() if mq else None]
    torch.distributed.broadcast_object_list(handle, src=0, group=world)
    mq = mq or MessageQueue.create_from_handle(handle[0], 1)
    mq.wait_until_ready()
    out: dict = {}
    if stage == 1:
        def read():
            started = time.monotonic()
            try:
                mq.dequeue(timeout=float(os.environ["STOCK_WAIT_S"]))
            except Exception as e:  # noqa: BLE001 - reported to the test
                out["error"] = f"{type(e).__name__}: {e}"
            out["after_s"] = time.monotonic() - started

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        mq.shutdown()
        reader.join(WAIT_S)
    torch.distributed.barrier(group=world)  # the writer stays until the reader is done
    return out


# Steps of the failed-step scenario: (padded tokens, seed); stage 0's forward fails in the second, and the
# third has the same padded count (the next chunk of one long prompt).
WORKER_STEPS = [(8, 11), (8, 12), (8, 13)]
FAILING_STEP = 1


class StandInModelRunner:
    """The model runner under vLLM's real ``Worker.execute_model``: stage 0 returns each step's
    IntermediateTensors (raising in ``FAILING_STEP``, as an out-of-memory in a long prefill does), stage 1
    reads the received ones through the real ``sync_and_gather_intermediate_tensors``."""

    def __init__(self, stage: int):
        self.stage, self.steps, self.received = stage, 0, []
        self.runner = Runner()
        self.is_pooling_model = False

    def execute_model(self, scheduler_output, intermediate_tensors=None):
        from vllm.sequence import IntermediateTensors

        step, self.steps = self.steps, self.steps + 1
        num_tokens, seed = WORKER_STEPS[step]
        if self.stage == 0:
            if step == FAILING_STEP:
                raise torch.OutOfMemoryError("out of memory in a long prefill")
            return IntermediateTensors(step_tensors(num_tokens, seed))
        self.received.append(digest(self.runner.consume(intermediate_tensors, num_tokens)))
        return None

    def sample_tokens(self, grammar_output):
        return "sampled"


def worker_steps(stage: int, config) -> dict:
    """Each step through the release's own ``Worker.execute_model`` (bound to a stand-in worker holding
    what it reads), as vLLM's worker loop runs it: an exception on stage 0, a non-output rank, is
    logged and dropped, and the next step runs."""
    from contextlib import nullcontext

    from vllm.v1.worker.gpu_worker import Worker

    worker = SimpleNamespace(_pp_send_work=[], vllm_config=config, use_v2_model_runner=False,
                             model_runner=StandInModelRunner(stage), annotate_profile=lambda _: nullcontext())
    out: dict = {"sent": [digest(step_tensors(n, seed)) for n, seed in WORKER_STEPS], "errors": []}
    # stage 1 runs the steps it can receive: stock, its second gets the third step's tensors
    for num_tokens, _ in WORKER_STEPS if stage == 0 else WORKER_STEPS[:-1]:
        started = time.monotonic()
        try:
            Worker.execute_model(worker, SimpleNamespace(total_num_scheduled_tokens=num_tokens,
                                                         num_scheduled_tokens={"r": num_tokens}))
        except Exception as e:  # noqa: BLE001 - the worker loop's part, reported to the test
            out["errors"].append([f"{type(e).__name__}: {e}", time.monotonic() - started])
    for handle in worker._pp_send_work:
        handle.wait()
    out["received"] = worker.model_runner.received
    try:  # the sample vLLM's executor asks every rank for after the step
        out["sample"] = Worker.sample_tokens(worker, None)
    except Exception as e:  # noqa: BLE001 - the executor's part: it carries the message only
        out["sample"] = f"{type(e).__name__}: {e}"
    # stage 0 stays until stage 1 has read what it sent (0.30 reaps a dict's metadata send lazily)
    torch.distributed.barrier(group=ps.get_world_group().cpu_group)
    return out


def ready() -> None:
    """Both stages set up before the first transfer: the transfer's short timeout then bounds a transfer,
    not how long the other process took to start on a busy machine."""
    torch.distributed.barrier(group=ps.get_world_group().cpu_group)


def worker_main(scenario: str, rank: int, port: str) -> None:
    """The world as vLLM's worker starts it (``init_worker_distributed_environment``, where the spec's
    handshake runs), with a tiny model's config for the layer ranges; ``VLLM_PP_LAYER_PARTITION`` may
    differ between the two processes, as between two nodes."""
    from vllm.config import DeviceConfig, ModelConfig, ParallelConfig, VllmConfig, set_current_vllm_config
    from vllm.v1.worker.gpu_worker import init_worker_distributed_environment

    partition = os.environ.get(f"PARTITION_{rank}")
    if partition:
        os.environ["VLLM_PP_LAYER_PARTITION"] = partition
    config = VllmConfig(model_config=ModelConfig(model=os.environ["TINY_MODEL"], skip_tokenizer_init=True),
                        device_config=DeviceConfig(device="cpu"),
                        parallel_config=ParallelConfig(pipeline_parallel_size=2))
    out: dict = {}
    with set_current_vllm_config(config):
        try:
            init_worker_distributed_environment(config, rank, f"tcp://127.0.0.1:{port}", rank, backend="gloo")
            out["started"] = True
        except Exception as e:  # noqa: BLE001 - reported to the test
            out["started"], out["error"] = False, f"{type(e).__name__}: {e}"
        if out["started"] and scenario == "failed_step":
            ready()
            out.update(worker_steps(rank, config))
    print(json.dumps(out), flush=True)
    os._exit(0)


def main() -> None:
    scenario, rank, port, out_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    if scenario in ("failed_step", "partition"):
        return worker_main(scenario, rank, port)
    from vllm.config import DeviceConfig, ParallelConfig, VllmConfig, set_current_vllm_config

    config = VllmConfig(device_config=DeviceConfig(device="cpu"),
                        parallel_config=ParallelConfig(pipeline_parallel_size=2))
    with set_current_vllm_config(config):
        ps.init_distributed_environment(world_size=2, rank=rank, local_rank=rank, backend="gloo",
                                        distributed_init_method=f"tcp://127.0.0.1:{port}")
        ps.initialize_model_parallel(pipeline_model_parallel_size=2, backend="gloo")
    pp = ps.get_pp_group()
    assert pp.world_size == 2 and pp.rank_in_group == rank, (pp.world_size, pp.rank_in_group)
    ready()
    if scenario in ("injection", "stock"):
        out = {"injection": injection, "stock": stock}[scenario](rank, out_dir)
    else:
        out = {"roundtrip": roundtrip, "silent_then_dead": silent_then_dead}[scenario](rank)
    if scenario in ("roundtrip", "stock"):
        out["queue"] = queue_shutdown(rank)
    print(json.dumps(out), flush=True)
    if scenario == "stock" and rank == 0:  # the silent peer: stays until the test ends it
        threading.Event().wait(WAIT_S)
    os._exit(0)  # no orderly teardown: the peer may already be gone


if __name__ == "__main__":
    main()
