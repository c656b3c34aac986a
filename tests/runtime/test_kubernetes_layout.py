"""The Kubernetes layout of docs/serving.md run as far as a machine without a cluster allows (issue 30).

The objects are read from the guide itself, and each pod of the LeaderWorkerSet is built as LWS builds it
(its hostname, subdomain, labels and the ``LWS_*`` variables prepended to every container's environment:
lws ``pkg/webhooks/pod_webhook.go``). Every command a pod runs then runs here in a real ``/bin/sh``, after
Kubernetes' own ``$(VAR)`` expansion where Kubernetes does it (a container's command and args, an exec
probe; never a lifecycle hook: kubernetes/kubernetes#129502), with ``vllm``, ``python``, ``curl`` and
``hostname`` standing in as recorders: so the addresses the probes ask, the drain's peer and the two
nodes' ``vllm serve`` flags are the ones the pods would really compute. What needs a cluster (scheduling,
DNS, the restart of the group) is not run.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "serving.md"
SECTION = "### Readiness, liveness and drain as a unit (Kubernetes)"
NAMESPACE, GROUP = "inference", 0
IPS = {0: "10.1.0.10", 1: "10.1.0.11"}  # what ``hostname -i`` prints in the leader and the worker
RECORDER = """#!/bin/sh
# stands in for a program a pod runs: print its host name for `hostname`, record every call's argv
if [ "$(basename "$0")" = hostname ]; then
    if [ "$1" = -i ]; then echo "$POD_IP"; else echo "$POD_HOSTNAME"; fi
fi
{ printf '%s' "$(basename "$0")"; for arg in "$@"; do printf '\037%s' "$arg"; done; echo; } >> "$CALLS"
"""


@dataclass
class Pod:
    """One pod of group 0 as the LWS controller and its webhook make it."""

    index: int
    hostname: str
    labels: dict[str, str]
    env: dict[str, str]
    spec: dict

    @property
    def address(self) -> str:
        """The name the LWS headless service gives the pod (hostname.subdomain.namespace)."""
        return f"{self.hostname}.{self.labels['leaderworkerset.sigs.k8s.io/name']}.{NAMESPACE}"

    @property
    def container(self) -> dict:
        (only,) = self.spec["containers"]
        return only


def _objects() -> dict[str, dict]:
    """The guide's Kubernetes objects by kind."""
    text = GUIDE.read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```yaml\n(.*?)```", text, re.S)
    return {obj["kind"]: obj for obj in yaml.safe_load_all(block)}


def _pods(lws: dict) -> list[Pod]:
    name, template = lws["metadata"]["name"], lws["spec"]["leaderWorkerTemplate"]
    leader = f"{name}-{GROUP}"
    pods = []
    for index in range(template["size"]):
        pod_template = template["leaderTemplate" if index == 0 else "workerTemplate"]
        labels = {**pod_template.get("metadata", {}).get("labels", {}),
                  "leaderworkerset.sigs.k8s.io/name": name, "leaderworkerset.sigs.k8s.io/group-index": str(GROUP),
                  "leaderworkerset.sigs.k8s.io/worker-index": str(index)}
        env = {"LWS_LEADER_ADDRESS": f"{leader}.{name}.{NAMESPACE}", "LWS_GROUP_SIZE": str(template["size"]),
               "LWS_WORKER_INDEX": str(index)}
        (container,) = pod_template["spec"]["containers"]
        env.update({e["name"]: e["value"] for e in container.get("env", [])})
        pods.append(Pod(index, leader if index == 0 else f"{leader}-{index}", labels, env, pod_template["spec"]))
    return pods


def _expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: ``$$`` is a ``$``, an unknown name stays as written."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), text)


def _run(pod: Pod, argv: list[str], expanded: bool, tmp_path: Path) -> list[list[str]]:
    """``argv`` run as the pod's runtime runs it; the recorded calls of the stand-ins."""
    bin_dir, calls = tmp_path / "bin", tmp_path / f"calls-{pod.index}-{len(list(tmp_path.iterdir()))}"
    if not bin_dir.exists():
        bin_dir.mkdir()
        for program in ("vllm", "python", "curl", "hostname"):
            (bin_dir / program).write_text(RECORDER)
            (bin_dir / program).chmod(0o755)
    argv = [_expand(a, pod.env) for a in argv] if expanded else argv
    program = argv[0] if argv[0].startswith("/") or argv[0] in ("sh", "bash") else str(bin_dir / argv[0])
    env = {**pod.env, "PATH": f"{bin_dir}:/usr/bin:/bin", "CALLS": str(calls), "POD_HOSTNAME": pod.hostname,
           "POD_IP": IPS[pod.index]}
    subprocess.run([program, *argv[1:]], env=env, check=True, timeout=30)
    return [line.split("\037") for line in calls.read_text().splitlines()] if calls.exists() else []


def _flags(argv: list[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for i, arg in enumerate(argv):
        if arg.startswith("--"):
            following = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else None
            out[arg] = following
    return out


@pytest.fixture(scope="module")
def layout() -> tuple[dict[str, dict], list[Pod]]:
    objects = _objects()
    return objects, _pods(objects["LeaderWorkerSet"])


def test_the_service_routes_to_the_leader_only(layout):
    objects, (leader, worker) = layout
    selector = objects["Service"]["spec"]["selector"]
    assert selector.items() <= leader.labels.items(), f"the Service selects no pod: {selector} vs {leader.labels}"
    assert not selector.items() <= worker.labels.items()


def test_the_group_restarts_as_one(layout):
    objects, _ = layout
    assert objects["LeaderWorkerSet"]["spec"]["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"


def test_both_nodes_serve_one_model_with_their_own_rank_and_the_leader_s_store(layout, tmp_path):
    _, pods = layout
    served = {}
    for pod in pods:
        (call,) = [c for c in _run(pod, pod.container["command"], True, tmp_path) if c[0] == "vllm"]
        served[pod.index] = _flags(call)
    leader, worker = served[0], served[1]
    assert (leader["--node-rank"], worker["--node-rank"]) == ("0", "1")
    assert leader["--master-addr"] == IPS[0] and worker["--master-addr"] == pods[0].address
    assert leader["--master-port"] == worker["--master-port"]
    assert "--headless" in worker and "--headless" not in leader
    node_own = {"--node-rank", "--master-addr", "--headless", "--shutdown-timeout"}
    assert {k: v for k, v in leader.items() if k not in node_own} == \
        {k: v for k, v in worker.items() if k not in node_own}, "the two nodes must serve with the same settings"


def test_each_pod_s_readiness_asks_its_own_stage_and_the_other_pod_s(layout, tmp_path):
    _, pods = layout
    for pod, other in ((pods[0], pods[1]), (pods[1], pods[0])):
        probe = pod.container["readinessProbe"]["exec"]["command"]
        calls = [c for c in _run(pod, probe, True, tmp_path) if c[0] == "python"]
        assert calls, f"pod {pod.hostname}'s readiness runs no probe"
        flags = _flags(calls[0])
        assert calls[0][1:3] == ["-m", "_patchspec_runtime.pipeline_parallel.probe"]
        assert flags["--peer"] == f"{other.address}:{other.env['VLLM_PP_PROBE_PORT']}", pod.hostname
        assert pod.env["VLLM_PP_PROBE_PORT"] == other.env["VLLM_PP_PROBE_PORT"]


def test_liveness_asks_the_stage_s_own_endpoint(layout):
    _, pods = layout
    for pod in pods:
        live = pod.container["livenessProbe"]["httpGet"]
        assert (live["path"], str(live["port"])) == ("/live", pod.env["VLLM_PP_PROBE_PORT"])


def test_the_leader_drains_the_pair_before_vllm_gets_its_sigterm(layout, tmp_path):
    _, (leader, worker) = layout
    hook = leader.container["lifecycle"]["preStop"]["exec"]["command"]
    (call,) = [c for c in _run(leader, hook, False, tmp_path) if c[0] == "python"]
    flags = _flags(call)
    assert "--drain" in flags and flags["--peer"] == f"{worker.address}:{worker.env['VLLM_PP_PROBE_PORT']}"
    (serve,) = [c for c in _run(leader, leader.container["command"], True, tmp_path) if c[0] == "vllm"]
    assert leader.spec["terminationGracePeriodSeconds"] > int(_flags(serve)["--shutdown-timeout"] or 0)


def test_the_recorder_sees_what_a_wrong_address_would_be(tmp_path):
    """The check can fail: the guide's first layout asked ``$LWS_LEADER_ADDRESS-1.$LWS_LEADER_ADDRESS``."""
    pod = Pod(0, "glm-pp2-0", {"leaderworkerset.sigs.k8s.io/name": "glm-pp2"},
              {"LWS_LEADER_ADDRESS": f"glm-pp2-0.glm-pp2.{NAMESPACE}"}, {})
    (call,) = _run(pod, ["sh", "-c", "python --peer $LWS_LEADER_ADDRESS-1.$LWS_LEADER_ADDRESS:8411"], True, tmp_path)
    assert _flags(call)["--peer"] != f"glm-pp2-0-1.glm-pp2.{NAMESPACE}:8411"
    (call,) = _run(pod, shlex.split("python --peer $(LWS_LEADER_ADDRESS)-1"), False, tmp_path)
    assert _flags(call)["--peer"] == "$(LWS_LEADER_ADDRESS)-1"  # a lifecycle hook's argv is never expanded
    assert os.access(tmp_path / "bin" / "python", os.X_OK)
