# SPDX-License-Identifier: Apache-2.0
"""The readiness and liveness probe of a pipeline replica, and its drain: the command
an orchestrator runs on each pod (Kubernetes readiness and liveness probes)::

    python -m _patchspec_runtime.pipeline_parallel.probe --peer HOST:PORT [--port P]
    python -m _patchspec_runtime.pipeline_parallel.probe --peer HOST:PORT --drain

It asks this node's stage (``readiness.py``, ``VLLM_PP_PROBE_PORT``) and the peer
node's: exit 0 only when both answer ready, else exit 1 with one line naming the stage
that is not (gone, starting or draining), so the probe fails on both pods when either
stage is gone. ``--drain`` marks this node's stage draining first: both pods' probes
fail from then on and the orchestrator stops routing to the replica, while vLLM's own
drain (``vllm serve --shutdown-timeout``) finishes the requests in flight
(docs/serving.md). Not imported by the package: ``python -m`` runs it fresh.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from typing import Any

from . import envs
from .readiness import READY

__all__ = ["check", "main"]


def _ask(address: str, method: str, path: str, timeout_s: float) -> dict[str, Any]:
    """The answer of the stage at ``address`` (``host:port``); raises ``OSError``."""
    request = urllib.request.Request(f"http://{address}{path}", method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as e:  # 503: starting or draining, its state says
        with e:
            return json.loads(e.read())


def check(addresses: list[str], timeout_s: float) -> str | None:
    """None when the stage at each address answers ready, else what is wrong with the
    first that does not."""
    for address in addresses:
        try:
            state = _ask(address, "GET", "/ready", timeout_s)
        except (OSError, ValueError) as e:
            reason = getattr(e, "reason", e)
            return f"the pipeline stage at {address} is gone: {reason}"
        if state.get("state") != READY:
            return (
                f"pipeline stage {state.get('stage')} at {address} is "
                f"{state.get('state')}"
            )
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m _patchspec_runtime.pipeline_parallel.probe",
        description="Exit 0 when this node's pipeline stage and the peer's are ready.",
    )
    parser.add_argument("--peer", required=True, help="the other node's HOST:PORT")
    parser.add_argument("--port", type=int, help="this node's VLLM_PP_PROBE_PORT")
    parser.add_argument("--drain", action="store_true", help="drain this stage first")
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds per ask")
    args = parser.parse_args(argv)
    port = args.port if args.port is not None else envs.VLLM_PP_PROBE_PORT
    if port is None:
        print("probe: no port: pass --port or set VLLM_PP_PROBE_PORT", file=sys.stderr)
        return 2
    local = f"127.0.0.1:{port}"
    if args.drain:
        try:
            _ask(local, "POST", "/drain", args.timeout)
        except (OSError, ValueError) as e:
            print(f"probe: could not drain {local}: {e}", file=sys.stderr)
            return 1
    problem = check([local, args.peer], args.timeout)
    if problem is not None:
        print(f"probe: {problem}", file=sys.stderr)
        return 1
    print("probe: both stages ready")
    return 0


if __name__ == "__main__":
    sys.exit(main())
