"""Two "nodes" on one machine: network namespaces joined by a veth pair limited to 1 Gbit/s, each node's
processes in their own mount namespace with a private /dev/shm (so vLLM cannot reach the other node
through shared memory, as it could not across machines). Used by the two-node tier and bench/two_nodes.py.

Every namespace, link and process made here carries the prefix ``PATCHSPEC_NODES_PREFIX`` (``psi14n`` by
default: two people running the tier at once give each their own, since ``remove_stale`` ends whatever carries
it); ``remove`` ends the processes inside and deletes the namespaces (and with them the veth pair), and
``remove_stale`` does the same for whatever an interrupted earlier run left.
"""
from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

HERE = Path(__file__).resolve().parent
PREFIX_PATTERN = re.compile(r"[a-z][a-z0-9]{0,12}")  # the veth name (prefix + "0v") must fit Linux's 15 bytes


def prefix(env: Mapping[str, str] = os.environ) -> str:
    """The namespace prefix of this run (``PATCHSPEC_NODES_PREFIX``), refused unless a veth name can carry it."""
    value = env.get("PATCHSPEC_NODES_PREFIX", "psi14n")
    if not PREFIX_PATTERN.fullmatch(value):
        raise ValueError(f"PATCHSPEC_NODES_PREFIX={value!r}: want 1-13 lowercase letters and digits, a letter first")
    return value


PREFIX = prefix()
RATE = "1gbit"
SUBNET = "10.214.0"
MASTER_PORT = 29555
COMMAND_TIMEOUT_S = 30
DEPLOYMENT_TIMEOUT_S = 600  # start-up, the comparison phase, the kill and the engine's failure
EXIT_WAIT_S = 120  # after node 0's driver exits: how long the tier waits for every other process to end
EVENT = "PATCHSPEC "


@dataclass(frozen=True)
class Node:
    rank: int
    netns: str
    ifname: str
    ip: str
    core: int


def nodes(of: str) -> tuple[Node, Node]:
    return (Node(0, f"{of}0", f"{of}0v", f"{SUBNET}.1", 0), Node(1, f"{of}1", f"{of}1v", f"{SUBNET}.2", 1))


NODES = nodes(PREFIX)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=COMMAND_TIMEOUT_S)


def missing_tools() -> list[str]:
    """What this machine lacks to build the nodes (the tier skips with it)."""
    missing = [tool for tool in ("ip", "tc", "unshare")
               if subprocess.run(["which", tool], capture_output=True).returncode]
    if not missing and os.geteuid() != 0:
        missing.append("root (network namespaces)")
    return missing


def pids(netns: str) -> list[int]:
    done = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    return [int(p) for p in done.stdout.split()] if done.returncode == 0 else []


def kill_node(netns: str) -> None:
    """SIGKILL every process in the node's network namespace (a node that dies at once)."""
    for pid in pids(netns):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def ours(listing: str, of: str = PREFIX) -> list[str]:
    """The namespaces of ``ip netns list`` output that are this run's: the prefix and a node number exactly
    (``psi14n`` never claims ``psi14nb0``, another run's)."""
    names = (line.split()[0] for line in listing.splitlines() if line.strip())
    return [name for name in names if name in {node.netns for node in nodes(of)}]


def namespaces() -> list[str]:
    done = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    return ours(done.stdout)


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


def node_env(node: Node, tmp: Path, extra: dict | None = None, tp: int = 1) -> dict:
    """The environment of a node's processes: the serving guide's settings for this node's veth side; each of
    the node's ``tp`` workers bound to the node's core."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "PYTHONPATH", "GLOO_"))}
    env.update(GLOO_SOCKET_IFNAME=node.ifname, VLLM_HOST_IP=node.ip,
               VLLM_CPU_OMP_THREADS_BIND="|".join([str(node.core)] * tp),
               VLLM_CPU_KVCACHE_SPACE="1", HF_HUB_OFFLINE="1", TORCHDYNAMO_DISABLE="1", PYTHONDONTWRITEBYTECODE="1",
               TMPDIR=str(tmp))
    env.update(extra or {})
    return env


def start_node(python: Path, node: Node, request: dict, log: Path, extra_env: dict | None = None,
               binds: Sequence[tuple[Path, Path]] = ()) -> subprocess.Popen:
    """``node_main.py`` inside the node: its network namespace, a fresh mount namespace, a private /dev/shm,
    and each ``(file, over)`` of ``binds`` mounted over ``over`` (a file as this node alone sees it, as two
    machines' site-packages may differ). Node 0's stdout is a pipe (vLLM's log and the events); everything
    else goes to ``log``."""
    req = log.with_suffix(".request.json")
    tmp = log.parent / f"tmp{node.rank}"  # the node's own TMPDIR (vLLM's IPC socket paths)
    tmp.mkdir(exist_ok=True)
    req.write_text(json.dumps({**request, "node_rank": node.rank, "master_addr": NODES[0].ip,
                               "master_port": MASTER_PORT}))
    mounts = "".join(f"mount --bind {shlex.quote(str(file))} {shlex.quote(str(over))} && " for file, over in binds)
    wrapper = f'mount -t tmpfs -o size=2g tmpfs /dev/shm && {mounts}exec "$@"'
    cmd = ["ip", "netns", "exec", node.netns, "unshare", "--mount", "--propagation", "private", "sh", "-c", wrapper,
           "sh", str(python), str(HERE / "node_main.py"), str(req)]
    with open(log, "w") as out:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE if node.rank == 0 else out, stderr=out,
                                env=node_env(node, tmp, extra_env, request.get("tp", 1)), text=True,
                                start_new_session=True)


def rx_bytes(node: Node) -> int:
    """Bytes the node's veth side has received."""
    done = subprocess.run(["ip", "-n", node.netns, "-j", "-s", "link", "show", "dev", node.ifname],
                          capture_output=True, text=True, check=True, timeout=COMMAND_TIMEOUT_S)
    return json.loads(done.stdout)[0]["stats64"]["rx"]["bytes"]


WORKER_TITLE = "VLLM::Worker_PP{stage}_TP{rank}"  # the process title vLLM gives a worker once it is built
KILLS = ("node1", "node0", "worker", "drain")  # what happens at the kill step ("drain": nothing is killed)
PROBE_PORT = 8411  # VLLM_PP_PROBE_PORT of both nodes when the request asks for probes
PROBE = "_patchspec_runtime.pipeline_parallel.probe"
PROBE_ASK_S = 30
EXIT_POLL_S = 0.2


def worker_pid(node: Node, tp_rank: int) -> int:
    """The pid of the node's worker of tensor-parallel rank ``tp_rank`` (stage = node), by its process title."""
    title = WORKER_TITLE.format(stage=node.rank, rank=tp_rank).encode()
    for pid in pids(node.netns):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].strip() == title:
                return pid
    raise LookupError(f"no {title.decode()} in {node.netns}")


def kill(what: str) -> None:
    """``node1``/``node0``: every process of that node; ``worker``: node 1's worker of tensor-parallel rank 1
    (not the output rank), SIGKILL."""
    if what == "worker":
        os.kill(worker_pid(NODES[1], 1), signal.SIGKILL)
    else:
        kill_node(NODES[int(what[-1])].netns)


@dataclass(frozen=True)
class Case:
    """A failure of the two-node tier at tensor parallelism 2 per node (ranks 0-1 on node 0, stage 0; ranks 2-3
    on node 1, stage 1; rank 2 is vLLM's output rank) and the error both nodes must name."""

    kill_what: str = "node1"  # KILLS; "node1" with a fault set below kills nothing (no kill phase)
    fault: dict | None = None  # node 0's fault hook variables (fault/sitecustomize.py)
    env: dict | None = None  # both nodes' variables
    named: tuple[str, ...] = ()  # in each node's log (node 0's when it was killed: none)
    probe: bool = False

    @property
    def kill_phase(self) -> bool:
        return self.fault is None


FAIL_AT = "3"  # the stage-0 step a fault hook fails
CASES = {
    # rank 1 of stage 0 raises in its forward: rank 0 waits in the all-reduce rank 1 never joins
    "rank1_raises": Case(fault={"PATCHSPEC_FAIL_FORWARD": FAIL_AT, "PATCHSPEC_FAIL_RANK": "1"},
                         named=("rank 1 in step 3 failed: RuntimeError: injected failure",) * 2),
    # node 1's worker of tensor-parallel rank 1 (rank 3) killed: rank 1 watches it
    "worker_killed": Case(kill_what="worker", named=("pipeline stage 1 is gone",) * 2),
    # every process of node 0 killed: node 1 alone must notice
    "node0_killed": Case(kill_what="node0", named=("", "PipelinePeerError"), probe=True),
    # rank 1 of stage 0 never sends: rank 3's receive times out while rank 2 waits in its all-reduce
    "recv_timeout": Case(fault={"PATCHSPEC_FAIL_FORWARD": FAIL_AT, "PATCHSPEC_FAIL_RANK": "1",
                                "PATCHSPEC_FAIL_KIND": "silent"}, env={"VLLM_PP_TRANSFER_TIMEOUT_S": "10"},
                         named=("rank 3 in step 3 failed: PipelinePeerError",
                                "PipelinePeerError: pipeline transfer: receive from rank 1 (stage 0) failed or "
                                "timed out")),
}


def fault_at(out: dict) -> float | None:
    """When a run's fault happened (monotonic): the kill, or the fault hook's event."""
    return out["killed_at"] if out["killed_at"] is not None else out["events"].get("fault", {}).get("at")


def probe(python: Path, node: Node, drain: bool = False) -> tuple[int, str]:
    """The serving guide's probe command run on ``node`` (in its namespace, as a pod's exec probe runs):
    its exit code and its line."""
    peer = NODES[1 - node.rank]
    # each ask may take PROBE_ASK_S: a busy machine answers late, which is not what the tier checks
    done = subprocess.run(["ip", "netns", "exec", node.netns, str(python), "-m", PROBE, "--port", str(PROBE_PORT),
                           "--peer", f"{peer.ip}:{PROBE_PORT}", "--timeout", str(PROBE_ASK_S),
                           *(["--drain"] if drain else [])],
                          capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S * 4,
                          env={k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "PYTHONPATH"))})
    return done.returncode, (done.stdout + done.stderr).strip().splitlines()[-1]


def run_deployment(python: Path, request: dict, logs: Path, extra_env: dict | None = None,
                   kill_after_steps: int = 10, reads: Path | None = None,
                   node_envs: dict[int, dict] | None = None, kill_what: str = "node1",
                   node_binds: dict[int, list[tuple[Path, Path]]] | None = None) -> dict:
    """Both nodes, from fresh namespaces to removed ones: node 0's result, then (``request["kill_phase"]``)
    ``kill_what`` (``KILLS``) killed after ``kill_after_steps`` steps of a long generation and what the
    nodes did then.

    Returns node 0's events (``result``, ``failed``, ``finished``, ``fault``: a fault hook's), ``killed_at``
    (monotonic), node 0's exit code, ``exited``: when each node's last process was gone (monotonic, None when
    it outlived the deadline), the processes left in each namespace then, the link's qdisc lines and the bytes
    node 1 received over it. Processes are killed and namespaces removed on every path. With ``reads``,
    node N notes the checkpoint tensors it reads in ``reads/N`` (tests/e2e/reads). ``node_envs``: variables
    for one node only (``{1: {...}}``), over ``extra_env``; ``node_binds``: files one node sees in place of
    the root's (``start_node``).
    """
    if kill_what not in KILLS:
        raise ValueError(f"kill_what={kill_what!r}: one of {KILLS}")
    logs.mkdir(parents=True, exist_ok=True)
    out: dict = {"events": {}, "killed_at": None, "node0_exit": None, "exited": {0: None, 1: None}}
    reader = None
    create()
    try:
        out["qdisc"] = [link_rate(node) for node in NODES]
        envs = [{**(extra_env or {}), **({"PATCHSPEC_E2E_READS": str(reads / str(n.rank))} if reads else {}),
                 **({"VLLM_PP_PROBE_PORT": str(PROBE_PORT)} if request.get("probe") else {}),
                 **(node_envs or {}).get(n.rank, {})} for n in NODES]
        if not request.get("single"):
            start_node(python, NODES[1], request, logs / "node1.log", envs[1], (node_binds or {}).get(1, ()))
        node0 = start_node(python, NODES[0], request, logs / "node0.out", envs[0], (node_binds or {}).get(0, ()))
        steps, deadline = 0, time.monotonic() + DEPLOYMENT_TIMEOUT_S
        events: queue.Queue[dict | None] = queue.Queue()
        reader = threading.Thread(target=_pump, args=(node0.stdout, logs / "node0.log", events), daemon=True)
        reader.start()
        while (wait := deadline - time.monotonic()) > 0:
            try:
                event = events.get(timeout=wait)
            except queue.Empty:
                break
            if event is None:  # node 0's stdout ended
                break
            if event["event"] != "step":
                out["events"][event["event"]] = event
                continue
            steps += 1
            if steps != kill_after_steps:
                continue
            if request.get("probe"):  # while both stages serve
                out["probes_before"] = [probe(python, node) for node in NODES]
            if kill_what == "drain":
                out["drain"] = probe(python, NODES[0], drain=True)
            else:
                kill(kill_what)
            out["killed_at"] = time.monotonic()
            # read after the kill: everything node 1 logged receiving has crossed its veth by then
            out["node1_rx_bytes"] = rx_bytes(NODES[1])
            if request.get("probe"):  # a stage gone (or draining)
                out["probes_after"] = [probe(python, node) for node in NODES]
        try:
            out["node0_exit"] = node0.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            out["node0_exit"] = None
        deadline = min(deadline, time.monotonic() + EXIT_WAIT_S)
        while None in out["exited"].values() and time.monotonic() < deadline:
            for node in NODES:
                if out["exited"][node.rank] is None and not pids(node.netns):
                    out["exited"][node.rank] = time.monotonic()
            time.sleep(EXIT_POLL_S)  # a poll for the processes' end, bounded by the deadline
        out["exited_at"] = out["exited"][0]
        out["left"] = {node.netns: pids(node.netns) for node in NODES}
        out["node1_rx_bytes"] = out.get("node1_rx_bytes") or rx_bytes(NODES[1])
        return out
    finally:
        remove()
        if reader is not None:  # node 0's processes are gone: its stdout ends, and with it node0.log
            reader.join(timeout=COMMAND_TIMEOUT_S)


def _pump(stream: IO[str], log: Path, events: queue.Queue[dict | None]) -> None:
    """Copy node 0's stdout (vLLM's log and the events) to ``log`` and put each event on ``events``, then None
    at its end. A thread, so the pipe never fills while the tier probes or kills: a node whose stdout is full
    blocks in its logging, the probe endpoint's drain with it (``POST /drain`` timed out under load)."""
    try:
        with open(log, "w") as out:
            for line in stream:
                out.write(line)
                out.flush()
                # a worker's lines come prefixed by vLLM ("(Worker_PP0_TP1 pid=N) PATCHSPEC {...}")
                at = line.find(EVENT + "{")
                if at >= 0:
                    with contextlib.suppress(ValueError):  # an event another process's output cut: in the log only
                        events.put(json.loads(line[at + len(EVENT):]))
    finally:
        events.put(None)


def run_case(python: Path, request: dict, logs: Path, case: Case, env: dict) -> dict:
    """``run_deployment`` of one ``CASES`` entry at tensor parallelism 2 per node; ``env``: both nodes'
    variables (with the fault hook's ``PYTHONPATH``), under the case's own."""
    request = {**request, "tp": 2, "kill_phase": case.kill_phase, "probe": case.probe}
    return run_deployment(python, request, logs, {**env, **(case.env or {})}, kill_after_steps=4,
                          node_envs={0: case.fault} if case.fault else None, kill_what=case.kill_what)
