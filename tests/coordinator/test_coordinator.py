"""The pipeline-transfer spec on vLLM's real ``GroupCoordinator`` (0.26.0 and 0.30.0), two gloo processes.

Each scenario runs stage 0 and stage 1 as separate processes (``coordinator_run.py``) under a copy of
the release, pristine or with ``specs/pipeline-transfer.yaml`` applied, and the two stages talk the way
vLLM's worker makes them talk. Per release, every scenario's processes run side by side (start-up,
importing vLLM, dominates); all are killed before the fixture returns.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from patchspec.verbs import writing

HERE = Path(__file__).resolve().parent
SPEC = HERE.parents[1] / "specs" / "pipeline-transfer.yaml"
RELEASES = ["0.26.0", "0.30.0"]
TIMEOUT_S = 3.0  # the transfer's, VLLM_PP_TRANSFER_TIMEOUT_S
STOCK_WAIT_S = 3 * TIMEOUT_S
RUN_S = 1800.0  # a safety net: 18 vLLM imports at once, two of them one after the other, on a busy machine
# scenario -> root; "stock" runs the round trip, the injection and a silent peer on stock vLLM
SCENARIOS = {"roundtrip": "patched", "silent_then_dead": "patched", "injection": "patched", "stock": "pristine",
             "failed_step": "patched", "failed_step_stock": "pristine", "partition": "patched",
             "refused_first": "patched", "refused_first_late_host": "patched"}
# Per scenario: VLLM_PP_LAYER_PARTITION of each process (two nodes configured differently) for the tiny
# model's 6 layers; "4,4" does not add up to 6.
PARTITIONS = {"partition": ("4,2", "3,3"), "refused_first": ("4,4", "3,3"), "refused_first_late_host": ("3,3", "4,4")}
# Scenarios whose stages start one after the other: the first one's rank, and the line it logs when it has
# refused; the other starts only then.
SEQUENCED = {"refused_first": 0, "refused_first_late_host": 1}
REFUSED_LINE = "pipeline start-up refused on rank"
BAD_SUM = "ValueError: sum(partitions)=8 does not match num_hidden_layers=6."


def _free_port() -> int:
    """A free port below the ephemeral range: gloo's listening sockets (every process of every scenario
    opens some, on ports the kernel picks from that range) can never take it before its stage 0 binds it."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    while True:
        port = random.randrange(max(1024, low - 16384), low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def _start(root: Path, scenario: str, rank: int, port: int, out_dir: Path, model: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(root), "VLLM_LOGGING_LEVEL": "INFO", "GLOO_SOCKET_IFNAME": "lo",
           "VLLM_PP_TRANSFER_TIMEOUT_S": str(TIMEOUT_S), "VLLM_PP_TRANSFER_STATS_EVERY": "2",
           "VLLM_PP_START_UP_TIMEOUT_S": str(RUN_S), "STOCK_WAIT_S": str(STOCK_WAIT_S),
           "TINY_MODEL": str(model)}
    env.pop("VLLM_PP_LAYER_PARTITION", None)
    if scenario in PARTITIONS:
        env[f"PARTITION_{rank}"] = PARTITIONS[scenario][rank]
    name = scenario.removesuffix("_stock") if scenario != "stock" else scenario
    if scenario in SEQUENCED:
        name = "partition"
    return subprocess.Popen([sys.executable, str(HERE / "coordinator_run.py"), name, str(rank), str(port),
                             str(out_dir)], env=env, cwd=str(HERE), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT if scenario in SEQUENCED else subprocess.PIPE, text=True)


class _Sequenced:
    """A scenario whose first stage starts alone and refuses; the other stage starts once the first has
    logged its refusal (the order of events, whatever the machine's load)."""

    def __init__(self, start, first: int):
        self.first = first
        self.logs: dict[int, list[str]] = {0: [], 1: []}
        self.procs = {first: start(first)}
        self._start = start
        self.late_started = threading.Event()
        self._readers = [threading.Thread(target=self._read, args=(first,), daemon=True)]
        self._readers[0].start()

    def _read(self, rank: int) -> None:
        for line in self.procs[rank].stdout:
            self.logs[rank].append(line)
            if rank == self.first and not self.late_started.is_set() and REFUSED_LINE in line:
                other = 1 - rank
                self.procs[other] = self._start(other)
                self.late_started.set()
                reader = threading.Thread(target=self._read, args=(other,), daemon=True)
                self._readers.append(reader)
                reader.start()

    def result(self, deadline: float) -> list[dict]:
        """Each stage's last JSON document (None if it printed none), its exit code and its output."""
        for rank in (self.first, 1 - self.first):
            if not self.late_started.wait(max(1.0, deadline - time.monotonic())):
                break
            proc = self.procs[rank]
            try:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for reader in self._readers:
            reader.join(timeout=max(1.0, deadline - time.monotonic()))
        return [{"json": _last_json("".join(self.logs[rank])), "exit": self.procs[rank].returncode
                 if rank in self.procs else None, "log": "".join(self.logs[rank])} for rank in (0, 1)]

    def all(self) -> list[subprocess.Popen]:
        return list(self.procs.values())


# A tiny decoder's configuration: the layer ranges come from vLLM's ModelConfig as in a real worker.
TINY_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
               "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4,
               "num_hidden_layers": 6, "vocab_size": 256, "max_position_embeddings": 256,
               "rms_norm_eps": 1e-6, "torch_dtype": "float32"}


def _last_json(text: str):
    lines = [line for line in text.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else None


@pytest.fixture(scope="module", params=RELEASES)
def runs(request, vllm_release, tmp_path_factory):
    """scenario -> [stage 0 result, stage 1 result]; the stock session's parts as "<part>_stock"."""
    base = tmp_path_factory.mktemp(f"coordinator-{request.param}")
    pristine = shutil.copytree(vllm_release(request.param), base / "pristine",
                               ignore=shutil.ignore_patterns(".complete"))
    patched = shutil.copytree(pristine, base / "patched")
    writing.apply(str(SPEC), f"v{request.param}", str(patched))
    roots = {"pristine": pristine, "patched": patched}
    model = base / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(TINY_CONFIG))
    procs: dict[str, list[subprocess.Popen]] = {}
    sequenced: dict[str, _Sequenced] = {}
    try:
        for scenario, kind in SCENARIOS.items():
            out_dir = base / scenario
            out_dir.mkdir()
            port = _free_port()

            def start(rank, scenario=scenario, kind=kind, port=port, out_dir=out_dir):
                return _start(roots[kind], scenario, rank, port, out_dir, model)

            if scenario in SEQUENCED:
                sequenced[scenario] = _Sequenced(start, SEQUENCED[scenario])
            else:
                procs[scenario] = [start(rank) for rank in (0, 1)]
        deadline = time.monotonic() + RUN_S
        results = {scenario: seq.result(deadline) for scenario, seq in sequenced.items()}
        for scenario, pair in procs.items():
            outputs = {}
            for rank, proc in reversed(list(enumerate(pair))):
                if scenario == "stock" and rank == 0:
                    proc.kill()  # the silent peer, done once stage 1 has given up on it
                try:
                    outputs[rank] = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    outputs[rank] = proc.communicate()
            got = [_last_json(outputs[rank][0]) for rank in (0, 1)]
            assert None not in got, "\n".join(f"{scenario} rank {rank} exited {proc.returncode}:\n"
                                               f"{outputs[rank][1][-3000:]}" for rank, proc in enumerate(pair))
            results[scenario] = got
        stock = results.pop("stock")
        for part in ("roundtrip", "injection", "silent", "queue"):
            results[f"{part}_stock"] = [stage[part] for stage in stock]
        results["unpickled_files"] = {s: (base / s / "unpickled").exists() for s in ("injection", "stock")}
        return results
    finally:
        for pair in [*procs.values(), *(seq.all() for seq in sequenced.values())]:
            for proc in pair:
                if proc.poll() is None:
                    proc.kill()
                proc.wait()


def test_same_tensors_arrive_as_with_stock(runs):
    sent, received = runs["roundtrip"]
    _, stock = runs["roundtrip_stock"]
    assert len(sent["digests"]) == 6
    assert received["digests"] == sent["digests"] == stock["digests"]


def test_pp_traffic_unpickled_and_other_groups_untouched(runs):
    _, received = runs["roundtrip"]
    _, stock = runs["roundtrip_stock"]
    # stock: one recv_object (pickled metadata) per tensor dict: 6 steps, the world probe, the last step
    assert stock["recv_object_calls"] == 6 + 1 + 1
    # with the spec: only the world group's probe goes vLLM's way
    assert received["recv_object_calls"] == 1
    assert received["world_probe"] == [0, 1, 2, 3]


def test_out_of_step_token_count_is_a_named_error_stock_decodes_it(runs):
    """The sender is a step of 16 tokens where the receiver's step has 8: the transfer stops with a
    named error; stock hands the runner the first 8 rows of the other step's hidden states."""
    _, received = runs["roundtrip"]
    assert received["error"] == ("PipelineDesyncError: pipeline transfer: token count (padded batch) from "
                                 "rank 0: expected 8, got 16")
    _, stock = runs["roundtrip_stock"]
    assert stock["error"] is None and stock["out_of_step"]


def test_stats_line_on_both_stages(runs):
    sent, received = runs["roundtrip"]
    assert [line.split(":")[0] for line in sent["stats_lines"]] == ["pipeline transfer, stage 0"] * 3
    assert [line.split(":")[0] for line in received["stats_lines"]] == ["pipeline transfer, stage 1"] * 3
    assert "messages=6 " in received["stats_lines"][-1]


def test_silent_peer_named_error_within_timeout_stock_blocks(runs):
    _, receiver = runs["silent_then_dead"]
    assert receiver["error"].startswith("PipelinePeerError: pipeline transfer: receive from rank 0 (stage 0) failed or "
                                        "timed out")
    assert TIMEOUT_S <= receiver["error_after_s"] < 2 * TIMEOUT_S
    _, stock = runs["silent_stock"]
    assert stock["still_blocked"] and stock["waited_s"] >= STOCK_WAIT_S


def test_idle_sender_stops_when_next_stage_dies(runs):
    """Stage 0 has sent and waits for nothing; stage 1 dies (after its own timeout): stage 0 logs the
    named error and is sent SIGTERM, so vLLM's executor sees its worker die."""
    sender, _ = runs["silent_then_dead"]
    assert sender["stopped"]
    assert sender["stopped_after_s"] < 3 * TIMEOUT_S
    assert len(sender["errors"]) == 1
    assert sender["errors"][0].startswith("PipelinePeerError: pipeline transfer: pipeline stage 1 is gone")


def test_injected_pickle_refused_stock_unpickles_it(runs):
    _, refused = runs["injection"]
    assert refused["error"].startswith("PipelineDesyncError: pipeline transfer: bad header magic")
    _, stock = runs["injection_stock"]
    assert runs["unpickled_files"] == {"injection": False, "stock": True}
    assert stock["unpickled"]


def test_remote_queue_reader_woken_by_shutdown_stock_waits_out_its_timeout(runs):
    _, woken = runs["roundtrip"]
    assert woken["queue"]["error"].startswith("RuntimeError: message queue shut down while waiting")
    assert woken["queue"]["after_s"] < TIMEOUT_S
    _, stock = runs["queue_stock"]
    assert stock["error"] == "TimeoutError: "
    assert stock["after_s"] >= STOCK_WAIT_S


def test_a_failed_step_on_stage_0_aborts_stage_1_stock_shifts_the_steps(runs):
    """Through vLLM's own ``Worker.execute_model``: stage 0's second step raises (its worker loop drops a
    non-output rank's exception and runs the next step). With the spec stage 1 stops at once with the
    named abort and the reason; stock, stage 1 takes the third step's hidden states as the second's."""
    sender, receiver = runs["failed_step"]
    assert receiver["received"] == sender["sent"][:1]
    [(error, after_s)] = receiver["errors"]
    # Two named paths race to stage 1, both by design: the abort message on the transfer, and the failure
    # notice on the world's group (notice.py), which breaks the receive if it comes first.
    assert error in ("PipelineAbortError: pipeline transfer: the previous stage (rank 0) failed in step 2, "
                     "forward 0, and aborted: OutOfMemoryError: out of memory in a long prefill",
                     "PipelineAbortError: pipeline rank 1 stopped: rank 0 in step 2 failed: "
                     "OutOfMemoryError: out of memory in a long prefill")
    assert after_s < TIMEOUT_S
    assert [e[0].split(":")[0] for e in sender["errors"]] == ["OutOfMemoryError", "PipelineAbortError"]
    stock_sender, stock_receiver = runs["failed_step_stock"]
    assert stock_receiver["errors"] == []
    assert stock_receiver["received"] == [stock_sender["sent"][0], stock_sender["sent"][2]]


def test_after_a_failed_step_every_rank_s_sample_raises_it_named_stock_samples(runs):
    """``Worker.sample_tokens`` after the failed step: vLLM's executor carries only the output rank's message to
    the engine, so the message itself starts with the error's name and says which rank failed in which step
    (stock: the runner samples, and vLLM 0.30's answers a failed step with an empty output)."""
    for stage in runs["failed_step"]:
        assert stage["sample"].startswith("PipelineAbortError: PipelineAbortError: "), stage["sample"]
        assert "OutOfMemoryError: out of memory in a long prefill" in stage["sample"]
    assert [stage["sample"] for stage in runs["failed_step_stock"]] == ["sampled", "sampled"]


def test_nodes_with_different_partitions_refuse_to_start_stock_starts(runs):
    """VLLM_PP_LAYER_PARTITION=4,2 on one node and 3,3 on the other: layer 3 would run twice. The
    handshake in ``init_worker_distributed_environment`` refuses on both (stock has no such check: its
    start-up compares nothing between the stages)."""
    for stage, other in ((0, 1), (1, 0)):
        out = runs["partition"][stage]
        assert out["started"] is False
        assert out["error"] == (f"PipelineHandshakeError: pipeline start-up: stage {stage} and stage {other} "
                                f"(rank {other}) differ: stage 0 runs layers 0-3, stage 1 starts at layer 3; "
                                "set the same VLLM_PP_LAYER_PARTITION on every node")
    # the same start-up with one partition passes the handshake (the failed-step scenario ran after it)
    assert all(out["started"] for out in runs["failed_step"])


@pytest.mark.parametrize("scenario", sorted(SEQUENCED))
def test_a_stage_that_refuses_before_the_rendezvous_ends_the_late_one_with_its_error(runs, scenario):
    """One node's VLLM_PP_LAYER_PARTITION does not add up: that stage refuses before the rendezvous, and the
    other stage is started only after it has. Whichever of the two serves the rendezvous store, the late
    stage stops with the refusal's own error, naming the refusing rank (stock: it waits for its peer for
    torch's 30-minute rendezvous timeout)."""
    refuser = SEQUENCED[scenario]
    refused, late = runs[scenario][refuser], runs[scenario][1 - refuser]
    assert refused["json"] == {"started": False, "error": BAD_SUM}
    assert refused["exit"] == 0
    assert late["json"] is None and late["exit"] != 0
    assert (f"PipelineHandshakeError: pipeline start-up on rank {1 - refuser} ended within {RUN_S:g} s "
            f"(VLLM_PP_START_UP_TIMEOUT_S): rank {refuser} refused to start: {BAD_SUM}") in late["log"]
