"""Two "nodes" on one machine: network namespaces joined by a veth pair limited to 1 Gbit/s, each node's
processes in their own mount namespace with a private /dev/shm (so vLLM cannot reach the other node
through shared memory, as it could not across machines). Used by the two-node tier and bench/two_nodes.py.

Every namespace, link and process made here carries the prefix ``psi14n``; ``remove`` ends the
processes inside and deletes the namespaces (and with them the veth pair), and ``remove_stale`` does the
same for whatever an interrupted earlier run left.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
PREFIX = "psi14n"
RATE = "1gbit"
SUBNET = "10.214.0"
MASTER_PORT = 29555
COMMAND_TIMEOUT_S = 30
DEPLOYMENT_TIMEOUT_S = 600  # start-up, the comparison phase, the kill and the engine's failure
EVENT = "PATCHSPEC "


@dataclass(frozen=True)
class Node:
    rank: int
    netns: str
    ifname: str
    ip: str
    core: int


NODES = (Node(0, f"{PREFIX}0", f"{PREFIX}0v", f"{SUBNET}.1", 0), Node(1, f"{PREFIX}1", f"{PREFIX}1v", f"{SUBNET}.2", 1))


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=COMMAND_TIMEOUT_S)


def missing_tools() -> list[str]:
    """What this machine lacks to build the nodes (the tier skips with it)."""
    missing = [tool for tool in ("ip", "tc", "unshare") if subprocess.run(["which", tool], capture_output=True).returncode]
    if not missing and os.geteuid() != 0:
        missing.append("root (network namespaces)")
    return missing


def pids(netns: str) -> list[int]:
    done = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    return [int(p) for p in done.stdout.split()] if done.returncode == 0 else []


def kill_node(netns: str) -> None:
    """SIGKILL every process in the node's network namespace (a node that dies at once)."""
    for pid in pids(netns):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def namespaces() -> list[str]:
    done = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    return [line.split()[0] for line in done.stdout.splitlines() if line.startswith(PREFIX)]


def remove_stale() -> None:
    """Processes and namespaces of this prefix, from any earlier run."""
    for netns in namespaces():
        kill_node(netns)
        subprocess.run(["ip", "netns", "del", netns], capture_output=True, timeout=COMMAND_TIMEOUT_S)


def remove() -> None:
    remove_stale()


def create() -> None:
    """The two namespaces, the veth pair between them with an address each, and the rate limit."""
    remove_stale()
    a, b = NODES
    try:
        for node in NODES:
            _ip("netns", "add", node.netns)
        _ip("link", "add", a.ifname, "type", "veth", "peer", "name", b.ifname)
        for node in NODES:
            _ip("link", "set", node.ifname, "netns", node.netns)
            _ip("-n", node.netns, "addr", "add", f"{node.ip}/24", "dev", node.ifname)
            _ip("-n", node.netns, "link", "set", node.ifname, "up")
            _ip("-n", node.netns, "link", "set", "lo", "up")
            subprocess.run(["tc", "-n", node.netns, "qdisc", "add", "dev", node.ifname, "root", "tbf", "rate", RATE,
                            "burst", "256kb", "latency", "50ms"], check=True, capture_output=True,
                           timeout=COMMAND_TIMEOUT_S)
            # as docs/serving.md asks of a deployment: no delayed ACKs on the route to the other node
            _ip("-n", node.netns, "route", "replace", f"{SUBNET}.0/24", "dev", node.ifname, "proto", "kernel",
                "scope", "link", "src", node.ip, "quickack", "1")
    except BaseException:
        remove()
        raise


def link_rate(node: Node) -> str:
    """The node's qdisc and route lines as ``tc`` and ``ip`` show them (the tier checks the limit and the
    serving guide's route are in place)."""
    return "\n".join(subprocess.run(command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S).stdout.strip()
                     for command in (["tc", "-n", node.netns, "qdisc", "show", "dev", node.ifname],
                                     ["ip", "-n", node.netns, "route", "show", "dev", node.ifname]))


def node_env(node: Node, tmp: Path, extra: dict | None = None) -> dict:
    """The environment of a node's processes: the serving guide's settings for this node's veth side."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "PYTHONPATH", "GLOO_"))}
    env.update(GLOO_SOCKET_IFNAME=node.ifname, VLLM_HOST_IP=node.ip, VLLM_CPU_OMP_THREADS_BIND=str(node.core),
               VLLM_CPU_KVCACHE_SPACE="1", HF_HUB_OFFLINE="1", TORCHDYNAMO_DISABLE="1", PYTHONDONTWRITEBYTECODE="1",
               TMPDIR=str(tmp))
    env.update(extra or {})
    return env


def start_node(python: Path, node: Node, request: dict, log: Path, extra_env: dict | None = None) -> subprocess.Popen:
    """``node_main.py`` inside the node: its network namespace, a fresh mount namespace, a private /dev/shm.
    Node 0's stdout is a pipe (vLLM's log and the events); everything else goes to ``log``."""
    req = log.with_suffix(".request.json")
    tmp = log.parent / f"tmp{node.rank}"  # the node's own TMPDIR (vLLM's IPC socket paths)
    tmp.mkdir(exist_ok=True)
    req.write_text(json.dumps({**request, "node_rank": node.rank, "master_addr": NODES[0].ip,
                               "master_port": MASTER_PORT}))
    wrapper = 'mount -t tmpfs -o size=2g tmpfs /dev/shm && exec "$@"'
    cmd = ["ip", "netns", "exec", node.netns, "unshare", "--mount", "--propagation", "private", "sh", "-c", wrapper,
           "sh", str(python), str(HERE / "node_main.py"), str(req)]
    with open(log, "w") as out:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE if node.rank == 0 else out, stderr=out,
                                env=node_env(node, tmp, extra_env), text=True, start_new_session=True)


def rx_bytes(node: Node) -> int:
    """Bytes the node's veth side has received."""
    done = subprocess.run(["ip", "-n", node.netns, "-j", "-s", "link", "show", "dev", node.ifname],
                          capture_output=True, text=True, check=True, timeout=COMMAND_TIMEOUT_S)
    return json.loads(done.stdout)[0]["stats64"]["rx"]["bytes"]


def run_deployment(python: Path, request: dict, logs: Path, extra_env: dict | None = None,
                   kill_after_steps: int = 10, reads: Path | None = None,
                   node_envs: dict[int, dict] | None = None) -> dict:
    """Both nodes, from fresh namespaces to removed ones: node 0's result, then (``request["kill_phase"]``)
    node 1 killed after ``kill_after_steps`` steps of a long generation and what node 0 did then.

    Returns node 0's events (``result``, ``failed`` or ``finished``), ``killed_at`` (monotonic), node 0's
    exit code, the processes left in each namespace once node 0 exited, the link's qdisc lines and the
    bytes node 1 received over it. Processes are killed and namespaces removed on every path. With
    ``reads``, node N notes the checkpoint tensors it reads in ``reads/N`` (tests/e2e/reads). ``node_envs``:
    variables for one node only (``{1: {...}}``), over ``extra_env``.
    """
    logs.mkdir(parents=True, exist_ok=True)
    out: dict = {"events": {}, "killed_at": None, "node0_exit": None}
    create()
    try:
        out["qdisc"] = [link_rate(node) for node in NODES]
        envs = [{**(extra_env or {}), **({"PATCHSPEC_E2E_READS": str(reads / str(n.rank))} if reads else {}),
                 **(node_envs or {}).get(n.rank, {})} for n in NODES]
        if not request.get("single"):
            start_node(python, NODES[1], request, logs / "node1.log", envs[1])
        node0 = start_node(python, NODES[0], request, logs / "node0.out", envs[0])
        steps, deadline = 0, time.monotonic() + DEPLOYMENT_TIMEOUT_S
        with open(logs / "node0.log", "w") as log:
            while time.monotonic() < deadline:
                if not select.select([node0.stdout], [], [], 1.0)[0]:
                    continue
                line = node0.stdout.readline()
                if not line:
                    break
                log.write(line)
                if not line.startswith(EVENT):
                    continue
                event = json.loads(line[len(EVENT):])
                if event["event"] != "step":
                    out["events"][event["event"]] = event
                    continue
                steps += 1
                if steps == kill_after_steps:
                    kill_node(NODES[1].netns)
                    out["killed_at"] = time.monotonic()
                    # read after the kill: everything node 1 logged receiving has crossed its veth by then
                    out["node1_rx_bytes"] = rx_bytes(NODES[1])
        try:
            out["node0_exit"] = node0.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            out["node0_exit"] = None
        out["exited_at"] = time.monotonic()
        out["left"] = {node.netns: pids(node.netns) for node in NODES}
        out["node1_rx_bytes"] = out.get("node1_rx_bytes") or rx_bytes(NODES[1])
        return out
    finally:
        remove()
